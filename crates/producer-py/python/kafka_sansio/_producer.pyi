import asyncio
import ssl
from typing import Any, Awaitable, Callable, Iterable, Mapping, Optional, Union

from ._core import Core, Record as Record, RecordMetadata as RecordMetadata

class _Transaction:
    async def __aenter__(self) -> "Producer": ...
    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool: ...

class Producer(Core):
    def __init__(
        self,
        bootstrap_servers: Union[str, Iterable[str]] = ...,
        *,
        config: Optional[Mapping[str, Any]] = ...,
        ssl_context: Optional[ssl.SSLContext] = ...,
        oauth_token_provider: Optional[Callable[[], Any]] = ...,
        client_id: Optional[str] = ...,
        acks: Union[int, str, None] = ...,
        compression_type: Optional[str] = ...,
        max_batch_size: Optional[int] = ...,
        batch_size: Optional[int] = ...,
        linger_ms: Optional[int] = ...,
        max_request_size: Optional[int] = ...,
        metadata_max_age_ms: Optional[int] = ...,
        request_timeout_ms: Optional[int] = ...,
        retry_backoff_ms: Optional[int] = ...,
        delivery_timeout_ms: Optional[int] = ...,
        buffer_memory: Optional[int] = ...,
        max_block_ms: Optional[int] = ...,
        max_in_flight_requests_per_connection: Optional[int] = ...,
        enable_idempotence: Optional[bool] = ...,
        transactional_id: Optional[str] = ...,
        transaction_timeout_ms: Optional[int] = ...,
        security_protocol: Optional[str] = ...,
        sasl_mechanism: Optional[str] = ...,
        sasl_plain_username: Optional[str] = ...,
        sasl_plain_password: Optional[str] = ...,
        ssl_cafile: Optional[str] = ...,
        ssl_certfile: Optional[str] = ...,
        ssl_keyfile: Optional[str] = ...,
    ) -> None: ...
    async def start(self) -> None: ...
    async def close(self, timeout: Optional[float] = ...) -> None: ...
    async def stop(self, timeout: Optional[float] = ...) -> None: ...
    async def __aenter__(self) -> "Producer": ...
    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None: ...
    def send(
        self,
        topic: str,
        value: Any = ...,
        key: Any = ...,
        headers: Any = ...,
        partition: Optional[int] = ...,
        timestamp: Optional[int] = ...,
    ) -> Awaitable[RecordMetadata]:
        """``await`` it: the record's metadata once acknowledged (waits for room in the buffer
        first when it is full, up to ``max.block.ms``)."""
    async def flush(self) -> None: ...
    def transaction(self) -> _Transaction: ...
    async def begin_transaction(self) -> None: ...
    async def commit_transaction(self) -> None: ...
    async def abort_transaction(self) -> None: ...
    async def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group_id: str) -> None: ...
