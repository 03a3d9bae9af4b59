# syntax=docker/dockerfile:1
# docker/chronik-server.Dockerfile - the broker image (chronik-server only).
#
#   docker build -f docker/chronik-server.Dockerfile -t chronik-server:dev .
#
# Two stages: the workspace is compiled in the official Rust image (Debian
# bookworm, the same C toolchain the vendored C dependencies need), and only
# the binary goes into debian:bookworm-slim, run as an unprivileged user.
# Both bases are build arguments (BUILD_IMAGE, RUNTIME_IMAGE), and so is the
# binaries' origin (BINARIES=compile, or host: target/release/ of a bookworm
# host, what scripts/build-images.sh uses when no registry answers).
# slim rather than distroless: the StatefulSet starts the broker through a
# small /bin/sh entrypoint (k8s-perf/base/broker/entrypoint.sh) that derives
# the node id and the peers from the pod's name, and the binary needs only
# glibc and libgcc, which slim has.
#
# Ports (the same in standalone and cluster mode): 9092 Kafka, 9093 raft
# (metadata quorum, cluster mode), 9644 /metrics /health /ready.
# Data: /var/lib/chronik/data (CHRONIK_DATA_DIR; mount a volume there).
# The build context is the repository root; .dockerignore keeps it to the sources.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm
# Base images are build arguments: scripts/build-images.sh (make images)
# passes a local Debian base made offline when no registry answers.
ARG BUILD_IMAGE=rust:${RUST_VERSION}-${DEBIAN_RELEASE}
ARG RUNTIME_IMAGE=debian:${DEBIAN_RELEASE}-slim
# Where the binary comes from: `compile` (the workspace built in BUILD_IMAGE)
# or `host` (target/release/chronik-server built on a bookworm host, for
# machines without a Rust image; the glibc must match RUNTIME_IMAGE's).
ARG BINARIES=compile

FROM ${BUILD_IMAGE} AS compile
WORKDIR /src
COPY . .
# The cache mounts keep the registry and target/ between builds (BuildKit).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,id=chronik-server-target \
    cargo build --release --locked -p chronik-server \
 && install -D -m 0755 target/release/chronik-server /out/chronik-server

FROM ${RUNTIME_IMAGE} AS host
COPY target/release/chronik-server /out/chronik-server

FROM ${BINARIES} AS binaries

FROM ${RUNTIME_IMAGE} AS runtime
RUN groupadd --system --gid 10001 chronik \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/chronik --no-create-home chronik \
 && install -d -o 10001 -g 10001 /var/lib/chronik /var/lib/chronik/data
COPY --from=binaries /out/chronik-server /usr/local/bin/chronik-server
ENV CHRONIK_DATA_DIR=/var/lib/chronik/data
USER 10001:10001
WORKDIR /var/lib/chronik
EXPOSE 9092 9093 9644
ENTRYPOINT ["/usr/local/bin/chronik-server"]
