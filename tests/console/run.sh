#!/usr/bin/env bash
# The web console's browser test (tests/console/console.test.js) for scripts/test.sh: installs
# puppeteer-core at the version package-lock.json pins (once; it downloads no browser) and runs the
# test with Debian's chromium against real brokers on the private PostgreSQL. TAP on stdout.
set -uo pipefail
cd "$(dirname "$0")"
if [ ! -x "${QUEEN_CHROMIUM:-/usr/bin/chromium}" ]; then
  echo "not ok 1 - chromium is not installed (scripts/install-deps.sh installs Debian's chromium)"
  exit 1
fi
if [ ! -d node_modules/puppeteer-core ]; then
  log=$(mktemp /tmp/queen-console-npm-XXXXXX)
  # PUPPETEER_SKIP_DOWNLOAD: belt and braces; puppeteer-core never fetches a browser itself.
  if ! PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund >"$log" 2>&1; then
    echo "not ok 1 - npm ci (puppeteer-core, pinned)"; sed 's/^/# /' "$log"; rm -f "$log"; exit 1
  fi
  rm -f "$log"
fi
exec node --test --test-reporter=tap console.test.js
