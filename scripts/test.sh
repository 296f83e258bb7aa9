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
# non-zero without a failing line still counts as one failure.
tally() { # name logfile exitcode
  local name=$1 log=$2 rc=$3 ok nok
  ok=$(grep -cE '^[[:space:]]*ok [0-9]+' "$log")
  nok=$(grep -cE '^[[:space:]]*not ok [0-9]+' "$log")
  if [ "$rc" -ne 0 ] && [ "$nok" -eq 0 ]; then nok=1; fi
  passed=$((passed + ok)); failed=$((failed + nok))
  if [ "$nok" -gt 0 ]; then
    failures+=("$name")
    echo "FAIL $name ($ok ok, $nok failed) -- log: $log"
    grep -E '^[[:space:]]*not ok|^# |ERROR|error|Assertion|Sanitizer' "$log" | head -n 40 | sed 's/^/    /'
  else
    echo "ok   $name ($ok)"
  fi
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
  local log="$logdir/$(echo "$name" | tr '/' '_').log"
  CMOCKA_MESSAGE_OUTPUT=TAP timeout 900 "$@" >"$log" 2>&1
  tally "$name" "$log" $?
}

# Schema boot through the broker itself: the same path production takes.
QUEEN_PG_URL=$QUEEN_TEST_PG_URL "$QUEEN_BIN" schema apply >"$logdir/schema.log" 2>&1 || { cat "$logdir/schema.log"; echo "0 passed, 1 failed"; exit 1; }
psql "$QUEEN_TEST_PG_URL" -qtAc 'CREATE EXTENSION IF NOT EXISTS pgtap' >/dev/null

run_suite "lint/include_structure" python3 scripts/check-includes.py
run_suite "lint/openapi_routes" python3 scripts/check-openapi-routes.py
# Every reason SQL raises and C names against the registry (src/engine/reasons.txt).
run_suite "lint/reasons" python3 scripts/reasons.py check
# Every client against the one vocabulary (clients/API.md).
run_suite "lint/client_api" python3 scripts/check-client-api.py
for t in "$BUILD"/tests/unit/test_*; do
  [ -x "$t" ] && run_suite "unit/$(basename "$t")" "$t"
done
for f in tests/sql/*.sql; do
  [ -f "$f" ] && run_suite "sql/$(basename "$f")" pg_prove --verbose -d "$QUEEN_TEST_PG_URL" "$f"
done
for t in "$BUILD"/tests/integration/test_*; do
  [ -x "$t" ] && run_suite "integration/$(basename "$t")" "$t"
done
# The soak's driver and sampler, bounded (make soak runs it for real).
run_suite "bench/soak_smoke" env BUILD="$BUILD" bash tests/bench/soak_smoke.sh
# The document against a real broker (its own, on the private PostgreSQL).
run_suite "api/openapi_responses" python3 tests/api/validate_openapi.py
for t in "$BUILD"/tests/compat/test_*; do
  [ -x "$t" ] && run_suite "compat/$(basename "$t")" "$t"
done
# The remote client: its conformance runner and its own tests, queenctl, make install.
for t in "$BUILD"/tests/client/test_*; do
  [ -x "$t" ] && run_suite "client/$(basename "$t")" "$t"
done
for t in tests/client/*.sh; do
  [ -f "$t" ] && run_suite "client/$(basename "$t" .sh)" bash "$t"
done
# The web console in a real browser (Debian's chromium, headless), against real brokers.
run_suite "console/browser" bash tests/console/run.sh
# The PHP and C++ clients: their own tests and conformance runners, with
# brokers from tests/client/conformance_harness.
export QUEEN_CONFORMANCE_HARNESS=$PWD/$BUILD/tests/client/conformance_harness
for t in "$BUILD"/clients/cpp/test_*; do
  [ -x "$t" ] && run_suite "clients/cpp/$(basename "$t")" "$t"
done
run_suite "clients/php/phpunit" phpunit --configuration clients/php/phpunit.xml
# The reliability campaign (bounded here; longer as make torture).
for t in "$BUILD"/tests/linearizability/test_*; do
  [ -x "$t" ] && run_suite "linearizability/$(basename "$t")" "$t"
done
for t in "$BUILD"/tests/faults/test_*; do
  [ -x "$t" ] || continue
  run_suite "faults/$(basename "$t")" "$t"
  # A fault suite crashes the cluster on purpose: whatever became of it,
  # the suites after it get it back running.
  scripts/pg.sh up "$pgdir" "$port" --fast >/dev/null 2>&1 || echo "test: PostgreSQL did not come back after $t"
done
fuzz_build=${FUZZ_BUILD:-build/fuzz}
for t in "$fuzz_build"/fuzz_*; do
  [ -x "$t" ] && run_suite "fuzz/$(basename "$t")" bash scripts/fuzz.sh "$t"
done

echo
[ ${#failures[@]} -gt 0 ] && echo "failed suites: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
