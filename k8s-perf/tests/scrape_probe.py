"""k8s-perf/tests/scrape_probe.py - scrape.sh's two small probes (standard
library only).

Owns:
  short-frame HOST:PORT  send the broker a frame shorter than a request header
                         (size 2) so it closes the connection on an error,
                         which its error metrics must then show
  metric-names           read Prometheus's /api/v1/label/__name__/values
                         answer on stdin, print one metric name a line
Must not: start or stop anything, or judge the dashboards (check_dashboards.py).
"""

from __future__ import annotations

import json
import socket
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


def metric_names() -> int:
    print("\n".join(json.load(sys.stdin)["data"]))
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["short-frame"] and len(argv) == 2:
        return short_frame(argv[1])
    if argv == ["metric-names"]:
        return metric_names()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
