#!/usr/bin/env bash
# The Go client (clients/go): go vet, its own tests and its conformance
# runner against real brokers on the private PostgreSQL (scripts/test.sh
# exports QUEEN_BIN and QUEEN_TEST_PG_URL). Prints one TAP line per test.
set -uo pipefail
cd "$(dirname "$0")/../../clients/go"
export GOPROXY=off
# The build cache lives under HOME; without one, in the build tree.
[ -n "${HOME:-}" ] || export GOCACHE="$PWD/../../${BUILD:-build}/go-cache"
n=0
if out=$(go vet ./... 2>&1); then n=$((n + 1)); echo "ok $n - go vet"; else n=$((n + 1)); echo "$out"; echo "not ok $n - go vet"; fi
unformatted=$(gofmt -l .)
if [ -z "$unformatted" ]; then n=$((n + 1)); echo "ok $n - gofmt"; else n=$((n + 1)); echo "gofmt: $unformatted"; echo "not ok $n - gofmt"; fi
log=$(mktemp)
go test -count=1 -v -timeout 600s ./... >"$log" 2>&1
rc=$?
cat "$log"
# go test -v's "--- PASS/FAIL: name" lines, as TAP.
grep -E '^[[:space:]]*--- (PASS|FAIL|SKIP):' "$log" | while read -r _ verdict name _; do
  n=$((n + 1))
  case $verdict in
    PASS:) echo "ok $n - $name" ;;
    SKIP:) echo "ok $n - $name # SKIP" ;;
    *) echo "not ok $n - $name" ;;
  esac
done
rm -f "$log"
exit $rc
