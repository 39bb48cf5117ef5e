#!/usr/bin/env bash
# cputl.sh BIN MODE: one loopback run (tmpfs tree /var/tmp/s14/src); prints every 20 ms the CPU
# each end used in that interval (ms of CPU per 20 ms, both ends), from /proc/PID/stat.
B=$1; M=$2; W=/var/tmp/s14/tl; rm -rf $W; mkdir -p $W
$B recv --once --listen 127.0.0.1:0 --flat --dest $W/dst --identity /var/tmp/s14/id > $W/recv.log 2>&1 &
rp=$!
for _ in $(seq 100); do a=$(sed -n 's/^listening on \(.*\)$/\1/p' $W/recv.log); [ -n "$a" ] && break; sleep 0.05; done
python3 - $rp $B $a $M <<'PY'
import os, subprocess, sys, time
rp, b, a, m = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
tck = os.sysconf('SC_CLK_TCK')
def cpu(p):
    try:
        f = open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()
        return (int(f[11]) + int(f[12])) / tck
    except Exception:
        return None
t0 = time.time()
s = subprocess.Popen([b, 'send', '--to', a, '--src', '/var/tmp/s14/src', '--mode', m, '--identity', '/var/tmp/s14/id', '--json'], stdout=subprocess.DEVNULL)
last = (0.0, cpu(rp) or 0.0)
rows = []
while s.poll() is None:
    time.sleep(0.02)
    c = (cpu(s.pid), cpu(rp))
    if c[0] is None: break
    if c[1] is None: c = (c[0], last[1])  # the receiver (--once) has exited
    rows.append((time.time() - t0, (c[0] - last[0]) * 1000, (c[1] - last[1]) * 1000))
    last = c
s.wait()
print(f"wall {time.time()-t0:.3f}")
for t, x, y in rows:
    print(f"{t:6.3f} send {x:5.0f} recv {y:5.0f} " + "#" * int((x + y) / 10))
PY
wait $rp
