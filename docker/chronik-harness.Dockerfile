# syntax=docker/dockerfile:1
# docker/chronik-harness.Dockerfile - the load-test harness image: chronik-ingestor,
# chronik-consumer and chronik-bench in one image (they share chronik-harness
# and rdkafka, so one build serves all three; the Deployments pick the binary
# by `command`), and the load generator chronik-loadgen (load/generator, the
# project's Go program on the vegeta library: a static binary, CGO_ENABLED=0;
# it replaced k6) that the load Job runs.
#
#   docker build -f docker/chronik-harness.Dockerfile -t chronik-harness:dev .
#
# Stages: the Rust binaries compiled in the official Rust image (Debian
# bookworm: gcc, make and zlib headers for the vendored librdkafka),
# chronik-loadgen in the official Go image (modules from the Go proxy, pinned
# by load/generator/go.sum), run from debian:bookworm-slim as an unprivileged
# user.
# The bases are build arguments (BUILD_IMAGE, GO_IMAGE, RUNTIME_IMAGE), and so
# is the binaries' origin (BINARIES=compile, or host: target/release/ of a
# bookworm host plus the static chronik-loadgen scripts/install-loadgen.sh
# built into .tools/bin/ - what scripts/build-images.sh uses when
# no registry answers). The Rust binaries need glibc, libgcc and zlib, all in
# slim; chronik-loadgen needs nothing. /bin/sh is used by the consumer
# Deployment's entrypoint (per-process report names), the load Job's script
# (the barrier flag by index) and by `kubectl exec ... kill -TERM 1` to make a
# consumer write its report. No ENTRYPOINT: every container names its binary.
#
# Ports: ingestor 8080 (HTTP + /metrics), consumer 9645 (/metrics /summary
# /health), chronik-loadgen 9102 (/metrics, /results) and 7070 (index 0's
# start barrier). chronik-bench serves nothing (a CLI; run it as a Job).

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm
# Base images are build arguments: scripts/build-images.sh (make images)
# passes a local Debian base made offline when no registry answers.
ARG BUILD_IMAGE=rust:${RUST_VERSION}-${DEBIAN_RELEASE}
ARG GO_VERSION=1.24
ARG GO_IMAGE=golang:${GO_VERSION}-${DEBIAN_RELEASE}
ARG RUNTIME_IMAGE=debian:${DEBIAN_RELEASE}-slim
# Where the binaries come from: `compile` (built in BUILD_IMAGE and GO_IMAGE)
# or `host` (target/release/ built on a bookworm host, the glibc must match;
# chronik-loadgen from .tools/bin/, static).
ARG BINARIES=compile

FROM ${GO_IMAGE} AS loadgen-compile
WORKDIR /src/load/generator
COPY load/generator/ ./
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -o /out/chronik-loadgen .

FROM ${BUILD_IMAGE} AS compile
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,id=chronik-harness-target \
    cargo build --release --locked -p chronik-ingestor -p chronik-consumer -p chronik-bench \
 && for b in chronik-ingestor chronik-consumer chronik-bench; do \
      install -D -m 0755 "target/release/$b" "/out/$b"; \
    done
COPY --from=loadgen-compile /out/chronik-loadgen /out/chronik-loadgen

FROM ${RUNTIME_IMAGE} AS host
COPY target/release/chronik-ingestor target/release/chronik-consumer target/release/chronik-bench \
     .tools/bin/chronik-loadgen /out/

FROM ${BINARIES} AS binaries

FROM ${RUNTIME_IMAGE} AS runtime
RUN groupadd --system --gid 10001 chronik \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/chronik --no-create-home chronik \
 && install -d -o 10001 -g 10001 /var/lib/chronik /var/lib/chronik/reports
COPY --from=binaries /out/ /usr/local/bin/
USER 10001:10001
WORKDIR /var/lib/chronik
EXPOSE 8080 9645 9102 7070
CMD ["chronik-ingestor", "--help"]
