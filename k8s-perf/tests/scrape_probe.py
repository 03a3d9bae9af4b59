"""k8s-perf/tests/scrape_probe.py - scrape.sh's small probes (standard
library only).

Owns:
  short-frame HOST:PORT  send the broker a frame shorter than a request header
                         (size 2) so it closes the connection on an error,
                         which its error metrics must then show
  client-quota HOST:PORT give client id `scrape-probe` a producer_byte_rate of
                         1 KiB/s (AlterClientQuotas v0), then send a 64 KiB
                         Produce (v3, to a topic of that name) as that client,
                         so the client-quota metrics have a measured and
                         throttled entity
  metric-names           read Prometheus's /api/v1/label/__name__/values
                         answer on stdin, print one metric name a line
Must not: start or stop anything, or judge the dashboards (check_dashboards.py).
"""

from __future__ import annotations

import json
import socket
import struct
import sys


def short_frame(addr: str) -> int:
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=2)
    s.sendall(b"\x00\x00\x00\x02\x00\x00")
    try:
        s.recv(16)
    except OSError:
        pass
    s.close()
    return 0


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _request(sock: socket.socket, api_key: int, version: int, body: bytes) -> bytes:
    """One request (header v1, client id `scrape-probe`); the response body."""
    frame = struct.pack(">hhi", api_key, version, 1) + _string("scrape-probe") + body
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    size = struct.unpack(">i", _read(sock, 4))[0]
    return _read(sock, size)[4:]  # past the correlation id


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("connection closed")
        data += chunk
    return data


def client_quota(addr: str) -> int:
    host, port = addr.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    # AlterClientQuotas v0: one entry, entity client-id=scrape-probe,
    # producer_byte_rate=1024 set, validate_only false.
    entry = (struct.pack(">i", 1) + _string("client-id") + _string("scrape-probe")
             + struct.pack(">i", 1) + _string("producer_byte_rate") + struct.pack(">d?", 1024.0, False))
    answer = _request(sock, 49, 0, struct.pack(">i", 1) + entry + struct.pack(">?", False))
    error = struct.unpack(">h", answer[8:10])[0]  # throttle_time_ms, entries count, first error
    if error != 0:
        print(f"AlterClientQuotas: error {error}", file=sys.stderr)
        return 1
    # Produce v3: 64 KiB as one uncompressed record batch's worth of bytes
    # (the broker counts the request's bytes whatever it answers).
    records = b"\x00" * 65536
    body = (struct.pack(">h", -1) + struct.pack(">hi", 1, 5000) + struct.pack(">i", 1) + _string("scrape-probe")
            + struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", len(records)) + records)
    try:
        _request(sock, 0, 3, body)  # answered with an error: the bytes count all the same
    except OSError:
        pass
    sock.close()
    return 0


def metric_names() -> int:
    print("\n".join(json.load(sys.stdin)["data"]))
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["short-frame"] and len(argv) == 2:
        return short_frame(argv[1])
    if argv[:1] == ["client-quota"] and len(argv) == 2:
        return client_quota(argv[1])
    if argv == ["metric-names"]:
        return metric_names()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
