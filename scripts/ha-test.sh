#!/usr/bin/env bash
# make ha-test: a broker on a Patroni-managed pair survives the loss of the
# primary. Loopback only, everything under $BUILD/ha.PID, all of it stopped and
# removed on exit (also on failure or Ctrl-C).
#
#   etcd (one member)  <-  Patroni pg1  +  Patroni pg2   (synchronous_mode: on)
#                              |                |
#   queen serve --pg-url postgresql://...@127.0.0.1:P1,127.0.0.1:P2/queen?target_session_attrs=read-write
#
# tests/ha/failover_load.py writes through the broker (incr and putIfAbsent,
# bounded client timeouts), kills the primary's postmaster with SIGKILL, and
# measures: the time until writes are acknowledged again (Patroni promotes the
# synchronous standby, the broker's connections find the new primary by
# themselves), what clients saw meanwhile (503 with Retry-After, never a hang)
# and, read back from the new primary, that no acknowledged write is lost.
#
#   BUILD=build scripts/ha-test.sh
#   HA_LOAD_SECONDS   seconds of load before the kill and after recovery (3)
#   HA_WRITERS        concurrent writers (4)
# Needs the Debian packages patroni, etcd-server, etcd-client (scripts/install-deps.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
PY=/usr/bin/python3 # Debian's: Patroni's own modules (psycopg2) are installed for it
started=$(date +%s)

for tool in patroni etcd "$PGBIN/initdb" "$BUILD/queen"; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "$tool" ] || { echo "ha-test: $tool not found (make deps; make all)"; exit 1; }
done

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

dir=$PWD/$BUILD/ha.$$
rm -rf "$dir"
mkdir -p "$dir/pg1" "$dir/pg2" "$dir/etcd"
# Patroni starts PostgreSQL, which refuses to run as root: under root both
# run as the postgres user, on directories it owns.
as_pg=()
if [ "$(id -u)" = 0 ]; then
  chown -R postgres:postgres "$dir"
  p="$dir"; while [ "$p" != / ]; do chmod o+x "$p" 2>/dev/null || true; p=$(dirname "$p"); done
  as_pg=(setpriv --reuid=postgres --regid=postgres --init-groups --)
fi

etcd_client=$(free_port); etcd_peer=$(free_port)
rest1=$(free_port); rest2=$(free_port); pg1=$(free_port); pg2=$(free_port); broker_port=$(free_port)
pids=()
cleanup() {
  # the broker, both Patronis and etcd, by the ids started here
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  # a postmaster Patroni left behind (it stops its own on SIGTERM)
  for n in pg1 pg2; do
    if [ -s "$dir/$n/data/postmaster.pid" ]; then
      "${as_pg[@]}" "$PGBIN/pg_ctl" -D "$dir/$n/data" -m immediate stop >/dev/null 2>&1
    fi
  done
  if [ "${HA_KEEP:-0}" = 1 ]; then echo "ha-test: kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
  echo "ha-test: FAIL: $*"
  for f in "$dir"/etcd.log "$dir"/patroni-pg1.log "$dir"/patroni-pg2.log "$dir"/broker.log; do
    [ -f "$f" ] && { echo "--- tail $f"; tail -n 25 "$f"; }
  done
  exit 1
}

"${as_pg[@]}" etcd --name ha --data-dir "$dir/etcd/data" \
  --listen-client-urls "http://127.0.0.1:$etcd_client" --advertise-client-urls "http://127.0.0.1:$etcd_client" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
  --initial-cluster "ha=http://127.0.0.1:$etcd_peer" >"$dir/etcd.log" 2>&1 &
pids+=($!); disown

node_config() { # name restport pgport
  cat <<EOF
scope: queen-ha-$$
namespace: /queen-ha/
name: $1
log:
  level: INFO
restapi:
  listen: 127.0.0.1:$2
  connect_address: 127.0.0.1:$2
etcd3:
  hosts: 127.0.0.1:$etcd_client
bootstrap:
  dcs:
    # loop_wait 1 s: a crash is seen within a second; primary_start_timeout
    # 0: a crashed primary is failed over at once rather than restarted in
    # place; synchronous_mode: a commit is acknowledged only once the
    # standby has it, so the standby promoted holds every acknowledged write.
    ttl: 20
    loop_wait: 1
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    primary_start_timeout: 0
    synchronous_mode: true
    postgresql:
      use_pg_rewind: false
      parameters:
        max_connections: 200
        wal_keep_size: 256MB
  initdb:
  - encoding: UTF8
  - locale: C.UTF-8
  pg_hba:
  - local all all trust
  - host replication replicator 127.0.0.1/32 trust
  - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:$3
  connect_address: 127.0.0.1:$3
  data_dir: $dir/$1/data
  bin_dir: $PGBIN
  pgpass: $dir/$1/pgpass
  authentication:
    replication:
      username: replicator
      password: replicator
    superuser:
      username: postgres
      password: postgres
  parameters:
    unix_socket_directories: $dir/$1
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
  nosync: false
EOF
}
node_config pg1 "$rest1" "$pg1" >"$dir/pg1.yml"
node_config pg2 "$rest2" "$pg2" >"$dir/pg2.yml"
[ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"/pg*.yml

# etcd answering first, then pg1 (it bootstraps the cluster), then pg2 (a
# base backup of pg1)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$etcd_client/health" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$etcd_client/health" >/dev/null || fail "etcd did not start"
"${as_pg[@]}" patroni "$dir/pg1.yml" >"$dir/patroni-pg1.log" 2>&1 &
pids+=($!); disown
for _ in $(seq 600); do curl -sf "http://127.0.0.1:$rest1/primary" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$rest1/primary" >/dev/null || fail "pg1 did not become the primary"
"${as_pg[@]}" patroni "$dir/pg2.yml" >"$dir/patroni-pg2.log" 2>&1 &
pids+=($!); disown
# the pair is ready when pg2 streams as the synchronous standby
sync_ready() {
  curl -sf "http://127.0.0.1:$rest1/cluster" | "$PY" -c '
import json, sys
m = {x["name"]: x for x in json.load(sys.stdin)["members"]}
s = m.get("pg2", {})
sys.exit(0 if s.get("role") == "sync_standby" and s.get("state") in ("running", "streaming") else 1)'
}
for _ in $(seq 600); do sync_ready && break; sleep 0.1; done
sync_ready || fail "pg2 never became the synchronous standby"
setup_s=$(( $(date +%s) - started ))
echo "ha-test: Patroni pair up in ${setup_s}s (primary pg1 on $pg1, synchronous standby pg2 on $pg2)"

"$PGBIN/psql" -h 127.0.0.1 -p "$pg1" -U postgres -d postgres -qtAc "CREATE DATABASE queen" >/dev/null \
  || fail "could not create the database"

url="postgresql://postgres@127.0.0.1:$pg1,127.0.0.1:$pg2/queen?target_session_attrs=read-write"
QUEEN_PG_URL=$url QUEEN_PORT=$broker_port QUEEN_BIND=127.0.0.1 QUEEN_LOG_LEVEL=${QUEEN_LOG_LEVEL:-warn} \
  QUEEN_ACCESS_LOG=0 "$BUILD/queen" serve >"$dir/broker.log" 2>&1 &
pids+=($!); disown
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$broker_port/health" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$broker_port/health" >/dev/null || fail "the broker did not become healthy"

"$PY" tests/ha/failover_load.py --base "http://127.0.0.1:$broker_port" --dsn "$url" \
  --primary-pidfile "$dir/pg1/data/postmaster.pid" --patroni "http://127.0.0.1:$rest2" \
  --seconds "${HA_LOAD_SECONDS:-3}" --writers "${HA_WRITERS:-4}" || fail "the failover test failed"
echo "ha-test: total ${SECONDS}s (setup ${setup_s}s)"
