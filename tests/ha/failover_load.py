"""Write load through one broker while its primary dies (scripts/ha-test.sh).

Writers alternate an incr of a counter of their own and a putIfAbsent of a
new key, each call on a fresh connection with a bounded timeout. After
--seconds of acknowledged writes the primary's postmaster is killed with
SIGKILL; the writers keep going; once writes are acknowledged again (and
Patroni reports the standby promoted) they run --seconds more and stop.

Fails (exit 1) when:
  - an acknowledged write is missing from the new primary (an acknowledged
    incr not counted, an acknowledged key absent) or an effect is doubled
    (a counter above acknowledged + unknown);
  - a call hung: no answer within the client timeout;
  - a 503 or 504 came without Retry-After, or any answer other than 200,
    503 (db_unavailable: never applied) and 504 with reason
    db_outcome_unknown (the connection died under the statement: it may
    have committed, so the write counts as unknown, as a timeout does);
  - writes never came back.
Prints the measured figures as "figure NAME VALUE" lines.
"""
import argparse
import http.client
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.request

import psycopg2

CLIENT_TIMEOUT_S = 15.0  # a call that takes longer counts as a hang
RETRY_CAP_S = 0.2  # Retry-After is honoured up to this, to time recovery finely


class Writer(threading.Thread):
    def __init__(self, idx, host, port, ns, stop):
        super().__init__(daemon=True)
        self.idx, self.host, self.port, self.ns, self.stop = idx, host, port, ns, stop
        self.incr_acked = self.incr_unknown = 0
        self.keys = []  # per putIfAbsent attempt n: True acknowledged, False unknown
        self.acked = 0
        self.statuses = {}
        self.hangs = 0
        self.no_answer = 0
        self.missing_retry_after = 0
        self.kill_at = None  # set by main when the primary is killed
        self.first_ack_after_kill = None
        self.acks_after_kill = []  # when each acknowledgement after the kill came back
        self.max_call_s = 0.0

    def call(self, body):
        """(status, headers, body) or (None, reason, None)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=CLIENT_TIMEOUT_S)
        try:
            conn.request("POST", "/api/v1/kv", body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
        except socket.timeout:
            return None, "timeout", None
        except (ConnectionError, http.client.HTTPException, OSError) as e:
            return None, type(e).__name__, None
        finally:
            conn.close()

    def run(self):
        n = 0
        while not self.stop.is_set():
            incr = n % 2 == 0
            if incr:
                op = {"op": "incr", "ns": self.ns, "key": "c%d" % self.idx, "delta": 1, "forever": True}
            else:
                k = len(self.keys)
                op = {"op": "putIfAbsent", "ns": self.ns, "key": "p%d-%d" % (self.idx, k), "value": k,
                      "forever": True}
            t0 = time.monotonic()
            status, headers, body = self.call(json.dumps({"operations": [op]}))
            took = time.monotonic() - t0
            self.max_call_s = max(self.max_call_s, took)
            acked = False
            if status is None:
                if headers == "timeout":
                    self.hangs += 1
                else:
                    self.no_answer += 1
            else:
                self.statuses[status] = self.statuses.get(status, 0) + 1
                if status == 200:
                    try:
                        res = json.loads(body)["results"][0]
                        acked = res.get("applied") is True
                    except (ValueError, KeyError, IndexError):
                        acked = False
                elif status in (503, 504) and "retry-after" not in headers:
                    self.missing_retry_after += 1
                if status == 504:
                    try:
                        reason = json.loads(body).get("reason")
                    except (ValueError, AttributeError):
                        reason = None
                    if reason != "db_outcome_unknown":
                        self.statuses["504 " + str(reason)] = self.statuses.get("504 " + str(reason), 0) + 1
            if incr:
                if acked:
                    self.incr_acked += 1
                else:
                    self.incr_unknown += 1
            else:
                self.keys.append(acked)
            n += 1
            if acked:
                self.acked += 1
                now = time.monotonic()
                if self.kill_at is not None and t0 > self.kill_at:
                    self.acks_after_kill.append(now)
                    if self.first_ack_after_kill is None:
                        self.first_ack_after_kill = now
            elif status in (503, 504):
                try:
                    wait = float(headers.get("retry-after", "1"))
                except ValueError:
                    wait = 1.0
                time.sleep(min(wait, RETRY_CAP_S))
            else:
                time.sleep(0.05)


def total_acked(writers):
    return sum(w.acked for w in writers)


def wait_for(cond, within_s, what):
    until = time.monotonic() + within_s
    while time.monotonic() < until:
        if cond():
            return
        time.sleep(0.01)
    print("FAIL: %s within %.0f s" % (what, within_s))
    sys.exit(1)


def patroni_role(url):
    try:
        with urllib.request.urlopen(url + "/patroni", timeout=2) as r:
            return json.load(r).get("role")
    except Exception:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--primary-pidfile", required=True)
    ap.add_argument("--patroni", required=True, help="REST API of the standby to be promoted")
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--writers", type=int, default=4)
    a = ap.parse_args()
    host, port = a.base.split("//")[1].split(":")
    ns = "ha%d" % os.getpid()
    stop = threading.Event()
    writers = [Writer(i, host, int(port), ns, stop) for i in range(a.writers)]
    for w in writers:
        w.start()

    wait_for(lambda: total_acked(writers) >= 100, 30, "100 writes acknowledged before the kill")
    time.sleep(a.seconds)  # load for a while: the pause is the test's length, not synchronisation
    before_kill = total_acked(writers)
    with open(a.primary_pidfile) as f:
        postmaster = int(f.readline())
    kill_at = time.monotonic()
    for w in writers:
        w.kill_at = kill_at
    os.kill(postmaster, signal.SIGKILL)
    print("killed the primary's postmaster (pid %d) after %d acknowledged writes" % (postmaster, before_kill))

    # a call counts as after the kill when it was sent after it
    wait_for(lambda: all(w.first_ack_after_kill for w in writers), 90, "every writer acknowledged after the kill")
    wait_for(lambda: patroni_role(a.patroni) in ("master", "primary"), 30, "Patroni reporting the standby promoted")
    after = total_acked(writers)
    time.sleep(a.seconds)
    wait_for(lambda: total_acked(writers) >= after + 100, 30, "100 more writes acknowledged after recovery")
    stop.set()
    for w in writers:
        w.join(CLIENT_TIMEOUT_S + 5)

    # Read back from whichever server is the primary now.
    conn = psycopg2.connect(a.dsn, connect_timeout=10)
    cur = conn.cursor()
    acked = unknown = lost = doubled = 0
    for w in writers:
        cur.execute("SELECT value::text FROM queen.kv WHERE namespace = %s AND key = %s", (ns, "c%d" % w.idx))
        row = cur.fetchone()
        counter = int(row[0]) if row else 0
        acked += w.incr_acked
        unknown += w.incr_unknown
        if counter < w.incr_acked:
            lost += w.incr_acked - counter
            print("counter c%d: %d, acknowledged %d" % (w.idx, counter, w.incr_acked))
        if counter > w.incr_acked + w.incr_unknown:
            doubled += counter - w.incr_acked - w.incr_unknown
        cur.execute("SELECT key, value::text FROM queen.kv WHERE namespace = %s AND key LIKE %s",
                    (ns, "p%d-%%" % w.idx))
        present = dict(cur.fetchall())
        for k, ok in enumerate(w.keys):
            if not ok:
                unknown += 1
                continue
            acked += 1
            if present.get("p%d-%d" % (w.idx, k)) != str(k):
                lost += 1
                print("acknowledged key p%d-%d is missing" % (w.idx, k))
    cur.execute("SELECT pg_is_in_recovery(), inet_server_port()")
    in_recovery, server_port = cur.fetchone()
    conn.close()

    statuses = {}
    for w in writers:
        for s, c in w.statuses.items():
            statuses[s] = statuses.get(s, 0) + c
    hangs = sum(w.hangs for w in writers)
    no_answer = sum(w.no_answer for w in writers)
    missing_ra = sum(w.missing_retry_after for w in writers)
    # The outage as clients saw it: the longest stretch after the kill with
    # no write acknowledged. (The killed primary's backends live on for a
    # moment after their postmaster, so a write may still be acknowledged,
    # replicated, just after the kill: the first acknowledgement after the
    # kill is not the recovery.)
    acks = sorted([kill_at] + [t for w in writers for t in w.acks_after_kill])
    gap, gap_end = max((acks[i + 1] - acks[i], acks[i + 1]) for i in range(len(acks) - 1))
    recovery_ms = round((gap_end - kill_at) * 1000)
    figures = [
        ("ha.recovery_ms", recovery_ms),
        ("ha.no_write_acknowledged_ms", round(gap * 1000)),
        ("ha.writes_acknowledged", acked),
        ("ha.writes_unknown", unknown),
        ("ha.writes_lost", lost),
        ("ha.effects_doubled", doubled),
        ("ha.answers_200", statuses.get(200, 0)),
        ("ha.answers_503", statuses.get(503, 0)),
        ("ha.answers_504_outcome_unknown", statuses.get(504, 0)),
        ("ha.answers_other", sum(c for s, c in statuses.items() if s not in (200, 503, 504))),
        ("ha.answers_503_504_without_retry_after", missing_ra),
        ("ha.calls_without_answer", no_answer),
        ("ha.calls_hung", hangs),
        ("ha.slowest_call_ms", round(max(w.max_call_s for w in writers) * 1000)),
        ("ha.new_primary_port", server_port),
    ]
    for name, value in figures:
        print("figure %s %s" % (name, value))
    problems = []
    if lost:
        problems.append("%d acknowledged writes lost" % lost)
    if doubled:
        problems.append("%d effects doubled" % doubled)
    if hangs:
        problems.append("%d calls hung past %.0f s" % (hangs, CLIENT_TIMEOUT_S))
    if missing_ra:
        problems.append("%d answers 503/504 without Retry-After" % missing_ra)
    other = {s: c for s, c in statuses.items() if s not in (200, 503, 504)}
    if other:
        problems.append("answers other than 200, 503 and 504 db_outcome_unknown: %s" % other)
    if in_recovery:
        problems.append("the read-back server is in recovery")
    if problems:
        print("FAIL: " + "; ".join(problems))
        sys.exit(1)
    print("ok: failover survived; writes acknowledged again %d ms after the kill (none for %d ms)"
          % (recovery_ms, round(gap * 1000)))


if __name__ == "__main__":
    main()
