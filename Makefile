# The commands the README promises. Each works on a fresh clone.

.PHONY: quickstart test bench fuzz

# Runs the quickstart on the embedded default store (set RDQ_DATABASE_URL to
# use PostgreSQL instead).
quickstart:
	go run ./examples/quickstart

# Runs the whole test suite: vet and staticcheck (pinned by the tool
# directive in go.mod), then every package's tests with the race detector
# (the cross-language tests in internal/crosslang included); every benchmark
# once; then the same for the Kafka example, a module of its own; then the
# Java SDK's build and tests. Needs PostgreSQL (RDQ_TEST_DATABASE_URL, default
# postgres://postgres@127.0.0.1:5432/test), a JDK 17+ and Maven.
test:
	go vet ./...
	go tool staticcheck ./...
	go test -race -count=1 -timeout 40m ./...
	# Every benchmark once, for the checks it makes (every task succeeded,
	# histories complete), at a small scale.
	RDQ_BENCH_DEAD=5000 RDQ_BENCH_DEAD_TASKS=5000 go test -count=1 -timeout 20m -run '^$$' -bench . -benchtime 1x ./...
	# The DLQ's reads at the bench scale, each served by an index.
	RDQ_BENCH_EXPLAIN=1 go test -count=1 -run '^TestExplainAtScale$$' ./dlq/
	# -mod=mod: the example follows rdq through a replace directive, so a
	# dependency change in rdq's go.mod must not break its build.
	cd examples/kafka-consumer && GOFLAGS=-mod=mod go vet ./... && GOFLAGS=-mod=mod go test -race -count=1 ./...
	cd java && mvn -q verify

# Runs the benchmarks of the end-to-end path on both stores.
bench:
	go test -run '^$$' -bench . -benchtime 20000x ./worker/ ./sqlitestore/
	go test -run '^$$' -bench JavaEndToEnd -benchtime 20000x ./internal/crosslang/

# Fuzzes the envelope decoder for a minute.
fuzz:
	go test -run '^$$' -fuzz FuzzDecodeEnvelope -fuzztime 60s .
