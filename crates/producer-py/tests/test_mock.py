"""Against librdkafka's mock cluster (started by the harness): a broker error the harness
injected, which must fail exactly the records of the first Produce request with a typed error
and the record handed back, and a buffer held full by a slow broker, where ``send`` waits up
to ``max.block.ms`` and then raises ``BufferFull``."""

from __future__ import annotations

import asyncio

import pytest

from kafka_sansio import BrokerError, BufferFull, Producer

from conftest import env

pytestmark = pytest.mark.mock


async def test_an_injected_broker_error_fails_its_record_typed(mock):
    # The harness pushed CORRUPT_MESSAGE (2, not retried) for the mock's first Produce
    # request: the first record's batch gets it; the next one is written.
    async with Producer(mock, linger_ms=0, enable_idempotence=False, acks=1) as p:
        with pytest.raises(BrokerError) as e:
            await p.send("py-mock", b"first", key=b"k", partition=0)
        assert e.value.code == 2 and e.value.code_name == "CORRUPT_MESSAGE"
        assert e.value.possibly_persisted is False
        assert e.value.record.value == b"first" and e.value.record.partition == 0
        meta = await p.send("py-mock", b"second", key=b"k", partition=0)
        assert (meta.topic, meta.partition) == ("py-mock", 0)


async def test_send_waits_for_room_up_to_max_block_then_raises_buffer_full():
    # Its first Produce request is answered at once, the next ones after 2 s each.
    slow = env("MOCK_SLOW_BOOTSTRAP")
    async with Producer(
        slow, buffer_memory=64 * 1024, max_request_size=16 * 1024, max_block_ms=300,
        linger_ms=0,
    ) as p:
        await p.send("py-slow", b"metadata known", partition=0)
        held = []
        with pytest.raises(BufferFull):
            while True:
                held.append(p.send_nowait("py-slow", b"q" * 1000, partition=0))
        loop = asyncio.get_running_loop()
        began = loop.time()
        late = b"late" + b"q" * 996  # as large as the record refused: no room for it
        with pytest.raises(BufferFull) as e:
            await p.send("py-slow", late, partition=0)
        assert loop.time() - began >= 0.3, "it waited for max.block.ms first"
        assert e.value.record.value == late
        assert not any(f.done() for f in held), "the buffer was still full"
        metas = await asyncio.gather(*held)
        assert len({m.offset for m in metas}) == len(held)
