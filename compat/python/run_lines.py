"""compat/python/run_lines.py - the JSON lines compat/run.sh writes itself
(standard library only).

Owns:
  not-checked LABEL CHECK DETAIL RESULTS
          print the runner's own `n/a` result line for a check a client's
          row does not run, naming the version the client's own lines in
          RESULTS (its results.<client>.jsonl) give, else "?"
  meta RUN_ID COMMIT BROKER BUILT DEFAULT_DELAY_CLIENTS WAL MESSAGES PERF SECS
          print the run's metadata object, which matrix.py --meta stores
Must not: judge a result (matrix.py does) or run a client (the drivers do).
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def not_checked(args: argparse.Namespace) -> int:
    version = "?"  # the version the client's own result lines name
    try:
        with open(args.results, encoding="utf-8") as f:
            version = next((json.loads(line)["version"] for line in f if line.strip()), version)
    except (OSError, ValueError, KeyError):
        pass
    print(json.dumps({"client": args.label, "version": version, "check": args.check, "result": "n/a",
                      "detail": args.detail}))
    return 0


def meta(args: argparse.Namespace) -> int:
    print(json.dumps({
        "run_id": args.run_id, "git_commit": args.commit, "broker": args.broker,
        "broker_built": args.built,
        "broker_flags": f"--wal-profile {args.wal} --group-initial-rebalance-delay-ms 0 "
                        f"(except {args.default_delay}: Kafka's default 3000 ms)",
        "messages_per_check": int(args.messages), "perf_records": int(args.perf),
        "host_cores": os.cpu_count(), "duration_s": int(args.secs)}))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="compat/python/run_lines.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    n = sub.add_parser("not-checked")
    for name in ("label", "check", "detail", "results"):
        n.add_argument(name)
    n.set_defaults(run=not_checked)
    m = sub.add_parser("meta")
    for name in ("run_id", "commit", "broker", "built", "default_delay", "wal", "messages", "perf", "secs"):
        m.add_argument(name)
    m.set_defaults(run=meta)
    args = p.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
