#!/usr/bin/env bash
# Private PostgreSQL clusters for development, tests and benchmarks.
# Never touches the system cluster: everything lives under DIR, listens on
# 127.0.0.1:PORT only, and keeps its socket inside DIR.
#
#   scripts/pg.sh up DIR PORT [--fast]   initdb if needed, start, create db "queen"
#   scripts/pg.sh down DIR               stop (fast mode), no error if not running
#   scripts/pg.sh url DIR PORT           print the libpq URI for the "queen" db
#   scripts/pg.sh crash DIR [PORT]       stop in immediate mode (a crash: recovery at
#                                        the next up); the fault tests use it
#
# --fast (tests only) sets fsync=off, synchronous_commit=off and
# full_page_writes=off: a crash may lose the cluster, which a test run throws
# away anyway. Never use it for benchmarks that claim durability.
set -euo pipefail

PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
[ -x "$PGBIN/initdb" ] || { echo "pg.sh: no PostgreSQL server binaries found (install: postgresql)" >&2; exit 1; }

as_owner() {
  # initdb and postgres refuse to run as root: run them as the postgres user.
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 up DIR PORT [--fast] | down DIR | url DIR PORT" >&2; exit 2; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
data="$dir/data"

case "$cmd" in
up)
  port=${3:?port required}
  fast=${4:-}
  if [ "$(id -u)" = 0 ]; then
    chown postgres:postgres "$dir"
    # postgres must be able to reach DIR: open the path's execute bits.
    p="$dir"; while [ "$p" != / ]; do chmod o+x "$p" 2>/dev/null || true; p=$(dirname "$p"); done
  fi
  if [ ! -s "$data/PG_VERSION" ]; then
    as_owner "$PGBIN/initdb" -D "$data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  opts="-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c max_connections=300"
  opts="$opts -c shared_buffers=256MB -c max_locks_per_transaction=256"
  [ "$fast" = "--fast" ] && opts="$opts -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  if ! as_owner "$PGBIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    as_owner "$PGBIN/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 -o "$opts" start >/dev/null \
      || { tail -n 30 "$dir/server.log" >&2; exit 1; }
  fi
  as_owner "$PGBIN/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qtAc \
    "SELECT 1 FROM pg_database WHERE datname='queen'" | grep -q 1 \
    || as_owner "$PGBIN/createdb" -h 127.0.0.1 -p "$port" -U postgres queen
  ;;
down)
  if [ -s "$data/PG_VERSION" ] && as_owner "$PGBIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    as_owner "$PGBIN/pg_ctl" -D "$data" -m fast -w -t 60 stop >/dev/null
  fi
  ;;
crash)
  if [ -s "$data/PG_VERSION" ] && as_owner "$PGBIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    as_owner "$PGBIN/pg_ctl" -D "$data" -m immediate -w -t 60 stop >/dev/null
  fi
  ;;
url)
  port=${3:?port required}
  echo "postgresql://postgres@127.0.0.1:$port/queen"
  ;;
*)
  echo "usage: $0 up DIR PORT [--fast] | down DIR | crash DIR | url DIR PORT" >&2; exit 2 ;;
esac
