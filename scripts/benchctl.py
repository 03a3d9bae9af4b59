"""scripts/benchctl.py - the figures the benchmark scripts print, computed from
what the tools wrote (standard library only, except `seed-partitions`, which
imports confluent-kafka from the project's .venv).

Owns:
  cpu-row NAME TOOL SIZE RATE COUNT TIMING B0 B1 HZ
                    bench/compare.sh's TSV row: NAME TOOL SIZE msg/s, the
                    tool's own CPU (TIMING: bash `time` "USER SYS") and the
                    broker's (clock ticks B0..B1, HZ a second) in us per
                    message, COUNT
  bench-cpu-row NAME SIZE JSON TIMING B0 B1 HZ
                    the same row for chronik-bench, its rate and count
                    (achievedRate, publish.sentTotal) from its --json-output
  bench-rate JSON   print chronik-bench's achievedRate (an integer)
  cluster-row BROKER TOOL SIZE RATE TICKS HZ COUNT
                    broker/bench/cluster-bench.sh's TSV row: BROKER TOOL SIZE
                    msg/s and the brokers' CPU us per message (nan when COUNT
                    is 0)
  cluster-bench-row CSV BROKER SIZE TICKS HZ
                    the same row for chronik-bench, from the last row of its
                    --csv-output
  seed-partitions BOOTSTRAP N
                    create topic "wide" with N partitions and write one
                    100-byte record to each (broker/bench/fetch-session-cpu.sh)
  consumer-summary REPORT PRODUCER STATUS
                    consumer/bench.sh's summary of a chronik-consumer report
  ingestor-row JSON CONCURRENCY
                    ingestor/bench.sh's RESULT line for chronik-bench's JSON
  ingestor-table RESULTS LEDGER
                    ingestor/bench.sh's closing table of its RESULT lines and
                    the ingestor's /ledger
Must not: start, time or stop processes (the scripts do), or read /proc (the
scripts pass clock ticks from scripts/lib.sh cpu_ticks).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys


def _load(path: str):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _cpu_row(args: argparse.Namespace, tool: str, rate: float, n: int) -> int:
    with open(args.timing, encoding="utf-8") as f:
        user, sys_ = map(float, f.read().split()[-2:])
    print("\t".join([args.name, tool, args.size, f"{rate:.0f}",
                     f"{(user + sys_) * 1e6 / n:.2f}", f"{(args.b1 - args.b0) / args.hz * 1e6 / n:.2f}", str(n)]))
    return 0


def cpu_row(args: argparse.Namespace) -> int:
    return _cpu_row(args, args.tool, float(args.rate), args.count)


def bench_cpu_row(args: argparse.Namespace) -> int:
    doc = _load(args.json)
    return _cpu_row(args, "chronik-bench", doc["achievedRate"], doc["publish"]["sentTotal"])


def bench_rate(args: argparse.Namespace) -> int:
    print(int(_load(args.json)["achievedRate"]))
    return 0


def _cluster_row(broker: str, tool: str, size: str, rate: float, ticks: int, hz: int, msgs: float) -> int:
    us = ticks / hz * 1e6 / msgs if msgs else float("nan")
    print(f"{broker}\t{tool}\t{size}\t{rate:.0f}\t{us:.2f}")
    return 0


def cluster_row(args: argparse.Namespace) -> int:
    return _cluster_row(args.broker, args.tool, args.size, float(args.rate), args.ticks, args.hz, args.count)


def cluster_bench_row(args: argparse.Namespace) -> int:
    with open(args.csv, encoding="utf-8", newline="") as f:
        r = list(csv.DictReader(f))[-1]
    return _cluster_row(args.broker, "chronik-bench", args.size, float(r["throughput_msg_per_sec"]),
                        args.ticks, args.hz, float(r["total_messages"]))


def seed_partitions(args: argparse.Namespace) -> int:
    from confluent_kafka import Producer  # the .venv's; only here
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    for f in admin.create_topics([NewTopic("wide", args.n, 1)]).values():
        f.result(60)
    p = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 50})
    for i in range(args.n):
        p.produce("wide", value=b"x" * 100, partition=i)
    if p.flush(60) != 0:
        raise SystemExit("seed-partitions: records still unsent after 60 s")
    return 0


def consumer_summary(args: argparse.Namespace) -> int:
    r = _load(args.report)
    c, run = r["counts"], r["run"]
    verified, active = c["verified"], run["activeSecs"]
    cpu, poll_cpu = run["processCpuSecs"], run["pollThreadCpuSecs"]
    print(f"producer: {args.producer}   consumer exit status: {args.status}   "
          f"verdict clean={r['verdict']['clean']} conclusive={r['verdict']['conclusive']}")
    print(f"verified {verified} messages (foreign {c['foreign']}, duplicates {c['duplicates']}, lost {c['lost']})")
    print(f"active {active:.2f} s  ->  {verified / active:,.0f} msg/s wall" if active else "active time unknown")
    print(f"process CPU {cpu:.2f} s  ->  {verified / cpu:,.0f} msg per CPU-second (per core)")
    print(f"poll thread CPU {poll_cpu:.2f} s  ->  {verified / poll_cpu:,.0f} msg per poll-thread CPU-second")
    print(f"end-to-end latency (includes the pre-produce wait, not meaningful here): "
          f"p50 {r['latency']['e2e']['p50Us']} us")
    return 0


def _first(v) -> str:
    # OMB-style per-topic lists; one topic here.
    v = v[0] if isinstance(v, list) and v else v
    return f"{v:.2f}" if isinstance(v, (int, float)) else "-"


def ingestor_row(args: argparse.Namespace) -> int:
    d = _load(args.json)
    broker = (d.get("resources") or {}).get("broker") or {}
    cpu = broker.get("cpuUsPerMsg", "-") if isinstance(broker, dict) else "-"
    print(f"RESULT label=chronik-bench mode=direct concurrency={args.concurrency} messages={d['messages']} "
          f"msg_per_s={d['messageRate']:.0f} p50_ms={_first(d.get('publishLatency50pct'))} "
          f"p99_ms={_first(d.get('publishLatency99pct'))} cpu_us_per_msg_pid0={_first(cpu)}")
    return 0


def ingestor_table(args: argparse.Namespace) -> int:
    rows = {}
    with open(args.results, encoding="utf-8") as f:
        for line in f:
            if line.startswith("RESULT "):
                kv = dict(t.split("=", 1) for t in line.split()[1:])
                rows[kv["label"]] = kv
    ledger = _load(args.ledger)

    def rate(label):
        return float(rows[label]["msg_per_s"]) if label in rows else float("nan")

    def ratio(x, base):
        return f"{x / base:.0%}" if base == base and base > 0 else "-"

    print()
    print("| step | msg/s | vs chronik-bench | vs direct rdkafka | p50 ms | p99 ms | non-2xx "
          "| ingestor CPU µs/msg | broker CPU µs/msg | load-gen cores |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label in ("chronik-bench", "direct", "batch", "fire"):
        r = rows.get(label)
        if not r:
            continue
        x = float(r["msg_per_s"])
        if label in ("direct", "chronik-bench"):
            ing, brk = "-", r.get("cpu_us_per_msg_pid0", "-")
        else:
            ing, brk = r.get("cpu_us_per_msg_pid0", "-"), r.get("cpu_us_per_msg_pid1", "-")
        print(f"| {label} | {x:,.0f} | {ratio(x, rate('chronik-bench'))} | {ratio(x, rate('direct'))} | "
              f"{r.get('p50_ms', '-')} | {r.get('p99_ms', '-')} | {r.get('non2xx', '-')} | {ing} | {brk} | "
              f"{r.get('load_cpu_cores', '-')} |")
    print()
    print(f"ledger: next_sequence={ledger['next_sequence']} acknowledged={ledger['acknowledged_count']} "
          f"failed={ledger['failed_count']} in_flight={ledger['in_flight']} "
          f"ranges(ack)={len(ledger['acknowledged'])} ranges(failed)={len(ledger['failed'])}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scripts/benchctl.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("cpu-row")
    for name in ("name", "tool", "size", "rate"):
        c.add_argument(name)
    c.add_argument("count", type=int)
    c.add_argument("timing")
    for name in ("b0", "b1", "hz"):
        c.add_argument(name, type=int)
    c.set_defaults(run=cpu_row)
    bc = sub.add_parser("bench-cpu-row")
    for name in ("name", "size", "json", "timing"):
        bc.add_argument(name)
    for name in ("b0", "b1", "hz"):
        bc.add_argument(name, type=int)
    bc.set_defaults(run=bench_cpu_row)
    b = sub.add_parser("bench-rate")
    b.add_argument("json")
    b.set_defaults(run=bench_rate)
    k = sub.add_parser("cluster-row")
    for name in ("broker", "tool", "size", "rate"):
        k.add_argument(name)
    for name in ("ticks", "hz"):
        k.add_argument(name, type=int)
    k.add_argument("count", type=float)
    k.set_defaults(run=cluster_row)
    v = sub.add_parser("cluster-bench-row")
    for name in ("csv", "broker", "size"):
        v.add_argument(name)
    for name in ("ticks", "hz"):
        v.add_argument(name, type=int)
    v.set_defaults(run=cluster_bench_row)
    s = sub.add_parser("seed-partitions")
    s.add_argument("bootstrap")
    s.add_argument("n", type=int)
    s.set_defaults(run=seed_partitions)
    r = sub.add_parser("consumer-summary")
    r.add_argument("report")
    r.add_argument("producer")
    r.add_argument("status")
    r.set_defaults(run=consumer_summary)
    i = sub.add_parser("ingestor-row")
    i.add_argument("json")
    i.add_argument("concurrency")
    i.set_defaults(run=ingestor_row)
    t = sub.add_parser("ingestor-table")
    t.add_argument("results")
    t.add_argument("ledger")
    t.set_defaults(run=ingestor_table)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
