"""fastagg.transport on a hostile or broken server: no redirect, no key in an error, the
caller's TLS everywhere, a bounded inflate, a bounded write, no stray future (H15-H20);
TLS, keep-alive and event loops of the default transport (H3, H8, H9, H14)."""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import ssl
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from conftest import LoopThread
from fastagg.client import GeminiClient
from fastagg.client import transport as transport_module
from fastagg.errors import ProviderError
from fastagg.testing import FakeGemini, Step, chunk, final, signature, text
from fastagg.transport import AiohttpTransport
from http_bodies import read_request

TLS = Path(__file__).parent.parent / "data" / "tls"  # a self-signed certificate for 127.0.0.1
REQUEST = {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}
CHUNKS = [chunk(text("Hello")), final(signature("s"))]
BODY = b"".join(
    b"data: " + json.dumps(c, ensure_ascii=False, separators=(",", ": ")).encode() + b"\r\n\r\n"
    for c in CHUNKS
)
OK = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
KEY = "AIzaSy-the-secret-key-0123456789"


def server_tls() -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(TLS / "cert.pem", TLS / "key.pem")
    return context


def client_tls() -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(TLS / "cert.pem"))


async def read_all(client: GeminiClient, timeout: float | None = None) -> bytes:
    out = b""
    async with client.stream(REQUEST, timeout=timeout) as body:
        async for piece in body:
            out += piece
    return out


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


def clear_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


# --- H15: no redirect is followed -------------------------------------------------------------


async def test_h15_a_redirect_is_an_error_and_the_key_never_goes_to_its_target(
    transport: str,
) -> None:
    # aiohttp followed a 307 to another host and sent x-goog-api-key there.
    heard: list[bytes] = []

    async def elsewhere(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heard.append(await reader.read(65536))
        writer.write(OK)
        await writer.drain()
        writer.close()

    target = await asyncio.start_server(elsewhere, "127.0.0.1", 0)
    there = f"http://127.0.0.1:{target.sockets[0].getsockname()[1]}"
    moved = (
        f"HTTP/1.1 307 Temporary Redirect\r\nLocation: {there}/v1beta/models/m:"
        "streamGenerateContent?alt=sse&key=x\r\nContent-Length: 0\r\n\r\n"
    ).encode()
    server, url, _ = await serve(lambda conn, req: moved)
    async with (
        target,
        server,
        GeminiClient("m", api_key=KEY, base_url=url, transport=transport) as client,
    ):
        with pytest.raises(ProviderError) as info:
            await read_all(client, timeout=5)
    assert heard == []
    error = info.value
    assert (error.status, error.code, error.kind, error.retryable) == (307, None, "http", False)
    assert error.message == (
        f"HTTP 307 Temporary Redirect: the server sent the request on to {there}; fastagg "
        "follows no redirect (the API key or token would go with it): point base_url at "
        "the address that answers"
    )


# --- H16: the key is in no error --------------------------------------------------------------


def chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo = [exc]
    while todo:
        one = todo.pop()
        if id(one) in seen:
            continue
        seen.add(id(one))
        yield one
        todo += [e for e in (one.__cause__, one.__context__) if e is not None]


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n",  # a malformed head
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",  # a broken body
        None,  # closed before any answer
    ],
    ids=["bad-head", "bad-chunk", "closed"],
)
async def test_h16_no_exception_in_the_chain_shows_the_api_key(
    transport: str, answer: bytes | None
) -> None:
    # aiohttp's ClientResponseError keeps the request's headers (request_info), and its
    # repr showed x-goog-api-key through the ProviderError's __cause__.
    server, url, _ = await serve(lambda conn, req: answer)
    async with (
        server,
        GeminiClient("m", api_key=KEY, base_url=url, transport=transport) as client,
    ):
        with pytest.raises(ProviderError) as info:
            await read_all(client, timeout=5)
    assert info.value.kind == "connection"
    for exc in chain(info.value):
        shown = [repr(exc), str(exc), repr(exc.args)]
        shown += [repr(vars(exc))] if hasattr(exc, "__dict__") else []
        request_info = getattr(exc, "request_info", None)
        shown += [repr(request_info)] if request_info is not None else []
        assert not [text for text in shown if KEY in text], type(exc).__name__


# --- H17: the caller's TLS context on every path ----------------------------------------------


async def connect_proxy(seen: list[bytes]) -> asyncio.Server:
    """A forward proxy that tunnels CONNECT requests (and records their first line)."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        seen.append(head.split(b"\r\n")[0])
        host, _, port = head.split()[1].decode().rpartition(":")
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    return await asyncio.start_server(handle, "127.0.0.1", 0)


@pytest.mark.parametrize("route", ["direct", "proxied"])
async def test_h17_the_callers_tls_context_is_used_direct_and_through_a_proxy(
    route: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clear_proxy_env(monkeypatch)
    tunnels: list[bytes] = []
    proxy = await connect_proxy(tunnels)
    if route == "proxied":
        monkeypatch.setenv("https_proxy", f"http://127.0.0.1:{proxy.sockets[0].getsockname()[1]}")
    async with FakeGemini([CHUNKS], ssl_context=server_tls()) as server, proxy:
        http = AiohttpTransport(ssl_context=client_tls())
        async with GeminiClient("m", api_key="k", base_url=server.url, http_client=http) as client:
            assert await read_all(client) == BODY
        await http.aclose()
        port = server.url.rpartition(":")[2]
    assert tunnels == (
        [f"CONNECT 127.0.0.1:{port} HTTP/1.1".encode()] if route == "proxied" else []
    )


async def test_h3_s6_tls_is_verified_against_the_given_trust(transport: str) -> None:
    async with FakeGemini([CHUNKS], ssl_context=server_tls()) as server:
        if transport == "aiohttp":
            http: Any = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_tls()))
        else:
            import httpx

            http = httpx.AsyncClient(verify=client_tls())
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


# --- H18: a compressed body cannot expand without bound ---------------------------------------


def gzip_of_zeros(size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    out = [packer.compress(block) for _ in range(size >> 20)]
    return b"".join([*out, packer.flush()])


async def test_h18_a_gzip_bomb_is_refused_before_it_expands(transport: str) -> None:
    # aiohttp inflated the whole of a 256 MB gzip bomb; 64 MB of zeros is 64 KB packed.
    bomb = gzip_of_zeros(64 << 20)
    heads: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await reader.readuntil(b"\r\n\r\n"))
        head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n"
        writer.write(head % len(bomb) + bomb)
        try:
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    received = 0
    async with server, GeminiClient("m", api_key="k", base_url=url, transport=transport) as client:
        with pytest.raises(ProviderError) as info:
            async with client.stream(REQUEST, timeout=10) as body:
                async for piece in body:
                    received += len(piece)
    # At most 200 times what came packed, plus 1 MiB: far below the 64 MB.
    assert 1 << 20 <= received <= 200 * len(bomb) + (1 << 20)
    assert info.value.kind == "connection"
    assert info.value.message.startswith("connection failed after ")
    assert info.value.message.endswith(
        " bytes of the body: CompressedBodyError: the gzip body expands more than 200 times "
        "its size: refused as a decompression bomb"
    )
    assert b"\r\naccept-encoding: identity\r\n" in heads[0].lower()


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
async def test_h18_a_compressed_body_is_still_decoded(transport: str, coding: str) -> None:
    # Asked for identity, a server may compress anyway: the body comes decoded.
    wbits = 31 if coding == "gzip" else 15
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    packed = packer.compress(BODY) + packer.flush()
    answer = (
        b"HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n"
    ) % (coding.encode(), 5, packed[:5], len(packed) - 5, packed[5:])
    server, url, _ = await serve(lambda conn, req: answer)
    async with server, GeminiClient("m", api_key="k", base_url=url, transport=transport) as client:
        assert await read_all(client, timeout=5) == BODY


# --- H19: a write to a server that never reads times out --------------------------------------


@pytest.mark.parametrize("timeout", [1.0, None])
async def test_h19_a_request_to_a_server_that_never_reads_times_out(
    transport: str, timeout: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # aiohttp waited for the kernel to take the body for ever (past 20 s in the audit).
    monkeypatch.setattr(transport_module, "WRITE_TIMEOUT", 1.0)
    held: list[asyncio.StreamWriter] = []

    async def never_reads(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(never_reads, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    big = {"contents": [{"role": "user", "parts": [{"text": "x" * (48 << 20)}]}]}
    async with server, GeminiClient("m", api_key="k", base_url=url, transport=transport) as client:
        with pytest.raises(ProviderError) as info:
            await asyncio.wait_for(client.stream(big, timeout=timeout).__aenter__(), 15)
        for writer in held:
            writer.close()
    assert (info.value.kind, info.value.code) == ("timeout", "DEADLINE_EXCEEDED")
    assert info.value.message.startswith("timed out before the response started: ")


# --- H20: a reset mid-body leaves no unretrieved future ---------------------------------------


async def test_h20_a_reset_mid_body_leaves_no_future_exception_unretrieved(transport: str) -> None:
    reported: list[str] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: reported.append(context["message"]))

    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + BODY)
        await writer.drain()
        await asyncio.sleep(0.05)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # an RST, not a FIN

    server = await asyncio.start_server(reset, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    received = b""
    try:
        async with server:
            for _ in range(2):
                client = GeminiClient("m", api_key="k", base_url=url, transport=transport)
                with pytest.raises(ProviderError) as info:
                    async with client.stream(REQUEST, timeout=5) as body:
                        async for piece in body:
                            received += piece
                await client.aclose()
                del client, body
            for _ in range(3):
                await asyncio.sleep(0.01)
                gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert received == BODY * 2
    assert info.value.kind == "connection"
    assert reported == []


# --- H3, H8: keep-alive, the pool, event loops ------------------------------------------------


async def test_h8_a_response_read_halfway_closes_its_connection() -> None:
    server, url, connections = await serve(lambda conn, req: OK)
    async with server, GeminiClient("m", api_key="k", base_url=url) as client:
        async with client.stream(REQUEST, timeout=None) as body:
            await body.__anext__()
        assert await read_all(client) == BODY
    assert len(connections) in (1, 2)


async def test_h8_every_connection_of_a_burst_is_kept_alive_for_the_next() -> None:
    # 30 streams at once, twice: the second burst reuses the first's 30 connections.
    server, url, connections = await serve(lambda conn, req: OK)
    async with server, GeminiClient("m", api_key="k", base_url=url) as client:
        for _ in range(2):
            bodies = await asyncio.gather(*(read_all(client) for _ in range(30)))
            assert bodies == [BODY] * 30
    assert connections == [2] * 30


def test_h8_a_client_used_under_two_event_loops_opens_a_new_connection() -> None:
    async def main() -> list[bytes]:
        server, url, connections = await serve(lambda conn, req: OK)
        client = GeminiClient("m", api_key="k", base_url=url)
        out = []
        async with server:
            out.append(await read_all(client))

            def in_another_loop() -> bytes:
                return asyncio.run(read_all(client))

            out.append(await asyncio.to_thread(in_another_loop))
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


def test_h3_a_loop_that_asyncio_run_ends_closes_its_connections(
    server_thread: ServerThread,
) -> None:
    # A script that calls asyncio.run() once per turn: each run's kept-alive connection
    # belongs to its loop, which cannot be used or closed after the run.
    client = GeminiClient("m", api_key="k", base_url=server_thread.url)
    assert [asyncio.run(read_all(client)) for _ in range(2)] == [BODY, BODY]
    assert server_thread.ended_when(2) == [0, 1]
    asyncio.run(client.aclose())
    assert len(server_thread.connections) == 2


def test_h3_proxy_lookups_are_kept_per_origin_not_per_url(monkeypatch: pytest.MonkeyPatch) -> None:
    # Resume URLs carry ids: a cache per URL would grow with every request.
    clear_proxy_env(monkeypatch)
    monkeypatch.setenv("https_proxy", "http://proxy.invalid:3128")
    monkeypatch.setenv("no_proxy", "gemini.internal")
    transport = AiohttpTransport()
    for i in range(50):
        assert transport._proxy(f"https://api.example/v1beta/interactions/{i}?last=7")[0]
        assert transport._proxy(f"https://gemini.internal/v1beta/interactions/{i}")[0] is None
    assert sorted(transport._proxy_for) == ["https://api.example", "https://gemini.internal"]


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
    async with server, GeminiClient("m", api_key="k", base_url=url) as client:
        # The first request opens the one generator that closes the session when the
        # loop ends (H3): once per event loop, not per request.
        assert await read_all(client) == BODY
        sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=hooks.finalizer)
        try:
            bodies = [*await asyncio.gather(read_all(client), read_all(client))]
            bodies.append(await read_all(client))
        finally:
            sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=hooks.finalizer)
    assert bodies == [BODY, BODY, BODY]
    assert (len(connections), made) == (2, [])


def test_h9_the_stream_url_is_made_once_and_follows_the_client_url() -> None:
    client = GeminiClient("m", api_key="k", base_url="http://h")
    first = client.stream_url
    assert first == "http://h/v1beta/models/m:streamGenerateContent?alt=sse"
    assert client.stream_url is first
    client.url = "http://other/v1/models/n"
    assert client.stream_url == "http://other/v1/models/n:streamGenerateContent?alt=sse"


# --- H8, H21: aiohttp the default, httpx optional, the own client gone ------------------------


def test_h8_transport_asyncio_names_its_removal_and_the_way_on() -> None:
    with pytest.raises(ValueError) as info:
        GeminiClient("m", api_key="k", transport="asyncio")
    assert str(info.value) == (
        "transport='asyncio' (fastagg's own HTTP/1.1 client) was removed: aiohttp is the "
        "default now; leave transport= out, or pass 'aiohttp' or 'httpx'"
    )


def test_h21_without_httpx_transport_httpx_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)  # an import of it fails, as when absent
    with pytest.raises(ImportError) as info:
        GeminiClient("m", api_key="k", transport="httpx")
    assert str(info.value).startswith(
        "transport='httpx' needs httpx: pip install 'fastagg[httpx]' (or use the default "
        "transport, aiohttp); the import failed: "
    )
    assert isinstance(GeminiClient("m", api_key="k").transport, AiohttpTransport)


def test_h21_the_client_and_its_default_transport_import_no_httpx() -> None:
    code = (
        "import sys, fastagg, fastagg.client, fastagg.transport, fastagg.interactions_client\n"
        "fastagg.client.GeminiClient('m', api_key='k')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'httpx'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout == "[]\n"


# --- H14: the bounded write lets a cancellation through ---------------------------------------


async def test_h14_a_cancellation_that_lands_as_a_bounded_wait_completes_is_not_lost() -> None:
    # The write completes and the caller's task is cancelled in the same loop
    # iteration: asyncio.wait_for on Python 3.10/3.11 returned the result and dropped
    # the cancellation, so an abort or a deadline landing then was lost.
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    written: asyncio.Future[str] = loop.create_future()

    async def write() -> str:
        return await written

    loop.call_soon(written.set_result, "written")
    loop.call_soon(task.cancel)
    with pytest.raises(asyncio.CancelledError):
        await transport_module._bounded(write(), 10.0)
    assert written.result() == "written"


async def test_h14_a_bounded_wait_past_its_seconds_is_a_timeout_error() -> None:
    cancelled: list[bool] = []

    async def hang() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    with pytest.raises(TimeoutError):
        await transport_module._bounded(hang(), 0.01)
    assert cancelled == [True]
    assert await transport_module._bounded(asyncio.sleep(0, "done"), 10.0) == "done"


# --- H22: waiting for a pooled connection is not a connect timeout -----------------------------


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_h22_a_request_waits_for_a_pooled_connection_as_long_as_its_own_timeout(
    monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    # Two streams through a pool of one connection: the second waits for the first, which
    # lasts longer than the old fixed 60 s pool bound (shortened here to 0.2 s). The wait is
    # bounded by the caller's own timeout only (none here), so both streams complete.
    monkeypatch.setattr(transport_module, "MAX_CONNECTIONS", 1)
    monkeypatch.setattr(transport_module, "POOL_TIMEOUT", 0.2, raising=False)
    slow = Step([chunk(text("a")), chunk(text("b")), final()], chunk_interval=0.4)
    async with FakeGemini([slow, slow]) as server:
        async with GeminiClient(
            "gemini-3-flash-preview", api_key="k", base_url=server.url, transport=transport
        ) as model:
            request = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}

            async def one() -> bytes:
                async with model.stream(request, timeout=None) as body:
                    return b"".join([piece async for piece in body])

            bodies = await asyncio.gather(one(), one())
    assert [body.count(b'"text"') for body in bodies] == [2, 2]
