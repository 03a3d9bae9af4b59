# Prometheus for the local node's monitoring pod (scripts/k8s-node.sh;
# k8s-perf/node/addons.yaml): the static binary scripts/install-k8s-node.sh
# builds from the Go module with Kubernetes discovery (Debian's package has none).
ARG BASE=localhost/debian:bookworm-slim
FROM ${BASE}
COPY prometheus /bin/prometheus
USER 65534:65534
ENTRYPOINT ["/bin/prometheus"]
