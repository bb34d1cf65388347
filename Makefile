# Strata — the front door. `make help` lists targets.
SHELL := /usr/bin/env bash
export GOTOOLCHAIN := local
# grpcnotrace: see BuildTags in libs/proctest/build.go (the same tags there and in .ci/run).
export GOFLAGS := -buildvcs=false -tags=grpcnotrace

PREFIX  := github.com/strataio/strata
MODULES := proto libs metad partitiond coordinatord gateway strata deploy
ROLES   := metad partitiond coordinatord gateway
BIN     := $(CURDIR)/.bin
# Every workspace module's packages; see docs/development.md for why not ./...
PKGS     = $(shell go list -m -f '{{.Path}}/...')
TEST_TIMEOUT ?= 25m
RACE ?= -race
FUZZTIME ?= 20s
# Stamped into every binary (strata_build_info, strata version); git is optional.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X $(PREFIX)/libs/buildinfo.Version=$(VERSION) -X $(PREFIX)/libs/buildinfo.Revision=$(REVISION)

.PHONY: help build test test-short lint vet fmt-check boundaries fuzz fuzz-replay bench bench-replication bench-report bench-streams race-streams soak txn-faults rotation rotation-short proto proto-check tools tidy tidy-check run clean
.PHONY: image compose-up compose-down compose-test

help: ## list targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## build every binary into .bin/ (static, CGO_ENABLED=0)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/ $(PREFIX)/strata/cmd/... $(foreach r,$(ROLES),$(PREFIX)/$(r)/cmd/...)

test: ## run every module's tests with -race (the CI test command); failed tests are rerun once and named FLAKY if they pass
	@bash scripts/test.sh $(RACE) -timeout $(TEST_TIMEOUT) -count=1 -- $(PKGS)

test-short: ## quick pass: -short, no race detector
	go test -short -timeout 10m $(PKGS)

lint: vet fmt-check boundaries tidy-check ## go vet, gofmt, import boundaries, tidy drift, buf lint
	$(BIN)/buf lint 2>/dev/null || { $(MAKE) tools && $(BIN)/buf lint; }

vet:
	go vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

boundaries: ## roles import only libs and proto, never each other
	@bash scripts/check-boundaries.sh

fuzz: ## run every fuzz target for FUZZTIME each (default 20s)
	@bash scripts/fuzz.sh $(FUZZTIME)

bench: ## run the Go benchmarks of codec and storage, printing figures
	go test -run '^$$' -bench . -benchmem -timeout 30m $(PREFIX)/libs/wire/... $(PREFIX)/partitiond/... $(PREFIX)/metad/...

bench-replication: ## RF 3 acks=all through 3 partitiond processes vs the all-in-one's acks=1 (plus RF 1 and RF 3 acks=1 on the same cluster), server CPU per record, follower lag (STRATA_BENCH_DURATION=8s)
	STRATA_BENCH=1 go test -count=1 -timeout 20m -v -run '^TestReplicationThroughput$$' $(PREFIX)/strata/e2e/perf

bench-report: ## issue 17's table on a fresh all-in-one per workload: publish 100 B / 1 KiB, single durable publish, consume 1M; CPU per record, peak and idle RSS (STRATA_BENCH_PROFILE=dir also saves each run's CPU, allocation, block, mutex and heap profiles)
	STRATA_BENCH=1 go test -count=1 -timeout 30m -v -run '^TestBenchReport$$' $(PREFIX)/strata/e2e/perf

bench-streams: ## event sourcing on the all-in-one: APPEND_STREAM p50/p99 and rate (1 and 1,000 aggregates), READ_STREAM of 10,000 events with/without a snapshot
	STRATA_BENCH=1 go test -count=1 -timeout 20m -v -run '^TestStreamThroughput$$' $(PREFIX)/strata/e2e/perf

race-streams: ## the racing-appender proof at spec size: 8 appenders, 10,000 versions of one aggregate (partitiond, all-in-one, process cluster)
	STRATA_STREAM_RACE_VERSIONS=10000 go test -count=1 -timeout 20m -v -run '^TestStreamConcurrentAppenders$$' $(PREFIX)/partitiond
	STRATA_STREAM_RACE_VERSIONS=10000 go test -count=1 -timeout 20m -v -run '^TestBlackbox(AllInOne|ProcessCluster)$$/^EventSourcing$$/^racing_appenders$$' $(PREFIX)/strata/e2e/blackbox

soak: ## the replication fault test at soak size: 200 leader faults (100 SIGSTOP), 1M acks=all writes (hours)
	STRATA_SOAK=1 go test -count=1 -timeout 3h -v -run '^TestReplicationFailover$$' $(PREFIX)/strata/e2e/faults

txn-faults: ## the transaction fault test at the issue's size: 100,000 records copied 2 -> 3 partitions in transactions of 750, every partitiond and coordinatord killed twice, each copier 3 times, >= 500 old-epoch replays
	STRATA_TXN_FAULTS=1 go test -count=1 -timeout 60m -v -run '^TestTxnFaults$$' $(PREFIX)/strata/e2e/faults

tools: ## build buf and the protoc plugins into .bin/ (pinned in tools/)
	cd tools/protoc && GOWORK=off go build -o $(BIN)/ tool
	cd tools/buf && GOWORK=off go build -o $(BIN)/ tool

proto: ## regenerate Go code from proto/ with buf
	@test -x $(BIN)/buf -a -x $(BIN)/protoc-gen-go -a -x $(BIN)/protoc-gen-go-grpc || $(MAKE) tools
	$(BIN)/buf lint
	$(BIN)/buf generate

proto-check: proto ## fail if committed generated code is stale
	@git diff --exit-code -- proto || { echo "generated proto code is stale: run make proto"; exit 1; }

tidy: ## go mod tidy every module and sync the workspace
	@for m in $(MODULES); do (cd $$m && go mod tidy) || exit 1; done
	go work sync

tidy-check:
	@bash scripts/tidy-check.sh $(MODULES)

run: build ## run the all-in-one Strata with embedded defaults (data in ./data)
	$(BIN)/strata run --data-dir ./data

clean:
	rm -rf $(BIN) dist

# --- container image and docker-compose stack (deploy/; see docs/deployment.md) ---
IMAGE   ?= strata:dev
rotation: ## every role's internal certificate re-issued every 60s for 10 minutes under strata bench load: 0 failed requests (ROTATION_EVERY=, ROTATION_FOR=)
	STRATA_ROTATION_EVERY=$(or $(ROTATION_EVERY),60s) STRATA_ROTATION_FOR=$(or $(ROTATION_FOR),10m) go test -count=1 -timeout 30m -v -run '^TestRotationUnderLoad$$' $(PREFIX)/strata/e2e/rotation

rotation-short: ## the CI size of make rotation: every 2s for 12s (also part of make test)
	go test -count=1 -timeout 5m -v -run '^TestRotationUnderLoad$$' $(PREFIX)/strata/e2e/rotation

STAGING := deploy/docker/staging
COMPOSE ?= docker-compose
COMPOSE_FILE_PATH := deploy/compose/docker-compose.yml
COMPOSE_PROJECT ?= strata

image: build ## build the FROM scratch image strata:dev (IMAGE=) holding every binary (no base image pulled)
	rm -rf $(STAGING) && mkdir -p $(STAGING)/bin $(STAGING)/data $(STAGING)/certs
	cp $(foreach b,strata $(ROLES),$(BIN)/$(b)) $(STAGING)/bin/
	docker build -t $(IMAGE) deploy/docker

compose-up: image ## start the full stack (3 metad, 3 partitiond, 2 coordinatord, 2 gateways); gateway on 127.0.0.1:9000
	STRATA_IMAGE=$(IMAGE) $(COMPOSE) -p $(COMPOSE_PROJECT) -f $(COMPOSE_FILE_PATH) up -d
	@echo "waiting for every service to be healthy..."
	@bash deploy/compose/wait-healthy.sh $(COMPOSE_PROJECT) 180

compose-down: ## stop the full stack and delete its volumes
	STRATA_IMAGE=$(IMAGE) $(COMPOSE) -p $(COMPOSE_PROJECT) -f $(COMPOSE_FILE_PATH) down -v --remove-orphans

compose-test: image ## stack up, CLI smoke via a gateway, trace check, kill -9 partitiond + coordinatord, tear down
	IMAGE=$(IMAGE) COMPOSE="$(COMPOSE)" bash deploy/compose/test.sh
