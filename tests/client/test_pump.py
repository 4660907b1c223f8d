"""fastagg.transport.pump (H11): a body handed to a callable as it arrives, on every
transport, with the same errors as iterating it."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Callable
from typing import Any

import pytest

from fastagg.client import GeminiClient
from fastagg.errors import ProviderError
from fastagg.testing import FakeGemini, Step, chunk, final, signature, text
from fastagg.transport import pump
from http_bodies import CHUNKS, DROP_ERROR, REQUEST, frames

MANY = [chunk(text(f"word {i} ")) for i in range(12)] + [final(signature("s"))]


async def pumped(
    client: GeminiClient, feed: Callable[[bytes], object], timeout: float | None = None
) -> None:
    async with client.stream(REQUEST, timeout=timeout) as body:
        await pump(body, feed)


async def pump_one(
    step: Step, transport: str, pieces: list[bytes], timeout: float | None = None
) -> None:
    """Pump one request that FakeGemini answers with ``step`` into ``pieces``."""
    async with (
        FakeGemini([step]) as server,
        GeminiClient("m", api_key="k", base_url=server.url, transport=transport) as client,
    ):
        await pumped(client, pieces.append, timeout)


async def test_h11_pump_feeds_the_body_bytes_unchanged_and_in_order(transport: str) -> None:
    pieces: list[bytes] = []
    await pump_one(Step(MANY, tiny_writes=7), transport, pieces)
    assert b"".join(pieces) == frames(MANY)
    assert all(type(piece) is bytes and piece for piece in pieces)


async def test_h11_a_drop_mid_body_feeds_what_came_then_raises_as_iteration_does(
    transport: str,
) -> None:
    pieces: list[bytes] = []
    with pytest.raises(ProviderError) as info:
        await pump_one(Step(CHUNKS, drop_after=1), transport, pieces)
    received = b"".join(pieces)
    assert received == frames(CHUNKS[:1])  # H7: nothing received is lost
    assert (info.value.kind, info.value.retryable, info.value.status) == ("connection", True, None)
    assert info.value.message.startswith(
        f"connection failed after {len(received)} bytes of the body: {DROP_ERROR[transport]}"
    )


async def test_h11_no_bytes_for_the_timeout_is_a_timeout_error_after_what_came(
    transport: str,
) -> None:
    pieces: list[bytes] = []
    with pytest.raises(ProviderError) as info:
        # 1 s: the wait for the head and the first chunk must not run out on a loaded machine
        await pump_one(Step(CHUNKS, pause_after=1, pause=float("inf")), transport, pieces, 1.0)
    received = b"".join(pieces)
    assert received == frames(CHUNKS[:1])
    assert (info.value.kind, info.value.code, info.value.retryable) == (
        "timeout",
        "DEADLINE_EXCEEDED",
        True,
    )
    assert info.value.message.startswith(f"timed out after {len(received)} bytes of the body")


async def test_h11_the_timeout_bounds_each_wait_for_bytes_not_the_whole_body(
    transport: str,
) -> None:
    # 13 chunks 0.1 s apart take 1.2 s; no wait is longer than 0.1 s, so a 1 s
    # timeout never passes (a timer armed once for the whole body would fire).
    pieces: list[bytes] = []
    await pump_one(Step(MANY, chunk_interval=0.1), transport, pieces, 1.0)
    assert b"".join(pieces) == frames(MANY)


async def test_h11_what_feed_raises_ends_the_body_and_is_raised_as_it_is(transport: str) -> None:
    failure = ValueError("the consumer refused the bytes")
    calls: list[bytes] = []

    def refuse(piece: bytes) -> None:
        calls.append(piece)
        raise failure

    async with (
        FakeGemini([Step(MANY, chunk_interval=0.05), CHUNKS]) as server,
        GeminiClient("m", api_key="k", base_url=server.url, transport=transport) as client,
    ):
        with pytest.raises(ValueError) as info:
            await pumped(client, refuse)
        assert info.value is failure
        assert len(calls) == 1  # nothing is fed after the feed failed
        # The cut body's connection is not reused: the next request is answered whole.
        pieces: list[bytes] = []
        await pumped(client, pieces.append)
    assert b"".join(pieces) == frames(CHUNKS)


async def test_h11_a_cancelled_pump_closes_the_response_and_the_next_request_works(
    transport: str,
) -> None:
    started = asyncio.Event()
    pieces: list[bytes] = []

    def feed(piece: bytes) -> None:
        started.set()

    async with (
        FakeGemini([Step(CHUNKS, pause_after=1, pause=float("inf")), CHUNKS]) as server,
        GeminiClient("m", api_key="k", base_url=server.url, transport=transport) as client,
    ):
        task = asyncio.create_task(pumped(client, feed))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await pumped(client, pieces.append)
    assert b"".join(pieces) == frames(CHUNKS)


async def test_h11_a_gzip_body_is_fed_decoded(transport: str) -> None:
    body = frames(MANY)
    packed = gzip.compress(body)
    answer = b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: %d\r\n\r\n%s" % (
        len(packed),
        packed,
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    pieces: list[bytes] = []
    async with server, GeminiClient("m", api_key="k", base_url=url, transport=transport) as client:
        await pumped(client, pieces.append)
    assert b"".join(pieces) == body


async def test_h11_a_body_with_its_own_pump_is_pumped_by_it() -> None:
    # A third-party transport may push its bytes: pump() hands feed to the body's own.
    class Pushing:
        def __aiter__(self) -> Any:
            raise AssertionError("iterated instead of pumped")

        async def pump(self, feed: Callable[[bytes], object]) -> None:
            feed(b"pushed")

    pieces: list[bytes] = []
    await pump(Pushing(), pieces.append)  # type: ignore[arg-type]
    assert pieces == [b"pushed"]


async def test_h11_any_async_iterator_is_pumped_chunk_by_chunk() -> None:
    async def body() -> Any:
        for piece in (b"a", b"bc", b"def"):
            yield piece

    pieces: list[bytes] = []
    await pump(body(), pieces.append)
    assert pieces == [b"a", b"bc", b"def"]


async def test_h11_a_coroutine_function_as_feed_is_a_clear_error_before_anything_is_read() -> None:
    read: list[bytes] = []

    async def body() -> Any:
        read.append(b"x")
        yield b"x"

    async def feed(piece: bytes) -> None: ...

    with pytest.raises(TypeError) as info:
        await pump(body(), feed)
    assert str(info.value) == (
        "pump() calls feed synchronously, once per piece; test_h11_a_coroutine_function_as_feed_"
        "is_a_clear_error_before_anything_is_read.<locals>.feed is a coroutine function: iterate "
        "the body instead (async for piece in body: await feed(piece))"
    )
    assert read == []
