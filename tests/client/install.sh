#!/usr/bin/env bash
# make install PREFIX=DIR into a temporary directory, then what a user of
# the installed tree does: compile a small program against each library
# with pkg-config and run it, run the installed binaries, read the man
# pages. TAP on stdout. Always the plain build (tests/client/install.sh
# under a SAN run installs build/, which a program without ASan can load).
set -uo pipefail
cd "$(dirname "$0")/../.."
n=0; failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }
check() { local what=$1; shift; if "$@" >>"$log" 2>&1; then ok "$what"; else not_ok "$what"; fi; }

prefix=$(mktemp -d /tmp/queen-install-XXXXXX)
work=$(mktemp -d /tmp/queen-install-work-XXXXXX)
log=$work/log
trap 'rm -rf "$prefix" "$work"' EXIT

# The make that runs this script may pass SAN=1 down through MAKEFLAGS.
check "make install PREFIX=$prefix" env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s install PREFIX="$prefix" SAN= BUILD=build

for f in include/queen.h include/queen_runtime.h include/queen_client.h include/queen_client.hpp lib/libqueen.a lib/libqueen.so \
         lib/libqueenclient.a lib/libqueenclient.so lib/libqueenclient++.a bin/queen bin/queenctl \
         share/man/man1/queenctl.1 share/man/man1/queen.1 lib/pkgconfig/libqueen.pc lib/pkgconfig/libqueenclient.pc \
         lib/pkgconfig/libqueenclient++.pc lib/cmake/Queen/QueenConfig.cmake lib/cmake/Queen/QueenConfigVersion.cmake; do
  if [ -e "$prefix/$f" ]; then ok "installed $f"; else not_ok "installed $f"; fi
done

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cat > "$work/client.c" <<'C'
#include <queen_client.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    const char *urls[] = {argv[1]};
    queen_client_options o;
    queen_client_options_defaults(&o);
    o.urls = urls; o.nurls = 1; o.max_attempts = argc > 2 ? 2 : 1;
    queen_client_error err;
    queen_client *c = queen_client_open(&o, &err);
    char version[32];
    int rc = queen_client_health(c, version, sizeof version, &err);
    printf("%s attempts=%d\n", rc == 0 ? version : err.code, err.attempts);
    queen_client_close(c);
    return 0;
}
C
cat > "$work/embedded.c" <<'C'
#include <queen.h>
#include <stdio.h>
int main(void) {
    char t[QUEEN_TENANT_LEN + 1];
    if (queen_tenant_canonical(NULL, t) != 0) return 1;
    printf("%s %s\n", QUEEN_VERSION, t);
    return 0;
}
C
# The runtime header (an event loop embedding the engine) stands on its own:
# no libpq or engine header needed to include it.
cat > "$work/runtime.c" <<'C'
#include <queen_runtime.h>
#include <stdio.h>
int main(void) {
    const char text[] = "[1, {\"a\": 2}, \"x\"]";
    printf("%ld\n", rawjson_array_count((rawjson_span){text, sizeof text - 1}));
    return 0;
}
C
check "pkg-config knows libqueenclient" pkg-config --exists libqueenclient
check "pkg-config knows libqueen" pkg-config --exists libqueen
# shellcheck disable=SC2046
check "a client program compiles with pkg-config --cflags --libs libqueenclient" \
  cc -std=c11 -Wall -Werror -o "$work/client" "$work/client.c" $(pkg-config --cflags --libs libqueenclient)
# shellcheck disable=SC2046
check "an embedded program compiles with pkg-config --cflags --libs libqueen" \
  cc -std=c11 -Wall -Werror -o "$work/embedded" "$work/embedded.c" $(pkg-config --cflags --libs libqueen)

# docs/clients.md's five-line example, as a user would paste it into main().
{
  printf '#include <queen_client.h>\n#include <stdio.h>\n#include <stdlib.h>\nint main(void) {\n'
  awk '/^# Clients/{in_clients=1} in_clients && /^```c$/{code=1; next} code && /^```$/{exit} code' docs/clients.md
  printf 'return 0;\n}\n'
} >"$work/readme.c"
if [ "$(grep -c . "$work/readme.c")" -eq 11 ]; then ok "docs/clients.md's C example has five lines"; else not_ok "docs/clients.md's C example is not five lines"; fi
# shellcheck disable=SC2046
check "docs/clients.md's C example compiles against the installed libqueenclient" \
  cc -std=c11 -Wall -Werror -o "$work/readme" "$work/readme.c" $(pkg-config --cflags --libs libqueenclient)

dead=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
out=$(LD_LIBRARY_PATH=$prefix/lib "$work/client" "http://127.0.0.1:$dead" retry 2>>"$log")
if [ "$out" = "unreachable attempts=2" ]; then ok "the client program runs on the installed library ($out)"; else not_ok "the client program printed '$out'"; fi
LD_LIBRARY_PATH=$prefix/lib ldd "$work/client" >"$work/ldd" 2>>"$log"
if grep -q "$prefix/lib/libqueenclient.so" "$work/ldd"; then
  ok "the client program loads the installed libqueenclient.so"
else
  not_ok "the client program does not load the installed libqueenclient.so"
fi
# shellcheck disable=SC2046
check "a program on queen_runtime.h compiles with pkg-config --cflags --libs libqueen" \
  cc -std=c11 -Wall -Werror -o "$work/runtime" "$work/runtime.c" $(pkg-config --cflags --libs libqueen)
out=$(LD_LIBRARY_PATH=$prefix/lib "$work/runtime" 2>>"$log")
if [ "$out" = "3" ]; then ok "the runtime program runs on the installed libqueen"; else not_ok "the runtime program printed '$out'"; fi
out=$(LD_LIBRARY_PATH=$prefix/lib "$work/embedded" 2>>"$log")
if [ "$out" = "$(sed -n 's/^#define QUEEN_VERSION "\(.*\)"/\1/p' include/queen.h) 00000000-0000-0000-0000-000000000001" ]; then
  ok "the embedded program runs on the installed libqueen"
else
  not_ok "the embedded program printed '$out'"
fi
# The C++ client: its header and library, by pkg-config and by CMake's
# find_package. The header names no JSON library (the application picks
# one), and under C++20 a consume loop stops through a std::stop_token.
cat > "$work/client.cpp" <<'CPP'
#include <queen_client.hpp>
#include <iostream>
#include <string>
int main(int, char **argv) {
    queen_cpp::Options o;
    o.urls = {argv[1]};
    o.max_attempts = 1;
    queen_cpp::Client c(o);
    try {
        c.health();
    } catch (const queen_cpp::TransportError &e) {
        std::cout << e.code() << " " << queen_cpp::Json::raw("0.1").text() << "\n";
    }
    return 0;
}
CPP
check "pkg-config knows libqueenclient++" pkg-config --exists libqueenclient++
# shellcheck disable=SC2046
check "a C++17 program compiles with pkg-config --cflags --libs libqueenclient++" \
  c++ -std=c++17 -Wall -Werror -o "$work/client++" "$work/client.cpp" $(pkg-config --cflags --libs libqueenclient++)
out=$(LD_LIBRARY_PATH=$prefix/lib "$work/client++" "http://127.0.0.1:$dead" 2>>"$log")
if [ "$out" = "unreachable 0.1" ]; then ok "the C++ program runs on the installed libraries ($out)"; else not_ok "the C++ program printed '$out'"; fi
# shellcheck disable=SC2046
c++ -std=c++17 -E "$work/client.cpp" $(pkg-config --cflags libqueenclient++) >"$work/client.ii" 2>>"$log"
if [ -s "$work/client.ii" ] && ! grep -q 'namespace nlohmann' "$work/client.ii"; then
  ok "queen_client.hpp pulls in no JSON library"
else
  not_ok "queen_client.hpp pulls in nlohmann::json"
fi
cat > "$work/stop.cpp" <<'CPP'
#include <queen_client.hpp>
#include <stop_token>
#include <type_traits>
using consume_with_stop_token =
    void (queen_cpp::Client::*)(const queen_cpp::ConsumeOptions &, const queen_cpp::Handler &, std::stop_token);
int main() {
    consume_with_stop_token f = &queen_cpp::Client::consume;
    static_assert(!std::is_copy_constructible_v<queen_cpp::StopToken>, "a StopToken is one flag");
    return f == nullptr;
}
CPP
# shellcheck disable=SC2046
check "under C++20 consume() takes a std::stop_token" \
  c++ -std=c++20 -Wall -Werror -o "$work/stop" "$work/stop.cpp" $(pkg-config --cflags --libs libqueenclient++)

mkdir -p "$work/cmake"
cp "$work/client.c" "$work/client.cpp" "$work/cmake/"
cat > "$work/cmake/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(app C CXX)
find_package(Queen 0.1 REQUIRED)
add_executable(app_c client.c)
target_link_libraries(app_c PRIVATE Queen::client)
add_executable(app_cpp client.cpp)
target_link_libraries(app_cpp PRIVATE Queen::client++)
CMAKE
check "cmake configures a project with find_package(Queen 0.1)" \
  cmake -S "$work/cmake" -B "$work/cmake/build" -DCMAKE_PREFIX_PATH="$prefix"
check "cmake builds a C program on Queen::client and a C++ one on Queen::client++" \
  cmake --build "$work/cmake/build"
out=$("$work/cmake/build/app_cpp" "http://127.0.0.1:$dead" 2>>"$log")
if [ "$out" = "unreachable 0.1" ]; then ok "the CMake-built C++ program runs ($out)"; else not_ok "the CMake-built C++ program printed '$out'"; fi
out=$("$work/cmake/build/app_c" "http://127.0.0.1:$dead" 2>>"$log")
if [ "$out" = "unreachable attempts=1" ]; then ok "the CMake-built C program runs ($out)"; else not_ok "the CMake-built C program printed '$out'"; fi

nm "$prefix/lib/libqueenclient.a" >"$work/nm" 2>>"$log"
if grep -q ' T queen_client_consume$' "$work/nm"; then ok "libqueenclient.a holds the client"; else not_ok "libqueenclient.a lacks queen_client_consume"; fi
check "the installed queenctl runs" "$prefix/bin/queenctl" --help
check "the installed queen runs" "$prefix/bin/queen" version
check "the installed man page renders" env MANWIDTH=80 man -l "$prefix/share/man/man1/queenctl.1"

echo "1..$n"
[ "$failed" -eq 0 ] || { sed 's/^/# /' "$log" | tail -n 40; exit 1; }
