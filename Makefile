# Makefile - build and test entry points of the Chronik workspace.
#
#   make test        THE test command (CI runs it via .ci/run): installs what it
#                    needs (apt packages if missing, .venv with pinned
#                    confluent-kafka + pytest), builds the release workspace once,
#                    then one smoke of every kind (TEST_STEPS below). Prints each
#                    step's time and the total, and warns past TEST_BUDGET_S (40 min).
#                    Under CI (or CHRONIK_SHARED_CACHE=1) target/, .tools/ and
#                    fuzz/target/ are links into ~/.cache/chronik (scripts/link-caches.sh),
#                    so a clean clone reuses what this machine built before.
#   make test-long   the long tier (TEST_LONG_STEPS): the whole client matrix, every
#                    overlay against the API server, the long fault schedule, fuzz
#                    campaigns and the cluster soak; figures in docs/tests.md
#   make build       the release binaries (scripts/build-release.sh: server, ingestor, consumer, bench)
#   make deps        only the install steps (idempotent)
#   make cargo-test  cargo test --release --workspace, its binaries LANES (2) at a time
#                    (scripts/test_lanes.py; the release artifacts `make build` made:
#                    one compilation of the workspace)
#   make lint        rustfmt --check and clippy -D warnings on the whole workspace (and fuzz/ formatting)
#                    and lint-shell: no inline Python in *.sh (scripts/lint-shell.sh); no import
#                    cycle in chronik-server (scripts/module_cycles.py); every file and module
#                    path ARCHITECTURE.md names exists (scripts/doc_names.py)
#   make pytest      Python client tests against target/release/chronik-server
#   make shellcheck  shellcheck (warnings and errors) on every tracked shell script
#   make load-test   the load generator (load/test.sh): builds chronik-loadgen, go vet + go test
#                    (open model, per-message answers, barrier, merge), every plan validated,
#                    load/run.sh against a fake ingestor on 127.0.0.1
#   make report-test the report library's tests and the notebook on fixture results
#   make e2e         one short real ./run-all.sh whose report must say zero loss
#   make fault-smoke ./run-all.sh --faults 'kill:leader@10s,restart@+12s' for 30 s (scripts/fault-smoke.sh):
#                    verified zero loss, the report's fault timeline with recovery figures (root; ~80 s)
#   make k8s-test    k8s-perf/ without a cluster: kustomize build of every overlay,
#                    kubeconform (k8s + CRD schemas; the load generators' Indexed Job), nameReference rewrite,
#                    manifests vs the binaries' --help, dashboards vs a live scrape
#                    (k8s-perf/tests/test.sh; installs kustomize/kubeconform/schemas)
#   make k8s-apiserver-test  k8s-perf against a real kube-apiserver (+ etcd, controller-manager,
#                    scheduler; kwok nodes): one overlay of each kind server-side (APISERVER_OVERLAYS;
#                    make k8s-apiserver-test-all: every overlay), PodSecurity enforced,
#                    ./run-all.sh --k8s --overlay small up to the boundary where pods would run
#                    (k8s-perf/tests/apiserver.sh; part of make test; builds the control plane
#                    once into .tools/kube, ~5-8 min cold, then ~1.5 min)
#   make images      the two container images with podman (scripts/build-images.sh: ordinary
#                    bases when a registry answers, else a local debootstrap Debian base and
#                    this host's release binaries)
#   make images-test the images run as the cluster overlay's pods (3 brokers, an ingestor, a
#                    consumer, each in its own network namespace) under chronik-loadgen, verified zero loss
#                    (k8s-perf/tests/run_images.py; needs root; part of make test, ~3 min cold)
#   make k8s-node    a real one-machine Kubernetes node (scripts/k8s-node.sh up): control plane,
#                    kubelet, containerd, runc, CNI bridge, kube-proxy, CoreDNS, local volumes,
#                    Prometheus in a pod; then ./run-all.sh --k8s --overlay small runs on it for real
#                    (~12 min cold: Go builds into .tools/k8s-node; make k8s-node-down stops it)
#   make k8s-node-test  on that node: ./run-all.sh --k8s --overlay small with a broker pod deleted
#                    mid-run, verified zero loss from the pods' ledgers and reports
#                    (k8s-perf/tests/node.sh; not part of make test: the build and run take ~20 min)
#   make k8s-grow-test  on that node: ./run-all.sh --k8s --overlay scale-out (3 controllers,
#                    3 brokers) while k8s-perf/grow-brokers.sh grows the brokers to 5 and
#                    moves the topic onto them with Kafka's tools; verified zero loss
#                    (k8s-perf/tests/grow.sh; not part of make test)
#   make compat-smoke  the client matrix's rows COMPAT_SMOKE_CLIENTS, then franz-go's own
#                    share-group tests against a fresh chronik (part of make test)
#   make compat      real-client compatibility matrix, every row (compat/run.sh: rdkafka, confluent-kafka,
#                    kafka-python, franz-go, Java client + perf tools, kcat)
#   make run         ./run-all.sh (release broker + confluent-kafka smoke round trip)
#   make bench       broker/bench/cpu-per-message.sh (chronik vs Apache Kafka CPU/msg)
#   make fuzz        every fuzz target for FUZZ_SECONDS (default 200 s each; scripts/fuzz.sh):
#                    libFuzzer on the stable toolchain, figures in fuzz/README.md
#   make fuzz-smoke  every fuzz target for 5 s (part of make test)
#   make fault-schedule the long randomized fault schedule (scripts/fault-schedule.sh; 600 s,
#                    FAULT_SECS=N to change): kill -9, SIGSTOP, netns partitions under load, then the checker
#   make cluster-soak the 3-node cluster tests 20 times in a row (scripts/repeat-cluster-tests.sh;
#                    RUNS=N to change), stopping at the first failure
#   make clean-run   ./cleanup.sh (stop what run-all/bench left running, remove .run/)
#
# Needs: Debian 12 with rustup's cargo, Python 3.9+, (bench:) Java 17 + Maven.
# Knobs: CARGO, PYTEST_ARGS (e.g. PYTEST_ARGS="-k restart"), CHRONIK_SERVER_BIN.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := test
# steps of `test` must run in order even under `make -j`
.NOTPARALLEL:

CARGO ?= cargo
VENV ?= .venv
PYTEST_ARGS ?=
CHRONIK_SERVER_BIN ?= $(CURDIR)/target/release/chronik-server
export CHRONIK_SERVER_BIN

# A clean CI checkout gains nothing from incremental compilation; local
# builds keep it.
ifdef CI
export CARGO_INCREMENTAL := 0
CHRONIK_SHARED_CACHE ?= 1
endif
CHRONIK_SHARED_CACHE ?= 0
# make test warns when its total passes this (s): CI's limit is 90 minutes on
# machines that differ 2-3x in speed, so a run here must stay well inside it.
TEST_BUDGET_S ?= 2400

.PHONY: fault-smoke kube-prefetch link-caches test-steps test-long compat-smoke k8s-apiserver-test-all images images-test k8s-apiserver-test k8s-node k8s-node-down k8s-node-test k8s-grow-test lint lint-shell fault-schedule fuzz fuzz-smoke cluster-soak test deps system-deps python-deps build cargo-test pytest compat shellcheck load-test report-test e2e k8s-test run bench clean-run

# Every step runs even if an earlier one failed, so one CI run reports every
# failure; the exit status is non-zero if any failed. Each step's wall time is
# printed (`make test: <step> took N s`), then the total, with a warning
# when it passes TEST_BUDGET_S.
TEST_STEPS = lint cargo-test pytest compat-smoke shellcheck load-test report-test \
	e2e fault-smoke k8s-test images-test k8s-apiserver-test fuzz-smoke
TEST_LONG_STEPS = compat k8s-apiserver-test-all fault-schedule fuzz cluster-soak
define run_steps
	@rc=0; times=""; all_started=$$(date +%s); \
	for step in $(1); do \
		started=$$(date +%s); \
		if ! $(MAKE) --no-print-directory $$step; then rc=1; echo "make $(2): $$step FAILED" >&2; fi; \
		took=$$(( $$(date +%s) - started )); times="$$times $$step=$${took}s"; \
		echo "make $(2): $$step took $$took s" >&2; \
	done; \
	total=$$(( $$(date +%s) - all_started )); \
	echo "make $(2): step times:$$times" >&2; \
	echo "make $(2): steps took $$total s in all" >&2; \
	if [ "$(2)" = test ] && [ $$total -gt $(TEST_BUDGET_S) ]; then \
		echo "make test: WARNING: $$total s passes the budget of $(TEST_BUDGET_S) s (CI stops at 5400 s on machines up to 2-3x slower): move a long check to make test-long" >&2; fi; \
	if [ $$rc -ne 0 ]; then echo "make $(2): FAILED (see the steps marked FAILED above)" >&2; fi; \
	exit $$rc
endef

# the installs and the build are timed steps too: the total is make test's.
# With the shared cache, a run that passed records the hash of cargo's inputs
# it was built from (scripts/link-caches.sh --stamp), taken before it began.
test:
	@hash=""; if [ "$(CHRONIK_SHARED_CACHE)" = 1 ]; then hash=$$(bash scripts/link-caches.sh --hash || true); fi; \
	rc=0; $(MAKE) --no-print-directory test-steps || rc=$$?; \
	if [ -n "$$hash" ] && [ $$rc -eq 0 ]; then bash scripts/link-caches.sh --stamp "$$hash"; fi; \
	exit $$rc

test-steps:
	$(call run_steps,link-caches kube-prefetch deps build $(TEST_STEPS),test)

test-long:
	$(call run_steps,link-caches deps build $(TEST_LONG_STEPS),test-long)

link-caches:
ifeq ($(CHRONIK_SHARED_CACHE),1)
	bash scripts/link-caches.sh
endif

deps: system-deps python-deps

# The Kubernetes control plane k8s-apiserver-test needs (a 5-minute Go
# build when cold) is built in the background at the lowest CPU and I/O
# priority while the Rust tests, mostly waiting on brokers, leave a core
# idle; scripts/install-kube.sh holds a lock, so the test's own call waits
# for it (and a failed prefetch is simply done again there).
kube-prefetch:
	@mkdir -p .tools
	@(nice -n 19 ionice -c 3 bash scripts/install-kube.sh > /dev/null 2> .tools/install-kube-prefetch.log || true) &

system-deps:
	bash scripts/install-system-deps.sh

python-deps:
	VENV="$(VENV)" bash scripts/install-python-deps.sh

build:
	CARGO="$(CARGO)" bash scripts/build-release.sh

# --release: the tests link against the artifacts `make build` made, so the
# workspace is compiled once (a debug build beside it cost a second full
# compilation on a clean clone); the tests also run at the binaries' speed.
# scripts/test_lanes.py runs the test binaries LANES at a time (they mostly
# wait on brokers), longest first; every one runs even if another failed.
LANES ?= 2
cargo-test:
	CARGO="$(CARGO)" LANES=$(LANES) python3 scripts/test_lanes.py

# rustup's default profile ships both; add them if a minimal profile did not.
# clippy --release: its check builds share the release build's build-script
# runs (OpenSSL and librdkafka compiled from C) and proc macros, which a
# dev-profile check compiled a second time (minutes on a clean machine).
lint: lint-shell
	@command -v rustfmt >/dev/null && $(CARGO) clippy --version >/dev/null 2>&1 || rustup component add rustfmt clippy
	$(CARGO) fmt --all --check
	$(CARGO) fmt --all --check --manifest-path fuzz/Cargo.toml
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings
	python3 scripts/module_cycles.py
	python3 scripts/doc_names.py

pytest: python-deps
	@test -x "$(CHRONIK_SERVER_BIN)" || { echo "missing $(CHRONIK_SERVER_BIN): run make build" >&2; exit 1; }
	$(VENV)/bin/python -m pytest tests/python $(PYTEST_ARGS)

# make test's rows: the Java client (Kafka's own: eos-failover, security, the
# admin and perf tools ride on the same jars) and franz-go (eos-848, security),
# each with share; librdkafka is covered by cargo-test and pytest. make compat
# runs every row. Then franz-go's own share-group tests (KIP-932) against a
# fresh 1-node chronik (compat/franz-go-suite.sh, ~10 s; a skipped test fails).
COMPAT_SMOKE_CLIENTS ?= java franz-go kafka-cli
FRANZ_GO_SHARE_TESTS ?= TestShareGroup|TestConsumeRegexShareSkipsInternal|TestAuditShare
compat-smoke:
	@rc=0; bash compat/run.sh --clients "$(COMPAT_SMOKE_CLIENTS)" || rc=1; \
	bash compat/franz-go-suite.sh --run '$(FRANZ_GO_SHARE_TESTS)' --records 20000 --timeout 5m --no-skip || rc=1; \
	exit $$rc

compat:
	bash compat/run.sh

shellcheck:
	shellcheck -x -S warning $$(git ls-files '*.sh')

# program logic belongs in Python modules called as subcommands, not in -c / heredoc snippets
lint-shell:
	bash scripts/lint-shell.sh

load-test:
	bash load/test.sh

report-test:
	bash scripts/install-report-deps.sh
	$(VENV)/bin/python -m pytest reports/tests -q

e2e:
	bash scripts/e2e-check.sh

# FAULT_SMOKE_ARGS=--no-build reuses the release binaries
FAULT_SMOKE_ARGS ?=
fault-smoke:
	bash scripts/fault-smoke.sh $(FAULT_SMOKE_ARGS)

k8s-test:
	bash k8s-perf/tests/test.sh

images:
	bash scripts/build-images.sh

# The overlays applied server-side one by one (20 s to 80 s each with the
# load Job): one of each kind - the small and the secured one (the run.sh
# steps after them need both), the 3-node cluster, and the smallest seed
# overlay (several generators in an Indexed Job; the larger seed overlays, up
# to baremetal-1kib-36's 36 ingestors, have the same shape). Every overlay is
# still built and schema-checked by k8s-test; make k8s-apiserver-test-all (in
# make test-long) applies every one.
APISERVER_OVERLAYS ?= small secure cluster test-1
k8s-apiserver-test: python-deps
	APISERVER_OVERLAYS="$(APISERVER_OVERLAYS)" bash k8s-perf/tests/apiserver.sh

k8s-apiserver-test-all: python-deps
	APISERVER_OVERLAYS= bash k8s-perf/tests/apiserver.sh

k8s-node: images python-deps
	bash scripts/k8s-node.sh up

k8s-node-down:
	bash scripts/k8s-node.sh down

k8s-node-test: k8s-node
	bash k8s-perf/tests/node.sh

k8s-grow-test: k8s-node
	bash compat/install-deps.sh
	bash k8s-perf/tests/grow.sh

images-test: images python-deps
	$(VENV)/bin/python k8s-perf/tests/run_images.py

run: deps
	./run-all.sh

bench: build
	bash scripts/install-system-deps.sh --bench
	bash broker/bench/cpu-per-message.sh

clean-run:
	bash cleanup.sh

fuzz:
	bash scripts/fuzz.sh

fuzz-smoke:
	FUZZ_SECONDS=5 FUZZ_PROFILE=smoke bash scripts/fuzz.sh

FAULT_SECS ?= 600
fault-schedule:
	bash scripts/fault-schedule.sh $(FAULT_SECS)

cluster-soak:
	bash scripts/repeat-cluster-tests.sh $${RUNS:-20}
