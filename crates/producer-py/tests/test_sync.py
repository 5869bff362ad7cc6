"""The synchronous producer (on the Rust mio driver's thread) against Apache Kafka: records
produced with delivery callbacks are read back at the offsets the callbacks name, and a record
the broker refuses reaches its callback as a typed error with the record handed back."""

from __future__ import annotations

import pytest

from kafka_sansio import BrokerError, DeliveryError, RecordMetadata, SyncProducer

from conftest import create_topic, read_back

pytestmark = pytest.mark.kafka


def test_produce_with_callbacks_and_read_back(kafka):
    topic = create_topic(kafka, partitions=4)
    reports = {}

    def on_delivery(value):
        def record(err, meta):
            assert err is None, err
            assert isinstance(meta, RecordMetadata) and meta.topic == topic
            reports[value] = (meta.partition, meta.offset)

        return record

    with SyncProducer(kafka, linger_ms=5) as p:
        served = 0
        for i in range(3000):
            v = b"s%d" % i
            p.produce(topic, v, key=b"k%d" % (i % 9), headers=[("n", v)], on_delivery=on_delivery(v))
            served += p.poll(0)
        served += p.flush()
        assert served == 3000 and len(reports) == 3000
        assert p.metrics()["buffered_records"] == 0
    read = read_back(kafka, topic)
    assert {value: (part, off) for part, off, _, value, _ in read} == reports
    assert all(h == [("n", value)] for _, _, _, value, h in read)


def test_a_refused_record_reaches_its_callback_typed(kafka):
    topic = create_topic(kafka, partitions=1, config={"max.message.bytes": "2000"})
    got = []
    with SyncProducer(kafka, linger_ms=0) as p:
        p.produce(topic, b"x" * 5000, key=b"big", on_delivery=lambda e, m: got.append((e, m)))
        p.produce(topic, b"small", on_delivery=lambda e, m: got.append((e, m)))
        p.flush()
    [(err, none), (ok_err, meta)] = got
    assert isinstance(err, BrokerError) and isinstance(err, DeliveryError) and none is None
    assert err.possibly_persisted is False and err.record.key == b"big"
    assert ok_err is None
    assert [(r[1], r[3]) for r in read_back(kafka, topic)] == [(meta.offset, b"small")]


def test_a_callback_that_raises_is_raised_from_poll_after_the_others_ran(kafka):
    topic = create_topic(kafka, partitions=1)
    ran = []

    def bad(err, meta):
        ran.append("bad")
        raise RuntimeError("callback failed")

    with SyncProducer(kafka, linger_ms=0) as p:
        p.produce(topic, b"1", on_delivery=bad)
        p.produce(topic, b"2", on_delivery=lambda e, m: ran.append("good"))
        with pytest.raises(RuntimeError, match="callback failed"):
            p.flush()
    assert ran == ["bad", "good"]
