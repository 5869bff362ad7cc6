"""What the suite needs from outside: the clusters the Rust harness started
(tests/tests/python_asyncio.rs passes their addresses in the environment), and an independent
party to check against: confluent-kafka (librdkafka) creates the topics and reads the records
back.

Each fixture skips its tests when its variable is unset, except under the harness
(KAFKA_SANSIO_REQUIRE=1), where a missing variable fails the test instead: nothing is skipped
silently.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Dict, List, Optional, Tuple

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        if os.environ.get("KAFKA_SANSIO_REQUIRE") == "1":
            pytest.fail(f"{name} is not set: the harness must provide it")
        pytest.skip(f"{name} is not set")
    return value


@pytest.fixture
def kafka() -> str:
    """The single-node Apache Kafka cluster's bootstrap list."""
    return env("KAFKA_BOOTSTRAP")


@pytest.fixture
def mock() -> str:
    """librdkafka's mock cluster's bootstrap list."""
    return env("MOCK_BOOTSTRAP")


class Cluster3:
    def __init__(self) -> None:
        self.bootstrap = env("KAFKA3_BOOTSTRAP")
        # "node:pid,node:pid,..."
        self.pids: Dict[int, int] = {
            int(n): int(p) for n, p in (x.split(":") for x in env("KAFKA3_PIDS").split(","))
        }


@pytest.fixture
def cluster3() -> Cluster3:
    """The three-node cluster, with its brokers' process ids for the kill test."""
    return Cluster3()


class Secured:
    def __init__(self) -> None:
        self.plain = env("SECURED_PLAIN_BOOTSTRAP")  # plaintext: admin and read-back
        self.ssl = env("SECURED_SSL_BOOTSTRAP")
        self.sasl_ssl = env("SECURED_SASL_SSL_BOOTSTRAP")
        self.sasl_plaintext = env("SECURED_SASL_PLAINTEXT_BOOTSTRAP")
        self.ca = env("SECURED_CA")
        user = env("SECURED_SCRAM_USER")
        self.scram_user, self.scram_password = user.split(":", 1)


@pytest.fixture
def secured() -> Secured:
    """The secured node: TLS and SASL listeners, the test CA, a SCRAM user."""
    return Secured()


def create_topic(
    bootstrap: str,
    partitions: int = 6,
    replication: int = 1,
    config: Optional[Dict[str, str]] = None,
    prefix: str = "py",
) -> str:
    """A new topic of its own, created with librdkafka's admin client; returns its name."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, partitions, replication, config=config or {})], operation_timeout=30
    )
    futures[name].result(60)
    return name


Read = Tuple[int, int, Optional[bytes], Optional[bytes], List[Tuple[str, Optional[bytes]]]]


def read_back(
    bootstrap: str, topic: str, isolation: str = "read_committed", timeout: float = 120.0
) -> List[Read]:
    """Every record of ``topic`` as librdkafka's consumer reads it, ``(partition, offset, key,
    value, headers)`` in partition and offset order: read until each partition's position
    reaches its high watermark (taken once the producer is done)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"readback-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=30)
        parts = sorted(meta.topics[topic].partitions)
        ends = {}
        for p in parts:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        out: List[Read] = []
        give_up = time.monotonic() + timeout
        pending = {p for p in parts if ends[p] > 0}
        while pending:
            if time.monotonic() > give_up:
                raise AssertionError(f"read-back of {topic} did not reach {ends} in {timeout} s")
            for m in consumer.consume(10000, timeout=0.5):
                if m.error():
                    raise KafkaException(m.error())
                out.append((m.partition(), m.offset(), m.key(), m.value(), m.headers() or []))
            at = {tp.partition: tp.offset for tp in consumer.position(
                [TopicPartition(topic, p) for p in pending])}
            pending = {p for p in pending if at[p] < ends[p]}
        out.sort(key=lambda r: (r[0], r[1]))
        return out
    finally:
        consumer.close()
