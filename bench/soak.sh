#!/usr/bin/env bash
# bench/soak.sh: the one entry point of `make soak` (which builds first).
#
# A private durable PostgreSQL (fsync, synchronous_commit, full_page_writes
# on; checkpoints at the server's defaults: they are part of a soak) and one
# broker on 127.0.0.1, the mixed workload of bench/soak_driver.c for
# SOAK_MINUTES, one CSV row every SOAK_SAMPLE seconds, then a summary and
# plots. Stops everything it started and removes the cluster's data.
#
# Environment:
#   SOAK_MINUTES (30) or SOAK_SECONDS (wins when set), SOAK_SAMPLE (5 s)
#   SOAK_KV_THREADS (4), SOAK_MSG_CONSUMERS (2), SOAK_SHORT_TTL (20 s),
#   SOAK_LONG_KEYS (100000: the prefilled long-TTL keys puts and gets hit),
#   SOAK_KV_MIX (all; or one of put_short put_long incr get prefix: every kv
#   call is that op, to look at it alone)
#   SOAK_BURST_KEYS (1000000): keys that expire at one instant,
#   SOAK_BURST_AT (60 + a third of the run, seconds after the prefill began)
#   SOAK_PORT_BASE (PostgreSQL, +1 broker; default: two free ports)
#   SOAK_TAG (main): the run's directory, $BUILD/soak/$SOAK_TAG
#   SOAK_REPORT: where the summary goes. Default: bench/SOAK.md and
#     bench/soak/*.png for a run with every setting at its default and at
#     least 10 minutes long; $BUILD/soak/$SOAK_TAG otherwise. "none": no
#     summary (the smoke test).
#   SOAK_PG_FAST=1: fsync off (the smoke test only; never for figures)
# The settings under question, applied to the soak's own cluster after the
# broker's schema boot (the defaults in sql/ are untouched):
#   SOAK_FILLFACTOR=N        ALTER TABLE queen.kv SET (fillfactor = N)
#   SOAK_AUTOVACUUM=default  RESET queen.kv's autovacuum options (server defaults)
#   SOAK_AUTOVACUUM=off      autovacuum_enabled = false on queen.kv
#   SOAK_SEQ_CACHE=N         ALTER SEQUENCE queen.kv_version_seq CACHE N
#   SOAK_EXPIRE_EVERY_MS, SOAK_EXPIRE_BATCH, SOAK_EXPIRE_MAX_ROWS: the
#     broker's QUEEN_KV_EXPIRE_EVERY_MS / _BATCH / _MAX_ROWS
set -Eeuo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
# The whole body is one block, read before any of it runs: a run lasts half an
# hour, and bash reads a script as it goes, so an edit of this file meanwhile
# would otherwise be executed from the middle of a line.
{

BUILD=${BUILD:-build}
QUEEN=$ROOT/$BUILD/queen
DRIVER=$ROOT/$BUILD/tools/soak_driver
if [ -n "${SOAK_SECONDS:-}" ]; then SECS=$SOAK_SECONDS; else SECS=$(( ${SOAK_MINUTES:-30} * 60 )); fi
SAMPLE=${SOAK_SAMPLE:-5}
BURST_KEYS=${SOAK_BURST_KEYS:-1000000}
BURST_AT=${SOAK_BURST_AT:-$(( 60 + ${SECS%.*} / 3 ))}
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
# Free ports by default: tests on this machine take ports from the same range.
PG_PORT=${SOAK_PORT_BASE:-$(free_port)}
BROKER_PORT=$([ -n "${SOAK_PORT_BASE:-}" ] && echo $((SOAK_PORT_BASE + 1)) || free_port)
TAG=${SOAK_TAG:-main}
WORK=$ROOT/$BUILD/soak/$TAG

say() { printf '%s soak[%s]: %s\n' "$(date +%H:%M:%S)" "$TAG" "$*" >&2; }
die() { say "error: $*"; exit 1; }

for tool in psql curl python3; do
  command -v "$tool" >/dev/null || die "$tool not found (make deps installs it: scripts/install-deps.sh)"
done
[ -x "$QUEEN" ] || die "$QUEEN not built (run: make soak)"
[ -x "$DRIVER" ] || die "$DRIVER not built (run: make soak)"

KNOBS=()
for v in SOAK_KV_MIX SOAK_FILLFACTOR SOAK_AUTOVACUUM SOAK_SEQ_CACHE SOAK_EXPIRE_EVERY_MS SOAK_EXPIRE_BATCH SOAK_EXPIRE_MAX_ROWS; do
  [ -n "${!v:-}" ] && KNOBS+=("$v=${!v}")
done
if [ -z "${SOAK_REPORT:-}" ]; then
  if [ ${#KNOBS[@]} -eq 0 ] && [ "${SECS%.*}" -ge 600 ] && [ "${SOAK_PG_FAST:-0}" != 1 ]; then
    SOAK_REPORT=$ROOT/bench
  else
    SOAK_REPORT=$WORK
  fi
fi

# shellcheck source=bench/stack.sh
. "$ROOT/bench/stack.sh"
cleanup() { set +e; stack_down; }
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'say "failed at line $LINENO: $BASH_COMMAND"' ERR

rm -rf "$WORK"
mkdir -p "$WORK"
T_START=$(date +%s)
{
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src sql include bench 2>/dev/null || echo ' (+local changes)')"
  echo "command=$(for k in "${KNOBS[@]}"; do printf '%s ' "$k"; done)$([ -n "${SOAK_SECONDS:-}" ] && echo "SOAK_SECONDS=$SOAK_SECONDS" || echo "SOAK_MINUTES=${SOAK_MINUTES:-30}") SOAK_BURST_KEYS=$BURST_KEYS make soak"
  echo "knobs=${KNOBS[*]:-defaults}"
  echo "seconds=$SECS"
  echo "sample=$SAMPLE"
  echo "kv_threads=${SOAK_KV_THREADS:-4}"
  echo "msg_consumers=${SOAK_MSG_CONSUMERS:-2}"
  echo "short_ttl=${SOAK_SHORT_TTL:-20}"
  echo "long_keys=${SOAK_LONG_KEYS:-100000}"
  echo "kv_mix=${SOAK_KV_MIX:-all}"
  echo "burst_keys=$BURST_KEYS"
  echo "nproc=$(nproc)"
  echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "mem=$(free -m | awk '/^Mem:/{print $2}') MiB"
  echo "load_start=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "busy_before=$(busy_pct 2)%"
} >"$WORK/meta.env"

say "private PostgreSQL on 127.0.0.1:$PG_PORT ($([ "${SOAK_PG_FAST:-0}" = 1 ] && echo 'fsync off: smoke only' || echo 'durable: fsync on'))"
stack_pg_up "$WORK/pg" "$PG_PORT" "$([ "${SOAK_PG_FAST:-0}" = 1 ] && echo --fast)"
# What the soak reads afterwards: every autovacuum with its duration, every
# checkpoint, and every lock wait longer than 100 ms (deadlock_timeout is the
# threshold of log_lock_waits; the server default is 1 s).
stack_pg_set log_autovacuum_min_duration=0 log_checkpoints=on log_lock_waits=on deadlock_timeout=100ms
sleep 0.3
echo "pg=$(stack_psql -Atc 'SHOW server_version')" >>"$WORK/meta.env"
echo "pg_settings=$(stack_psql -Atc "SELECT string_agg(name || '=' || setting, ' ' ORDER BY name) FROM pg_settings WHERE name IN ('fsync','synchronous_commit','full_page_writes','shared_buffers','max_connections','checkpoint_timeout','max_wal_size','autovacuum_naptime','autovacuum_max_workers','deadlock_timeout')")" >>"$WORK/meta.env"

benv=()
[ -n "${SOAK_EXPIRE_EVERY_MS:-}" ] && benv+=(QUEEN_KV_EXPIRE_EVERY_MS="$SOAK_EXPIRE_EVERY_MS")
[ -n "${SOAK_EXPIRE_BATCH:-}" ] && benv+=(QUEEN_KV_EXPIRE_BATCH="$SOAK_EXPIRE_BATCH")
[ -n "${SOAK_EXPIRE_MAX_ROWS:-}" ] && benv+=(QUEEN_KV_EXPIRE_MAX_ROWS="$SOAK_EXPIRE_MAX_ROWS")
say "broker on 127.0.0.1:$BROKER_PORT ${benv[*]:-}"
stack_broker_start "$BROKER_PORT" "$WORK/broker.log" "${benv[@]}"

# The settings under question, after the schema boot (which would put the
# defaults back) and before the prefill (fillfactor only shapes pages filled
# after it is set).
[ -n "${SOAK_FILLFACTOR:-}" ] && stack_psql -c "ALTER TABLE queen.kv SET (fillfactor = $SOAK_FILLFACTOR)"
case "${SOAK_AUTOVACUUM:-}" in
  "") ;;
  default) stack_psql -c "ALTER TABLE queen.kv RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay)" ;;
  off) stack_psql -c "ALTER TABLE queen.kv SET (autovacuum_enabled = false)" ;;
  *) die "SOAK_AUTOVACUUM: default or off, got $SOAK_AUTOVACUUM" ;;
esac
[ -n "${SOAK_SEQ_CACHE:-}" ] && stack_psql -c "ALTER SEQUENCE queen.kv_version_seq CACHE $SOAK_SEQ_CACHE"
echo "kv_reloptions=$(stack_psql -Atc "SELECT array_to_string(reloptions, ' ') FROM pg_class WHERE oid = 'queen.kv'::regclass")" >>"$WORK/meta.env"
echo "kv_seq_cache=$(stack_psql -Atc "SELECT cache_size FROM pg_sequences WHERE schemaname = 'queen' AND sequencename = 'kv_version_seq'")" >>"$WORK/meta.env"
# Consumed messages of soak_in go after 2 minutes (retention), so its table
# reaches a steady state; soak_out is never consumed and shows the growth.
curl -fs -o /dev/null -H 'Content-Type: application/json' \
  -d '{"queue":"soak_in","options":{"retentionSeconds":120}}' "$STACK_BROKER_URL/api/v1/configure" \
  || die "configure soak_in failed"

say "load for ${SECS} s, a row every ${SAMPLE} s, burst of $BURST_KEYS keys at +${BURST_AT} s -> $WORK/soak.csv"
rc=0
"$DRIVER" url="$STACK_BROKER_URL" pg="$STACK_PG_URL" out="$WORK/soak.csv" broker_pid="$STACK_BROKER_PID" \
  pm_pid="$(stack_pg_pid)" seconds="$SECS" sample="$SAMPLE" kv_threads="${SOAK_KV_THREADS:-4}" \
  msg_consumers="${SOAK_MSG_CONSUMERS:-2}" burst_keys="$BURST_KEYS" burst_at="$BURST_AT" \
  short_ttl="${SOAK_SHORT_TTL:-20}" long_keys="${SOAK_LONG_KEYS:-100000}" mix="${SOAK_KV_MIX:-all}" >"$WORK/driver.out" 2>"$WORK/driver.err" || rc=$?
cat "$WORK/driver.out" >&2
[ -s "$WORK/driver.err" ] && sed 's/^/  /' "$WORK/driver.err" >&2
{
  echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "broker_threads=$(awk '$1 == "Threads:" {print $2}' "/proc/$STACK_BROKER_PID/status" 2>/dev/null)"
  echo "broker_hwm_kb=$(awk '$1 == "VmHWM:" {print $2}' "/proc/$STACK_BROKER_PID/status" 2>/dev/null)"
  echo "driver_rc=$rc"
  echo "elapsed_s=$(( $(date +%s) - T_START ))"
} >>"$WORK/meta.env"
stack_down   # the data goes; the server log (outside it) is read below
if [ "$SOAK_REPORT" != none ]; then
  python3 "$ROOT/bench/soak_report.py" "$WORK" "$SOAK_REPORT"
fi
[ "$rc" -eq 0 ] || die "the driver saw errors (rc $rc): $WORK/driver.err"
say "done in $(( $(date +%s) - T_START )) s"
exit 0
}
