#!/usr/bin/env python3
"""bench/longpoll.py HOST PORT PG_URL [N] [QUEUES] [IDLE_S]: what waiting long
polls cost the database, and how fast a push reaches one of them.

Opens N (10000) keep-alive connections on loopback, each with one
GET /api/v1/pop/queue/lp<run>-<i % QUEUES>?wait=true&timeout=60000&batch=1&autoAck=true
(QUEUES = 100), waits until the broker counts them all suspended, then for
IDLE_S (10) seconds counts the database's transactions (and first for as
long with no waiter, the broker's own background work: base_xacts_per_s) (pg_stat_database
xact_commit + xact_rollback of the broker's database, less this script's own
samples) and the broker's pops and check statements (/metrics). Then it
pushes one message to each queue (one POST /api/v1/push per queue, in turn)
and times, per queue, from just before its push was sent to the 200 of the
waiter that got it. Prints one line:
LONGPOLL waiting=N queues=Q idle_s=.. idle_xacts_per_s=.. idle_pops_per_s=..
idle_checks_per_s=.. delivered=D/Q p50_ms=.. p99_ms=.. max_ms=.. s503=.. other=..
push_pops=.. push_wakes=.. check_wakes=.. (from the first push to the last
delivery: pops the waiters made, and the waiters pushes and checks woke;
one message per queue should cost about one wake and one pop)

Bounded: at most 20000 connections, every phase has a deadline, everything
is closed at the end (the waiters left answer 204 at their timeout or when
their socket closes). Loopback only: HOST must be 127.0.0.1 or localhost.
"""
import json
import resource
import selectors
import socket
import subprocess
import sys
import time

MAX_N = 20000


def http_get_json(host, port, path):
    s = socket.create_connection((host, port), timeout=10)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    buf = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    s.close()
    return json.loads(buf.partition(b"\r\n\r\n")[2] or b"null")


def metric(host, port, *path):
    d = http_get_json(host, port, "/metrics")
    for p in path:
        d = d[p]
    return d


def xacts(pg_url):
    out = subprocess.run(
        ["psql", pg_url, "-AtX", "-c",
         "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"],
        check=True, capture_output=True, text=True).stdout
    return int(out.strip())


def main():
    host, port, pg_url = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    n = min(int(sys.argv[4]) if len(sys.argv) > 4 else 10000, MAX_N)
    nq = int(sys.argv[5]) if len(sys.argv) > 5 else 100
    idle_s = float(sys.argv[6]) if len(sys.argv) > 6 else 10.0
    if host not in ("127.0.0.1", "localhost"):
        sys.exit("loopback only")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    run = int(time.time()) % 100000
    queue = [f"lp{run}-{q}" for q in range(nq)]

    # The same window with no waiter: the broker's own background work
    # (sweeper, quota refresh) and the database's, to tell apart.
    time.sleep(12)  # what came before is reported (see below)
    b0 = xacts(pg_url)
    time.sleep(idle_s)
    base_xacts = (xacts(pg_url) - b0 - 1) / idle_s

    sel = selectors.DefaultSelector()
    conns = {}  # socket -> [queue index, bytes received]
    # Polls of an earlier run whose sockets closed stay suspended until their
    # timeout (the broker sees the close only when it resumes them): wait.
    quiet_by = time.time() + 90
    while metric(host, port, "http", "longPollsWaiting") > 0:
        if time.time() > quiet_by:
            sys.exit("the broker still has long polls waiting from elsewhere")
        time.sleep(1)
    base_waiting = 0
    for i in range(n):
        s = socket.create_connection((host, port), timeout=10)
        s.setblocking(False)
        q = i % nq
        s.sendall((f"GET /api/v1/pop/queue/{queue[q]}?wait=true&timeout=60000&batch=1&autoAck=true HTTP/1.1\r\n"
                   "Host: 127.0.0.1\r\n\r\n").encode())
        conns[s] = [q, b""]
        sel.register(s, selectors.EVENT_READ)
    deadline = time.time() + 120
    while metric(host, port, "http", "longPollsWaiting") < base_waiting + n:
        if time.time() > deadline:
            sys.exit(f"only {metric(host, port, 'http', 'longPollsWaiting') - base_waiting} of {n} suspended")
        time.sleep(0.2)

    # Idle: what N waiting polls cost. A backend reports its transactions to
    # pg_stat_database when idle for up to 10 s after them (PostgreSQL 15's
    # PGSTAT_IDLE_INTERVAL): the N first attempts must be in before counting.
    time.sleep(12)
    x0, p0 = xacts(pg_url), metric(host, port, "engine", "pops", "total")
    c0 = metric(host, port, "engine", "notifier", "checks")
    t0 = time.time()
    early = 0
    while time.time() - t0 < idle_s:  # anything answered while idle is a bug: count it
        for key, _ in sel.select(timeout=0.5):
            early += 1
            sel.unregister(key.fileobj)
    took = time.time() - t0
    x1, p1 = xacts(pg_url), metric(host, port, "engine", "pops", "total")
    c1 = metric(host, port, "engine", "notifier", "checks")
    idle_xacts = (x1 - x0 - 1) / took  # less the sample's own transaction
    idle_pops = (p1 - p0) / took
    idle_checks = (c1 - c0) / took

    # One push per queue; time from its send to the waiter's 200.
    lat = []
    tally = {"s503": 0, "other": 0}
    got = set()
    sent = [0.0] * nq

    def drain(timeout):
        for key, _ in sel.select(timeout=timeout):
            s = key.fileobj
            try:
                data = s.recv(65536)
            except BlockingIOError:
                continue
            conns[s][1] += data
            if data and b"\r\n\r\n" not in conns[s][1]:
                continue
            sel.unregister(s)
            q = conns[s][0]
            head = conns[s][1].split(b"\r\n", 1)[0]
            if head.startswith(b"HTTP/1.1 200"):
                lat.append((time.time() - sent[q]) * 1000)
                got.add(q)
            elif head.startswith(b"HTTP/1.1 503"):
                tally["s503"] += 1
            else:
                tally["other"] += 1

    def wake_figures():
        return (metric(host, port, "engine", "pops", "total"), metric(host, port, "engine", "notifier", "pushWakes"),
                metric(host, port, "engine", "notifier", "checkWakes"))

    w0 = wake_figures()
    pusher = socket.create_connection((host, port), timeout=10)
    for q in range(nq):
        body = json.dumps({"items": [{"queue": queue[q], "payload": q}]}).encode()
        sent[q] = time.time()
        pusher.sendall(b"POST /api/v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                       b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += pusher.recv(65536)
        head, _, rest = buf.partition(b"\r\n\r\n")
        length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
        while len(rest) < length:
            rest += pusher.recv(65536)
        if not head.startswith(b"HTTP/1.1 201"):
            sys.exit(f"push {q}: {head[:40]!r}")
        drain(0)
    end = time.time() + 10
    while len(got) < nq and time.time() < end:
        drain(0.2)
    w1 = wake_figures()
    s503, other = tally["s503"], tally["other"]
    for s in conns:
        s.close()
    pusher.close()
    lat.sort()

    def pct(p):
        return lat[min(len(lat) - 1, int(p * len(lat)))] if lat else float("nan")

    print(f"LONGPOLL waiting={n} queues={nq} idle_s={took:.1f} base_xacts_per_s={base_xacts:.1f} "
          f"idle_xacts_per_s={idle_xacts:.1f} "
          f"idle_pops_per_s={idle_pops:.1f} idle_checks_per_s={idle_checks:.2f} early_answers={early} "
          f"delivered={len(got)}/{nq} p50_ms={pct(0.5):.1f} p99_ms={pct(0.99):.1f} "
          f"max_ms={lat[-1] if lat else float('nan'):.1f} s503={s503} other={other} "
          f"push_pops={w1[0] - w0[0]} push_wakes={w1[1] - w0[1]} check_wakes={w1[2] - w0[2]}")


if __name__ == "__main__":
    main()
