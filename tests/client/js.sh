#!/usr/bin/env bash
# The JavaScript/TypeScript client (clients/js): the declarations checked by tsc, the package's
# contents as npm pack makes them, its own tests and its conformance runner (node --test) against real
# brokers on the private PostgreSQL scripts/test.sh started. TAP on stdout.
set -uo pipefail
cd "$(dirname "$0")/../../clients/js"
n=0; failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; sed 's/^/# /' "$log"; }
log=$(mktemp /tmp/queen-js-XXXXXX)
trap 'rm -f "$log"' EXIT

# TypeScript, the one dev dependency, at the version package-lock.json pins (fetched once).
if [ ! -x node_modules/.bin/tsc ]; then
  if npm ci --no-audit --no-fund >"$log" 2>&1; then ok "npm ci (typescript, pinned)"; else not_ok "npm ci"; fi
fi
if node_modules/.bin/tsc --noEmit -p tsconfig.json >"$log" 2>&1; then ok "tsc --noEmit: index.d.ts and test/types.check.ts"; else not_ok "tsc --noEmit"; fi

# What npm would publish: the sources and the declarations, no tests.
if npm pack --dry-run --json >"$log" 2>/dev/null &&
   node -e '
     const files = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))[0].files.map((f) => f.path);
     for (const need of ["package.json", "index.d.ts", "README.md", "src/index.js", "src/json.js"])
       if (!files.includes(need)) throw new Error("missing " + need);
     if (files.some((f) => f.startsWith("test/") || f.startsWith("node_modules/"))) throw new Error("tests packed");' "$log"; then
  ok "npm pack: sources, declarations, README; no tests"
else
  not_ok "npm pack"
fi

node --test --test-reporter=tap test/*.test.js
rc=$?
[ "$failed" -eq 0 ] && exit $rc
exit 1
