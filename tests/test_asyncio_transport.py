"""fastagg._asyncio_transport: TLS, the connection pool and keep-alive of
fastagg's own HTTP/1.1 transport (H8); its errors and body are tested on every
transport in test_http_client.py."""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest

from conftest import LoopThread
from fastagg import _asyncio_transport
from fastagg.client import GeminiClient
from fastagg.errors import ProviderError
from fastagg.testing import FakeGemini, chunk, final, signature, text
from fastagg.transport import AsyncioTransport
from http_bodies import read_request

TLS = Path(__file__).parent / "data" / "tls"  # a self-signed certificate for 127.0.0.1
REQUEST = {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}
CHUNKS = [chunk(text("Hello")), final(signature("s"))]
BODY = b"".join(
    b"data: " + json.dumps(c, ensure_ascii=False, separators=(",", ": ")).encode() + b"\r\n\r\n"
    for c in CHUNKS
)


def server_tls() -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(TLS / "cert.pem", TLS / "key.pem")
    return context


def client_tls() -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(TLS / "cert.pem"))


async def read_all(client: GeminiClient) -> bytes:
    out = b""
    async with client.stream(REQUEST, timeout=None) as body:
        async for piece in body:
            out += piece
    return out


def trusting(transport: str) -> Any:
    """``transport`` as a client that trusts the test certificate."""
    if transport == "asyncio":
        return AsyncioTransport(ssl_context=client_tls())
    if transport == "aiohttp":
        return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_tls()))
    return httpx.AsyncClient(verify=client_tls())


async def test_h3_s6_tls_is_verified_against_the_given_trust(transport: str) -> None:
    async with FakeGemini([CHUNKS], ssl_context=server_tls()) as server:
        assert server.url.startswith("https://127.0.0.1:")
        http = trusting(transport)
        async with GeminiClient("m", api_key="k", base_url=server.url, http_client=http) as client:
            assert await read_all(client) == BODY
        await (http.close() if isinstance(http, aiohttp.ClientSession) else http.aclose())


async def test_h3_s6_an_untrusted_certificate_is_a_connection_error(transport: str) -> None:
    async with (
        FakeGemini([CHUNKS], ssl_context=server_tls()) as server,
        GeminiClient("m", api_key="k", base_url=server.url, transport=transport) as client,
    ):
        with pytest.raises(ProviderError) as info:
            await read_all(client)
    assert (info.value.kind, info.value.code) == ("connection", "CONNECTION")
    assert "certificate verify failed" in info.value.message
    assert server.records == []


async def serve(
    answer: Any, on_end: Callable[[int], object] | None = None
) -> tuple[asyncio.Server, str, list[int]]:
    """A plain HTTP/1.1 server: ``answer(conn_index, request_index)`` -> bytes or None (close);
    ``on_end(conn_index)`` when a connection has ended."""
    connections: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = len(connections)
        connections.append(0)
        try:
            while True:
                await read_request(reader)
                reply = answer(index, connections[index])
                connections[index] += 1
                if reply is None:
                    break
                writer.write(reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            if on_end is not None:
                on_end(index)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}", connections


OK = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)


async def test_h8_a_kept_alive_connection_closed_as_the_request_left_is_retried_once() -> None:
    # The server answers the first request on each connection and closes on the second
    # without a byte: the client sends that request once more, on a new connection.
    server, url, connections = await serve(lambda conn, req: OK if req == 0 else None)
    async with server, GeminiClient("m", api_key="k", base_url=url, transport="asyncio") as client:
        assert await read_all(client) == BODY
        assert await read_all(client) == BODY
    assert connections == [2, 1]


async def test_h8_a_new_connection_that_fails_before_any_byte_is_not_retried() -> None:
    server, url, connections = await serve(lambda conn, req: None)
    async with server, GeminiClient("m", api_key="k", base_url=url, transport="asyncio") as client:
        with pytest.raises(ProviderError) as info:
            await read_all(client)
    assert info.value.message == (
        "connection failed before the response started: IncompleteBody: "
        "the server closed the connection before the response head ended"
    )
    assert connections == [1]


async def test_h7_a_framing_error_read_with_the_head_keeps_the_response_and_its_bytes() -> None:
    # Head, one good chunk and a broken chunk-size line in one write (and so, here, in
    # one socket read): the response started, and the good bytes come before the error.
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\nzz\r\n"
    server, url, _ = await serve(lambda conn, req: chunked % (len(BODY), BODY))
    received = b""
    async with server, GeminiClient("m", api_key="k", base_url=url, transport="asyncio") as client:
        with pytest.raises(ProviderError) as info:
            async with client.stream(REQUEST, timeout=5) as body:
                async for piece in body:
                    received += piece
    assert received == BODY
    assert info.value.message == (
        f"connection failed after {len(BODY)} bytes of the body: HttpProtocolError: a "
        f"chunk-size line is not hexadecimal: b'zz' (after {len(BODY)} bytes of the body)"
    )


async def test_h8_requests_wait_for_a_free_connection_at_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_asyncio_transport, "MAX_CONNECTIONS", 1)
    server, url, connections = await serve(lambda conn, req: OK)
    async with server, GeminiClient("m", api_key="k", base_url=url, transport="asyncio") as client:
        bodies = await asyncio.gather(*(read_all(client) for _ in range(3)))
    assert bodies == [BODY] * 3
    assert connections == [3]  # one connection, three requests in turn


async def test_h8_a_response_read_halfway_closes_its_connection() -> None:
    server, url, connections = await serve(lambda conn, req: OK)
    async with server, GeminiClient("m", api_key="k", base_url=url, transport="asyncio") as client:
        async with client.stream(REQUEST, timeout=None) as body:
            await body.__anext__()  # the whole (small) body arrived in one read
            # stopped before the end of the iteration: nothing says the body is done
        assert await read_all(client) == BODY
    assert len(connections) in (1, 2)


def test_h8_request_headers_with_line_breaks_are_refused() -> None:
    with pytest.raises(ValueError, match=r"the header 'x-a' has a line break"):
        _asyncio_transport._request(b"POST", b" / HTTP/1.1\r\n", b"", {"x-a": "1\r\nX-B: 2"})


def test_h8_the_request_asks_for_identity_and_frames_the_body_itself() -> None:
    wire = _asyncio_transport._request(
        b"POST",
        b" /v1 HTTP/1.1\r\nhost: h\r\n",
        b"{}",
        {"Content-Length": "99", "x-goog-api-key": "k", "Connection": "close"},
    )
    assert wire == (
        b"POST /v1 HTTP/1.1\r\nhost: h\r\nx-goog-api-key: k\r\naccept-encoding: identity\r\n"
        + b"user-agent: "
        + _asyncio_transport.USER_AGENT.encode()
        + b"\r\ncontent-length: 2\r\n\r\n{}"
    )


def test_h8_a_client_used_under_two_event_loops_opens_a_new_connection() -> None:
    async def main() -> list[bytes]:
        server, url, connections = await serve(lambda conn, req: OK)
        client = GeminiClient("m", api_key="k", base_url=url, transport="asyncio")
        out = []
        async with server:
            out.append(await read_all(client))

            def in_another_loop() -> bytes:
                return asyncio.run(read_all(client))

            out.append(await asyncio.to_thread(in_another_loop))
            # The server waits for its connections to end (Python 3.12+): closing the
            # client ends both, the other loop's too.
            await client.aclose()
        assert len(connections) == 2
        return out

    assert asyncio.run(main()) == [BODY, BODY]


class ServerThread:
    """``serve`` answering OK on a loop of its own; ``ended`` lists the connections
    that have ended."""

    def __init__(self, loop_thread: LoopThread) -> None:
        self.ended: list[int] = []
        self._loops = loop_thread
        self.server, self.url, self.connections = loop_thread.run(
            serve(lambda conn, req: OK, on_end=self.ended.append)
        )

    def ended_when(self, n: int) -> list[int]:
        """The connections ended, once ``n`` have (10 s at most)."""

        async def wait() -> list[int]:
            while len(self.ended) < n:
                await asyncio.sleep(0.01)
            return sorted(self.ended)

        result: list[int] = self._loops.run(wait())
        return result


@pytest.fixture
def server_thread(loop_thread: LoopThread) -> Iterator[ServerThread]:
    server = ServerThread(loop_thread)
    yield server
    loop_thread.loop.call_soon_threadsafe(server.server.close)


def test_h8_a_loop_that_asyncio_run_ends_closes_its_connections(
    server_thread: ServerThread,
) -> None:
    # A script that calls asyncio.run() once per turn: each run's kept-alive connection
    # belongs to its loop, which cannot be used or closed after the run.
    client = GeminiClient("m", api_key="k", base_url=server_thread.url, transport="asyncio")
    assert [asyncio.run(read_all(client)) for _ in range(2)] == [BODY, BODY]
    assert server_thread.ended_when(2) == [0, 1]  # each closed as its run ended
    asyncio.run(client.aclose())
    assert len(server_thread.connections) == 2


def test_h8_closing_a_client_used_under_a_loop_closed_by_hand_ends_its_connection(
    server_thread: ServerThread,
) -> None:
    # A loop closed without asyncio.run()'s finalization: aclose() raised "Event loop is
    # closed" and left the connection open.
    client = GeminiClient("m", api_key="k", base_url=server_thread.url, transport="asyncio")
    loop = asyncio.new_event_loop()
    assert loop.run_until_complete(read_all(client)) == BODY
    loop.close()
    assert server_thread.ended == []
    asyncio.run(client.aclose())
    assert server_thread.ended_when(1) == [0]


async def test_h8_every_connection_of_a_burst_is_kept_alive_for_the_next() -> None:
    # 30 streams at once, twice: the second burst reuses the first's 30 connections.
    # (Keeping fewer idle than the pool holds made a burst of 100 reconnect 80 each
    # time: the per-event cost of 100 streams at once rose above one's.)
    server, url, connections = await serve(lambda conn, req: OK)
    async with server, GeminiClient("m", api_key="k", base_url=url, transport="asyncio") as client:
        for _ in range(2):
            bodies = await asyncio.gather(*(read_all(client) for _ in range(30)))
            assert bodies == [BODY] * 30
    assert connections == [2] * 30


def test_h8_proxy_lookups_are_kept_per_origin_not_per_url(monkeypatch: pytest.MonkeyPatch) -> None:
    # Resume URLs carry ids: a cache per URL would grow with every request.
    monkeypatch.setenv("https_proxy", "http://proxy.invalid:3128")
    monkeypatch.setenv("no_proxy", "gemini.internal")
    transport = AsyncioTransport()
    for i in range(50):
        assert transport._uses_proxy(f"https://api.example/v1beta/interactions/{i}?last=7")
        assert not transport._uses_proxy(f"https://gemini.internal/v1beta/interactions/{i}")
    assert transport._proxied == {"https://api.example": True, "https://gemini.internal": False}


async def test_h9_a_request_makes_no_async_generator() -> None:
    # Each async generator is an object, frames and the event loop's bookkeeping of
    # it; the request path (stream(), post, the response, its close) makes none.
    made: list[object] = []
    hooks = sys.get_asyncgen_hooks()

    def firstiter(agen: object) -> None:
        made.append(agen)
        if hooks.firstiter is not None:
            hooks.firstiter(agen)

    server, url, connections = await serve(lambda conn, req: OK)
    async with server, GeminiClient("m", api_key="k", base_url=url, transport="asyncio") as client:
        # The loop's first connection opens the one generator that closes the loop's
        # connections when it ends (H8): once per event loop, not per request.
        assert await read_all(client) == BODY
        sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=hooks.finalizer)
        try:
            # A reused and a new connection at once, then a reused one again.
            bodies = [*await asyncio.gather(read_all(client), read_all(client))]
            bodies.append(await read_all(client))
        finally:
            sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=hooks.finalizer)
    assert bodies == [BODY, BODY, BODY]
    assert (len(connections), made) == (2, [])


async def test_h9_header_lines_are_encoded_once_while_the_headers_stay_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    encoded: list[dict[str, str]] = []
    real = _asyncio_transport._header_lines

    def counting(headers: Any) -> bytes:
        encoded.append(dict(headers))
        return real(headers)

    monkeypatch.setattr(_asyncio_transport, "_header_lines", counting)
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            seen.append(head)
            await reader.readexactly(2)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    transport = AsyncioTransport()
    headers = {"x-goog-api-key": "k1"}
    async with server:
        for _ in range(3):
            await (await transport.post(url, b"{}", headers, None)).aclose()
        headers["x-goog-api-key"] = "k2"  # the same dict, changed: encoded again
        await (await transport.post(url, b"{}", headers, None)).aclose()
        await transport.aclose()
    assert encoded == [{"x-goog-api-key": "k1"}, {"x-goog-api-key": "k2"}]
    assert [b"x-goog-api-key: k1\r\n" in head for head in seen] == [True, True, True, False]
    assert b"x-goog-api-key: k2\r\n" in seen[3]


def test_h9_the_stream_url_is_made_once_and_follows_the_client_url() -> None:
    client = GeminiClient("m", api_key="k", base_url="http://h")
    first = client.stream_url
    assert first == "http://h/v1beta/models/m:streamGenerateContent?alt=sse"
    assert client.stream_url is first
    client.url = "http://other/v1/models/n"
    assert client.stream_url == "http://other/v1/models/n:streamGenerateContent?alt=sse"


# -- H14: a cancellation is never lost ----------------------------------------------------------


async def test_h14_a_cancellation_that_lands_as_a_bounded_wait_completes_is_not_lost() -> None:
    # The connect (or the pool's slot, or the drain) completes and the caller's task is
    # cancelled in the same loop iteration: asyncio.wait_for on Python 3.10/3.11 returned
    # the result and dropped the cancellation, so an abort or a deadline landing as a
    # connection opened was lost and the request went out.
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    connected: asyncio.Future[str] = loop.create_future()

    async def connect() -> str:
        return await connected

    loop.call_soon(connected.set_result, "connected")
    loop.call_soon(task.cancel)
    with pytest.raises(asyncio.CancelledError):
        await _asyncio_transport._bounded(connect(), 10.0)
    assert connected.result() == "connected"


async def test_h14_a_bounded_wait_past_its_seconds_is_a_timeout_error() -> None:
    cancelled: list[bool] = []

    async def hang() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    with pytest.raises(TimeoutError):
        await _asyncio_transport._bounded(hang(), 0.01)
    assert cancelled == [True]
    assert await _asyncio_transport._bounded(asyncio.sleep(0, "done"), 10.0) == "done"
