#!/usr/bin/env bash
# Runs one libFuzzer harness for FUZZ_SECONDS (default 8) from its committed
# seeds (tests/fuzz/corpus/<name>, never written to: new inputs go to a
# scratch corpus) plus every regression input (tests/fuzz/regressions/<name>,
# replayed first). Prints one TAP line; a crash is kept in
# build/fuzz-artifacts/ and named in the log. Appends figures to
# $QUEEN_CAMPAIGN_FIGURES when set.
#   scripts/fuzz.sh build/fuzz/fuzz_wire
set -uo pipefail
bin=$1; name=$(basename "$bin")
seconds=${FUZZ_SECONDS:-8}
seeds=tests/fuzz/corpus/$name; regress=tests/fuzz/regressions/$name
art=build/fuzz-artifacts/$name; work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$art"
echo "1..1"
if [ -d "$regress" ] && ls "$regress"/* >/dev/null 2>&1; then
  if ! "$bin" "$regress"/* 2>&1 | tail -n 20; then echo "not ok 1 - $name: a regression input fails again"; exit 1; fi
fi
dirs=("$work"); [ -d "$seeds" ] && dirs+=("$seeds")
out=$("$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
      -artifact_prefix="$art/" "${dirs[@]}" 2>&1); rc=$?
echo "$out" | grep -E '^#[0-9]+.*DONE|stat::number_of_executed_units|ERROR|SUMMARY|artifact' | sed 's/^/# /'
execs=$(echo "$out" | sed -n 's/^stat::number_of_executed_units: *//p' | tail -n 1)
if [ -n "${QUEEN_CAMPAIGN_FIGURES:-}" ]; then
  echo "fuzz.$name.executions ${execs:-0}" >>"$QUEEN_CAMPAIGN_FIGURES"
  echo "fuzz.$name.crashes $([ $rc -eq 0 ] && echo 0 || echo 1)" >>"$QUEEN_CAMPAIGN_FIGURES"
fi
if [ $rc -ne 0 ]; then echo "not ok 1 - $name crashed (artifact in $art)"; exit 1; fi
echo "ok 1 - $name: ${execs:-?} executions in ${seconds}s, no crash"
