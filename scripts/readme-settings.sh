#!/usr/bin/env bash
# Rewrites the settings table of docs/settings.md from `queen settings`
# (the name is older than the page; tests/unit/test_config.c checks it).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/queen}
python3 - "$bin" <<'PY'
import subprocess, sys
table = subprocess.run([sys.argv[1], 'settings'], capture_output=True, text=True, check=True).stdout
s = open('docs/settings.md').read()
a = s.index('<!-- settings:begin -->') + len('<!-- settings:begin -->\n')
b = s.index('<!-- settings:end -->')
open('docs/settings.md', 'w').write(s[:a] + table + s[b:])
PY
