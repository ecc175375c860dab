# fleetmirror. `make help` lists the targets.

# Tool versions. Each tool is built once per version into bin/ with
# `go install`, as bin/<tool>-<version> (helm: bin/helm-<version>-k8s<release>),
# with bin/<tool> linking to it.
GOLANGCI_LINT_VERSION ?= v2.15.0
HELM_VERSION ?= v3.22.0
# The Kubernetes release helm assumes when it asks no cluster (helm template,
# helm lint): the one of its client libraries, linked in as helm's own
# Makefile does (hack/helm-ldflags.sh reads it from helm's go.mod and fails
# when it is not this one). A plain go install assumes 1.20, which the
# charts' kubeVersion refuses; the name keeps such a helm, in a bin/ of
# before, from being used.
HELM_KUBE_VERSION ?= 1.37
CONTROLLER_GEN_VERSION ?= v0.23.0

BIN := $(CURDIR)/bin
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
HELM := $(BIN)/helm-$(HELM_VERSION)-k8s$(HELM_KUBE_VERSION)
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)

IMAGE ?= fleetmirror:dev

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

# What the binaries say they are (--version, fleetmirror_build_info): the
# release tag, or git describe's description of a commit after one.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# Asked once, so that every artefact of one run says the same.
VERSION := $(VERSION)
REVISION := $(REVISION)
VERSION_PKG := github.com/fleetmirror/fleetmirror/pkg/version
LDFLAGS := -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Revision=$(REVISION)
# The charts' version: VERSION without its leading v when that is semver
# (v1.2.3, v1.3.0-rc.1, v1.2.3-4-gabc1234 from git describe), else 0.0.0-dev.
CHART_VERSION ?= $(shell v='$(patsubst v%,%,$(VERSION))'; \
	if [[ "$$v" =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$$ ]]; \
	then echo "$$v"; else echo 0.0.0-dev; fi)
CHART_VERSION := $(CHART_VERSION)

# make release: where, for which platforms, and which binaries (name:cmd
# directory).
DIST := dist
PLATFORMS ?= linux/amd64 linux/arm64
RELEASE_BINARIES := fleetmirror-member:member fleetmirror-hub:hub kubectl-fleetmirror:kubectl-fleetmirror

# Charts that helm-lint checks, where they exist yet.
CHARTS := $(patsubst %/Chart.yaml,%,$(wildcard charts/member/Chart.yaml charts/hub/Chart.yaml))
# Prometheus rule files in promtool's format, and their promtool unit tests.
PROM_RULES := $(wildcard charts/*/files/*.rules.yaml)
PROM_RULE_TESTS := $(wildcard charts/*/files/*.rules_test.yaml)

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/fleetmirror-member, bin/fleetmirror-hub and the kubectl plugin bin/kubectl-fleetmirror, stamped with VERSION and REVISION
	go build -trimpath -ldflags '$(LDFLAGS)' -o bin/fleetmirror-member ./cmd/member
	go build -trimpath -ldflags '$(LDFLAGS)' -o bin/fleetmirror-hub ./cmd/hub
	go build -trimpath -ldflags '$(LDFLAGS)' -o bin/kubectl-fleetmirror ./cmd/kubectl-fleetmirror

.PHONY: version
version: ## Print VERSION, REVISION and CHART_VERSION as a release would use them
	@echo "VERSION=$(VERSION) REVISION=$(REVISION) CHART_VERSION=$(CHART_VERSION)"

.PHONY: release
release: $(HELM) ## Build static linux/amd64 and linux/arm64 binaries and the charts into dist/, with SHA256SUMS (docs/releasing.md)
	rm -rf $(DIST) && mkdir -p $(DIST)
	for platform in $(PLATFORMS); do \
	  for bin in $(RELEASE_BINARIES); do \
	    out="$(DIST)/$${bin%%:*}-$${platform%%/*}-$${platform##*/}"; \
	    echo "go build $$out"; \
	    CGO_ENABLED=0 GOOS="$${platform%%/*}" GOARCH="$${platform##*/}" \
	      go build -trimpath -ldflags '-s -w $(LDFLAGS)' -o "$$out" "./cmd/$${bin##*:}"; \
	  done; \
	done
	$(HELM) package $(CHARTS) --version '$(CHART_VERSION)' --app-version '$(VERSION)' --destination $(DIST)
	cd $(DIST) && find . -type f ! -name SHA256SUMS -printf '%P\n' | sort | xargs sha256sum > SHA256SUMS
	@echo "Release $(VERSION) (charts $(CHART_VERSION)) in $(DIST)/:" && ls $(DIST)

.PHONY: vet
vet: ## Run go vet
	go vet ./...

.PHONY: test
test: ## Vet, run every test with -race (unit, envtest, test/e2e), lint charts and alert rules; tools built meanwhile (hack/test.sh)
	hack/test.sh '$(HELM)'

.PHONY: test-matrix
test-matrix: ## Run a core set of the envtest and e2e tests on Kubernetes 1.34, on 1.37 and on a mixed fleet (hack/test-matrix.sh; LEGS='oldest newest mixed' picks legs)
	hack/test-matrix.sh $(LEGS)

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
bench: ## Run the benchmarks (test/bench/README.md); flags in BENCH_FLAGS, e.g. BENCH_FLAGS='-workload hub'; '-workload hub-fleet' (100 clusters, ~10 min, ~13 GiB) only by name
	@if [[ -d test/bench ]]; then go run ./test/bench $(BENCH_FLAGS); \
	else echo "bench: test/bench does not exist yet; it is tracked by the benchmark issue"; fi

.PHONY: kyverno-replay
kyverno-replay: ## Replay Kyverno's generate/clone conformance tests through migrate and the agent (KYVERNO=path to a kyverno/kyverno checkout or bare clone; RUN= a regexp of tests)
	@if [[ -z '$(KYVERNO)' ]]; then echo "kyverno-replay: set KYVERNO to a kyverno/kyverno checkout or bare clone" >&2; exit 2; fi
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh)" go run ./hack/kyverno-replay -kyverno '$(KYVERNO)' $(if $(RUN),-run '$(RUN)')

.PHONY: cluster
cluster: ## Start one real Kubernetes node on this machine (root; hack/cluster.sh; kubeconfig in .fleet/node/kubeconfig)
	hack/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop the node of make cluster and undo every change it made on the host
	hack/cluster.sh down

.PHONY: test-cluster
test-cluster: $(HELM) image ## Run test/cluster on the node of make cluster: the image and charts as they ship
	hack/cluster.sh status || { echo "no node runs: make cluster first" >&2; exit 1; }
	set -a; eval "$$(hack/cluster.sh env)"; set +a; \
		FLEETMIRROR_IMAGE='$(IMAGE)' FLEETMIRROR_HELM='$(HELM)' \
		KUBEBUILDER_ASSETS="$$(hack/envtest.sh)" go test -race -count=1 -timeout 45m -v ./test/cluster/

.PHONY: demo-cluster
demo-cluster: cluster image $(HELM) ## The demo on the real node with the real charts (hack/demo-cluster.sh)
	IMAGE='$(IMAGE)' HELM='$(HELM)' hack/demo-cluster.sh

.PHONY: docker-build
docker-build: ## Build the container image (IMAGE, default fleetmirror:dev)
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE) .

# make image: the archive it writes, and the containerd of the node of make
# cluster, which imports it when that node runs.
IMAGE_ARCHIVE := .fleet/images/fleetmirror.tar
NODE_CONTAINERD_SOCK ?= /run/fleetmirror-node/containerd/containerd.sock

.PHONY: image
image: ## Build the Dockerfile's image (IMAGE) without Docker into .fleet/images/fleetmirror.tar and import it into the node of make cluster if one runs
	go run ./hack/image -tag '$(IMAGE)' -version '$(VERSION)' -revision '$(REVISION)' -o $(IMAGE_ARCHIVE)
	@if [[ -S '$(NODE_CONTAINERD_SOCK)' ]]; then \
		echo "Importing $(IMAGE) into the node's containerd"; \
		ctr --address '$(NODE_CONTAINERD_SOCK)' -n k8s.io images import --no-unpack=false $(IMAGE_ARCHIVE); \
	else \
		echo "image: not imported: no node runs ($(NODE_CONTAINERD_SOCK) does not exist; make cluster starts one)"; \
	fi

.PHONY: envtest
envtest: ## Print the directory of kube-apiserver, etcd and kubectl (builds them the first time); KUBE_VERSION=1.34 for another release
	@hack/envtest.sh $(KUBE_VERSION)

.PHONY: tools
tools: $(GOLANGCI_LINT) $(HELM) ## Build the pinned tools into bin/

$(GOLANGCI_LINT):
	$(call go-install,golangci-lint,github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION))

$(HELM):
	ldflags=$$(hack/helm-ldflags.sh $(HELM_VERSION) $(HELM_KUBE_VERSION)); \
		hack/go-install.sh helm helm.sh/helm/v3/cmd/helm $(HELM_VERSION) $(BIN) $(notdir $(HELM)) "$$ldflags"

$(CONTROLLER_GEN):
	$(call go-install,controller-gen,sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_GEN_VERSION))

# make generate: the member chart renders the CRD from files/crds
# (templates/crds.yaml, behind crds.enabled), which holds config/crd's files
# byte for byte (test/charts checks it; .ci/run checks that make generate
# changes nothing).
.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate the API types' deepcopy functions (pkg/apis) and their CRD (config/crd, copied into charts/member/files/crds) with controller-gen
	$(CONTROLLER_GEN) object paths=./pkg/apis/...
	$(CONTROLLER_GEN) crd paths=./pkg/apis/... output:crd:artifacts:config=config/crd
	mkdir -p charts/member/files/crds && rm -f charts/member/files/crds/*.yaml
	cp config/crd/*.yaml charts/member/files/crds/

# go-install builds package $(2) at version $(3) into bin/$(1)-$(3) and
# points bin/$(1) at it, once whoever asks first (hack/go-install.sh holds a
# lock: test packages that need a tool may ask for it at the same moment).
define go-install
	hack/go-install.sh $(1) $(2) $(3) $(BIN)
endef
