"""The exceptions of kafka_sansio, mirroring the core's errors.

Three families, each under :class:`KafkaError`:

* :class:`SendError`: ``send`` / ``send_nowait`` refused the record, which was never sent
  (``record`` hands it back). :class:`BufferFull` is raised by ``send_nowait`` when the buffer
  (``buffer.memory``) is full; ``send`` waits for room instead, up to ``max.block.ms``.
* :class:`DeliveryError`: the record was accepted and failed; a record's future fails with it.
  ``possibly_persisted`` says whether an earlier attempt may have been written (a retry after a
  lost answer, say); ``record`` hands the record back.
* :class:`TransactionError`: a transactional operation was refused or failed
  (``operation`` names it).

The Rust extension builds these from the core's error values (``convert.rs``), one class per
error, so the mapping lives in one place.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = [
    "KafkaError",
    "ConfigError",
    "SendError",
    "BufferFull",
    "RecordTooLarge",
    "ProducerClosed",
    "NoTransaction",
    "ProducerFailed",
    "InvalidPartition",
    "InvalidTopic",
    "DeliveryError",
    "BrokerError",
    "InvalidRecordError",
    "BatchRejectedError",
    "DeliveryTimeoutError",
    "UnknownTopicError",
    "UnknownPartitionError",
    "RecordRefusedError",
    "AuthenticationError",
    "ProducerClosedError",
    "TransactionAbortedError",
    "TransactionInDoubtError",
    "PurgedError",
    "CloseTimedOutError",
    "TransactionError",
    "TransactionAbortableError",
    "TransactionFatalError",
    "TransactionStateError",
    "TransactionInProgressError",
    "TransactionOperationTimedOut",
]


class KafkaError(Exception):
    """Every exception of this package."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        for name, value in details.items():
            setattr(self, name, value)


class ConfigError(KafkaError, ValueError):
    """A setting the core's property parser refused (unknown name, bad value, settings that do
    not go together)."""


class SendError(KafkaError):
    """The record was refused and never sent; ``record`` hands it back."""

    record: Any

    def __init__(self, message: str, record: Any = None, **details: Any) -> None:
        super().__init__(message, record=record, **details)


class BufferFull(SendError):
    """``buffer.memory`` is full (``send_nowait``; ``send`` waits for room up to
    ``max.block.ms`` and raises this only then)."""


class RecordTooLarge(SendError):
    """The record is larger than ``max.request.size``."""


class ProducerClosed(SendError):
    """The producer is closed (or closing)."""


class NoTransaction(SendError):
    """A transactional producer with no transaction open: ``begin`` first."""


class ProducerFailed(SendError):
    """The producer failed for good earlier (fenced, a fatal broker answer)."""


class InvalidPartition(SendError):
    """A negative partition number."""


class InvalidTopic(SendError):
    """A topic name outside Kafka's rules."""


class DeliveryError(KafkaError):
    """An accepted record failed. ``possibly_persisted``: an earlier attempt may have been
    written; ``record``: the record, handed back."""

    record: Any
    possibly_persisted: bool

    def __init__(
        self, message: str, record: Any = None, possibly_persisted: bool = False, **details: Any
    ) -> None:
        super().__init__(
            message, record=record, possibly_persisted=possibly_persisted, **details
        )


class BrokerError(DeliveryError):
    """The broker answered the record's batch with an error it is not retried for (or retries
    ran out). ``code`` and ``code_name``: Kafka's error code."""

    code: int
    code_name: str


class InvalidRecordError(BrokerError):
    """The broker rejected this record of its batch (KIP-467)."""


class BatchRejectedError(BrokerError):
    """The broker rejected the batch for another record in it; this one was not written."""


class DeliveryTimeoutError(DeliveryError):
    """``delivery.timeout.ms`` passed before the record was acknowledged."""


class UnknownTopicError(DeliveryError):
    """The topic does not exist (after ``max.block.ms``)."""


class UnknownPartitionError(DeliveryError):
    """The partition asked for does not exist."""


class RecordRefusedError(DeliveryError):
    """The record was refused after it was accepted (it waited for its topic's metadata)."""


class AuthenticationError(DeliveryError):
    """SASL or TLS failed on the connection the record needed."""


class ProducerClosedError(DeliveryError):
    """The producer closed before the record could be sent."""


class TransactionAbortedError(DeliveryError):
    """The record's transaction was aborted."""


class TransactionInDoubtError(DeliveryError):
    """The producer closed before its transaction's commit was answered."""


class PurgedError(DeliveryError):
    """The record was purged before it was acknowledged."""


class CloseTimedOutError(DeliveryError):
    """``close(timeout=...)`` passed its deadline before the record was acknowledged."""


class TransactionError(KafkaError):
    """A transactional operation was refused or failed; ``operation`` names it."""

    operation: Optional[str]

    def __init__(self, message: str, operation: Optional[str] = None, **details: Any) -> None:
        super().__init__(message, operation=operation, **details)


class TransactionAbortableError(TransactionError):
    """The open transaction cannot commit (a record failed, the transaction timed out): abort
    it and begin the next."""


class TransactionFatalError(TransactionError):
    """The producer failed for good (fenced by another with the same transactional id, not
    authorized): close it."""


class TransactionStateError(TransactionError):
    """The operation is not allowed now (a commit with no transaction open, a second init)."""


class TransactionInProgressError(TransactionError):
    """Another transactional operation has not completed yet."""


class TransactionOperationTimedOut(TransactionError):
    """The operation did not complete within ``max.block.ms``; it goes on, and calling it
    again waits for its result."""
