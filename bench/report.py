#!/usr/bin/env python3
"""bench/report.py: parsing and report of bench/run.sh (stdlib only).

  report.py pgbench DIR PER    -> "ops_s p50_ms p99_ms errors" from pgbench's
                                  out.txt and per-transaction logs (-l) in DIR;
                                  ops_s = tps * PER (ops per transaction)
  report.py wrk FILE PER       -> same from wrk + bench/kv.lua's WRKRESULT line;
                                  ops_s = requests/s * PER (ops per request)
  report.py wire FILE          -> same from wire_bench's WIRERESULT (messages/s,
                                  commit latency)
  report.py redis CSV          -> "SCENARIO\\tops_s p50 p99 errors" per test
  report.py scale FILE         -> same from bench/scale_bench's result line
                                  (DRAIN/SEED/PUSH/SKEWRESULT; skew: waits)
  report.py render WORK OUT    -> writes the generated section of OUT between
                                  the bench:begin / bench:end markers
"""
import csv
import glob
import os
import re
import statistics
import sys

BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"


def co_percentiles(lats, clients, runtime_us, ps):
    """Percentiles (us) of per-call latencies measured the way wrk 4 measures
    its own: wrk adds to its histogram, for every recorded latency v of at
    least twice the expected interval between two calls of one connection
    (runtime / (calls / connections)), the samples v - interval, v - 2 x
    interval, ... down to the interval (the calls a stalled connection did
    not issue: the coordinated-omission correction, its stats_correct), and
    its percentiles count them. pgbench's -l log has none of them, so a stall
    of the machine moved wrk's p99 by tens or hundreds of ms and pgbench's
    not at all; the same correction on both sides compares like with like."""
    if not lats:
        return [0.0 for _ in ps]
    hist = [0] * (max(lats) + 1)
    for v in lats:
        hist[v] += 1
    count = len(lats)
    per_conn = count // clients if clients > 0 else 0
    expected = int(runtime_us // per_conn) if per_conn > 0 else 0
    if expected > 0:
        for n in range(2 * expected, len(hist)):
            c = hist[n]  # additions only land below n: this is still the recorded count
            m = n - expected
            while c and m > expected:
                hist[m] += c
                count += c
                m -= expected
    out = []
    for p in ps:
        rank = int(p / 100.0 * count + 0.5)
        total = 0
        for i, c in enumerate(hist):
            total += c
            if c and total >= rank:
                out.append(float(i))
                break
        else:
            out.append(float(len(hist) - 1))
    return out


def fmt_out(ops, p50_ms, p99_ms, errors):
    return "%.1f %.3f %.3f %s" % (ops, p50_ms, p99_ms, errors)


def cmd_pgbench(d, per="1"):
    out = open(os.path.join(d, "out.txt"), errors="replace").read()
    m = re.search(r"^tps = ([0-9.]+)", out, re.M)
    ops = float(m.group(1)) * int(per) if m else 0.0
    lats, failed = [], 0
    for f in glob.glob(os.path.join(d, "txlog*")):
        with open(f) as fh:
            for line in fh:
                parts = line.split()
                if len(parts) < 3:
                    continue
                if parts[2].isdigit():
                    lats.append(int(parts[2]))
                else:
                    failed += 1
    lats.sort()
    errors = failed
    m = re.search(r"number of failed transactions: (\d+)", out)
    if m:
        errors = max(errors, int(m.group(1)))
    if "aborted" in out or not m or ops == 0:
        errors = "aborted" if errors == 0 else "aborted+%d" % errors
    m = re.search(r"^number of clients: (\d+)", out, re.M)
    clients = int(m.group(1)) if m else 1
    m = re.search(r"^duration: (\d+) s", out, re.M)
    runtime_us = int(m.group(1)) * 1000000 if m else 0
    p50, p99 = co_percentiles(lats, clients, runtime_us, (50, 99))
    print(fmt_out(ops, p50 / 1000.0, p99 / 1000.0, errors))


def kv_line(path, tag):
    for line in open(path, errors="replace"):
        if line.startswith(tag + " "):
            return dict(kv.split("=", 1) for kv in line.split()[1:])
    return None


def cmd_wrk(path, per):
    r = kv_line(path, "WRKRESULT")
    if r is None:
        print(fmt_out(0, 0, 0, "no_result"))
        return
    secs = int(r["duration_us"]) / 1e6
    ops = int(r["requests"]) / secs * int(per) if secs > 0 else 0
    errs = sum(int(r[k]) for k in ("err_connect", "err_read", "err_write", "err_status", "err_timeout"))
    print(fmt_out(ops, int(r["p50_us"]) / 1000.0, int(r["p99_us"]) / 1000.0, errs))


def cmd_wire(path):
    r = kv_line(path, "WIRERESULT")
    if r is None:
        print(fmt_out(0, 0, 0, "no_result"))
        return
    errs = r["errors"]
    if r.get("drained") == "1":
        errs = errs + "+drained"
    print(fmt_out(float(r["msgs_per_s"]), int(r["commit_p50_us"]) / 1000.0,
                  int(r["commit_p99_us"]) / 1000.0, errs))


def scale_line(path):
    """The first "<MODE>RESULT k=v ..." line of a scale_bench output, as
    (mode, dict); (None, {}) when there is none."""
    try:
        for line in open(path, errors="replace"):
            f = line.split()
            if f and f[0].endswith("RESULT"):
                return f[0][:-len("RESULT")], dict(kv.split("=", 1) for kv in f[1:] if "=" in kv)
    except OSError:
        pass
    return None, {}


def cmd_scale(path):
    mode, r = scale_line(path)
    if mode is None:
        print(fmt_out(0, 0, 0, "no_result"))
        return
    us = lambda k: int(r.get(k, 0) or 0) / 1000.0
    errs = r.get("errors", "0")
    if mode == "SKEW":
        if r.get("drained") == "0":
            errs += "+undelivered"
        print(fmt_out(float(r.get("push_rate", 0)), us("all_p50_us"), us("all_p99_us"), errs))
        return
    if r.get("timed_out") == "1":
        errs += "+timeout"
    if mode == "DRAIN":
        print(fmt_out(float(r.get("msgs_per_s", 0)), us("pop_p50_us"), us("pop_p99_us"), errs))
    else:
        print(fmt_out(float(r.get("msgs_per_s", 0)), us("req_p50_us"), us("req_p99_us"), errs))


def cmd_redis(path):
    try:
        rows = list(csv.DictReader(open(path)))
    except OSError:
        rows = []
    for r in rows:
        name = r.get("test", "?").split()[0]
        print("%s\t%s" % (name, fmt_out(float(r.get("rps", 0)), float(r.get("p50_latency_ms", 0)),
                                        float(r.get("p99_latency_ms", 0)), 0)))


# ----------------------------------------------------------------- render

def load(work):
    meta = {}
    for line in open(os.path.join(work, "meta.env")):
        if "=" in line:
            k, v = line.rstrip("\n").split("=", 1)
            meta[k] = v
    rows = {}
    for line in open(os.path.join(work, "results.tsv")):
        f = line.rstrip("\n").split("\t")
        if len(f) < 9:
            continue
        sec, scen, c, ops, p50, p99, err, per, cmd = f[:9]
        cpu = [float(x) for x in f[9:14]] if len(f) >= 14 else None
        rows[(sec, scen, int(c))] = dict(ops=float(ops), p50=float(p50), p99=float(p99),
                                         err=err, per=int(per), cmd=cmd, cpu=cpu)
    return meta, rows


def n(x):
    return "{:,.0f}".format(x)


def ms(x):
    return "%.2f" % x


def flag(r):
    if r is None:
        return ""
    return "" if r["err"] in ("0", "") else " (errors: %s)" % r["err"]


def noisy(r):
    """True when other users of the machine burnt more than 10% of the CPU
    during the point (see the CPU table)."""
    c = r.get("cpu") if r else None
    return bool(c and c[0] > 0 and c[4] / c[0] > 0.10)


def cell(r):
    if r is None:
        return ["n/a", "", ""]
    return [n(r["ops"]) + ("\\*" if noisy(r) else "") + flag(r), ms(r["p50"]), ms(r["p99"])]


def ratio(a, b):
    if a is None or b is None or b["ops"] == 0:
        return None
    return a["ops"] / b["ops"]


def rs(x, digits=2):
    return "n/a" if x is None else ("%." + str(digits) + "f") % x


def table(head, body):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in body]
    return out


def commands(rows, keys):
    seen, out = set(), []
    for k in keys:
        r = rows.get(k)
        if r and r["cmd"] not in seen:
            seen.add(r["cmd"])
            out.append("    " + r["cmd"])
    return out


def slow_requests(log_path):
    """How many `slow request` lines the broker logged, and the slowest, per
    route; None without a log."""
    if not os.path.exists(log_path):
        return None
    worst = {}
    for line in open(log_path, errors="replace"):
        m = re.search(r"slow request: http (\S+) (\S+) (\d+) ([0-9.]+)ms", line)
        if m:
            key = "%s %s" % (m.group(1), m.group(2))
            n, top = worst.get(key, (0, 0.0))
            worst[key] = (n + 1, max(top, float(m.group(4))))
    if not worst:
        return "none"
    return "; ".join("%s: %d, slowest %.0f ms" % (k, n, top) for k, (n, top) in sorted(worst.items()))


def size(b):
    b = float(b)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(b) < 1024 or unit == "GiB":
            return ("%.0f %s" if unit == "B" else "%.1f %s") % (b, unit)
        b /= 1024.0


def kv_file(path):
    out = {}
    try:
        for line in open(path):
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                out[k] = v
    except OSError:
        pass
    return out


def render_scale(work, meta, rows):
    """Section 10: the scale scenario (bench/scale_bench.c; see run.sh)."""
    L = ["### 10. Scale: how the message path's cost grows (`bench/scale_bench.c`, `BENCH_ONLY=scale`)", ""]
    sc = {k[1]: r for k, r in rows.items() if k[0] == "scale"}
    if not sc:
        L += ["Not measured in this run.", ""]
        return L

    def res(tag):
        return scale_line(os.path.join(work, "scale-%s.result" % tag))[1]

    def got(r, x):
        """A rate cell: the figure, and what it covers when the point ran out of time."""
        if r is None:
            return "n/a"
        cellv = n(r["ops"]) + ("\\*" if noisy(r) else "")
        if x.get("timed_out") == "1":
            cellv += " (timed out after %.0f s: %s of %s)" % (float(x.get("seconds", 0)), n(int(x.get("delivered", 0))),
                                                              n(int(x.get("expected", 0))))
        if x.get("errors", "0") != "0":
            cellv += " (errors: %s)" % x["errors"]
        return cellv

    parts = sorted({int(k[len("pop_p"):]) for k in sc if k.startswith("pop_p")} |
                   {int(k[len("pop1_p"):]) for k in sc if k.startswith("pop1_p")} |
                   {int(k[len("push_p"):]) for k in sc if k.startswith("push_p")})
    base = 10 if 10 in parts else (parts[0] if parts else None)
    L.append("Pop against partitions: a fresh queue of P partitions holding max(%s, P) messages spread round robin "
             "(seeded by pushes of 500, not measured), drained by consumers popping `batch=1&autoAck=true&wait=false` "
             "in queue mode over keep-alive connections (an empty pop backs off 1 ms); the 1-consumer drain has a "
             "fresh queue of its own. msg/s = messages / seconds to the last delivery; pop latency = the pops that "
             "delivered. Push: one message per request to a partition drawn at random among the P (the 1-consumer "
             "queue, every partition and cursor existing), 32 threads, %s s. `vs P=%s` = this row over that row, "
             "same run." % (n(int(meta.get("scale_messages", "10000"))), meta.get("secs", "?"), base))
    L.append("")
    def seeded(tag, x):
        """A note when the unmeasured seed of a point pushed fewer messages than its drain expects."""
        sd = res("seed-" + tag)
        want = int(x.get("expected", 0) or 0)
        if x and (not sd or int(sd.get("messages", 0)) < want):
            return " (seeded only %s: see logs/scale-seed-%s.txt)" % (n(int(sd.get("messages", 0) or 0)), tag)
        return ""

    body = []
    for P in parts:
        a, b, c = sc.get("pop_p%d" % P), sc.get("pop1_p%d" % P), sc.get("push_p%d" % P)
        ab, bb, cb = sc.get("pop_p%d" % base), sc.get("pop1_p%d" % base), sc.get("push_p%d" % base)
        xa, xb, xc = res("pop-%d" % P), res("pop1-%d" % P), res("push-%d" % P)
        body.append(["{:,}".format(P), n(int(xa.get("expected", 0) or 0)),
                     got(a, xa) + seeded("p%d" % P, xa), ms(a["p50"]) if a else "", ms(a["p99"]) if a else "", rs(ratio(a, ab), 3),
                     "%s of %s" % (xa.get("empty_pops", "?"), xa.get("pops", "?")) if a else "",
                     got(b, xb) + seeded("p%d-c1" % P, xb), ms(b["p50"]) if b else "", ms(b["p99"]) if b else "", rs(ratio(b, bb), 3),
                     got(c, xc), ms(c["p50"]) if c else "", ms(c["p99"]) if c else "", rs(ratio(c, cb), 3)])
    L += table(["partitions", "messages", "10 consumers msg/s", "pop p50 ms", "pop p99 ms", "vs P=%s" % base,
                "empty pops", "1 consumer msg/s", "pop p50 ms", "pop p99 ms", "vs P=%s" % base,
                "push c=32 msg/s", "push p50 ms", "push p99 ms", "vs P=%s" % base], body)
    L.append("")
    # The same 10-consumer drain, in rounds (round 1 is the table above):
    # the target's ratio taken within each round, and its median.
    rounds = int(meta.get("scale_rounds", "1") or 1)
    if rounds > 1 and base is not None:
        def point(P, r):
            return sc.get("pop_p%d" % P) if r == 1 else sc.get("popround_p%d_r%d" % (P, r))
        body = []
        for P in parts:
            got_r = [point(P, r) for r in range(1, rounds + 1)]
            per = [ratio(got_r[r - 1], point(base, r)) for r in range(1, rounds + 1)]
            known = [x for x in per if x is not None]
            med = statistics.median(known) if known else None
            body.append(["{:,}".format(P)] +
                        ["%s (%s)" % (n(g["ops"]) if g else "n/a", rs(x, 2)) for g, x in zip(got_r, per)] +
                        [rs(med, 2)])
        L.append("The 10-consumer drain in %d rounds, every P once per round in the order above (round 1 is the "
                 "table above): msg/s, and in brackets the ratio to P=%s of the same round. One point's rate moves "
                 "by about a quarter from run to run on this machine, so the target's ratio is the median of the "
                 "rounds." % (rounds, base))
        L.append("")
        L += table(["partitions"] + ["round %d msg/s (vs P=%s)" % (r, base) for r in range(1, rounds + 1)] +
                   ["median vs P=%s" % base], body)
        L.append("")
    ref = rows.get(("push", "push1", 32))
    if ref:
        L.append("For reference, section 8's one-message pushes at c=32 (wrk, 16 partitions): %s msg/s, p50 %s ms, "
                 "p99 %s ms." % (n(ref["ops"]), ms(ref["p50"]), ms(ref["p99"])))
        L.append("")

    # memory and disk
    body = []
    for P in parts:
        z = kv_file(os.path.join(work, "scale-sizes-%d.txt" % P))
        if not z:
            continue
        tabs = sorted({k.split(".", 1)[1] for k in z if k.startswith("after.")})
        main = ("log_partitions", "log_consumers", "log_messages")
        after = lambda t: int(z.get("after." + t, 0))
        grow = lambda t: after(t) - int(z.get("before." + t, 0))
        other = [t for t in tabs if t not in main]
        body.append(["{:,}".format(P)] +
                    ["%s (%+.1f MiB)" % (size(after(t)), grow(t) / 1048576.0) for t in main] +
                    ["%s (%s)" % (size(sum(after(t) for t in other)), ", ".join(other) or "none"),
                     "%s / %s / %s" % (z.get("partitions_rows", "?"), z.get("consumers_rows", "?"),
                                       z.get("messages_rows", "?")),
                     size(int(z.get("rss_kb", 0)) * 1024), size(int(z.get("hwm_kb", 0)) * 1024)])
    if body:
        L.append("Memory and disk right after each 10-consumer drain (the queue of P partitions and its consumed "
                 "messages still there; in brackets the growth since just before it was seeded; the previous "
                 "point's queue was deleted and the tables vacuumed, so freed space is reused): "
                 "`pg_total_relation_size` of every `queen.log_*` table, and the broker's VmRSS.")
        L.append("")
        L += table(["partitions", "log_partitions", "log_consumers", "log_messages", "other queen.log_*",
                    "rows: partitions / cursors / messages", "broker VmRSS", "broker VmHWM"], body)
        L.append("")

    # bootstrap
    r, x = sc.get("bootstrap"), res("boot")
    if r:
        head = ("**%s s** to consume all" % x.get("seconds", "?") if x.get("drained") == "1" else
                "**did not finish**: %s of 5,000 consumed in %s s" % (n(int(x.get("delivered", 0))), x.get("seconds", "?")))
        L.append("Bootstrap (the reference broker's shape): 5,000 partitions, one message each, 10 consumers, "
                 "batch 1: %s (%s msg/s, pop p50 %s ms, p99 %s ms)." % (
                     head, n(r["ops"]) + ("\\*" if noisy(r) else ""), ms(r["p50"]), ms(r["p99"])))
        L.append("")

    # groups
    gk = sorted((int(k[len("groups_g"):]), r) for k, r in sc.items() if k.startswith("groups_g"))
    if gk:
        body = []
        for G, r in gk:
            x = res("groups-%d" % G)
            per = "%d" % (10 // G) if G <= 10 else "1/%d (a consumer serves %d groups in turn)" % (G // 10, G // 10)
            body.append([G, per, n(int(x.get("expected", 0) or 0)), got(r, x), ms(r["p50"]), ms(r["p99"]),
                         "%s of %s" % (x.get("empty_pops", "?"), x.get("pops", "?"))])
        L.append("Consumer groups: one queue of 1,000 partitions and %s messages; every group reads every message "
                 "(`consumerGroup=gN`, batch 1, autoAck), 10 consumers in all. msg/s = deliveries of all groups "
                 "per second." % n(int(meta.get("scale_messages", "10000"))))
        L.append("")
        L += table(["groups", "consumers per group", "deliveries expected", "msg/s delivered in total",
                    "pop p50 ms", "pop p99 ms", "empty pops"], body)
        L.append("")

    # combined push + pop
    r = sc.get("combined")
    if r:
        push, pop = {}, {}
        for line in open(os.path.join(work, "scale-combined.result"), errors="replace"):
            f = line.split()
            if f and f[0] in ("PUSHRESULT", "DRAINRESULT"):
                (push if f[0] == "PUSHRESULT" else pop).update(kv.split("=", 1) for kv in f[1:] if "=" in kv)
        cpu = {}
        for line in open(os.path.join(work, "scale-combined.cpu"), errors="replace"):
            cpu.update(kv.split("=", 1) for kv in line.split() if "=" in kv)
        secs = float(pop.get("seconds", 0) or 0)
        popped = float(pop.get("msgs_per_s", 0) or 0)
        busy, own = float(cpu.get("busy_s", 0) or 0), float(cpu.get("broker_s", 0) or 0) + float(cpu.get("pg_s", 0) or 0)
        per = lambda cpu_s: n(popped * secs / cpu_s) if cpu_s > 0 else "n/a"
        L.append("Pushes and pops at once (the reference broker's published combined shape: 1,001 partitions): "
                 "one-message pushes from 16 threads to random partitions, %s msg/s (push p50 %s ms, p99 %s ms), "
                 "while 10 consumers long-polled (1 s) batch %s with autoAck: **%s msg/s popped** (pop p50 %s ms, p99 %s ms, "
                 "%s of %s pops empty), over %.0f s. CPU used: %.1f s of the machine's (%.2f cores), %.1f s of it "
                 "the broker's and PostgreSQL's: **%s msg/s popped per busy CPU** (%s per CPU of broker and "
                 "PostgreSQL alone; the reference published ~3,900 per CPU on 4 CPUs)." % (
                     n(float(push.get("msgs_per_s", 0) or 0)),
                     ms(int(push.get("req_p50_us", 0) or 0) / 1000.0), ms(int(push.get("req_p99_us", 0) or 0) / 1000.0),
                     meta.get("scale_combined_batch", "?"), n(popped),
                     ms(int(pop.get("pop_p50_us", 0) or 0) / 1000.0), ms(int(pop.get("pop_p99_us", 0) or 0) / 1000.0),
                     pop.get("empty_pops", "?"), pop.get("pops", "?"), secs, busy, busy / secs if secs else 0, own,
                     per(busy), per(own)))
        L.append("")

    # skew
    r, x = sc.get("skew"), res("skew")
    if r:
        us = lambda k: ms(int(x.get(k, 0) or 0) / 1000.0)
        L.append("Fairness under skew: %s one-message pushes/s (%s; %s pushers, paced) for %s s, %s%% to partition "
                 "p000000 and the rest uniform over 999 others, while 10 consumers pop (batch 1, autoAck, queue "
                 "mode; every partition and cursor made before). Wait = push ack to the pop response delivering "
                 "it; a message still undelivered when the point ends (60 s after the last push) counts with "
                 "what it had waited. Pushed %s (%s late by > 100 ms, push p99 %s ms), delivered %s, %s delivered "
                 "before their push was acked (wait 0)." % (
                     x.get("rate", "?"), "set by BENCH_SCALE_SKEW_RATE" if meta.get("scale_skew_source") == "set"
                     else "30% of this run's 10-consumer pop rate at 1,000 partitions, or 100 without that point",
                     x.get("pushers", "?"),
                     meta.get("scale_skew_secs", "30"), x.get("hot_pct", "?"), n(int(x.get("pushed", 0))),
                     x.get("late_pushes", "?"), us("push_p99_us"), n(int(x.get("delivered", 0))),
                     x.get("before_ack", "?")))
        L.append("")
        L += table(["partition class", "messages", "wait p50 ms", "wait p99 ms", "longest wait ms", "undelivered"], [
            ["hot (1 partition)", x.get("hot_n", "?"), us("hot_p50_us"), us("hot_p99_us"), us("hot_max_us"),
             x.get("undelivered_hot", "?")],
            ["cold (999 partitions)", x.get("cold_n", "?"), us("cold_p50_us"), us("cold_p99_us"), us("cold_max_us"),
             x.get("undelivered_cold", "?")],
            ["all", int(x.get("hot_n", 0)) + int(x.get("cold_n", 0)), us("all_p50_us"), us("all_p99_us"),
             us("all_max_us"), int(x.get("undelivered_hot", 0)) + int(x.get("undelivered_cold", 0))]])
        L.append("")

    # big queue
    if any(k.startswith("big_") for k in sc):
        body = []
        f, xf = sc.get("big_fill"), res("big-fill")
        if f:
            body.append(["fill: pushes of 1,000 messages, 4 threads, 100 partitions",
                         "%s msg/s%s" % (n(f["ops"]), " (timed out)" if xf.get("timed_out") == "1" else ""),
                         "%s messages in %s s; request p50 %s ms, p99 %s ms" % (
                             n(int(xf.get("messages", 0))), xf.get("seconds", "?"), ms(f["p50"]), ms(f["p99"]))])
        p_, xp = sc.get("big_pop"), res("big-pop")
        if p_:
            body.append(["pop with it full: 10 consumers, batch 1, autoAck, queue mode", "%s msg/s" % n(p_["ops"]),
                         "%s messages in %s s; pop p50 %s ms, p99 %s ms" % (
                             n(int(xp.get("delivered", 0))), xp.get("seconds", "?"), ms(p_["p50"]), ms(p_["p99"]))])
        c, xc = sc.get("big_consume"), res("big-consume")
        if c:
            body.append(["consume the rest: 10 consumers, batch 1,000", got(c, xc) + " msg/s",
                         "%s messages in %s s; pop p50 %s ms, p99 %s ms" % (
                             n(int(xc.get("delivered", 0))), xc.get("seconds", "?"), ms(c["p50"]), ms(c["p99"]))])
        t, xt = sc.get("big_retention"), res("big-retention")
        if t:
            body.append(["retention sweep (completedRetentionSeconds 1): consumed rows deleted",
                         "%s rows/s%s" % (n(t["ops"]), "" if xt.get("status") == "0" else " (%s)" % xt.get("status")),
                         "%s of %s consumed rows in %s s" % (n(int(xt.get("deleted", 0))),
                                                             n(int(xt.get("consumed", 0))), xt.get("seconds", "?"))])
        z = kv_file(os.path.join(work, "scale-sizes-big.txt"))
        if z:
            tot = lambda pre: sum(int(v) for k, v in z.items() if k.startswith(pre + "."))
            body.append(["queen.log_* on disk", "%s full" % size(tot("full")),
                         "log_messages %s full, %s after the sweep (a plain DELETE: the space is reused, not "
                         "returned)" % (size(int(z.get("full.log_messages", 0))),
                                        size(int(z.get("swept.log_messages", 0))))])
        L.append("A big queue (%s messages, 100 partitions, `completedRetentionSeconds` 1). The retention phase "
                 "runs on a broker restarted with `QUEEN_KV_EXPIRE_EVERY_MS=100 QUEEN_KV_EXPIRE_BATCH=50000` "
                 "(sql/log_maintenance.sql's steps run every 10 sweeper cycles, each deleting up to the batch; the defaults "
                 "delete at most 100 rows/s); its clock stops at the last increase of "
                 "`queen_sweeper_retention_deleted_total`." % n(int(meta.get("scale_big", "0") or 0)))
        L.append("")
        L += table(["phase", "figure", "detail"], body)
        L.append("")

    L.append("Whole scale section: %s s. Commands (`$BROKER` = the broker above):" % meta.get("scale_elapsed_s", "?"))
    L.append("")
    seen = set()
    for k in rows:
        if k[0] == "scale" and rows[k]["cmd"] not in seen:
            seen.add(rows[k]["cmd"])
            L.append("    " + rows[k]["cmd"])
    L.append("")
    return L


def render(work, out_path):
    meta, rows = load(work)
    conc = [int(c) for c in meta.get("conc", "1 8 32 64").split()]
    secs = meta.get("secs", "?")
    ops = ["put", "get", "incr", "putIfAbsent", "mix"]
    L = []
    L.append(BEGIN)
    L.append("")
    L.append("## Side by side (generated by `make bench`; a rerun replaces this section)")
    L.append("")
    L.append("- date %s, commit `%s`, %s s per point, whole run %s s" % (
        meta.get("date"), meta.get("commit"), secs, meta.get("elapsed_s", "?")))
    L.append("- machine: nproc %s (%s), memory %s, PostgreSQL %s" % (
        meta.get("nproc"), meta.get("cpu"), meta.get("mem"), meta.get("pg")))
    L.append("- CPU busy in the 2 s before the run (other users of the machine): %s" % meta.get("busy_before", "?"))
    L.append("- kernel autogroup scheduling (`/proc/sys/kernel/sched_autogroup_enabled`) during the run: %s; "
             "run.sh switches it off, because it shares the CPU between sessions and left runnable PostgreSQL "
             "backends off the CPU for up to 2.5 s (the hand-written 2026-12-02 afternoon section)"
             % meta.get("autogroup", "not recorded"))
    L.append("- load average (1/5/15 min) at start %s, after the one-op points %s, at end %s (the later two count "
             "the benchmark's own runnable clients and backends, up to 2 x c; the `others` column of the CPU "
             "table is the measure of other users): the machine is shared, and every client (pgbench, wrk, redis-benchmark, wire_bench) runs on the same 2 cores "
             "as PostgreSQL and the broker" % (meta.get("load_start"), meta.get("load_mid"), meta.get("load_end")))
    L.append("- PostgreSQL (private cluster, `scripts/pg.sh up DIR PORT`, durable): %s; checkpoints are kept out "
             "of the measured window (`ALTER SYSTEM` checkpoint_timeout 1h, max_wal_size 20GB) so that a "
             "checkpoint's full-page-write burst cannot land in one side's point only" % meta.get("pg_settings"))
    L.append("- broker: `QUEEN_ACCESS_LOG=0 QUEEN_LOG_LEVEL=warn QUEEN_SLOW_REQUEST_MS=100 build/queen serve`, "
             "pool and HTTP threads "
             "at their defaults (4 per core, at least 8); %s" % (
                 "`QUEEN_PG_POOL` not set" if "pg_pool" not in meta else "QUEEN_PG_POOL=" + meta["pg_pool"]))
    L.append("- data: `bench/pgbench/seed.sql` (100k counters in ns `bench`, 100k small objects in ns "
             "`bench_put`), keys uniform at random; putIfAbsent one-op = a fresh marker (key from 1e9, 1 h TTL, "
             "the insert path); the mix's putIfAbsent hits a seeded key (verdict `exists`)")
    L.append("- reproduce: `make bench` (everything: about 8-9 minutes with the build without the scale section, "
             "which alone takes about 1.5 h at its defaults, see section 10); a subset: `BENCH_ONLY=direct,broker "
             "BENCH_CONC=32 BENCH_SECS=5 bash bench/run.sh` after `make`; single points: the commands under "
             "each table, against a broker and cluster started as run.sh does (ports: PostgreSQL %s, broker %s, "
             "redis %s)" % (meta.get("pg_port", "31460"), int(meta.get("pg_port", "31460")) + 1,
                           int(meta.get("pg_port", "31460")) + 2))
    L.append("- `*` after a figure: other users of the machine burnt more than 10% of the CPU during that "
             "point (measured from /proc, see the CPU table); read it with care")
    L.append("- latency: p50/p99 in ms per call (pgbench: per-transaction `-l` logs; wrk: its own per-request "
             "histogram), both with wrk's correction for coordinated omission (wrk adds the calls a stalled "
             "connection did not make; `co_percentiles` in bench/report.py does the same to pgbench's logs, so "
             "one stall of the machine weighs the same on both sides). Short points (%s s) on 2 shared cores: "
             "expect several %% run-to-run noise." % secs)
    slow = slow_requests(os.path.join(work, "logs", "broker.log"))
    if slow is not None:
        L.append("- requests the broker answered 100 ms or more after they arrived (its `slow request` log lines, "
                 "long polls excluded): %s" % slow)
    if meta.get("kv_autovacuum"):
        L.append("- during the run: %s (its CPU counts as PostgreSQL's in whichever point it overlapped)"
                 % meta["kv_autovacuum"])
    if meta.get("kv_route") == "missing":
        L.append("- **POST /api/v1/kv was not served by this build: broker, batch-through-broker and RSS "
                 "points are missing**")
    if "wire" in meta:
        L.append("- **wire scenario did not run: %s**" % meta["wire"])
    L.append("")

    # ---------------- targets
    L.append("### Targets")
    L.append("")
    body = []
    # Broker/direct one-op throughput: >= 1.0 where requests queue (c=32,
    # 64), >= 0.9 at c=8.
    for concs, floor in (((32, 64), 1.0), ((8,), 0.9)):
        tg = []
        for c in concs:
            for op in ops:
                x = ratio(rows.get(("broker", op, c)), rows.get(("direct", op, c)))
                if x is not None:
                    tg.append(("%s c=%d" % (op, c), x))
        name = "broker one-op >= %.1f x direct at c=%s" % (floor, ", ".join(str(c) for c in concs))
        if tg:
            worst = min(tg, key=lambda t: t[1])
            body.append([name, "min %.2f (%s), max %.2f; %s" % (
                             worst[1], worst[0], max(x for _, x in tg), ", ".join("%s %.2f" % t for t in tg)),
                         "met" if worst[1] >= floor else "missed"])
        else:
            body.append([name, "not measured", "n/a"])
    p50 = []
    for op in ops:
        d, b = rows.get(("direct", op, 1)), rows.get(("broker", op, 1))
        if d and b:
            p50.append((op, b["p50"] - d["p50"]))
    if p50:
        body.append(["broker p50 - direct p50 <= 0.1 ms at c=1", ", ".join("%s %+.2f ms" % t for t in p50),
                     "met" if max(x for _, x in p50) <= 0.1 else "missed"])
    deltas = []
    for op in ops:
        d, b = rows.get(("direct", op, 32)), rows.get(("broker", op, 32))
        if d and b:
            deltas.append((op, b["p99"] - d["p99"]))
    if deltas:
        body.append(["broker p99 - direct p99 <= 1 ms at c=32",
                     ", ".join("%s %+.2f ms" % t for t in deltas),
                     "met" if max(x for _, x in deltas) <= 1.0 else
                     ("met for %s" % ", ".join(o for o, x in deltas if x <= 1.0) if any(x <= 1.0 for _, x in deltas)
                      else "missed")])
    else:
        body.append(["broker p99 - direct p99 <= 1 ms at c=32", "not measured", "n/a"])
    bs = []
    for c in conc:
        x = ratio(rows.get(("batch", "broker25", c)), rows.get(("broker", "mix", c)))
        if x is not None:
            bs.append((c, x))
    if bs:
        body.append(["25-op batches >= 4 x one-op ops/s (broker, mix)",
                     ", ".join("c=%d %.1fx" % t for t in bs),
                     "met" if min(x for _, x in bs) >= 4 else
                     ("met at c=%s" % ",".join(str(c) for c, x in bs if x >= 4) if any(x >= 4 for _, x in bs)
                      else "missed")])
    else:
        body.append(["25-op batches >= 4 x one-op ops/s", "not measured", "n/a"])
    if "rss_256_peak_kb" in meta:
        peak = int(meta["rss_256_peak_kb"]) / 1024.0
        hwm = int(meta.get("rss_hwm_kb", 0)) / 1024.0
        body.append(["broker RSS < 32 MiB at 256 connections",
                     "peak VmRSS %.1f MiB under wrk -c256 (%s established), VmHWM of the whole run %.1f MiB" % (
                         peak, meta.get("rss_256_conns"), hwm),
                     "met" if max(peak, hwm) < 32 else "missed"])
    else:
        body.append(["broker RSS < 32 MiB at 256 connections", "not measured", "n/a"])
    # issue 13: the price of the rules, and the wire
    kr = []
    for raw, op in (("select", "get"), ("upsert", "put"), ("incr", "incr")):
        for c in (1, 8):
            x = ratio(rows.get(("direct", op, c)), rows.get(("raw", raw, c)))
            if x is not None:
                kr.append(("%s c=%d" % (op, c), x))
    if kr:
        body.append(["kv_apply_v1 one-op >= 0.6 x the raw statement (get, put, incr; c=1, 8)",
                     ", ".join("%s %.2f" % t for t in kr),
                     "met" if min(x for _, x in kr) >= 0.6 else
                     ("met for %s" % ", ".join(n for n, x in kr if x >= 0.6) if any(x >= 0.6 for _, x in kr)
                      else "missed")])
    else:
        body.append(["kv_apply_v1 one-op >= 0.6 x the raw statement", "not measured", "n/a"])
    wr = [(k[2], r["ops"]) for k, r in rows.items() if k[0] == "wire" and k[1] == "tx1"]
    if wr:
        def floor(c):
            f = rows.get(("wireraw", "tx1", c))
            return " (raw SQL floor %s)" % n(f["ops"]) if f else ""
        body.append(["wire >= 3,000 messages/s, one message per transaction, 4 and 16 consumers",
                     ", ".join("%d consumers %s%s" % (c, n(x), floor(c)) for c, x in sorted(wr)),
                     "met" if min(x for _, x in wr) >= 3000 else "missed"])
    else:
        body.append(["wire >= 3,000 messages/s, one message per transaction", "not measured", "n/a"])
    ep = []
    for k, r in rows.items():
        if k[0] == "wire":
            extra = kv_line(os.path.join(work, "wire-%s-%s.result" % (k[1][2:], k[2])), "WIRERESULT") or {}
            if int(extra.get("pops", 0) or 0) > 0:
                ep.append((k[1][2:], k[2], int(extra["empty_pops"]) / float(extra["pops"])))
    if ep:
        body.append(["empty pops <= 10% (consumers <= partitions, queue with work)",
                     ", ".join("%s msg/tx %d consumers %.0f%%" % (t, c, 100 * x) for t, c, x in sorted(ep)),
                     "met" if max(x for _, _, x in ep) <= 0.10 else "missed"])
    L += table(["target", "figure (same run)", "verdict"], body)
    L.append("")

    # ---------------- one op
    L.append("### 1+2. One op: direct `kv_apply_v1` (pgbench) vs the broker (wrk, `POST /api/v1/kv`)")
    L.append("")
    body = []
    for op in ops:
        for c in conc:
            d, b = rows.get(("direct", op, c)), rows.get(("broker", op, c))
            if d is None and b is None:
                continue
            x = ratio(b, d)
            delta = "%+.2f" % (b["p99"] - d["p99"]) if d and b else "n/a"
            body.append([op, c] + cell(d) + cell(b) + [rs(x), delta])
    L += table(["op", "c", "direct ops/s", "p50 ms", "p99 ms", "broker ops/s", "p50 ms", "p99 ms",
                "broker/direct", "p99 broker-direct ms"], body)
    L.append("")
    L.append("Commands (a row's `-c`; `$URL` = the private cluster, `postgresql://postgres@127.0.0.1:%s/queen`):"
             % (meta.get("pg_port", "31460")))
    L.append("")
    keys = [(s, op, c) for op in ops for c in conc for s in ("direct", "broker")]
    L += commands(rows, keys)
    L.append("")

    # ---------------- where the CPU went
    body = []
    for op in ops + ["batch25"]:
        for c in conc:
            if c < 32:
                continue
            if op == "batch25":
                d, b = rows.get(("batch", "direct25", c)), rows.get(("batch", "broker25", c))
            else:
                d, b = rows.get(("direct", op, c)), rows.get(("broker", op, c))
            if not (d and b and d.get("cpu") and b.get("cpu")):
                continue
            dt, dc, _, dp, do = d["cpu"]
            bt, bc, bb, bp, bo = b["cpu"]
            body.append([op, c, "%.0f" % dp, "%.0f" % dc, "%.0f" % do, "%.0f" % bp, "%.0f" % bb, "%.0f" % bc,
                         "%.0f" % bo, rs((dp + dc) / (bp + bb + bc) if bp + bb + bc else None),
                         rs(ratio(b, d))])
    if body:
        L.append("Where the CPU went, in microseconds of CPU per op (this cluster's PostgreSQL processes, the "
                 "client's own user+sys, the broker's; `others` = what other users of the machine burnt "
                 "meanwhile, per op of this point). The clients, the broker and PostgreSQL share the same 2 "
                 "cores, so a saturated machine gives broker/direct close to the CPU ratio:")
        L.append("")
        L += table(["op", "c", "direct: postgres", "pgbench", "others", "broker path: postgres", "broker",
                    "wrk", "others", "CPU ratio direct/broker", "measured broker/direct"], body)
        L.append("")

    # ---------------- batches
    L.append("### 3. Batches of 25 ops (the mix), ops/s counted per op")
    L.append("")
    body = []
    for c in conc:
        d, b = rows.get(("batch", "direct25", c)), rows.get(("batch", "broker25", c))
        if d is None and b is None:
            continue
        body.append([c] + cell(d) + cell(b) + [
            rs(ratio(b, d)), rs(ratio(b, rows.get(("broker", "mix", c))), 1),
            rs(ratio(d, rows.get(("direct", "mix", c))), 1)])
    L += table(["c", "direct ops/s", "p50 ms/call", "p99 ms/call", "broker ops/s", "p50 ms/call", "p99 ms/call",
                "broker/direct", "batch/single broker", "batch/single direct"], body)
    L.append("")
    L += commands(rows, [(s, n_, c) for c in conc for s, n_ in (("batch", "direct25"), ("batch", "broker25"))])
    L.append("")

    # ---------------- raw floor
    L.append("### 5. The price of the rules: `kv_apply_v1` vs the raw statement (both pgbench, same table)")
    L.append("")
    body = []
    for raw, op in (("upsert", "put"), ("select", "get"), ("incr", "incr")):
        for c in conc:
            r, k = rows.get(("raw", raw, c)), rows.get(("direct", op, c))
            if r is None and k is None:
                continue
            body.append(["%s vs %s" % (op, raw), c] + cell(r) + cell(k) + [rs(ratio(k, r))])
    L += table(["kv_apply_v1 op vs raw", "c", "raw ops/s", "p50 ms", "p99 ms", "kv_apply_v1 ops/s", "p50 ms",
                "p99 ms", "kv_apply_v1/raw"], body)
    L.append("")
    body = []
    for c in conc:
        r, f, k = rows.get(("raw", "select", c)), rows.get(("plpgsql", "get", c)), rows.get(("direct", "get", c))
        if r and f and k:
            body.append([c, n(r["ops"]), n(f["ops"]), n(k["ops"]), rs(ratio(f, r)), rs(ratio(k, f)), rs(ratio(k, r))])
    if body:
        L.append("Where a get's price goes: the raw select, the same read in a bare PL/pgSQL function "
                 "(`bench/pgbench/plpgsql_get_fn.sql`: same arguments, no checks, no result shape) and "
                 "`kv_apply_v1`, each run right after the other.")
        L.append("")
        L += table(["c", "raw ops/s", "bare PL/pgSQL ops/s", "kv_apply_v1 ops/s", "PL/pgSQL/raw",
                    "kv_apply_v1/PL/pgSQL", "kv_apply_v1/raw"], body)
        L.append("")
    L += commands(rows, [("raw", s, c) for c in conc for s in ("upsert", "select", "incr")] +
                  [("plpgsql", "get", c) for c in conc])
    L.append("")

    # ---------------- wire
    L.append("### 4. The transaction wire: pop, then ack + push + putIfAbsent marker per message, "
             "1 or 10 messages per `POST /api/v1/transaction`")
    L.append("")
    wire = sorted(((k, r) for k, r in rows.items() if k[0] == "wire"),
                  key=lambda kr: (int(kr[0][1][2:]) if kr[0][1].startswith("tx") else 0, kr[0][2]))
    if wire:
        body = []
        for k, r in wire:
            per = k[1][2:] if k[1].startswith("tx") else "1"
            extra = kv_line(os.path.join(work, "wire-%s-%s.result" % (per, k[2])), "WIRERESULT") or {}
            cpu = r.get("cpu") or [0, 0, 0, 0, 0]
            raw = rows.get(("wireraw", k[1], k[2]))
            body.append([per, k[2], 16, n(r["ops"]) + ("\\*" if noisy(r) else "") + flag(r),
                         (n(raw["ops"]) + ("\\*" if noisy(raw) else "")) if raw else "",
                         ms(r["p50"]), ms(r["p99"]),
                         "%.2f" % (int(extra.get("pop_p50_us", 0)) / 1000.0),
                         "%.2f" % (int(extra.get("pop_p99_us", 0)) / 1000.0),
                         extra.get("messages", "?"), "%s of %s" % (extra.get("empty_pops", "?"), extra.get("pops", "?")),
                         "%.0f / %.0f / %.0f" % (cpu[3], cpu[2], cpu[1])])
        L += table(["messages per transaction", "consumers", "partitions", "messages/s",
                    "raw SQL floor messages/s", "commit p50 ms",
                    "commit p99 ms", "pop p50 ms", "pop p99 ms", "messages committed", "empty pops (204) of pops",
                    "CPU us/message: postgres / broker / client"], body)
        L.append("")
        L.append("Pop batch 10, lease 60 s; each point has its own queue, prefilled (16 partitions, round robin) "
                 "before the clock starts; a consumer finishes its batch past the deadline (no lease is left "
                 "behind) and the elapsed time includes that tail; a message counts once its transaction "
                 "committed (`success:true`). Commands:")
        L.append("")
        L += ["    " + r["cmd"] for _, r in wire]
        raws = sorted((k, r) for k, r in rows.items() if k[0] == "wireraw")
        if raws:
            L.append("")
            L.append("The raw SQL floor: the same work per message on the same partitions with none of the rules "
                     "(cursor advance, offset bump, message insert and marker as one statement, one commit; every "
                     "tenth message a lease plus a read of 10 as the pop), pgbench on the same cluster right after "
                     "the point. It is what this machine does for the work itself; the broker's figure over it is "
                     "the price of the rules, the HTTP hop and the client. `$URL` as above, after "
                     "`psql $URL -v q=QUEUE -f bench/wire_raw/setup.sql`:")
            L.append("")
            L += ["    " + r["cmd"] for _, r in raws]
    else:
        L.append("Not measured in this run (see above).")
    L.append("")

    # ---------------- push
    L.append("### 8. Push through the broker: messages per request")
    L.append("")
    body = []
    for nmsg in (1, 10, 100):
        for c in conc:
            r = rows.get(("push", "push%d" % nmsg, c))
            if r is None:
                continue
            cpu = r.get("cpu") or [0, 0, 0, 0, 0]
            body.append([nmsg, c, n(r["ops"]) + ("\\*" if noisy(r) else "") + flag(r), ms(r["p50"]), ms(r["p99"]),
                         "%.0f / %.0f / %.0f" % (cpu[3], cpu[2], cpu[1])])
    if body:
        L += table(["messages per request", "c", "messages/s", "p50 ms (request)", "p99 ms (request)",
                    "CPU us/message: postgres / broker / client"], body)
        L.append("")
        L.append("`POST /api/v1/push`, one queue, a partition of 16 drawn per request; every message new. Commands:")
        L.append("")
        L += commands(rows, [("push", "push%d" % nmsg, c) for nmsg in (1, 10, 100) for c in conc])
    else:
        L.append("Not measured in this run.")
    L.append("")

    # ---------------- redis
    L.append("### 6. A KV beside the broker: redis-server (no persistence) vs the broker and direct SQL")
    L.append("")
    body = []
    for rop, op in (("SET", "put"), ("GET", "get"), ("INCR", "incr")):
        for c in conc:
            r = rows.get(("redis", rop, c))
            if r is None:
                continue
            b, d = rows.get(("broker", op, c)), rows.get(("direct", op, c))
            body.append([rop, c] + cell(r) + [n(b["ops"]) if b else "n/a", n(d["ops"]) if d else "n/a",
                                              rs(ratio(r, b), 1), rs(ratio(r, d), 1)])
    L += table(["redis op", "c", "redis ops/s", "p50 ms", "p99 ms", "broker ops/s (same op)",
                "direct ops/s", "redis/broker", "redis/direct"], body)
    L.append("")
    L.append("redis %s, `--save '' --appendonly no` (nothing reaches a disk: that is the price of "
             "transactional, durable state made visible), -r 100000 random keys. Commands:" % meta.get("redis", "?"))
    L.append("")
    L += commands(rows, [("redis", o, c) for c in conc for o in ("SET", "GET", "INCR")])
    L.append("")

    # ---------------- rss
    L.append("### 7. Broker memory")
    L.append("")
    if "rss_256_peak_kb" in meta:
        r = rows.get(("rss", "mix", 256))
        mb = lambda k: "%.1f MiB" % (int(meta.get(k, 0)) / 1024.0)
        L += table(["when", "VmRSS"], [
            ["after boot, idle (threads: %s)" % meta.get("broker_threads_boot"), mb("rss_boot_kb")],
            ["idle after every scenario above", mb("rss_idle_after_kb")],
            ["peak under wrk -t2 -c256 mix (%s established connections, sampled every 0.2 s)"
             % meta.get("rss_256_conns"), mb("rss_256_peak_kb")],
            ["VmHWM (peak of the whole run)", mb("rss_hwm_kb")],
            ["1 s after the 256-connection load", mb("rss_after_256_kb")],
        ])
        if r:
            L.append("")
            L.append("At 256 connections the mix ran at %s ops/s, p50 %s ms, p99 %s ms%s. Command:" % (
                n(r["ops"]), ms(r["p50"]), ms(r["p99"]), flag(r)))
            L.append("")
            L.append("    " + r["cmd"])
    else:
        L.append("Not measured in this run.")
    L.append("")
    L += render_scale(work, meta, rows)
    L.append(END)

    text = open(out_path).read() if os.path.exists(out_path) else "# Benchmarks\n\n"
    block = "\n".join(L) + "\n"
    if BEGIN in text and END in text:
        pre = text[:text.index(BEGIN)]
        post = text[text.index(END) + len(END):].lstrip("\n")
        text = pre + block + ("\n" + post if post else "")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    with open(out_path, "w") as fh:
        fh.write(text)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cmd = sys.argv[1]
    if cmd == "pgbench":
        cmd_pgbench(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "1")
    elif cmd == "wrk":
        cmd_wrk(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "1")
    elif cmd == "wire":
        cmd_wire(sys.argv[2])
    elif cmd == "redis":
        cmd_redis(sys.argv[2])
    elif cmd == "scale":
        cmd_scale(sys.argv[2])
    elif cmd == "render":
        render(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
