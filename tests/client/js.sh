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

# The README's install path: npm pack, then npm install of that tarball into a fresh project (no
# registry: the package has no runtime dependencies), whose program imports the client by its name
# and finds the license and repository a registry would show.
proj=$(mktemp -d /tmp/queen-js-proj-XXXXXX)
if tgz=$(npm pack --silent --pack-destination "$proj" 2>"$log") &&
   (cd "$proj" && npm init -y >/dev/null && npm install --offline --no-audit --no-fund "./$tgz") >"$log" 2>&1 &&
   (cd "$proj" && node --input-type=module -e '
     import { createRequire } from "node:module";
     import * as queen from "@queen/client";
     if (typeof queen.Queen !== "function") throw new Error("no Queen export");
     const pkg = createRequire(import.meta.url)("@queen/client/package.json");
     if (pkg.license !== "Apache-2.0") throw new Error("license " + pkg.license);
     if (!/^git\+https:\/\//.test(pkg.repository?.url ?? "")) throw new Error("repository " + JSON.stringify(pkg.repository));
     if (!createRequire(import.meta.url).resolve("@queen/client").includes("/node_modules/@queen/client/")) throw new Error("not the installed copy");') >>"$log" 2>&1; then
  ok "npm pack + npm install of the tarball into a fresh project: imports, Apache-2.0, repository"
else
  not_ok "npm pack + npm install into a fresh project"
fi
rm -rf "$proj"

node --test --test-reporter=tap test/*.test.js
rc=$?
[ "$failed" -eq 0 ] && exit $rc
exit 1
