#!/usr/bin/env bash
# How long requests in flight wait when PostgreSQL stops answering: a private
# cluster's postmaster and all its processes get SIGSTOP for FREEZE_S seconds
# while a PUT, a push and a pop (timeout=2000) are in flight; prints each
# one's status, reason and answer time, then how long after SIGCONT the first
# new PUT succeeds.
#   bench/freeze.sh [BIN] [FREEZE_S]      (BIN: build/queen; FREEZE_S: 40)
# Extra broker settings come from the environment (QUEEN_REQUEST_DEADLINE_MS=...).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-build/queen}")
freeze_s=${2:-40}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
dir=$(mktemp -d /tmp/queen-freeze.XXXXXX)
pgport=$(free_port); port=$(free_port)
scripts/pg.sh up "$dir/pg" "$pgport" --fast >/dev/null
broker=
cleanup() {
  [ -n "${pids:-}" ] && kill -CONT $pids 2>/dev/null || true
  [ -n "$broker" ] && kill "$broker" 2>/dev/null && wait "$broker" 2>/dev/null || true
  scripts/pg.sh down "$dir/pg" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
QUEEN_PG_URL=$(scripts/pg.sh url "$dir/pg" "$pgport") QUEEN_PORT=$port QUEEN_LOG_LEVEL=error "$bin" serve \
  2>"$dir/broker.log" &
broker=$!
base=http://127.0.0.1:$port
until curl -fs "$base/health" >/dev/null; do sleep 0.1; done
curl -fs -H "Content-Type: application/json" -X PUT "$base/api/v1/kv/freeze/before" -d '{"value":1,"forever":true}' >/dev/null
curl -fs -H "Content-Type: application/json" -X POST "$base/api/v1/push" -d '{"items":[{"queue":"freeze","payload":{"n":1},"transactionId":"before"}]}' >/dev/null

tree() { echo "$1"; for c in $(cat "/proc/$1/task/$1/children" 2>/dev/null); do tree "$c"; done; }
pm=$(head -n 1 "$dir/pg/data/postmaster.pid")
kill -STOP "$pm"; pids=$(tree "$pm"); kill -STOP $pids
t0=$(date +%s%N)
call() { # name method path [body]
  local out
  out=$(curl -s -m 120 -H "Content-Type: application/json" -o "$dir/$1.body" -w '%{http_code} %{time_total}' -X "$2" "$base$3" ${4:+-d "$4"})
  local reason
  reason=$(grep -o '"reason":"[^"]*"' "$dir/$1.body" | head -n 1 | cut -d'"' -f4 || true)
  printf '%-5s %s %s s\n' "$1" "${out%% *} ${reason:-(no error)}" "${out#* }"
}
call put PUT /api/v1/kv/freeze/during '{"value":2,"forever":true}' > "$dir/put.out" & c1=$!
call push POST /api/v1/push '{"items":[{"queue":"freeze","payload":{"n":2},"transactionId":"during"}]}' > "$dir/push.out" & c2=$!
call pop GET '/api/v1/pop/queue/freeze-empty?wait=true&timeout=2000' > "$dir/pop.out" & c3=$!
while [ $(( ($(date +%s%N) - t0) / 1000000 )) -lt $((freeze_s * 1000)) ]; do sleep 0.05; done
kill -CONT $pids; pids=
thaw=$(date +%s%N)
until [ "$(curl -s -H "Content-Type: application/json" -o /dev/null -w '%{http_code}' -X PUT "$base/api/v1/kv/freeze/after" -d '{"value":3,"forever":true}')" = 200 ]; do
  sleep 0.005
done
recovered=$(( ($(date +%s%N) - thaw) / 1000000 ))
wait $c1 $c2 $c3 || true
cat "$dir/put.out" "$dir/push.out" "$dir/pop.out"
echo "first PUT after SIGCONT succeeded after ${recovered} ms"
curl -fs "$base/api/v1/kv/freeze/before" | grep -q '"value": *1' && echo "acknowledged PUT before the freeze: present"
