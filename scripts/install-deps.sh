#!/usr/bin/env bash
# Installs the Debian packages Queen needs to build, test, run and benchmark.
# Idempotent: installs only what is missing, and runs apt-get update once,
# only when something must be installed.
set -euo pipefail

packages=(
  build-essential pkg-config
  postgresql libpq-dev postgresql-15-pgtap pgtap
  libhttp-parser-dev libjansson-dev libcmocka-dev libcurl4-openssl-dev libssl-dev openssl
  curl wrk python3 python3-yaml python3-jsonschema redis-server
  gnuplot-nox
  clang libclang-rt-14-dev
  man-db
  python3-mypy python3-venv
  g++ nlohmann-json3-dev libgtest-dev cmake
  php8.2-cli php8.2-curl phpunit
  composer
)

# make ha-test: Patroni (its Python modules, psycopg2 among them, come with
# it) and a one-member etcd; the test starts its own on free loopback ports
# and leaves any service the packages start alone.
packages+=(patroni etcd-server etcd-client)
# make pgbouncer-test: PgBouncer in front of a private cluster, started by the test.
packages+=(pgbouncer)

# The Go and Rust clients (clients/go, clients/rust): Go 1.19 and the Rust
# crates, both from Debian. Debian's rustc and cargo (1.63) only when no
# rustup toolchain is there; the crate builds with either.
packages+=(golang-go librust-serde-json-dev)
# The Rust client's https:// (native-tls on OpenSSL) and its async client (tokio).
packages+=(librust-native-tls-dev librust-tokio-dev)
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "${HOME:-}/.cargo/bin/cargo" ]; then
  packages+=(cargo rustc)
fi

# Node and npm for the JavaScript client's tests (clients/js): Debian's nodejs (18 on Debian 12) and
# npm, unless a node and an npm are already on the PATH (from another packaging of Node).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

# The web console's browser test (tests/console): Debian's chromium, driven headless by puppeteer-core
# from the npm registry (pinned by tests/console/package-lock.json; it never downloads a browser).
packages+=(chromium)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
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

echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# The Debian package starts the system cluster; Queen never uses it.
