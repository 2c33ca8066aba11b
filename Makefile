# kube-retention — `make demo` shows it working, `make test` proves it.
# Everything the targets need is built from this checkout: the Kubernetes control plane from the Go
# modules pinned in tests/cluster/kubernetes (one 1.NN.mod per minor), kube-retention with cargo.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
CARGO ?= cargo
STATE ?= .local
# The Kubernetes minor of `make up`, `make up-node`, `make test` and the benchmarks: the newest
# pinned in tests/cluster/kubernetes unless given (`make up KUBERNETES=1.33`). Exported, so the
# Rust side (tests/src/layout.rs) runs the same minor's binaries.
KUBERNETES ?= $(shell tests/cluster/kubernetes/minors.sh | tail -n 1)
export KUBERNETES
# The oldest pinned minor, whose control plane `make e2e-oldest` builds to run the suite's core.
OLDEST_KUBERNETES := $(shell tests/cluster/kubernetes/minors.sh | head -n 1)
MUSL := x86_64-unknown-linux-musl
ARM64 := aarch64-unknown-linux-musl
# A release's version: the workspace's, which `make release` also requires of VERSION.
VERSION ?= $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
REVISION := $(shell git rev-parse HEAD 2>/dev/null)
DIST ?= dist
HELM := tests/cluster/bin/helm
IMAGE ?= target/image/kube-retention.oci.tar
FAULTS_IMAGE ?= target/image/kube-retention-faults.oci.tar
# The image's static binaries. ring's C is compiled with the system cc: no musl cross compiler is
# needed for static linking.
MUSL_CARGO = rustup target list --installed | grep -qx $(MUSL) || rustup target add $(MUSL); \
	CC_x86_64_unknown_linux_musl=cc $(CARGO)
MUSL_BUILD = $(MUSL_CARGO) build --release --target $(MUSL)
# The same for linux/arm64, cross-compiled: ring's C and the link with Debian's aarch64 gcc
# (`make release-packages`).
ARM64_BUILD = rustup target list --installed | grep -qx $(ARM64) || rustup target add $(ARM64); \
	CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc \
	CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc \
	$(CARGO) build --release --target $(ARM64)
# The four binaries the image and the plugin archives ship.
SHIPPED_BINARIES := --package kube-retention-controller --package kube-retention-webhook \
	--package kube-retention-certs --package kube-retention-plugin \
	--bin kube-retention-controller --bin kube-retention-webhook \
	--bin kube-retention-certs --bin kubectl-retention
LOCAL_CLUSTER = $(CARGO) run --quiet --package kube-retention-e2e --bin local-cluster -- --state $(STATE)

.PHONY: book book-check book-tools test-matrix e2e-core e2e-oldest cluster-binaries-oldest release release-packages release-test help toolchain drop-go-caches cluster-binaries node-packages build up up-node down status demo test test-shipped image-faults fmt-check clippy doc-check unit peer-test e2e chaos crds admission-policy writer-policy-long monitoring monitoring-check image image-test bench-webhook bench-memcpy bench-controller bench-peers bench-cel fuzz-cel fuzz-cel-short fuzz-cel-process bench-cel-stack bench-baseline fuzz-webhook fuzz-webhook-short

help:
	@echo "make demo    start the local cluster and walk through what kube-retention does"
	@echo "make test    formatting, clippy, unit and end-to-end tests (chaos suite's short form included),"
	@echo "             and the as-shipped suite on a real node (root; make test-shipped alone)"
	@echo "make test-matrix  every pinned Kubernetes minor's e2e suite (and as shipped on the oldest"
	@echo "             and the newest); writes docs/compatibility.md"
	@echo "make book   the book (docs/) into target/book/html, its generated reference rewritten"
	@echo "make chaos   the chaos suite and fuzzing at full size; writes docs/reliability.md"
	@echo "make writer-policy-long  the API server's writer policy against the webhook's writer check,"
	@echo "             on 20,000 generated writes (WRITER_POLICY_CASES)"
	@echo "make fuzz-cel  a million hostile CEL expressions, each held to its time, memory and cost bounds"
	@echo "make fuzz-cel-process  ten million through the controller's evaluator process, against in process"
	@echo "make fuzz-webhook  100,000 generated requests, slow bodies, connections and HTTP/2 floods"
	@echo "             against the webhook binary: no crash, no limit passed, no wrong verdict"
	@echo "make up      start the local cluster ($(STATE)/kubeconfig); make down stops it"
	@echo "make up-node the local cluster with a node running the image and the chart, as shipped"
	@echo "             KUBERNETES=1.33 runs either (and make test) at another pinned minor: $$(tests/cluster/kubernetes/minors.sh | tr '\n' ' ')"
	@echo "make image   an OCI image of the static binaries, no container engine needed ($(IMAGE))"
	@echo "make release VERSION=x.y.z  the release's files in $(DIST)/: image index (amd64, arm64),"
	@echo "             chart, plugin archives and krew manifest, SBOM, SHA256SUMS (docs/releasing.md)"
	@echo "make bench-peers  kube-retention against Kyverno's cleanup controller, built from its module;"
	@echo "             writes docs/benchmarks/peers.md"
	@echo "make crds    regenerate deploy/crds and the chart's crds/ from the Rust types in common/"
	@echo "make admission-policy  regenerate the writer check's ValidatingAdmissionPolicy (deploy/admission"
	@echo "             and the chart's files/) from the model in common/"
	@echo "make monitoring  write deploy/monitoring's PrometheusRule and the chart's copies from the rule file"

# rustfmt and clippy come with rustup's default profile; add them where a minimal profile left them out.
toolchain:
	@$(CARGO) fmt --version >/dev/null 2>&1 || rustup component add rustfmt
	@$(CARGO) clippy --version >/dev/null 2>&1 || rustup component add clippy
	@command -v go >/dev/null || { echo "Go is needed to build the local cluster (tests/cluster)"; exit 1; }

cluster-binaries: toolchain
	@tests/cluster/build.sh $(KUBERNETES)

build: toolchain
	$(CARGO) build --workspace --bins --examples

up: cluster-binaries build
	@$(LOCAL_CLUSTER) up

# The node's container runtime, CNI plugins and iptables, from Debian's packages (as root).
node-packages:
	@tests/cluster/node-packages.sh

# A cluster with one node (containerd, kubelet, kube-proxy) running `make image`'s image through
# the chart: kube-retention as a cluster admin runs it.
up-node: cluster-binaries node-packages build image
	@$(LOCAL_CLUSTER) up --node --image $(IMAGE)

down:
	@$(LOCAL_CLUSTER) down

status:
	@$(LOCAL_CLUSTER) status

demo: up
	@scripts/demo.sh $(STATE)/kubeconfig

# image-faults before image-test's image, so the shipped binaries are built last, once; the CEL
# campaign's short form after them, reusing their dependencies.
# DROP_GO_CACHES=1 (.ci/run sets it) drops Go's caches once the last Go build is done.
# What a fresh clone's run costs on two cores, and why the oldest minor's e2e core
# (`make e2e-oldest`) and the Go peer's tests (`make peer-test`, run by `make bench-webhook`) are
# no longer in it: docs/how-to/development.md#what-make-test-costs.
test: fmt-check clippy doc-check unit book-check monitoring-check $(if $(DROP_GO_CACHES),drop-go-caches) e2e image-faults image-test fuzz-cel-short fuzz-webhook-short release-test test-shipped

# Go's build and module caches hold about 7 GB once Kubernetes is built, and serve only rebuilds,
# which a fresh clone's CI run never makes: dropped, they leave the release builds after them the
# room a CI machine may not have.
drop-go-caches:
	go clean -cache -modcache

# The retention.dev CRDs from the Rust types; `make unit` fails while the checked-in file is stale.
crds: toolchain
	$(CARGO) run --quiet --package kube-retention-controller --bin kube-retention-crdgen \
		| tee deploy/crds/retention.dev.yaml > charts/kube-retention/crds/retention.dev.yaml

# The writer check's ValidatingAdmissionPolicy from the model (common/src/writer_policy.rs): deploy/'s
# objects and the chart's copy of the policy's spec; `make unit` fails while either is stale.
admission-policy: toolchain
	$(CARGO) run --quiet --package kube-retention-controller --bin kube-retention-admission-policy \
		-- deploy > deploy/admission/writers.yaml
	$(CARGO) run --quiet --package kube-retention-controller --bin kube-retention-admission-policy \
		-- chart > charts/kube-retention/files/writers-policy.yaml

# deploy/monitoring/kube-retention.rules.yaml is the source; `make unit` fails while these are stale.
monitoring:
	@scripts/monitoring.sh

# The alerts, checked and unit-tested by the real promtool (built with the cluster binaries).
monitoring-check: cluster-binaries
	tests/cluster/bin/promtool check rules deploy/monitoring/kube-retention.rules.yaml
	cd deploy/monitoring && ../../tests/cluster/bin/promtool test rules kube-retention.rules.test.yaml

fmt-check: toolchain
	$(CARGO) fmt --all -- --check

clippy: toolchain
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings

# The API docs, broken intra-doc links included, build without a warning.
doc-check: toolchain
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --quiet

# The book (docs/, mdBook): its generated reference (the CRDs from the Rust types, the flags from
# each binary's --help) written, then the book built into target/book/html with every link checked.
CARGO_BIN := $(or $(CARGO_HOME),$(HOME)/.cargo)/bin
BOOK_REFERENCE = $(CARGO) run --quiet --package kube-retention-book -- --bin-dir target/debug
book: build book-tools
	$(BOOK_REFERENCE)
	PATH="$(CARGO_BIN):$$PATH" mdbook build docs

# What `make test` checks of the book: the generated reference current, every link resolving.
book-check: build book-tools
	$(BOOK_REFERENCE) --check
	PATH="$(CARGO_BIN):$$PATH" mdbook build docs

book-tools:
	@scripts/book-tools.sh

# kube-retention-memcpy's tests also run where its memcpy is linked in: the static musl target.
unit: toolchain
	$(CARGO) test --workspace
	$(MUSL_CARGO) test --target $(MUSL) --package kube-retention-memcpy

# The Go webhook peer the benchmarks measure against: vetted, and its own tests pass.
peer-test: toolchain
	cd bench/webhook-peer && go vet ./... && go test ./...

# An OCI image (an OCI layout in one tar archive) of the static musl binaries, built without a
# container engine: `skopeo copy oci-archive:$(IMAGE) docker://...` or `crane push $(IMAGE) ...`.
image: toolchain
	$(MUSL_BUILD) $(SHIPPED_BINARIES)
	@mkdir -p $(dir $(IMAGE))
	$(CARGO) run --quiet --package kube-retention-image -- --out $(IMAGE) \
		$(addprefix target/$(MUSL)/release/,kube-retention-controller kube-retention-webhook kube-retention-certs kubectl-retention)

# The image again with the fault-injection feature (KUBE_RETENTION_FAULT ends a named background
# task), tagged `faults`: only for the as-shipped suite's supervision test, never shipped. Built
# before `image` wherever both are, so the release folder ends with the shipped binaries.
image-faults: toolchain
	$(MUSL_BUILD) --package kube-retention-controller --package kube-retention-webhook \
		--package kube-retention-certs --package kube-retention-plugin \
		--features kube-retention-controller/fault-injection,kube-retention-webhook/fault-injection \
		--bin kube-retention-controller --bin kube-retention-webhook \
		--bin kube-retention-certs --bin kubectl-retention
	@mkdir -p target/image/faults
	cp $(addprefix target/$(MUSL)/release/,kube-retention-controller kube-retention-webhook kube-retention-certs kubectl-retention) target/image/faults/
	$(CARGO) run --quiet --package kube-retention-image -- --out $(FAULTS_IMAGE) --tag faults \
		$(addprefix target/image/faults/,kube-retention-controller kube-retention-webhook kube-retention-certs kubectl-retention)

# A release in $(DIST)/ (docs/releasing.md): the image index of linux/amd64 and linux/arm64, the
# chart packaged with appVersion = VERSION, the plugin's archives and krew manifest, the SBOM and
# SHA256SUMS. VERSION must be the workspace's; nothing is pushed.
release: toolchain release-packages cluster-binaries image
	$(ARM64_BUILD) $(SHIPPED_BINARIES)
	rm -rf $(DIST) && mkdir -p $(DIST)
	$(HELM) package charts/kube-retention --version $(VERSION) --app-version $(VERSION) \
		--destination $(DIST)
	$(CARGO) run --quiet --package kube-retention-release -- --release-version $(VERSION) \
		$(if $(REVISION),--revision $(REVISION)) --dist $(DIST) \
		--amd64 target/$(MUSL)/release --arm64 target/$(ARM64)/release

# The cross compiler for arm64 and qemu-user to run what it built, from Debian's packages.
release-packages:
	@scripts/debian-packages.sh "make release" gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user

# The release read back: the image index's two platforms (each binary static and running, arm64's
# under qemu-user), SHA256SUMS, the chart, the plugin archives and krew manifest, the SBOM.
release-test: release
	KUBE_RETENTION_IMAGE=$(CURDIR)/$(DIST)/kube-retention-$(VERSION).oci.tar \
	KUBE_RETENTION_PLATFORMS=amd64,arm64 \
		$(CARGO) test --package kube-retention-image --test built_image -- --ignored
	KUBE_RETENTION_DIST=$(CURDIR)/$(DIST) \
		$(CARGO) test --package kube-retention-release --test dist -- --ignored

# The image's manifest and config, and each binary in its layer static and running.
image-test: image
	KUBE_RETENTION_IMAGE=$(CURDIR)/$(IMAGE) $(CARGO) test --package kube-retention-image --test built_image -- --ignored

# Hostile CEL (common/tests/cel_fuzz.rs): generated expressions over every function offered, on
# objects up to 1.5 MiB, each held to its memory and cost bounds, and in this release build to
# its time bound. `make unit` runs 300 cases in a debug build (no time bound there); this runs a
# million, at about 150 a second on two cores. FUZZ_CEL_SEED picks other cases.
FUZZ_CEL_CASES ?= 1000000
fuzz-cel: toolchain
	FUZZ_CEL_CASES=$(FUZZ_CEL_CASES) $(CARGO) test --release --package kube-retention-common \
		--test cel_fuzz -- --nocapture

# The campaigns' counts are exported: $(MUSL_CARGO) is two commands, and an assignment before it
# would reach only the first.
# The campaign's short form, in `make test`: a release build, so that every case is held to its
# time bound too (a debug build is ten times slower and `make unit` holds it to the rest). Built
# for the image's target after the image, whose release build compiled every dependency it
# needs, and with musl's allocator, as the controller ships.
fuzz-cel-short: toolchain
	export FUZZ_CEL_CASES=3000; $(MUSL_CARGO) test --release --target $(MUSL) \
		--package kube-retention-common --test cel_fuzz -- --nocapture
	export CEL_CAMPAIGN_CASES=20000; $(MUSL_CARGO) test --release --target $(MUSL) \
		--package kube-retention-evaluator --test cel_campaign -- --nocapture

# The campaign through the controller's evaluator process (evaluator/tests/cel_campaign.rs):
# generated hostile expressions, issue 57's families among them, each evaluated in the process
# the operating system bounds and, where it answered, again in process to compare. Ten million
# by default; `make test` runs 20,000. CEL_CAMPAIGN_SEED picks other cases.
CEL_CAMPAIGN_CASES ?= 10000000
fuzz-cel-process: toolchain
	export CEL_CAMPAIGN_CASES=$(CEL_CAMPAIGN_CASES); $(MUSL_CARGO) test --release --target $(MUSL) \
		--package kube-retention-evaluator --test cel_campaign -- --nocapture

# The campaign against the webhook's port (webhook/tests/testsuite/campaign): the release binary
# on 127.0.0.1 sent generated bodies over HTTP/1.1 and HTTP/2, each answered as its own handler
# answers it in process; slow bodies held while bad policies are denied; 9,000 connections;
# HTTP/2 floods; its peak RSS under the chart's 128 MiB throughout. Each of issue 57's
# reproductions is a test of it. The short form (2,000 requests, about two minutes) is in
# `make test`, built like fuzz-cel-short for the image's target with musl's allocator replaced
# as the image replaces it; one test at a time, as each measures the process it starts.
WEBHOOK_CAMPAIGN = $(MUSL_CARGO) test --release --target $(MUSL) --package kube-retention-webhook \
	--test testsuite -- campaign:: --ignored --nocapture --test-threads 1
fuzz-webhook: toolchain
	export WEBHOOK_CAMPAIGN_REQUESTS=100000; $(WEBHOOK_CAMPAIGN)

fuzz-webhook-short: toolchain
	export WEBHOOK_CAMPAIGN_REQUESTS=2000; $(WEBHOOK_CAMPAIGN)

# The stack CEL's deepest admitted expressions use, in a debug and a release build, printed
# (common/src/cel/stack.rs says what it bounds).
bench-cel-stack: toolchain
	$(CARGO) test --package kube-retention-common --test cel_stack -- --nocapture --test-threads 1
	$(CARGO) test --release --package kube-retention-common --test cel_stack -- --nocapture --test-threads 1

# The end-to-end suite includes the chaos suite's short form.
E2E_SUITE = $(CARGO) test --package kube-retention-e2e --features e2e --test e2e
e2e: cluster-binaries build
	$(E2E_SUITE)

# The writer policy against the webhook's writer check on the real API server, on
# WRITER_POLICY_CASES generated writes (`make e2e` runs 300); KUBE_RETENTION_WRITER_SEED replays
# a run's.
WRITER_POLICY_CASES ?= 20000
writer-policy-long: cluster-binaries build
	KUBE_RETENTION_WRITER_CASES=$(WRITER_POLICY_CASES) $(E2E_SUITE) -- --nocapture \
		the_writer_policy_judges_generated_writes

# The suite's core (tests/tests/e2e/main.rs says what it holds), at KUBERNETES.
e2e-core: cluster-binaries build
	KUBE_RETENTION_E2E=core $(E2E_SUITE)

# The oldest pinned minor's control plane, built, and the suite's core on it (no longer in
# `make test`: docs/how-to/development.md#what-make-test-costs).
cluster-binaries-oldest: toolchain
	@tests/cluster/build.sh --control-plane $(OLDEST_KUBERNETES)

e2e-oldest: cluster-binaries-oldest build
	KUBERNETES=$(OLDEST_KUBERNETES) KUBE_RETENTION_E2E=core $(E2E_SUITE)

# Every pinned minor: its build, what its API server enables, the whole e2e suite, and the
# as-shipped suite on the oldest and the newest; writes docs/compatibility.md. Several hours
# cold on two cores. MATRIX_ARGS='--minors 1.33,1.37' runs some (the others' rows are kept).
test-matrix: toolchain build
	$(CARGO) run --quiet --package kube-retention-e2e --bin test-matrix -- $(MATRIX_ARGS)

# The as-shipped suite: a private cluster with a node (containerd, kubelet, kube-proxy) running
# the release pulled from its registry through the OCI chart, and tests against the chart's pods
# only. Needs root (the node's network namespace, cgroups and mounts) and the node's packages.
test-shipped: cluster-binaries node-packages build image-faults release
	KUBE_RETENTION_IMAGE=$(CURDIR)/$(DIST)/kube-retention-$(VERSION).oci.tar \
	KUBE_RETENTION_CHART=$(CURDIR)/$(DIST)/kube-retention-$(VERSION).tgz \
	KUBE_RETENTION_DIST=$(CURDIR)/$(DIST) \
	KUBE_RETENTION_FAULTS_IMAGE=$(CURDIR)/$(FAULTS_IMAGE) \
		$(CARGO) test --package kube-retention-e2e --features shipped --test shipped

# The long forms: a million generated inputs for the webhook's handler and the model, then the
# chaos scenarios at full size (10,000 Jobs SIGKILLed under, 1,000 re-creations, ...), which write
# docs/reliability.md. About half an hour on two cores.
# `make chaos CHAOS_FILTER=chaos_a_hostile` runs one scenario (no fuzzing) and rewrites its part of
# docs/reliability.md. The figures are of what ships: the scenarios run the image's static release
# controller and webhook, as the benchmarks do (the short forms in `make test` run the debug build).
CHAOS_FILTER ?= chaos_
chaos: cluster-binaries build
ifeq ($(CHAOS_FILTER),chaos_)
	PROPTEST_CASES=1000000 $(CARGO) test --release --package kube-retention-webhook --test testsuite -- properties::
endif
	$(SHIPPED)
	$(BENCH) KUBE_RETENTION_CHAOS=long $(E2E_SUITE) -- $(CHAOS_FILTER)

# Benchmarks write their results into docs/benchmarks/, a page per area. bench-controller takes about ten
# minutes; `make bench-controller BENCH_ARGS=--full` is the long form (about an hour);
# `BENCH_ARGS='--only ledger'` measures the deletion ledger's cost (its own section);
# `BENCH_ARGS='--only ceiling'` kube-retention against a deleter with no logic, in rounds, and
# `BENCH_ARGS='--huge --huge-jobs N'` N Jobs (a million by default) and cold starts among them:
# the Envelope sections.
# The benchmarks measure what the image ships: the static musl webhook and controller, as the
# local cluster's components and as the contenders. The benchmarks themselves are built as usual.
SHIPPED = $(MUSL_BUILD) --package kube-retention-controller --package kube-retention-webhook \
	--bin kube-retention-controller --bin kube-retention-webhook
BENCH = KUBE_RETENTION_PROFILE=$(MUSL)/release

bench-webhook: cluster-binaries peer-test
	bench/webhook-peer/build.sh
	$(SHIPPED)
	$(CARGO) build --release --package kube-retention-bench
	$(BENCH) target/release/webhook-bench $(BENCH_ARGS)

# What CEL costs: the model's estimate, the units an evaluation spends, nanoseconds per unit.
# The memcpy/ crate's worth: the shipped static webhook against the same build without it.
MEMCPY_BENCH = target/bench-memcpy
bench-memcpy: cluster-binaries
	$(MUSL_BUILD) --package kube-retention-webhook --bin kube-retention-webhook --no-default-features
	mkdir -p $(MEMCPY_BENCH)
	cp target/$(MUSL)/release/kube-retention-webhook $(MEMCPY_BENCH)/kube-retention-webhook-musl-memcpy
	$(SHIPPED)
	$(CARGO) build --release --package kube-retention-bench
	$(BENCH) target/release/webhook-bench --only memcpy \
		--without-memcpy $(MEMCPY_BENCH)/kube-retention-webhook-musl-memcpy $(BENCH_ARGS)

bench-cel:
	$(CARGO) build --release --package kube-retention-bench --bin cel-bench \
		--package kube-retention-controller --bin kube-retention-controller
	target/release/cel-bench

# BASELINE=<commit> (b59abb3, the last before the CEL sandbox, by default) builds that commit's
# static controller in a worktree under target/baseline/, for the parts that measure against it
# in the same run (the one-label policy's); BASELINE= runs without one.
BASELINE ?= b59abb3
BASELINE_DIR = target/baseline/$(BASELINE)
bench-controller: cluster-binaries $(if $(BASELINE),bench-baseline)
	$(SHIPPED)
	$(CARGO) build --release --package kube-retention-bench
	$(BENCH) KUBE_RETENTION_AUDIT_POLICY=$(CURDIR)/bench/audit-policy.yaml \
		$(if $(BASELINE),KUBE_RETENTION_BASELINE=$(CURDIR)/$(BASELINE_DIR)/target/$(MUSL)/release \
		KUBE_RETENTION_BASELINE_REVISION=$(BASELINE)) \
		target/release/controller-bench $(BENCH_ARGS)

# The baseline's static controller, built once per commit in a worktree of its own.
bench-baseline: toolchain
	@test -d $(BASELINE_DIR) || git worktree add --detach $(BASELINE_DIR) $(BASELINE)
	cd $(BASELINE_DIR) && $(MUSL_BUILD) --package kube-retention-controller --bin kube-retention-controller

# kube-retention against the cleanup tools admins install instead, each built from its own pinned
# module by bench/peers/build.sh (not part of make test): docs/benchmarks/peers.md. Sized for about
# fifteen minutes once built; BENCH_ARGS=--full is the long form.
bench-peers: cluster-binaries
	bench/peers/build.sh
	$(SHIPPED)
	$(CARGO) build --release --package kube-retention-bench
	$(BENCH) KUBE_RETENTION_AUDIT_POLICY=$(CURDIR)/bench/audit-policy.yaml \
		target/release/peers-bench $(BENCH_ARGS)
