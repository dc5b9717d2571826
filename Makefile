# gateway: see README.md. `make run` starts the gateway on embedded defaults; `make test` runs
# the whole test suite (what CI runs).
GO        ?= go
BIN       ?= bin/gateway
DATA      ?= ./data
VERSION   ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
# Packages must import one way: main → node → httpapi → engine → actors/* → {domain, network, ecom}.
ADAPTERS  := persist persist/kvtest persist/natskv persist/natstest natsevents network network/sim network/simhttp network/whatsapp network/cloud network/cloud/fakegraph cloudapi network/networktest ecom identity media domain cluster internal/jsstream
# whatsmeow 2026-08-21 is served by ../shared/goproxy when the default module proxy does not
# have it yet (see README.md, "WhatsApp"); the same versions and hashes as the public proxy.
SHARED_GOPROXY := $(abspath ../shared/goproxy)
ifneq ($(wildcard $(SHARED_GOPROXY)/.),)
export GOPROXY := file://$(SHARED_GOPROXY),$(shell GOPROXY= $(GO) env GOPROXY)
endif

.PHONY: run build test test-nats test-badger-outbox test-cluster test-short test-ui screenshots web lint deps openapi-lint openapi-codegen fuzz test-scale bench bench-quick bench-events bench-wastore bench-cluster webhook-interop test-cloudfront wrk clean

run: build
	$(BIN) serve --data $(DATA) --log-format text

build:
	@mkdir -p bin
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) .

# make test also runs, on NATS JetStream (one nats-server process, README: Tests), the tests that
# exercise storage across restarts, crashes and outages; test-nats runs the whole root suite
# (every e2e and process test) on it, and .ci/run runs it after make test, so .ci/run calls
# `make test NATS_SUBSET=` (an empty subset skips it: test-nats runs those tests right after).
NATS_SUBSET := Kill9|SIGTERM|Restart|Survive|TestNATS
test: lint openapi-lint openapi-codegen web wrk
	$(GO) test -race -count=1 -timeout 12m -parallel 4 ./...
	$(if $(NATS_SUBSET),GATEWAY_STORE=nats $(GO) test -race -count=1 -timeout 10m -run '$(NATS_SUBSET)' .)

test-nats:
	GATEWAY_STORE=nats $(GO) test -race -count=1 -timeout 30m -parallel 4 .

# test-badger-outbox: the crash, restart and idempotency suites with the outbox on the records'
# store (`--outbox badger`; the default is its own log: README "Operations"), as test-nats runs
# the suite on JetStream (CI runs it).
test-badger-outbox:
	GATEWAY_OUTBOX=badger $(GO) test -count=1 -timeout 10m -parallel 4 -run 'Kill9|KillNine|SIGTERM|Restart|Survive|SendAt|StoreLoop|Media|Idem' .

# test-cluster (README: Cluster): three nats-server processes in one clustered JetStream, a
# `gateway sim` process and three `gateway serve --cluster` processes on loopback under load:
# kill -9 of a gateway, its restart, kill -9 of a NATS server, a SIGTERM, with a Cloud API number
# on the fake Graph API among the load (it moves with its partition: no device lock); it prints
# the handover times and the delivery and cap checks. Without -race (DESIGN.md section 13.1), after make test.
test-cluster:
	$(GO) test -tags cluster -count=1 -timeout 10m -run TestClusterOfThree -v .

# test-short: the quick loop while working (under 2 minutes): -short skips the process suites
# (the built binary under kill -9, full disks, big bodies) and the OIDC suite.
test-short:
	$(GO) test -short -count=1 ./...

# staticcheck is pinned and run through `go run` (built once into the module cache), so `make
# lint` needs nothing installed; 2026.2.2 is the release that reads go 1.26 code.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

# test-ui drives the dashboard in headless Chromium (Debian's chromium; CHROMIUM=path to use
# another) against the real binary: sign-in, QR to CONNECTED, send, templates, store, admin keys,
# page weight, a campaign from a CSV file, live messages, every screen at 390 and 1440 px in both
# themes with axe-core. screenshots reruns them and rewrites docs/screenshots/*.png.
test-ui:
	$(GO) test -tags ui -count=1 -timeout 15m -v ./web/uitest

screenshots:
	$(GO) test -tags ui -count=1 -timeout 15m ./web/uitest -screenshots

# web: the dashboard has no build step (plain ES modules in web/static, embedded as they are),
# so there is nothing to bundle; this target checks the files parse as JavaScript modules and
# that every import names an export (node links the module graph; the DOM errors that follow
# are not about the files).
web:
	@if command -v node >/dev/null; then for f in web/static/*.js; do node --check --input-type=module < $$f || exit 1; done; \
	  for f in web/static/app.js web/static/docs.js; do node --input-type=module -e "import('$(CURDIR)/'+process.argv[1]).catch((e) => { if (e instanceof SyntaxError) { console.error(process.argv[1] + ': ' + e.message); process.exit(1) } })" $$f || exit 1; done; \
	  echo "web/static: ok (syntax, and every import names an export)"; \
	else echo "no build step: web/static is served as written (node not found, syntax not checked)"; fi

lint: deps
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

# openapi-lint runs Redocly's recommended rules and Spectral's OpenAPI ruleset on
# httpapi/openapi.json and fails on any error (warnings are listed; .redocly.lint-ignore.yaml
# names the findings skipped, and why). The npm packages are pinned and installed once,
# outside the repository, by this target (node and npm are on the machine and on CI's).
NODE_TOOLS       ?= $(HOME)/.cache/gateway-node-tools
REDOCLY_VERSION  := 2.77.0
SPECTRAL_VERSION := 6.16.3
openapi-lint:
	@command -v npm >/dev/null || { echo "openapi-lint needs node and npm"; exit 1; }
	@mkdir -p $(NODE_TOOLS); cd $(NODE_TOOLS) && if [ ! -f .installed-$(REDOCLY_VERSION)-$(SPECTRAL_VERSION) ]; then \
	  [ -f package.json ] || echo '{"private":true}' > package.json; \
	  npm install --no-audit --no-fund --silent @redocly/cli@$(REDOCLY_VERSION) @stoplight/spectral-cli@$(SPECTRAL_VERSION) && \
	  touch .installed-$(REDOCLY_VERSION)-$(SPECTRAL_VERSION); fi
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true $(NODE_TOOLS)/node_modules/.bin/redocly lint --format=stylish httpapi/openapi.json
	$(NODE_TOOLS)/node_modules/.bin/spectral lint --ruleset .spectral.yaml --fail-severity error httpapi/openapi.json

# openapi-codegen checks that oapi-codegen's default output (types, client, echo server, spec)
# for httpapi/openapi.json compiles and vets, in a throwaway module: what a Go client author
# gets first. Pinned and run through `go run`.
OAPI_CODEGEN ?= $(GO) run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2
openapi-codegen:
	@d=$$(mktemp -d); trap 'rm -rf $$d' EXIT; \
	$(OAPI_CODEGEN) -package api httpapi/openapi.json > $$d/api.gen.go && \
	printf 'module oapicheck\n\ngo 1.26\n\nrequire (\n\tgithub.com/getkin/kin-openapi v0.153.0\n\tgithub.com/labstack/echo/v4 v4.16.0\n\tgithub.com/oapi-codegen/runtime v1.9.0\n)\n' > $$d/go.mod && \
	(cd $$d && $(GO) mod tidy >/dev/null 2>&1; $(GO) vet ./...) && echo "openapi-codegen: oapi-codegen's default output compiles"

# deps fails when an adapter imports the core, the core imports the HTTP layer, or an actor
# imports the engine (TestImportAllowList in deps_test.go checks every arrow).
deps:
	@fail=0; \
	for p in $(ADAPTERS); do \
	  [ -d $$p ] || continue; \
	  bad=$$($(GO) list -deps ./$$p | grep -E 'github.com/gateway/gateway/(engine|actors(/[a-z]+)?|httpapi)$$' || true); \
	  if [ -n "$$bad" ]; then echo "$$p must not import: $$bad"; fail=1; fi; \
	done; \
	for p in engine actors/...; do \
	  bad=$$($(GO) list -deps ./$$p | grep -E 'github.com/gateway/gateway/httpapi$$' || true); \
	  if [ -n "$$bad" ]; then echo "$$p must not import: $$bad"; fail=1; fi; \
	done; \
	bad=$$($(GO) list -deps ./actors/... | grep -E 'github.com/gateway/gateway/engine$$' || true); \
	if [ -n "$$bad" ]; then echo "actors must not import: $$bad"; fail=1; fi; \
	exit $$fail

# fuzz runs the route-body fuzzer (FUZZTIME, default 60s); its seeds run in make test too.
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run XXX -fuzz FuzzRouteBodies -fuzztime $(FUZZTIME) -parallel 2 .
	$(GO) test -run XXX -fuzz FuzzFastDecoders -fuzztime $(FUZZTIME) -parallel 2 ./httpapi

# bench-cluster: a lone --store nats gateway, a 1-node and a 3-node cluster on one NATS server
# and on three (R3), bench run's cases, the forwarding overhead and the hand-over times; writes
# the figures into bench/README.md ("A cluster"); a quiet machine's job, not CI's.
bench-cluster: build
	$(GO) build -o bin/bench ./bench
	bin/bench cluster --gateway $(BIN) --readme bench/README.md

# test-scale runs 10,000 concurrent campaigns (delay 1 s) and reports timer lateness and heap.
test-scale:
	$(GO) test -count=1 -run TestCampaignTimerDrift -v ./engine -campaigns 10000

# bench runs the load-test benchmarks and the scale run (bench/README.md has the method and the
# latest figures); bench-quick is the smoke test CI runs: it fails on errors, never on speed.
# Every closed-loop case is measured with wrk too (Debian's package, installed here when
# missing and apt-get can; without it the bench says so and measures with its own generator).
bench: build wrk
	$(GO) build -o bin/bench ./bench
	bin/bench run --gateway $(BIN)
	bin/bench scale --gateway $(BIN)
	$(MAKE) bench-events

wrk:
	@command -v wrk >/dev/null && exit 0; \
	SUDO=""; [ "$$(id -u)" = 0 ] || SUDO="sudo -n"; \
	if command -v apt-get >/dev/null && $$SUDO true 2>/dev/null; then \
	  echo "installing wrk (Debian's package) for the bench's second load generator"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq wrk >/dev/null; \
	else echo "wrk not found and cannot be installed here: install it (apt-get install wrk); the bench measures with its own generator only"; fi

# bench-events: signed webhook deliveries per second to a loopback receiver (DESIGN.md section 8:
# at least 10k/s), with the HTTP ceiling of this machine beside it (bench/README.md, "Events out").
bench-events:
	$(GO) test -run XXX -bench 'SignedDeliveries' -benchtime 30000x ./engine
	$(GO) test -run XXX -bench 'Post$$' -benchtime 30000x ./actors/webhook

# test-cloudfront drives the Cloud-API-shaped front (README, "Integrations") with a real Cloud API
# client library from npm, @great-detail/whatsapp (its Client takes a base URL), against the
# built gateway on the sim: a text, an image by upload, a reply, a reaction, the records and the
# download, a refused kind's error, and the library's webhook parser verifying the gateway's
# format-meta deliveries (test/cloudfront/cloudfront.mjs). The package is pinned and installed
# once, outside the repository, like openapi-lint's. A second or so after the build.
CLOUDFRONT_SDK_VERSION := 8.4.0
CLOUDFRONT_NODE        ?= $(HOME)/.cache/gateway-node-cloudfront
test-cloudfront: build
	@command -v npm >/dev/null || { echo "test-cloudfront needs node and npm"; exit 1; }
	@mkdir -p $(CLOUDFRONT_NODE); cd $(CLOUDFRONT_NODE) && if [ ! -f .installed-$(CLOUDFRONT_SDK_VERSION) ]; then \
	  [ -f package.json ] || echo '{"private":true}' > package.json; \
	  npm install --no-audit --no-fund --silent @great-detail/whatsapp@$(CLOUDFRONT_SDK_VERSION) && \
	  touch .installed-$(CLOUDFRONT_SDK_VERSION); fi
	GATEWAY_BIN=$(CURDIR)/$(BIN) CLOUDFRONT_SDK=$(CLOUDFRONT_NODE)/node_modules/@great-detail/whatsapp/dist/index.js \
	  node test/cloudfront/cloudfront.mjs

# webhook-interop installs the npm package standardwebhooks (the specification's TypeScript
# library) outside the repository; the engine's webhook tests then also verify every signature
# with it (they skip that check when node or the package is missing).
webhook-interop:
	mkdir -p $(HOME)/.cache/gateway-node
	cd $(HOME)/.cache/gateway-node && npm install --no-audit --no-fund standardwebhooks@1.1.1
	$(GO) test -count=1 -run 'TestEventsToALoopbackReceiver' -v ./engine | grep -E 'Node|ok|FAIL'

# bench-wastore: 200 WhatsApp devices decrypting at once (an offline-sync burst) on the SQLite
# and the PostgreSQL device store (throwaway cluster, internal/pgtest), against the fake server
# (README, "WhatsApp device store"). BURST_DEVICES and BURST_MESSAGES make it smaller.
BURST_DEVICES  ?= 200
BURST_MESSAGES ?= 3
bench-wastore:
	$(GO) test -run XXX -bench DecryptionBurst -benchtime 1x -timeout 30m ./network/whatsapp \
		-burst-devices $(BURST_DEVICES) -burst-messages $(BURST_MESSAGES) | grep -E '^(Benchmark|ok|FAIL|PASS)'

bench-quick: build wrk
	$(GO) build -o bin/bench ./bench
	bin/bench run --quick --duration 1s --gateway $(BIN)

clean:
	rm -rf bin
