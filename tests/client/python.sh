#!/usr/bin/env bash
# The Python client (clients/python): its own tests and its conformance runner, with the blocking and
# the asyncio client, against real brokers on the private PostgreSQL scripts/test.sh started. TAP on
# stdout. PYTHON picks the interpreter; by default Debian's (/usr/bin/python3, 3.11 on Debian 12), the one
# scripts/install-deps.sh installs python3-mypy for, else the first python3 on the PATH.
set -uo pipefail
cd "$(dirname "$0")/../.."
python=${PYTHON:-}
if [ -z "$python" ]; then
  if [ -x /usr/bin/python3 ]; then python=/usr/bin/python3; else python=python3; fi
fi
exec "$python" -B clients/python/tests/tap.py "$@"
