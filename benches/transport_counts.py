"""What each transport does per HTTP chunk between the socket and the consumer (H6, K7).

Issue 14: "Count the Python frames and allocations between the socket and
``feed()``". The frames are counted in ``e2e.py`` (``sys.setprofile``); this
module counts, with callgrind (``callgrind.py``), the Python allocations
(calls into pymalloc) and the instructions of the client process per 4 KiB
HTTP chunk sent, for each built-in transport reading a body raw.

Per chunk, not per request: the same client reads the `text` stream from a
plain server at two scales (the same number of requests, bodies of
different lengths), and the difference is divided by the difference in
HTTP chunks, so the request, its headers and the response head cancel out.
"""

from __future__ import annotations

import math

from . import callgrind, corpus, e2e

__all__ = ["CLIENT", "per_chunk", "per_request", "transport_counts_markdown"]

# Reads the body of one stream N times (the last argument) on one kept-alive connection;
# `transport` "floor" is the floor that wakes a task per read (e2e.WakingFloor).
CLIENT = """
import asyncio, sys, types
from benches import e2e
url, transport, name, n = sys.argv[1:5]
async def main():
    if transport == "floor":
        reader = e2e.WakingFloor()
    else:
        reader = e2e.FastaggContender(transport, aggregate=False)
    await reader.open(url)
    for _ in range(int(n)):
        await reader.one(types.SimpleNamespace(name=name))
    await reader.close()
asyncio.run(main())
"""

STREAM = "text"
SCALES = (0.3, 0.6)


def _writes(scale: float) -> int:
    return math.ceil(len(corpus.build(STREAM, scale=scale).body) / e2e.WRITE)


def per_chunk(transport: str, scales: tuple[float, float] = SCALES) -> callgrind.Counts:
    """The client's counts per HTTP chunk of `text` for ``transport`` (raw read)."""
    reads = []
    for scale in scales:
        with e2e.Server("plain", scale) as server:
            reads.append(callgrind.per_job(CLIENT, [server.url, transport, STREAM]))
    return reads[1].minus(reads[0], _writes(scales[1]) - _writes(scales[0]))


def per_request(transport: str) -> callgrind.Counts:
    """The client's counts per request of the short stream (`text` at
    ``e2e.SHORT_SCALE``, H9) for ``transport`` (raw read), or ``"floor"``:
    forty requests less ten, on a connection already kept alive, over thirty."""
    with e2e.Server("plain", e2e.SHORT_SCALE) as server:
        return callgrind.per_job(CLIENT, [server.url, transport, STREAM], small=10, large=40)


def transport_counts_markdown() -> str:
    if not callgrind.available():
        return "(Python allocations per HTTP chunk: not measured, valgrind is not on this machine.)"
    scales = SCALES
    lines = [
        "| transport | Python allocations per 4 KiB HTTP chunk | instructions per chunk | "
        "functions with the most (share) |",
        "|---|---:|---:|---|",
    ]
    for transport in e2e.TRANSPORTS:
        counts = per_chunk(transport, scales)
        top = ", ".join(
            f"`{callgrind.short_name(fn)}` {ir / counts.total:.0%}" for fn, ir in counts.top(4)
        )
        lines.append(f"| {transport} | {counts.allocations():.1f} | {counts.total:,.0f} | {top} |")
    lines += [
        "",
        f"Counted with callgrind in the client process reading `{STREAM}` raw (`raw/*`, no "
        f"aggregation) from the plain server at scales {scales[0]:g} and {scales[1]:g}: each "
        "count is the difference between the two bodies (each read three times and once, "
        "differenced, on one kept-alive connection) divided by the difference in HTTP chunks, so "
        "the request and the response head cancel out. Python allocations are calls into "
        "pymalloc; instructions include the event loop's own per read (the kernel's are not "
        "counted).",
        "",
        "Per request (H9), the same counts for a short stream (`text` at scale "
        f"{e2e.SHORT_SCALE}, a step of an agent turn): forty requests less ten on a kept-alive "
        "connection, over thirty, so everything a request does is counted once and first uses "
        "cancel out. `floor + wake` is the floor that wakes a task per read, writing its "
        "request by hand and parsing nothing.",
        "",
        "| stack | instructions per request | beyond the floor | Python allocations per request |",
        "|---|---:|---:|---:|",
    ]
    floor = per_request("floor")
    for transport in e2e.TRANSPORTS:
        counts = per_request(transport)
        lines.append(
            f"| raw/{transport} | {counts.total:,.0f} | {counts.total - floor.total:,.0f} | "
            f"{counts.allocations():.1f} |"
        )
    lines.append(f"| floor + wake | {floor.total:,.0f} | - | {floor.allocations():.1f} |")
    return "\n".join(lines)
