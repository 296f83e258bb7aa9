#!/usr/bin/env bash
# bench/edge.sh: what the HTTP edge costs, for one broker binary, on a
# private PostgreSQL (fast mode: the database is not what is measured):
#  - system calls per one-op get (strace -c -f attached to a one-loop broker
#    during wrk -t1 -c8 of GET /api/v1/kv/bench/k42), by call;
#  - the broker's RSS with 256 busy connections (wrk -c256 of the same get);
#  - /health p50/p99 with N_IDLE idle keep-alive connections open (idle.py);
#  - N_UNREAD clients that never read a ~4 MB answer: the broker's RSS
#    growth and when the last was cut (unread.py; write deadline 5 s).
# Instructions per request: bench/instructions.sh.
#
#   BIN=build/queen SECS=5 N_IDLE=10000 N_UNREAD=300 PARTS="syscalls busy idle unread" bash bench/edge.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${BIN:-build/queen}")
SECS=${SECS:-5}
N_IDLE=${N_IDLE:-10000}
N_UNREAD=${N_UNREAD:-300}
PARTS=${PARTS:-syscalls busy idle unread}
work=$(mktemp -d /tmp/queen-edge.XXXXXX)
chmod 755 "$work"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
pgport=$(free_port)
bpid=
cleanup() {
  [ -n "$bpid" ] && kill "$bpid" 2>/dev/null && wait "$bpid" 2>/dev/null || true
  scripts/pg.sh down "$work/pg" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
scripts/pg.sh up "$work/pg" "$pgport" --fast >/dev/null
export QUEEN_PG_URL=$(scripts/pg.sh url "$work/pg" "$pgport")
"$BIN" schema apply >/dev/null
export QUEEN_ACCESS_LOG=0 QUEEN_SWEEPER=0 QUEEN_LOG_LEVEL=warn QUEEN_KV_QUOTA_REFRESH_MS=600000
psql -qX "$QUEEN_PG_URL" -c "SELECT queen.kv_apply_v1('[{\"op\":\"put\",\"ns\":\"bench\",\"key\":\"k42\",\"value\":42,\"forever\":true}]', '00000000-0000-0000-0000-000000000001', now(), false)" >/dev/null

start_broker() { # extra env...
  port=$(free_port)
  env QUEEN_PORT="$port" "$@" "$BIN" serve >"$work/broker.log" 2>&1 &
  bpid=$!
  for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && return 0; sleep 0.1; done
  echo "broker did not start: $(cat "$work/broker.log")" >&2
  exit 1
}
stop_broker() { kill "$bpid"; wait "$bpid" 2>/dev/null || true; bpid=; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

part() { [[ " $PARTS " == *" $1 "* ]]; }

# 1. system calls per get, one loop
if part syscalls; then
start_broker QUEEN_HTTP_THREADS=1
url="http://127.0.0.1:$port/api/v1/kv/bench/k42"
wrk -t1 -c8 -d1s "$url" >/dev/null
strace -c -f -q -o "$work/strace" -p "$bpid" &
spid=$!
sleep 0.5
reqs=$(wrk -t1 -c8 -d"${SECS}s" "$url" | awk '/requests in/ {print $1}')
kill -INT "$spid"; wait "$spid" 2>/dev/null || true
stop_broker
awk -v n="$reqs" 'BEGIN {printf "SYSCALLS requests=%d", n}
  $NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" {calls[$NF]=$4; total+=$4}
  END {printf " per_request=%.2f", total/n; for (c in calls) if (calls[c]/n >= 0.05) printf " %s=%.2f", c, calls[c]/n; print ""}' "$work/strace"
fi

# 2. RSS at 256 busy connections
if part busy; then
start_broker
url="http://127.0.0.1:$port/api/v1/kv/bench/k42"
base=$(rss_kb "$bpid")
wrk -t2 -c256 -d"${SECS}s" "$url" >"$work/wrk256" &
wpid=$!
peak=$base
while kill -0 "$wpid" 2>/dev/null; do r=$(rss_kb "$bpid"); [ "$r" -gt "$peak" ] && peak=$r; sleep 0.2; done
echo "BUSY256 rss_idle_kb=$base rss_peak_kb=$peak $(awk '/Requests\/sec/ {print "req_per_s=" $2}' "$work/wrk256")"
stop_broker
fi

ulimit -n "$(ulimit -Hn)"
# 3. /health with N_IDLE idle keep-alive connections
if part idle; then
start_broker
python3 bench/idle.py 127.0.0.1 "$port" "$bpid" "$N_IDLE"
stop_broker
fi

# 4. clients that never read their answer
if part unread; then
start_broker QUEEN_RESPONSE_WRITE_TIMEOUT_MS=5000
python3 bench/unread.py 127.0.0.1 "$port" "$bpid" "$N_UNREAD"
stop_broker
fi
