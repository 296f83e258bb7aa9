#!/usr/bin/env bash
# make torture: the reliability campaign for longer. Each part runs for
# about TORTURE_SECONDS (linearizability rounds with restarts, fault cycles,
# each fuzz harness), on a private PostgreSQL (scripts/test.sh), and the
# figures they report go to bench/RELIABILITY.md with the command.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
secs=${TORTURE_SECONDS:-120}
figures=$(mktemp); trap 'rm -f "$figures"' EXIT
export QUEEN_CAMPAIGN_FIGURES=$figures LIN_SECONDS=$secs FAULT_SECONDS=$secs FUZZ_SECONDS=$secs
start=$(date +%s); status=0
for part in linearizability/ faults/ fuzz/; do
  BUILD=$BUILD bash scripts/test.sh "$part" || status=1
done
took=$(( $(date +%s) - start ))
sum() { awk -v k="$1" '$1 ~ k {s += $2} END {print s + 0}' "$figures"; }
{
  echo "# Reliability campaign figures"
  echo
  echo "Written by \`make torture\` (scripts/torture.sh); the same suites run bounded in \`make test\`."
  echo
  echo "- command: \`make torture TORTURE_SECONDS=$secs\`"
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ), host: $(nproc) cores, wall time ${took}s, verdict: $([ $status -eq 0 ] && echo pass || echo FAIL)"
  echo
  echo "| part | figure | value |"
  echo "|---|---|---|"
  echo "| linearizability | rounds (none / broker SIGKILL / PostgreSQL immediate stop, in turn) | $(sum '^lin.rounds$') |"
  echo "| linearizability | histories checked (one per key per round) | $(sum '^lin.histories$') |"
  echo "| linearizability | ops checked | $(sum '^lin.ops$') |"
  echo "| linearizability | ops without answer (maybe applied) | $(sum '^lin.ops_without_answer$') |"
  echo "| linearizability | checker search steps | $(sum '^lin.search_steps$') |"
  echo "| linearizability | broker kills / PostgreSQL crashes | $(sum '^lin.broker_kills$') / $(sum '^lin.pg_crashes$') |"
  echo "| faults | writes acknowledged | $(sum '^faults.writes_acknowledged$') |"
  echo "| faults | acknowledged writes lost | $(sum '^faults.writes_lost$') |"
  echo "| faults | effects doubled | $(sum '^faults.effects_doubled$') |"
  echo "| faults | writes without answer | $(sum '^faults.writes_unknown$') |"
  echo "| faults | broker kills / PostgreSQL crashes | $(sum '^faults.broker_kills$') / $(sum '^faults.pg_crashes$') |"
  echo "| faults (messages) | pushes acknowledged / retried (same transactionId) / retries answered duplicate | $(sum '^faults_log.pushes_acked$') / $(sum '^faults_log.push_retries$') / $(sum '^faults_log.retries_found_duplicate$') |"
  echo "| faults (messages) | acknowledged pushes lost / duplicated | $(sum '^faults_log.lost$') / $(sum '^faults_log.duplicated$') |"
  echo "| faults (messages) | acks confirmed / redelivered after a confirmed ack | $(sum '^faults_log.acks_confirmed$') / $(sum '^faults_log.redelivered_after_ack$') |"
  echo "| faults (messages) | never delivered / left unconsumed after the drain | $(sum '^faults_log.never_delivered$') / $(sum '^faults_log.unconsumed$') |"
  echo "| faults (messages) | exactly-once bundles committed / effects lost / effects doubled / marker found on redelivery | $(sum '^faults_log.tx_committed$') / $(sum '^faults_log.effects_lost$') / $(sum '^faults_log.effects_doubled$') / $(sum '^faults_log.tx_marker_found$') |"
  echo "| faults (messages) | calls without answer | $(sum '^faults_log.calls_unanswered$') |"
  echo "| faults (messages) | broker kills / PostgreSQL crashes | $(sum '^faults_log.broker_kills$') / $(sum '^faults_log.pg_crashes$') |"
  for f in $(awk '$1 ~ /^fuzz\..*\.executions$/ {print $1}' "$figures" | sort -u); do
    h=${f#fuzz.}; h=${h%.executions}
    echo "| fuzz | $h executions / crashes | $(sum "^fuzz.$h.executions\$") / $(sum "^fuzz.$h.crashes\$") |"
  done
} >bench/RELIABILITY.md
cat bench/RELIABILITY.md
exit $status
