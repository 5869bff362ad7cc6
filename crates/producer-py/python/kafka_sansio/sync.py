"""The synchronous producer, for scripts: no asyncio loop; the core runs on the Rust mio
driver's own thread (``ThreadedProducer``), which owns the sockets.

Delivery callbacks run on the caller's thread, in ``poll`` and ``flush`` (as with
confluent-kafka)::

    from kafka_sansio import SyncProducer

    with SyncProducer("localhost:9092", linger_ms=5) as p:
        for i in range(1000):
            p.produce("events", b"%d" % i, on_delivery=lambda err, meta: ...)
            p.poll(0)
        p.flush()
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Union

from . import _core
from ._settings import kafka_settings

__all__ = ["SyncProducer"]


class SyncProducer(_core.SyncCore):
    """A synchronous Kafka producer.

    ``SyncProducer(bootstrap_servers, config={...}, **keywords)`` takes the settings as the
    asyncio ``Producer`` does (TLS by the Rust driver from ``ssl.*`` names).
    ``produce(topic, value, key=None, headers=None, partition=None, timestamp=None,
    on_delivery=None)`` queues a record; ``on_delivery(error, metadata)`` runs later in
    ``poll(timeout)`` or ``flush(timeout=None)``, with a ``DeliveryError`` (``record`` and
    ``possibly_persisted`` on it) or a ``RecordMetadata``. A full queue makes ``produce``
    serve reports while it waits for room, up to ``max.block.ms``, then raise
    ``BufferFull``. ``close()`` (or leaving a ``with`` block) sends everything, waits for
    every report and runs the last callbacks.
    """

    def __init__(
        self,
        bootstrap_servers: Union[str, Iterable[str]] = "localhost:9092",
        *,
        config: Optional[Mapping[str, Any]] = None,
        **keywords: Any,
    ) -> None:
        self._configure(kafka_settings(bootstrap_servers, config, keywords))

    def __enter__(self) -> "SyncProducer":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close()
