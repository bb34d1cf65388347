# Strata — the front door. `make help` lists targets.
SHELL := /usr/bin/env bash
export GOTOOLCHAIN := local
export GOFLAGS := -buildvcs=false

PREFIX  := github.com/strataio/strata
MODULES := proto libs metad partitiond coordinatord gateway strata deploy
ROLES   := metad partitiond coordinatord gateway
BIN     := $(CURDIR)/.bin
# Every workspace module's packages; see docs/development.md for why not ./...
PKGS     = $(shell go list -m -f '{{.Path}}/...')
TEST_TIMEOUT ?= 25m
RACE ?= -race
FUZZTIME ?= 20s

.PHONY: help build test test-short lint vet fmt-check boundaries fuzz fuzz-replay bench proto proto-check tools tidy tidy-check run clean
.PHONY: image compose-up compose-down compose-test

help: ## list targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## build every binary into .bin/ (static, CGO_ENABLED=0)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/ $(PREFIX)/strata/cmd/... $(foreach r,$(ROLES),$(PREFIX)/$(r)/cmd/...)

test: ## run every module's tests with -race (the CI test command)
	go test $(RACE) -timeout $(TEST_TIMEOUT) -count=1 $(PKGS)

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
