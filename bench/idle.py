#!/usr/bin/env python3
"""bench/idle.py HOST PORT BROKER_PID N: opens N keep-alive connections to the
broker, each serving one GET /health and then left idle, and while they stay
open times 200 GET /health on a fresh connection each. Prints one line:
IDLE conns=N accepted=A health_p50_ms=.. health_p99_ms=.. health_max_ms=..
rss_before_kb=.. rss_idle_kb=.. (the broker's VmRSS before and with them)."""
import resource
import socket
import sys
import time

REQ = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def one_answer(s):
    """Reads one HTTP answer with a Content-Length body; True on 200."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            return False
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while len(body) < length:
        chunk = s.recv(4096)
        if not chunk:
            return False
        body += chunk
    return head.startswith(b"HTTP/1.1 200")


def main():
    host, port, pid, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    before = rss_kb(pid)
    held = []
    accepted = 0
    for _ in range(n):
        try:
            s = socket.create_connection((host, port), timeout=10)
            s.sendall(REQ)
            if one_answer(s):
                accepted += 1
            held.append(s)
        except OSError:
            break
    idle = rss_kb(pid)
    times = []
    for _ in range(200):
        t = time.perf_counter()
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(REQ)
            one_answer(s)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    for s in held:
        s.close()
    print(f"IDLE conns={n} accepted={accepted} health_p50_ms={times[len(times) // 2]:.2f} "
          f"health_p99_ms={times[int(len(times) * 0.99) - 1]:.2f} health_max_ms={times[-1]:.2f} "
          f"rss_before_kb={before} rss_idle_kb={idle}")


if __name__ == "__main__":
    main()
