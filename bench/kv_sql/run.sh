#!/usr/bin/env bash
# bench/kv_sql/run.sh: one-op kv_apply_v1 (put, get, incr) against the
# equivalent raw statement, at c=1 and c=8, in one run on one cluster.
#   bench/kv_sql/run.sh URL [SECONDS]
# Needs the schema applied (sql/*.sql). Prints "script clients tps latency_ms".
# Uses -M prepared for both sides (the engine prepares its calls too).
# pgbench takes any ":name" as a variable, JSON included: the scripts write
# ": " with a space so "forever": true is not read as a variable ":true".
set -euo pipefail
url=${1:?usage: run.sh URL [SECONDS]}
secs=${2:-10}
here=$(cd "$(dirname "$0")" && pwd)
PGBENCH=${PGBENCH:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)/pgbench}
psql "$url" -v ON_ERROR_STOP=1 -q -f "$here/setup.sql" >/dev/null
for c in 1 8; do
  for s in kv_put raw_put kv_get raw_get kv_incr raw_incr; do
    out=$("$PGBENCH" -n -M prepared -c "$c" -j "$(( c < 2 ? 1 : 2 ))" -T "$secs" -f "$here/$s.sql" "$url" 2>&1)
    tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
    lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$out")
    printf '%-9s c=%-2s tps=%-10s lat_ms=%s\n' "$s" "$c" "$tps" "$lat"
  done
done
