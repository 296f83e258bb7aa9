"""One broker behind PgBouncer (scripts/pgbouncer-test.sh): does it work?

  - 8 writers x 100 one-op kv writes (incr of a counter of their own and
    put of new keys), concurrently so that the broker's connections all
    carry statements; every answer must be 200 and every acknowledged write
    must be in the database (read directly, not through PgBouncer);
  - a long poll woken by a push (the broker's LISTEN connection);
  - the broker's log: no error line.
Exit 0 when every check holds; prints each failed check.
"""
import argparse
import http.client
import json
import sys
import threading
import time

import psycopg2

TIMEOUT_S = 15


def call(host, port, method, path, body=None, timeout=TIMEOUT_S):
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
        r = conn.getresponse()
        return r.status, r.read()
    except OSError as e:
        return None, str(e).encode()
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--broker-log", required=True)
    a = ap.parse_args()
    host, port = a.base.split("//")[1].split(":")
    port = int(port)
    problems = []
    statuses = {}
    acked_incr = [0] * 8
    acked_keys = [[] for _ in range(8)]
    first_error = []
    lock = threading.Lock()

    def writer(i):
        for n in range(100):
            if n % 2 == 0:
                op = {"op": "incr", "ns": "pgb", "key": "c%d" % i, "delta": 1, "forever": True}
            else:
                op = {"op": "put", "ns": "pgb", "key": "k%d-%d" % (i, n), "value": n, "forever": True}
            status, body = call(host, port, "POST", "/api/v1/kv", json.dumps({"operations": [op]}))
            with lock:
                statuses[status] = statuses.get(status, 0) + 1
                if status != 200 and not first_error:
                    first_error.append("%s %s" % (status, body[:300].decode(errors="replace")))
            if status == 200 and json.loads(body)["results"][0].get("applied") is True:
                if n % 2 == 0:
                    acked_incr[i] += 1
                else:
                    acked_keys[i].append(n)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if set(statuses) != {200}:
        problems.append("kv answers %s (first not 200: %s)" % (statuses, first_error[0] if first_error else "-"))

    db = psycopg2.connect(a.dsn, connect_timeout=10)
    cur = db.cursor()
    lost = 0
    for i in range(8):
        cur.execute("SELECT value::text FROM queen.kv WHERE namespace = 'pgb' AND key = %s", ("c%d" % i,))
        row = cur.fetchone()
        lost += max(0, acked_incr[i] - (int(row[0]) if row else 0))
        for n in acked_keys[i]:
            cur.execute("SELECT 1 FROM queen.kv WHERE namespace = 'pgb' AND key = %s", ("k%d-%d" % (i, n),))
            if cur.fetchone() is None:
                lost += 1
    db.close()
    if lost:
        problems.append("%d acknowledged kv writes missing" % lost)

    # A long poll (10 s) woken by a push made 0.3 s after it began.
    q = "pgbq%d" % int(time.time() * 1000)
    result = {}

    def poll():
        t0 = time.monotonic()
        result["status"], _ = call(host, port, "GET", "/api/v1/pop/queue/%s?wait=true&timeout=10000" % q)
        result["ms"] = round((time.monotonic() - t0) * 1000)

    t = threading.Thread(target=poll)
    t.start()
    time.sleep(0.3)  # the poll is waiting by then; a late push still wakes it (it re-checks each second)
    status, body = call(host, port, "POST", "/api/v1/push", json.dumps({"items": [{"queue": q, "payload": 1}]}))
    t.join()
    if status != 201:
        problems.append("push answered %s %s" % (status, body[:200]))
    if result.get("status") != 200:
        problems.append("the long poll answered %s after %s ms" % (result.get("status"), result.get("ms")))
    print("long poll answered %s after %s ms" % (result.get("status"), result.get("ms")))

    with open(a.broker_log, errors="replace") as f:
        errors = [line.strip() for line in f if " ERROR " in line or " WARN " in line]
    if errors:
        problems.append("%d broker warnings or errors, first: %s" % (len(errors), errors[0][:300]))
    print("kv answers: %s" % statuses)
    for p in problems:
        print("FAIL: " + p)
    if not problems:
        print("ok: every check held")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
