#!/usr/bin/env bash
# make pgbouncer-test: which PgBouncer pool mode a broker can sit behind
# (docs/deploy.md, PgBouncer). Loopback only, everything under
# $BUILD/pgbouncer.PID, all of it stopped and removed on exit.
#
# For each pool mode (session, transaction) a fresh database behind a fresh
# PgBouncer, a broker booting through it, then tests/ha/pgbouncer_check.py:
# concurrent kv writes (each acknowledged one read back), a long poll woken by
# a push, and the broker's own errors. Session mode must pass every check;
# transaction mode is expected to fail (the broker keeps named prepared
# statements, a session-level advisory lock at boot and a LISTEN per
# connection, none of which survive a server connection changing hands).
# The script fails when session mode fails or transaction mode unexpectedly
# passes (then the guide is out of date).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=/usr/bin/python3
command -v pgbouncer >/dev/null || { echo "pgbouncer-test: pgbouncer not found (make deps)"; exit 1; }

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
dir=$PWD/$BUILD/pgbouncer.$$
rm -rf "$dir"; mkdir -p "$dir"
as_pg=()
if [ "$(id -u)" = 0 ]; then # pgbouncer refuses to run as root
  chown postgres:postgres "$dir"
  as_pg=(setpriv --reuid=postgres --regid=postgres --init-groups --)
fi
pg_port=$(free_port)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  scripts/pg.sh down "$dir/pg" >/dev/null 2>&1
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

scripts/pg.sh up "$dir/pg" "$pg_port" --fast >/dev/null || { echo "pgbouncer-test: PostgreSQL did not start"; exit 1; }

# One mode: prints the check's verdict, returns its status.
run_mode() {
  local mode=$1 bport broker_port db=queen_$1
  bport=$(free_port); broker_port=$(free_port)
  psql -h 127.0.0.1 -p "$pg_port" -U postgres -d postgres -qtAc "CREATE DATABASE $db" >/dev/null
  echo '"postgres" ""' >"$dir/users.txt"
  cat >"$dir/$mode.ini" <<EOF
[databases]
queen = host=127.0.0.1 port=$pg_port dbname=$db user=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bport
unix_socket_dir =
auth_type = trust
auth_file = $dir/users.txt
pool_mode = $mode
max_client_conn = 200
default_pool_size = 40
; the broker sends statement_timeout as a startup option (-c
; statement_timeout=...), which PgBouncer refuses unless told to ignore it:
; behind PgBouncer it is set on the role or the database instead (below)
ignore_startup_parameters = options
logfile = $dir/$mode.log
pidfile = $dir/$mode.pid
EOF
  [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir/$mode.ini" "$dir/users.txt"
  psql -h 127.0.0.1 -p "$pg_port" -U postgres -d postgres -qtAc \
    "ALTER DATABASE $db SET statement_timeout = '30s'" >/dev/null
  "${as_pg[@]}" pgbouncer "$dir/$mode.ini" >"$dir/$mode.out" 2>&1 &
  pids+=($!); disown
  for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$bport") 2>/dev/null && break; sleep 0.1; done
  QUEEN_PG_URL="postgresql://postgres@127.0.0.1:$bport/queen" QUEEN_PORT=$broker_port QUEEN_BIND=127.0.0.1 \
    QUEEN_LOG_LEVEL=warn QUEEN_ACCESS_LOG=0 QUEEN_SCHEMA_LOCK_WAIT_MS=10000 \
    "$BUILD/queen" serve >"$dir/broker-$mode.log" 2>&1 &
  local broker=$!
  pids+=($broker); disown
  local up=0
  for _ in $(seq 200); do
    curl -sf "http://127.0.0.1:$broker_port/health" >/dev/null && { up=1; break; }
    kill -0 "$broker" 2>/dev/null || break
    sleep 0.1
  done
  local rc
  if [ $up = 1 ]; then
    "$PY" tests/ha/pgbouncer_check.py --base "http://127.0.0.1:$broker_port" \
      --dsn "postgresql://postgres@127.0.0.1:$pg_port/$db" --broker-log "$dir/broker-$mode.log"
    rc=$?
  else
    echo "the broker did not come up through PgBouncer in $mode mode:"
    grep -m 3 -E "ERROR|WARN" "$dir/broker-$mode.log" | cut -c1-300
    rc=1
  fi
  kill "$broker" 2>/dev/null
  return $rc
}

echo "== pool_mode = session"
run_mode session; session=$?
echo "== pool_mode = transaction"
run_mode transaction; transaction=$?
echo
echo "pgbouncer-test: $(pgbouncer --version | head -n 1): session $([ $session = 0 ] && echo works || echo FAILS)," \
  "transaction $([ $transaction = 0 ] && echo works || echo fails)"
[ $session = 0 ] || exit 1
[ $transaction != 0 ] || { echo "pgbouncer-test: transaction mode passed: docs/deploy.md says it does not"; exit 1; }
exit 0
