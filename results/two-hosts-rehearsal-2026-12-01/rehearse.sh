mkdir -p /tmp/rh && cd /tmp/rh
shoal link up --name rh --rtt 40ms --rate 100mbit

# "B": a receiver with the control channel (and the tar-tcp baseline), in the background
shoal link exec --name rh rcv -- shoal recv --listen 198.18.0.2:7474 --dest /tmp/rh/incoming \
    --identity /tmp/rh/identity --control --allow-baselines > recv.log 2>&1 &
sleep 2; cat recv.log            # listening on …, pin sha256:…, token file /tmp/rh/identity/token
PIN=$(grep -o 'sha256:[0-9a-f]*' recv.log)

# "A": the path, measured through B's port alone (see "The path")
shoal link exec --name rh snd -- shoal probe 198.18.0.2:7474 --pin $PIN --token-file /tmp/rh/identity/token

# "A": a sweep against B
cat > two-hosts.toml <<END
[sweep]
runs = 2
timeout = "2m"
reference = { mode = "tcp-bundle" }

[link]
receiver = "198.18.0.2:7474"
pin = "$PIN"
token_file = "/tmp/rh/identity/token"

[payload.small]
files = 2000
size = "4KiB"
dirs = 16
seed = 1

[axes]
payload = ["small"]
kind = ["shoal", "tar-tcp"]
mode = ["tcp-bundle", "quic-bundle"]
cc = ["cubic"]
"recv.fsync" = [true]          # a receiver axis: B applies it to each run (fsync_seconds > 0)
END
shoal link exec --name rh snd -- shoal sweep --matrix two-hosts.toml --out /tmp/rh/out

kill %1                          # stop "B"
shoal link down --name rh
