"""A kafka-python (pure-Python client) member of a classic consumer group,
for broker/server/tests/classic_group_failover.rs.

Usage: kafka_python_member.py BOOTSTRAP GROUP TOPIC

Subscribes to TOPIC in GROUP (KafkaConsumer: the classic group protocol),
reads from the earliest offset and commits what it read after every poll.
Prints one line per event, flushed: "ASSIGNED p,p" / "REVOKED p,p" for each
rebalance callback, "GENERATION n" when its generation changes, "N n" for
every record (its value, a number), "COMMIT_FAILED message" for a commit
the group refused (it carries on) and "ERR message" before exiting on any
other error. Runs until killed.
"""

import sys

from kafka import ConsumerRebalanceListener, KafkaConsumer
from kafka.errors import CommitFailedError


def say(line: str) -> None:
    print(line, flush=True)


class Callbacks(ConsumerRebalanceListener):
    def on_partitions_revoked(self, revoked):
        say("REVOKED " + ",".join(str(tp.partition) for tp in sorted(revoked)))

    def on_partitions_assigned(self, assigned):
        say("ASSIGNED " + ",".join(str(tp.partition) for tp in sorted(assigned)))


def main() -> int:
    bootstrap, group, topic = sys.argv[1:4]
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap.split(","),
        group_id=group,
        client_id="kafka-python",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )
    consumer.subscribe([topic], listener=Callbacks())
    generation = None
    try:
        while True:
            batch = consumer.poll(timeout_ms=100)
            for records in batch.values():
                for record in records:
                    say(f"N {int(record.value)}")
            if batch:
                try:
                    consumer.commit()
                except CommitFailedError as e:
                    # the group rebalanced under it: carry on as applications do
                    say(f"COMMIT_FAILED {e}")
            current = consumer._coordinator._generation.generation_id
            if current != generation:
                generation = current
                say(f"GENERATION {generation}")
    except Exception as e:  # reported to the test, which fails on it
        say(f"ERR {type(e).__name__}: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
