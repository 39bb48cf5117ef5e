#!/usr/bin/env python3
"""What holds a TCP connection's first flight, by hand on an emulated link (docs/resume.md,
"Buffers"). Needs root and a link: `shoal link up --name L --rtt 100ms --rate 500mbit`.

    scripts/tcp-first-flight.py L RMEM_DEFAULT [SEGMENTS]

sets initcwnd/initrwnd SEGMENTS (default 1000) on both namespaces' routes and the receiver
namespace's tcp_rmem default to RMEM_DEFAULT, runs a receiver that speaks first (as Shoal's
does) and a sender of 8 MB, and prints the sender's TCP_INFO every 20 ms: bytes in flight,
cwnd, snd_wnd (the receiver's advertised window) and its SO_SNDBUF. It restores the routes
and tcp_rmem afterwards. Linux ≥ 6.2 (tcpi_snd_wnd)."""

import socket
import struct
import subprocess
import sys
import threading
import time

PORT = 5001


def ip_ns(ns, *args):
    return subprocess.run(["ip", "netns", "exec", ns, *args], check=True,
                          capture_output=True, text=True).stdout


def server(addr):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, PORT))
    s.listen(1)
    c, _ = s.accept()
    c.sendall(b"k")  # the receiver speaks first: its segment carries the scaled window
    while c.recv(1 << 20):
        pass


def client(addr):
    c = socket.socket()
    t0 = time.time()
    c.connect((addr, PORT))
    c.recv(1)

    def info():
        i = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 240)
        u32 = lambda o: struct.unpack_from("I", i, o)[0]
        u64 = lambda o: struct.unpack_from("Q", i, o)[0]
        return dict(cwnd=u32(80), acked=u64(120), sent=u64(200), snd_wnd=u32(228))

    print("sndbuf", c.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF))
    stop = []

    def sample():
        while not stop:
            d = info()
            print(f"{time.time() - t0:.3f} in_flight={d['sent'] - d['acked']} {d}")
            time.sleep(0.02)

    th = threading.Thread(target=sample)
    th.start()
    c.sendall(b"x" * 8_000_000)
    time.sleep(0.05)
    stop.append(1)
    th.join()


def main():
    if sys.argv[1] in ("server", "client"):
        (server if sys.argv[1] == "server" else client)(sys.argv[2])
        return
    link, rmem = sys.argv[1], sys.argv[2]
    segs = sys.argv[3] if len(sys.argv) > 3 else "1000"
    snd, rcv = f"{link}-snd", f"{link}-rcv"
    rcv_addr = ip_ns(rcv, "ip", "-4", "-o", "addr", "show", "scope", "global").split()[3].split("/")[0]
    routes = {ns: ip_ns(ns, "ip", "-4", "route", "show").splitlines()[0] for ns in (snd, rcv)}
    old_rmem = ip_ns(rcv, "cat", "/proc/sys/net/ipv4/tcp_rmem").split()
    try:
        for ns, metric in ((snd, "initcwnd"), (rcv, "initrwnd")):
            ip_ns(ns, "ip", "route", "replace", *routes[ns].split(), metric, segs)
        ip_ns(rcv, "sysctl", "-qw", f"net.ipv4.tcp_rmem={old_rmem[0]} {rmem} {old_rmem[2]}")
        srv = subprocess.Popen(["ip", "netns", "exec", rcv, sys.executable, __file__, "server", rcv_addr])
        time.sleep(0.5)
        out = ip_ns(snd, sys.executable, __file__, "client", rcv_addr)
        print("\n".join(out.splitlines()[:14]))
        srv.wait(timeout=30)
    finally:
        for ns in (snd, rcv):
            ip_ns(ns, "ip", "route", "replace", *routes[ns].split())
        ip_ns(rcv, "sysctl", "-qw", "net.ipv4.tcp_rmem=" + " ".join(old_rmem))


if __name__ == "__main__":
    main()
