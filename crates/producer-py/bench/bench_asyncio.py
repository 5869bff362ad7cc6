"""Python producers on one broker, each in a process of its own: kafka-sansio (asyncio: per-record
``await send``, ``send_nowait``, ``send_batch``) against aiokafka and confluent-kafka-python (its
asyncio ``AIOProducer``, and plain ``produce`` + ``poll``), and ``floor-await``: the ceiling of the
``await`` pattern on the loop itself (see ``floor_run``).

Every producer runs with the same settings (acks=all, idempotence, linger 5 ms, batch.size
16384) on a topic of its own (12 partitions), 100 B and 1000 B values, null keys. A run measures
records/s (the first send to the last acknowledgement), CPU-s per million records (the
process's user + system time, every thread), peak RSS, and then p50 / p99 delivery latency
under an open-loop sender at half the producer's own measured rate.

    python crates/producer-py/bench/bench_asyncio.py --bootstrap 127.0.0.1:9092 [--records N]
        [--sizes 100,1000] [--producers ours-await,ours-nowait,...] [--latency-secs 5]

Needs kafka-sansio (built with ``maturin develop --release``), aiokafka, confluent-kafka and
uvloop installed; ``cargo run -p producer-tests --bin kafka_cluster -- --nodes 1`` gives a
broker. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time
import uuid

PRODUCERS = [
    "ours-await",
    "ours-nowait",
    "ours-batch",
    "aiokafka",
    "confluent-aio",
    "confluent-produce",
    "floor-await",
]
WAVE = 10_000  # records per wave of awaited sends (aiokafka's reference: batches of 10,000)
SAMPLE = 16  # the open-loop run measures the latency of one record in every SAMPLE (see Lat)
SETTINGS = {"acks": "all", "enable.idempotence": True, "linger.ms": 5, "batch.size": 16384}


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Lat:
    """Delivery latencies of the open-loop run, seconds, of one record in every ``SAMPLE``.

    The instrument is sampled so that it does not cost more per record than the peak run it is
    half of: one Python callback per record (a closure, ``add_done_callback``, the callback's
    run, ``loop.time()``) costs about 1.5 us, more than ``send_batch`` itself (0.6 us), so with
    a callback on every record the open-loop run at half the peak rate needed more CPU than the
    peak run and fell behind, measuring the bench, not the producer. Refusals are counted for
    every record; delivery failures among the sampled ones."""

    def __init__(self) -> None:
        self.samples: list = []
        self.failed = 0
        self.refused = 0
        self.seen = 0

    def picks(self, k: int) -> range:
        """Which of the next ``k`` records (by their index among them) are sampled."""
        first = -self.seen % SAMPLE
        self.seen += k
        return range(first, k, SAMPLE)

    def count_failure(self) -> None:
        self.failed += 1

    def done_callback(self, loop: asyncio.AbstractEventLoop, t_sent: float):
        """The callback for the sampled futures of the records sent at ``t_sent``."""

        def cb(f: asyncio.Future) -> None:
            if f.cancelled() or f.exception() is not None:
                self.failed += 1
            else:
                self.samples.append(loop.time() - t_sent)

        return cb

    def report(self) -> dict:
        s = sorted(self.samples)
        if not s:
            return {"p50_ms": None, "p99_ms": None}
        pick = lambda q: s[min(len(s) - 1, int(q * len(s)))] * 1000  # noqa: E731
        return {"p50_ms": pick(0.50), "p99_ms": pick(0.99), "lat_failed": self.failed + self.refused}


# -- ours ---------------------------------------------------------------------------------------


async def ours(mode: str, bootstrap: str, topic: str, n: int, value: bytes, rate: float, secs: float) -> dict:
    from kafka_sansio import BufferFull, Producer

    async with Producer(bootstrap, config=SETTINGS) as p:
        await p.send(topic, b"warm-up")
        c0, t0 = cpu(), time.perf_counter()
        failed = 0
        if mode == "ours-await":
            for start in range(0, n, WAVE):
                k = min(WAVE, n - start)
                results = await asyncio.gather(*(p.send(topic, value) for _ in range(k)), return_exceptions=True)
                failed += sum(isinstance(r, BaseException) for r in results)
        elif mode == "ours-nowait":
            futures = []
            for i in range(n):
                try:
                    futures.append(p.send_nowait(topic, value))
                except BufferFull:
                    await p.send(topic, value)  # waits for room (and its own report)
                if i % WAVE == WAVE - 1:
                    await asyncio.sleep(0)  # the loop's turn: reads, writes, reports
            await p.flush()
            failed = sum(f.exception() is not None for f in futures)
        else:  # ours-batch
            items = [(topic, value)] * WAVE
            sent = 0
            while sent < n:
                k = min(WAVE, n - sent)
                futures = p.send_batch(items[:k])
                refused = [f for f in futures if f.done() and isinstance(f.exception(), BufferFull)]
                sent += k - len(refused)
                if refused:
                    await p.send(topic, value)  # waits for room
                    sent += 1
                await asyncio.sleep(0)  # the loop's turn: reads, writes, reports
            await p.flush()
        elapsed, used = time.perf_counter() - t0, cpu() - c0
        lat = await ours_latency(p, mode, topic, value, rate, secs) if rate else {}
    return {"elapsed": elapsed, "cpu": used, "failed": failed, **lat}


async def ours_latency(p, mode: str, topic: str, value: bytes, rate: float, secs: float) -> dict:
    loop = asyncio.get_running_loop()
    lat = Lat()

    def nowait(k):
        out = []
        for _ in range(k):
            try:
                out.append(p.send_nowait(topic, value))
            except Exception:
                lat.refused += 1  # refused (the buffer full): the rate is not sustained
        return out

    def send(k, t):
        if mode == "ours-await":
            # (``p.send`` hands back the record's future itself when the core takes the record.)
            futures = [asyncio.ensure_future(p.send(topic, value)) for _ in range(k)]
        elif mode == "ours-batch":
            futures = p.send_batch([(topic, value)] * k)
            # A refused record's future is failed at once (a taken one is resolved in a turn);
            # its exception is retrieved here, so that asyncio does not log it when collected.
            refused = [f.exception() for f in futures if f.done()]
            lat.refused += len(refused)
        else:
            futures = nowait(k)
        cb = lat.done_callback(loop, t)
        for i in lat.picks(len(futures)):
            futures[i].add_done_callback(cb)

    await paced(rate, secs, send)
    await p.flush()
    return lat.report()


async def paced(rate: float, secs: float, send) -> None:
    """Open loop: every millisecond, the records due by then (``send(k, t)``)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    due_sent = 0
    end = start + secs
    while True:
        now = loop.time()
        if now >= end:
            break
        due = int((now - start) * rate)
        if due > due_sent:
            send(due - due_sent, now)
            due_sent = due
        await asyncio.sleep(0.001)


# -- peers --------------------------------------------------------------------------------------


async def aiokafka_run(bootstrap, topic, n, value, rate, secs) -> dict:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
        max_batch_size=16384,
    )
    await p.start()
    try:
        await (await p.send(topic, b"warm-up"))
        c0, t0 = cpu(), time.perf_counter()
        failed = 0
        for start in range(0, n, WAVE):
            k = min(WAVE, n - start)
            futures = [await p.send(topic, value) for _ in range(k)]
            results = await asyncio.gather(*futures, return_exceptions=True)
            failed += sum(isinstance(r, BaseException) for r in results)
        elapsed, used = time.perf_counter() - t0, cpu() - c0
        lat = {}
        if rate:
            loop = asyncio.get_running_loop()
            l = Lat()

            async def burst(k, t):
                cb, picks = l.done_callback(loop, t), l.picks(k)
                for i in range(k):
                    f = await p.send(topic, value)
                    if i in picks:
                        f.add_done_callback(cb)

            pending = []
            await paced(rate, secs, lambda k, t: pending.append(loop.create_task(burst(k, t))))
            await asyncio.gather(*pending)
            await p.flush()
            lat = l.report()
    finally:
        await p.stop()
    return {"elapsed": elapsed, "cpu": used, "failed": failed, **lat}


async def confluent_aio_run(bootstrap, topic, n, value, rate, secs) -> dict:
    from confluent_kafka.aio import AIOProducer

    p = AIOProducer({"bootstrap.servers": bootstrap, **SETTINGS})
    try:
        await (await p.produce(topic, b"warm-up"))
        c0, t0 = cpu(), time.perf_counter()
        failed = 0
        for start in range(0, n, WAVE):
            k = min(WAVE, n - start)
            futures = [await p.produce(topic, value) for _ in range(k)]
            results = await asyncio.gather(*futures, return_exceptions=True)
            failed += sum(isinstance(r, BaseException) for r in results)
        elapsed, used = time.perf_counter() - t0, cpu() - c0
        lat = {}
        if rate:
            loop = asyncio.get_running_loop()
            l = Lat()

            async def burst(k, t):
                cb, picks = l.done_callback(loop, t), l.picks(k)
                for i in range(k):
                    f = await p.produce(topic, value)
                    if i in picks:
                        f.add_done_callback(cb)

            pending = []
            await paced(rate, secs, lambda k, t: pending.append(loop.create_task(burst(k, t))))
            await asyncio.gather(*pending)
            await p.flush()
            lat = l.report()
    finally:
        await p.close()
    return {"elapsed": elapsed, "cpu": used, "failed": failed, **lat}


def confluent_produce_run(bootstrap, topic, n, value, rate, secs) -> dict:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, **SETTINGS})
    failed = [0]

    def cb(err, msg):
        if err is not None:
            failed[0] += 1

    p.produce(topic, b"warm-up")
    p.flush()
    c0, t0 = cpu(), time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush()
    elapsed, used = time.perf_counter() - t0, cpu() - c0
    lat = {}
    if rate:
        l = Lat()
        start = time.monotonic()
        end, due_sent = start + secs, 0
        while (now := time.monotonic()) < end:
            due = int((now - start) * rate)
            picks = l.picks(due - due_sent)
            for i in range(due - due_sent):
                if i in picks:
                    p.produce(topic, value, on_delivery=lambda e, m, t=now: l.samples.append(
                        time.monotonic() - t) if e is None else l.count_failure())
                else:
                    p.produce(topic, value)
            due_sent = due
            p.poll(0.001)
        p.flush()
        lat = l.report()
    return {"elapsed": elapsed, "cpu": used, "failed": failed[0], **lat}


# -- the ceiling of the await pattern ------------------------------------------------------------


class _Ideal:
    """A producer that costs nothing but the loop's own: ``send`` makes the record's future, and
    every record of a wave is acknowledged at once, ``linger.ms`` after the wave's last send
    (the least a real producer's last batch of the wave waits). No encoding, no network."""

    def __init__(self, loop: asyncio.AbstractEventLoop, linger: float) -> None:
        self.loop, self.linger, self.pending, self.turn = loop, linger, [], None

    def send(self, topic: str, value: bytes) -> asyncio.Future:
        fut = self.loop.create_future()
        self.pending.append(fut)
        if self.turn is None:
            self.turn = self.loop.call_soon(self._wave_sent)
        return fut

    def _wave_sent(self) -> None:
        self.turn, wave, self.pending = None, self.pending, []
        self.loop.call_later(self.linger, lambda: [f.set_result(None) for f in wave])


async def floor_run(n: int, value: bytes) -> dict:
    """``ours-await``'s pattern (waves of ``WAVE`` sends gathered) on an ideal producer: no
    producer awaited this way, on this loop, takes more records/s or less CPU per record. There
    is no broker, so no latency run."""
    p = _Ideal(asyncio.get_running_loop(), SETTINGS["linger.ms"] / 1000)
    c0, t0 = cpu(), time.perf_counter()
    for start in range(0, n, WAVE):
        k = min(WAVE, n - start)
        await asyncio.gather(*(p.send("t", value) for _ in range(k)), return_exceptions=True)
    return {"elapsed": time.perf_counter() - t0, "cpu": cpu() - c0, "failed": 0}


def child(args) -> None:
    value = b"v" * args.value_bytes
    rate = args.rate
    if args.loop == "uvloop":
        import uvloop

        run = uvloop.run
    else:
        run = asyncio.run
    name = args.child
    if name == "floor-await":
        out = run(floor_run(args.records, value))
    elif name.startswith("ours"):
        out = run(ours(name, args.bootstrap, args.topic, args.records, value, rate, args.latency_secs))
    elif name == "aiokafka":
        out = run(aiokafka_run(args.bootstrap, args.topic, args.records, value, rate, args.latency_secs))
    elif name == "confluent-aio":
        out = run(confluent_aio_run(args.bootstrap, args.topic, args.records, value, rate, args.latency_secs))
    else:
        out = confluent_produce_run(args.bootstrap, args.topic, args.records, value, rate, args.latency_secs)
    out["rss_mb"] = rss_mb()
    print(json.dumps(out))


def create_topic(bootstrap: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"pybench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result
    admin.create_topics([NewTopic(name, 12, 1)])[name].result(60)
    return name


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--sizes", default="100,1000")
    ap.add_argument("--producers", default=",".join(PRODUCERS))
    ap.add_argument("--latency-secs", type=float, default=5.0)
    ap.add_argument("--loop", default="asyncio", choices=["asyncio", "uvloop"])
    ap.add_argument("--child")
    ap.add_argument("--topic")
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--rate", type=float, default=0.0)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    print("| value | producer | records/s | CPU-s per million | peak RSS MB | p50 / p99 ms at half its rate | failed |")
    print("|---|---|---|---|---|---|---|")
    for size in [int(s) for s in args.sizes.split(",")]:
        for name in args.producers.split(","):
            def run(rate: float) -> dict:
                cmd = [sys.executable, __file__, "--child", name, "--bootstrap", args.bootstrap,
                       "--topic", create_topic(args.bootstrap), "--records", str(args.records),
                       "--value-bytes", str(size), "--rate", str(rate),
                       "--latency-secs", str(args.latency_secs), "--loop", args.loop]
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
                if out.returncode != 0:
                    raise SystemExit(f"{name} failed:\n{out.stderr[-3000:]}")
                return json.loads(out.stdout.strip().splitlines()[-1])

            peak = run(0.0)
            rate = args.records / peak["elapsed"]
            lat = run(rate / 2) if args.latency_secs > 0 and name != "floor-await" else {}
            p50, p99 = lat.get("p50_ms"), lat.get("p99_ms")
            latency = f"{p50:.1f} / {p99:.1f}" if p99 is not None else "-"
            if lat.get("lat_failed"):
                latency += f" ({lat['lat_failed']} refused or failed)"
            print(
                f"| {size} B | {name} | {rate:,.0f} | {peak['cpu'] / args.records * 1e6:.2f} "
                f"| {peak['rss_mb']:.0f} | {latency} | {peak['failed']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
