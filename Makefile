# Slipway. `make demo` runs the main job on embedded defaults; `make test` runs every test.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
# The release tag at HEAD (v0.4.0), stamped into the binaries with the commit and
# whether the tree is dirty; untagged, each program reports v0.0.0-<commit12>[-dirty]
# (internal/version), the shape pipelines/github/setup installs. The commit is
# stamped here because Go's own VCS stamp is off (GOFLAGS=-buildvcs=false on
# these machines) and absent in a git worktree.
VERSION ?= $(shell git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null)
COMMIT := $(shell git rev-parse HEAD 2>/dev/null)
DIRTY := $(if $(shell git status --porcelain 2>/dev/null),true,false)
VERSION_PKG := github.com/slipway-dev/slipway/internal/version
LDFLAGS := -s -w$(if $(VERSION), -X $(VERSION_PKG).version=$(VERSION))$(if $(COMMIT), -X $(VERSION_PKG).commit=$(COMMIT) -X $(VERSION_PKG).dirty=$(DIRTY))
# Debian packages the tests, the demo and the benchmarks need.
DEBS := bubblewrap busybox-static containerd containernetworking-plugins docker-registry e2fsprogs etcd-server gcc git libc6-dev postgresql rsync runc
FUZZTIME ?= 20s

export SLIPWAY_BIN := $(BIN)/slipway
export SLIPWAY_CMP_BIN := $(BIN)/slipway-cmp
export CRANE := $(BIN)/crane
export KBLD := $(BIN)/kbld
export SYFT := $(BIN)/syft
export COSIGN := $(BIN)/cosign
export KUSTOMIZE := $(BIN)/kustomize
export ACTIONLINT := $(BIN)/actionlint
export ACT := $(BIN)/act
export JETSTREAM_PEER := $(BIN)/jetstream-peer
# gitlab-ci-local (npm), outside the clone; the pipelines tests run it.
SLIPWAY_NPM_CACHE ?= $(HOME)/.cache/slipway-npm
GITLAB_CI_LOCAL_VERSION := 4.75.1
export GITLAB_CI_LOCAL := $(SLIPWAY_NPM_CACHE)/node_modules/gitlab-ci-local/dist/index.js

.PHONY: all build release release-cache pin-argocd pin-deploy docs tools kube-bins gitlab-ci-local deps test test-short test-tekton test-argocd demo demo-kube skew bench lint fuzz clean

all: build

build: $(BIN)/slipway-runner
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/slipway ./cmd/slipway
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/slipway-cmp ./cmd/slipway-cmp

# The runner artifact: static (no cgo), it runs inside every sandbox.
.PHONY: $(BIN)/slipway-runner
$(BIN)/slipway-runner:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/slipway-runner

# Peer and lint tools, pinned in tools/go.mod, built once into bin/.
# The CLI reference, one page per command, from the command tree; a test fails when docs/cli is stale.
docs:
	$(GO) run ./cmd/slipway/gendocs -dir docs/cli

tools: $(BIN)/crane $(BIN)/kbld $(BIN)/staticcheck $(BIN)/syft $(BIN)/cosign $(BIN)/kustomize $(BIN)/actionlint $(BIN)/act $(BIN)/jetstream-peer
$(BIN)/crane $(BIN)/staticcheck: tools/go.mod tools/go.sum
	cd tools && $(GO) build -o $(BIN)/ github.com/google/go-containerregistry/cmd/crane honnef.co/go/tools/cmd/staticcheck
# B1's peer at equal concurrency: kbld resolves tags to digests (carvel.dev/kbld v0.46.0).
$(BIN)/kbld: tools/go.mod tools/go.sum
	cd tools && $(GO) build -o $(BIN)/ carvel.dev/kbld/cmd/kbld
$(BIN)/syft: tools/go.mod tools/go.sum
	cd tools && $(GO) build -ldflags '-X main.version=v1.57.1' -o $(BIN)/ github.com/anchore/syft/cmd/syft
$(BIN)/cosign: tools/go.mod tools/go.sum
	cd tools && $(GO) build -ldflags '-X sigs.k8s.io/release-utils/version.gitVersion=v2.6.5' -o $(BIN)/ github.com/sigstore/cosign/v2/cmd/cosign
$(BIN)/kustomize: tools/go.mod tools/go.sum
	cd tools && $(GO) build -o $(BIN)/ sigs.k8s.io/kustomize/kustomize/v5
# Checks the sample GitHub workflows and the local actions they use (pipelines/).
$(BIN)/actionlint: tools/go.mod tools/go.sum
	cd tools && $(GO) build -o $(BIN)/ github.com/rhysd/actionlint/cmd/actionlint
# Runs the sample GitHub workflow end to end on the host (nektos/act v0.2.89,
# -P ubuntu-latest=-self-hosted: no Docker), in the pipelines tests.
$(BIN)/act: tools/go.mod tools/go.sum
	cd tools && $(GO) build -o $(BIN)/ github.com/nektos/act

# B9a's peer: the same events through an embedded NATS JetStream, in a module
# of its own (bench/jetstream) so that nats-server never enters go.mod.
$(BIN)/jetstream-peer: bench/jetstream/go.mod bench/jetstream/go.sum bench/jetstream/main.go
	cd bench/jetstream && $(GO) build -o $@ .

# The real Kubernetes parts the tests run (testharness/kubetest): kube-apiserver,
# kubelet, kube-scheduler, kube-proxy and kube-controller-manager v1.37.2 and
# agent-sandbox's controller v0.5.6, built from the Go
# module proxy, and the pod sandbox's pause binary (gcc -static), once into $SLIPWAY_KUBE_CACHE (default ~/.cache/slipway-kube),
# outside the clone; a binary already there is not built again.
kube-bins:
	GO=$(GO) ./tools/kube-bins.sh

# gitlab-ci-local from npm, at a pinned version, into $SLIPWAY_NPM_CACHE (outside
# the clone). The pipelines tests validate the GitLab component against the
# CI schema it embeds and run the example pipeline with it; they skip when it
# is missing. Needs node and npm; installed once.
gitlab-ci-local: $(GITLAB_CI_LOCAL)
$(GITLAB_CI_LOCAL):
	npm install --prefix $(SLIPWAY_NPM_CACHE) --no-audit --no-fund --ignore-scripts gitlab-ci-local@$(GITLAB_CI_LOCAL_VERSION)

# Installs the Debian packages that are missing (needs root and apt-get).
deps:
	@missing=""; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v docker-registry >/dev/null || missing="$$missing docker-registry"; \
	command -v etcd >/dev/null || missing="$$missing etcd-server"; \
	command -v containerd >/dev/null || missing="$$missing containerd"; \
	command -v runc >/dev/null || missing="$$missing runc"; \
	test -x /usr/lib/cni/bridge || missing="$$missing containernetworking-plugins"; \
	command -v gcc >/dev/null || missing="$$missing gcc libc6-dev"; \
	command -v git >/dev/null || missing="$$missing git"; \
	command -v rsync >/dev/null || missing="$$missing rsync"; \
	command -v chattr >/dev/null || missing="$$missing e2fsprogs"; \
	test -x /bin/busybox || missing="$$missing busybox-static"; \
	test -x /usr/lib/postgresql/15/bin/initdb || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

# The sign interop tests run the cosign CLI ($COSIGN), the pipelines tests
# actionlint ($ACTIONLINT), act ($ACT) and gitlab-ci-local ($GITLAB_CI_LOCAL, make
# gitlab-ci-local) with slipway ($SLIPWAY_BIN). A package's tests may
# take TEST_TIMEOUT (go test's default, 10m, is too short for a busy machine
# under -race).
TEST_TIMEOUT ?= 25m
test: deps build $(BIN)/cosign $(BIN)/actionlint $(BIN)/act
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(MAKE) test-tekton
	$(MAKE) test-argocd

# The hermetic fast tier: every test that runs in-process (real servers started
# in the test: registries, git over HTTP, sandboxes under bubblewrap), without
# -race; what needs a real server that cannot start in-process (PostgreSQL, a
# Kubernetes node, Debian's docker-registry, act and gitlab-ci-local runs, the
# cosign CLI) and soak or crash tests are left out by -short; actionlint and
# gitlab-ci-local (checks, no servers) are built or installed once. Warm, it
# took 651 s on 2 cores at load 13-20 from other builds (the aim is under 5
# minutes); SHORT_FLAGS adds go test flags (-json).
test-short: build $(BIN)/actionlint $(GITLAB_CI_LOCAL)
	$(GO) test -short -count=1 -timeout $(TEST_TIMEOUT) $(SHORT_FLAGS) ./...

# The Tekton Tasks and Pipeline (pipelines/tekton), checked with Tekton's own
# Go types and substitution code in a module of their own
# (pipelines/tekton/validate: tektoncd/pipeline v1.15.0 never enters the root
# go.mod), and the Tasks and the release Pipeline run on the host with
# bin/slipway (pipelines/testdata/release-chain.sh).
# Cold, its dependencies take about 11 minutes to build on 2 busy cores.
test-tekton: deps build
	cd pipelines/tekton/validate && $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

# Slipway's Argo CD plugins (integrations/argocd) run by Argo CD's own CMP
# server and clients, in a module of their own (argo-cd v2.14.21 and its
# Kubernetes v0.31 pins never enter the root go.mod), with bin/slipway on
# PATH and the sidecar component built by bin/kustomize. Its modules are
# downloaded once (go mod download, a no-op when cached) into the Go module
# cache and its build kept in Go's build cache, both outside the clone: cold,
# compiling its test binary took about 16 minutes on 2 cores shared with
# other builds (load 10-22); warm, the whole run takes about 15 seconds.
test-argocd: deps build $(BIN)/kustomize
	cd integrations/argocd && $(GO) mod download && $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

demo: deps build
	CONSOLE=$(CONSOLE) $(GO) run ./examples/demo

# Version skew, one version in each direction: make demo's flow with the
# previous version's runtime and runner under this control plane, then the
# previous control plane in front of this runtime (tools/skew.sh; the
# previous version is tools/previous-version's commit, built once into
# ~/.cache/slipway/skew).
skew: deps build
	bash tools/skew.sh

# Slipway's own release, built by Slipway (slipway release, pkg/release/selfrelease):
# binaries for linux/amd64 and linux/arm64, checksums.txt and its signature, SBOMs,
# SLSA provenance, a verification policy and image indexes (OCI layout in
# $(RELEASE_OUT)/oci), from a clean tree whose HEAD is tagged VERSION:
#   COSIGN_PASSWORD=... make release VERSION=v0.5.0 SIGN_KEY=release.key [PUSH=ghcr.io/slipway-dev]
#   make release SNAPSHOT=1 [PLATFORMS=linux/amd64]    # any tree, v0.0.0-<commit12>[-dirty], unsigned without SIGN_KEY
# The releasing slipway is built from the same tree first; $(RELEASE_OUT) must be empty or absent.
RELEASE_OUT ?= dist
release:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/slipway ./cmd/slipway
	$(BIN)/slipway release --out $(RELEASE_OUT) $(if $(SNAPSHOT),--snapshot,$(if $(VERSION),--version $(VERSION))) \
		$(if $(SIGN_KEY),--sign-key $(SIGN_KEY) --offline-no-tlog) $(if $(PUSH),--push $(PUSH)) $(if $(PLATFORMS),--platform $(PLATFORMS))

# The Argo CD component pinned to a pushed release: after
#   make release VERSION=vX.Y.Z SIGN_KEY=... PUSH=REGISTRY
# points integrations/argocd's images entry at REGISTRY/slipway-cmp:VERSION
# and writes its digest with slipway pin --write --refresh, then lints the
# folder (tools/pin-release.sh). REGISTRY defaults to where
# releases are published.
pin-argocd:
	@test -n "$(VERSION)" || { echo "pin-argocd: give VERSION=vX.Y.Z (the tag of the pushed release)"; exit 2; }
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/slipway ./cmd/slipway
	SLIPWAY=$(BIN)/slipway sh tools/pin-release.sh integrations/argocd $(or $(PUSH),$(REGISTRY),ghcr.io/slipway-dev) $(VERSION)

# The install (deploy/, both overlays) pinned to a pushed release, the same
# way: deploy/base's images entry "slipway" is pointed at
# REGISTRY/slipway:VERSION and slipway pin --write --refresh writes the
# digest of that index (tools/pin-release.sh ... slipway).
pin-deploy:
	@test -n "$(VERSION)" || { echo "pin-deploy: give VERSION=vX.Y.Z (the tag of the pushed release)"; exit 2; }
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/slipway ./cmd/slipway
	SLIPWAY=$(BIN)/slipway sh tools/pin-release.sh deploy/base $(or $(PUSH),$(REGISTRY),ghcr.io/slipway-dev) $(VERSION) slipway

# The release's cross builds (the flags and environment of
# pkg/release/selfrelease's build) compiled once into Go's build cache, so
# that the release tests and B17 link rather than compile: cold on 2 shared
# cores about 12 minutes for linux/arm64, warm a few seconds.
release-cache:
	for arch in amd64 arm64; do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch GOAMD64=v1 GOARM64=v8.0 GOEXPERIMENT= GOFLAGS=-mod=readonly \
			$(GO) build -trimpath -buildvcs=false ./cmd/slipway ./cmd/slipway-cmp ./cmd/slipway-runner || exit 1; \
	done

# The Kubernetes part of the demo (examples/demo -kubernetes, walked through
# for a cluster of your own in examples/kubernetes/): a real single-node
# cluster on this machine with agent-sandbox's controller, the pool rendered,
# applied, claimed from and rolled out; then a job through a control plane in
# front of it (job trace with the runtime's and runner's spans), a leaked claim
# cleaned (cleanup list) and cost from the cluster's timestamps. It needs the
# binaries of make kube-bins and root on Linux; without them it says so and
# exits 0.
demo-kube: deps build
	$(GO) run ./examples/demo -kubernetes

# Each benchmark with a target appends its row to $BENCH_OUT (testharness/benchtable);
# the run ends by printing them as one table, even when a benchmark failed.
bench: deps build tools
	@out=$$(mktemp /tmp/slipway-bench.XXXXXX); export BENCH_OUT=$$out; rc=0; \
	$(GO) test -p 1 -run '^$$' -bench . -benchtime 1x -timeout 30m ./... || rc=1; \
	(cd integrations/argocd && $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./...) || rc=1; \
	$(GO) run ./testharness/benchtable/print $$out || rc=1; \
	rm -f $$out; exit $$rc

lint: $(BIN)/staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(BIN)/staticcheck ./...

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./pkg/ref
	$(GO) test -run '^$$' -fuzz FuzzFind -fuzztime $(FUZZTIME) ./pkg/release/pin
	$(GO) test -run '^$$' -fuzz FuzzLoadConfig -fuzztime $(FUZZTIME) ./pkg/release/pin
	$(GO) test -run '^$$' -fuzz FuzzExtract -fuzztime $(FUZZTIME) -fuzzminimizetime 1x ./pkg/rootfs
	$(GO) test -run '^$$' -fuzz FuzzScanContent -fuzztime $(FUZZTIME) ./pkg/release/scan
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./pkg/release/template
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) -fuzzminimizetime 1x ./pkg/config/generation

clean:
	rm -rf $(BIN)
