#!/usr/bin/env python3
"""cpu_table.py - Markdown table of broker CPU per message from kafka-anchor
perf.sh result rows (TSV), with the chronik/kafka ratio.

  python3 broker/bench/cpu_table.py results/bench-ID/perf.tsv

One row per (broker tag, message size); repeated runs are shown side by side
as "run1 / run2" (never averaged away). "broker CPU µs/msg" = broker utime +
stime during the produce run / records. The ratio row per (transport, size)
divides the medians of chronik's and kafka's µs/msg; rows tagged "chronik*"
are chronik, "kafka*" are Apache Kafka, a "-tls" suffix means over TLS (then
a third table gives each broker's TLS/PLAINTEXT cost). Standard library only.
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

    def rows_of(broker, tls, size):
        return [r for (tag, s), rows in groups.items()
                if s == size and tag.startswith(broker) and tag.endswith("-tls") == tls for r in rows]

    def median(rows, fn):
        return statistics.median(fn(r) for r in rows)

    def medians(rows):
        """(CPU µs/msg, msg/s), the medians of rows."""
        return median(rows, cpu_us_per_msg), median(rows, lambda r: float(r["msg_s"]))

    def ratio(x, y):
        return x / y if y > 0 else float("inf")

    def comparison(header, rows):
        """A table of (label, size, CPU µs/msg of a, of b, CPU ratio, msg/s ratio) rows."""
        if not rows:
            return
        print()
        print(header)
        print("|---|---|---|---|---|---|")
        for label, size, cpu_a, cpu_b, cpu_ratio, tput_ratio in rows:
            print(f"| {label} | {size} B | {cpu_a:.2f} | {cpu_b:.2f} | **{cpu_ratio:.2f}** | {tput_ratio:.2f} |")

    ratios = []
    for tls in (False, True):
        for size in sizes:
            chronik, kafka = rows_of("chronik", tls, size), rows_of("kafka", tls, size)
            if chronik and kafka:
                (c, t_c), (k, t_k) = medians(chronik), medians(kafka)
                ratios.append(("TLS" if tls else "PLAINTEXT", size, c, k, ratio(c, k), ratio(t_c, t_k)))
    comparison("| transport | message size | chronik CPU µs/msg | kafka CPU µs/msg | CPU ratio chronik/kafka "
               "| msg/s ratio chronik/kafka |", ratios)

    costs = []
    for broker in ("chronik", "kafka"):
        for size in sizes:
            plain, tls = rows_of(broker, False, size), rows_of(broker, True, size)
            if plain and tls:
                (p_cpu, p_tput), (t_cpu, t_tput) = medians(plain), medians(tls)
                costs.append((broker, size, p_cpu, t_cpu, ratio(t_cpu, p_cpu), ratio(t_tput, p_tput)))
    comparison("| broker | message size | PLAINTEXT CPU µs/msg | TLS CPU µs/msg | TLS/PLAINTEXT CPU "
               "| TLS/PLAINTEXT msg/s |", costs)

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
