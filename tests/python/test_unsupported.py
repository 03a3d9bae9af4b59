"""What the broker does not support fails at once, with Kafka's error.

Transactions are not supported yet (issue 17). A transactional producer
must learn that from its first call and stop, never retry until a timeout:
confluent-kafka's init_transactions() used to wait out its whole timeout on
COORDINATOR_NOT_AVAILABLE for the transaction coordinator.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer


def test_a_transactional_producer_is_refused_with_a_fatal_error(broker):
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"txn-{uuid.uuid4().hex[:8]}",
                  "transaction.timeout.ms": 60000})
    with pytest.raises(KafkaException) as refused:
        p.init_transactions(60)
    err = refused.value.args[0]
    # not _TIMED_OUT (the old hang): the broker's own answer, and fatal
    assert err.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, err
    assert not err.retriable(), err

