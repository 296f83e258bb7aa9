#!/usr/bin/env bash
# A bounded run of the soak (bench/soak.sh) so its driver cannot rot: a few
# seconds of the whole workload on its own throw-away cluster (fsync off: no
# figure is taken from it), then the CSV is read back. Timings are never
# judged here; what is judged is that every op ran, none errored and every
# column was sampled. TAP output for scripts/test.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
TAG=smoke.$$
WORK=$BUILD/soak/$TAG
trap 'rm -rf "$WORK"' EXIT

echo "1..5"
SOAK_SECONDS=${SOAK_SMOKE_SECONDS:-10} SOAK_SAMPLE=2 SOAK_BURST_KEYS=2000 SOAK_BURST_AT=8 SOAK_LONG_KEYS=2000 \
  SOAK_REPORT=none SOAK_PG_FAST=1 SOAK_TAG=$TAG BUILD=$BUILD bash bench/soak.sh 2>"$BUILD/soak-smoke.log"
rc=$?
if [ $rc -eq 0 ]; then echo "ok 1 - the soak ran and stopped by itself"; else
  echo "not ok 1 - bench/soak.sh exited $rc"; sed 's/^/# /' "$BUILD/soak-smoke.log" | tail -n 30; fi

python3 - "$WORK/soak.csv" "$WORK/driver.out" <<'EOF'
import csv, sys
ops = ["put_short", "put_long", "incr", "get", "prefix", "push", "pop", "tx"]
try:
    rows = list(csv.DictReader(open(sys.argv[1])))
except OSError as e:
    rows = []
    print(f"# {e}")
n = 2
def check(ok, what, why=""):
    global n
    print(("ok" if ok else "not ok") + f" {n} - {what}" + ("" if ok else f"  # {why}"))
    n += 1
check(len(rows) >= 3, "the CSV has a row per sample", f"{len(rows)} rows")
errs = {op: sum(float(r[f"{op}_err"]) for r in rows) for op in ops}
check(rows and all(v == 0 for v in errs.values()), "no op errored", str(errs))
calls = {op: sum(float(r[f"{op}_ops_s"]) for r in rows) for op in ops}
check(rows and all(v > 0 for v in calls.values()), "every op of the mix ran", str(calls))
# Columns every sample fills (the ratios may be empty when nothing updated).
always = ["kv_heap_mb", "kv_idx_mb", "kv_live", "kv_dead", "kv_autovacuums", "logmsg_heap_mb", "wal_mb_s",
          "sweeper_lag_ms", "sweeper_passes", "pg_cpu_pct", "broker_rss_mb", "burst_left"]
empty = [c for c in always for r in rows if r.get(c) in (None, "")]
check(rows and not empty and all(float(r["broker_rss_mb"]) > 0 for r in rows), "the database and broker columns are sampled",
      f"empty: {sorted(set(empty))}")
EOF
