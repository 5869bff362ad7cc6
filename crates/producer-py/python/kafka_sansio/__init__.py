"""kafka_sansio: an asyncio Kafka producer whose event loop owns the sockets.

The application's running loop (asyncio's, or uvloop's) opens the connections, resolves the
names and does TLS; a compiled sans-IO core (the Rust crate ``producer-core``) speaks Kafka:
batching, partitioning, idempotence, transactions, retries, SASL. No thread is started.

Example::

    import asyncio
    from kafka_sansio import Producer

    async def main():
        async with Producer("localhost:9092", linger_ms=5) as producer:
            meta = await producer.send("events", b"hello", key=b"user-1")
            print(meta.partition, meta.offset)
            futures = [producer.send_nowait("events", b"%d" % i) for i in range(1000)]
            await producer.flush()

    asyncio.run(main())
"""

from ._core import __version__
from ._producer import Producer, Record, RecordMetadata
from .sync import SyncProducer
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors_all

__all__ = ["Producer", "SyncProducer", "Record", "RecordMetadata", "__version__", *_errors_all]
