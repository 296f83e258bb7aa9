#!/usr/bin/env bash
# The Python client (clients/python): its own tests and its conformance runner, with the blocking and
# the asyncio client, against real brokers on the private PostgreSQL scripts/test.sh started. TAP on
# stdout. PYTHON picks the interpreter (default python3: Debian's 3.11, standard library only).
set -uo pipefail
cd "$(dirname "$0")/../.."
exec "${PYTHON:-python3}" -B clients/python/tests/tap.py "$@"
