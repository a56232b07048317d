# The commands the README promises. Each works on a fresh clone.

.PHONY: quickstart test bench fuzz tools sdk-test

# The modules of the repository, the core first; go.work holds them all.
# The Kafka example is a module outside the workspace (it needs a newer Go).
MODULES := . proto callback sqlitestore redisstore storetest rdqtest storeurl console server cmd/rdq examples internal/crosslang pgstore/internal/compliance
KAFKA := examples/kafka-consumer
# The Redis side-by-side harness (rdq and Asynq), outside the workspace so that
# Asynq's requirements never reach another module's build.
PEERBENCH := redisstore/internal/peerbench
PACKAGES := ./... $(foreach m,$(filter-out .,$(MODULES)),./$(m)/...)
STATICCHECK := $(CURDIR)/.bin/staticcheck

# Runs the quickstart on the embedded default store (set RDQ_DATABASE_URL to
# use PostgreSQL instead).
quickstart:
	go run ./examples/quickstart

# Builds the pinned development tools (internal/tools) into .bin.
tools:
	cd internal/tools && GOWORK=off go build -o $(CURDIR)/.bin/ honnef.co/go/tools/cmd/staticcheck

# Runs the whole test suite: every module on its own (go.mod tidy and
# complete, go vet, staticcheck, outside the workspace), the core and the
# embedded store on Go 1.25, then every
# package's tests with the race detector in the workspace (the
# cross-language tests in internal/crosslang included); every benchmark
# once; then the Kafka example and the Redis side-by-side harness; then the
# Java SDK's build and tests. Needs
# PostgreSQL (RDQ_TEST_DATABASE_URL, default
# postgres://postgres@127.0.0.1:5432/test; the examples open RDQ_DATABASE_URL,
# the same database by default), Redis (RDQ_TEST_REDIS_URL, default
# redis://127.0.0.1:6390/0, as scripts/redis.sh starts it, and redis-server on
# PATH), a Redis Cluster (RDQ_TEST_REDIS_CLUSTER, default the seed list
# scripts/redis-cluster.sh prints), a second one on ports 7111-7116 whose
# master redisstore's failover test kills (RDQ_TEST_REDIS_FAILOVER_CLUSTER,
# started as .ci/run does), a JDK 17+ and Maven.
test: export RDQ_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
test: export RDQ_TEST_REDIS_CLUSTER ?= 127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103,127.0.0.1:7104,127.0.0.1:7105,127.0.0.1:7106
test: export RDQ_TEST_REDIS_FAILOVER_CLUSTER ?= 127.0.0.1:7111,127.0.0.1:7112,127.0.0.1:7113,127.0.0.1:7114,127.0.0.1:7115,127.0.0.1:7116
test: tools
	set -e; for m in $(MODULES) $(KAFKA) $(PEERBENCH); do \
		echo "module $$m"; \
		(cd $$m && GOWORK=off go mod tidy -diff && GOWORK=off go vet ./... && GOWORK=off $(STATICCHECK) ./...); \
	done
	# The core and the embedded store on the oldest Go they support (the
	# go command fetches that toolchain from the module proxy once).
	GOTOOLCHAIN=go1.25.0 GOWORK=off go vet ./...
	cd sqlitestore && GOTOOLCHAIN=go1.25.0 GOWORK=off go vet ./...
	go test -race -count=1 -timeout 40m $(PACKAGES)
	# Every benchmark once, for the checks it makes (every task succeeded,
	# histories complete), at a small scale.
	RDQ_BENCH_DEAD=5000 RDQ_BENCH_DEAD_TASKS=5000 go test -count=1 -timeout 20m -run '^$$' -bench . -benchtime 1x $(PACKAGES)
	# The DLQ's reads at the bench scale, each served by an index.
	RDQ_BENCH_EXPLAIN=1 go test -count=1 -run '^TestExplainAtScale$$' ./dlq/
	cd $(KAFKA) && GOWORK=off go test -race -count=1 ./...
	cd $(PEERBENCH) && GOWORK=off go test -race -count=1 ./...
	cd java && mvn -q verify
	$(MAKE) sdk-test

# The TypeScript and Python SDKs (sdk/): dependencies from their lock files,
# the checks of each ecosystem, then their tests against a real rdq-server
# built from this tree, on SQLite and PostgreSQL. Needs Node.js 20+ and
# Python 3.11+ (scripts/sdk.sh installs them on Debian).
sdk-test:
	cd sdk/typescript && npm ci --no-audit --no-fund && npm test
	cd sdk/python && python3 -m venv .venv && .venv/bin/pip install -q -r requirements-dev.txt && \
		.venv/bin/mypy --strict src/rdq && .venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/pytest -q

# Runs the benchmarks of the end-to-end path on both stores.
bench:
	go test -run '^$$' -bench . -benchtime 20000x ./worker/ ./sqlitestore/
	go test -run '^$$' -bench JavaEndToEnd -benchtime 20000x ./internal/crosslang/

# Fuzzes the envelope decoder and the callback failure body parser, a minute each.
fuzz:
	go test -run '^$$' -fuzz FuzzUnmarshal -fuzztime 60s ./envelope/
	go test -run '^$$' -fuzz FuzzParseFailure -fuzztime 60s ./callback/
