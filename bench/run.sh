#!/usr/bin/env bash
# bench/run.sh: the one entry point of `make bench` (which builds first).
#
# Brings up its own private PostgreSQL (durable: fsync and synchronous_commit
# on), a broker and a redis-server on 127.0.0.1, runs every scenario of
# issue 6 for BENCH_SECS seconds per point, stops everything it started and
# rewrites the generated section of bench/RESULTS.md (between the
# bench:begin/bench:end markers; the rest of the file is kept).
#
#   1 direct   pgbench -M prepared: kv_apply_v1 one-op put, get, incr,
#              putIfAbsent (fresh marker) and the mix 60% incr / 30% get /
#              10% putIfAbsent over 100k keys
#   2 broker   the same ops and mix with wrk + bench/kv.lua on POST /api/v1/kv
#   3 batch    25 ops per call (mix), direct and through the broker, ops/s per op
#   4 wire     bench/wire_bench.c: pop, then one POST /api/v1/transaction
#              per message (ack + push + putIfAbsent marker) or per 10
#              messages (10 of each), 4 and 16 consumers, 16 partitions;
#              after each one-message point, its raw SQL floor (pgbench
#              bench/wire_raw/raw_tx.sql: the same work with no rules)
#   5 raw      plain single-row upsert, select and counter upsert on queen.kv in pgbench,
#              each run right after its kv_apply_v1 op of section 1 (put, get,
#              incr) so a ratio never spans minutes of this machine's drift;
#              for get also the PL/pgSQL floor (bench/pgbench/plpgsql_get_fn.sql)
#   6 redis    redis-server (no persistence) + redis-benchmark SET/GET/INCR
#   7 rss      broker VmRSS idle and under wrk -c 256 (VmHWM too)
#   8 push     POST /api/v1/push with 1, 10 and 100 messages per request
#              (wrk + bench/push.lua), messages/s; before each one-message
#              point, the same log_push_v1 call direct (pgbench
#              bench/pgbench/log_push1.sql, one call per commit)
#   9 idle     10,000 idle keep-alive connections held open (bench/idle.py):
#              accepted, GET /health latency on a fresh connection meanwhile,
#              broker VmRSS before and with them
#  10 scale    bench/scale_bench.c: how the message path's cost grows. Per P
#              of BENCH_SCALE_PARTITIONS: a fresh queue of P partitions and
#              max(M, P) messages, drained by 10 consumers and then (a fresh
#              queue again) by 1 (pop batch 1, autoAck, queue mode), then
#              one-message pushes into it at c=32, then the queen.log_*
#              sizes and the broker's VmRSS; the 10-consumer drain again over
#              every P in BENCH_SCALE_ROUNDS - 1 more interleaved rounds
#              (the report's median ratio); the bootstrap shape (5,000
#              partitions, one message each, 10 consumers); 1, 10 and 100
#              consumer groups on 1,000 partitions (10 consumers in all);
#              fairness under skew (90% of pushes to one partition of 1,000,
#              pops running meanwhile); pushes and pops at once over 1,001
#              partitions (popped msg/s per CPU); a big queue (BENCH_SCALE_BIG
#              messages): fill rate, pop rate full, bulk consume, and the
#              retention sweep's delete rate. Every drain has a timeout and
#              says when it ran out. At the defaults it takes about 1.5 h
#              on this 2-core machine with the pop of 2026-12-03 (~40 min
#              the 10M-message queue, which also needs ~10-15 GB of disk;
#              most of the rest drains that reach their 300 s timeout);
#              BENCH_SCALE_PARTITIONS="10 1000" BENCH_SCALE_MESSAGES=2000
#              BENCH_SCALE_BIG=20000 BENCH_SCALE_TIMEOUT=60 takes ~7 min
#
# Environment: BUILD (build), BENCH_SECS (5), BENCH_CONC ("1 8 32 64"),
# BENCH_ONLY (comma list of: direct,broker,batch,wire,raw,redis,rss,push,scale,idle;
# default all), BENCH_PORT_BASE (31460: PostgreSQL, +1 broker, +2 redis; below the
# kernel's ephemeral range 32768-60999, so no client socket can hold one),
# BENCH_COMMIT (what the report names as the commit; default: git HEAD, plus
# "(+local changes)" when src, sql, include or bench differ from it),
# BENCH_OPS (the KV ops of direct/broker/raw: "put get incr putIfAbsent mix"),
# BENCH_NO_REPORT=1 (leave RESULTS.md alone), BENCH_WIRE_POINTS ("1:4 1:16 10:4 10:16", per_tx:consumers),
# BENCH_PG_POOL (broker's
# QUEEN_PG_POOL, default: the broker's own default), BENCH_WAIT_QUIET=N (wait
# up to N s for the machine to be idle, < 10% CPU busy over 6 s, before
# starting; default 0: the machine is shared, the report says how busy it was).
# The scale section: BENCH_SCALE_PARTITIONS ("10 1000 10000 100000"),
# BENCH_SCALE_SKIP_100K=1 (drop the 100,000 point), BENCH_SCALE_MESSAGES (M,
# 10000; at least one per partition), BENCH_SCALE_TIMEOUT (300 s per drain),
# BENCH_SCALE_ROUNDS (3: rounds of the 10-consumer drain over every P,
# interleaved), BENCH_SCALE_GROUPS ("1 10 100"), BENCH_SCALE_SKEW_RATE (pushes/s; default
# 30% of this run's 10-consumer pop rate at 1,000 partitions, else 100),
# BENCH_SCALE_SKEW_SECS (30), BENCH_SCALE_COMBINED_BATCH (50: the pop batch of
# the combined point), BENCH_SCALE_BIG (10000000 messages; 0 skips the
# big queue), BENCH_SCALE_BIG_TIMEOUT (3600 s per phase).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

BUILD=${BUILD:-build}
SECS=${BENCH_SECS:-5}
CONC=${BENCH_CONC:-"1 8 32 64"}
ONLY=${BENCH_ONLY:-direct,broker,batch,wire,raw,redis,rss,push,scale,idle}
BASE=${BENCH_PORT_BASE:-31460}
PG_PORT=$BASE
BROKER_PORT=$((BASE + 1))
REDIS_PORT=$((BASE + 2))
WORK=$ROOT/$BUILD/bench
QUEEN=$ROOT/$BUILD/queen
TENANT=00000000-0000-0000-0000-000000000001
T_START=$(date +%s)

want() { [[ ",$ONLY," == *",$1,"* ]]; }
say() { printf '%s bench: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { say "error: $*"; exit 1; }

for tool in pgbench psql wrk redis-server redis-benchmark python3 cc curl; do
  command -v "$tool" >/dev/null || die "$tool not found (make deps installs it: scripts/install-deps.sh)"
done
[ -x "$QUEEN" ] || die "$QUEEN not built (run: make bench)"

# shellcheck source=bench/stack.sh
. "$ROOT/bench/stack.sh"
BROKER_PID= REDIS_PID=
# The kernel's autogroup scheduling (CONFIG_SCHED_AUTOGROUP) shares the CPU
# between sessions, not processes: the cluster (pg_ctl starts it in a session
# of its own), the broker and the load generators became a few groups on two
# cores, and a runnable PostgreSQL backend was left off the CPU for up to
# 2.5 s at a time (2026-12-02, kernel 6.18: its CPU time did not move while
# /proc said R). Gets through the broker at c=32 had a p99 of 90-950 ms with
# it and 1.6-2.0 ms without. Servers run these as services, each in its own
# cgroup, not as sessions of one shell: the run switches autogroup off and
# restores it at exit. BENCH_AUTOGROUP=keep leaves the setting alone.
AUTOGROUP_FILE=/proc/sys/kernel/sched_autogroup_enabled
AUTOGROUP_WAS=$(cat "$AUTOGROUP_FILE" 2>/dev/null || echo absent)
if [ "${BENCH_AUTOGROUP:-off}" != keep ] && [ "$AUTOGROUP_WAS" = 1 ]; then
  echo 0 >"$AUTOGROUP_FILE" 2>/dev/null || say "could not switch autogroup scheduling off (not root?); measuring with it on"
fi
cleanup() {
  set +e
  [ "$AUTOGROUP_WAS" = 1 ] && echo 1 >"$AUTOGROUP_FILE" 2>/dev/null
  STACK_BROKER_PID=$BROKER_PID
  [ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null && wait "$REDIS_PID" 2>/dev/null
  stack_down
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'say "failed at line $LINENO: $BASH_COMMAND"' ERR

rm -rf "$WORK"
mkdir -p "$WORK/logs"
RESULTS=$WORK/results.tsv
: >"$RESULTS"
REPORT="python3 $ROOT/bench/report.py"

# row SECTION SCENARIO C OPS_S P50_MS P99_MS ERRORS OPS_PER_REQ COMMAND [CPU_TOTAL CPU_CLIENT CPU_BROKER us/op]
row() { local IFS=$'\t'; echo "$*" >>"$RESULTS"; }

# ---------------------------------------------------------------- machine
if [ "${BENCH_WAIT_QUIET:-0}" -gt 0 ]; then
  say "waiting up to ${BENCH_WAIT_QUIET} s for an idle machine"
  quiet=0 waited=0
  while [ $quiet -lt 3 ] && [ $waited -lt "$BENCH_WAIT_QUIET" ]; do
    if [ "$(busy_pct 2)" -lt 10 ]; then quiet=$((quiet + 1)); else quiet=0; fi
    waited=$((waited + 2))
  done
  say "waited $waited s (idle: $([ $quiet -ge 3 ] && echo yes || echo no))"
fi

{
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  if [ -n "${BENCH_COMMIT:-}" ]; then echo "commit=$BENCH_COMMIT"
  else echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src sql include bench 2>/dev/null || echo ' (+local changes)')"; fi
  echo "nproc=$(nproc)"
  echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "mem=$(free -m | awk '/^Mem:/{print $2}') MiB"
  echo "load_start=$(cut -d' ' -f1-3 /proc/loadavg)"
  # CPU busy (all processes, i.e. others') over the 2 s before anything starts
  echo "busy_before=$(busy_pct 2)%"
  echo "autogroup=$(cat "$AUTOGROUP_FILE" 2>/dev/null || echo absent) (was $AUTOGROUP_WAS)"
  echo "secs=$SECS"
  echo "pg_port=$PG_PORT"
  [ -n "${BENCH_PG_POOL:-}" ] && echo "pg_pool=$BENCH_PG_POOL"
  echo "conc=$CONC"
  echo "wrk=$( (wrk -v 2>&1 || true) | head -n1 | cut -d' ' -f1-2)"
  echo "redis=$(redis-server --version | awk '{print $3}' | sed 's/v=//')"
} >"$WORK/meta.env"

# ---------------------------------------------------------------- PostgreSQL
say "private PostgreSQL on 127.0.0.1:$PG_PORT (durable: fsync on)"
stack_pg_up "$WORK/pg" "$PG_PORT"
URL=$STACK_PG_URL
PSQL() { stack_psql "$@"; }
# Keep checkpoints out of the measured window: a checkpoint's burst of
# full-page writes would land in one side's point and not the other's.
# Durability is unchanged (fsync, synchronous_commit and full_page_writes stay
# on); both settings reload without a restart.
stack_pg_set checkpoint_timeout=1h max_wal_size=20GB
sleep 0.5
{
  echo "pg=$(PSQL -Atc 'SHOW server_version')"
  echo "pg_settings=$(PSQL -Atc "SELECT string_agg(name || '=' || setting, ' ' ORDER BY name) FROM pg_settings WHERE name IN ('fsync','synchronous_commit','full_page_writes','shared_buffers','max_connections','wal_sync_method','checkpoint_timeout','max_wal_size')")"
} >>"$WORK/meta.env"
QUEEN_PG_URL=$URL QUEEN_LOG_LEVEL=warn "$QUEEN" schema apply
say "seeding 100k counters (ns bench) and 100k objects (ns bench_put)"
PSQL -f bench/pgbench/seed.sql
PSQL -q -f bench/pgbench/plpgsql_get_fn.sql

# ---------------------------------------------------------------- broker
BROKER=http://127.0.0.1:$BROKER_PORT
start_broker() { # [VAR=VALUE ...]: extra environment of the broker
  local env=("$@")
  [ -n "${BENCH_PG_POOL:-}" ] && env+=(QUEEN_PG_POOL="$BENCH_PG_POOL")
  stack_broker_start "$BROKER_PORT" "$WORK/logs/broker.log" "${env[@]}"
  BROKER_PID=$STACK_BROKER_PID
}
say "broker on $BROKER (access log off, log level warn)"
start_broker
status_kb() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$BROKER_PID/status"; }
echo "rss_boot_kb=$(status_kb VmRSS)" >>"$WORK/meta.env"
echo "broker_threads_boot=$(status_kb Threads)" >>"$WORK/meta.env"

# ---------------------------------------------------------------- helpers
# CPU accounting of a point, so every ratio comes with where the CPU went:
# machine-wide busy ticks (/proc/stat), the client's own user+sys (bash's
# time), the broker's utime+stime; PostgreSQL and anything else running is
# the rest. Printed as microseconds per op: total client broker.
cpu_busy() { local _ u n s i w q sq st; read -r _ u n s i w q sq st _ </proc/stat; echo $((u + n + s + q + sq + st)); }
broker_ticks() { if [ -n "$BROKER_PID" ]; then awk '{print $14 + $15}' "/proc/$BROKER_PID/stat" 2>/dev/null || echo 0; else echo 0; fi; }
# This cluster's CPU: the postmaster's own and its reaped children's times
# plus every live child's (backends, walwriter, autovacuum ...).
pg_ticks() {
  local pm; pm=$(head -n1 "$WORK/pg/data/postmaster.pid")
  # (a child may exit between the listing and the read: never fail on it)
  { cat "/proc/$pm/stat"; for k in $(cat "/proc/$pm/task/$pm/children" 2>/dev/null); do cat "/proc/$k/stat" 2>/dev/null || true; done; } |
    awk -v pm="$pm" '{t += $14 + $15; if ($1 == pm) t += $16 + $17} END {print t + 0}' || echo 0
}
TICK_US=$(( 1000000 / $(getconf CLK_TCK) ))
# timed OUTFILE CMD...: runs CMD (stdout+stderr to OUTFILE), leaves the
# client's CPU seconds "user sys" in $WORK/cpu.client and the tick deltas
# "machine broker postgres" in $WORK/cpu.machine
timed() {
  local out=$1; shift
  local b0 k0 p0 b1 k1 p1
  b0=$(cpu_busy); k0=$(broker_ticks); p0=$(pg_ticks)
  { TIMEFORMAT='%U %S'; time "$@" >"$out" 2>&1; } 2>"$WORK/cpu.client" || true
  sleep 0.3   # let the postmaster reap the client's backends (their CPU joins its cutime)
  b1=$(cpu_busy); k1=$(broker_ticks); p1=$(pg_ticks)
  echo "$((b1 - b0)) $((k1 - k0)) $((p1 - p0))" >"$WORK/cpu.machine"
}
# cpu_per_op OPS_PER_S [SECONDS] -> "total client broker postgres other" in
# us per op over a point of SECONDS (default BENCH_SECS); other = what the
# rest of the machine (other users) burnt meanwhile
cpu_per_op() {
  local u s b k p
  read -r u s <"$WORK/cpu.client"; read -r b k p <"$WORK/cpu.machine"
  python3 -c "
ops = $1 * ${2:-$SECS}
t = $TICK_US
tot, cl, br, pg = $b * t, ($u + $s) * 1e6, $k * t, $p * t
print(' '.join('%.1f' % (x / ops if ops > 0 else 0) for x in (tot, cl, br, pg, max(0.0, tot - cl - br - pg))))"
}

pgb() { # pgb SECTION SCENARIO C OPS_PER_REQ SCRIPT_ARGS...
  local section=$1 scen=$2 c=$3 per=$4; shift 4
  local j=$(( c < 2 ? 1 : 2 )) tag="$section-$scen-c$c"
  local cmd="pgbench -n -M prepared -c $c -j $j -T $SECS -l $*"
  mkdir -p "$WORK/logs/$tag"
  local args=() a
  for a in "$@"; do case $a in bench/*) args+=("$ROOT/$a");; *) args+=("$a");; esac; done
  ( cd "$WORK/logs/$tag" &&
    timed out.txt pgbench -n -M prepared -c "$c" -j "$j" -T "$SECS" -l --log-prefix=txlog "${args[@]}" "$URL" )
  local r; r=$($REPORT pgbench "$WORK/logs/$tag" "$per")
  local cpu; cpu=$(cpu_per_op "$(cut -d' ' -f1 <<<"$r")")
  row "$section" "$scen" "$c" $r "$per" "$cmd \$URL" $cpu
  say "$section $scen c=$c: $r | cpu us/op total client broker pg other: $cpu"
}

wrk_run() { # wrk_run SECTION SCENARIO C OPS_PER_REQ LUA_OP [SCRIPT]
  local section=$1 scen=$2 c=$3 per=$4 op=$5 lua=${6:-bench/kv.lua} t=$(( $3 < 2 ? 1 : 2 )) tag="$1-$2-c$3"
  local cmd="wrk -t$t -c$c -d${SECS}s --latency -s $lua $BROKER -- $op"
  timed "$WORK/logs/$tag.txt" wrk -t"$t" -c"$c" -d"${SECS}s" --latency -s "$ROOT/$lua" "$BROKER" -- "$op"
  local r; r=$($REPORT wrk "$WORK/logs/$tag.txt" "$per")
  local cpu; cpu=$(cpu_per_op "$(cut -d' ' -f1 <<<"$r")")
  row "$section" "$scen" "$c" $r "$per" "$cmd" $cpu
  say "$section $scen c=$c: $r | cpu us/op total client broker pg other: $cpu"
}

# probe_kv NAME BODY: 0 when POST /api/v1/kv answers 200 {"results":[...]}
probe_kv() {
  local code
  code=$(curl -s -o "$WORK/logs/probe-$1.json" -w '%{http_code}' -H 'Content-Type: application/json' \
         --data "$2" "$BROKER/api/v1/kv" || true)
  if [ "$code" = 200 ] && grep -q '"results"' "$WORK/logs/probe-$1.json"; then return 0; fi
  say "probe $1: HTTP $code $(head -c 300 "$WORK/logs/probe-$1.json" 2>/dev/null)"
  return 1
}

KV_OK=0
if want broker || want batch || want rss; then
  if probe_kv get '{"operations":[{"op":"get","ns":"bench","key":"k1"}]}' &&
     probe_kv incr '{"operations":[{"op":"incr","ns":"bench","key":"k1","delta":1,"forever":true}]}' &&
     probe_kv put '{"operations":[{"op":"put","ns":"bench_put","key":"k1","value":{"n":1,"s":"bench"},"forever":true}]}' &&
     probe_kv pia '{"operations":[{"op":"putIfAbsent","ns":"bench","key":"k1","value":true,"forever":true}]}'; then
    KV_OK=1
    # warm the broker's connections and statement caches once
    wrk -t2 -c8 -d1s -s "$ROOT/bench/kv.lua" "$BROKER" -- mix >/dev/null 2>&1 || true
  else
    say "POST /api/v1/kv is not served yet: broker, batch and rss scenarios skipped"
    echo "kv_route=missing" >>"$WORK/meta.env"
  fi
fi

# -------------------------------------------------- 1 + 2: one op, direct vs broker
# Interleaved per (op, c) so both sides see the same table state.
declare -A DIRECT_ARGS=(
  [put]="-f bench/pgbench/kv_put.sql"
  [get]="-f bench/pgbench/kv_get.sql"
  [incr]="-f bench/pgbench/kv_incr.sql"
  [putIfAbsent]="-f bench/pgbench/kv_pia_new.sql"
  [mix]="-f bench/pgbench/kv_incr.sql@60 -f bench/pgbench/kv_get.sql@30 -f bench/pgbench/kv_pia.sql@10"
)
declare -A LUA_OP=([put]=put [get]=get [incr]=incr [putIfAbsent]=pia_new [mix]=mix)
declare -A RAW_OF=([put]=upsert [get]=select [incr]=incr)
for op in ${BENCH_OPS:-put get incr putIfAbsent mix}; do
  want direct || want raw || { want broker && [ $KV_OK = 1 ]; } || continue
  for c in $CONC; do
    # shellcheck disable=SC2086
    want direct && pgb direct "$op" "$c" 1 ${DIRECT_ARGS[$op]}
    # section 5's points for this op, right after it (see the header)
    if want raw && [ -n "${RAW_OF[$op]:-}" ]; then
      pgb raw "${RAW_OF[$op]}" "$c" 1 -f "bench/pgbench/raw_${RAW_OF[$op]}.sql"
      if [ "$op" = get ]; then pgb plpgsql get "$c" 1 -f bench/pgbench/plpgsql_get.sql; fi
    fi
    want broker && [ $KV_OK = 1 ] && wrk_run broker "$op" "$c" 1 "${LUA_OP[$op]}"
  done
done

echo "load_mid=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$WORK/meta.env"

# -------------------------------------------------- 3: 25-op batches
if want batch; then
  for c in $CONC; do
    pgb batch direct25 "$c" 25 -f bench/pgbench/kv_batch25.sql
    [ $KV_OK = 1 ] && wrk_run batch broker25 "$c" 25 batch25
  done
fi

# -------------------------------------------------- 8: push, messages per request
if want push; then
  for n in 1 10 100; do
    for c in $CONC; do
      # one message per call: the same log_push_v1 call direct, one per commit
      [ "$n" = 1 ] && pgb push direct1 "$c" 1 -f bench/pgbench/log_push1.sql
      wrk_run push "push$n" "$c" "$n" "$n" bench/push.lua
    done
  done
fi

# -------------------------------------------------- 4: the transaction wire
if want wire; then
  cc -std=c11 -O2 -Wall -o "$WORK/wire_bench" "$ROOT/bench/wire_bench.c" "$ROOT/bench/http.c" -lcurl -ljansson -lpthread
  # Points "per_tx:consumers": messages per transaction (1 = ack + push +
  # marker; 10 = 10 acks + 10 pushes + 10 markers), consumers on 16
  # partitions. Each point has its own queue, prefilled before its clock
  # starts, so no point inherits another's leases or backlog.
  WIRE_POINTS=${BENCH_WIRE_POINTS:-"1:4 1:16 10:4 10:16"}
  WIRE_PREFILL=${BENCH_WIRE_PREFILL:-$(( SECS * 8000 ))}
  for point in $WIRE_POINTS; do
    per=${point%%:*} wc=${point##*:} wq=wire_in_t${point%%:*}_c${point##*:}
    cmd="$BUILD/bench/wire_bench $BROKER $wc 16 0 10 $SECS $wq $per"
    if "$WORK/wire_bench" "$BROKER" 0 16 "$WIRE_PREFILL" 10 "$SECS" "$wq" >"$WORK/logs/wire-prefill-$per-$wc.txt" 2>&1 &&
       timed "$WORK/logs/wire-$per-$wc.txt" "$WORK/wire_bench" "$BROKER" "$wc" 16 0 10 "$SECS" "$wq" "$per" &&
       grep -q '^WIRERESULT' "$WORK/logs/wire-$per-$wc.txt"; then
      r=$($REPORT wire "$WORK/logs/wire-$per-$wc.txt")
      cpu=$(cpu_per_op "$(cut -d' ' -f1 <<<"$r")")
      row wire "tx$per" "$wc" $r 1 \
        "$BUILD/bench/wire_bench $BROKER 0 16 $WIRE_PREFILL 10 $SECS $wq && $cmd" $cpu
      say "wire $per msg/tx, $wc consumers: $r | cpu us/msg total client broker pg other: $cpu"
      cp "$WORK/logs/wire-$per-$wc.txt" "$WORK/wire-$per-$wc.result"
      # The same work with none of the rules, on the same partitions: the
      # machine's floor for a one-message transaction (bench/wire_raw).
      if [ "$per" = 1 ]; then
        PSQL -q -v q="$wq" -f "$ROOT/bench/wire_raw/setup.sql" >/dev/null &&
          pgb wireraw tx1 "$wc" 1 -f bench/wire_raw/raw_tx.sql
      fi
    else
      say "wire scenario failed or routes missing: $(head -c 300 "$WORK/logs/wire-prefill-$per-$wc.txt" "$WORK/logs/wire-$per-$wc.txt" 2>/dev/null)"
      echo "wire=skipped: $(cat "$WORK/logs/wire-prefill-$per-$wc.txt" "$WORK/logs/wire-$per-$wc.txt" 2>/dev/null | grep -v '^WIRERESULT' | head -c 200 | tr '\n\t' '  ')" >>"$WORK/meta.env"
    fi
  done
fi

# -------------------------------------------------- 7: broker RSS
if want rss && [ $KV_OK = 1 ]; then
  echo "rss_idle_after_kb=$(status_kb VmRSS)" >>"$WORK/meta.env"
  ( peak=0; conns=0
    while kill -0 "$BROKER_PID" 2>/dev/null; do
      v=$(status_kb VmRSS); [ "${v:-0}" -gt "$peak" ] && peak=$v
      n=$(ss -Htn state established "( sport = :$BROKER_PORT )" 2>/dev/null | wc -l); [ "$n" -gt "$conns" ] && conns=$n
      echo "$peak $conns" >"$WORK/rss.peak"; sleep 0.2
    done ) &
  SAMPLER=$!
  wrk_run rss mix 256 1 mix
  kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null || true
  read -r peak conns <"$WORK/rss.peak"
  { echo "rss_256_peak_kb=$peak"; echo "rss_256_conns=$conns"
    echo "rss_hwm_kb=$(status_kb VmHWM)"; echo "broker_threads_end=$(status_kb Threads)"
    sleep 1; echo "rss_after_256_kb=$(status_kb VmRSS)"; } >>"$WORK/meta.env"
fi

# -------------------------------------------------- 6: redis
if want redis; then
  mkdir -p "$WORK/redis"
  # A port inside the kernel's ephemeral range (BENCH_PORT_BASE chosen so)
  # can be held by a client socket as its local port right after the 256
  # connections of the rss point ("bind: Address already in use"); the
  # default base is below that range, and this tries again for 10 s anyway.
  for attempt in 1 2 3 4 5 6; do
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$WORK/redis" --daemonize no --logfile "$WORK/logs/redis.log" &
    REDIS_PID=$!
    for _ in $(seq 1 50); do
      redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break
      kill -0 "$REDIS_PID" 2>/dev/null || break
      sleep 0.1
    done
    redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break
    kill "$REDIS_PID" 2>/dev/null || true
    wait "$REDIS_PID" 2>/dev/null || true
    # redis-benchmark spins at full CPU against a closed port instead of failing
    [ "$attempt" -lt 6 ] || die "redis-server did not start: $(tail -n 2 "$WORK/logs/redis.log")"
    say "redis-server did not start on port $REDIS_PORT; trying again in 2 s"
    sleep 2
  done
  for c in $CONC; do
    n=$(( c == 1 ? 40000 : 100000 ))
    redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -c "$c" -n "$n" -r 100000 -t set,get,incr --csv \
      >"$WORK/logs/redis-c$c.csv" 2>/dev/null || true
    while IFS=$'\t' read -r scen r; do
      # shellcheck disable=SC2086
      row redis "$scen" "$c" $r 1 "redis-benchmark -p \$REDIS_PORT -c $c -n $n -r 100000 -t set,get,incr --csv"
    done < <($REPORT redis "$WORK/logs/redis-c$c.csv")
    say "redis c=$c done"
  done
  kill "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null || true; REDIS_PID=
fi

# -------------------------------------------------- 10: scale
# After rss and redis (its broker memory would otherwise be the rss point's
# high-water mark), before idle. Every queue of a point is deleted after it
# (queen.log_queue_delete_v1 through psql: no statement timeout on a queue
# of 100,000 partitions) and the log tables vacuumed, so no point pops past
# another's partitions or dead rows.
if want scale; then
  SCALE_BIN=$ROOT/$BUILD/tools/scale_bench
  [ -x "$SCALE_BIN" ] || die "$SCALE_BIN not built (run: make bench, or make $BUILD/tools/scale_bench)"
  SCALE_SB="$BUILD/tools/scale_bench \$BROKER"   # how a command reads in the report
  SCALE_P=${BENCH_SCALE_PARTITIONS:-"10 1000 10000 100000"}
  [ "${BENCH_SCALE_SKIP_100K:-0}" = 1 ] && SCALE_P=$(tr ' ' '\n' <<<"$SCALE_P" | grep -vx 100000 | tr '\n' ' ')
  SCALE_M=${BENCH_SCALE_MESSAGES:-10000}
  SCALE_TO=${BENCH_SCALE_TIMEOUT:-300}
  SCALE_GROUPS=${BENCH_SCALE_GROUPS:-"1 10 100"}
  SCALE_ROUNDS=${BENCH_SCALE_ROUNDS:-3}
  SCALE_SKEW_SECS=${BENCH_SCALE_SKEW_SECS:-30}
  SCALE_BIG=${BENCH_SCALE_BIG:-10000000}
  SCALE_BIG_TO=${BENCH_SCALE_BIG_TIMEOUT:-3600}
  SCALE_T0=$(date +%s)
  {
    echo "scale_partitions=$SCALE_P"; echo "scale_messages=$SCALE_M"; echo "scale_timeout=$SCALE_TO"
    echo "scale_groups=$SCALE_GROUPS"; echo "scale_big=$SCALE_BIG"; echo "scale_rounds=$SCALE_ROUNDS"
  } >>"$WORK/meta.env"

  # scale_run TAG SCENARIO C CMD_SHOWN ARGS...: one timed driver call whose
  # result line becomes a row (and $WORK/scale-TAG.result, for the report's
  # extra columns); 1 when it printed no result line.
  scale_run() {
    local tag=$1 scen=$2 c=$3 shown=$4; shift 4
    say "scale $scen: $shown"
    timed "$WORK/logs/scale-$tag.txt" "$SCALE_BIN" "$BROKER" "$@"
    if ! grep -q 'RESULT ' "$WORK/logs/scale-$tag.txt"; then
      say "scale $scen: no result: $(head -c 300 "$WORK/logs/scale-$tag.txt")"
      return 1
    fi
    grep 'RESULT ' "$WORK/logs/scale-$tag.txt" | head -n1 >"$WORK/scale-$tag.result"
    local r secs cpu
    r=$($REPORT scale "$WORK/scale-$tag.result")
    secs=$(sed -n 's/.* seconds=\([0-9.]*\).*/\1/p' "$WORK/scale-$tag.result")
    cpu=$(cpu_per_op "$(cut -d' ' -f1 <<<"$r")" "${secs:-$SECS}")
    row scale "$scen" "$c" $r 1 "$shown" $cpu
    say "scale $scen: $(cat "$WORK/scale-$tag.result")"
  }
  scale_field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" "$WORK/scale-$1.result" 2>/dev/null || true; }  # empty when the point did not run
  scale_drop() { # scale_drop QUEUE: delete it, vacuum the log tables
    PSQL -Atc "SELECT queen.log_queue_delete_v1('$TENANT', '$1')" >/dev/null &&
      PSQL -c "VACUUM queen.log_messages, queen.log_partitions, queen.log_consumers, queen.queues" >/dev/null ||
      say "scale: could not delete queue $1; later points see its rows"
  }
  # Every queen.log_* table with its total size (indexes and TOAST in).
  scale_sizes() { # scale_sizes PREFIX
    PSQL -Atc "SELECT '$1.' || c.relname || '=' || pg_total_relation_size(c.oid)
               FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
               WHERE s.nspname = 'queen' AND c.relkind = 'r' AND c.relname LIKE 'log\_%' ORDER BY 1"
  }
  scale_seed() { # scale_seed TAG QUEUE P M: not measured (but the time is kept)
    "$SCALE_BIN" "$BROKER" seed "$2" "$3" "$4" 500 2 "$SCALE_BIG_TO" >"$WORK/logs/scale-seed-$1.txt" 2>&1 ||
      say "scale seed $1: $(tail -c 300 "$WORK/logs/scale-seed-$1.txt")"
    grep '^SEEDRESULT' "$WORK/logs/scale-seed-$1.txt" >"$WORK/scale-seed-$1.result" || true
  }

  # ---- 1, 5, 6: pop and push vs partitions, sizes and RSS
  for P in $SCALE_P; do
    M=$(( SCALE_M > P ? SCALE_M : P ))
    q=scale_p${P}
    scale_sizes before >"$WORK/scale-sizes-$P.txt"
    scale_seed "p$P" "$q" "$P" "$M"
    scale_run "pop-$P" "pop_p$P" 10 "$SCALE_SB seed $q $P $M 500 2 && $SCALE_SB drain $q 10 $M $SCALE_TO" \
      drain "$q" 10 "$M" "$SCALE_TO" || true
    { scale_sizes after
      echo "rss_kb=$(status_kb VmRSS)"; echo "hwm_kb=$(status_kb VmHWM)"; echo "messages=$M"
      echo "partitions_rows=$(PSQL -Atc "SELECT count(*) FROM queen.log_partitions")"
      echo "consumers_rows=$(PSQL -Atc "SELECT count(*) FROM queen.log_consumers")"
      echo "messages_rows=$(PSQL -Atc "SELECT count(*) FROM queen.log_messages")"
    } >>"$WORK/scale-sizes-$P.txt"
    scale_drop "$q"
    q1=scale_p${P}_c1
    scale_seed "p$P-c1" "$q1" "$P" "$M"
    scale_run "pop1-$P" "pop1_p$P" 1 "$SCALE_SB seed $q1 $P $M 500 2 && $SCALE_SB drain $q1 1 $M $SCALE_TO" \
      drain "$q1" 1 "$M" "$SCALE_TO" || true
    # pushes into the queue of P partitions just drained (every partition
    # and its cursor exist)
    scale_run "push-$P" "push_p$P" 32 "$SCALE_SB push $q1 $P 32 $SECS" push "$q1" "$P" 32 "$SECS" || true
    scale_drop "$q1"
  done

  # ---- 1b: the 10-consumer drain again, in BENCH_SCALE_ROUNDS rounds in all,
  # the partition counts interleaved within each round. One point's rate
  # moves by a quarter from run to run on this machine (2,226-3,614 msg/s
  # at 10 partitions), so the report takes the ratio the target names within
  # each round, where the two points ran a minute apart, and gives the median.
  for r in $(seq 2 "$SCALE_ROUNDS"); do
    for P in $SCALE_P; do
      M=$(( SCALE_M > P ? SCALE_M : P ))
      q=scale_p${P}_r$r
      scale_seed "p$P-r$r" "$q" "$P" "$M"
      scale_run "pop-$P-r$r" "popround_p${P}_r$r" 10 \
        "$SCALE_SB seed $q $P $M 500 2 && $SCALE_SB drain $q 10 $M $SCALE_TO" drain "$q" 10 "$M" "$SCALE_TO" || true
      scale_drop "$q"
    done
  done

  # ---- 2: the reference broker's bootstrap shape
  scale_seed boot scale_boot 5000 5000
  scale_run boot bootstrap 10 "$SCALE_SB seed scale_boot 5000 5000 500 2 && $SCALE_SB drain scale_boot 10 5000 $SCALE_TO" \
    drain scale_boot 10 5000 "$SCALE_TO" || true
  scale_drop scale_boot

  # ---- 3: consumer groups on 1,000 partitions, 10 consumers in all
  for G in $SCALE_GROUPS; do
    q=scale_groups_$G
    scale_seed "g$G" "$q" 1000 "$SCALE_M"
    scale_run "groups-$G" "groups_g$G" 10 \
      "$SCALE_SB seed $q 1000 $SCALE_M 500 2 && $SCALE_SB drain $q 10 $SCALE_M $SCALE_TO 1 $G g" \
      drain "$q" 10 "$SCALE_M" "$SCALE_TO" 1 "$G" g || true
    scale_drop "$q"
  done

  # ---- 4: fairness under skew: 90% of the pushes to one partition of 1,000
  # The offered load is a share of what this run popped at 1,000 partitions
  # (a fixed rate would overload one build and idle another).
  base=$(scale_field pop-1000 msgs_per_s)
  SKEW_RATE=${BENCH_SCALE_SKEW_RATE:-$(python3 -c "b = float('${base:-0}' or 0); print(max(10, round(0.3 * b)) if b > 0 else 100)")}
  { echo "scale_skew_rate=$SKEW_RATE"; echo "scale_skew_secs=$SCALE_SKEW_SECS"
    echo "scale_skew_source=$([ -n "${BENCH_SCALE_SKEW_RATE:-}" ] && echo set || echo auto)"; } >>"$WORK/meta.env"
  # Pushers: a paced pusher behind its slots sends late (the load offered
  # falls short), and a push takes ~100-400 ms on a loaded machine at 1,000
  # partitions: 4 pushers at 72/s sent 490 of 720 late, 8 at 76/s 710 of
  # 760 (load average 9.6). One per 10 pushes/s, at least 16.
  SKEW_PUSHERS=$(python3 -c "import math; print(max(16, math.ceil(float('$SKEW_RATE') / 10)))")
  # every partition and its cursor made first (one message each, drained)
  scale_seed skew scale_skew 1000 1000
  "$SCALE_BIN" "$BROKER" drain scale_skew 10 1000 "$SCALE_TO" >"$WORK/logs/scale-skew-warm.txt" 2>&1 || true
  scale_run skew skew 10 "$SCALE_SB skew scale_skew 1000 90 $SKEW_RATE $SCALE_SKEW_SECS 10 $SKEW_PUSHERS 60" \
    skew scale_skew 1000 90 "$SKEW_RATE" "$SCALE_SKEW_SECS" 10 "$SKEW_PUSHERS" 60 || true
  scale_drop scale_skew

  # ---- 4b: pushes and pops at once over 1,001 partitions, the shape of the
  # reference broker's published combined load: one-message pushes from 16
  # threads to random partitions while 10 consumers long-poll (1 s) batch
  # BENCH_SCALE_COMBINED_BATCH (50) with autoAck, for 2 x BENCH_SECS, on a
  # queue whose partitions and cursors exist. What counts is popped msg/s
  # and what it cost in CPU (the report divides by the CPU the point used).
  COMB_BATCH=${BENCH_SCALE_COMBINED_BATCH:-50}
  COMB_SECS=$(( SECS * 2 ))
  echo "scale_combined_batch=$COMB_BATCH" >>"$WORK/meta.env"
  scale_seed comb scale_combined 1001 1001
  "$SCALE_BIN" "$BROKER" drain scale_combined 10 1001 "$SCALE_TO" >"$WORK/logs/scale-combined-warm.txt" 2>&1 || true
  comb_shown="$SCALE_SB push scale_combined 1001 16 $COMB_SECS & $SCALE_SB drain scale_combined 10 0 $COMB_SECS $COMB_BATCH 0 g 1000"
  say "scale combined: $comb_shown"
  # shellcheck disable=SC2016 # $0 and $1 are the inner shell's
  timed "$WORK/logs/scale-combined.txt" bash -c \
    '"$0" "$1" push scale_combined 1001 16 "$2" & "$0" "$1" drain scale_combined 10 0 "$2" "$3" 0 g 1000; wait' \
    "$SCALE_BIN" "$BROKER" "$COMB_SECS" "$COMB_BATCH"
  grep -E '^(PUSH|DRAIN)RESULT ' "$WORK/logs/scale-combined.txt" >"$WORK/scale-combined.result" || true
  if grep -q '^DRAINRESULT ' "$WORK/scale-combined.result"; then
    grep '^DRAINRESULT ' "$WORK/scale-combined.result" >"$WORK/scale-combined-pop.result"
    r=$($REPORT scale "$WORK/scale-combined-pop.result")
    row scale combined 10 $r 1 "$comb_shown" $(cpu_per_op "$(cut -d' ' -f1 <<<"$r")" "$COMB_SECS")
    read -r cb ck cp <"$WORK/cpu.machine"   # ticks: machine busy, broker, PostgreSQL
    python3 -c "t = $TICK_US / 1e6; print('busy_s=%.2f broker_s=%.2f pg_s=%.2f' % ($cb * t, $ck * t, $cp * t))" \
      >"$WORK/scale-combined.cpu"
    say "scale combined: $(tr '\n' ' ' <"$WORK/scale-combined.result")"
  else
    say "scale combined: no result: $(head -c 300 "$WORK/logs/scale-combined.txt")"
  fi
  scale_drop scale_combined

  # ---- 7: a big queue
  if [ "$SCALE_BIG" -gt 0 ]; then
    code=$(curl -s -o "$WORK/logs/scale-big-configure.json" -w '%{http_code}' -H 'Content-Type: application/json' \
           --data '{"queue":"scale_big","options":{"completedRetentionSeconds":1}}' "$BROKER/api/v1/configure" || true)
    [ "$code" = 200 ] || say "scale big: configure answered $code $(head -c 300 "$WORK/logs/scale-big-configure.json")"
    scale_run big-fill big_fill 4 "$SCALE_SB seed scale_big 100 $SCALE_BIG 1000 4 $SCALE_BIG_TO" \
      seed scale_big 100 "$SCALE_BIG" 1000 4 "$SCALE_BIG_TO" || true
    filled=$(scale_field big-fill messages); filled=${filled:-0}
    scale_sizes full >"$WORK/scale-sizes-big.txt"
    big_pop_secs=$(( SECS * 6 ))
    scale_run big-pop big_pop 10 "$SCALE_SB drain scale_big 10 0 $big_pop_secs" \
      drain scale_big 10 0 "$big_pop_secs" || true
    popped=$(scale_field big-pop delivered); popped=${popped:-0}
    rest=$(( filled - popped ))
    if [ "$rest" -gt 0 ]; then
      scale_run big-consume big_consume 10 "$SCALE_SB drain scale_big 10 $rest $SCALE_BIG_TO 1000" \
        drain scale_big 10 "$rest" "$SCALE_BIG_TO" 1000 || true
    fi
    # The retention sweep, made quick: maintenance (sql/log_maintenance.sql) runs every
    # SWEEP_MAINT_EVERY (10) sweeper cycles of QUEEN_KV_EXPIRE_EVERY_MS, each
    # retention step deleting up to QUEEN_KV_EXPIRE_BATCH rows; the defaults
    # (1000 ms, 1000 rows) delete at most 100 rows/s. A broker with 100 ms
    # and 50,000 rows runs a step every second, or back to back when a step
    # takes longer. Its counter queen_sweeper_retention_deleted_total starts
    # at 0; the clock stops at its last increase.
    consumed=$(PSQL -Atc "SELECT count(*) FROM queen.log_messages m JOIN queen.log_partitions p ON p.id = m.partition_id
                          JOIN queen.queues q ON q.id = p.queue_id
                          JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = '__QUEUE_MODE__'
                          WHERE q.name = 'scale_big' AND m.msg_offset <= c.committed_offset")
    STACK_BROKER_PID=$BROKER_PID; stack_broker_stop; BROKER_PID=
    start_broker QUEEN_KV_EXPIRE_EVERY_MS=100 QUEEN_KV_EXPIRE_BATCH=50000
    say "scale big_retention: $consumed consumed rows to delete"
    [ "${consumed:-0}" -gt 0 ] || consumed=1   # nothing consumed: the loop ends as stalled
    b0=$(cpu_busy); k0=$(broker_ticks); p0=$(pg_ticks)
    t0=$(date +%s.%N) last_t=$t0 last_n=0 status=timeout
    while :; do
      sleep 1
      n_del=$(curl -s "$BROKER/metrics/prometheus" | awk '$1 == "queen_sweeper_retention_deleted_total" {print $2}')
      n_del=${n_del:-0}; now=$(date +%s.%N)
      if [ "$n_del" != "$last_n" ]; then last_n=$n_del last_t=$now; fi
      if [ "$n_del" -ge "$consumed" ]; then status=0; break; fi
      # 60 s without a row deleted: the sweep is done or stuck
      if python3 -c "import sys; sys.exit(0 if $now - $last_t > 60 else 1)"; then status=stalled; break; fi
      if python3 -c "import sys; sys.exit(0 if $now - $t0 > $SCALE_BIG_TO else 1)"; then break; fi
    done
    b1=$(cpu_busy); k1=$(broker_ticks); p1=$(pg_ticks)
    echo "0 0" >"$WORK/cpu.client"; echo "$((b1 - b0)) $((k1 - k0)) $((p1 - p0))" >"$WORK/cpu.machine"
    rsecs=$(python3 -c "print('%.3f' % max(0.001, $last_t - $t0))")
    rrate=$(python3 -c "print('%.1f' % ($last_n / $rsecs))")
    echo "RETENTIONRESULT consumed=$consumed deleted=$last_n seconds=$rsecs rows_per_s=$rrate status=$status" \
      >"$WORK/scale-big-retention.result"
    row scale big_retention 1 "$rrate" 0 0 "$status" 1 \
      "QUEEN_KV_EXPIRE_EVERY_MS=100 QUEEN_KV_EXPIRE_BATCH=50000 $BUILD/queen serve; GET /metrics/prometheus queen_sweeper_retention_deleted_total each second" \
      $(cpu_per_op "$rrate" "$rsecs")
    say "scale big_retention: $(cat "$WORK/scale-big-retention.result")"
    scale_sizes swept >>"$WORK/scale-sizes-big.txt"
    # back to the broker every other section runs on
    STACK_BROKER_PID=$BROKER_PID; stack_broker_stop; BROKER_PID=
    start_broker
  fi
  echo "scale_elapsed_s=$(( $(date +%s) - SCALE_T0 ))" >>"$WORK/meta.env"
fi

# -------------------------------------------------- 9: idle connections
# Last: its 10,000 client sockets hold ephemeral ports for a while, and the
# port a later scenario binds (redis) may be one of them.
if want idle; then
  IDLE_N=${BENCH_IDLE_CONNS:-10000}
  if python3 "$ROOT/bench/idle.py" 127.0.0.1 "$BROKER_PORT" "$BROKER_PID" "$IDLE_N" >"$WORK/logs/idle.txt" 2>&1; then
    line=$(grep '^IDLE' "$WORK/logs/idle.txt")
    say "idle: $line"
    echo "idle=${line#IDLE }" >>"$WORK/meta.env"
  else
    say "idle scenario failed: $(tail -c 300 "$WORK/logs/idle.txt")"
  fi
fi

echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$WORK/meta.env"
# autovacuum of queen.kv runs every 500 dead rows (sql/kv.sql): its CPU
# is PostgreSQL's and lands in whichever point it happens to overlap
echo "kv_autovacuum=$(PSQL -Atc "SELECT autovacuum_count || ' autovacuums, ' || autoanalyze_count || ' autoanalyzes of queen.kv' FROM pg_stat_user_tables WHERE schemaname = 'queen' AND relname = 'kv'")" >>"$WORK/meta.env"
echo "elapsed_s=$(( $(date +%s) - T_START ))" >>"$WORK/meta.env"
if [ "${BENCH_NO_REPORT:-0}" != 1 ]; then
  $REPORT render "$WORK" "$ROOT/bench/RESULTS.md"
  say "bench/RESULTS.md updated ($(( $(date +%s) - T_START )) s)"
else
  $REPORT render "$WORK" "$WORK/RESULTS.md"
  say "report in $WORK/RESULTS.md ($(( $(date +%s) - T_START )) s)"
fi
