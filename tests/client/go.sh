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
# The README's install path: a fresh module takes the client by its module path with go get, the
# replace pointing at this folder standing in for the network (GOPROXY=off), and builds against it.
module=$(sed -n 's/^go get \([^ ]*\)$/\1/p' README.md | head -n 1)
src=$PWD
app=$(mktemp -d /tmp/queen-go-app-XXXXXX)
cat >"$app/main.go" <<GO
package main

import (
	"fmt"

	queen "$module"
)

func main() { fmt.Printf("%T\n", queen.New) }
GO
n=$((n + 1))
declared=$(sed -n 's/^module //p' go.mod)
if out=$([ "$declared" = "$module" ] || { echo "go.mod declares $declared, the README says $module"; exit 1; }
         cd "$app" && go mod init example.com/app 2>&1 && go mod edit -replace="$module=$src" 2>&1 &&
         go get "$module" 2>&1 && go build -o app . 2>&1 && ./app 2>&1) &&
   [ "$out" != "${out%func(queen.Options) (*queen.Client, error)}" ]; then
  echo "ok $n - go get $module (replace for offline) builds a program"
else
  echo "$out" | sed 's/^/# /'; echo "not ok $n - go get $module"
fi
rm -rf "$app"
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
