# termd — see README.md. Every target works offline given the Go module proxy.
GO        ?= go
BIN       ?= bin
PREFIX    ?= /usr/local
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/termd/termd/internal/buildinfo.Version=$(VERSION)
# grpcnotrace: gRPC without golang.org/x/net/trace (nothing here serves
# /debug/requests), whose package initialisation every client start paid.
TAGS      ?= grpcnotrace
BUF       := $(GO) tool -modfile=tools/go.mod buf
FUZZTIME  ?= 30s
# Fuzz targets run by `make test` (package:target).
FUZZ      ?= ./internal/cmdline:FuzzSplitCommand ./daemon/policy:FuzzParseArgs ./daemon/policy:FuzzDecide ./internal/vt:FuzzWrite ./daemon/receiptstore:FuzzRedactMatchesReference ./daemon/broker/journal:FuzzDirectEncoding

.PHONY: all build test deps unit vet fuzz run generate check-generated lint bench install uninstall man docs clean

all: build

build:
	$(GO) build -tags "$(TAGS)" -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

## test: test dependencies, vet, unit + integration tests with the race detector, fuzzers, generated-code check
test: deps vet check-generated unit fuzz

## deps: install what the tests need besides Go modules (Chromium, npm packages, systemd-analyze); idempotent
deps:
	./scripts/ci-deps.sh

vet:
	$(GO) vet ./...
	GOOS=darwin $(GO) build ./...   # non-Linux builds keep compiling

# Tests that drive outside components (a browser, the TypeScript MCP SDK, an
# OpenTelemetry Collector built by scripts/ci-deps.sh) run
# verbosely after the rest, so the output shows they ran. With
# TERMD_TEST_REQUIRE_ALL=1 a test whose real component is missing fails
# instead of skipping; with TERMD_REQUIRE_SANDBOX=1 the sandbox tests fail
# (never skip) on a host that cannot enforce the sandbox.
REAL_COMPONENT_TESTS := ^(TestConsoleInBrowser|TestTypeScriptClient|TestConformanceSuite|TestInspectorCLI|TestOpenAPIDocument|TestOTLPExportToCollector|TestFleetEndToEnd)$$
# The systemd-nspawn test (deploy) keeps the Debian root file system it boots
# in the build directory, keyed by its package list: debootstrap runs once.
# The test OpenTelemetry Collector is built once into the build directory too.
ROOTFS_CACHE ?= $(abspath $(BIN))/rootfs
OTELCOL_CACHE ?= $(abspath $(BIN))/otelcol
TEST_ENV := TERMD_TEST_REQUIRE_ALL=1 TERMD_REQUIRE_SANDBOX=1 TERMD_ROOTFS_CACHE=$(ROOTFS_CACHE) TERMD_OTELCOL_CACHE=$(OTELCOL_CACHE)
unit:
	$(TEST_ENV) $(GO) test -race -count=1 -timeout 30m -skip '$(REAL_COMPONENT_TESTS)' ./...
	$(TEST_ENV) $(GO) test -race -count=1 -timeout 30m -v -run '$(REAL_COMPONENT_TESTS)' ./gateway ./mcpbridge ./daemon/e2e

fuzz:
	@set -e; for f in $(FUZZ); do \
		pkg=$${f%%:*}; target=$${f##*:}; \
		echo "fuzz $$pkg $$target for $(FUZZTIME)"; \
		$(GO) test -run='^$$' -fuzz="^$$target$$" -fuzztime=$(FUZZTIME) $$pkg; \
	done

## run: start termd (and the gateway, when built) on embedded defaults in ./.run
run: build
	./scripts/run.sh

## generate: regenerate protobuf Go code, gateway handlers and OpenAPI (offline)
generate:
	$(BUF) lint
	$(BUF) generate

## check-generated: fail when committed generated code differs from `make generate`
check-generated:
	./scripts/check-generated.sh

lint: vet
	$(BUF) lint
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## bench: benchmarks that print ratios against baselines measured in the same run
bench: build
	@echo "benchmarks print ratios against baselines measured in the same run"
	TERMD_BENCH=1 $(GO) test -run '^TestBench' -count=1 -v -timeout 60m ./... 2>&1 | grep -vE '^\s+time=|^=== |^--- PASS|no tests to run|^PASS$$|bench_test.go:31: '
	$(GO) test -run '^$$' -bench . -benchtime 2000x ./daemon/policy ./daemon/events 2>&1 | grep -E 'Benchmark|ratio|ok'
	$(GO) test -run '^$$' -bench BenchmarkSearch -benchtime 5x ./daemon/search 2>&1 | grep -E 'Benchmark|ok'

install: build man
	./scripts/install.sh "$(PREFIX)" "$(BIN)"

uninstall:
	./scripts/install.sh --uninstall "$(PREFIX)"

## docs: regenerate docs/CONFIG.md from the config struct (a test fails when it is stale)
docs:
	$(GO) run ./daemon/config/gen

## man: write the man pages of all four binaries into bin/man/man1 (make install installs them)
man:
	$(GO) run ./internal/manpages/gen $(BIN)/man/man1

clean:
	rm -rf $(BIN) .run
