#!/usr/bin/env python3
"""Summary and plots of a soak run (bench/soak.sh), and the comparison table.

  soak_report.py WORK DEST
      WORK: a run's directory (soak.csv, meta.env, driver.out, pg/server.log).
      Writes WORK/summary.json. DEST = the repository's bench directory: the
      summary goes between the soak:begin/soak:end markers of bench/SOAK.md
      and the plots to bench/soak/; any other DEST gets DEST/SOAK.md and
      DEST/*.png.
  soak_report.py compare OUT_MD SECTION WORK...
      The runs' summaries side by side, between the soak-compare-SECTION:begin/end
      markers of OUT_MD (the rest of the file is kept).

Numbers are printed as measured: truncated to the shown digits, never rounded up.
"""
import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys

OPS = ["put_short", "put_long", "incr", "get", "prefix", "push", "pop", "tx"]


def trunc(x, digits=1):
    """x cut (not rounded) to `digits` decimals: a figure is never shown higher than measured."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    f = 10 ** digits
    v = math.floor(x * f) / f if x >= 0 else math.ceil(x * f) / f
    return f"{v:.{digits}f}"


def load_meta(work):
    meta = {}
    with open(os.path.join(work, "meta.env")) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                meta[k] = v
    return meta


def load_rows(work):
    rows = []
    with open(os.path.join(work, "soak.csv")) as f:
        for r in csv.DictReader(f):
            rows.append({k: (float(v) if v not in ("", None) else None) for k, v in r.items()})
    return rows


def driver_lines(work):
    ops, result = {}, {}
    with open(os.path.join(work, "driver.out")) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            kv = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
            if parts[0] == "SOAKOP":
                ops[kv["op"]] = {k: float(v) for k, v in kv.items() if k != "op"}
            elif parts[0] == "SOAKRESULT":
                result = {k: float(v) for k, v in kv.items()}
    return ops, result


VACUUM_RE = re.compile(r'automatic vacuum of table "(?:[^"]*\.)?([^".]+)"')  # "db.schema.table": the table
ELAPSED_RE = re.compile(r"elapsed: ([0-9.]+) s")


def lock_kind(mode, what):
    """What a logged lock wait was on, in words."""
    if "of class 1262 of database 0" in what:
        # the one lock NOTIFY takes at commit to append to the notification queue
        return "the NOTIFY queue at commit"
    if what.startswith("transaction"):
        return "a row held by another transaction"
    if what.startswith("tuple"):
        return "a row (tuple lock)"
    if what.startswith("relation"):
        return f"a table ({mode})"
    return what.split(" of ")[0]


def server_log(work):
    """Autovacuum runs per table with their elapsed seconds; lock waits logged."""
    vac, waits, acquired_ms, checkpoints = {}, 0, [], 0
    path = os.path.join(work, "pg", "server.log")
    if not os.path.exists(path):
        return vac, waits, acquired_ms, checkpoints
    table = None
    with open(path, errors="replace") as f:
        for line in f:
            m = VACUUM_RE.search(line)
            if m:
                table = m.group(1)
                vac.setdefault(table, [])
                continue
            if table is not None:
                m = ELAPSED_RE.search(line)
                if m:
                    vac[table].append(float(m.group(1)))
                    table = None
                    continue
            if "still waiting for" in line:
                waits += 1
            m = re.search(r"acquired (\S+) on (.*) after ([0-9.]+) ms", line)
            if m:
                acquired_ms.append((lock_kind(m.group(1), m.group(2)), float(m.group(3))))
            if "checkpoint complete" in line:
                checkpoints += 1
    return vac, waits, acquired_ms, checkpoints


def col(rows, name):
    return [r[name] for r in rows if r.get(name) is not None]


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def median(xs):
    return sorted(xs)[len(xs) // 2] if xs else float("nan")


def writer_p99(rows):
    return [max(r[f"{op}_p99_ms"] or 0 for op in ("put_short", "put_long", "incr", "tx")) for r in rows]


def weighted(rows, ratio, weight):
    num = sum(r[ratio] * r[weight] for r in rows if r.get(ratio) is not None and r.get(weight))
    den = sum(r[weight] for r in rows if r.get(ratio) is not None and r.get(weight))
    return num / den if den else float("nan")


def summarize(work):
    meta = load_meta(work)
    rows = load_rows(work)
    ops, result = driver_lines(work)
    vac, waits, acquired_ms, checkpoints = server_log(work)
    if not rows:
        raise SystemExit(f"soak_report: {work}/soak.csv has no rows")
    n = len(rows)
    steady = rows[n - max(1, n // 3):]  # the last third: past the prefill's settling and the burst
    burst_t, cleared_t = result.get("burst_t", -1), result.get("burst_cleared_t", -1)
    sample = float(meta.get("sample", 5))
    has_burst = result.get("burst_keys", 0) > 0
    in_burst = [r for r in rows if has_burst and r["t_s"] >= burst_t and
                (cleared_t < 0 or r["t_s"] <= cleared_t + sample)]
    before_burst = [r for r in rows if has_burst and r["t_s"] < burst_t]
    s = {
        "tag": os.path.basename(os.path.normpath(work)),
        "meta": meta,
        "rows": n,
        "ops": ops,
        "result": result,
        "steady_ops_s": {op: mean(col(steady, f"{op}_ops_s")) for op in OPS},
        "steady_p99_ms_median": {op: sorted(col(steady, f"{op}_p99_ms"))[len(col(steady, f"{op}_p99_ms")) // 2]
                                 if col(steady, f"{op}_p99_ms") else float("nan") for op in OPS},
        "errors_total": sum(sum(col(rows, f"{op}_err")) for op in OPS),
        "kv_hot_ratio": weighted(rows, "kv_hot_ratio", "kv_upd_s"),
        "kv_hot_ratio_steady": weighted(steady, "kv_hot_ratio", "kv_upd_s"),
        "logcons_hot_ratio": mean(col(rows, "logcons_hot_ratio")),
        "kv_heap_mb": [rows[0]["kv_heap_mb"], rows[-1]["kv_heap_mb"], max(col(rows, "kv_heap_mb"))],
        "kv_idx_mb": [rows[0]["kv_idx_mb"], rows[-1]["kv_idx_mb"], max(col(rows, "kv_idx_mb"))],
        "kv_live_end": rows[-1]["kv_live"],
        "kv_dead_steady_mean": mean(col(steady, "kv_dead")),
        "kv_dead_steady_max": max(col(steady, "kv_dead")),
        "kv_dead_max": max(col(rows, "kv_dead")),
        "kv_dead_end": rows[-1]["kv_dead"],
        "kv_autovacuums": rows[-1]["kv_autovacuums"] - rows[0]["kv_autovacuums"],
        "logmsg_heap_mb": [rows[0]["logmsg_heap_mb"], rows[-1]["logmsg_heap_mb"]],
        "logmsg_idx_mb": [rows[0]["logmsg_idx_mb"], rows[-1]["logmsg_idx_mb"]],
        "logmsg_dead_max": max(col(rows, "logmsg_dead")),
        "logcons_mb": [rows[0]["logcons_mb"], rows[-1]["logcons_mb"]],
        "logcons_dead_max": max(col(rows, "logcons_dead")),
        "vacuum_runs": {t: {"count": len(v), "median_s": sorted(v)[len(v) // 2] if v else None,
                            "max_s": max(v) if v else None, "sum_s": sum(v)} for t, v in vac.items()},
        "wal_bytes_per_write": sum(col(rows, "wal_mb_s")) * 1048576 / max(1e-9, sum(col(rows, "writes_s"))),
        "wal_bytes_per_write_steady": sum(col(steady, "wal_mb_s")) * 1048576 / max(1e-9, sum(col(steady, "writes_s"))),
        "wal_records_per_write": weighted(rows, "wal_records_per_write", "writes_s"),
        "wal_records_per_write_steady": weighted(steady, "wal_records_per_write", "writes_s"),
        "wal_fpi_s_mean": mean(col(rows, "wal_fpi_s")),
        "writes_s_mean": mean(col(rows, "writes_s")),
        "writes_s_steady": mean(col(steady, "writes_s")),
        "checkpoints": checkpoints,
        "sweeper_lag_ms_max": max(col(rows, "sweeper_lag_ms")),
        "sweeper_rows_per_pass_max": max(col(rows, "sweeper_rows_per_pass") or [0]),
        "sweeper_rows_per_pass_steady": mean(col(steady, "sweeper_rows_per_pass")),
        "sweeper_deleted_s_max": max(col(rows, "sweeper_deleted_s")),
        "sweeper_last_pass_ms_max": max(col(rows, "sweeper_last_pass_ms")),
        "sweeper_cpu_pct_burst": mean(col(in_burst, "sweeper_cpu_pct")),
        "sweeper_cpu_pct_steady": mean(col(steady, "sweeper_cpu_pct")),
        "pg_cpu_pct_burst": mean(col(in_burst, "pg_cpu_pct")),
        "pg_cpu_pct_mean": mean(col(rows, "pg_cpu_pct")),
        "broker_cpu_pct_mean": mean(col(rows, "broker_cpu_pct")),
        # per window, the worst p99 of the writers (put, incr, tx); then the median of those windows
        "write_p99_ms_burst_max": median(writer_p99(in_burst)),
        "write_p99_ms_before_burst_max": median(writer_p99(before_burst)),
        "lock_waiters_sampled_max": max(col(rows, "lock_waiters")),
        "lock_waiters_sampled_burst_max": max(col(in_burst, "lock_waiters") or [0]),
        "lock_waits_logged": waits,
        "lock_waits_by_kind": {k: sorted(ms for kk, ms in acquired_ms if kk == k)
                               for k in sorted({kk for kk, _ in acquired_ms})},
        "rss_mb": [rows[0]["broker_rss_mb"], rows[-1]["broker_rss_mb"], max(col(rows, "broker_rss_mb"))],
        "load1_mean": mean(col(rows, "load1")),
        "load1_max": max(col(rows, "load1")),
        "load1_last": rows[-1]["load1"],
    }
    with open(os.path.join(work, "summary.json"), "w") as f:
        json.dump(s, f, indent=1, default=lambda x: None)
    return s


PLOTS = {
    "throughput": """
set multiplot layout 2,1 title "{title}"
set ylabel "calls/s"; set key outside right
plot {ops}
set ylabel "p99 ms (per {sample} s window)"; set logscale y
plot {p99}
unset logscale y
unset multiplot""",
    "storage": """
set multiplot layout 2,1 title "{title}"
set ylabel "MiB"; set key outside right
plot F u "t_s":"kv_heap_mb" w l t "queen.kv heap", F u "t_s":"kv_idx_mb" w l t "queen.kv indexes", \\
     F u "t_s":"logmsg_heap_mb" w l t "log_messages heap", F u "t_s":"logmsg_idx_mb" w l t "log_messages indexes", \\
     F u "t_s":"logcons_mb" w l t "log_consumers (all)"
set ylabel "dead tuples"; set y2label "HOT ratio"; set y2range [0:1]; set y2tics
plot F u "t_s":"kv_dead" w l t "queen.kv dead", F u "t_s":"logcons_dead" w l t "log_consumers dead", \\
     F u "t_s":"logmsg_dead" w l t "log_messages dead", F u "t_s":"kv_hot_ratio" axes x1y2 w l t "queen.kv HOT ratio"
unset y2tics; unset y2label
unset multiplot""",
    "wal_sweeper": """
set multiplot layout 2,1 title "{title}"
set ylabel "WAL bytes per write call"; set key outside right; set logscale y
plot F u "t_s":"wal_bytes_per_write" w l t "WAL bytes / write", F u "t_s":(column("wal_fpi_s")+1) w l t "full-page images/s (+1)"
set ylabel "ms / rows"
plot F u "t_s":(column("sweeper_lag_ms")+1) w l t "sweeper lagMs (+1)", F u "t_s":(column("burst_left")+1) w l t "burst keys left (+1)", \\
     F u "t_s":(column("sweeper_deleted_s")+1) w l t "rows swept/s (+1)", F u "t_s":(column("lock_waiters")+1) w p t "lock waiters sampled (+1)"
unset logscale y
unset multiplot""",
    "resources": """
set multiplot layout 2,1 title "{title}"
set ylabel "MiB"; set key outside right
plot F u "t_s":"broker_rss_mb" w l t "broker RSS"
set ylabel "% of one core / load"
plot F u "t_s":"pg_cpu_pct" w l t "PostgreSQL CPU %", F u "t_s":"broker_cpu_pct" w l t "broker CPU %", \\
     F u "t_s":"sweeper_cpu_pct" w l t "sweeper backend CPU %", F u "t_s":(column("load1")*10) w l t "load1 x10"
unset multiplot""",
}


def plot(work, dest, prefix, title, sample):
    if shutil.which("gnuplot") is None:
        print("soak_report: gnuplot not found, no plots (make deps installs gnuplot-nox)", file=sys.stderr)
        return []
    made = []
    ops = ", ".join(f'F u "t_s":"{op}_ops_s" w l t "{op}"' for op in OPS)
    p99 = ", ".join(f'F u "t_s":(column("{op}_p99_ms") > 0 ? column("{op}_p99_ms") : 1/0) w l t "{op}"' for op in OPS)
    for name, body in PLOTS.items():
        out = os.path.join(dest, f"{prefix}{name}.png")
        script = (f'set terminal pngcairo size 900,640 font ",9"\nset output "{out}"\n'
                  f'set datafile separator ","\nF = "{os.path.join(work, "soak.csv")}"\n'
                  f'set termoption noenhanced\nset xlabel "seconds"; set grid\n' + body.format(title=title, ops=ops, p99=p99, sample=sample))
        subprocess.run(["gnuplot"], input=script.encode(), check=True)
        made.append(out)
    return made


def fmt_vac(v):
    if not v:
        return "none"
    return f"{v['count']} (median {trunc(v['median_s'], 2)} s, max {trunc(v['max_s'], 2)} s)"


def render(s, pngs, link_prefix):
    m = s["meta"]
    r = s["result"]
    out = []
    out.append(f"Command: `{m.get('command')}` (settings: {m.get('knobs')}). Date {m.get('date')}, commit {m.get('commit')}.")
    out.append(f"Machine: {m.get('nproc')} cores ({m.get('cpu')}), {m.get('mem')}, shared with other work: load average "
               f"{m.get('load_start')} at the start, {m.get('load_end') or 'not recorded (last sample load1 ' + trunc(s['load1_last'], 2) + ')'} at the end, load1 mean {trunc(s['load1_mean'], 2)} "
               f"and max {trunc(s['load1_max'], 2)} over the run; CPU busy {m.get('busy_before')} in the 2 s before it began.")
    out.append(f"PostgreSQL {m.get('pg')}: {m.get('pg_settings')}. queen.kv reloptions: `{m.get('kv_reloptions')}`, "
               f"kv_version_seq cache {m.get('kv_seq_cache')}.")
    out.append(f"Load: {m.get('kv_threads')} kv clients, 1 pusher, {m.get('msg_consumers')} consumers, closed loop; "
               f"{trunc(r.get('seconds', 0), 1)} s measured, a row every {m.get('sample')} s ({s['rows']} rows), "
               f"prefill {trunc(r.get('prefill_s', 0), 1)} s. Errors: {int(s['errors_total'])}.")
    out.append("")
    out.append("| op | calls | errors | calls/s (run) | calls/s (last third) | p50 ms | p99 ms | p99.9 ms |")
    out.append("|---|---|---|---|---|---|---|---|")
    for op in OPS:
        o = s["ops"].get(op, {})
        out.append(f"| {op} | {int(o.get('calls', 0))} | {int(o.get('errors', 0))} | {trunc(o.get('per_s', 0))} | "
                   f"{trunc(s['steady_ops_s'][op])} | {trunc(o.get('p50_ms', 0), 2)} | {trunc(o.get('p99_ms', 0), 2)} | "
                   f"{trunc(o.get('p999_ms', 0), 2)} |")
    out.append("")
    out.append("Latencies come from log buckets and are each bucket's upper edge (at most 1/16 above the true value). "
               f"pop counts pops that returned messages; {int(s['ops'].get('pop', {}).get('empty', 0))} pops were empty (204).")
    out.append("")
    out.append("| storage | start | end | max |")
    out.append("|---|---|---|---|")
    out.append(f"| queen.kv heap MiB | {trunc(s['kv_heap_mb'][0], 2)} | {trunc(s['kv_heap_mb'][1], 2)} | {trunc(s['kv_heap_mb'][2], 2)} |")
    out.append(f"| queen.kv indexes MiB | {trunc(s['kv_idx_mb'][0], 2)} | {trunc(s['kv_idx_mb'][1], 2)} | {trunc(s['kv_idx_mb'][2], 2)} |")
    out.append(f"| log_messages heap MiB | {trunc(s['logmsg_heap_mb'][0], 2)} | {trunc(s['logmsg_heap_mb'][1], 2)} | |")
    out.append(f"| log_messages indexes MiB | {trunc(s['logmsg_idx_mb'][0], 2)} | {trunc(s['logmsg_idx_mb'][1], 2)} | |")
    out.append(f"| log_consumers (heap + indexes) MiB | {trunc(s['logcons_mb'][0], 2)} | {trunc(s['logcons_mb'][1], 2)} | |")
    out.append(f"| broker RSS MiB | {trunc(s['rss_mb'][0], 1)} | {trunc(s['rss_mb'][1], 1)} | {trunc(s['rss_mb'][2], 1)} |")
    out.append("")
    vr = s["vacuum_runs"]
    out.append(f"- queen.kv: HOT ratio (n_tup_hot_upd / n_tup_upd, weighted by updates) {trunc(s['kv_hot_ratio'], 3)} over the "
               f"run, {trunc(s['kv_hot_ratio_steady'], 3)} in the last third; dead tuples in the last third mean "
               f"{trunc(s['kv_dead_steady_mean'], 0)}, max {int(s['kv_dead_steady_max'])} (run max {int(s['kv_dead_max'])}) "
               f"against {int(s['kv_live_end'])} live rows at the end; autovacuums {int(s['kv_autovacuums'])} "
               f"(server log: {fmt_vac(vr.get('kv'))}).")
    out.append(f"- log tables: log_consumers HOT ratio {trunc(s['logcons_hot_ratio'], 3)}, dead max {int(s['logcons_dead_max'])}, "
               f"autovacuums {fmt_vac(vr.get('log_consumers'))}; log_messages dead max {int(s['logmsg_dead_max'])}, "
               f"autovacuums {fmt_vac(vr.get('log_messages'))}.")
    out.append(f"- WAL: {trunc(s['wal_bytes_per_write'], 0)} bytes and {trunc(s['wal_records_per_write'], 2)} records per write "
               f"call over the run ({trunc(s['wal_bytes_per_write_steady'], 0)} bytes, {trunc(s['wal_records_per_write_steady'], 2)} "
               f"records in the last third), {trunc(s['wal_fpi_s_mean'], 1)} full-page images/s; {s['checkpoints']} checkpoints. "
               f"A write call is a put, an incr, a push request, a pop that returned messages or a transaction; the WAL "
               f"is the whole cluster's (sweeper and autovacuum included).")
    bk = r.get("burst_keys", 0)
    if bk:
        clear = (f"all gone at +{trunc(cleared_t := r.get('burst_cleared_t', -1), 1)} s, i.e. within "
                 f"{trunc(cleared_t - r.get('burst_t', 0), 1)} s of expiring (to the {m.get('sample')} s sample)"
                 if r.get("burst_cleared_t", -1) >= 0 else f"{int(r.get('burst_left', 0))} still present at the end")
        out.append(f"- Expiry burst: {int(bk)} keys expiring at +{trunc(r.get('burst_t', 0), 1)} s; {clear}. Sweeper lagMs max "
                   f"{int(s['sweeper_lag_ms_max'])}, rows swept per second max {trunc(s['sweeper_deleted_s_max'], 0)}, rows per pass max "
                   f"{trunc(s['sweeper_rows_per_pass_max'], 0)} (last third mean {trunc(s['sweeper_rows_per_pass_steady'], 1)}), "
                   f"longest pass {int(s['sweeper_last_pass_ms_max'])} ms. Sweeper backend CPU {trunc(s['sweeper_cpu_pct_burst'], 1)}% "
                   f"of a core during the burst, {trunc(s['sweeper_cpu_pct_steady'], 1)}% in the last third; PostgreSQL "
                   f"{trunc(s['pg_cpu_pct_burst'], 1)}% during the burst. The writers' p99 (the worst of put, incr and tx in a "
                   f"window, median over the windows): {trunc(s['write_p99_ms_burst_max'], 2)} ms during the burst against "
                   f"{trunc(s['write_p99_ms_before_burst_max'], 2)} ms before it.")
    kinds = "; ".join(f"{len(v)} on {k} (longest {trunc(v[-1], 0)} ms)" for k, v in s["lock_waits_by_kind"].items())
    out.append(f"- Lock waits: at most {int(s['lock_waiters_sampled_max'])} backends seen waiting on a lock at a sample "
               f"({int(s['lock_waiters_sampled_burst_max'])} during the burst); {s['lock_waits_logged']} waits over 100 ms logged"
               + (f": {kinds}" if kinds else "") + ".")
    out.append(f"- CPU: PostgreSQL {trunc(s['pg_cpu_pct_mean'], 1)}%, broker {trunc(s['broker_cpu_pct_mean'], 1)}% of one core on average.")
    out.append("")
    for p in pngs:
        name = os.path.basename(p)
        out.append(f"![{name}]({link_prefix}{name})")
    return "\n".join(out) + "\n"


def replace_section(path, begin, end, body, header):
    text = open(path).read() if os.path.exists(path) else header
    if begin not in text:
        text = text.rstrip("\n") + f"\n\n{begin}\n{end}\n"
    a, rest = text.split(begin, 1)
    _, b = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(a + begin + "\n" + body + end + b)


def compare(out_md, section, works):
    sums = [summarize(w) for w in works]
    lines = ["| run | settings | s | load1 mean | incr/s | put_long/s | put_short/s | tx/s | kv HOT | kv dead (last third mean / max) "
             "| kv autovacuums | kv heap MiB end | WAL B/write | WAL rec/write | burst keys | cleared after s | lagMs max "
             "| rows/pass max | sweeper CPU % (burst) | writers p99 ms, median window (burst / before) | lock waits >100 ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in sums:
        r = s["result"]
        cleared = (trunc(r["burst_cleared_t"] - r["burst_t"], 1) if r.get("burst_cleared_t", -1) >= 0
                   else ("not cleared" if r.get("burst_keys") else ""))
        lines.append(
            f"| {s['tag']} | {s['meta'].get('knobs')} | {trunc(r.get('seconds', 0), 0)} | {trunc(s['load1_mean'], 2)} | "
            f"{trunc(s['ops']['incr']['per_s'])} | {trunc(s['ops']['put_long']['per_s'])} | {trunc(s['ops']['put_short']['per_s'])} | "
            f"{trunc(s['ops']['tx']['per_s'])} | {trunc(s['kv_hot_ratio'], 3)} | {trunc(s['kv_dead_steady_mean'], 0)} / {int(s['kv_dead_steady_max'])} | "
            f"{int(s['kv_autovacuums'])} | {trunc(s['kv_heap_mb'][1], 2)} | {trunc(s['wal_bytes_per_write'], 0)} | "
            f"{trunc(s['wal_records_per_write'], 2)} | {int(r.get('burst_keys', 0))} | {cleared} | {int(s['sweeper_lag_ms_max'])} | "
            f"{trunc(s['sweeper_rows_per_pass_max'], 0)} | {trunc(s['sweeper_cpu_pct_burst'], 1)} | "
            f"{trunc(s['write_p99_ms_burst_max'], 2)} / {trunc(s['write_p99_ms_before_burst_max'], 2)} | {s['lock_waits_logged']}"
            f"{' (row: ' + str(row_waits) + ')' if (row_waits := sum(len(v) for k, v in s['lock_waits_by_kind'].items() if 'row' in k)) else ''} |")
    body = "\n".join(lines) + "\n\n" + "\n".join(
        f"- {s['tag']}: `{s['meta'].get('command')}`, {s['meta'].get('date')}, commit {s['meta'].get('commit')}, "
        f"load {s['meta'].get('load_start')} -> {s['meta'].get('load_end')}, errors {int(s['errors_total'])}" for s in sums) + "\n"
    replace_section(out_md, f"<!-- soak-compare-{section}:begin -->", f"<!-- soak-compare-{section}:end -->", body, "# Soak\n")


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3], sys.argv[4:])
        return
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    work, dest = sys.argv[1], sys.argv[2]
    s = summarize(work)
    bench = os.path.dirname(os.path.abspath(__file__))
    title = f"soak {s['meta'].get('date')} ({s['meta'].get('knobs')})"
    if os.path.abspath(dest) == bench:
        png_dir = os.path.join(bench, "soak")
        os.makedirs(png_dir, exist_ok=True)
        pngs = plot(work, png_dir, "soak_", title, s["meta"].get("sample"))
        md = os.path.join(bench, "SOAK.md")
        replace_section(md, "<!-- soak:begin -->", "<!-- soak:end -->", render(s, pngs, "soak/"), "# Soak\n")
    else:
        os.makedirs(dest, exist_ok=True)
        pngs = plot(work, dest, "soak_", title, s["meta"].get("sample"))
        with open(os.path.join(dest, "SOAK.md"), "w") as f:
            f.write("# Soak run " + s["tag"] + "\n\n" + render(s, pngs, ""))
    print(f"soak_report: {len(pngs)} plots, summary of {s['rows']} rows", file=sys.stderr)


if __name__ == "__main__":
    main()
