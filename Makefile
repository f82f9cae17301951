# ordo -- the commands users type. CMake does the building (CMakeLists.txt);
# this file only names the workflows.
#
#   make                   build libordo (and ordod) under build/
#   make run               build and start ordod with its default configuration
#   make cluster           build and start a 3-member cluster on loopback (ports 7001-7003,
#                          data in ./data/cluster/<id>/; Ctrl-C stops it; scripts/cluster.sh)
#   make test              every test: unit, fuzz smoke, integration, crash, cluster (and over TLS),
#                          sanitizers
#   make integration       integration tests: a real ordod driven over the wire
#   make crash             short crash runs: SIGKILL ordod under KV writers and queue clients, check
#                          (long: scripts/crash-long.sh, scripts/crash-queue-long.sh)
#   make cluster-test      cluster mode: 3 and 5 members, leader kills, partitions, catch-up,
#                          membership; checkers over what the clients saw (tests/cluster/README.md)
#   make cluster-tls-test  part of it with members and clients on TLS (ORDO_TEST_TLS_CLUSTER=1)
#   make asan / make tsan  unit tests under ASan+UBSan (and integration, cluster) / TSan
#   make bench-primitives  in-process primitive benchmarks
#   make fuzz              fuzz every decoder (tests/fuzz/: RESP, records, WAL, raft entries,
#                          the members' wire, snapshots, HTTP, the client's RESP) FUZZ_SECONDS=60 each;
#                          FUZZ_TARGET=name for one (scripts/fuzz.sh)
#   make fuzz-smoke        each fuzz target for a few seconds (ctest label fuzz; part of make test)
#   make bench             server benchmarks against Redis, etcd, beanstalkd (bench/*.sh;
#                          bench/cluster.sh: a 3-member cluster against 3-member etcd)
#   make soak              an hour of mixed load: RSS and latency each minute, the RSS trend at the end
#                          (bench/soak.sh; SOAK_MINUTES=n for another length)
#   make bench-instr       ordod's user-space instructions per SET and per GET, counted by
#                          callgrind (bench/instr.sh; ORDOD=path measures another build)
#   make install           install libordo, headers, ordo.pc (PREFIX=/usr/local)
#
# Builds print one line per step (CC file, LD target; scripts/quiet-build.sh)
# and nothing when there is nothing to do; V=1 prints every command and
# make's directory lines.

PREFIX ?= /usr/local
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
V ?= 0

# CMAKE_BUILD(dir): build dir with the jobs asked for, quietly unless V=1.
ifeq ($(V),1)
Q :=
CMAKE_BUILD = cmake --build $(1) -j $(JOBS) --verbose
else
Q := @
MAKEFLAGS += --no-print-directory
CMAKE_BUILD = scripts/quiet-build.sh $(1) -j $(JOBS)
endif

.PHONY: all build run cluster test unit integration crash cluster-test cluster-tls-test asan tsan bench-primitives bench soak bench-instr fuzz fuzz-smoke install clean deps-build deps-test

all: build

deps-build:
	@scripts/deps.sh build
deps-test:
	@scripts/deps.sh test

build: deps-build
	$(Q)cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS) >/dev/null
	$(Q)$(call CMAKE_BUILD,build)

run: build
	@mkdir -p data && exec build/ordod --dir ./data

# Three members on 127.0.0.1: client ports 7001-7003, raft 17001-17003,
# HTTP 7381-7383, data and logs under ./data/cluster/.
cluster: build
	@exec scripts/cluster.sh

unit: build
	cd build && ctest --output-on-failure -j $(JOBS) -L unit

# Integration tests start build/ordod (or $ORDOD) per test; Debian's pytest
# and redis-py, hence /usr/bin/python3. They run in $(JOBS) pytest-xdist
# workers, and so do the cluster tests: each test has its own ordods,
# ports and directories, and most of a test's time is waiting (on the
# 2-core machine: integration 136 s in one worker, 72 s in two, under ASan
# 166 s and 88 s; cluster 245-345 s and 216 s, under ASan 131 s and 78 s).
PYTEST_JOBS = -n $(JOBS)
integration: build deps-test
	ORDOD=build/ordod /usr/bin/python3 -m pytest -q $(PYTEST_JOBS) tests/integration

# SIGKILL ordod at random moments under concurrent writers; tests/crash/README.md.
crash: build deps-test
	ORDOD=build/ordod /usr/bin/python3 -m pytest -q tests/crash

# Cluster mode: members on loopback, SIGKILLed leaders, DEBUG PARTITION; tests/cluster/README.md.
cluster-test: build deps-test
	ORDOD=build/ordod /usr/bin/python3 -m pytest -q $(PYTEST_JOBS) tests/cluster

# The same with every member and client on TLS (raft, RESP on tls-port only,
# HTTPS; tests/cluster/README.md): the tests whose clients are of every kind
# (ClusterClient, redis-py, the ordo tool, the C examples) and those that
# kill leaders under them (test_client_failover, but its 40-second
# flagship, which cluster-test runs), about a minute, so that make test
# stays near its 15 minutes; the whole suite passes this way too
# (ORDO_TEST_TLS_CLUSTER=1 make cluster-test), HTTPS included.
CLUSTER_TLS_TESTS = $(addprefix tests/cluster/,test_basic.py test_client_failover.py \
                      test_users.py test_tool_status.py)
# The longest cluster tests (40 s and 20 s without a sanitizer), which
# cluster-test runs in full: the TLS part leaves out the first, the ASan
# run both, to keep make test near 15 minutes.
CLUSTER_FLAGSHIP = test_clients_through_leader_and_follower_kills
CLUSTER_LONG = $(CLUSTER_FLAGSHIP) or test_chaos_at_small_snapshot_settings
cluster-tls-test: build deps-test
	ORDO_TEST_TLS_CLUSTER=1 ORDOD=build/ordod /usr/bin/python3 -m pytest -q $(PYTEST_JOBS) $(CLUSTER_TLS_TESTS) \
	  -k "not $(CLUSTER_FLAGSHIP)"

asan: deps-test
	$(Q)cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DORDO_SANITIZE=address,undefined >/dev/null
	$(Q)$(call CMAKE_BUILD,build-asan)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) -L unit
	ORDOD=build-asan/ordod ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  /usr/bin/python3 -m pytest -q $(PYTEST_JOBS) tests/integration
	ORDOD=build-asan/ordod ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  /usr/bin/python3 -m pytest -q $(PYTEST_JOBS) tests/cluster -k "not ($(CLUSTER_LONG))"

tsan: deps-build
	$(Q)cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DORDO_SANITIZE=thread >/dev/null
	$(Q)$(call CMAKE_BUILD,build-tsan)
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --output-on-failure -j $(JOBS) -L unit

test: deps-test
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory fuzz-smoke
	@$(MAKE) --no-print-directory integration
	@$(MAKE) --no-print-directory crash
	@$(MAKE) --no-print-directory cluster-test
	@$(MAKE) --no-print-directory cluster-tls-test
	@$(MAKE) --no-print-directory asan
	@$(MAKE) --no-print-directory tsan

# The suq benchmark runs last: its last line is the headline ratio.
bench-primitives: build
	build/bench_keyed
	build/bench_coalesce
	build/bench_suq

# libFuzzer on every decoder of untrusted bytes (scripts/fuzz.sh names the
# targets); FUZZ_SECONDS=600 make fuzz for longer, FUZZ_TARGET=http for one.
FUZZ_SECONDS ?= 60
FUZZ_TARGET ?=
fuzz:
	FUZZ_TARGET='$(FUZZ_TARGET)' scripts/fuzz.sh $(FUZZ_SECONDS)

# Each target for a few seconds from its seeds: fails on any crash, leak,
# UB or failed check; skipped only without libFuzzer (ctest label fuzz).
fuzz-smoke: build
	cd build && ctest --output-on-failure -L fuzz

# Every server bench in sequence, then one table of their ratio lines
# (bench/all.sh; BENCH_QUICK=1 for a smoke run).
bench: build
	bench/all.sh

# An hour of mixed load, memory and latency each minute, the memory trend
# at the end (SOAK_MINUTES=60): not in `make bench`, it takes the hour.
soak: build
	bench/soak.sh

# Instructions per SET and GET under callgrind: not a timing, so it is not
# in `make bench`; it compares builds on a loaded machine too.
bench-instr: build
	bench/instr.sh

install: build
	cmake --install build

clean:
	rm -rf build build-asan build-tsan build-fuzz

# ---- client ----
# The client's benchmark (bench/client.sh: producer batching, consumer
# runner, memory per buffered message), not part of `make bench`.
.PHONY: bench-client
bench-client: build
	bench/client.sh
