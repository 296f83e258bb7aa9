# bench/stack.sh: sourced by bench/run.sh and bench/soak.sh. The private
# stack a measurement runs on: a durable PostgreSQL (scripts/pg.sh, fsync and
# synchronous_commit on unless asked otherwise) and one broker, both on
# 127.0.0.1 only, stopped by stack_down whatever happened.
#
# The caller sets ROOT and QUEEN and defines say() and die(); it calls
# stack_down from its EXIT trap. Exported state: STACK_PG_DIR, STACK_PG_URL,
# STACK_BROKER_PID, STACK_BROKER_URL.

STACK_PG_DIR= STACK_PG_URL= STACK_BROKER_PID= STACK_BROKER_URL= STACK_PG_UP=

# stack_pg_up DIR PORT [--fast]: start (initdb when needed) the cluster.
# A start that fails is tried again for up to 10 s: a cluster just stopped on
# the same port, or a client socket that took PORT as its ephemeral port,
# holds the address for a moment (seen as "Address already in use").
stack_pg_up() {
  STACK_PG_DIR=$1
  local attempt
  for attempt in 1 2 3 4 5 6; do
    if bash "$ROOT/scripts/pg.sh" up "$1" "$2" ${3:-}; then break; fi
    [ "$attempt" -lt 6 ] || die "PostgreSQL did not start on port $2 (see $1/server.log)"
    say "PostgreSQL did not start on port $2; trying again in 2 s"
    sleep 2
  done
  STACK_PG_UP=1
  STACK_PG_URL=$(bash "$ROOT/scripts/pg.sh" url "$1" "$2")
}

stack_psql() { psql -X -q -v ON_ERROR_STOP=1 "$STACK_PG_URL" "$@"; }

# stack_pg_set NAME=VALUE ...: ALTER SYSTEM + reload (reloadable settings only).
stack_pg_set() {
  local kv args=()
  for kv in "$@"; do args+=(-c "ALTER SYSTEM SET ${kv%%=*} = '${kv#*=}'"); done
  stack_psql "${args[@]}" -c "SELECT pg_reload_conf()" >/dev/null
}

# The postmaster's pid (its children are the cluster's CPU).
stack_pg_pid() { head -n1 "$STACK_PG_DIR/data/postmaster.pid"; }

# stack_broker_start PORT LOG [VAR=VALUE ...]: `queen serve` (schema boot
# included) with the extra environment, waits for /health.
stack_broker_start() {
  local port=$1 log=$2; shift 2
  STACK_BROKER_URL=http://127.0.0.1:$port
  env QUEEN_PG_URL="$STACK_PG_URL" QUEEN_BIND=127.0.0.1 QUEEN_PORT="$port" \
      QUEEN_LOG_LEVEL=warn QUEEN_ACCESS_LOG=0 QUEEN_SLOW_REQUEST_MS=100 "$@" "$QUEEN" serve >>"$log" 2>&1 &
  STACK_BROKER_PID=$!
  for _ in $(seq 1 150); do
    curl -fs "$STACK_BROKER_URL/health" >/dev/null 2>&1 && return 0
    kill -0 "$STACK_BROKER_PID" 2>/dev/null || { tail -n 20 "$log" >&2; die "broker exited"; }
    sleep 0.2
  done
  die "broker did not answer /health"
}

stack_broker_stop() {
  if [ -n "$STACK_BROKER_PID" ]; then
    kill "$STACK_BROKER_PID" 2>/dev/null && wait "$STACK_BROKER_PID" 2>/dev/null
    STACK_BROKER_PID=
  fi
  return 0
}

# stack_down [keep]: broker, then the cluster; its data is removed unless
# "keep" is given (the server log stays in STACK_PG_DIR).
stack_down() {
  stack_broker_stop
  if [ -n "$STACK_PG_UP" ]; then
    bash "$ROOT/scripts/pg.sh" down "$STACK_PG_DIR"
    [ "${1:-}" = keep ] || rm -rf "$STACK_PG_DIR/data"
    STACK_PG_UP=
  fi
  return 0
}

# busy_pct S: CPU busy % of the whole machine over S seconds.
busy_pct() {
  local _ u1 n1 s1 i1 w1 q1 sq1 st1 u2 n2 s2 i2 w2 q2 sq2 st2 busy idle
  read -r _ u1 n1 s1 i1 w1 q1 sq1 st1 _ </proc/stat; sleep "$1"
  read -r _ u2 n2 s2 i2 w2 q2 sq2 st2 _ </proc/stat
  busy=$(( (u2+n2+s2+q2+sq2+st2) - (u1+n1+s1+q1+sq1+st1) )); idle=$(( (i2+w2) - (i1+w1) ))
  echo $(( 100 * busy / (busy + idle + 1) ))
}
