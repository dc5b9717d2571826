# gateway: see README.md. `make run` starts the gateway on embedded defaults; `make test` runs
# the whole test suite (what CI runs).
GO        ?= go
BIN       ?= bin/gateway
DATA      ?= ./data
VERSION   ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
# Packages must import one way: main → httpapi → engine → actors → {persist, network, ecom}.
ADAPTERS  := persist network network/sim network/whatsapp ecom identity media

.PHONY: run build test test-short lint deps fuzz test-scale bench bench-quick bench-events webhook-interop clean

run: build
	$(BIN) serve --data $(DATA) --log-format text

build:
	@mkdir -p bin
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) .

test: lint
	$(GO) test -race -count=1 -timeout 12m ./...

test-short:
	$(GO) test -count=1 ./...

lint: deps
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# deps fails when an adapter imports the core, or the core imports the HTTP layer.
deps:
	@fail=0; \
	for p in $(ADAPTERS); do \
	  [ -d $$p ] || continue; \
	  bad=$$($(GO) list -deps ./$$p | grep -E 'github.com/gateway/gateway/(engine|actors|httpapi)$$' || true); \
	  if [ -n "$$bad" ]; then echo "$$p must not import: $$bad"; fail=1; fi; \
	done; \
	for p in engine actors; do \
	  bad=$$($(GO) list -deps ./$$p | grep -E 'github.com/gateway/gateway/httpapi$$' || true); \
	  if [ -n "$$bad" ]; then echo "$$p must not import: $$bad"; fail=1; fi; \
	done; \
	exit $$fail

# fuzz runs the route-body fuzzer (FUZZTIME, default 60s); its seeds run in make test too.
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run XXX -fuzz FuzzRouteBodies -fuzztime $(FUZZTIME) -parallel 2 .

# test-scale runs 10,000 concurrent campaigns (delay 1 s) and reports timer lateness and heap.
test-scale:
	$(GO) test -count=1 -run TestCampaignTimerDrift -v ./engine -campaigns 10000

# bench runs the load-test benchmarks and the scale run (bench/README.md has the method and the
# latest figures); bench-quick is the smoke test CI runs: it fails on errors, never on speed.
bench: build
	$(GO) build -o bin/bench ./bench
	bin/bench run --gateway $(BIN)
	bin/bench scale --gateway $(BIN)
	$(MAKE) bench-events

# bench-events: signed webhook deliveries per second to a loopback receiver (DESIGN.md section 8:
# at least 10k/s), with the HTTP ceiling of this machine beside it (bench/README.md, "Events out").
bench-events:
	$(GO) test -run XXX -bench 'SignedDeliveries' -benchtime 30000x ./engine
	$(GO) test -run XXX -bench 'Post$$' -benchtime 30000x ./actors/webhook

# webhook-interop installs the npm package standardwebhooks (the specification's TypeScript
# library) outside the repository; the engine's webhook tests then also verify every signature
# with it (they skip that check when node or the package is missing).
webhook-interop:
	mkdir -p $(HOME)/.cache/gateway-node
	cd $(HOME)/.cache/gateway-node && npm install --no-audit --no-fund standardwebhooks@1.1.1
	$(GO) test -count=1 -run 'TestEventsToALoopbackReceiver' -v ./engine | grep -E 'Node|ok|FAIL'

bench-quick: build
	$(GO) build -o bin/bench ./bench
	bin/bench run --quick --gateway $(BIN)

clean:
	rm -rf bin
