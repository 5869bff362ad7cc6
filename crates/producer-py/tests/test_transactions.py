"""Transactions against Apache Kafka, read back with ``isolation.level=read_committed`` by
librdkafka's consumer: what was committed is read, what was aborted is not; offsets sent to a
transaction are the group's committed offsets after its commit."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from kafka_sansio import Producer, TransactionAbortedError, TransactionStateError

from conftest import create_topic, read_back

pytestmark = pytest.mark.kafka


class Boom(Exception):
    pass


async def test_committed_records_are_read_and_aborted_ones_are_not(kafka):
    topic = create_topic(kafka, partitions=3)
    group = f"py-group-{uuid.uuid4().hex[:8]}"
    async with Producer(kafka, transactional_id=f"py-txn-{uuid.uuid4().hex[:8]}") as p:
        async with p.transaction():
            # Reports of a transaction's records come when it ends: send_nowait here, and
            # the futures are awaited after the block.
            first = [p.send_nowait(topic, b"c1-%d" % i, key=b"k%d" % (i % 3)) for i in range(100)]
            await p.send_offsets_to_transaction({(topic, 0): 42}, group)
        aborted = []
        with pytest.raises(Boom):
            async with p.transaction():
                aborted = [p.send_nowait(topic, b"a-%d" % i) for i in range(100)]
                raise Boom()
        for f in aborted:
            with pytest.raises(TransactionAbortedError) as e:
                await f
            assert e.value.record.value.startswith(b"a-")
        async with p.transaction():
            second = p.send_batch([(topic, b"c2-%d" % i) for i in range(100)])
        await p.begin_transaction()
        with pytest.raises(TransactionStateError):
            await p.begin_transaction()
        await p.abort_transaction()
    assert all(f.result().offset >= 0 for f in first)
    values = sorted(r[3] for r in read_back(kafka, topic, isolation="read_committed"))
    expected = sorted([b"c1-%d" % i for i in range(100)] + [b"c2-%d" % i for i in range(100)])
    assert values == expected
    assert all(f.done() and f.exception() is None for f in second)
    uncommitted = read_back(kafka, topic, isolation="read_uncommitted")
    extra = sorted(r[3] for r in uncommitted if r[3] not in set(expected))
    assert all(v.startswith(b"a-") for v in extra), "only aborted records are filtered out"

    c = Consumer({"bootstrap.servers": kafka, "group.id": group})
    try:
        [tp] = c.committed([TopicPartition(topic, 0)], timeout=30)
        assert tp.offset == 42
    finally:
        c.close()
