"""Produce and read back against Apache Kafka (single node): the three ways to send, keyed
ordering, typed delivery errors, backpressure, cancellation and uvloop. Every record is read
back by librdkafka's consumer and compared with what was sent and what its future said."""

from __future__ import annotations

import asyncio
import collections

import pytest
import uvloop

from kafka_sansio import (
    BrokerError,
    BufferFull,
    DeliveryError,
    DeliveryTimeoutError,
    Producer,
    RecordMetadata,
    RecordTooLarge,
    SendError,
)

from conftest import create_topic, read_back

pytestmark = pytest.mark.kafka


def check_exactly(read, sent):
    """``read`` (from read_back) holds exactly the records of ``sent`` (value -> metadata),
    each once, at the offset its future reported."""
    by_value = {}
    for partition, offset, key, value, _ in read:
        assert value not in by_value, f"{value!r} read twice"
        by_value[value] = (partition, offset)
    assert set(by_value) == set(sent), (
        f"{len(set(sent) - set(by_value))} lost, {len(set(by_value) - set(sent))} unexpected"
    )
    for value, meta in sent.items():
        assert by_value[value] == (meta.partition, meta.offset), value


async def test_produce_three_ways_and_read_back(kafka):
    topic = create_topic(kafka, partitions=6)
    sent = {}
    async with Producer(kafka, linger_ms=5) as p:
        for i in range(100):
            v = b"await-%d" % i
            meta = await p.send(topic, v, key=b"k%d" % (i % 7), headers=[("h", b"x%d" % i)])
            assert isinstance(meta, RecordMetadata) and meta.topic == topic
            sent[v] = meta
        futures = {}
        for i in range(2000):
            v = b"nowait-%d" % i
            futures[v] = p.send_nowait(topic, v, key=b"k%d" % (i % 7))
        batch_values = [b"batch-%d" % i for i in range(2000)]
        batch = p.send_batch([(topic, v, b"b%d" % (i % 5)) for i, v in enumerate(batch_values)])
        assert len(batch) == len(batch_values)
        futures.update(zip(batch_values, batch))
        await p.flush()
        assert all(f.done() for f in futures.values()), "flush returns after every report"
        for v, f in futures.items():
            sent[v] = f.result()
        m = p.metrics()
        assert m["record_send_total"] >= len(sent)
        assert m["buffered_records"] == 0
    read = read_back(kafka, topic)
    check_exactly(read, sent)
    headers = {value: h for _, _, _, value, h in read}
    assert headers[b"await-3"] == [("h", b"x3")]


async def test_keyed_records_keep_their_order_per_key(kafka):
    topic = create_topic(kafka, partitions=6)
    keys = [b"user-%d" % k for k in range(20)]
    futures = []
    async with Producer(kafka, linger_ms=2, config={"max.in.flight.requests.per.connection": 5}) as p:
        for i in range(6000):
            key = keys[i % len(keys)]
            futures.append((key, i, p.send_nowait(topic, b"%d" % i, key=key)))
        await p.flush()
    partition_of = {}
    for key, i, f in futures:
        meta = f.result()
        assert partition_of.setdefault(key, meta.partition) == meta.partition, key
    read = read_back(kafka, topic)
    assert len(read) == len(futures)
    seen = collections.defaultdict(list)
    for partition, _, key, value, _ in read:  # in partition and offset order
        assert partition == partition_of[key]
        seen[key].append(int(value))
    for key in keys:
        expected = [i for k, i, _ in futures if k == key]
        assert seen[key] == expected, f"{key!r} out of order"


async def test_a_record_the_broker_refuses_fails_typed_with_the_record(kafka):
    topic = create_topic(kafka, partitions=1, config={"max.message.bytes": "2000"})
    async with Producer(kafka, linger_ms=0) as p:
        big = b"x" * 5000
        with pytest.raises(BrokerError) as e:
            await p.send(topic, big, key=b"big", headers={"why": b"too large"})
        err = e.value
        assert isinstance(err, DeliveryError)
        assert err.code_name in ("MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE"), err.code_name
        assert err.possibly_persisted is False
        assert err.record.value == big and err.record.key == b"big"
        assert err.record.topic == topic
        assert err.record.headers == [("why", b"too large")]
        ok = await p.send(topic, b"small")
    read = read_back(kafka, topic)
    assert [(r[1], r[3]) for r in read] == [(ok.offset, b"small")]


async def test_a_record_over_max_request_size_is_refused_at_send(kafka):
    topic = create_topic(kafka, partitions=1)
    async with Producer(kafka, max_request_size=10_000) as p:
        with pytest.raises(RecordTooLarge) as e:
            p.send_nowait(topic, b"y" * 20_000)
        assert isinstance(e.value, SendError)
        assert e.value.record.value == b"y" * 20_000
        with pytest.raises(RecordTooLarge):
            await p.send(topic, b"y" * 20_000)
        [f] = p.send_batch([(topic, b"y" * 20_000)])
        with pytest.raises(RecordTooLarge):
            await f
        # A malformed item: the batch raises and none of it is taken.
        with pytest.raises(ValueError):
            p.send_batch([(topic, b"fine"), (topic,)])
        with pytest.raises(TypeError):
            p.send_batch([(topic, b"fine"), (topic, 42)])
        assert p.metrics()["buffered_records"] == 0
        [ok] = p.send_batch([(topic, b"fine", None, None, None, None)])
        await ok
    assert [r[3] for r in read_back(kafka, topic)] == [b"fine"]


async def test_no_broker_fails_each_record_by_delivery_timeout_unsent():
    # A port nothing listens on: each record fails at its delivery timeout, never sent.
    async with Producer(
        "127.0.0.1:1",
        linger_ms=0,
        request_timeout_ms=500,
        delivery_timeout_ms=1500,
        config={"reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 100},
    ) as p:
        futures = [p.send_nowait("nowhere", b"v%d" % i, partition=0) for i in range(5)]
        for i, f in enumerate(futures):
            with pytest.raises(DeliveryTimeoutError) as e:
                await f
            assert e.value.possibly_persisted is False
            assert e.value.record.value == b"v%d" % i


async def test_a_full_buffer_makes_send_nowait_raise_and_send_wait(kafka):
    topic = create_topic(kafka, partitions=3)
    # The queue-delay limit off: the buffer itself is what fills here.
    async with Producer(
        kafka,
        buffer_memory=256 * 1024,
        max_request_size=64 * 1024,
        linger_ms=20,
        config={"queue.delay.target.ms": 0},
    ) as p:
        futures = []
        value = b"z" * 1000
        with pytest.raises(BufferFull) as e:
            for i in range(10_000):
                futures.append(p.send_nowait(topic, value + b"%d" % i))
        assert e.value.record.value.startswith(value), "the refused record is handed back"
        accepted = len(futures)
        assert 100 < accepted < 10_000
        # `send` waits for room instead: many more than the buffer holds, all delivered.
        waited = await asyncio.gather(
            *(p.send(topic, b"w%d" % i + value) for i in range(3 * accepted))
        )
        assert len({(m.partition, m.offset) for m in waited}) == 3 * accepted
        await asyncio.gather(*futures)
    assert len(read_back(kafka, topic)) == 4 * accepted


def small_buffer_producer(kafka: str) -> Producer:
    """A producer whose buffer (64 KB) holds a fraction of what the waiting-line tests send,
    the queue-delay limit off: the buffer itself is what fills."""
    return Producer(
        kafka,
        buffer_memory=64 * 1024,
        max_request_size=16 * 1024,
        linger_ms=1,
        config={"queue.delay.target.ms": 0},
    )


def assert_written_in_order(kafka: str, topic: str, sent: list, why: str) -> None:
    """The futures' offsets rise in send order, and the topic's one partition holds the
    records in that order: value ``i`` (six digits first) as the ``i``-th record."""
    offsets = [m.offset for m in sent]
    assert offsets == sorted(offsets), why
    read = read_back(kafka, topic)
    assert [v[:6] for _, _, _, v, _ in read] == [b"%06d" % i for i in range(len(sent))]


async def test_a_send_behind_records_waiting_for_room_waits_in_line(kafka):
    """Sends made one after another from a task that lets the loop run between them, through
    a buffer far smaller than what is sent: a send made while records wait in line for room
    goes behind them, even when a report has freed room that the turn admitting the line has
    not taken yet, so the records are written in the order their sends were made."""
    topic = create_topic(kafka, partitions=1)
    n = 3_000
    async with small_buffer_producer(kafka) as p:
        futures = []
        for i in range(n):
            futures.append(p.send(topic, b"%06d" % i + b"w" * 200))
            if i % 8 == 0:
                await asyncio.sleep(0)  # the loop runs: reads, reports, turns
        sent = await asyncio.gather(*futures)
    assert_written_in_order(kafka, topic, sent, "a later send was taken ahead of one waiting in line")


async def test_sends_waiting_for_room_are_taken_in_order_without_a_retry_herd(kafka):
    """Many more ``send``s than the buffer holds: the waiting records are taken in the order
    they came, each delivered once, and a turn that frees room makes at most one try that
    fails (waking every waiting send at each report made thousands of them try again)."""
    topic = create_topic(kafka, partitions=1)
    async with small_buffer_producer(kafka) as p:
        tries = {"taken": 0, "refused": 0}
        room_turns = 0
        send_into, turn_poll = p._send_into, p._turn_poll

        def counting_send_into(fut, fail_refused, *record):
            taken = send_into(fut, fail_refused, *record)
            tries["taken" if taken else "refused"] += 1
            return taken

        def counting_turn_poll(timer_fired):
            nonlocal room_turns
            out = turn_poll(timer_fired)
            if out[2] and p._room_waiters:
                room_turns += 1
            return out

        p._send_into = counting_send_into  # the waiting line tries through the instance
        p._turn_poll = counting_turn_poll
        n = 5_000
        value = b"q" * 200
        sent = await asyncio.gather(*(p.send(topic, b"%06d" % i + value) for i in range(n)))
    assert tries["taken"] > n // 2, "most records waited for room"
    assert tries["refused"] <= room_turns, tries
    assert_written_in_order(kafka, topic, sent, "the waiting records were taken in the order they came")


async def test_cancelling_sends(kafka):
    """Cancelled while waiting for room: the record is not sent. Cancelled once accepted: the
    record is still delivered; only its result is given up (and counted)."""
    topic = create_topic(kafka, partitions=1)
    async with Producer(kafka, buffer_memory=64 * 1024, max_request_size=16 * 1024, linger_ms=50) as p:
        fill = []
        with pytest.raises(BufferFull):
            while True:
                fill.append(p.send_nowait(topic, b"f" * 1000))
        waiting = asyncio.ensure_future(p.send(topic, b"never-sent"))
        await asyncio.sleep(0)  # it runs up to its wait for room
        assert not waiting.done()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await asyncio.gather(*fill)

        accepted = asyncio.ensure_future(p.send(topic, b"sent-anyway"))
        await asyncio.sleep(0)  # accepted into the core, awaiting its report
        accepted.cancel()
        with pytest.raises(asyncio.CancelledError):
            await accepted
        nowait = p.send_nowait(topic, b"nowait-cancelled")
        nowait.cancel()
        await p.flush()
        assert p.metrics()["reports_of_cancelled_sends"] == 2
    values = [r[3] for r in read_back(kafka, topic)]
    assert b"never-sent" not in values
    assert values.count(b"sent-anyway") == 1 and values.count(b"nowait-cancelled") == 1
    assert len(values) == len(fill) + 2


def test_runs_unchanged_on_uvloop(kafka):
    topic = create_topic(kafka, partitions=3)

    async def main():
        assert isinstance(asyncio.get_running_loop(), uvloop.Loop)
        async with Producer(kafka) as p:
            metas = [await p.send(topic, b"u%d" % i, key=b"k") for i in range(50)]
            futures = p.send_batch([(topic, b"b%d" % i) for i in range(500)])
            await p.flush()
            return metas + [f.result() for f in futures]

    metas = uvloop.run(main())
    read = read_back(kafka, topic)
    assert sorted((r[0], r[1]) for r in read) == sorted((m.partition, m.offset) for m in metas)


async def test_settings_are_checked_by_the_core(kafka):
    from kafka_sansio import ConfigError

    with pytest.raises(ConfigError):
        Producer(kafka, config={"linger.ms": "soon"})
    with pytest.raises(ConfigError):
        Producer(kafka, config={"no.such.setting": 1})
    with pytest.raises(TypeError):
        Producer(kafka, lingerms=5)
