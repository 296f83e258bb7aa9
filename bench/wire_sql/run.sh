#!/usr/bin/env bash
# bench/wire_sql/run.sh: what the transaction wire costs in PostgreSQL, per
# function and per message, without HTTP or the broker.
#   bench/wire_sql/run.sh URL [ITERS=2000] [PER=1] [PREFILL=20000]
# Pushes PREFILL messages to wsql_in (16 partitions) when fewer than
# ITERS x PER are waiting, then runs loop.sql (pop PER, one wire of PER acks +
# PER pushes + PER markers, COMMIT) ITERS times in one session with
# synchronous_commit off (CPU, not the disk) and track_functions = pl.
# Prints, per function, calls and microseconds per call (total, self; wall
# time inside the function), then the session backend's CPU per message
# (perf stat task-clock; nothing when perf cannot attach). With PER = 1 it
# then runs ITERS more bundles taking turns between the wire,
# statements_only.sql (the bundle's statements with none of the rules) and
# rules_inline.sql (the rules in one function, nothing passed between
# functions), and prints each one's time per call from that run: paired, on
# the same machine state. Needs a superuser (track_functions, pg_stat_reset)
# and the schema applied.
set -euo pipefail
url=${1:?usage: run.sh URL [ITERS] [PER] [PREFILL]}
iters=${2:-2000} per=${3:-1} prefill=${4:-20000}
here=$(cd "$(dirname "$0")" && pwd)
T=00000000-0000-0000-0000-0000000000be
waiting=$(psql "$url" -qtAc "SELECT COALESCE(sum(p.last_offset - COALESCE(c.committed_offset, 0)), 0)
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id AND q.tenant_id = '$T' AND q.name = 'wsql_in'
  LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = '__QUEUE_MODE__'")
need=$(( iters * per * (per == 1 ? 2 : 1) ))
if [ "$waiting" -lt "$need" ]; then
  psql "$url" -q -v ON_ERROR_STOP=1 -v n="$(( prefill > need ? prefill : need + 500 ))" -f "$here/setup.sql" >/dev/null
fi
psql "$url" -qtAc "SELECT pg_stat_reset()" >/dev/null
out=$(mktemp)
PGOPTIONS='-c synchronous_commit=off -c track_functions=pl' psql "$url" -qtA -v ON_ERROR_STOP=1 \
  -v iters="$iters" -v per="$per" >/dev/null <<SQL
SELECT pg_backend_pid() AS bpid \gset
\setenv BPID :bpid
\! (perf stat -e task-clock -x, -o $out -p \$BPID 2>/dev/null & echo \$! > $out.pid); sleep 0.5
\i $here/loop.sql
\! kill -INT \$(cat $out.pid) 2>/dev/null; sleep 0.3
SQL
sleep 1.2   # function statistics reach the shared counters when the session ends
psql "$url" -qtA -F' ' -c "SELECT rpad(funcname, 28), calls, round((total_time * 1000 / calls)::numeric, 1) AS total_us,
  round((self_time * 1000 / calls)::numeric, 1) AS self_us
  FROM pg_stat_user_functions WHERE schemaname = 'queen' AND calls > 0
   AND funcname ~ '^(log_pop_v1|_log_pop|log_transaction_wire_v1|_log_push|_log_ack|kv_apply_v1|kv_check)'
  ORDER BY total_time DESC" | awk '{printf "%-28s calls=%-6s total_us=%-8s self_us=%s\n", $1, $2, $3, $4}'
clk=$(awk -F, '/task-clock/{print $1}' "$out" 2>/dev/null || true)
msgs=$(( iters * per ))
if [ -n "$clk" ] && [ "$clk" != "<not counted>" ]; then
  awk -v c="$clk" -v m="$msgs" 'BEGIN{printf "backend CPU (perf task-clock): %.1f us per message\n", c * 1000 / m}'
fi
rm -f "$out" "$out.pid"
if [ "$per" = 1 ]; then
  psql "$url" -q -v ON_ERROR_STOP=1 -f "$here/statements_only.sql" -f "$here/rules_inline.sql" >/dev/null
  psql "$url" -qtAc "SELECT pg_stat_reset()" >/dev/null
  PGOPTIONS='-c synchronous_commit=off -c track_functions=pl' psql "$url" -qtA -v ON_ERROR_STOP=1 \
    -v iters="$iters" -v per=1 -v fn=all -f "$here/loop.sql" >/dev/null
  sleep 1.2
  psql "$url" -qtA -F' ' -c "SELECT funcname, calls, round((total_time * 1000 / calls)::numeric, 1)
    FROM pg_stat_user_functions
    WHERE funcname IN ('wire_sql_statements_only', 'wire_sql_rules_inline', 'log_transaction_wire_v1') AND calls > 0
    ORDER BY funcname DESC" |
    awk '{printf "paired, taking turns: %-26s calls=%-6s total_us=%s\n", $1, $2, $3}'
fi
