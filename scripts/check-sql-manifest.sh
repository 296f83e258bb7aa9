#!/usr/bin/env bash
# sql/MANIFEST against sql/, as TAP for scripts/test.sh (lint/sql_manifest).
# The build embeds the schema through scripts/embed.sh, which reads the
# manifest and refuses it when a sql/*.sql file is not listed (it would never
# be applied), a listed file is missing, or a name is listed twice. This runs
# that guard on the real manifest (it must pass) and on broken copies (each
# must be refused), so the guard itself cannot quietly stop guarding.
set -uo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; sed 's/^/# /' "$tmp/err"; }

if scripts/embed.sh sql "$tmp/out.c" sql/MANIFEST 2>"$tmp/err"; then
  ok "sql/MANIFEST lists every sql/*.sql file once, and each exists"
else
  nok "sql/MANIFEST lists every sql/*.sql file once, and each exists"
fi

# A copy of sql/ broken one way; embed.sh must refuse it, naming why.
refused() { # description expected-message
  if scripts/embed.sh sql "$tmp/out.c" "$tmp/sql/MANIFEST" 2>"$tmp/err"; then
    nok "$1: embed.sh accepted it"
  elif grep -q "$2" "$tmp/err"; then
    ok "$1"
  else
    nok "$1: refused without saying \"$2\""
  fi
}
fresh() { rm -rf "$tmp/sql"; cp -r sql "$tmp/sql"; }

fresh; echo 'SELECT 1;' >"$tmp/sql/unlisted.sql"
refused "a .sql file the manifest does not list" "unlisted.sql is not in"
fresh; echo 'gone.sql # a file that is not there' >>"$tmp/sql/MANIFEST"
refused "a manifest entry with no file" "lists gone.sql, which is not in"
fresh; first=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' sql/MANIFEST | head -n 1 | tr -d '[:space:]')
echo "$first" >>"$tmp/sql/MANIFEST"
refused "a file listed twice" "lists $first more than once"
echo "1..$n"
