"""A three-node Apache Kafka cluster: a broker killed (SIGKILL) while an idempotent producer
streams records: every record is acknowledged, and read back exactly once (nothing lost, no
duplicate), each key's records in order."""

from __future__ import annotations

import asyncio
import collections
import os
import signal

import pytest

from kafka_sansio import BufferFull, Producer

from conftest import create_topic, read_back

pytestmark = pytest.mark.cluster3


async def test_a_broker_killed_mid_run_loses_and_duplicates_nothing(cluster3):
    topic = create_topic(
        cluster3.bootstrap, partitions=6, replication=3, config={"min.insync.replicas": "2"}
    )
    total, killed_at = 30_000, 8_000
    keys = [b"key-%d" % k for k in range(12)]
    futures = []
    async with Producer(
        cluster3.bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        request_timeout_ms=5000,
        delivery_timeout_ms=120_000,
        config={"retry.backoff.ms": 50, "reconnect.backoff.ms": 50},
    ) as p:
        victim = None
        for i in range(total):
            record = (topic, b"%d" % i, keys[i % len(keys)])
            try:
                futures.append(p.send_nowait(*record))
            except BufferFull:
                await p.flush()
                futures.append(p.send_nowait(*record))
            if i == killed_at:
                # Killed with records in flight and most of the run still to come.
                victim = sorted(cluster3.pids)[1]
                os.kill(cluster3.pids[victim], signal.SIGKILL)
            if i % 500 == 0:
                await asyncio.sleep(0)  # let the loop read and write between bursts
        await p.flush()
        assert p.metrics()["disconnects"] >= 1, "the producer lost its connection to the victim"
    assert victim is not None
    metas = [f.result() for f in futures]  # each acknowledged (raises if any failed)
    read = read_back(cluster3.bootstrap, topic)
    values = [int(r[3]) for r in read]
    assert len(values) == len(set(values)), "no duplicates"
    assert sorted(values) == list(range(total)), "nothing lost"
    at = {int(r[3]): (r[0], r[1]) for r in read}
    for i, m in enumerate(metas):
        assert at[i] == (m.partition, m.offset)
    per_key = collections.defaultdict(list)
    for partition, offset, key, value, _ in read:
        per_key[key].append(int(value))
    for key, vs in per_key.items():
        assert vs == sorted(vs), f"{key!r} out of order"
