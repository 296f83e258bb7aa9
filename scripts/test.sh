#!/usr/bin/env bash
# Runs every suite against a private PostgreSQL started here and stopped on
# exit (also on failure): unit tests, pgTAP files, integration tests.
# Prints one TAP-ish line per test and ends with "N passed, M failed".
#   BUILD=build scripts/test.sh [pattern]   (pattern filters test names; a
#   comma-separated list runs the suites matching any: client/test_,client/install)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
filter=${1:-}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# One cluster per run, so two runs in one tree (a developer's and an
# editor's, say) never stop each other's database.
pgdir="$BUILD/pgtest.$$"
rm -rf "$BUILD"/pgtest "$pgdir"
port=$(free_port)
logdir="$BUILD/test-logs"; mkdir -p "$logdir"
cleanup() {
  [ -n "${shared_pid:-}" ] && kill "$shared_pid" 2>/dev/null
  scripts/pg.sh down "$pgdir" >/dev/null 2>&1 || true
  cp "$pgdir/server.log" "$logdir/postgres.log" 2>/dev/null || true
  rm -rf "$pgdir"
}
trap cleanup EXIT INT TERM

echo "test: private PostgreSQL on 127.0.0.1:$port ($pgdir)"
scripts/pg.sh up "$pgdir" "$port" --fast || { echo "test: could not start PostgreSQL"; echo "0 passed, 1 failed"; exit 1; }
export QUEEN_TEST_PG_URL=$(scripts/pg.sh url "$pgdir" "$port")
export QUEEN_TEST_PG_PORT=$port
export QUEEN_TEST_PG_DIR=$pgdir
export QUEEN_BIN=$PWD/$BUILD/queen
export QUEEN_LOG_LEVEL=${QUEEN_LOG_LEVEL:-warn}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

passed=0; failed=0; failures=()

# Counts "ok" / "not ok" lines of one TAP stream; a suite that exits
# non-zero without a failing line still counts as one failure. A skip (an
# "ok ... # SKIP" line, or a "1..0 # SKIP" plan) fails like a failure: a
# test that did not run proved nothing, and a green run must mean it ran.
tally() { # name logfile exitcode seconds
  local name=$1 log=$2 rc=$3 secs=$4 ok nok skip
  skip=$(grep -ciE '^[[:space:]]*(ok [0-9]+.*#[[:space:]]*skip|1\.\.0[[:space:]]*#[[:space:]]*skip)' "$log")
  ok=$(grep -cE '^[[:space:]]*ok [0-9]+' "$log")
  nok=$(grep -cE '^[[:space:]]*not ok [0-9]+' "$log")
  ok=$((ok - skip)); [ "$ok" -lt 0 ] && ok=0
  nok=$((nok + skip))
  if [ "$rc" -ne 0 ] && [ "$nok" -eq 0 ]; then nok=1; fi
  passed=$((passed + ok)); failed=$((failed + nok))
  if [ "$nok" -gt 0 ]; then
    failures+=("$name")
    echo "FAIL $name ($ok ok, $nok failed, $skip of them skipped; ${secs}s) -- log: $log"
    grep -iE '^[[:space:]]*not ok|#[[:space:]]*skip|^# |ERROR|error|Assertion|Sanitizer' "$log" | head -n 40 | sed 's/^/    /'
  else
    echo "ok   $name ($ok; ${secs}s)"
  fi
}

# A suite whose program is not there fails the run: a build that lost a
# test must not pass for having nothing to run.
missing() { # name path
  wanted "$1" || return
  failed=$((failed + 1)); failures+=("$1")
  echo "FAIL $1 (missing: $2 is not an executable; build it with make tests)"
}

# Each test program a source file promises: sources matching glob, their
# programs under dir (the source's name less its extension).
each_program() { # suite-prefix dir glob...
  local prefix=$1 dir=$2 src t; shift 2
  for src in "$@"; do
    [ -f "$src" ] || continue
    t="$dir/$(basename "${src%.*}")"
    if [ -x "$t" ]; then run_suite "$prefix/$(basename "$t")" "$t"; else missing "$prefix/$(basename "$t")" "$t"; fi
  done
}

wanted() { # name
  local part parts
  [ -z "$filter" ] && return 0
  IFS=, read -ra parts <<<"$filter"
  for part in "${parts[@]}"; do [[ "$1" == *$part* ]] && return 0; done
  return 1
}

run_suite() { # name command...
  local name=$1; shift
  wanted "$name" || return
  local log="$logdir/$(echo "$name" | tr '/' '_').log" start=$SECONDS rc
  CMOCKA_MESSAGE_OUTPUT=TAP timeout 900 "$@" >"$log" 2>&1
  rc=$?
  tally "$name" "$log" $rc $((SECONDS - start))
}

# Schema boot through the broker itself: the same path production takes.
QUEEN_PG_URL=$QUEEN_TEST_PG_URL "$QUEEN_BIN" schema apply >"$logdir/schema.log" 2>&1 || { cat "$logdir/schema.log"; echo "0 passed, 1 failed"; exit 1; }
psql "$QUEEN_TEST_PG_URL" -qtAc 'CREATE EXTENSION IF NOT EXISTS pgtap' >/dev/null

# make check (QUEEN_TEST_SHARED_BROKER=1): one broker for every suite that
# asks for no settings of its own (tests/support/http_fixture.c,
# http_broker_setup, starts the same: two HTTP threads). Stopped at the end;
# its exit status is a suite of its own, so a sanitizer's report fails the run.
shared_pid=
unset QUEEN_TEST_BROKER_PORT
if [ "${QUEEN_TEST_SHARED_BROKER:-0}" = 1 ]; then
  bport=$(free_port)
  QUEEN_PG_URL=$QUEEN_TEST_PG_URL QUEEN_PORT=$bport QUEEN_BIND=127.0.0.1 QUEEN_HTTP_THREADS=2 \
    "$QUEEN_BIN" serve >"$logdir/shared-broker.log" 2>&1 &
  shared_pid=$!
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$bport/health" >/dev/null 2>&1 && break
    kill -0 "$shared_pid" 2>/dev/null || break
    sleep 0.1 # polling the condition (health), 30 s at most
  done
  curl -sf "http://127.0.0.1:$bport/health" >/dev/null 2>&1 ||
    { cat "$logdir/shared-broker.log"; echo "test: the shared broker never answered"; echo "0 passed, 1 failed"; exit 1; }
  export QUEEN_TEST_BROKER_PORT=$bport
fi

run_suite "lint/include_structure" python3 scripts/check-includes.py
run_suite "lint/openapi_routes" python3 scripts/check-openapi-routes.py
# Every reason SQL raises and C names against the registry (src/engine/reasons.txt).
run_suite "lint/reasons" python3 scripts/reasons.py check
# sql/MANIFEST names every schema file once, and the build's guard refuses one that does not.
run_suite "lint/sql_manifest" bash scripts/check-sql-manifest.sh
# Every client against the one vocabulary (clients/API.md).
run_suite "lint/client_api" python3 scripts/check-client-api.py
# Every relative link of the Markdown pages, none outside the repository from
# README.md and docs/, and the README's layout table against the tree.
run_suite "lint/docs" python3 scripts/check-docs.py
each_program unit "$BUILD/tests/unit" tests/unit/test_*.c
for f in tests/sql/*.sql; do
  run_suite "sql/$(basename "$f")" pg_prove --verbose -d "$QUEEN_TEST_PG_URL" "$f"
done
each_program integration "$BUILD/tests/integration" tests/integration/test_*.c
# The soak's driver and sampler, bounded (make soak runs it for real).
run_suite "bench/soak_smoke" env BUILD="$BUILD" bash tests/bench/soak_smoke.sh
# The document against a real broker (its own, on the private PostgreSQL).
run_suite "api/openapi_responses" python3 tests/api/validate_openapi.py
each_program compat "$BUILD/tests/compat" tests/compat/test_*.c
# The remote client: its conformance runner and its own tests, queenctl, make install.
each_program client "$BUILD/tests/client" tests/client/test_*.c
for t in tests/client/*.sh; do
  run_suite "client/$(basename "$t" .sh)" bash "$t"
done
# The web console in a real browser (Debian's chromium, headless), against real brokers.
run_suite "console/browser" bash tests/console/run.sh
# The PHP and C++ clients: their own tests and conformance runners, with
# brokers from tests/client/conformance_harness.
export QUEEN_CONFORMANCE_HARNESS=$PWD/$BUILD/tests/client/conformance_harness
each_program clients/cpp "$BUILD/clients/cpp" clients/cpp/tests/test_*.cpp
run_suite "clients/php/phpunit" phpunit --configuration clients/php/phpunit.xml
# The reliability campaign (bounded here; longer as make torture).
each_program linearizability "$BUILD/tests/linearizability" tests/linearizability/test_*.c
for src in tests/faults/test_*.c; do
  t="$BUILD/tests/faults/$(basename "$src" .c)"
  wanted "faults/$(basename "$t")" || continue
  [ -x "$t" ] || { missing "faults/$(basename "$t")" "$t"; continue; }
  run_suite "faults/$(basename "$t")" "$t"
  # A fault suite crashes the cluster on purpose: whatever became of it,
  # the suites after it get it back running.
  scripts/pg.sh up "$pgdir" "$port" --fast >/dev/null 2>&1 || echo "test: PostgreSQL did not come back after $t"
done
fuzz_build=${FUZZ_BUILD:-build/fuzz}
for src in tests/fuzz/fuzz_*.c; do
  t="$fuzz_build/$(basename "$src" .c)"
  if [ -x "$t" ]; then run_suite "fuzz/$(basename "$t")" bash scripts/fuzz.sh "$t"; else missing "fuzz/$(basename "$t")" "$t"; fi
done

if [ -n "$shared_pid" ]; then
  kill -TERM "$shared_pid"
  wait "$shared_pid"
  tally "broker/shared" "$logdir/shared-broker.log" $? 0
  shared_pid=
fi

echo
[ ${#failures[@]} -gt 0 ] && echo "failed suites: ${failures[*]}"
# A filter that matched nothing ran nothing: that is no pass either.
[ $((passed + failed)) -eq 0 ] && { echo "test: no suite matched '$filter'"; failed=1; }
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
