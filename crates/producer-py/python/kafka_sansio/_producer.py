"""The asyncio driver and the Producer API.

The running loop owns everything that is I/O: it opens the connections the core asks for
(``loop.create_connection`` with a :class:`_Connection` protocol; names resolved by the loop,
TLS by Python's ``ssl``), hands what it reads to the core, and arms the core's one deadline with
one ``loop.call_at`` handle. No thread is started, so it runs unchanged on uvloop.

The Rust half (``_core.Core``, subclassed here) owns the core: ``send_nowait`` takes a record
into it in one call, and ``_turn_poll`` (once per loop turn in which something happened)
drains its outputs, resolves every report's future, writes to the transports, and hands back
only what needs the loop.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import ssl
from collections import deque
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Union

from . import _core
from ._settings import kafka_settings
from .errors import ConfigError

__all__ = ["Producer", "RecordMetadata", "Record"]

RecordMetadata = _core.RecordMetadata
Record = _core.Record

_log = logging.getLogger("kafka_sansio")

# The slack added to the core's deadline: a loop timer may fire a hair before the instant the
# core computed from its own clock reading.
_TIMER_SLACK = 0.0001


def _future_factory(loop: asyncio.AbstractEventLoop) -> Optional[Callable[[], Any]]:
    """How the record futures are made: asyncio's own loops' ``create_future`` is a Python
    method around the C ``Future`` class, so the class is called directly (one Python frame
    less per record); any other loop (uvloop's is C already) makes its own."""
    if type(loop).create_future is asyncio.BaseEventLoop.create_future:
        return functools.partial(asyncio.Future, loop=loop)
    return None


class _Connection(asyncio.Protocol):
    """One broker connection: what the loop reads goes to the core; its loss is reported."""

    __slots__ = ("_producer", "_id")

    def __init__(self, producer: "Producer", conn_id: int) -> None:
        self._producer = producer
        self._id = conn_id

    def data_received(self, data: bytes) -> None:
        self._producer._read(self._id, data)

    def eof_received(self) -> None:
        return None  # the transport closes; connection_lost reports it

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        p = self._producer
        p._transports.pop(self._id, None)
        if exc is None:
            p._lost(self._id, None, None)
        else:
            p._lost(self._id, getattr(exc, "errno", None), str(exc) or repr(exc))
        p._turn_soon()


class _Transaction:
    """``async with producer.transaction():`` begins a transaction, commits it when the block
    ends normally and aborts it when the block raises."""

    def __init__(self, producer: "Producer") -> None:
        self._producer = producer

    async def __aenter__(self) -> "Producer":
        await self._producer.begin_transaction()
        return self._producer

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if exc_type is None:
            await self._producer.commit_transaction()
        else:
            await self._producer.abort_transaction()
        return False


class Producer(_core.Core):
    """An asyncio Kafka producer. The running loop owns its connections.

    ``Producer(bootstrap_servers="host:9092", config={"linger.ms": 5}, linger_ms=5, ...)``:
    settings by Kafka's names in ``config`` (the core's property parser checks them), or as
    aiokafka-style keywords (``linger_ms``, ``acks``, ``enable_idempotence``,
    ``transactional_id``, ``security_protocol``, ``sasl_mechanism``, ``sasl_plain_username``,
    ...). ``ssl_context``: the ``ssl.SSLContext`` for ``SSL`` / ``SASL_SSL`` (else one is built
    from ``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``,
    ``ssl.endpoint.identification.algorithm``). ``oauth_token_provider``: for
    ``SASL OAUTHBEARER``, a callable (or coroutine function) returning ``(token,
    lifetime_seconds)``.

    Use it as ``async with Producer(...) as p:`` (or ``await p.start()`` ... ``await
    p.close()``). A transactional producer (``transactional_id``) initialises its transactions
    in ``start``. In a transaction, the core hands a record's report over when the
    transaction ends (its commit or abort answered): awaiting ``send`` inside the transaction
    would wait for that end (and so would ``flush``), so send with ``send_nowait`` or
    ``send_batch`` there and await the futures after the block.

    Cancellation: cancelling a task awaiting ``send`` before the record was accepted (while it
    waits for room in the buffer) means the record is not sent. Once accepted, a record is
    not un-sent: cancelling the await (or the future of ``send_nowait``) only gives up its
    result; the record is still delivered or fails, a failure is logged at WARNING, and
    ``metrics()["reports_of_cancelled_sends"]`` counts such reports. To keep the result,
    shield it (``await asyncio.shield(fut)``).
    """

    def __init__(
        self,
        bootstrap_servers: Union[str, Iterable[str]] = "localhost:9092",
        *,
        config: Optional[Mapping[str, Any]] = None,
        ssl_context: Optional[ssl.SSLContext] = None,
        oauth_token_provider: Optional[Callable[[], Any]] = None,
        **keywords: Any,
    ) -> None:
        settings = kafka_settings(bootstrap_servers, config, keywords)
        if ssl_context is not None and not any(n == "security.protocol" for n, _ in settings):
            settings.append(("security.protocol", "SSL"))
        self._configure(settings, ssl_context is not None)
        self._ssl_context = ssl_context
        self._token_provider = oauth_token_provider
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._ssl: Optional[ssl.SSLContext] = None
        self._timer: Optional[asyncio.TimerHandle] = None
        self._timer_at = 0.0
        self._connecting: Dict[int, asyncio.Task] = {}
        self._transports: Dict[int, asyncio.BaseTransport] = {}
        # Records ``send`` found no room for: ``(future, deadline, record)``, in order.
        self._room_waiters: deque = deque()
        self._room_timer: Optional[asyncio.TimerHandle] = None
        self._close_future: Optional[asyncio.Future] = None

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Attaches the producer to the running loop (it connects at once); a transactional
        producer initialises its transactions (fencing an earlier producer with its id)."""
        if self._loop is not None:
            return
        self._ssl = self._make_ssl()
        self._loop = loop = asyncio.get_running_loop()
        self._attach(loop, self._turn, _future_factory(loop))
        if self._is_transactional():
            await self._transaction_call("init")

    async def close(self, timeout: Optional[float] = None) -> None:
        """Stops taking records, sends everything buffered and waits until every record has
        its report (a transactional producer aborts an open transaction). With ``timeout``
        (seconds), records still unacknowledged then fail (``PurgedError`` if never sent,
        ``CloseTimedOutError`` if sent)."""
        if self._loop is None:
            return
        if self._close_future is None:
            self._close_future = self._loop.create_future()
            self._close(self._close_future, timeout)
        await asyncio.shield(self._close_future)
        self._shut()

    stop = close

    async def __aenter__(self) -> "Producer":
        await self.start()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        await self.close()

    # -- records -----------------------------------------------------------------------------

    # ``send`` is the Rust class's own (``_core.Core.send``): ``await producer.send(topic,
    # value, key=None, headers=None, partition=None, timestamp=None)`` returns the record's
    # ``RecordMetadata`` once it is acknowledged, or raises its ``DeliveryError``. When the
    # record is taken at once it hands back the record's future itself; when the buffer is
    # full, the future ``_send_slow`` hands back.
    def _send_slow(self, *record: Any) -> "asyncio.Future[RecordMetadata]":
        """The future of a record ``send`` found no room for. The record waits in line
        (``_room_waiters``) until a turn that frees room takes it (``_admit_waiting``, first
        come first taken), the future then being the record's own (resolved by its report),
        or until ``max.block.ms`` has passed (``_expire_waiting``: the future fails with
        ``BufferFull``, the record handed back). A future cancelled while its record waits
        takes the record out of line: it is not sent. One future and one timer for the whole
        line: no task, no timer per waiting record."""
        loop = self._require_loop()
        fut = loop.create_future()
        deadline = loop.time() + self._max_block()
        self._room_waiters.append((fut, deadline, record))
        if self._room_timer is None:
            self._room_timer = loop.call_at(deadline, self._expire_waiting)
        return fut

    def _admit_waiting(self) -> None:
        """Takes the records waiting for room, first come first taken, until one is refused
        for want of room: that one and those behind it wait for the next turn that frees room.
        Each waiting record is tried once when taken, and a call makes at most one try that
        fails, however many records wait. A refusal other than a full buffer (the producer
        closed) fails that record's future."""
        waiters = self._room_waiters
        while waiters:
            fut, _, record = waiters[0]
            if not fut.done():  # (done: cancelled by its caller, so not sent)
                try:
                    taken = self._send_into(fut, False, *record)
                except Exception as e:  # the producer unusable (not configured)
                    taken = False
                    if not fut.done():
                        fut.set_exception(e)
                if not taken and not fut.done():
                    return
            waiters.popleft()

    def _expire_waiting(self) -> None:
        """The timer of the line's first deadline: each record that waited ``max.block.ms``
        is taken if there is room now, else its future fails with ``BufferFull``."""
        loop = self._loop
        self._room_timer = None
        if loop is None:
            return
        now = loop.time()
        waiters = self._room_waiters
        while waiters and waiters[0][1] <= now:
            fut, _, record = waiters.popleft()
            if not fut.done():
                try:
                    self._send_into(fut, True, *record)
                except Exception as e:
                    if not fut.done():
                        fut.set_exception(e)
        if waiters:
            self._room_timer = loop.call_at(waiters[0][1], self._expire_waiting)

    async def flush(self) -> None:
        """Sends every buffered record now (ignoring ``linger.ms``) and returns once each
        record sent before the call has its report."""
        fut = self._require_loop().create_future()
        self._flush(fut)
        await fut

    # -- transactions ------------------------------------------------------------------------

    def transaction(self) -> _Transaction:
        """``async with producer.transaction():`` begin; commit at the end of the block, abort
        if it raises."""
        return _Transaction(self)

    async def begin_transaction(self) -> None:
        """Opens a transaction: records sent from now on belong to it."""
        await self._transaction_call("begin")

    async def commit_transaction(self) -> None:
        """Commits the open transaction once each of its records is acknowledged; raises
        ``TransactionAbortableError`` if a record of it failed (abort then)."""
        await self._transaction_call("commit")

    async def abort_transaction(self) -> None:
        """Aborts the open transaction: its records fail with ``TransactionAbortedError``."""
        await self._transaction_call("abort")

    async def send_offsets_to_transaction(
        self, offsets: Mapping[Any, Any], group_id: str
    ) -> None:
        """Adds a consumer group's offsets to the open transaction (committed with it):
        ``offsets`` maps ``(topic, partition)`` (or an object with ``topic`` and
        ``partition``) to the next offset to read (an int, or an object with ``offset``)."""
        items = []
        for tp, off in offsets.items():
            topic, partition = (tp.topic, tp.partition) if hasattr(tp, "topic") else tp
            items.append((topic, int(partition), int(getattr(off, "offset", off))))
        await self._transaction_call("send_offsets", items, group_id)

    async def _transaction_call(
        self, op: str, offsets: Any = None, group_id: Optional[str] = None
    ) -> None:
        fut = self._require_loop().create_future()
        self._transaction(op, fut, offsets, group_id)
        await fut

    # -- the driver's loop side --------------------------------------------------------------

    def _require_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError(
                "the producer is not started: `async with Producer(...)` or `await start()` first"
            )
        return self._loop

    def _turn_soon(self) -> None:
        # Inputs from Python code (connection_lost) that Rust did not schedule a turn for.
        if self._loop is not None:
            self._loop.call_soon(self._turn)

    def _turn(self, timer_fired: bool = False) -> None:
        actions, delay, reports = self._turn_poll(timer_fired)
        if actions is not None:
            self._act(actions)
        if reports and self._room_waiters:
            self._admit_waiting()
        if delay is not None and self._loop is not None:
            self._arm(delay)

    def _arm(self, delay: float) -> None:
        loop = self._loop
        assert loop is not None
        at = loop.time() + delay + _TIMER_SLACK
        if self._timer is not None:
            if self._timer_at <= at:
                return  # an earlier wake-up is armed; its turn arms the next one
            self._timer.cancel()
        self._timer_at = at
        self._timer = loop.call_at(at, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._turn(True)

    def _act(self, actions: list) -> None:
        loop = self._loop
        for action in actions:
            kind = action[0]
            if kind == "connect":
                _, conn_id, host, port = action
                if loop is not None:
                    self._connecting[conn_id] = loop.create_task(
                        self._connect(conn_id, host, port)
                    )
            elif kind == "disconnect":
                conn_id = action[1]
                task = self._connecting.pop(conn_id, None)
                if task is not None:
                    task.cancel()
                transport = self._transports.pop(conn_id, None)
                if transport is not None:
                    transport.abort()
            elif kind == "event":
                _log.log(action[1], "%s", action[2])
            elif kind == "token":
                if loop is not None:
                    loop.create_task(self._fetch_token())
            elif kind == "closed":
                self._admit_waiting()

    async def _connect(self, conn_id: int, host: str, port: int) -> None:
        loop = self._loop
        assert loop is not None
        try:
            transport, _ = await loop.create_connection(
                lambda: _Connection(self, conn_id),
                host,
                port,
                ssl=self._ssl,
                server_hostname=host if self._ssl is not None else None,
            )
        except asyncio.CancelledError:
            return  # the core gave the attempt up (its Disconnect)
        except ssl.SSLError as e:
            self._connecting.pop(conn_id, None)
            self._tls_failed(conn_id, str(e))
            return
        except OSError as e:
            self._connecting.pop(conn_id, None)
            self._connect_failed(conn_id, e.errno, str(e) or repr(e))
            return
        except Exception as e:  # anything else the loop raised: the attempt failed
            self._connecting.pop(conn_id, None)
            self._connect_failed(conn_id, None, repr(e))
            return
        self._connecting.pop(conn_id, None)
        if self._connected(conn_id, transport):
            self._transports[conn_id] = transport
        else:
            transport.abort()

    async def _fetch_token(self) -> None:
        provider = self._token_provider
        if provider is None:
            self._token(None, 0.0, "no oauth_token_provider was given")
            return
        try:
            got = provider()
            if inspect.isawaitable(got):
                got = await got
            token, lifetime = got
        except Exception as e:
            self._token(None, 0.0, f"the token provider raised {e!r}")
            return
        self._token(str(token), float(lifetime))

    def _make_ssl(self) -> Optional[ssl.SSLContext]:
        settings = self._tls_settings()
        if self._ssl_context is not None:
            if settings is None:
                raise ConfigError("ssl_context given with a security.protocol without TLS")
            return self._ssl_context
        if settings is None:
            return None
        ctx = ssl.create_default_context(cafile=settings["ca_location"])
        if settings["certificate_location"]:
            ctx.load_cert_chain(settings["certificate_location"], settings["key_location"])
        if not settings["endpoint_identification"]:
            ctx.check_hostname = False
        return ctx

    def _shut(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in self._connecting.values():
            task.cancel()
        self._connecting.clear()
        for transport in list(self._transports.values()):
            transport.abort()
        self._transports.clear()
        self._admit_waiting()
        if self._room_timer is not None:
            self._room_timer.cancel()
            self._room_timer = None
