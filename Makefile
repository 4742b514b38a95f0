# The full test suite: what CI runs (.ci/run) and what a contributor runs.
# Tests that need redis-server skip without it, unless REDLOCK_REQUIRE_REDIS=1.
GO ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: test vet tidy staticcheck unit quick quickstart fmt fuzz chaos soak model mutants

# Two lanes, then the two longest packages. The chaos suite (./chaos) is
# bound by the wall clock (each scenario runs for a fixed time), so it runs,
# then ./testutil (servers starting), beside the rest of the checks:
# staticcheck, the short fuzzing, and the packages whose tests are short
# (fencing, model, ...). Then ./redlock and ./internal/cli, one at a time (-p 1):
# their integration tests start real redis-server processes and bound
# every node call; on a 2-core machine shared with other work, the two at
# once starve each other.
# -vet=off: make vet has run the whole of go vet already.
TEST_FLAGS := -race -count=1 -timeout 15m -vet=off
# Go modules of their own in this repository (so the root go.mod stays free
# of pgx, etcd and rueidis): make test vets, tidies and tests them in test-checks.
SUBMODULES := fencing/pgfence fencing/etcdfence examples/dispatch rueidisnode
HEAVY_PKGS := ./redlock/ ./internal/cli/
test: vet tidy
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-chaos test-checks
	$(GO) test $(TEST_FLAGS) -p 1 $(HEAVY_PKGS)

.PHONY: test-chaos test-checks
test-chaos:
	$(GO) test $(TEST_FLAGS) ./chaos/
	$(GO) test $(TEST_FLAGS) ./testutil/
test-checks: staticcheck
	cd redlockotel && $(GO) test $(TEST_FLAGS) ./...
	@$(MAKE) --no-print-directory fuzz FUZZFLAGS=-parallel=1
	$(GO) test $(TEST_FLAGS) -p 1 $$($(GO) list ./... | grep -v -e '/chaos$$' -e '/testutil$$' -e '/redlock$$' -e '/internal/cli$$')
	@# The KEYS check (scripts/checkkeys.go): every script call of the miniredis suite asserts each key it touches is in KEYS.
	$(GO) test -tags redlock_checkkeys -short -count=1 -vet=off -p 1 ./redlock/ ./scripts/ ./model/...
	@# The modules of their own (pgx, etcd), each on its real server.
	@set -e; for m in $(SUBMODULES); do echo "cd $$m && go mod tidy -diff && go vet && staticcheck && go test"; \
		(cd $$m && $(GO) mod tidy -diff && $(GO) vet ./... && $(STATICCHECK) ./... && $(GO) test $(TEST_FLAGS) ./...); done

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	cd redlockotel && $(GO) vet ./...

staticcheck:
	$(STATICCHECK) ./...
	cd redlockotel && $(STATICCHECK) ./...

# go.mod and go.sum are tidy, in the root module and in bench/.
tidy:
	$(GO) mod tidy -diff
	cd bench && $(GO) mod tidy -diff
	cd redlockotel && $(GO) mod tidy -diff

# The quick loop: go test -short, miniredis only. Every test that starts a
# real redis-server skips under -short (testutil.RedisServerPath), even with
# REDLOCK_REQUIRE_REDIS=1, so this passes with no redis-server installed.
# Tests bound by the wall clock (leases, delays, hung nodes) run in
# parallel, four at a time. Warm on a 2-core machine: 25 s idle, 33-38 s
# beside two busy loops; most of it ./redlock.
quick unit:
	$(GO) test -short -count=1 -parallel 4 -timeout 5m ./...

quickstart:
	$(GO) run ./examples/quickstart

fmt:
	gofmt -w .

# A short run of every fuzz target (seeds in testdata/fuzz); part of test.
# For a deeper run: make fuzz FUZZTIME=200000x.
# A count, not a duration: a -fuzztime deadline that ends mid-input fails
# the run with "context deadline exceeded" (seen here).
FUZZTIME ?= 2000x
# make test fuzzes with one worker (-parallel=1), beside the chaos suite.
FUZZFLAGS ?=
FUZZ_REDLOCK := FuzzParseGrant FuzzParseInspect FuzzDial
FUZZ_FENCING := FuzzParseToken FuzzTokenFromRequest
FUZZ_REDISFENCE := FuzzParseWriteReply FuzzTokenFromReply FuzzStoreWrite
FUZZ_REDACT := FuzzURL FuzzError
fuzz:
	@set -e; for t in $(FUZZ_REDLOCK); do $(GO) test -run='^$$' -fuzz="^$$t\$$" -fuzztime=$(FUZZTIME) $(FUZZFLAGS) ./redlock/; done; \
	for t in $(FUZZ_FENCING); do $(GO) test -run='^$$' -fuzz="^$$t\$$" -fuzztime=$(FUZZTIME) $(FUZZFLAGS) ./fencing/; done; \
	for t in $(FUZZ_REDISFENCE); do $(GO) test -run='^$$' -fuzz="^$$t\$$" -fuzztime=$(FUZZTIME) $(FUZZFLAGS) ./fencing/redisfence/; done; \
	for t in $(FUZZ_REDACT); do $(GO) test -run='^$$' -fuzz="^$$t\$$" -fuzztime=$(FUZZTIME) $(FUZZFLAGS) ./internal/redact/; done

# The SPIN model of the protocol (model/, docs/model.md): the real model's
# runs must find no error, each mutant must be refuted with a trail.
# Prints states, depth and seconds per run. Needs spin and gcc.
model:
	./model/run.sh

# The safety mutants (mutants/README.md): each patch of mutants/ applied to
# a copy of the tree, its killing tests run there; prints killed/survived
# and the kill rate. Not part of make test. make mutants MUTANTS="a b" runs
# only those.
MUTANTS ?=
mutants:
	./mutants/run.sh $(MUTANTS)

# The fault-injection suite alone, with its counts printed. Longer soak:
# REDLOCK_CHAOS_DURATION=10m make chaos; replay: REDLOCK_CHAOS_SEED=<seed>.
chaos:
	$(GO) test -race -count=1 -v -timeout 0 -run '^TestChaos$$' ./chaos/

# Every chaos scenario in rotation for SOAK (default 10m), four lanes at
# once (REDLOCK_SOAK_LANES), 30s per run (REDLOCK_SOAK_SLICE), without the
# race detector (SOAK_FLAGS=-race adds it, and checks far fewer writes).
# Prints each run's counts as it ends, then the fenced writes checked and
# the violations, per scenario and in total; the whole log is in SOAK_LOG.
# The partition scenario needs root and iproute2, the clock ones faketime
# (skipped without them).
SOAK ?= 10m
SOAK_FLAGS ?=
SOAK_LOG ?= $(or $(TMPDIR),/tmp)/redlock-soak.log
soak: SHELL := /bin/bash
soak: .SHELLFLAGS := -o pipefail -c
soak:
	@summary=$$(mktemp); \
	REDLOCK_SOAK=$(SOAK) REDLOCK_SOAK_SUMMARY=$$summary $(GO) test -count=1 -v -timeout 0 $(SOAK_FLAGS) -run '^TestSoak$$' ./chaos/ 2>&1 \
		| tee $(SOAK_LOG) | { grep --line-buffered -E 'counts: |--- FAIL|^FAIL|^ok|^panic' || true; }; rc=$$?; \
	cat $$summary; rm -f $$summary; echo "full log: $(SOAK_LOG)"; exit $$rc

# Benchmarks against go-redsync, bsm/redislock and the raw floor, in one run
# (the bench/ module; see docs/benchmarks.md). Needs redis-server; ~9 min.
# Raw output, benchstat tables and targets go to bench/results/, the plot to
# docs/handoff.png.
BENCHSTAT ?= $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
BENCH_COUNT ?= 10
BENCH_HOTKEY_COUNT ?= 8
# BENCH_FLAGS go to the test binary, e.g. BENCH_FLAGS=-bench.aof for AOF fsync always.
BENCH_FLAGS ?=

.PHONY: bench bench-plot
bench bench-plot: SHELL := /bin/bash
bench bench-plot: .SHELLFLAGS := -o pipefail -c
bench:
	mkdir -p bench/results
	cd bench && REDLOCK_REQUIRE_REDIS=1 $(GO) test -run '^$$' -bench '^Benchmark(Interleaved|Uncontended|Parallel)$$' -benchtime 500ms -count $(BENCH_COUNT) -timeout 60m . $(BENCH_FLAGS) | tee results/raw.txt
	cd bench && REDLOCK_REQUIRE_REDIS=1 $(GO) test -run '^$$' -bench '^BenchmarkHotKey$$' -benchtime 2s -count $(BENCH_HOTKEY_COUNT) -timeout 60m . $(BENCH_FLAGS) | tee results/raw-hotkey.txt
	cd bench && REDLOCK_REQUIRE_REDIS=1 $(GO) test -run '^$$' -bench '^BenchmarkRedisMemory$$' -benchtime 1x -count 3 -timeout 10m . $(BENCH_FLAGS) | tee results/raw-memory.txt
	cd bench && $(BENCHSTAT) -filter '-.name:Interleaved' -col '/impl@(redsync redlock floor redislock)' results/raw.txt > results/benchstat.txt
	cd bench && $(BENCHSTAT) -filter '.name:Interleaved' results/raw.txt > results/benchstat-interleaved.txt
	cd bench && $(BENCHSTAT) -col '/impl@(redsync redsync-10ms redlock redlock-own)' results/raw-hotkey.txt > results/benchstat-hotkey.txt
	cd bench && $(BENCHSTAT) results/raw-memory.txt > results/benchstat-memory.txt
	cd bench && $(GO) run ./cmd/targets results/raw.txt results/raw-hotkey.txt | tee results/targets.md
	$(MAKE) bench-plot

# The hand-off latency plot alone (docs/handoff.png), ~1 min.
bench-plot:
	mkdir -p bench/results
	cd bench && $(GO) run ./cmd/handoffplot -duration 15s -csv results -out ../docs/handoff.png | tee results/handoffplot.txt

# Cross-process contention (bench/procs_test.go, see bench/doc.go): the hot
# key across 2 and 4 OS processes of 4 workers each, redlock and redsync,
# and redlock's semaphore of 4 slots against its mutex, 16 workers in 4
# processes. One op is -bench.procdur (5s) of contention. Needs
# redis-server; ~3 min. Raw output and benchstat tables go to bench/results/.
BENCH_PROCS_COUNT ?= 6

.PHONY: bench-procs
bench-procs: SHELL := /bin/bash
bench-procs: .SHELLFLAGS := -o pipefail -c
bench-procs:
	mkdir -p bench/results
	cd bench && REDLOCK_REQUIRE_REDIS=1 $(GO) test -run '^$$' -bench '^Benchmark(HotKey|Semaphore)Processes$$' -benchtime 1x -count $(BENCH_PROCS_COUNT) -timeout 30m . $(BENCH_FLAGS) | tee results/raw-procs.txt
	cd bench && $(BENCHSTAT) -filter '.name:HotKeyProcesses' -col '/impl@(redsync redlock redlock-noqueue)' results/raw-procs.txt | tee results/benchstat-procs.txt
	cd bench && $(BENCHSTAT) -filter '.name:SemaphoreProcesses' results/raw-procs.txt | tee results/benchstat-semaphore.txt
