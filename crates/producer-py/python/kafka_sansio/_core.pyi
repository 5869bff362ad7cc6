"""Type stubs of the extension module kafka_sansio._core (the Rust half)."""

import asyncio
from typing import Any, Iterable, List, Optional, Tuple

__version__: str

class RecordMetadata:
    """A delivered record: where it was written."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...

class Record:
    """A record handed back by a failure or refusal, as it was sent."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> Optional[int]: ...
    @property
    def key(self) -> Optional[bytes]: ...
    @property
    def value(self) -> Optional[bytes]: ...
    @property
    def headers(self) -> List[Tuple[str, Optional[bytes]]]: ...
    @property
    def timestamp(self) -> Optional[int]: ...

Payload = Optional[bytes | bytearray | str]

class Core:
    """The sans-IO core attached to an asyncio loop; subclassed by ``Producer``."""

    def send_nowait(
        self,
        topic: str,
        value: Payload = None,
        key: Payload = None,
        headers: Any = None,
        partition: Optional[int] = None,
        timestamp: Optional[int] = None,
    ) -> "asyncio.Future[RecordMetadata]":
        """Takes the record without waiting; the future of its report. Raises a ``SendError``
        (``BufferFull`` when the buffer is full), the record handed back."""
    def send_batch(
        self, records: Iterable[Tuple[Any, ...]]
    ) -> "List[asyncio.Future[RecordMetadata]]":
        """Many records in one call, ``(topic, value[, key[, headers[, partition[,
        timestamp]]]])`` each: one future per record; a refused record's future fails with
        its ``SendError``."""
    def metrics(self) -> dict:
        """The producer's metrics under Java's names, plus ``buffered_records``,
        ``buffered_bytes``, ``connections``, ``disconnects`` and ``reports_of_cancelled_sends``."""

class SyncCore:
    """The synchronous producer on the Rust mio driver's thread; subclassed by
    ``SyncProducer``."""

    def produce(
        self,
        topic: str,
        value: Payload = None,
        key: Payload = None,
        headers: Any = None,
        partition: Optional[int] = None,
        timestamp: Optional[int] = None,
        on_delivery: Optional[Any] = None,
    ) -> None:
        """Queues a record; ``on_delivery(error, metadata)`` runs in a later ``poll`` or
        ``flush``."""
    def poll(self, timeout: float = 0.0) -> int:
        """Runs the callbacks of the reports that arrived (waiting up to ``timeout`` s)."""
    def flush(self, timeout: Optional[float] = None) -> int:
        """Waits until every record has its report, then runs the callbacks."""
    def close(self) -> int:
        """Sends everything, waits for every report, stops the thread, runs the callbacks."""
    def metrics(self) -> dict:
        """The producer's metrics under Java's names."""
