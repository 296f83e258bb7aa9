#!/usr/bin/env bash
# bench/kv_sql/cpu.sh: backend CPU per call of a statement, each call its own
# transaction (as under pgbench), without the client, the protocol or parsing.
#   bench/kv_sql/cpu.sh URL N 'STATEMENT' ['STATEMENT' ...]
# Each STATEMENT is a plpgsql statement run N times in a DO loop with a COMMIT
# after each call; it may use k (1..10000, spread) and the jsonb variable r,
# e.g. "r := queen.kv_apply_v1(('[{\"op\": \"get\",\"ns\": \"bench\",\"key\": \"k' || k || '\"}]')::jsonb,
#       '00000000-0000-0000-0000-0000000000be'::uuid, NULL, false)"
# (bench/kv_sql/setup.sql seeds those keys). perf stat counts the backend's
# task-clock; prints microseconds of CPU per call. Set
# PGOPTIONS='-c synchronous_commit=off' to leave the disk out.
set -euo pipefail
url=${1:?usage: cpu.sh URL N STATEMENT...}; n=${2:?N}; shift 2
command -v perf >/dev/null || { echo "cpu.sh: perf not found" >&2; exit 1; }
for q in "$@"; do
  out=$(mktemp)
  psql "$url" -qAt -v ON_ERROR_STOP=1 <<SQL >/dev/null
SELECT pg_backend_pid() AS bpid \gset
\setenv BPID :bpid
\! (perf stat -e task-clock -x, -o $out -p \$BPID & echo \$! > $out.pid); sleep 0.5
DO \$do\$ DECLARE k int; r jsonb; BEGIN FOR i IN 1..$n LOOP k := 1 + (i * 7919) % 10000; $q; COMMIT; END LOOP; END \$do\$;
\! kill -INT \$(cat $out.pid); sleep 0.3
SQL
  clk=$(awk -F, '/task-clock/{print $1}' "$out")
  printf '%-70.70s cpu_us/call=%s\n' "$q" "$(awk -v c="$clk" -v n="$n" 'BEGIN{printf "%.1f", c*1000/n}')"
  rm -f "$out" "$out.pid"
done
