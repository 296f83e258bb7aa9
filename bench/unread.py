#!/usr/bin/env python3
"""bench/unread.py HOST PORT BROKER_PID N: N clients that ask for a ~4 MB
answer (a queue's listing: 400 messages of 10 KB, pushed first) and never
read it. Samples the broker's VmRSS until every one of them was cut (the
broker closed it: QUEEN_RESPONSE_WRITE_TIMEOUT_MS) or 120 s pass. Prints:
UNREAD clients=N answer_bytes=.. rss_before_kb=.. rss_peak_kb=.. growth_kb=..
cut=.. refused_503=.. last_cut_s=.."""
import json
import socket
import sys
import time
import urllib.request

host, port, pid, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
base = f"http://{host}:{port}"
queue = f"unread{int(time.time())}"


def rss_kb():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


payload = "x" * 10000
for i in range(400):
    body = json.dumps({"items": [{"queue": queue, "payload": payload}]}).encode()
    req = urllib.request.Request(base + "/api/v1/push", data=body, headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req).read()
path = f"/api/v1/messages?queue={queue}&limit=1000"
size = len(urllib.request.urlopen(base + path).read())

before = rss_kb()
socks = []
for _ in range(n):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((host, port))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    s.setblocking(False)
    socks.append(s)
def cut_by_broker():
    """Answers cut at the write deadline, as the broker counts them."""
    m = json.loads(urllib.request.urlopen(base + "/metrics").read())
    return m["http"]["connections"]["writeTimeouts"]


cut0 = cut_by_broker()
peak, t0, cut, refused, last_cut = before, time.time(), set(), 0, 0.0
while refused + (cut_by_broker() - cut0) < n and time.time() - t0 < 120:
    peak = max(peak, rss_kb())
    for i, s in enumerate(socks):
        if i in cut:
            continue
        try:
            data = s.recv(64, socket.MSG_PEEK)
            if data.startswith(b"HTTP/1.1 503"):
                refused += 1
                cut.add(i)
                last_cut = time.time() - t0
            elif data == b"":
                cut.add(i)
                last_cut = time.time() - t0
        except BlockingIOError:
            pass
        except ConnectionError:
            cut.add(i)
            last_cut = time.time() - t0
    time.sleep(0.2)
last_cut = max(last_cut, time.time() - t0)
time.sleep(1)
print(f"UNREAD clients={n} answer_bytes={size} rss_before_kb={before} rss_peak_kb={peak} "
      f"growth_kb={peak - before} rss_after_kb={rss_kb()} refused_503={refused} "
      f"cut_at_deadline={cut_by_broker() - cut0} all_done_s={last_cut:.1f}")
