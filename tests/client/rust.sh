#!/usr/bin/env bash
# The Rust client (clients/rust): clippy (required), its own tests and
# its conformance runner against real brokers on the private PostgreSQL
# (scripts/test.sh exports QUEEN_BIN and QUEEN_TEST_PG_URL). Crates come from
# Debian's registry folder (clients/rust/.cargo/config.toml). Prints one TAP
# line per test.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root/clients/rust"
# rustup's toolchain when it is installed but not on PATH, else Debian's.
[ -x "${HOME:-}/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
# One target folder for the plain and the sanitizer runs: the Rust code is
# the same in both (only the broker differs).
export CARGO_TARGET_DIR="$root/build/rust-target"
log=$(mktemp)
n=0
tap() { # verdict name
  n=$((n + 1))
  if [ "$1" = ok ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
}
cargo --version
# Clippy is part of the suite, not a bonus: without it the run fails
# (scripts/install-deps.sh test installs Debian's rust-clippy beside its cargo).
if ! cargo clippy --version >/dev/null 2>&1; then
  tap fail "cargo clippy is not installed (Debian: rust-clippy; rustup: rustup component add clippy)"
elif cargo clippy --all-targets --all-features --offline -- -D warnings >"$log" 2>&1; then tap ok "cargo clippy"; else cat "$log"; tap fail "cargo clippy"; fi
# The README's install path: a fresh crate depends on this one by path (crates from the same
# directory source as this folder's), builds, runs, and sees the license and repository.
app=$(mktemp -d /tmp/queen-rust-app-XXXXXX)
mkdir -p "$app/src" "$app/.cargo"
cp .cargo/config.toml "$app/.cargo/"
printf '[package]\nname = "app"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nqueen-client = { path = "%s" }\n' "$PWD" >"$app/Cargo.toml"
printf 'fn main() { let _ = queen_client::Client::new(queen_client::Options::new("http://127.0.0.1:1")); println!("built"); }\n' >"$app/src/main.rs"
if (cd "$app" && CARGO_TARGET_DIR="$app/target" cargo run -q --offline) >"$log" 2>&1 && grep -qx built "$log" &&
   (cd "$app" && cargo metadata -q --offline --format-version 1) 2>>"$log" | python3 -c '
import json, sys
p = [p for p in json.load(sys.stdin)["packages"] if p["name"] == "queen-client"][0]
assert p["license"] == "Apache-2.0", p["license"]
assert (p["repository"] or "").startswith("https://"), p["repository"]' >>"$log" 2>&1; then
  tap ok "a crate with a path dependency on queen-client builds and runs; Apache-2.0, repository"
else
  cat "$log"; tap fail "a crate with a path dependency on queen-client"
fi
rm -rf "$app"
cargo test --offline --all-features --no-fail-fast -- --test-threads=2 >"$log" 2>&1
rc=$?
cat "$log"
# cargo's "test NAME ... ok|FAILED" lines, as TAP.
while read -r _ name _ verdict; do
  case $verdict in
    ok) tap ok "$name" ;;
    ignored) tap ok "$name # SKIP" ;;
    *) tap fail "$name" ;;
  esac
done < <(grep -E '^test .* \.\.\. (ok|FAILED|ignored)$' "$log")
grep -qE '^test result: ' "$log" || { tap fail "cargo test ran no harness (exit $rc)"; }
rm -f "$log"
exit $rc
