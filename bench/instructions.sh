#!/usr/bin/env bash
# bench/instructions.sh: the broker's user-space instructions per request,
# counted by callgrind (repeatable for one binary and input, whatever else
# the machine is doing, unlike wall-clock figures on a shared 2-core box).
#
# For each scenario the broker runs under valgrind --tool=callgrind on a
# private PostgreSQL (fast mode: the database is not what is measured), takes
# N identical requests on one keep-alive connection (curl), and is stopped
# with SIGTERM. A run with no request is the baseline; the figure is
# (total - baseline) / N. Prints one line per scenario.
#
#   BUILD=build N=2000 bash bench/instructions.sh [scenario...]
#   scenarios: get put batch txn wire (default: all)
# INSTR_BY_OBJECT=1 adds, per scenario, where the instructions go: per
# request, by shared object (the broker, libmicrohttpd, libpq, jansson,
# libc, ...), baseline subtracted.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
N=${N:-2000}
SCENARIOS=${*:-get put batch txn wire}
BIN=$PWD/$BUILD/queen
work=$(mktemp -d /tmp/queen-instr.XXXXXX)
chmod 755 "$work"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
pgport=$(free_port)
cleanup() { scripts/pg.sh down "$work/pg" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
scripts/pg.sh up "$work/pg" "$pgport" --fast >/dev/null
export QUEEN_PG_URL=$(scripts/pg.sh url "$work/pg" "$pgport")
"$BIN" schema apply >/dev/null
export QUEEN_ACCESS_LOG=0 QUEEN_SWEEPER=0 QUEEN_LOG_LEVEL=warn QUEEN_KV_QUOTA_REFRESH_MS=600000
psql -qX "$QUEEN_PG_URL" -c "SELECT queen.kv_apply_v1('[{\"op\":\"put\",\"ns\":\"bench\",\"key\":\"k42\",\"value\":42,\"forever\":true}]', '00000000-0000-0000-0000-000000000001', now(), false)" >/dev/null

# One broker under callgrind; "$@" is the curl arguments of the requests
# (none for the baseline). Prints the instruction total.
measure() {
  local port out pid
  port=$(free_port)
  out=$work/callgrind.out
  rm -f "$out"
  valgrind --tool=callgrind --callgrind-out-file="$out" "$BIN" serve --port "$port" >"$work/broker.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    sleep 0.1
  done
  if [ $# -gt 0 ]; then
    local urls=()
    for _ in $(seq 1 "$N"); do urls+=("http://127.0.0.1:$port$1"); done
    shift
    curl -s -H 'Content-Type: application/json' "$@" "${urls[@]}" >/dev/null
  fi
  kill -TERM "$pid"
  wait "$pid" || true
  [ "${INSTR_BY_OBJECT:-0}" = 1 ] && by_object "$out" >"$work/objects.$#"
  awk '/^summary:|^totals:/ {print $2; exit}' "$out"
}

# Self instructions per function: "object function count" lines.
by_object() {
  callgrind_annotate --threshold=100 "$1" 2>/dev/null | awk '
    /^ *[0-9,]+ .*\[.*\]$/ { n = $1; gsub(",", "", n); o = $NF; gsub(/[\[\]]/, "", o);
                             sub(".*/", "", o); sub(/\.so.*/, "", o);
                             f = $0; sub(/^ *[0-9,]+ *(\([^)]*\))? */, "", f); sub(/ \[.*/, "", f); sub(/^.*:/, "", f);
                             print o, f, n }'
}

base=$(measure)
for s in $SCENARIOS; do
  case $s in
  get) total=$(measure /api/v1/kv -d '{"operations":[{"op":"get","ns":"bench","key":"k42"}]}') ;;
  put) total=$(measure /api/v1/kv -d '{"operations":[{"op":"put","ns":"bench","key":"k42","value":{"a":1,"b":"xyz"},"forever":true}]}') ;;
  batch) total=$(measure /api/v1/kv -d "{\"operations\":[$(for i in $(seq 1 25); do printf '%s{"op":"incr","ns":"bench","key":"c%d","delta":1,"forever":true}' "$([ "$i" -gt 1 ] && echo ,)" "$i"; done)]}") ;;
  txn) total=$(measure /api/v1/transaction -d '{"kv":[{"op":"put","ns":"bench","key":"t","value":1,"forever":true},{"op":"get","ns":"bench","key":"k42"}]}') ;;
  wire) total=$(measure /api/v1/transaction -d '{"operations":[{"type":"push","items":[{"queue":"instr","payload":{"n":1}}]}],"kv":[{"op":"putIfAbsent","ns":"bench","key":"marker","value":true,"forever":true}]}') ;;
  *) echo "unknown scenario $s" >&2; exit 2 ;;
  esac
  echo "$s: $(( (total - base) / N )) instructions per request (total $total, baseline $base, N $N)"
  if [ "${INSTR_BY_OBJECT:-0}" = 1 ]; then
    # measure ran with curl arguments, so its table is objects.<argc>; the
    # baseline's is objects.0
    cur=$(ls -t "$work"/objects.* | head -1)
    # per request, baseline subtracted: by object, then the top functions
    awk -v n="$N" 'NR == FNR { b[$1 " " $2] = $3; next }
                   { d = ($3 - b[$1 " " $2]) / n; o[$1] += d; f[$1 ":" $2] += d }
                   END { for (k in o) if (o[k] > 50) printf "  %-24s %8.0f\n", k, o[k] | "sort -k2 -nr";
                         close("sort -k2 -nr"); print "  top functions:";
                         for (k in f) if (f[k] > 300) printf "    %-48s %7.0f\n", k, f[k] | "sort -k2 -nr | head -30" }' \
      "$work/objects.0" "$cur"
  fi
done
