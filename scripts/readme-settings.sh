#!/usr/bin/env bash
# Rewrites the settings table of README.md from `queen settings`.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/queen}
python3 - "$bin" <<'PY'
import subprocess, sys
table = subprocess.run([sys.argv[1], 'settings'], capture_output=True, text=True, check=True).stdout
s = open('README.md').read()
a = s.index('<!-- settings:begin -->') + len('<!-- settings:begin -->\n')
b = s.index('<!-- settings:end -->')
open('README.md', 'w').write(s[:a] + table + s[b:])
PY
