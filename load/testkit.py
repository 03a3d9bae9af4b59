"""load/testkit.py - the stand-ins and result checks load/test.sh uses against
load/run.sh (standard library only).

Owns:
  fake-ingestor PORT_FILE   serve like chronik-ingestor's /produce/batch on
                            127.0.0.1 (a free port, written to PORT_FILE):
                            GET answers ready, POST delivers every message
                            (partition i % 3, offset i); runs until killed
  check-merged MERGED GENERATORS
                            exit 0 when a merged summary pools GENERATORS
                            generators (index null), 40 requests, 4000
                            messages, and its thresholds held
Must not: start the generators or decide what load/test.sh reports (it counts
the exit statuses).
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeIngestor(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.reply(200, b'{"status":"ready"}')

    def do_POST(self):
        msgs = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        res = [{"partition": i % 3, "offset": i} for i in range(len(msgs))]
        self.reply(200, json.dumps({"delivered": len(msgs), "results": res}).encode())


def fake_ingestor(args: argparse.Namespace) -> int:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeIngestor)
    with open(args.port_file, "w", encoding="utf-8") as f:
        f.write(str(srv.server_address[1]))
    srv.serve_forever()
    return 0


def check_merged(args: argparse.Namespace) -> int:
    with open(args.merged, encoding="utf-8") as f:
        m = json.load(f)
    assert m["generators"] == args.generators and m["index"] is None, m["generators"]
    assert m["metrics"]["http_reqs"]["values"]["count"] == 40, m["metrics"]["http_reqs"]
    assert m["metrics"]["messages_produced"]["values"]["count"] == 4000
    assert m["thresholds_ok"] is True
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="load/testkit.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fake-ingestor")
    f.add_argument("port_file")
    f.set_defaults(run=fake_ingestor)
    c = sub.add_parser("check-merged")
    c.add_argument("merged")
    c.add_argument("generators", type=int)
    c.set_defaults(run=check_merged)
    args = p.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
