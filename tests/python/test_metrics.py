"""The HTTP side: /health and /ready answer 200 while serving, /metrics is
Prometheus text."""


def test_health_and_ready(broker):
    assert broker.http_get("/health")[0] == 200
    assert broker.http_get("/ready")[0] == 200


def test_metrics_is_prometheus_text(broker):
    status, body = broker.http_get("/metrics")
    assert status == 200
    lines = [l for l in body.splitlines() if l and not l.startswith("#")]
    assert lines, "no samples in /metrics"
    for line in lines:
        name_and_labels, _, value = line.rpartition(" ")
        assert name_and_labels, f"malformed sample line {line!r}"
        float(value)  # raises on a malformed value
