#!/usr/bin/env bash
# Installs the Debian packages one use of Queen needs, by profile:
#   scripts/install-deps.sh [PROFILE...]     (default: all)
#   run        what make (all) builds: the broker, libqueen, libqueenclient and its
#              C++ layer, queenctl; and serving them (make run)
#   test       run + every suite of make test and make check: cmocka, pgTAP, the
#              fuzzers' clang, and each client's toolchain (C++, PHP, Go, Rust with
#              clippy, Node, Python's mypy), the console's chromium
#   bench      run + the benchmark and soak tools (make bench, make soak)
#   ha         run + Patroni and etcd (make ha-test)
#   pgbouncer  run + PgBouncer (make pgbouncer-test)
#   ci         what .ci/run runs: test, ha and pgbouncer
#   all        every profile
# So that a user who only wants the broker installs a compiler, python3 and six
# libraries, not a browser and four language toolchains.
# Idempotent: installs only what is missing, and runs apt-get update once,
# only when something must be installed.
set -euo pipefail

run=(
  build-essential pkg-config
  postgresql libpq-dev
  libhttp-parser-dev libjansson-dev libcurl4-openssl-dev libssl-dev openssl
  nlohmann-json3-dev
  # the build generates the reason registry's C table from src/engine/reasons.txt
  python3
)

test=(
  postgresql-15-pgtap pgtap libcmocka-dev
  python3 python3-yaml python3-jsonschema curl
  # the fuzzers (tests/fuzz): clang's libFuzzer and sanitizer runtimes
  clang libclang-rt-14-dev
  # tests/client/install.sh reads the installed man pages; the Python client type-checks with
  # mypy and installs its folder with pip (a skipped test fails the run)
  man-db python3-mypy python3-venv python3-pip
  # the C++ client's tests and the CMake package test
  libgtest-dev cmake
  php8.2-cli php8.2-curl phpunit composer
  # The Go and Rust clients (clients/go, clients/rust): Go 1.19 and the Rust crates from Debian.
  golang-go librust-serde-json-dev
  # the Rust client's https:// (native-tls on OpenSSL) and its async client (tokio)
  librust-native-tls-dev librust-tokio-dev
  # The web console's browser test (tests/console): Debian's chromium, driven headless by
  # puppeteer-core from the npm registry (pinned by tests/console/package-lock.json; it never
  # downloads a browser).
  chromium
)
# Debian's rustc, cargo and clippy (1.63) only when no rustup toolchain is
# there; the crate builds with either, and clippy is required by the suite
# (tests/client/rust.sh), so a rustup toolchain must carry its clippy component.
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "${HOME:-}/.cargo/bin/cargo" ]; then
  test+=(cargo rustc rust-clippy)
fi
# Node and npm for the JavaScript client's tests (clients/js): Debian's nodejs (18 on Debian 12) and
# npm, unless a node and an npm are already on the PATH (from another packaging of Node).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  test+=(nodejs npm)
fi

bench=(wrk curl python3 gnuplot-nox redis-server)
# Patroni (its Python modules, psycopg2 among them, come with it) and a
# one-member etcd; the test starts its own on free loopback ports and leaves
# any service the packages start alone.
ha=(patroni etcd-server etcd-client python3)
# PgBouncer in front of a private cluster, started by the test.
pgbouncer=(pgbouncer)

profiles=("$@")
[ ${#profiles[@]} -eq 0 ] && profiles=(all)
packages=("${run[@]}")
for p in "${profiles[@]}"; do
  case $p in
    run) ;;
    test) packages+=("${test[@]}") ;;
    bench) packages+=("${bench[@]}") ;;
    ha) packages+=("${ha[@]}") ;;
    pgbouncer) packages+=("${pgbouncer[@]}") ;;
    ci) packages+=("${test[@]}" "${ha[@]}" "${pgbouncer[@]}") ;;
    all) packages+=("${test[@]}" "${bench[@]}" "${ha[@]}" "${pgbouncer[@]}") ;;
    *) echo "install-deps: unknown profile '$p' (run, test, bench, ha, pgbouncer, ci, all)" >&2; exit 2 ;;
  esac
done

missing=()
for p in $(printf '%s\n' "${packages[@]}" | sort -u); do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

# A rustup toolchain without clippy cannot get it from Debian: say so now,
# not when the Rust suite fails.
case " ${profiles[*]} " in
  *" test "*|*" ci "*|*" all "*)
    if command -v cargo >/dev/null 2>&1 || [ -x "${HOME:-}/.cargo/bin/cargo" ]; then
      PATH="${HOME:-}/.cargo/bin:$PATH" cargo clippy --version >/dev/null 2>&1 ||
        echo "install-deps: cargo has no clippy (rustup component add clippy); the Rust suite needs it" >&2
    fi ;;
esac

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present (${profiles[*]})"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=sudo
  else
    echo "install-deps: missing packages: ${missing[*]}" >&2
    echo "install-deps: run as root:  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
else
  SUDO=
fi

echo "install-deps: installing ${missing[*]} (${profiles[*]})"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# The Debian package starts the system cluster; Queen never uses it.
