"""k8s-perf/tests/secure_standins.py - the stand-ins test_secure.sh puts where
a cluster would be (PyYAML for the first two).

Owns:
  secret-get APPLIED NAMESPACE KUBECTL_ARGS...
          the stand-in kubectl's `get secret NAME -o jsonpath={.data.KEY}`:
          print KEY's (base64) value of the last Secret NAME applied (the
          YAML documents in APPLIED), without a newline
  secret-names APPLIED NAMESPACE
          print the names of the Secrets applied, sorted, on one line;
          fail if one lies outside NAMESPACE
  serve-ledger KEYSTORE TOKEN_FILE PORT_FILE
          an HTTPS server on 127.0.0.1 (a free port, written to PORT_FILE
          once listening) with the ingestor's key store, answering /ledger
          (in_flight 0) to the bearer token in TOKEN_FILE and 401 to anything
          else; runs until killed
Must not: decide what passes (test_secure.sh does).
"""

from __future__ import annotations

import http.server
import os
import re
import ssl
import sys

import subcommand  # k8s-perf/tests/subcommand.py, beside this file


def _applied(path: str) -> list[dict]:
    import yaml

    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def secret_get(applied: str, namespace: str, *args: str) -> int:
    docs = _applied(applied)
    name = next(a for a in args[2:] if not a.startswith("-") and a != namespace)
    key = re.search(r"\{\.data\.(.+)\}", " ".join(args)).group(1).replace("\\.", ".")
    secret = [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == name][-1]
    print(secret["data"][key], end="")
    return 0


def secret_names(applied: str, namespace: str) -> int:
    docs = [d for d in _applied(applied) if d["kind"] == "Secret"]
    assert all(d["metadata"]["namespace"] == namespace for d in docs), "a Secret outside the namespace"
    print(" ".join(sorted(d["metadata"]["name"] for d in docs)))
    return 0


def serve_ledger(keystore: str, token_file: str, port_file: str) -> int:
    with open(token_file, encoding="utf-8") as f:
        token = f.read().strip()

    class Ledger(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            okay = self.path == "/ledger" and self.headers.get("Authorization") == f"Bearer {token}"
            body = b'{"ingestor_id":"stand-in","in_flight":0}' if okay else b"unauthorized"
            self.send_response(200 if okay else 401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Ledger)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(keystore)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(port_file + ".tmp", "w", encoding="utf-8") as f:
        f.write(str(srv.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    srv.serve_forever()
    return 0


COMMANDS = {"secret-get": secret_get, "secret-names": secret_names, "serve-ledger": serve_ledger}


if __name__ == "__main__":
    sys.exit(subcommand.run(__doc__, COMMANDS, sys.argv[1:]))
