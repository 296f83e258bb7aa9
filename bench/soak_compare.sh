#!/usr/bin/env bash
# bench/soak_compare.sh QUESTION...: the settings questions of the soak, each
# answered by runs of bench/soak.sh that differ in that one setting. The runs
# of one question start together and run side by side, so each sees the same
# machine (it is shared: one after the other, they would see different
# neighbours); the table goes between the soak-compare-QUESTION markers of
# bench/SOAK.md.
#
#   fillfactor  queen.kv fillfactor 70 (the schema's) against 100
#   fillfactor-ops  the same with one kv op alone and no messages: incr, then
#               put (1-day TTL over the prefilled keys)
#   seqcache    queen.kv_version_seq CACHE 1000 (the schema's) against 1
#   autovacuum  queen.kv's autovacuum options (the schema's) against the
#               server defaults (RESET)
#   sweeper     an expiry burst of SOAK_BURST_KEYS (default 1000000) under the
#               sweeper's default batch (1000) against batch 10000 and
#               cadence 250 ms
# SOAK_MINUTES (default 4) per run; the other SOAK_* variables pass through.
# Needs `make all build/tools/soak_driver` (make soak builds both).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
# One block, read whole before it runs (an edit meanwhile must not be executed
# from the middle: bash reads a script as it goes).
{
BUILD=${BUILD:-build}
MIN=${SOAK_MINUTES:-4}
[ $# -gt 0 ] || { echo "usage: $0 fillfactor|fillfactor-ops|seqcache|autovacuum|sweeper ..." >&2; exit 2; }

run_side_by_side() { # QUESTION "TAG ENV..." ...
  local q=$1; shift
  local pids=() works=() spec tag
  for spec in "$@"; do
    read -r tag env <<<"$spec"
    works+=("$BUILD/soak/$tag")
    # shellcheck disable=SC2086
    env SOAK_MINUTES="$MIN" SOAK_TAG="$tag" SOAK_REPORT="$BUILD/soak/$tag" $env BUILD="$BUILD" \
      bash bench/soak.sh >"$BUILD/soak-$tag.log" 2>&1 &
    pids+=($!)
  done
  local rc=0 p
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  [ $rc -eq 0 ] || echo "soak_compare: a $q run failed (logs: $BUILD/soak-*.log); the table shows what was measured" >&2
  python3 bench/soak_report.py compare bench/SOAK.md "$q" "${works[@]}"
}

mkdir -p "$BUILD/soak"
for q in "$@"; do
  case $q in
    fillfactor) run_side_by_side fillfactor "ff70 SOAK_BURST_KEYS=0" "ff100 SOAK_BURST_KEYS=0 SOAK_FILLFACTOR=100" ;;
    # one op alone, no message traffic: the HOT ratio of counters and of puts apart
    fillfactor-ops)
      run_side_by_side fillfactor-incr "ff70_incr SOAK_BURST_KEYS=0 SOAK_KV_MIX=incr SOAK_MSG_CONSUMERS=0" \
        "ff100_incr SOAK_BURST_KEYS=0 SOAK_KV_MIX=incr SOAK_MSG_CONSUMERS=0 SOAK_FILLFACTOR=100"
      run_side_by_side fillfactor-put "ff70_put SOAK_BURST_KEYS=0 SOAK_KV_MIX=put_long SOAK_MSG_CONSUMERS=0" \
        "ff100_put SOAK_BURST_KEYS=0 SOAK_KV_MIX=put_long SOAK_MSG_CONSUMERS=0 SOAK_FILLFACTOR=100" ;;
    seqcache) run_side_by_side seqcache "cache1000 SOAK_BURST_KEYS=0" "cache1 SOAK_BURST_KEYS=0 SOAK_SEQ_CACHE=1" ;;
    autovacuum) run_side_by_side autovacuum "av_queen SOAK_BURST_KEYS=0" "av_default SOAK_BURST_KEYS=0 SOAK_AUTOVACUUM=default" ;;
    sweeper) b=${SOAK_BURST_KEYS:-1000000}
      run_side_by_side sweeper "sw_default SOAK_BURST_KEYS=$b SOAK_BURST_AT=${SOAK_BURST_AT:-120}" \
        "sw_batch10k SOAK_BURST_KEYS=$b SOAK_BURST_AT=${SOAK_BURST_AT:-120} SOAK_EXPIRE_BATCH=10000" \
        "sw_every250 SOAK_BURST_KEYS=$b SOAK_BURST_AT=${SOAK_BURST_AT:-120} SOAK_EXPIRE_EVERY_MS=250" ;;
    *) echo "soak_compare: unknown question $q" >&2; exit 2 ;;
  esac
done
exit 0
}
