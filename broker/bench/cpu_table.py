#!/usr/bin/env python3
"""cpu_table.py - Markdown table of broker CPU per message from kafka-anchor
perf.sh result rows (TSV), with the chronik/kafka ratio.

  python3 broker/bench/cpu_table.py results/bench-ID/perf.tsv

One row per (broker tag, message size); repeated runs are shown side by side
as "run1 / run2" (never averaged away). "broker CPU µs/msg" = broker utime +
stime during the produce run / records. The ratio row per size divides the
medians of chronik's and kafka's µs/msg; rows tagged "chronik*" are chronik,
"kafka*" are Apache Kafka. Standard library only.
"""

import csv
import statistics
import sys
from collections import OrderedDict


def cpu_us_per_msg(row):
    return float(row["broker_cpu_s"]) * 1e6 / int(row["records"])


def main(path):
    groups = OrderedDict()
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            groups.setdefault((row["tag"], int(row["size"])), []).append(row)
    if not groups:
        sys.exit(f"{path}: no result rows")

    def joined(rows, fn):
        return " / ".join(fn(r) for r in rows)

    print("| broker | message size | records | msg/s | MB/s | p99 ms | broker CPU µs/msg | foreign CPU % |")
    print("|---|---|---|---|---|---|---|---|")
    for (tag, size), rows in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print("| " + " | ".join([
            tag, f"{size} B", f"{int(rows[0]['records']):,}",
            joined(rows, lambda r: f"{float(r['msg_s']):,.0f}"),
            joined(rows, lambda r: r["MB_s"]),
            joined(rows, lambda r: r["p99_ms"]),
            joined(rows, lambda r: f"{cpu_us_per_msg(r):.2f}"),
            joined(rows, lambda r: r["foreign_cpu_pct"]),
        ]) + " |")

    sizes = sorted({size for _, size in groups})
    ratios = []
    for size in sizes:
        chronik = [r for (tag, s), rows in groups.items() if s == size and tag.startswith("chronik") for r in rows]
        kafka = [r for (tag, s), rows in groups.items() if s == size and tag.startswith("kafka") for r in rows]
        if chronik and kafka:
            c = statistics.median(cpu_us_per_msg(r) for r in chronik)
            k = statistics.median(cpu_us_per_msg(r) for r in kafka)
            t_c = statistics.median(float(r["msg_s"]) for r in chronik)
            t_k = statistics.median(float(r["msg_s"]) for r in kafka)
            ratios.append((size, c, k, c / k if k > 0 else float("inf"), t_c / t_k if t_k > 0 else float("inf")))
    if ratios:
        print()
        print("| message size | chronik CPU µs/msg | kafka CPU µs/msg | CPU ratio chronik/kafka | msg/s ratio chronik/kafka |")
        print("|---|---|---|---|---|")
        for size, c, k, ratio, tput in ratios:
            print(f"| {size} B | {c:.2f} | {k:.2f} | **{ratio:.2f}** | {tput:.2f} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
