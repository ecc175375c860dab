# fleetmirror. `make help` lists the targets.

# Tool versions. Each tool is built once per version into bin/ with
# `go install`, as bin/<tool>-<version>, with bin/<tool> linking to it.
GOLANGCI_LINT_VERSION ?= v2.15.0
HELM_VERSION ?= v3.22.0

BIN := $(CURDIR)/bin
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
HELM := $(BIN)/helm-$(HELM_VERSION)

IMAGE ?= fleetmirror:dev

# Charts that helm-lint checks, where they exist yet.
CHARTS := $(patsubst %/Chart.yaml,%,$(wildcard charts/member/Chart.yaml charts/hub/Chart.yaml))
# Prometheus rule files in promtool's format, and their promtool unit tests.
PROM_RULES := $(wildcard charts/*/files/*.rules.yaml)
PROM_RULE_TESTS := $(wildcard charts/*/files/*.rules_test.yaml)

.DEFAULT_GOAL := help
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/fleetmirror-member, bin/fleetmirror-hub and the kubectl plugin bin/kubectl-fleetmirror
	go build -trimpath -o bin/fleetmirror-member ./cmd/member
	go build -trimpath -o bin/fleetmirror-hub ./cmd/hub
	go build -trimpath -o bin/kubectl-fleetmirror ./cmd/kubectl-fleetmirror

.PHONY: vet
vet: ## Run go vet
	go vet ./...

.PHONY: test
test: vet ## Vet, run every test with -race (unit, envtest, test/e2e), lint charts and alert rules if present
	assets="$$(hack/envtest.sh)"; prom="$$(hack/prometheus.sh)"; \
		KUBEBUILDER_ASSETS="$$assets" FLEETMIRROR_PROMETHEUS_DIR="$$prom" go test -race ./...
	$(MAKE) --no-print-directory helm-lint prom-check

.PHONY: test-unit
test-unit: ## Run the tests that need no API server (-race -short)
	go test -race -short ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint
	$(GOLANGCI_LINT) run ./...

.PHONY: helm-lint
helm-lint: $(if $(CHARTS),$(HELM)) ## Lint charts/member and charts/hub (skipped until they exist)
ifeq ($(CHARTS),)
	@echo "helm-lint: no charts yet, skipped"
else
	$(HELM) lint --strict $(CHARTS)
endif

.PHONY: prom-check
prom-check: ## Check alert rules with the pinned promtool (hack/prometheus.sh builds it once per version)
ifeq ($(PROM_RULES),)
	@echo "prom-check: no rule files yet, skipped"
else
	promtool="$$(hack/prometheus.sh)/promtool"; \
		"$$promtool" check rules $(PROM_RULES) && \
		$(if $(PROM_RULE_TESTS),"$$promtool" test rules $(PROM_RULE_TESTS),true)
endif

.PHONY: demo
demo: build ## Run a local hub and two members with the agents (Ctrl-C stops all)
	go run ./hack/localfleet

.PHONY: bench
bench: ## Run the benchmarks (test/bench); flags in BENCH_FLAGS, e.g. BENCH_FLAGS='-workload hub'
	@if [[ -d test/bench ]]; then go run ./test/bench $(BENCH_FLAGS); \
	else echo "bench: test/bench does not exist yet; it is tracked by the benchmark issue"; fi

.PHONY: docker-build
docker-build: ## Build the container image (IMAGE, default fleetmirror:dev)
	docker build -t $(IMAGE) .

.PHONY: envtest
envtest: ## Print the directory of kube-apiserver, etcd and kubectl (builds them the first time)
	@hack/envtest.sh

.PHONY: tools
tools: $(GOLANGCI_LINT) $(HELM) ## Build the pinned tools into bin/

$(GOLANGCI_LINT):
	$(call go-install,golangci-lint,github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION))

$(HELM):
	$(call go-install,helm,helm.sh/helm/v3/cmd/helm,$(HELM_VERSION))

# go-install builds package $(2) at version $(3) into bin/$(1)-$(3) and
# points bin/$(1) at it.
define go-install
	@echo "Building $(1) $(3)"
	@rm -f $(BIN)/$(1)
	GOBIN=$(BIN) go install $(2)@$(3)
	@mv $(BIN)/$(1) $(BIN)/$(1)-$(3)
	@ln -s $(1)-$(3) $(BIN)/$(1)
endef
