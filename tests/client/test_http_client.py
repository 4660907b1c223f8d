"""fastagg.client.GeminiClient: URLs, auth, raw byte streaming, error mapping, closing."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import aiohttp
import httpx
import orjson
import pytest

from conftest import LoopThread
from fastagg.client import GeminiClient
from fastagg.client._rpc import http_error as provider_error_from_response
from fastagg.client._rpc import parse_retry_after
from fastagg.errors import ProviderError
from fastagg.testing import FakeGemini, Step
from fastagg.testing.validate import MSG_MULTI_TURN_END
from fastagg.transport import (
    AiohttpTransport,
    HttpxTransport,
    Response,
    Transport,
    pump,
)
from http_bodies import CHUNKS, DROP_ERROR, REQUEST, frames, read_request

# The stack's own exception name follows the transport-neutral prefix (H5).
CONNECT_ERROR = {
    "aiohttp": "ClientConnectorError",
    "httpx": "ConnectError",
}


async def read_all(
    client: GeminiClient, request: dict[str, Any] = REQUEST, timeout: float | None = None
) -> bytes:
    out = b""
    async with client.stream(request, timeout=timeout) as body:
        async for piece in body:
            out += piece
    return out


# --- URLs and auth ---------------------------------------------------------------------------


def test_h1_gemini_api_url_defaults_to_v1beta_with_alt_sse() -> None:
    client = GeminiClient("gemini-3-flash-preview", api_key="k")
    assert client.stream_url == (
        "https://generativelanguage.googleapis.com/v1beta/models/"
        "gemini-3-flash-preview:streamGenerateContent?alt=sse"
    )


def test_gemini_api_version_and_models_prefix() -> None:
    client = GeminiClient("models/gemini-2.5-pro", api_key="k", api_version="v1")
    assert client.stream_url == (
        "https://generativelanguage.googleapis.com/v1/models/"
        "gemini-2.5-pro:streamGenerateContent?alt=sse"
    )


def test_base_url_with_path_prefix_keeps_the_prefix() -> None:
    client = GeminiClient("m", api_key="k", base_url="https://gw.example/google/")
    assert (
        client.stream_url
        == "https://gw.example/google/v1beta/models/m:streamGenerateContent?alt=sse"
    )


def test_api_key_falls_back_to_gemini_api_key_then_google_api_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key")
    assert GeminiClient("m")._headers["x-goog-api-key"] == "google-key"
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-key")
    assert GeminiClient("m")._headers["x-goog-api-key"] == "gemini-key"


def test_missing_api_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(ValueError, match="no API key for the Gemini API"):
        GeminiClient("m")


def test_vertex_regional_url() -> None:
    client = GeminiClient(
        "gemini-2.5-flash", vertex=True, project="p", location="us-central1", credentials=object()
    )
    assert client.stream_url == (
        "https://us-central1-aiplatform.googleapis.com/v1beta1/projects/p/locations/us-central1/"
        "publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )


def test_vertex_global_url_and_v1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_CLOUD_LOCATION", raising=False)
    client = GeminiClient(
        "gemini-3-pro-preview", vertex=True, project="p", credentials=object(), api_version="v1"
    )
    assert client.stream_url == (
        "https://aiplatform.googleapis.com/v1/projects/p/locations/global/"
        "publishers/google/models/gemini-3-pro-preview:streamGenerateContent?alt=sse"
    )


def test_vertex_express_mode_uses_the_publisher_path_and_api_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    client = GeminiClient("gemini-2.5-flash", vertex=True, api_key="vk")
    assert client.stream_url == (
        "https://aiplatform.googleapis.com/v1beta1/publishers/google/"
        "models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert client._headers["x-goog-api-key"] == "vk"


def test_h1_vertex_key_and_project_together_are_refused() -> None:
    with pytest.raises(ValueError, match="either an API key"):
        GeminiClient("m", vertex=True, api_key="k", project="p")


async def test_api_key_header_content_type_and_orjson_body_are_sent(transport: str) -> None:
    request = {"contents": REQUEST["contents"], "generationConfig": {"temperature": 0.5}}
    async with (
        FakeGemini([CHUNKS]) as server,
        GeminiClient("m", api_key="secret", base_url=server.url, transport=transport) as client,
    ):
        await read_all(client, request)
    record = server.records[0]
    assert record.headers["x-goog-api-key"] == "secret"
    assert record.headers["content-type"] == "application/json"
    assert record.path == "/v1beta/models/m:streamGenerateContent"
    assert record.query == {"alt": "sse"}
    assert record.body == request
    assert int(record.headers["content-length"]) == len(orjson.dumps(request))


async def test_vertex_bearer_token_from_google_auth_credentials(transport: str) -> None:
    google_credentials = pytest.importorskip("google.oauth2.credentials")
    creds = google_credentials.Credentials(token="tok-1")
    async with (
        FakeGemini([CHUNKS]) as server,
        GeminiClient(
            "m",
            vertex=True,
            project="p",
            location="europe-west4",
            credentials=creds,
            base_url=server.url,
            transport=transport,
        ) as client,
    ):
        await read_all(client)
    record = server.records[0]
    assert record.headers["authorization"] == "Bearer tok-1"
    assert record.path == (
        "/v1beta1/projects/p/locations/europe-west4/publishers/google/"
        "models/m:streamGenerateContent"
    )
    assert record.backend == "vertex"


class RefreshingCredentials:
    """Stands in for google-auth credentials whose token has expired."""

    def __init__(self) -> None:
        self.token: str | None = None
        self.valid = False
        self.refresh_threads: list[int] = []

    def refresh(self, request: Any) -> None:
        self.refresh_threads.append(threading.get_ident())
        self.token, self.valid = "fresh", True


async def test_expired_credentials_are_refreshed_in_a_worker_thread(transport: str) -> None:
    pytest.importorskip("google.auth.transport.requests")
    creds = RefreshingCredentials()
    async with (
        FakeGemini([CHUNKS, CHUNKS]) as server,
        GeminiClient(
            "m",
            vertex=True,
            project="p",
            credentials=creds,
            base_url=server.url,
            transport=transport,
        ) as client,
    ):
        await read_all(client)
        await read_all(client)
    assert [r.headers["authorization"] for r in server.records] == ["Bearer fresh"] * 2
    assert len(creds.refresh_threads) == 1
    assert creds.refresh_threads[0] != threading.get_ident()


async def test_h1_vertex_without_requests_names_the_extra_and_sends_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # google-auth alone has no `requests`, which the token refresh imports: the
    # `vertex` extra asks for google-auth[requests], and its absence is one clear error.
    pytest.importorskip("google.auth")
    monkeypatch.setitem(sys.modules, "requests", None)  # as if not installed
    async with (
        FakeGemini([CHUNKS]) as server,
        GeminiClient(
            "m", vertex=True, project="p", credentials=RefreshingCredentials(), base_url=server.url
        ) as client,
    ):
        with pytest.raises(ImportError) as info:
            await read_all(client)
    assert str(info.value) == (
        "Vertex AI with a project needs google-auth and requests (for its token refresh): "
        "pip install 'fastagg[vertex]' (or use an API key: GeminiClient(..., vertex=True, "
        "api_key=...)); requests is not installed"
    )
    assert server.records == []


VALID_CREDENTIALS_TURN = """
import asyncio, sys
from google.oauth2.credentials import Credentials
from fastagg.client import GeminiClient
from fastagg.testing import FakeGemini, chunk, final, text

async def main():
    creds = Credentials(token="t")
    async with FakeGemini([[chunk(text("hi")), final()]]) as server, GeminiClient(
        "m", vertex=True, project="p", credentials=creds, base_url=server.url
    ) as client:
        async with client.stream({"contents": [{"role": "user", "parts": [{"text": "x"}]}]}) as body:
            async for _ in body:
                pass
    print(sorted(m for m in ("requests", "google.auth.transport.requests") if m in sys.modules))

asyncio.run(main())
"""


def test_h1_valid_vertex_credentials_import_no_requests() -> None:
    # requests is imported only to refresh a token, and then in the worker thread:
    # a turn with a valid token does not pay for the import on its event loop.
    pytest.importorskip("google.oauth2.credentials")
    done = subprocess.run(
        [sys.executable, "-c", VALID_CREDENTIALS_TURN], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout) == (0, "[]\n"), done.stderr


class FailingCredentials(RefreshingCredentials):
    def refresh(self, request: Any) -> None:
        from google.auth.exceptions import RefreshError

        raise RefreshError("invalid_grant: Token has been expired or revoked.")


async def test_h2_credentials_that_cannot_refresh_give_an_unauthenticated_provider_error(
    transport: str,
) -> None:
    pytest.importorskip("google.auth.transport.requests")
    async with GeminiClient(
        "m",
        vertex=True,
        project="p",
        credentials=FailingCredentials(),
        base_url="http://127.0.0.1:9",
        transport=transport,
    ) as client:
        with pytest.raises(ProviderError) as info:
            await read_all(client)
    assert (info.value.status, info.value.code, info.value.retryable) == (
        None,
        "UNAUTHENTICATED",
        False,
    )
    assert info.value.message == (
        "could not get a Vertex AI access token: RefreshError: "
        "invalid_grant: Token has been expired or revoked."
    )


# --- streaming -----------------------------------------------------------------------------


async def test_h6_stream_yields_the_raw_body_bytes_unchanged(transport: str) -> None:
    async with (
        FakeGemini([CHUNKS]) as server,
        GeminiClient("m", api_key="k", base_url=server.url, transport=transport) as client,
    ):
        assert await read_all(client) == frames(CHUNKS)


async def test_tiny_writes_arrive_as_the_same_bytes(transport: str) -> None:
    async with (
        FakeGemini([Step(CHUNKS, tiny_writes=1)]) as server,
        GeminiClient("m", api_key="k", base_url=server.url, transport=transport) as client,
    ):
        assert await read_all(client) == frames(CHUNKS)


async def test_connection_is_kept_alive_across_requests(transport: str) -> None:
    async with (
        FakeGemini([CHUNKS, CHUNKS, CHUNKS]) as server,
        GeminiClient("m", api_key="k", base_url=server.url, transport=transport) as client,
    ):
        for _ in range(3):
            await read_all(client)
    assert len({r.peer for r in server.records}) == 1


@pytest.fixture
def http(loop_thread: LoopThread) -> Iterator[FakeGemini]:
    """A FakeGemini answering ``CHUNKS`` to every request, on a loop of its own."""
    server = FakeGemini([CHUNKS], repeat=True)
    loop_thread.run(server.start())
    yield server
    loop_thread.run(server.stop())


def test_h3_a_client_made_outside_a_loop_serves_one_asyncio_run_after_another(
    transport: str, http: FakeGemini
) -> None:
    # A script or a notebook: the client made at module level, asyncio.run() per call,
    # a last one to close it. aiohttp's session and httpx's client are bound to the loop
    # they first ran in: the second run failed with "Event loop is closed".
    client = GeminiClient("m", api_key="k", base_url=http.url, transport=transport)
    bodies = [asyncio.run(read_all(client)) for _ in range(3)]
    asyncio.run(client.aclose())
    assert bodies == [frames(CHUNKS)] * 3
    assert len(http.records) == 3


def test_h3_a_proxied_client_serves_one_asyncio_run_after_another(
    transport: str, http: FakeGemini, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The asyncio transport sends a proxied request through an aiohttp transport of its
    # own (H8): the same holds there.
    set_proxy_env(monkeypatch, http.url)
    client = GeminiClient("m", api_key="k", base_url="http://gemini.invalid", transport=transport)
    bodies = [asyncio.run(read_all(client)) for _ in range(2)]
    asyncio.run(client.aclose())
    assert bodies == [frames(CHUNKS)] * 2
    assert [r.path for r in http.records] == ["/v1beta/models/m:streamGenerateContent"] * 2


async def test_h4_shared_httpx_client_is_used_and_not_closed_by_aclose() -> None:
    async with FakeGemini([CHUNKS]) as server, httpx.AsyncClient() as http:
        client = GeminiClient("m", api_key="k", base_url=server.url, http_client=http)
        assert isinstance(client.transport, HttpxTransport)
        await client.aclose()
        assert await read_all(client) == frames(CHUNKS)
        assert not http.is_closed


async def test_h4_shared_aiohttp_session_is_used_and_not_closed_by_aclose() -> None:
    async with FakeGemini([CHUNKS]) as server, aiohttp.ClientSession() as session:
        client = GeminiClient("m", api_key="k", base_url=server.url, http_client=session)
        assert isinstance(client.transport, AiohttpTransport)
        assert client.transport.session is session
        await client.aclose()
        assert await read_all(client) == frames(CHUNKS)
        assert not session.closed


def test_h8_the_default_transport_is_aiohttp() -> None:
    assert isinstance(GeminiClient("m", api_key="k").transport, AiohttpTransport)
    assert isinstance(
        GeminiClient("m", api_key="k", transport="aiohttp").transport, AiohttpTransport
    )
    assert isinstance(GeminiClient("m", api_key="k", transport="httpx").transport, HttpxTransport)


def test_h4_unknown_transport_and_client_are_clear_errors() -> None:
    with pytest.raises(ValueError, match=r"unknown transport 'curl'; use one of: aiohttp, httpx"):
        GeminiClient("m", api_key="k", transport="curl")
    with pytest.raises(TypeError, match=r"http_client must be an aiohttp\.ClientSession"):
        GeminiClient("m", api_key="k", http_client=object())
    with pytest.raises(ValueError, match=r"either http_client= .* or transport="):
        GeminiClient("m", api_key="k", http_client=httpx.AsyncClient(), transport="httpx")


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A 127.0.0.1 port that refuses connections: bound, not listening, and held while the
    test runs (a port closed at once could be handed to another server meanwhile, or be
    the ephemeral port of the client's own connection, which then connects to itself)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def set_proxy_env(monkeypatch: pytest.MonkeyPatch, proxy: str, no_proxy: str = "") -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("http_proxy", proxy)
    if no_proxy:
        monkeypatch.setenv("no_proxy", no_proxy)


async def test_h3_proxy_from_the_environment_is_used(
    transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # FakeGemini plays the forward proxy: it answers the absolute-form request itself.
    async with FakeGemini([CHUNKS]) as server:
        set_proxy_env(monkeypatch, server.url)
        async with GeminiClient(
            "m", api_key="k", base_url="http://gemini.invalid", transport=transport
        ) as client:
            assert await read_all(client) == frames(CHUNKS)
    assert server.records[0].path == "/v1beta/models/m:streamGenerateContent"


async def test_h3_no_proxy_from_the_environment_is_honoured(
    transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with refusing_port() as port:
        async with FakeGemini([CHUNKS]) as server:
            set_proxy_env(monkeypatch, server.url, no_proxy="127.0.0.1")
            async with GeminiClient(
                "m", api_key="k", base_url=f"http://127.0.0.1:{port}", transport=transport
            ) as client:
                with pytest.raises(ProviderError) as info:
                    await read_all(client)
    assert info.value.kind == "connection"
    assert server.records == []


# --- errors --------------------------------------------------------------------------------


async def test_http_429_becomes_a_retryable_provider_error_with_retry_after(transport: str) -> None:
    async with (
        FakeGemini([Step(http_error=429, retry_after=7)]) as server,
        GeminiClient("m", api_key="k", base_url=server.url, transport=transport) as client,
    ):
        with pytest.raises(ProviderError) as info:
            await read_all(client)
    err = info.value
    assert (err.status, err.code, err.retryable, err.retry_after, err.kind) == (
        429,
        "RESOURCE_EXHAUSTED",
        True,
        7.0,
        "http",
    )
    assert (
        err.message
        == "You exceeded your current quota, please check your plan and billing details."
    )
    assert err.body == {
        "error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": err.message}
    }


async def test_http_503_retry_info_delay_is_used_without_a_header(transport: str) -> None:
    async with (
        FakeGemini([Step(http_error=503, retry_delay="1.5s")]) as server,
        GeminiClient("m", api_key="k", base_url=server.url, transport=transport) as client,
    ):
        with pytest.raises(ProviderError) as info:
            await read_all(client)
    assert (info.value.status, info.value.code, info.value.retryable, info.value.retry_after) == (
        503,
        "UNAVAILABLE",
        True,
        1.5,
    )


async def test_http_400_from_validation_is_not_retryable_and_keeps_the_message(
    transport: str,
) -> None:
    bad = {"contents": [*REQUEST["contents"], {"role": "model", "parts": [{"text": "x"}]}]}
    async with (
        FakeGemini([CHUNKS]) as server,
        GeminiClient("m", api_key="k", base_url=server.url, transport=transport) as client,
    ):
        with pytest.raises(ProviderError) as info:
            await read_all(client, bad)
    assert (info.value.status, info.value.code, info.value.retryable, info.value.message) == (
        400,
        "INVALID_ARGUMENT",
        False,
        MSG_MULTI_TURN_END,
    )
    assert info.value.retry_after is None


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (408, False),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (504, True),
    ],
)
def test_retryable_statuses(status: int, retryable: bool) -> None:
    assert provider_error_from_response(status, b"").retryable is retryable


def test_h2_non_json_error_body_is_quoted_in_the_message() -> None:
    err = provider_error_from_response(502, b"<html>Bad Gateway</html>", reason="Bad Gateway")
    assert (err.status, err.code, err.message) == (
        502,
        None,
        "HTTP 502 Bad Gateway: <html>Bad Gateway</html>",
    )


def test_error_wrapped_in_an_array_is_understood() -> None:
    body = b'[{"error": {"code": 404, "message": "models/x is not found", "status": "NOT_FOUND"}}]'
    err = provider_error_from_response(404, body)
    assert (err.code, err.message) == ("NOT_FOUND", "models/x is not found")


def test_retry_delay_in_seconds_and_nanos_form() -> None:
    body = orjson.dumps(
        {
            "error": {
                "code": 429,
                "status": "RESOURCE_EXHAUSTED",
                "message": "q",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": {"seconds": 2, "nanos": 500000000},
                    }
                ],
            }
        }
    )
    assert provider_error_from_response(429, body).retry_after == 2.5


def test_h2_retry_after_header_wins_over_retry_info() -> None:
    body = orjson.dumps(
        {
            "error": {
                "code": 429,
                "status": "RESOURCE_EXHAUSTED",
                "message": "q",
                "details": [
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "30s"}
                ],
            }
        }
    )
    assert provider_error_from_response(429, body, {"retry-after": "3"}).retry_after == 3.0


def test_retry_after_http_date() -> None:
    now = 1_700_000_000.0  # 2023-11-14T22:13:20Z
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:50 GMT", now=now) == 30.0
    assert parse_retry_after("Tue, 14 Nov 2023 22:00:00 GMT", now=now) == 0.0
    assert parse_retry_after("0.25") == 0.25
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


async def test_connection_refused_is_a_retryable_connection_error(transport: str) -> None:
    with refusing_port() as port:
        async with GeminiClient(
            "m", api_key="k", base_url=f"http://127.0.0.1:{port}", transport=transport
        ) as client:
            with pytest.raises(ProviderError) as info:
                await read_all(client)
    assert (info.value.status, info.value.kind, info.value.retryable, info.value.code) == (
        None,
        "connection",
        True,
        "CONNECTION",
    )
    assert info.value.message.startswith(
        "connection failed before the response started: " + CONNECT_ERROR[transport]
    )


async def test_h5_connection_dropped_mid_stream_is_a_retryable_connection_error(
    transport: str,
) -> None:
    received = b""
    async with (
        FakeGemini([Step(CHUNKS, drop_after=1)]) as server,
        GeminiClient("m", api_key="k", base_url=server.url, transport=transport) as client,
    ):
        with pytest.raises(ProviderError) as info:
            async with client.stream(REQUEST, timeout=None) as body:
                async for piece in body:
                    received += piece
    assert received == frames(CHUNKS[:1])
    assert (info.value.kind, info.value.retryable, info.value.status) == ("connection", True, None)
    assert info.value.message.startswith(
        f"connection failed after {len(received)} bytes of the body: {DROP_ERROR[transport]}"
    )


@pytest.mark.parametrize("way", ["iterated", "pumped"])
async def test_h7_h11_bytes_buffered_before_a_drop_are_handed_over_before_the_error(
    transport: str, way: str
) -> None:
    # The first chunk and the close both arrive before the body is read at all.
    pieces: list[bytes] = []
    async with (
        FakeGemini([Step(CHUNKS, drop_after=1)]) as server,
        GeminiClient("m", api_key="k", base_url=server.url, transport=transport) as client,
    ):
        with pytest.raises(ProviderError) as info:
            async with client.stream(REQUEST, timeout=None) as body:
                await asyncio.sleep(0.3)
                if way == "pumped":
                    await pump(body, pieces.append)
                else:
                    async for piece in body:
                        pieces.append(piece)
    received = b"".join(pieces)
    assert received == frames(CHUNKS[:1])
    assert info.value.kind == "connection"
    assert info.value.message.startswith(f"connection failed after {len(received)} bytes")


async def test_h7_a_broken_chunk_line_after_part_of_the_body_ends_it_on_every_transport(
    transport: str,
) -> None:
    # The server sends the broken line only once the client has read the good bytes,
    # and keeps the connection open: aiohttp's parser closes it without telling the
    # body, whose reader waited for the timeout before fastagg ended it (H7).
    read_it = asyncio.Event()
    body = frames(CHUNKS)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        writer.write(b"%x\r\n%s\r\n" % (len(body), body))
        await read_it.wait()
        writer.write(b"zz\r\n")
        await reader.read()  # open until the client goes

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    received = b""

    async def read() -> None:
        nonlocal received
        async with client.stream(REQUEST, timeout=10) as stream:
            async for piece in stream:
                received += piece
                if received == body:
                    read_it.set()

    async with server, GeminiClient("m", api_key="k", base_url=url, transport=transport) as client:
        with pytest.raises(ProviderError) as info:
            # A bound, not a check: without the fix aiohttp's reader waits forever (its
            # parser's error also drops the read timeout), and this ends the test.
            await asyncio.wait_for(read(), 30)
    assert received == body
    assert (info.value.kind, info.value.retryable) == ("connection", True)
    assert info.value.message.startswith(
        f"connection failed after {len(body)} bytes of the body: "
        + {
            "aiohttp": "ClientPayloadError: the connection closed before the body ended",
            "httpx": "RemoteProtocolError: illegal chunk header",
        }[transport]
    )


async def test_h5_timeout_waiting_for_the_first_byte_is_a_timeout_error(transport: str) -> None:
    async with (
        FakeGemini([Step(CHUNKS, delay_first_byte=5)]) as server,
        GeminiClient("m", api_key="k", base_url=server.url, transport=transport) as client,
    ):
        with pytest.raises(ProviderError) as info:
            await read_all(client, timeout=0.2)
    assert (info.value.kind, info.value.code, info.value.retryable) == (
        "timeout",
        "DEADLINE_EXCEEDED",
        True,
    )


# --- the response is always closed -----------------------------------------------------------


class Recording:
    """Wraps a transport and keeps every response it returned, to check it was closed."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.responses: list[Response] = []

    async def post(self, url: str, body: bytes, headers: Any, timeout: float | None) -> Response:
        response = await self.inner.post(url, body, headers, timeout)
        self.responses.append(response)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()

    def closed(self) -> list[bool]:
        """Whether the stack's own response object of each request is closed."""
        out = []
        for response in self.responses:
            raw = response._response  # type: ignore[attr-defined]
            out.append(raw.closed if isinstance(raw, aiohttp.ClientResponse) else raw.is_closed)
        return out


def open_client(server: FakeGemini, transport: str) -> tuple[GeminiClient, Recording]:
    inner = AiohttpTransport() if transport == "aiohttp" else HttpxTransport()
    recording = Recording(inner)
    return GeminiClient("m", api_key="k", base_url=server.url, http_client=recording), recording


async def test_response_is_closed_when_the_consumer_stops_early(transport: str) -> None:
    async with FakeGemini([Step(CHUNKS, pause_after=1, pause=float("inf"))]) as server:
        client, recording = open_client(server, transport)
        async with client.stream(REQUEST, timeout=None) as body:
            async for _ in body:
                break
        assert recording.closed() == [True]
        await recording.aclose()


async def test_response_is_closed_when_the_block_raises(transport: str) -> None:
    async with FakeGemini([CHUNKS]) as server:
        client, recording = open_client(server, transport)
        with pytest.raises(RuntimeError, match="consumer failed"):
            async with client.stream(REQUEST, timeout=None):
                raise RuntimeError("consumer failed")
        assert recording.closed() == [True]
        await recording.aclose()


async def test_response_is_closed_when_the_task_is_cancelled_mid_stream(transport: str) -> None:
    started = asyncio.Event()

    async def consume(client: GeminiClient) -> None:
        async with client.stream(REQUEST, timeout=None) as body:
            async for _ in body:
                started.set()

    async with FakeGemini([Step(CHUNKS, pause_after=1, pause=float("inf"))]) as server:
        client, recording = open_client(server, transport)
        task = asyncio.create_task(consume(client))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert recording.closed() == [True]
        await recording.aclose()


async def test_response_is_closed_after_an_http_error(transport: str) -> None:
    async with FakeGemini([Step(http_error=503)]) as server:
        client, recording = open_client(server, transport)
        with pytest.raises(ProviderError):
            await read_all(client)
        assert recording.closed() == [True]
        await recording.aclose()


async def test_response_is_closed_on_timeout_mid_stream(transport: str) -> None:
    async with FakeGemini([Step(CHUNKS, pause_after=1, pause=float("inf"))]) as server:
        client, recording = open_client(server, transport)
        with pytest.raises(ProviderError) as info:
            # 1 s: the head must come before it runs out on a loaded machine
            await read_all(client, timeout=1.0)
        assert info.value.kind == "timeout"
        assert recording.closed() == [True]
        await recording.aclose()
