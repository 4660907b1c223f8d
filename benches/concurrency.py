"""1,000 concurrent streams in one event loop (issue 38's guard rail).

spec/contract/performance.md: "Concurrency: 1,000 simultaneous streams in one
event loop cost at most 1.3x the client CPU per event of one stream at a time,
and every stream completes." The guard rail adds: no file descriptor left open.

A server subprocess (so that its CPU is not counted) serves the corpus
streams: ``benches.e2e``'s plain asyncio server (4 KiB HTTP chunks,
keep-alive), its listen backlog raised to :data:`BACKLOG` so that a thousand
connects at once are all accepted on the first try. The client process, for
each corpus stream and each client, measures ``time.process_time()`` per
event received for

- ``one at a time``: ``n`` streams, each awaited before the next starts;
- ``all at once``: the same ``n`` streams in one ``asyncio.gather``;

in back-to-back pairs whose order alternates (as benches.e2e's do); the ratio is the median of
the pairs' ratios, the µs/event columns the medians of each side. Each stream
is ``GeminiClient(base_url=server).stream()`` read chunk by chunk into
``StreamAggregator.feed``, then ``close()`` and ``.parts`` (what an agent
reads), the path ``benches.e2e``'s ``fastagg/aiohttp`` row takes. Two clients:

- ``default``: ``GeminiClient(...)`` as a user makes it (its aiohttp pool holds
  100 connections: the other streams of a gather wait for one);
- ``1,000 connections``: the same client on the caller's own
  ``aiohttp.ClientSession`` whose connector allows ``n`` connections, so that
  every stream of the gather is on the wire at once.

Each pair starts with the pool as the previous round left it (kept alive),
so that connecting is not counted; the very first round of a client opens
the connections and is reported on its own (``first round``). After every
round, untimed: each result is checked complete (``complete``, not
truncated, no error, every event seen) and equal (``to_json()``) to the
aggregation of the same body in process, which is what one stream at a time
gives. The client process's open file descriptors (``/proc/self/fd``) are
counted before the client is made and after it is closed.

``python -m benches.concurrency`` runs it (``--help``); ``serve SCALE`` is the
server (used internally).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp
import orjson

from fastagg import GeminiClient, StreamAggregator

from . import corpus, e2e

if TYPE_CHECKING:
    pass

__all__ = ["Row", "concurrency_markdown", "measure"]

N = 1000
SCALE = 0.3  # the end-to-end section's scale (events: text 991 ... tool_parallel 120)
PAIRS = 3
BACKLOG = 4096  # at least N: a connect beyond the backlog is dropped and retried a second later
CLIENTS = ("default", "wide")
CLIENT_LABEL = {"default": "default (pool of 100)", "wide": "own session, {n:,} connections"}
QUICK = {"n": 5, "scale": 0.02, "pairs": 1, "streams": ("text",)}


# --------------------------------------------------------------------------
# the server subprocess
# --------------------------------------------------------------------------


def raise_fd_limit(need: int) -> int:
    """Raise this process's soft ``RLIMIT_NOFILE`` toward the hard limit when below
    ``need``; the soft limit it has then."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        soft = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return soft


async def _paced_server(bodies: dict[str, bytes], seconds: float) -> asyncio.Server:
    """``benches.e2e``'s plain server, each stream's 4 KiB pieces spread over ``seconds``
    (as a model writing its answer does)."""
    pieces = {name: e2e._chunked(body) for name, body in bodies.items()}
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    step = e2e.WRITE + 8

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                header = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in header.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                body = orjson.loads(await reader.readexactly(length))
                framed = pieces[e2e._stream_of(body)]
                writes = range(0, len(framed), step)
                writer.write(head)
                for i in writes:
                    await asyncio.sleep(seconds / len(writes))
                    writer.write(framed[i : i + step])
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client left, or the server is stopping: this connection is done
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0, backlog=BACKLOG)


async def _serve(scale: float, seconds: float) -> None:
    raise_fd_limit(2 * BACKLOG)
    bodies = e2e._bodies(scale)
    if seconds > 0:
        server = await _paced_server(bodies, seconds)
    else:
        server = await e2e._plain_server(bodies)
    # listen() again on the same socket sets its backlog (Linux): e2e's is 512.
    listening = server.sockets[0].dup()
    listening.listen(BACKLOG)
    listening.close()
    print(server.sockets[0].getsockname()[1], flush=True)
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    loop.add_reader(sys.stdin.fileno(), lambda: done.done() or done.set_result(None))
    try:
        await asyncio.wait_for(done, e2e.SERVER_LIFETIME)
    except TimeoutError:
        pass
    server.close()
    await server.wait_closed()


class Server(e2e.ServerProcess):
    """The server subprocess on loopback; a context manager (stops when its stdin closes)."""

    def __init__(self, scale: float, seconds: float = 0.0) -> None:
        args = ["benches.concurrency", "serve", repr(scale), repr(seconds)]
        super().__init__(args, "concurrency")


# --------------------------------------------------------------------------
# the client
# --------------------------------------------------------------------------


def open_fds() -> int:
    """How many file descriptors this process has open."""
    return len(os.listdir("/proc/self/fd"))


async def _one(client: GeminiClient, stream: corpus.Stream) -> tuple[Any, int, int]:
    agg = StreamAggregator(deltas=False)
    chunks = 0
    async with client.stream(e2e._request(stream.name), timeout=None) as body:
        async for chunk in body:
            agg.feed(chunk)
            chunks += 1
    result = agg.close()
    result.parts  # noqa: B018 - what an agent reads; part of the cost
    return result, agg.events_seen, chunks


@dataclass
class Tally:
    """What the rounds of one side gave: CPU per event, and the checks (untimed)."""

    cpu: list[float] = field(default_factory=list)  # seconds per event, one per round
    streams: int = 0  # streams started
    complete: int = 0  # complete, every event seen, equal to the in-process result
    failed: list[str] = field(default_factory=list)  # what went wrong, one line each
    chunks: list[int] = field(default_factory=list)  # body chunks (socket reads) per stream
    sockets: list[int] = field(default_factory=list)  # the client's fds as each round starts


def _check(tally: Tally, outcomes: Sequence[Any], stream: corpus.Stream, expected: bytes) -> None:
    tally.streams += len(outcomes)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            tally.failed.append(f"{type(outcome).__name__}: {outcome}")
            continue
        result, events, chunks = outcome
        tally.chunks.append(chunks)
        if not result.complete or result.truncated or result.error is not None:
            tally.failed.append(f"incomplete: {result.finish_reason} {result.error}")
        elif events != stream.events:
            tally.failed.append(f"{events} of {stream.events} events")
        elif result.to_json() != expected:
            tally.failed.append("a result different from one stream's")
        else:
            tally.complete += 1


async def _round(
    client: GeminiClient,
    stream: corpus.Stream,
    n: int,
    at_once: bool,
    tally: Tally,
    expected: bytes,
) -> None:
    gc.collect()
    tally.sockets.append(open_fds())
    t0 = time.process_time()
    if at_once:
        outcomes: list[Any] = await asyncio.gather(
            *(_one(client, stream) for _ in range(n)), return_exceptions=True
        )
    else:
        outcomes = []
        for _ in range(n):
            try:
                outcomes.append(await _one(client, stream))
            except Exception as exc:  # counted as a stream that did not complete
                outcomes.append(exc)
    tally.cpu.append((time.process_time() - t0) / (n * stream.events))
    _check(tally, outcomes, stream, expected)


@dataclass
class Row:
    """One corpus stream through one client."""

    stream: str
    client: str
    events: int  # per stream
    n: int
    pairs: int
    one: Tally
    many: Tally
    ratios: list[float]  # all at once ÷ one at a time, per pair
    first: float  # seconds per event of the first round (all at once, connecting)
    connections: int  # fds the client held after the first round beyond its start (open sockets)
    kept: int  # the fewest of them open as a timed all-at-once round started (kept alive)
    fds_before: int
    fds_closed: int  # right after aclose()
    fds_after: int  # once the loop has run the transports' last callbacks

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)


async def _settled_fds(target: int) -> int:
    """The fd count once closed transports have run their last callbacks (up to 2 s)."""
    for _ in range(200):
        count = open_fds()
        if count <= target:
            return count
        await asyncio.sleep(0.01)
    return open_fds()


async def _measure_one(
    url: str, stream: corpus.Stream, kind: str, n: int, pairs: int, expected: bytes
) -> Row:
    gc.collect()
    before = open_fds()
    session = None
    if kind == "wide":
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=n, limit_per_host=0))
    client = GeminiClient(corpus.GEMINI_MODEL, api_key="bench", base_url=url, http_client=session)
    one, many, first = Tally(), Tally(), Tally()
    ratios = []
    try:
        await _round(client, stream, n, True, first, expected)  # opens the pool's connections
        connections = open_fds() - before
        for i in range(pairs):
            sides = ((one, False), (many, True))
            for tally, at_once in sides if i % 2 == 0 else sides[::-1]:  # alternating
                await _round(client, stream, n, at_once, tally, expected)
            ratios.append(many.cpu[-1] / one.cpu[-1])
    finally:
        await client.aclose()
        if session is not None:
            await session.close()
    closed = open_fds()
    after = await _settled_fds(before)
    kept = min(many.sockets, default=before + connections) - before
    many.streams += first.streams
    many.complete += first.complete
    many.failed = first.failed + many.failed
    many.sockets = first.sockets + many.sockets
    return Row(
        stream.name,
        kind,
        stream.events,
        n,
        pairs,
        one,
        many,
        ratios,
        first.cpu[0],
        connections,
        kept,
        before,
        closed,
        after,
    )


def _expected(stream: corpus.Stream) -> bytes:
    """The result of the body aggregated in process, in the server's 4 KiB pieces."""
    agg = StreamAggregator(deltas=False)
    for i in range(0, len(stream.body), e2e.WRITE):
        agg.feed(stream.body[i : i + e2e.WRITE])
    out: bytes = agg.close().to_json()
    return out


def measure(
    n: int = N,
    streams: Sequence[str] = e2e.E2E_STREAMS,
    scale: float = SCALE,
    pairs: int = PAIRS,
    clients: Sequence[str] = CLIENTS,
) -> list[Row]:
    """Every stream through every client: one :class:`Row` each."""
    raise_fd_limit(n + 256)
    built = {name: corpus.build(name, scale=scale) for name in streams}
    rows = []
    with Server(scale) as server:
        for stream in built.values():
            expected = _expected(stream)
            for kind in clients:
                rows.append(asyncio.run(_measure_one(server.url, stream, kind, n, pairs, expected)))
    return rows


@dataclass
class Completion:
    """Streams that last ``seconds`` each, as a model's do: the first round all at once
    (does every stream complete? wall time), then ``pairs`` back-to-back pairs of ``k``
    streams one at a time and ``n`` at once (client CPU per event)."""

    stream: str
    client: str
    n: int
    k: int
    seconds: float
    first: Tally
    wall: float  # seconds the first round's gather took
    one: Tally
    many: Tally
    ratios: list[float]
    fds_before: int
    fds_after: int


async def _complete_one(
    url: str,
    stream: corpus.Stream,
    kind: str,
    sizes: tuple[int, int, int],
    seconds: float,
    expected: bytes,
) -> Completion:
    n, k, pairs = sizes
    before = open_fds()
    session = None
    if kind == "wide":
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=n, limit_per_host=0))
    client = GeminiClient(corpus.GEMINI_MODEL, api_key="bench", base_url=url, http_client=session)
    first, one, many = Tally(), Tally(), Tally()
    ratios = []
    t0 = time.monotonic()
    try:
        await _round(client, stream, n, True, first, expected)
        wall = time.monotonic() - t0
        for i in range(pairs):
            sides = ((one, k, False), (many, n, True))
            for tally, size, at_once in sides if i % 2 == 0 else sides[::-1]:  # alternating
                await _round(client, stream, size, at_once, tally, expected)
            ratios.append(many.cpu[-1] / one.cpu[-1])
    finally:
        await client.aclose()
        if session is not None:
            await session.close()
    after = await _settled_fds(before)
    return Completion(
        stream.name, kind, n, k, seconds, first, wall, one, many, ratios, before, after
    )


def completion(
    n: int,
    stream: str,
    scale: float,
    seconds: float,
    clients: Sequence[str] = CLIENTS,
    pairs: int = 0,
    k: int = 10,
) -> list[Completion]:
    """``n`` streams at once through each client, each stream lasting ``seconds``; then
    ``pairs`` pairs of ``k`` one at a time against ``n`` at once."""
    raise_fd_limit(n + 256)
    built = corpus.build(stream, scale=scale)
    expected = _expected(built)
    with Server(scale, seconds) as server:
        return [
            asyncio.run(_complete_one(server.url, built, kind, (n, k, pairs), seconds, expected))
            for kind in clients
        ]


def completion_markdown(done: Sequence[Completion], command: str) -> str:
    """The paced rounds as a table, with the failures grouped by message."""
    lines = [
        f"Command: `{command}`",
        "",
        "| stream | client | at once | each stream lasts | first round: wall, complete | "
        "1 at a time µs/event | at once µs/event | at once ÷ 1 at a time | streams complete | "
        "chunks per stream | fds before / settled |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    failures: list[str] = []
    for c in done:
        label = CLIENT_LABEL[c.client].format(n=c.n)
        timed = bool(c.ratios)
        lines.append(
            f"| {c.stream} | {label} | {c.n:,} | {c.seconds:g} s | {c.wall:.1f} s, "
            f"{c.first.complete:,} of {c.first.streams:,} | "
            + (
                f"{_us(c.one.cpu)} ({c.k} streams) | {_us(c.many.cpu)} | "
                f"{statistics.median(c.ratios):.2f}x ({', '.join(f'{x:.2f}' for x in c.ratios)})"
                if timed
                else "- | - | -"
            )
            + f" | {c.first.complete + c.one.complete + c.many.complete:,} of "
            f"{c.first.streams + c.one.streams + c.many.streams:,} | "
            f"{_median(c.one.chunks)} / {_median(c.first.chunks + c.many.chunks)} | "
            f"{c.fds_before} / {c.fds_after} |"
        )
        for message, count in Counter(c.first.failed + c.one.failed + c.many.failed).most_common(5):
            failures.append(f"- {label}: {count:,} x {message}")
    if failures:
        lines += ["", "Streams that did not complete:", *failures]
    return "\n".join(lines)


def _us(seconds: list[float]) -> str:
    return f"{1e6 * statistics.median(seconds):.2f}"


def _median(values: list[int]) -> str:
    return f"{statistics.median(values):g}" if values else "-"


def concurrency_markdown(rows: Sequence[Row], command: str) -> str:
    """The report section for ``rows``."""
    n = rows[0].n
    lines = [
        f"Command: `{command}`",
        "",
        f"| stream | client | events | 1 at a time µs/event | {n:,} at once µs/event | "
        f"at once ÷ 1 at a time | first round µs/event | streams complete | sockets open | "
        "chunks per stream | fds before / after close / settled |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        done = r.one.complete + r.many.complete
        total = r.one.streams + r.many.streams
        lines.append(
            f"| {r.stream} | {CLIENT_LABEL[r.client].format(n=r.n)} | {r.events:,} | {_us(r.one.cpu)} | "
            f"{_us(r.many.cpu)} | {r.ratio:.2f}x ({', '.join(f'{x:.2f}' for x in r.ratios)}) | "
            f"{1e6 * r.first:.2f} | {done:,} of {total:,} | {r.connections:,} ({r.kept:,}) | "
            f"{_median(r.one.chunks)} / {_median(r.many.chunks)} | "
            f"{r.fds_before} / {r.fds_closed} / {r.fds_after} |"
        )
    failures = [
        f"- {r.stream}, {r.client}: {f}" for r in rows for f in (r.one.failed + r.many.failed)
    ]
    if failures:
        lines += ["", "Streams that did not complete:", *failures[:20]]
        if len(failures) > 20:
            lines.append(f"- ... and {len(failures) - 20} more")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    """``serve SCALE`` (the server), or the bench (``--help``)."""
    if len(argv) == 3 and argv[0] == "serve":
        asyncio.run(_serve(float(argv[1]), float(argv[2])))
        return 0
    parser = argparse.ArgumentParser(prog="python -m benches.concurrency")
    parser.add_argument("--n", type=int, default=N, help="streams at once (default %(default)s)")
    parser.add_argument("--streams", default=",".join(e2e.E2E_STREAMS))
    parser.add_argument("--scale", type=float, default=SCALE)
    parser.add_argument("--pairs", type=int, default=PAIRS)
    parser.add_argument("--clients", default=",".join(CLIENTS), help="default,wide")
    parser.add_argument("--quick", action="store_true", help="5 streams of a small `text`")
    parser.add_argument(
        "--paced",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="instead: every stream lasts SECONDS; one round all at once, untimed: do all complete?",
    )
    parser.add_argument(
        "--paced-pairs",
        action="store_true",
        help="with --paced: then --pairs pairs of K one at a time against N at once (CPU)",
    )
    parser.add_argument("--k", type=int, default=10, help="with --paced-pairs: one at a time")
    args = parser.parse_args(argv)
    if args.paced > 0:
        command = "python -m benches.concurrency " + " ".join(argv)
        done = completion(
            args.n,
            args.streams.split(",")[0],
            args.scale,
            args.paced,
            args.clients.split(","),
            args.pairs if args.paced_pairs else 0,
            args.k,
        )
        print(completion_markdown(done, command))
        return 0
    if args.quick:
        rows = measure(**QUICK)  # type: ignore[arg-type]
    else:
        rows = measure(
            args.n, args.streams.split(","), args.scale, args.pairs, args.clients.split(",")
        )
    command = "python -m benches.concurrency " + " ".join(argv)
    print(concurrency_markdown(rows, command.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
