# The local node's pod sandbox image (scripts/k8s-node.sh): k8s-perf/node/pause alone.
FROM scratch
COPY pause /pause
USER 65535:65535
ENTRYPOINT ["/pause"]
