# The one entry point for developers and CI. `make test` is the test command
# the README and .ci/run use.
GO        ?= go
BIN       := bin
PKGS      := ./...
STATICCHECK_VERSION := v0.8.2

.PHONY: build test demo run bench bench-chart bench-doc bench-micro lint fuzz clean

build:
	$(GO) build -o $(BIN)/gateway ./cmd/gateway
	$(GO) build -o $(BIN)/mockupstream ./cmd/mockupstream

# vet, the race detector over every package, and the Postgres integration
# tests (the test helper finds or starts a Postgres by itself).
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 15m $(PKGS)
	# Allocation counts are the program's only without the race detector,
	# which allocates on its own account: the alloc tests run once more
	# without it (under -race they skip, saying so).
	$(GO) test -count=1 -run 'Allocs' ./internal/api/

# Two mock upstreams, a local Postgres under ./data (unless
# GATEWAY_DATABASE_URL is set) and the gateway on :8080.
demo: build
	bash scripts/demo.sh

# The gateway alone, with the routes file in GATEWAY_CONFIG (default
# gateway.yaml) and a local Postgres unless GATEWAY_DATABASE_URL is set; it
# starts nothing without a routes file and stops the Postgres it started.
run: build
	bash scripts/run.sh

# The load benchmark (docs/benchmarks.md), then its chart and results table from
# the JSON it writes; bench-doc puts a full run's chart and table into the doc.
BENCH_JSON ?= data/bench-results.json
bench: build
	BENCH_JSON=$(BENCH_JSON) $(GO) run ./cmd/bench
	$(MAKE) --no-print-directory bench-chart

bench-chart:
	$(GO) run ./cmd/benchchart -in $(BENCH_JSON) -out data/bench.png -table

bench-doc:
	$(GO) run ./cmd/benchchart -in $(BENCH_JSON) -out docs/bench.png -doc docs/benchmarks.md

bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./internal/...

lint:
	gofmt -l . | (! grep .) || (echo "gofmt needed on the files above" && false)
	$(GO) vet $(PKGS)
	@command -v staticcheck >/dev/null || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	"$$($(GO) env GOPATH)/bin/staticcheck" $(PKGS)

FUZZTIME ?= 2m
fuzz:
	bash scripts/fuzz.sh $(FUZZTIME)

clean:
	rm -rf $(BIN)
