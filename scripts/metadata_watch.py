"""scripts/metadata_watch.py - the leaders and ISRs of a topic's partitions
over a run, as the brokers' Metadata gives them (scripts/faults.py's
poller, run in a thread of its `run` subcommand).

Owns: asking every node on its own (one confluent-kafka admin client per
bootstrap address) every POLL_S, keeping the view most answering nodes give
(a cut-off node keeps answering with its own stale view; a killed or paused
one does not answer), and writing a CSV row per partition whenever its
leader, replicas or ISR changed. Works against Chronik and Apache Kafka
alike. Must not: inject faults or judge them (faults.py, reports/faults.py).
"""

from __future__ import annotations

import csv
import json
import sys
import threading
import time
from pathlib import Path

POLL_S = 0.5


class Watcher(threading.Thread):
    """Polls Metadata for the topic every POLL_S from every node on its own
    (one admin client per bootstrap address: a node that is cut off keeps
    answering with its own stale view, a killed or paused one does not
    answer) and keeps the view most nodes give. Writes a CSV row per
    partition whenever its leader, replicas or ISR changed (and at the first
    poll), and keeps the latest view for `kill:leader`."""

    def __init__(self, bootstrap: str, topic: str, out: Path):
        super().__init__(daemon=True)
        from confluent_kafka.admin import AdminClient  # the .venv's; only here

        self.admins = [AdminClient({"bootstrap.servers": addr, "socket.timeout.ms": 1000,
                                    "topic.metadata.refresh.interval.ms": 1000})
                       for addr in bootstrap.split(",") if addr]
        self.topic = topic
        self.out = out
        self.latest: dict[int, tuple[int, list[int], list[int]]] = {}
        self.latest_at = 0.0
        self.stop = threading.Event()

    def describe_one(self, admin) -> dict[int, tuple[int, list[int], list[int]]]:
        md = admin.list_topics(topic=self.topic, timeout=1)
        t = md.topics.get(self.topic)
        if t is None or t.error is not None:
            return {}
        return {p.id: (p.leader, sorted(p.replicas), sorted(p.isrs)) for p in t.partitions.values()}

    def describe(self) -> dict[int, tuple[int, list[int], list[int]]]:
        """The view most answering nodes hold (ties: the first node's)."""
        results: list[dict] = [{} for _ in self.admins]

        def ask(i: int, admin) -> None:
            try:
                results[i] = self.describe_one(admin)
            except Exception:  # noqa: BLE001 - a node down or cut off does not answer
                results[i] = {}

        threads = [threading.Thread(target=ask, args=(i, a), daemon=True) for i, a in enumerate(self.admins)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=3)
        views = [json.dumps(sorted(r.items())) for r in results if r]
        if not views:
            return {}
        best = max(views, key=views.count)
        return {int(k): (v[0], v[1], v[2]) for k, v in json.loads(best)}

    def run(self) -> None:
        with open(self.out, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time", "partition", "leader", "replicas", "isr"])
            last: dict[int, tuple] = {}
            failing = ""
            while not self.stop.is_set():
                started = time.time()
                view = self.describe()
                why = "" if view else "no node answered for the topic"
                if why != failing:
                    try:
                        print(f"[{time.strftime('%H:%M:%S')}] faults: metadata poll: {why or 'answering again'}",
                              file=sys.stderr, flush=True)
                    except OSError:
                        pass  # the log's reader is gone (Ctrl-C); keep polling
                    failing = why
                if view:
                    self.latest, self.latest_at = view, time.time()
                    for pid, (leader, replicas, isr) in sorted(view.items()):
                        if last.get(pid) != (leader, replicas, isr):
                            w.writerow([f"{started:.3f}", pid, leader, " ".join(map(str, replicas)),
                                        " ".join(map(str, isr))])
                            last[pid] = (leader, replicas, isr)
                    f.flush()
                self.stop.wait(max(0.0, POLL_S - (time.time() - started)))
