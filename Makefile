# Queen: `make` builds build/queen, build/libqueen.a and build/libqueen.so.
# `make SAN=1 ...` builds the same under AddressSanitizer + UBSan in build/san.
# `make check` is the inner loop (under 3 minutes), `make test` every suite
# (what CI runs); `make run` serves on a private PostgreSQL.

CC      ?= cc
PG_INC  := $(shell pg_config --includedir 2>/dev/null || echo /usr/include/postgresql)

ifeq ($(SAN),1)
BUILD   ?= build/san
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
SANLD   := -fsanitize=address,undefined
else
BUILD   ?= build
OPT     := -O2 -g
SANLD   :=
endif

CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC $(OPT) -MMD -MP \
           -Iinclude -I$(PG_INC)
LDLIBS  := -lhttp_parser -ljansson -lpq -lpthread -lssl -lcrypto -lcurl
TESTLIBS:= -lcmocka -lcurl

ENGINE_SRC := $(wildcard src/engine/*.c)
SERVER_SRC := $(filter-out src/server/main.c,$(wildcard src/server/*.c))
# The schema's files: sql/MANIFEST gives their apply order (embed.sh reads it
# and refuses a file it does not list); every one is a prerequisite, listed or not.
SQL_FILES  := sql/MANIFEST $(wildcard sql/*.sql)
# The web console's files (console/), served from the binary by routes_console.c.
CONSOLE_FILES := $(sort $(wildcard console/*.html console/*.js console/*.css console/*.svg))
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
INTEG_SRC  := $(wildcard tests/integration/test_*.c)
COMPAT_SRC := $(wildcard tests/compat/test_*.c)
LIN_SRC    := $(wildcard tests/linearizability/test_*.c)
FAULT_SRC  := $(wildcard tests/faults/test_*.c)
SUPPORT_SRC:= $(wildcard tests/support/*.c)
EXAMPLE_SRC:= $(wildcard examples/*.c)

ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/schema_files.o $(BUILD)/obj/gen/reasons.o
SERVER_OBJ := $(SERVER_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/console_files.o $(BUILD)/obj/gen/http_errors.o
MAIN_OBJ   := $(BUILD)/obj/src/server/main.o $(BUILD)/obj/gen/pg_script.o
SUPPORT_OBJ:= $(SUPPORT_SRC:%.c=$(BUILD)/obj/%.o)
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%)
INTEG_BIN  := $(INTEG_SRC:tests/integration/%.c=$(BUILD)/tests/integration/%)
COMPAT_BIN := $(COMPAT_SRC:tests/compat/%.c=$(BUILD)/tests/compat/%)
LIN_BIN    := $(LIN_SRC:tests/linearizability/%.c=$(BUILD)/tests/linearizability/%)
LIN_OBJ    := $(BUILD)/obj/tests/linearizability/lincheck.o
FAULT_BIN  := $(FAULT_SRC:tests/faults/%.c=$(BUILD)/tests/faults/%)
EXAMPLE_BIN:= $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)

# tests/fuzz: libFuzzer harnesses, always built with clang under ASan+UBSan
# in build/fuzz (whatever SAN says): the engine and server sources again.
FUZZ_CC    := clang
FUZZ_DIR   := build/fuzz
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
              -fno-sanitize-recover=undefined -Iinclude -Isrc/engine -Isrc/server -I$(PG_INC)
FUZZ_SRC   := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN   := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_DIR)/%)
FUZZ_LIB   := $(ENGINE_SRC:%.c=$(FUZZ_DIR)/obj/%.o) $(SERVER_SRC:%.c=$(FUZZ_DIR)/obj/%.o) $(FUZZ_DIR)/obj/gen/schema_files.o \
              $(FUZZ_DIR)/obj/gen/reasons.o $(FUZZ_DIR)/obj/gen/http_errors.o \
              $(FUZZ_DIR)/obj/gen/console_files.o

.PHONY: all tests test check test-san run bench clean deps fuzz torture ha-test pgbouncer-test
# Keep objects of the test and example programs between builds.
.SECONDARY:
all: $(BUILD)/queen $(BUILD)/libqueen.a $(BUILD)/libqueen.so $(EXAMPLE_BIN)
tests: all $(UNIT_BIN) $(INTEG_BIN) $(COMPAT_BIN) $(LIN_BIN) $(FAULT_BIN) fuzz
fuzz: $(FUZZ_BIN)

$(BUILD)/gen/schema_files.c: $(SQL_FILES) scripts/embed.sh
	@mkdir -p $(@D)
	scripts/embed.sh sql $@ sql/MANIFEST

# The reason registry's C tables (src/engine/reasons.txt): libqueen's (read
# by error.c) and the HTTP edge's statuses and codes (src/server/errors.c).
$(BUILD)/gen/reasons.c: src/engine/reasons.txt scripts/reasons.py
	@mkdir -p $(@D)
	python3 scripts/reasons.py c $@

$(BUILD)/gen/http_errors.c: src/engine/reasons.txt scripts/reasons.py
	@mkdir -p $(@D)
	python3 scripts/reasons.py http $@

$(BUILD)/gen/console_files.c: $(CONSOLE_FILES) scripts/embed.sh
	@mkdir -p $(@D)
	scripts/embed.sh console $@ $(CONSOLE_FILES)

$(BUILD)/gen/pg_script.c: scripts/pg.sh scripts/embed.sh
	@mkdir -p $(@D)
	scripts/embed.sh text $@ queen_pg_script scripts/pg.sh

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

# Include paths by directory. The engine sees its own headers; the server
# sees its own and the public ones (include/: queen.h and queen_runtime.h),
# never src/engine (scripts/check-includes.py says the same of the source);
# examples only include/. Tests look inside both.
$(BUILD)/obj/src/engine/%.o $(BUILD)/obj/gen/reasons.o $(BUILD)/obj/gen/schema_files.o: CFLAGS += -Isrc/engine
$(BUILD)/obj/src/server/%.o $(BUILD)/obj/gen/console_files.o $(BUILD)/obj/gen/http_errors.o: CFLAGS += -Isrc/server
$(BUILD)/obj/tests/%.o: CFLAGS += -Isrc/engine -Isrc/server -Itests/support

$(BUILD)/libqueen.a: $(ENGINE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libqueen.so: $(ENGINE_OBJ)
	$(CC) -shared $(SANLD) -o $@ $^ $(LDLIBS)

$(BUILD)/queen: $(MAIN_OBJ) $(SERVER_OBJ) $(BUILD)/libqueen.a
	$(CC) $(SANLD) -o $@ $(MAIN_OBJ) $(SERVER_OBJ) $(BUILD)/libqueen.a $(LDLIBS)

# Unit tests get the token minter (tests/support/jwtmint.c) and nothing
# else of the support code: they start no database and no broker.
$(BUILD)/tests/unit/%: $(BUILD)/obj/tests/unit/%.o $(BUILD)/obj/tests/support/jwtmint.o $(SERVER_OBJ) $(BUILD)/libqueen.a
	@mkdir -p $(@D)
	$(CC) $(SANLD) -o $@ $< $(BUILD)/obj/tests/support/jwtmint.o $(SERVER_OBJ) $(BUILD)/libqueen.a $(LDLIBS) $(TESTLIBS)

$(BUILD)/tests/integration/%: $(BUILD)/obj/tests/integration/%.o $(SUPPORT_OBJ) $(SERVER_OBJ) $(BUILD)/libqueen.a
	@mkdir -p $(@D)
	$(CC) $(SANLD) -o $@ $< $(SUPPORT_OBJ) $(SERVER_OBJ) $(BUILD)/libqueen.a $(LDLIBS) $(TESTLIBS)

# tests/compat: what the reference broker's clients send and read, over a
# real broker (the same support objects as the integration tests).
$(BUILD)/tests/compat/%: $(BUILD)/obj/tests/compat/%.o $(SUPPORT_OBJ) $(SERVER_OBJ) $(BUILD)/libqueen.a
	@mkdir -p $(@D)
	$(CC) $(SANLD) -o $@ $< $(SUPPORT_OBJ) $(SERVER_OBJ) $(BUILD)/libqueen.a $(LDLIBS) $(TESTLIBS)

# tests/linearizability: histories of concurrent kv calls checked by
# lincheck.c; tests/faults: acknowledged kv writes and messages across kills and crashes.
$(BUILD)/tests/linearizability/%: $(BUILD)/obj/tests/linearizability/%.o $(LIN_OBJ) $(SUPPORT_OBJ) $(SERVER_OBJ) $(BUILD)/libqueen.a
	@mkdir -p $(@D)
	$(CC) $(SANLD) -o $@ $< $(LIN_OBJ) $(SUPPORT_OBJ) $(SERVER_OBJ) $(BUILD)/libqueen.a $(LDLIBS) $(TESTLIBS)

$(BUILD)/tests/faults/%: $(BUILD)/obj/tests/faults/%.o $(SUPPORT_OBJ) $(SERVER_OBJ) $(BUILD)/libqueen.a
	@mkdir -p $(@D)
	$(CC) $(SANLD) -o $@ $< $(SUPPORT_OBJ) $(SERVER_OBJ) $(BUILD)/libqueen.a $(LDLIBS) $(TESTLIBS)

$(FUZZ_DIR)/gen/schema_files.c: $(SQL_FILES) scripts/embed.sh
	@mkdir -p $(@D)
	scripts/embed.sh sql $@ sql/MANIFEST

$(FUZZ_DIR)/gen/reasons.c: src/engine/reasons.txt scripts/reasons.py
	@mkdir -p $(@D)
	python3 scripts/reasons.py c $@

$(FUZZ_DIR)/gen/http_errors.c: src/engine/reasons.txt scripts/reasons.py
	@mkdir -p $(@D)
	python3 scripts/reasons.py http $@

$(FUZZ_DIR)/gen/console_files.c: $(CONSOLE_FILES) scripts/embed.sh
	@mkdir -p $(@D)
	scripts/embed.sh console $@ $(CONSOLE_FILES)

$(FUZZ_DIR)/obj/gen/%.o: $(FUZZ_DIR)/gen/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

$(BUILD)/examples/%: $(BUILD)/obj/examples/%.o $(BUILD)/libqueen.a
	@mkdir -p $(@D)
	$(CC) $(SANLD) -o $@ $< $(BUILD)/libqueen.a $(LDLIBS)

# ---- The remote client: libqueenclient, queenctl, their tests, install ----
# libqueenclient (include/queen_client.h, src/client) speaks HTTP to brokers
# over libcurl; queenctl (src/queenctl) is the command line on it. Their
# tests (tests/client) drive real brokers on the private PostgreSQL.
CLIENT_SRC     := $(wildcard src/client/*.c)
CLIENT_OBJ     := $(CLIENT_SRC:%.c=$(BUILD)/obj/%.o)
CLIENT_LIBS    := -lcurl -lpthread
QUEENCTL_SRC   := $(wildcard src/queenctl/*.c)
QUEENCTL_OBJ   := $(QUEENCTL_SRC:%.c=$(BUILD)/obj/%.o)
CLIENT_TEST_SRC:= $(wildcard tests/client/test_*.c)
CLIENT_TEST_BIN:= $(CLIENT_TEST_SRC:tests/client/%.c=$(BUILD)/tests/client/%)
PREFIX         ?= /usr/local

all: $(BUILD)/libqueenclient.a $(BUILD)/libqueenclient.so $(BUILD)/queenctl
tests: $(CLIENT_TEST_BIN)

$(BUILD)/obj/src/client/%.o $(BUILD)/obj/src/queenctl/%.o $(BUILD)/obj/tests/client/%.o: CFLAGS += -Isrc/client

$(BUILD)/libqueenclient.a: $(CLIENT_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libqueenclient.so: $(CLIENT_OBJ)
	$(CC) -shared $(SANLD) -o $@ $^ $(CLIENT_LIBS)

$(BUILD)/queenctl: $(QUEENCTL_OBJ) $(BUILD)/libqueenclient.a
	$(CC) $(SANLD) -o $@ $(QUEENCTL_OBJ) $(BUILD)/libqueenclient.a $(CLIENT_LIBS) -lutil

$(BUILD)/tests/client/%: $(BUILD)/obj/tests/client/%.o $(BUILD)/libqueenclient.a $(SUPPORT_OBJ) $(SERVER_OBJ) $(BUILD)/libqueen.a
	@mkdir -p $(@D)
	$(CC) $(SANLD) -o $@ $< $(BUILD)/libqueenclient.a $(SUPPORT_OBJ) $(SERVER_OBJ) $(BUILD)/libqueen.a $(LDLIBS) $(TESTLIBS) -lutil

# make install PREFIX=DIR: headers, the libraries (static and shared; the
# C++ client static only), the binaries, the man pages, a pkg-config file for
# each library and a CMake package (find_package(Queen): lib/cmake/Queen).
QUEEN_VERSION := $(shell sed -n 's/^\#define QUEEN_VERSION "\(.*\)"/\1/p' include/queen.h)
.PHONY: install
install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin \
	           $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/lib/cmake/Queen
	install -m 644 include/queen.h include/queen_runtime.h include/queen_client.h clients/cpp/include/queen_client.hpp $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(BUILD)/libqueen.a $(BUILD)/libqueenclient.a $(BUILD)/libqueenclient++.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libqueen.so $(BUILD)/libqueenclient.so $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/queen $(BUILD)/queenctl $(DESTDIR)$(PREFIX)/bin/
	install -m 644 docs/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	for pc in libqueen libqueenclient libqueenclient++; do \
	  sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(QUEEN_VERSION)|g' \
	    scripts/$$pc.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/$$pc.pc; \
	done
	install -m 644 scripts/cmake/QueenConfig.cmake $(DESTDIR)$(PREFIX)/lib/cmake/Queen/
	sed -e 's|@VERSION@|$(QUEEN_VERSION)|g' scripts/cmake/QueenConfigVersion.cmake.in \
	  > $(DESTDIR)$(PREFIX)/lib/cmake/Queen/QueenConfigVersion.cmake

# make test-c: the C client's suites alone (libqueenclient's own tests, its
# conformance runner, queenctl's, and make install with programs built on it).
.PHONY: test-c
test-c: deps-test
	$(MAKE) all $(CLIENT_TEST_BIN)
	BUILD=$(BUILD) bash scripts/test.sh client/test_,client/install
# ---- end of the remote client ----

# ---- The Go and Rust clients (clients/go, clients/rust) ----
# make test runs both through scripts/test.sh (tests/client/go.sh and
# tests/client/rust.sh: each client's own tests and its conformance runner,
# against real brokers on the private PostgreSQL); these run one alone.
.PHONY: test-go test-rust
test-go: deps-test
	$(MAKE) all
	BUILD=$(BUILD) bash scripts/test.sh client/go

test-rust: deps-test
	$(MAKE) all
	BUILD=$(BUILD) bash scripts/test.sh client/rust
# ---- end of the Go and Rust clients ----

# ---- The Python and JavaScript/TypeScript clients ----
# clients/python (queen_client) and clients/js (@queen/client). tests/client/python.sh and
# tests/client/js.sh run each one's own tests and its conformance runner against real brokers on the
# private PostgreSQL scripts/test.sh starts; make test runs both, these targets one alone.
.PHONY: test-python test-js
test-python: deps-test
	$(MAKE) all
	BUILD=$(BUILD) bash scripts/test.sh client/python

test-js: deps-test
	$(MAKE) all
	BUILD=$(BUILD) bash scripts/test.sh client/js
# ---- end of the Python and JavaScript/TypeScript clients ----

# ---- The PHP and C++ clients (clients/php, clients/cpp) ----
# The C++ client is a C++17 layer over libqueenclient: libqueenclient++.a.
# Its tests and conformance runner (GoogleTest) and the PHP client's
# (PHPUnit) drive real brokers made by tests/client/conformance_harness.
# make test-php / make test-cpp run one client's suites alone.
CXX          ?= g++
QCXXFLAGS    := -std=c++17 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC $(OPT) -MMD -MP \
                -Iinclude -Isrc/client -Iclients/cpp/include -Itests/support
CPP_SRC      := $(wildcard clients/cpp/src/*.cpp)
CPP_OBJ      := $(CPP_SRC:%.cpp=$(BUILD)/obj/%.o)
CPP_TEST_SRC := $(wildcard clients/cpp/tests/test_*.cpp)
CPP_TEST_BIN := $(CPP_TEST_SRC:clients/cpp/tests/%.cpp=$(BUILD)/clients/cpp/%)
CPP_EXAMPLE  := $(BUILD)/clients/cpp/example
HARNESS      := $(BUILD)/tests/client/conformance_harness

all: $(BUILD)/libqueenclient++.a
tests: $(HARNESS) $(CPP_TEST_BIN) $(CPP_EXAMPLE)

$(BUILD)/obj/clients/cpp/%.o: clients/cpp/%.cpp
	@mkdir -p $(@D)
	$(CXX) $(QCXXFLAGS) -c $< -o $@

$(BUILD)/libqueenclient++.a: $(CPP_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/clients/cpp/test_%: $(BUILD)/obj/clients/cpp/tests/test_%.o $(BUILD)/obj/clients/cpp/tests/support.o \
                             $(BUILD)/libqueenclient++.a $(BUILD)/libqueenclient.a $(BUILD)/obj/tests/support/jwtmint.o
	@mkdir -p $(@D)
	$(CXX) $(SANLD) -o $@ $(filter %.o %.a,$^) $(BUILD)/libqueenclient.a -lgtest -lcurl -lcrypto -lpthread

$(CPP_EXAMPLE): $(BUILD)/obj/clients/cpp/example/example.o $(BUILD)/libqueenclient++.a $(BUILD)/libqueenclient.a
	@mkdir -p $(@D)
	$(CXX) $(SANLD) -o $@ $^ -lcurl -lpthread

.PHONY: test-php test-cpp
test-php: deps-test
	$(MAKE) $(BUILD)/queen $(HARNESS)
	BUILD=$(BUILD) bash scripts/test.sh clients/php

test-cpp: deps-test
	$(MAKE) $(BUILD)/queen $(HARNESS) $(CPP_TEST_BIN) $(CPP_EXAMPLE)
	BUILD=$(BUILD) bash scripts/test.sh clients/cpp
# ---- end of the PHP and C++ clients ----

# What each use needs, by profile (scripts/install-deps.sh): make run only
# the compiler and the libraries the broker links; the tests, the benchmark
# and the HA and PgBouncer checks their own tools on top.
.PHONY: deps deps-run deps-test deps-bench deps-ha deps-pgbouncer
deps:
	bash scripts/install-deps.sh all
deps-run deps-test deps-bench deps-ha deps-pgbouncer: deps-%:
	bash scripts/install-deps.sh $*

# Every suite: unit (cmocka), SQL (pgTAP via pg_prove), integration (real
# PostgreSQL, real broker). Ends with one line "N passed, M failed".
test: deps-test
	$(MAKE) tests
	BUILD=$(BUILD) bash scripts/test.sh

test-san:
	$(MAKE) SAN=1 test

# The inner loop, under 3 minutes on two cores: the lints, every unit test,
# every pgTAP file, and the core integration suites, all on one private
# cluster, the suites that need no broker settings of their own on one
# shared broker (QUEEN_TEST_SHARED_BROKER; tests/support/http_fixture.c).
# Core is the message path and kv at both layers, where most changes land
# and most regressions show: push, pop, ack, leases, the transaction wire,
# the DLQ, groups and browsing, kv, long-poll wake-ups, and the pipelined
# connections with their group commits (engine, then HTTP). Not core, in
# make test only: the edge's hardening, HTTP/1.1 framing, TLS, body limits,
# origins, JWKS, quotas and tenancy limits, the time-driven suites (delays,
# lease expiry, traces, sweeper), the many-broker, lifecycle and schema-boot
# suites, compat, every client, the console, the campaign and the fuzzers.
CHECK_INTEG := test_engine_log test_engine_kv test_engine_wire test_engine_pool test_engine_pop_ready \
               test_engine_groups test_engine_dlq test_engine_tenant test_engine_stats test_engine_browse \
               test_log_leases test_log_wire test_log_dlq_move test_log_file_order test_log_waiting \
               test_http_log test_http_kv test_http_pipeline test_http_push_group test_http_wire_group \
               test_http_auth test_http_dlq test_http_browse test_http_groups
comma := ,
empty :=
space := $(empty) $(empty)
CHECK_SUITES := lint/,unit/,sql/,$(subst $(space),$(comma),$(CHECK_INTEG:%=integration/%))
.PHONY: check
check: deps-test
	$(MAKE) all $(UNIT_BIN) $(CHECK_INTEG:%=$(BUILD)/tests/integration/%)
	QUEEN_TEST_SHARED_BROKER=1 BUILD=$(BUILD) bash scripts/test.sh '$(CHECK_SUITES)'

run: deps-run
	$(MAKE) all
	$(BUILD)/queen dev

bench: deps-bench
	$(MAKE) all $(SCALE_BENCH)
	BUILD=$(BUILD) bash bench/run.sh

# The soak (bench/soak.sh): SOAK_MINUTES (default 30) of the mixed workload on
# a durable private PostgreSQL; summary to bench/SOAK.md, plots to bench/soak/.
SOAK_DRIVER := $(BUILD)/tools/soak_driver
$(SOAK_DRIVER): bench/soak_driver.c bench/http.c bench/http.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ bench/soak_driver.c bench/http.c $(SANLD) -lcurl -ljansson -lpq -lpthread
tests: $(SOAK_DRIVER)

# The scale section's driver (bench/scale_bench.c), built with the tests so
# that -Werror sees it.
SCALE_BENCH := $(BUILD)/tools/scale_bench
$(SCALE_BENCH): bench/scale_bench.c bench/http.c bench/http.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ bench/scale_bench.c bench/http.c $(SANLD) -lcurl -ljansson -lpthread
tests: $(SCALE_BENCH)

.PHONY: soak
soak: deps-bench
	$(MAKE) all $(SOAK_DRIVER)
	BUILD=$(BUILD) bash bench/soak.sh

# The campaign for longer: TORTURE_SECONDS per part (default 120);
# figures to bench/RELIABILITY.md.
torture: deps-test
	$(MAKE) tests
	BUILD=$(BUILD) TORTURE_SECONDS=$(or $(TORTURE_SECONDS),120) bash scripts/torture.sh

# Failover on Patroni + etcd (Debian packages): a primary and a synchronous
# standby on loopback, a broker on a multi-host URL, the primary killed under
# write load (scripts/ha-test.sh). Bounded; removes everything it started.
ha-test: deps-ha
	$(MAKE) all
	BUILD=$(BUILD) bash scripts/ha-test.sh

# Which PgBouncer pool mode a broker works behind (scripts/pgbouncer-test.sh):
# session must work, transaction is expected not to (docs/deploy.md).
pgbouncer-test: deps-pgbouncer
	$(MAKE) all
	BUILD=$(BUILD) bash scripts/pgbouncer-test.sh

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
