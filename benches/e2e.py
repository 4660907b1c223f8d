"""End to end over loopback HTTP: client-process CPU per event (report section 6).

A server subprocess (so that its CPU is not counted) serves the corpus
streams in 4 KiB writes, HTTP/1.1 chunked, keep-alive: either a plain asyncio
server (``plain``: the cheapest possible peer) or ``FakeGemini`` (``fake``:
the test server, which also validates every request). It picks the stream
from the prompt text ``stream:<name>``, stops when its stdin closes and in
any case after :data:`SERVER_LIFETIME` seconds.

The client process runs one contender at a time, ``concurrency`` streams at
once in one event loop, and measures ``time.process_time()`` (all its
threads) per event received:

- ``raw/<t>``: the transport alone reads the body (no aggregation), as
  ``fastagg/<t>`` does;
- ``floor/asyncio Protocol`` (:class:`ProtocolFloor`, in the transport
  target's pairs only): the event loop and the kernel alone, per read;
- ``floor + wake`` (:class:`WakingFloor`, same pairs): that floor waking a
  waiting task on every read, as any pull-style reader must (a future set,
  the loop's handle, the task's step), and still parsing nothing;
- ``fastagg/<t>``: ``GeminiClient(transport=t).stream()`` and
  ``fastagg.transport.pump(body, StreamAggregator.feed)`` (H11: per chunk), then
  ``close()`` and ``.parts``; ``raw/<t>`` pumps the body into a function that
  does nothing;
- ``google-genai``: ``client.aio.models.generate_content_stream`` (its own
  default async stack) and the plain Python aggregation of the benchmark's
  SDK contender;
- ``google-genai + ADK``: ``google.adk.models.Gemini.generate_content_async(
  stream=True)``, ADK's own model layer with its streaming aggregator (on
  google-genai), when google-adk is installed.

``python -m benches.e2e serve KIND SCALE`` runs the server (used internally);
``python -m benches.e2e targets STREAM [PAIRS]`` measures only the pairs the
transport and ADK targets of one stream are judged by (:func:`target_pairs`).
"""

from __future__ import annotations

import asyncio
import gc
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

import fastagg
from fastagg.transport import AiohttpTransport, HttpxTransport, pump

from . import contenders as C
from . import corpus

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["e2e_markdown", "target_pairs"]

ROOT = Path(__file__).resolve().parent.parent
SERVER_LIFETIME = 1800.0  # seconds: the server subprocess exits by itself after this
E2E_STREAMS = ("text", "tool_parallel", "streamed_args", "interleaved", "agentic")
WRITE = 4096
PROMPT = "stream:"
TRANSPORTS = ("aiohttp", "httpx")  # the built-in stacks, the default first
DEFAULT = TRANSPORTS[0]
OURS = f"fastagg/{DEFAULT}"  # the row the targets judge
RAW = f"raw/{DEFAULT}"  # the transport alone


# --------------------------------------------------------------------------
# the server subprocess
# --------------------------------------------------------------------------


def _bodies(scale: float) -> dict[str, bytes]:
    return {name: corpus.build(name, scale=scale).body for name in E2E_STREAMS}


def _chunked(body: bytes) -> bytes:
    out = bytearray()
    for i in range(0, len(body), WRITE):
        piece = body[i : i + WRITE]
        out += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    return bytes(out + b"0\r\n\r\n")


def _stream_of(request: Any) -> str:
    text: str = request["contents"][0]["parts"][0]["text"]
    return text.removeprefix(PROMPT)


async def _plain_server(bodies: dict[str, bytes]) -> asyncio.Server:
    # Pre-framed once: each 4 KiB piece is one HTTP chunk, written on its own.
    pieces = {name: _chunked(body) for name, body in bodies.items()}
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    step = WRITE + 8

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                header = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in header.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                body = orjson.loads(await reader.readexactly(length))
                framed = pieces[_stream_of(body)]
                writer.write(head)
                for i in range(0, len(framed), step):
                    writer.write(framed[i : i + step])
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client left, or the server is stopping: this connection is done
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)


async def _serve(kind: str, scale: float) -> None:
    bodies = _bodies(scale)
    loop = asyncio.get_running_loop()
    if kind == "plain":
        server = await _plain_server(bodies)
        port = server.sockets[0].getsockname()[1]
        stop: Callable[[], Awaitable[Any]] = server.wait_closed
        close = server.close
    else:
        from fastagg.testing import FakeGemini, Step

        def answer(body: Any, index: int) -> Step:
            return Step(raw=bodies[_stream_of(body)], tiny_writes=WRITE)

        fake = FakeGemini(answer, require_auth=False)
        await fake.start()
        port = fake.port
        stop, close = fake.stop, lambda: None
    print(port, flush=True)
    # Stop when the parent closes stdin (or dies), or after SERVER_LIFETIME.
    done = loop.create_future()
    loop.add_reader(sys.stdin.fileno(), lambda: done.done() or done.set_result(None))
    try:
        await asyncio.wait_for(done, SERVER_LIFETIME)
    except TimeoutError:
        pass
    close()
    await stop()


class ServerProcess:
    """A bench server subprocess on loopback (``python -m <args>``, which prints its port
    and stops when its stdin closes); a context manager."""

    def __init__(self, args: list[str], what: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.strip():
            self.close()
            raise RuntimeError(f"the {what} bench server did not start")
        self.url = f"http://127.0.0.1:{int(line)}"

    def close(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Server(ServerProcess):
    """The e2e bench's server of one ``kind`` writing the corpus at ``scale``."""

    def __init__(self, kind: str, scale: float) -> None:
        self.kind = kind
        super().__init__(["benches.e2e", "serve", kind, repr(scale)], kind)


# --------------------------------------------------------------------------
# the contenders (client side)
# --------------------------------------------------------------------------


def _request(name: str) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": PROMPT + name}]}]}


class Contender:
    """Opens its clients in the running loop; ``one(stream)`` runs one stream."""

    name = ""

    async def open(self, url: str) -> None: ...

    async def one(self, stream: corpus.Stream) -> None: ...

    async def close(self) -> None: ...


class FastaggContender(Contender):
    def __init__(self, transport: str, aggregate: bool = True) -> None:
        self.transport = transport
        self.aggregate = aggregate
        self.name = ("fastagg/" if aggregate else "raw/") + transport

    async def open(self, url: str) -> None:
        # A pool as large as the highest concurrency: no stream waits for a connection.
        transport = {
            "aiohttp": AiohttpTransport,
            "httpx": HttpxTransport,
        }[self.transport]()
        self.client = fastagg.GeminiClient(
            corpus.GEMINI_MODEL, api_key="bench", base_url=url, http_client=transport
        )
        self._owned = transport

    async def one(self, stream: corpus.Stream) -> None:
        if not self.aggregate:
            async with self.client.stream(_request(stream.name), timeout=None) as body:
                await pump(body, _ignore)
            return
        agg = fastagg.StreamAggregator(deltas=False)
        async with self.client.stream(_request(stream.name), timeout=None) as body:
            await pump(body, agg.feed)
        agg.close().parts  # noqa: B018 - what an agent reads; part of the cost

    async def close(self) -> None:
        await self._owned.aclose()


def _ignore(piece: bytes) -> None:
    """The consumer of ``raw/*``: the bytes are read, and nothing is done with them."""


class _Counting(asyncio.Protocol):
    """Reads the socket and parses nothing: it only watches for the body's
    last chunk (``0\\r\\n\\r\\n``, which may arrive split across reads),
    and counts the reads."""

    def __init__(self) -> None:
        self.tail = b""
        self.reads = 0
        self.done: asyncio.Future[None] | None = None

    def data_received(self, data: bytes) -> None:
        self.reads += 1
        self.tail = (self.tail + data[-5:])[-5:]
        if self.tail == b"0\r\n\r\n" and self.done is not None and not self.done.done():
            self.done.set_result(None)


class _Waking(_Counting):
    """:class:`_Counting` that also wakes the task waiting in ``waiter`` on every read."""

    def __init__(self) -> None:
        super().__init__()
        self.waiter: asyncio.Future[None] | None = None

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class ProtocolFloor(Contender):
    """The floor of any asyncio transport: one keep-alive connection, the
    request written by hand, and a bare :class:`asyncio.Protocol` that is
    called once per socket read and does nothing with the bytes (no HTTP
    parsing, no task woken per read). What the event loop and the kernel
    cost per read; the ``plain`` server only."""

    name = "floor/asyncio Protocol"
    protocol: Callable[[], _Counting] = _Counting

    async def open(self, url: str) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        loop = asyncio.get_running_loop()
        self.sock, self.proto = await loop.create_connection(self.protocol, host, int(port))

    async def one(self, stream: corpus.Stream) -> None:
        self.proto.tail = b""
        self.proto.done = asyncio.get_running_loop().create_future()
        self._write(stream)
        await self.proto.done

    def _write(self, stream: corpus.Stream) -> None:
        body = orjson.dumps(_request(stream.name))
        self.sock.write(b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    async def close(self) -> None:
        self.sock.close()


class WakingFloor(ProtocolFloor):
    """:class:`ProtocolFloor` with a reader: the task running :meth:`one` waits
    for every read and is woken by it, as the reader of any pull-style stack
    is (``async for chunk in body``), and the bytes are still not parsed.
    Against :class:`ProtocolFloor`, what waking a task per read costs."""

    name = "floor + wake"
    protocol: Callable[[], _Counting] = _Waking

    async def one(self, stream: corpus.Stream) -> None:
        proto = self.proto
        assert isinstance(proto, _Waking)
        loop = asyncio.get_running_loop()
        proto.tail = b""
        proto.done = loop.create_future()
        self._write(stream)
        while not proto.done.done():
            proto.waiter = loop.create_future()
            await proto.waiter
            proto.waiter = None


class GenaiContender(Contender):
    name = "google-genai"

    async def open(self, url: str) -> None:
        from google import genai
        from google.genai import types

        options = types.HttpOptions(base_url=url)
        self.clients = {
            False: genai.Client(api_key="bench", http_options=options),
            True: genai.Client(vertexai=True, api_key="bench", http_options=options),
        }

    async def one(self, stream: corpus.Stream) -> None:
        model = corpus.VERTEX_MODEL if stream.vertex else corpus.GEMINI_MODEL
        responses = [
            r
            async for r in await self.clients[stream.vertex].aio.models.generate_content_stream(
                model=model, contents=PROMPT + stream.name
            )
        ]
        C.aggregate_genai(responses)

    async def close(self) -> None:
        for client in self.clients.values():
            await client.aio.aclose()


def adk_available() -> bool:
    """Whether google-adk is importable."""
    try:
        import google.adk.models  # noqa: F401
    except ImportError:
        return False
    return True


class AdkContender(GenaiContender):
    name = "google-genai + ADK"

    async def open(self, url: str) -> None:
        from google.adk.models.google_llm import Gemini

        await super().open(url)
        self.llms = {}
        for vertex, client in self.clients.items():
            llm = Gemini(model=corpus.VERTEX_MODEL if vertex else corpus.GEMINI_MODEL)
            # ADK builds its client lazily (a cached property): hand it ours.
            llm.__dict__["api_client"] = client
            self.llms[vertex] = llm

    async def one(self, stream: corpus.Stream) -> None:
        from google.adk.models.llm_request import LlmRequest
        from google.genai import types

        llm = self.llms[stream.vertex]
        request = LlmRequest(
            model=llm.model,
            contents=[types.Content(role="user", parts=[types.Part(text=PROMPT + stream.name)])],
            config=types.GenerateContentConfig(),
        )
        async for _ in llm.generate_content_async(request, stream=True):
            pass


# --------------------------------------------------------------------------
# measuring
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    quick: bool
    scale: float
    streams: tuple[str, ...]
    servers: tuple[str, ...]
    concurrency: tuple[int, ...]
    fast_events: int  # events per measurement for the fastagg and raw rows
    slow_events: int  # the same for the SDK rows
    reps: int


def _plan(quick: bool) -> Plan:
    if quick:
        return Plan(True, 0.05, ("text",), ("plain",), (1, 10), 2_000, 300, 1)
    return Plan(False, 0.3, E2E_STREAMS, ("plain", "fake"), (1, 10, 100), 40_000, 3_000, 3)


async def _cpu_per_event(
    contender: Contender,
    stream: corpus.Stream,
    concurrency: int,
    events: int,
    reps: int,
    warm: bool = True,
) -> float:
    """Median client CPU seconds per event over ``reps`` measurements.

    The warm-up round opens the connections (the pool keeps them), so that
    connecting is not counted; without it, connecting is part of the cost.
    """
    rounds = max(1, math.ceil(events / (stream.events * concurrency)))
    if warm:
        await asyncio.gather(*(contender.one(stream) for _ in range(concurrency)))
    samples = []
    for _ in range(reps):
        gc.collect()
        t0 = time.process_time()
        for _ in range(rounds):
            await asyncio.gather(*(contender.one(stream) for _ in range(concurrency)))
        samples.append((time.process_time() - t0) / (rounds * concurrency * stream.events))
    return statistics.median(samples)


async def _paired_ratio(
    contender: Contender, stream: corpus.Stream, many: int, events: int, pairs: int
) -> float:
    """Per event, ``many`` streams at once ÷ one stream at a time: the median
    over ``pairs`` measurements taken back to back (the pool is warm by
    then), so that the machine's drift between two cells measured minutes
    apart does not decide the target; the order within a pair alternates, so
    that a drift within one does not lean every pair the same way."""
    ratios = []
    for i in range(pairs):
        sizes = (1, many) if i % 2 == 0 else (many, 1)  # K6
        cost = {c: await _cpu_per_event(contender, stream, c, events, 1, warm=False) for c in sizes}
        ratios.append(cost[many] / cost[1])
    return statistics.median(ratios)


@dataclass(frozen=True)
class TransportPairs:
    """The transport target's pairs for one stream (medians over the pairs)."""

    raw: float  # the default transport alone ÷ the aggregation alone
    floor: float  # the bare Protocol ÷ the aggregation
    woken: float  # the bare Protocol waking a task per read ÷ the aggregation
    floor_reads: float  # socket reads per stream of the bare Protocol
    woken_reads: float  # the same, waking a task per read


async def _paired_transport(
    raw: Contender,
    floor: ProtocolFloor,
    woken: WakingFloor,
    stream: corpus.Stream,
    events: int,
    pairs: int,
) -> TransportPairs:
    """Per event, the transport alone (``raw``, 1 at once), the asyncio floor
    (``floor``) and the floor that wakes a task per read (``woken``), each ÷
    the aggregation alone (in process): the medians over ``pairs`` measurements
    taken back to back, as :func:`_paired_ratio` does (the order alternating),
    so that the drift between a cell measured here and the in-process column
    measured minutes later does not decide the target. With the reads per
    stream of the two floors: how a body splits into socket reads depends on
    how soon the reader is back at the socket."""
    samples: dict[str, list[float]] = {"raw": [], "floor": [], "woken": []}
    for i in range(pairs):
        order: list[tuple[str, Contender]] = [("raw", raw), ("floor", floor), ("woken", woken)]
        cost = {}
        for label, contender in order if i % 2 == 0 else order[::-1]:
            cost[label] = await _cpu_per_event(contender, stream, 1, events, 1, warm=False)
        agg = _in_process(stream, 1)
        for label, value in cost.items():
            samples[label].append(value / agg)
    return TransportPairs(
        *(statistics.median(samples[k]) for k in ("raw", "floor", "woken")),
        await _reads_per_stream(floor, stream),
        await _reads_per_stream(woken, stream),
    )


async def _reads_per_stream(floor: ProtocolFloor, stream: corpus.Stream, n: int = 20) -> float:
    proto = floor.proto
    assert isinstance(proto, _Counting)
    proto.reads = 0
    for _ in range(n):
        await floor.one(stream)
    return proto.reads / n


async def _paired_sdk(
    sdk: Contender, ours: Contender, stream: corpus.Stream, plan: Plan, pairs: int
) -> float:
    """Per event, ``sdk`` ÷ ``ours`` (1 at once each): the median over ``pairs``
    measurements taken back to back, as :func:`_paired_ratio` does (the order
    alternating)."""
    ratios = []
    for i in range(pairs):
        if i % 2:
            theirs = await _cpu_per_event(sdk, stream, 1, plan.slow_events, 1)
            mine = await _cpu_per_event(ours, stream, 1, plan.fast_events, 1)
        else:
            mine = await _cpu_per_event(ours, stream, 1, plan.fast_events, 1)
            theirs = await _cpu_per_event(sdk, stream, 1, plan.slow_events, 1)
        ratios.append(theirs / mine)
    return statistics.median(ratios)


def _in_process(stream: corpus.Stream, reps: int) -> float:
    """CPU seconds per event of the aggregation alone (4 KiB chunks, no HTTP)."""
    prep = C.prepare(stream, with_genai=False)
    run = C.CONTENDERS[0].run
    rounds = max(1, 20_000 // stream.events)
    samples = []
    for _ in range(max(reps, 3)):
        gc.collect()
        t0 = time.process_time()
        for _ in range(rounds):
            run(prep)
        samples.append((time.process_time() - t0) / (rounds * stream.events))
    return min(samples)


Key = tuple[str, str, int, str]  # server, stream, concurrency, contender


# Frames per chunk by transport, ways of reading by concurrency, the paired
# concurrency ratio of OURS on the `plain` server by stream, the paired
# transport ratios of RAW and of the two asyncio floors there by stream, and
# the paired google-genai + ADK ÷ OURS ratio there by stream.
Details = tuple[
    dict[str, tuple[int, int]],
    dict[int, dict[str, float]],
    dict[str, float],
    dict[str, TransportPairs],
    dict[str, float],
]


async def _details(
    url: str, text: corpus.Stream, plan: Plan
) -> tuple[dict[str, tuple[int, int]], dict[int, dict[str, float]]]:
    """Frames per chunk on each transport, and the ways of reading (full runs only)."""
    frames = {t: await _frames_per_chunk(url, t, text) for t in TRANSPORTS}
    ways: dict[int, dict[str, float]] = {}
    for c in () if plan.quick else (1, 10):
        ways[c] = await _strategy_cpu(url, text, c, plan.fast_events, plan.reps)
    return frames, ways


def measure(plan: Plan) -> tuple[dict[Key, float | str], dict[str, float], Details]:
    """Run the plan: µs/event per cell (or why it was skipped), in-process µs/event, details."""
    genai = C.genai_available()
    adk = genai and not plan.quick and adk_available()  # importing ADK alone takes ~0.3 s
    fast: list[Contender] = [
        *(FastaggContender(t) for t in TRANSPORTS),
        *(FastaggContender(t, aggregate=False) for t in TRANSPORTS),
    ]
    slow: list[tuple[Contender | None, str]] = [
        (GenaiContender() if genai else None, "google-genai"),
        (
            AdkContender() if adk else None,
            "google-genai + ADK",
        ),
    ]
    why_not = {
        "google-genai": "not installed",
        "google-genai + ADK": "skipped in --quick" if plan.quick else "google-adk not installed",
    }
    streams = {name: corpus.build(name, scale=plan.scale) for name in plan.streams}
    results: dict[Key, float | str] = {}
    details: Details = ({}, {}, {}, {}, {})
    paired: dict[str, float] = {}
    transport: dict[str, TransportPairs] = {}
    adk_pairs: dict[str, float] = {}
    for kind in plan.servers:
        with Server(kind, plan.scale) as server:

            async def run_all(url: str = server.url, kind: str = kind) -> None:
                for contender in fast:
                    await contender.open(url)
                    for name, stream in streams.items():
                        for c in plan.concurrency:
                            results[(kind, name, c, contender.name)] = 1e6 * await _cpu_per_event(
                                contender, stream, c, plan.fast_events, plan.reps
                            )
                        if kind == "plain" and contender.name == RAW and not plan.quick:
                            floor, woken = ProtocolFloor(), WakingFloor()
                            await floor.open(url)
                            await woken.open(url)
                            transport[name] = await _paired_transport(
                                contender,
                                floor,
                                woken,
                                stream,
                                plan.fast_events,
                                2 * plan.reps + 1,
                            )
                            await floor.close()
                            await woken.close()
                        if kind == "plain" and contender.name == OURS:
                            paired[name] = await _paired_ratio(
                                contender,
                                stream,
                                max(plan.concurrency),
                                plan.fast_events,
                                2 * plan.reps + 1,
                            )
                    await contender.close()
                for maybe, label in slow:
                    if maybe is None:
                        for name in streams:
                            for c in plan.concurrency:
                                results[(kind, name, c, label)] = why_not[label]
                        continue
                    await maybe.open(url)
                    if label == "google-genai + ADK" and kind == "plain":
                        # The target's ratio, from back-to-back pairs: the cells are
                        # measured minutes apart, across the machine's drift.
                        ours = FastaggContender(DEFAULT)
                        await ours.open(url)
                        for name, stream in streams.items():
                            adk_pairs[name] = await _paired_sdk(
                                maybe, ours, stream, plan, 2 * plan.reps + 1
                            )
                        await ours.close()
                    for name, stream in streams.items():
                        for c in plan.concurrency:
                            # The SDKs cost ~50x more: 100 at once only on `text`.
                            if (c > 10 and name != "text") or (
                                (kind == "fake" or plan.quick) and c > 1
                            ):
                                continue
                            # 100 SDK streams at once take ~30 s a round: one cold round.
                            big = c > 10
                            results[(kind, name, c, label)] = 1e6 * await _cpu_per_event(
                                maybe, stream, c, plan.slow_events, 1 if big else plan.reps, not big
                            )
                    await maybe.close()

            asyncio.run(run_all())
            if kind == "plain":
                details = (
                    *asyncio.run(_details(server.url, _text_of(streams), plan)),
                    paired,
                    transport,
                    adk_pairs,
                )
    in_process = {name: 1e6 * _in_process(s, plan.reps) for name, s in streams.items()}
    return results, in_process, details


def _text_of(streams: dict[str, corpus.Stream]) -> corpus.Stream:
    return streams.get("text") or next(iter(streams.values()))


# --------------------------------------------------------------------------
# what happens per chunk (H6): Python frames and read strategies
# --------------------------------------------------------------------------


async def _frames_per_chunk(url: str, transport: str, stream: corpus.Stream) -> tuple[int, int]:
    """Python frames entered while reading the body of ``stream``, and the chunks yielded.

    Counted from the first ``__anext__`` to the end of the body, so it includes
    the stack's own callbacks run by the event loop meanwhile (protocol
    ``data_received``, its parser's ``feed_data``), not the request setup.
    """
    contender = FastaggContender(transport, aggregate=False)
    await contender.open(url)
    await contender.one(stream)  # connection and imports warm
    calls = 0
    chunks = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    async with contender.client.stream(_request(stream.name), timeout=None) as body:
        sys.setprofile(count)
        try:
            async for _ in body:
                chunks += 1
        finally:
            sys.setprofile(None)
    await contender.close()
    return calls, chunks


async def _strategy_cpu(
    url: str, stream: corpus.Stream, concurrency: int, events: int, reps: int
) -> dict[str, float]:
    """µs per event of reading and feeding ``stream`` by each way of reading the body."""
    import aiohttp
    import httpx

    body = orjson.dumps(_request(stream.name))
    target = fastagg.GeminiClient(corpus.GEMINI_MODEL, api_key="b", base_url=url).stream_url
    headers = {"content-type": "application/json"}
    out: dict[str, float] = {}
    async with aiohttp.ClientSession() as session, httpx.AsyncClient() as http:

        def via_aiohttp(read: Callable[[Any], Any]) -> Callable[[], Awaitable[None]]:
            async def one() -> None:
                feed = fastagg.StreamAggregator(deltas=False).feed
                async with session.post(target, data=body, headers=headers) as response:
                    async for chunk in read(response.content):
                        feed(chunk)

            return one

        def via_httpx(size: int | None) -> Callable[[], Awaitable[None]]:
            async def one() -> None:
                feed = fastagg.StreamAggregator(deltas=False).feed
                request = http.build_request("POST", target, content=body, headers=headers)
                response = await http.send(request, stream=True)
                try:
                    async for chunk in response.aiter_raw(size):
                        feed(chunk)
                finally:
                    await response.aclose()

            return one

        async def chunks_of(content: Any) -> Any:
            while True:
                data, _ = await content.readchunk()
                if not data:
                    return
                yield data

        ways: dict[str, Callable[[], Awaitable[None]]] = {
            "aiohttp readany() (its transport)": via_aiohttp(lambda c: c.iter_any()),
            "aiohttp readchunk() (one HTTP chunk each)": via_aiohttp(chunks_of),
            "aiohttp iter_chunked(4 KiB)": via_aiohttp(lambda c: c.iter_chunked(4096)),
            "aiohttp iter_chunked(64 KiB)": via_aiohttp(lambda c: c.iter_chunked(65536)),
            "httpx aiter_raw() (its transport)": via_httpx(None),
            "httpx aiter_raw(64 KiB)": via_httpx(65536),
        }
        ways.update(_other_stacks(target, body, headers))

        class Way(Contender):
            def __init__(self, fn: Callable[[], Awaitable[None]]) -> None:
                self.fn = fn

            async def one(self, stream: corpus.Stream) -> None:
                await self.fn()

        for label, fn in ways.items():
            out[label] = 1e6 * await _cpu_per_event(Way(fn), stream, concurrency, events, reps)
    return out


def _other_stacks(
    target: str, body: bytes, headers: dict[str, str]
) -> dict[str, Callable[[], Awaitable[None]]]:
    """Other async HTTP stacks from PyPI, when installed (measured, not used by fastagg)."""
    ways: dict[str, Callable[[], Awaitable[None]]] = {}
    try:
        from pyreqwest.client import ClientBuilder
    except ImportError:
        pass
    else:
        client = ClientBuilder().build()

        async def reqwest() -> None:
            feed = fastagg.StreamAggregator(deltas=False).feed
            request = client.post(target).headers(headers).body_bytes(body).build_streamed()
            async with request as response:
                reader = response.body_reader
                while (chunk := await reader.read_chunk()) is not None:
                    feed(bytes(chunk))

        ways["pyreqwest read_chunk() (Rust reqwest; when installed)"] = reqwest
    try:
        import aiosonic
    except ImportError:
        pass
    else:
        sonic = aiosonic.HTTPClient()

        async def aiosonic_way() -> None:
            feed = fastagg.StreamAggregator(deltas=False).feed
            response = await sonic.post(target, data=body, headers=headers)
            async for chunk in response.read_chunks():
                feed(chunk)

        ways["aiosonic read_chunks() (when installed)"] = aiosonic_way
    return ways


# --------------------------------------------------------------------------
# the report section
# --------------------------------------------------------------------------


def _cell(value: float | str | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return f"- ({value})"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:,.0f}"


CONTENDER_ORDER = (
    *(f"fastagg/{t}" for t in TRANSPORTS),
    *(f"raw/{t}" for t in TRANSPORTS),
    "google-genai",
    "google-genai + ADK",
)


SHORT_SCALE = 0.003  # `text` at this scale: 12 events, 5 KiB, a step of an agent turn


def per_request(rounds: int, requests: int) -> dict[str, float]:
    """Client CPU µs per request of a short stream (`text` at :data:`SHORT_SCALE`)
    read raw by each transport and by the floor that wakes a task per read (H9):
    the medians of ``rounds`` rounds, the contenders in turn within each, every
    one ``requests`` requests on its warm keep-alive connection."""
    stream = corpus.build("text", scale=SHORT_SCALE)
    with Server("plain", SHORT_SCALE) as server:

        async def run() -> dict[str, float]:
            contenders: list[Contender] = [
                *(FastaggContender(t, aggregate=False) for t in TRANSPORTS),
                WakingFloor(),
            ]
            samples: dict[str, list[float]] = {c.name: [] for c in contenders}
            for c in contenders:
                await c.open(server.url)
                await c.one(stream)  # connected before anything is timed
            for _ in range(rounds):
                for c in contenders:
                    t0 = time.process_time()
                    for _ in range(requests):
                        await c.one(stream)
                    samples[c.name].append(1e6 * (time.process_time() - t0) / requests)
            for c in contenders:
                await c.close()
            return {name: statistics.median(values) for name, values in samples.items()}

        return asyncio.run(run())


def _per_request_markdown(costs: dict[str, float]) -> list[str]:
    floor = costs[WakingFloor.name]
    stream = corpus.build("text", scale=SHORT_SCALE)
    return [
        "",
        f"Per request (H9): client CPU µs per request of a short stream, `text` at scale "
        f"{SHORT_SCALE} ({stream.events} events, {len(stream.body):,} body bytes: a step of "
        "an agent turn), read raw (no aggregation) on a warm keep-alive connection from the "
        "`plain` server; the medians of rounds in which each takes its turn. `beyond the "
        "floor`: what the stack costs per request above the floor that wakes a task per read "
        "(building and writing the request, reading the head, handing the connection back).",
        "",
        "| stack | µs per request | beyond the floor |",
        "|---|---:|---:|",
        *(
            f"| {name} | {us:.0f} | {us - floor:.0f} |"
            for name, us in costs.items()
            if name != WakingFloor.name
        ),
        f"| {WakingFloor.name} | {floor:.0f} | - |",
    ]


def e2e_markdown(quick: bool) -> str:
    """The "End to end over loopback" section of the report."""
    plan = _plan(quick)
    results, in_process, (frames, ways, paired, transport_pairs, adk_pairs) = measure(plan)
    streams = {name: corpus.build(name, scale=plan.scale) for name in plan.streams}
    lines = [
        f"Client-process CPU (`time.process_time()`) per event received, µs; the server is a "
        f"separate process on 127.0.0.1 writing each stream in 4 KiB HTTP chunks (keep-alive). "
        f"`plain`: a bare asyncio server; `fake`: `FakeGemini`. Streams at scale {plan.scale} "
        f"(events: "
        + ", ".join(f"`{n}` {s.events:,}" for n, s in streams.items())
        + "). `at once`: streams in flight together in one event loop. `raw/*` reads the "
        "body and aggregates nothing; `fastagg/*` is `GeminiClient(transport=...).stream()` + "
        "`fastagg.transport.pump(body, agg.feed)` + `close().parts` (H11: chunk by chunk; "
        "`raw/*` pumps into a function that does nothing); `in process` is the aggregation alone on the same bytes "
        "(the contenders table's fastagg row). google-genai uses its own default async stack; "
        "the ADK row is `google.adk.models.Gemini.generate_content_async(stream=True)` (ADK's "
        f"model layer with its streaming aggregator) on that. `ADK ÷ fastagg` is against "
        f"`{OURS}` (the default transport). `transport ÷ aggregation`: "
        f"`{RAW}` (the default transport alone, measured) ÷ `in process`, then in brackets "
        f"(`{OURS}` minus `in process`) ÷ `in process` (the same, by difference: noisier, "
        "it can even come out below 0).",
        "",
        "| server | stream | at once | in process | "
        + " | ".join(CONTENDER_ORDER)
        + " | ADK ÷ fastagg | transport ÷ aggregation |",
        "|---|---|---:|---:|" + "---:|" * len(CONTENDER_ORDER) + "---:|---:|",
    ]

    def transport(kind: str, name: str, c: int) -> str:
        raw = results.get((kind, name, c, RAW))
        fa = results.get((kind, name, c, OURS))
        if not isinstance(raw, float) or not isinstance(fa, float):
            return "-"
        agg = in_process[name]
        return f"{raw / agg:.2f}x ({(fa - agg) / agg:.2f}x)"

    for kind in plan.servers:
        for name in plan.streams:
            for c in plan.concurrency:
                row = [results.get((kind, name, c, label)) for label in CONTENDER_ORDER]
                fa = results.get((kind, name, c, OURS))
                adk = results.get((kind, name, c, "google-genai + ADK"))
                ratio = (
                    f"{adk / fa:.0f}x" if isinstance(fa, float) and isinstance(adk, float) else "-"
                )
                lines.append(
                    f"| {kind} | {name} | {c} | {_cell(in_process[name])} | "
                    + " | ".join(_cell(v) for v in row)
                    + f" | {ratio} | {transport(kind, name, c)} |"
                )
    if not plan.quick:  # K5: a one-iteration run judges no target
        lines += [
            "",
            f"Targets ({OURS}, the default; `plain` server, 1 at once unless said):",
            "",
        ]
        lines += ["| target | stream | measured | met |", "|---|---|---|---|"]
        for name in plan.streams:
            fa = results.get(("plain", name, 1, OURS))
            adk = results.get(("plain", name, 1, "google-genai + ADK"))
            need = 100 if name == "text" else 50
            if name in adk_pairs and isinstance(fa, float) and isinstance(adk, float):
                x = adk_pairs[name]
                lines.append(
                    f"| ≥ {need}x google-genai + ADK | `{name}` | {x:.0f}x (median of "
                    f"{2 * plan.reps + 1} back-to-back pairs; the cells: {adk / fa:.0f}x) | "
                    f"{'yes' if x >= need else f'no ({need / x:.2f}x short)'} |"
                )
            elif isinstance(adk, str):
                lines.append(f"| ≥ {need}x google-genai + ADK | `{name}` | - ({adk}) | - |")
            if name in transport_pairs:
                t = transport_pairs[name]
                lines.append(
                    f"| transport ≤ 1x the aggregation | `{name}` | {t.raw:.2f}x "
                    f"(median of {2 * plan.reps + 1} back-to-back pairs; the cells: "
                    f"{transport('plain', name, 1)}; in the same pairs the asyncio floor "
                    f"{t.floor:.2f}x, and {t.woken:.2f}x waking a task per read) | "
                    f"{'yes' if t.raw <= 1 else f'no ({t.raw:.2f}x)'} |"
                )
            top = max(plan.concurrency)
            if name in paired:
                x = paired[name]
                lines.append(
                    f"| {top} at once ≤ 1 at once, per event | `{name}` | {x:.2f}x "
                    f"(median of {2 * plan.reps + 1} back-to-back pairs) | "
                    f"{'yes' if x <= 1 else f'no ({x:.2f}x)'} |"
                )
        if transport_pairs:
            lines += [
                "",
                "The asyncio floor is a bare `asyncio.Protocol` on one keep-alive connection: "
                "called once per socket read, it parses nothing and wakes no task, so it is "
                "what the event loop and the kernel alone cost per read (`epoll_wait`, "
                "`recv`, the loop's own Python). Any asyncio transport costs at least that; "
                "where the floor is near 1x the aggregation, the target is out of reach of "
                "any HTTP stack on this event loop. The second floor is the same Protocol "
                "waking a waiting task on every read, as the reader of any pull-style "
                "stack (`async for chunk in body`) is woken, still parsing nothing: what "
                "the wake alone adds (the future, the loop's handle, the task's step). "
                "It also changes how a body splits into reads: the woken task keeps the "
                "loop busy, so it is back at the socket sooner and takes smaller pieces. "
                "Socket reads per stream (medians of 20 streams):",
                "",
                "| stream | body bytes | 4 KiB writes | reads, bare floor | reads, floor + wake |",
                "|---|---:|---:|---:|---:|",
            ]
            for name, t in transport_pairs.items():
                size = len(streams[name].body)
                lines.append(
                    f"| {name} | {size:,} | {math.ceil(size / WRITE)} | "
                    f"{t.floor_reads:.1f} | {t.woken_reads:.1f} |"
                )
    lines.append("")
    # per-chunk work and read strategies
    text = _text_of(streams)
    writes = math.ceil(len(text.body) / WRITE)
    lines += [
        f"Python frames entered between the socket and the consumer while the body of "
        f"`{text.name}` is read (`raw/*`, `sys.setprofile` call events, request setup "
        f"excluded): "
        + "; ".join(
            f"{t}: {f / writes:.1f} frames per 4 KiB HTTP chunk sent ({f} frames for {writes} "
            f"HTTP chunks, yielded as {n} pieces)"
            for t, (f, n) in frames.items()
        )
        + ".",
        "",
        "Ways of reading the body, each feeding `StreamAggregator` (µs per event, `plain`, "
        f"`{text.name}`):",
        "",
        "| way | " + " | ".join(f"{c} at once" for c in ways) + " |",
        "|---|" + "---:|" * len(ways),
    ]
    if not ways:
        lines[-5:] = ["(Ways of reading the body: not measured in --quick.)"]
    for label in next(iter(ways.values()), {}):
        lines.append(f"| {label} | " + " | ".join(_cell(ways[c][label]) for c in ways) + " |")
    lines += _per_request_markdown(per_request(3 if quick else 15, 50 if quick else 400))
    return "\n".join(lines)


async def target_pairs(
    url: str, stream: corpus.Stream, pairs: int, fast_events: int, slow_events: int
) -> list[str]:
    """The back-to-back pairs two of the end-to-end targets are judged by, for
    one stream alone (a minute instead of the whole report): the default
    transport alone against the aggregation, beside the two asyncio floors,
    and, where google-adk is installed, google-genai + ADK ÷ fastagg. One line
    each; the ratios are what the report's targets table gives for the stream."""
    raw, floor, woken = FastaggContender(DEFAULT, aggregate=False), ProtocolFloor(), WakingFloor()
    for contender in (raw, floor, woken):
        await contender.open(url)
    t = await _paired_transport(raw, floor, woken, stream, fast_events, pairs)
    for contender in (raw, floor, woken):
        await contender.close()
    lines = [
        f"{stream.name}: transport ÷ aggregation {t.raw:.2f}x; in the same pairs the bare "
        f"Protocol {t.floor:.2f}x and the floor + wake {t.woken:.2f}x (pairs: {pairs})"
    ]
    if not adk_available():
        return [*lines, f"{stream.name}: google-genai + ADK ÷ fastagg: google-adk not installed"]
    adk, ours = AdkContender(), FastaggContender(DEFAULT)
    await adk.open(url)
    await ours.open(url)
    plan = replace(_plan(False), fast_events=fast_events, slow_events=slow_events)
    ratio = await _paired_sdk(adk, ours, stream, plan, pairs)
    await adk.close()
    await ours.close()
    return [*lines, f"{stream.name}: google-genai + ADK ÷ fastagg {ratio:.1f}x (pairs: {pairs})"]


def _targets(name: str, pairs: int) -> None:
    plan = _plan(False)
    stream = corpus.build(name, scale=plan.scale)
    with Server("plain", plan.scale) as server:
        lines = asyncio.run(
            target_pairs(server.url, stream, pairs, plan.fast_events, plan.slow_events)
        )
    print("\n".join(lines))


USAGE = (
    "usage: python -m benches.e2e serve plain|fake SCALE  (a bench server; the parent "
    "reads its port from stdout)\n"
    "       python -m benches.e2e targets STREAM [PAIRS]  (the target pairs of one stream, "
    "plain server, the report's scale; PAIRS defaults to 7)"
)


def main(argv: Sequence[str]) -> int:
    """``serve KIND SCALE`` or ``targets STREAM [PAIRS]`` (see ``USAGE``)."""
    if len(argv) == 3 and argv[0] == "serve" and argv[1] in ("plain", "fake"):
        asyncio.run(_serve(argv[1], float(argv[2])))
        return 0
    if len(argv) in (2, 3) and argv[0] == "targets" and argv[1] in E2E_STREAMS:
        if len(argv) == 2 or (argv[2].isdigit() and int(argv[2]) > 0):
            _targets(argv[1], int(argv[2]) if len(argv) == 3 else 7)
            return 0
    print(f"{USAGE}\n(got {list(argv)}; streams: {', '.join(E2E_STREAMS)})", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
