"""HTTP transports for :class:`fastagg.GeminiClient`: one class per HTTP stack.

A transport POSTs a serialized request and hands back a :class:`Response`:
status, reason, headers, and the raw body chunks as an async iterator. Each
maps its own exceptions to :class:`~fastagg.errors.ProviderError`
(``kind="timeout"`` or ``kind="connection"``), so retries and error messages
are the same whichever stack reads the bytes (H3-H6 in ``spec/turn-loop.md``).

``AsyncioTransport`` (fastagg's own HTTP/1.1 client, ``_http1.py``) is the
default: over loopback it reads a body for less CPU than aiohttp on every
corpus stream, and aiohttp for about a fifth of httpx's (``benches/e2e.py``
measures all three). ``AiohttpTransport`` and ``HttpxTransport`` stay for
users who already hold an ``aiohttp.ClientSession`` or an ``httpx.AsyncClient``,
and aiohttp sends what the environment routes through a proxy.

The hot path is one ``__anext__`` frame per chunk around the stack's own read
(H6): no wrapper generator, no re-chunking, no copy.
"""

from __future__ import annotations

import asyncio
import inspect
import urllib.parse
import urllib.request
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from types import BuiltinMethodType
from typing import Any, Protocol, runtime_checkable

import aiohttp
import httpx

from ._asyncio_transport import AsyncioResponse, AsyncioTransport
from ._loop_end import at_loop_end
from ._proxies import origin_of, proxy_for
from ._transport_shared import BEFORE as _BEFORE
from ._transport_shared import CONNECT_TIMEOUT, MAX_CONNECTIONS, POOL_TIMEOUT, WRITE_TIMEOUT
from ._transport_shared import connection_error as _connection_error
from ._transport_shared import during as _during
from ._transport_shared import timeout_error as _timeout_error

__all__ = [
    "AiohttpTransport",
    "AsyncioResponse",
    "AsyncioTransport",
    "HttpxTransport",
    "Response",
    "Transport",
    "make_transport",
    "pump",
]

MAX_KEEPALIVE = 20  # httpx's idle connections


@runtime_checkable
class Response(Protocol):
    """One streaming HTTP response; iterating it yields the raw body chunks.

    Iteration raises :class:`ProviderError` (``kind="connection"`` or
    ``"timeout"``) when the transport fails mid-body; every byte received
    before the failure has been yielded first.
    """

    status: int
    reason: str
    headers: Mapping[str, str]  # case-insensitive

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    async def __anext__(self) -> bytes: ...

    async def read_error_body(self, limit: int) -> bytes:
        """Up to ``limit`` bytes of the (error) body; a transport failure ends it quietly."""
        ...

    async def aclose(self) -> None:
        """Close the response; the connection goes back to the pool only when the body was read."""
        ...


async def pump(body: AsyncIterator[bytes], feed: Callable[[bytes], object]) -> None:
    """Call ``feed`` with every chunk of ``body``, in order, then return (H11).

    ``body`` is what ``GeminiClient.stream()`` gives (any async iterator of
    bytes). On the default transport the chunks are fed inside the socket's
    read callback, and the caller's task is woken once, at the end, instead of
    once per read; on the others this is ``async for chunk in body:
    feed(chunk)``. Errors are those of iterating ``body``, raised after every
    byte before them was fed (H7); what ``feed`` raises ends the body and is
    raised as it is. ``feed`` is called synchronously: a coroutine function is a
    ``TypeError``.
    """
    # L71: a builtin (an aggregator's feed) is never a coroutine function: inspect is
    # asked only of the others (it costs about 0.6 µs a request)
    if type(feed) is not BuiltinMethodType and inspect.iscoroutinefunction(feed):
        raise TypeError(
            f"pump() calls feed synchronously, once per piece; {feed.__qualname__} is a "
            "coroutine function: iterate the body instead (async for piece in body: "
            "await feed(piece))"
        )
    own = getattr(body, "pump", None)
    if own is not None:
        await own(feed)
        return
    async for chunk in body:
        feed(chunk)


@runtime_checkable
class Transport(Protocol):
    """What ``GeminiClient`` needs from an HTTP stack (H3).

    Resuming a stored Interactions stream (``InteractionsClient``, I21) also needs
    ``async get(url, headers, timeout) -> Response``, which both built-in transports have.
    """

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout: float | None
    ) -> Response:
        """POST ``body``; return once the status line and headers arrived.

        ``timeout`` (seconds, a plain per-request float) bounds connecting and
        every wait for bytes; None bounds only connecting (H1). Raises
        :class:`ProviderError` for transport failures and timeouts.
        """
        ...

    async def aclose(self) -> None:
        """Close the connection pool (only when the transport created it)."""
        ...


def _cap(own: float | None, cap: float) -> float:
    return cap if own is None else min(own, cap)


def _bounded_aiohttp(own: aiohttp.ClientTimeout, timeout: float | None) -> aiohttp.ClientTimeout:
    """Each phase of the session's ``own`` timeout capped at ``timeout`` (L36: never
    lengthened, so a caller's smaller timeout is kept)."""
    if timeout is None:
        return own
    cap = max(timeout, 0.001)
    return aiohttp.ClientTimeout(
        total=own.total,  # a whole-response bound of the caller's stays theirs
        connect=_cap(own.connect, cap),
        sock_connect=_cap(own.sock_connect, cap),
        sock_read=_cap(own.sock_read, cap),
    )


def _bounded_httpx(own: httpx.Timeout, timeout: float | None) -> httpx.Timeout:
    """Each phase of the client's ``own`` timeout capped at ``timeout`` (L36)."""
    if timeout is None:
        return own
    cap = max(timeout, 0.001)
    return httpx.Timeout(
        connect=_cap(own.connect, cap),
        read=_cap(own.read, cap),
        write=_cap(own.write, cap),
        pool=_cap(own.pool, cap),
    )


# --------------------------------------------------------------------------
# aiohttp
# --------------------------------------------------------------------------


# H3: one Transport per HTTP stack
class AiohttpTransport:
    """Streams over an ``aiohttp.ClientSession``.

    Without ``session`` it creates one on first use: a ``TCPConnector`` with
    100 connections, HTTP/1.1 keep-alive and the system's TLS trust store.
    Proxies come from the environment (``HTTP(S)_PROXY``, ``ALL_PROXY``,
    ``NO_PROXY``), read when the transport is made, as httpx does (H3):
    aiohttp's own ``trust_env=True`` would look them and ``.netrc`` up again
    in two worker threads on every request. A given ``session`` is used as
    it is (its own ``trust_env`` applies) and is not closed by :meth:`aclose`.
    aiohttp has no write timeout: a stalled upload is bounded by the turn's
    own clocks (H5).
    """

    def __init__(self, session: aiohttp.ClientSession | None = None) -> None:
        self._session = session
        self._session_loop: asyncio.AbstractEventLoop | None = None  # where ours was made
        self._guard: AsyncGenerator[None, None] | None = None  # closes ours when that loop ends
        self._owns = session is None
        self._env_proxies = urllib.request.getproxies_environment() if self._owns else {}
        self._proxy_for: dict[str, tuple[str | None, aiohttp.BasicAuth | None]] = {}
        # Timeout objects are immutable: build the default once.
        self._default_timeout = aiohttp.ClientTimeout(
            total=None, connect=POOL_TIMEOUT, sock_connect=CONNECT_TIMEOUT, sock_read=None
        )

    async def _new_session(self) -> aiohttp.ClientSession:
        """Our session for the running loop, made on first use (a ClientSession must be
        made inside a running loop) and again under each new loop, as a client used
        under one ``asyncio.run()`` after another is; closed when its loop ends (H3)."""
        if self._session is not None:
            _let_go(self._session.close, self._session_loop)
        session = self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=MAX_CONNECTIONS, limit_per_host=0),
            timeout=self._default_timeout,
        )
        self._session_loop = asyncio.get_running_loop()
        self._guard = await at_loop_end(session.close)
        return session

    def _proxy(self, url: str) -> tuple[str | None, aiohttp.BasicAuth | None]:
        """The environment's proxy for ``url`` (and its credentials), once per origin."""
        origin = origin_of(url)
        found = self._proxy_for.get(origin)
        if found is None:
            proxy = proxy_for(self._env_proxies, origin)
            found = (None, None) if proxy is None else _split_credentials(proxy)
            self._proxy_for[origin] = found
        return found

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout: float | None
    ) -> AiohttpResponse:
        """POST ``body`` to ``url`` (see :meth:`Transport.post`)."""
        return await self._send("POST", url, body, headers, timeout)

    async def get(
        self, url: str, headers: Mapping[str, str], timeout: float | None
    ) -> AiohttpResponse:
        """GET ``url`` (see :meth:`Transport.get`)."""
        return await self._send("GET", url, None, headers, timeout)

    async def _send(
        self,
        method: str,
        url: str,
        body: bytes | None,
        headers: Mapping[str, str],
        timeout: float | None,
    ) -> AiohttpResponse:
        session = self._session
        if self._owns and (session is None or self._session_loop is not asyncio.get_running_loop()):
            session = await self._new_session()
        assert session is not None
        own = session.timeout if isinstance(session.timeout, aiohttp.ClientTimeout) else None
        client_timeout = _bounded_aiohttp(own or self._default_timeout, timeout)
        proxy, proxy_auth = self._proxy(url) if self._env_proxies else (None, None)
        try:
            response = await session.request(
                method,
                url,
                data=body,
                headers=headers,
                timeout=client_timeout,
                proxy=proxy,
                proxy_auth=proxy_auth,
            )
        # aiohttp's timeouts subclass asyncio.TimeoutError (not the builtin before 3.11).
        except asyncio.TimeoutError as exc:
            raise _timeout_error(exc, _BEFORE) from exc
        except aiohttp.InvalidURL:
            raise
        except aiohttp.ClientError as exc:
            raise _connection_error(exc, _BEFORE) from exc
        return AiohttpResponse(response)

    async def aclose(self) -> None:
        """Close the session (only when this transport created it)."""
        if self._owns and self._session is not None:
            session, guard, self._session, self._guard = self._session, self._guard, None, None
            if self._session_loop is asyncio.get_running_loop() and guard is not None:
                await guard.aclose()  # closes the session
            else:
                _let_go(session.close, self._session_loop)

    @property
    def session(self) -> aiohttp.ClientSession | None:
        """The ``aiohttp.ClientSession`` in use (None before the first request)."""
        return self._session


def _split_credentials(proxy: str) -> tuple[str, aiohttp.BasicAuth | None]:
    """``http://user:pw@host:port`` -> (``http://host:port``, its BasicAuth)."""
    parts = urllib.parse.urlsplit(proxy)
    if parts.username is None:
        return proxy, None
    host = parts.netloc.rpartition("@")[2]
    auth = aiohttp.BasicAuth(
        urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or "")
    )
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), auth


class AiohttpResponse:
    """The body of one aiohttp response: ``content.readany()`` per chunk (H6)."""

    __slots__ = ("_closed", "_readany", "_response", "headers", "reason", "status")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status = response.status
        self.reason = response.reason or ""
        self.headers: Mapping[str, str] = response.headers
        # readany() returns everything buffered at once (one feed() per socket
        # read, not per HTTP chunk); the content is already decoded when the
        # response has a Content-Encoding.
        self._readany = response.content.readany
        # H7: aiohttp's parser can fail mid-body (a broken chunk-size line) and close
        # the connection without telling the body, whose reader would then wait for
        # the timeout: the connection's end ends a body that has not ended.
        connection = response.connection
        protocol = None if connection is None else connection.protocol
        # A future from aiohttp 3.12.4 on (the floor, H12); None once the connection is gone.
        closed = getattr(protocol, "closed", None)
        self._closed = closed if isinstance(closed, asyncio.Future) else None
        if self._closed is not None:
            self._closed.add_done_callback(self._connection_ended)

    def _connection_ended(self, closed: asyncio.Future[None]) -> None:
        content = self._response.content
        if not content.is_eof() and content.exception() is None:
            content.set_exception(
                aiohttp.ClientPayloadError("the connection closed before the body ended")
            )

    def __aiter__(self) -> AiohttpResponse:
        return self

    # H6: one frame per chunk around the stack's own read, no copy
    async def __anext__(self) -> bytes:
        try:
            chunk = await self._readany()
        except asyncio.TimeoutError as exc:
            raise _timeout_error(exc, _during(self._response.content.total_bytes)) from exc
        except aiohttp.ClientError as exc:
            rest = self._buffered()
            if rest:
                # H7: readany() raises as soon as the connection is lost, even
                # with bytes still buffered; hand those out first. The reader
                # keeps its exception, so the next call raises it.
                return rest
            # Nothing is left buffered, so every byte received was yielded:
            # the reader's own count replaces a counter on the hot path.
            raise _connection_error(exc, _during(self._response.content.total_bytes)) from exc
        if not chunk:
            raise StopAsyncIteration
        return chunk

    def _buffered(self) -> bytes:
        # aiohttp has no public way to read past a stored exception; its
        # StreamReader keeps unread bytes in ``_buffer`` (since aiohttp 3.0).
        reader = self._response.content
        buffer = getattr(reader, "_buffer", None)
        if not buffer:
            return b""
        rest = b"".join(buffer)
        buffer.clear()
        return rest

    async def read_error_body(self, limit: int) -> bytes:
        """Up to ``limit`` bytes of the body (see :meth:`Response.read_error_body`)."""
        raw = bytearray()
        try:
            while len(raw) < limit:
                piece = await self._response.content.readany()
                if not piece:
                    break
                raw += piece
        except (asyncio.TimeoutError, aiohttp.ClientError):
            pass  # the status is what matters; keep what arrived
        return bytes(raw[:limit])

    async def aclose(self) -> None:
        """Release the connection: back to the pool after a full body, closed otherwise."""
        if self._closed is not None:  # a kept-alive connection must not collect callbacks
            self._closed.remove_done_callback(self._connection_ended)
            self._closed = None
        # release() closes the connection when the payload is incomplete.
        self._response.release()


# --------------------------------------------------------------------------
# httpx
# --------------------------------------------------------------------------


class HttpxTransport:
    """Streams over an ``httpx.AsyncClient``.

    Without ``client`` it creates one: 100 connections, 20 kept alive,
    proxies from the environment, certifi's trust store. A given ``client``
    is used as it is and is not closed by :meth:`aclose`.
    """

    def __init__(self, client: httpx.AsyncClient | None = None) -> None:
        self._default_timeout = httpx.Timeout(
            connect=CONNECT_TIMEOUT, read=None, write=WRITE_TIMEOUT, pool=POOL_TIMEOUT
        )
        self._owns = client is None
        self.client = client if client is not None else self._new_client()
        self._client_loop: asyncio.AbstractEventLoop | None = None  # where ours first ran
        self._guard: AsyncGenerator[None, None] | None = None  # closes ours when that loop ends

    def _new_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            timeout=self._default_timeout,
            limits=httpx.Limits(
                max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_KEEPALIVE
            ),
        )

    async def _client_here(self) -> httpx.AsyncClient:
        """Our client, bound to the first loop it runs in and closed when that loop
        ends; a new one under each new loop, as a client used under one
        ``asyncio.run()`` after another is: its kept-alive connections belong to the
        loop they were made in (H3)."""
        loop = asyncio.get_running_loop()
        if self._client_loop is not None:
            _let_go(self.client.aclose, self._client_loop)
            self.client = self._new_client()
        self._client_loop = loop
        self._guard = await at_loop_end(self.client.aclose)
        return self.client

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout: float | None
    ) -> HttpxResponse:
        """POST ``body`` to ``url`` (see :meth:`Transport.post`)."""
        return await self._send("POST", url, body, headers, timeout)

    async def get(
        self, url: str, headers: Mapping[str, str], timeout: float | None
    ) -> HttpxResponse:
        """GET ``url`` (see :meth:`Transport.get`)."""
        return await self._send("GET", url, None, headers, timeout)

    async def _send(
        self,
        method: str,
        url: str,
        body: bytes | None,
        headers: Mapping[str, str],
        timeout: float | None,
    ) -> HttpxResponse:
        client = self.client
        if self._owns and self._client_loop is not asyncio.get_running_loop():
            client = await self._client_here()
        http_timeout = _bounded_httpx(client.timeout, timeout)
        request = client.build_request(
            method, url, content=body, headers=headers, timeout=http_timeout
        )
        try:
            response = await client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise _timeout_error(exc, _BEFORE) from exc
        except httpx.TransportError as exc:
            raise _connection_error(exc, _BEFORE) from exc
        return HttpxResponse(response)

    async def aclose(self) -> None:
        """Close the client (only when this transport created it)."""
        if self._owns:
            guard, self._guard = self._guard, None
            here = self._client_loop in (None, asyncio.get_running_loop())
            if not here:
                _let_go(self.client.aclose, self._client_loop)
            elif guard is not None:
                await guard.aclose()  # closes the client
            else:
                await self.client.aclose()


class HttpxResponse:
    """The body of one httpx response: ``aiter_raw()`` when nothing is to be decoded (H6)."""

    __slots__ = ("_chunks", "_response", "headers", "reason", "status")

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status = response.status_code
        self.reason = response.reason_phrase
        self.headers: Mapping[str, str] = response.headers
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        # Raw bytes when nothing is to be decoded: no decoder pass on the hot path.
        chunks = response.aiter_raw() if encoding in ("", "identity") else response.aiter_bytes()
        self._chunks: Any = chunks.__anext__

    def __aiter__(self) -> HttpxResponse:
        return self

    async def __anext__(self) -> bytes:
        try:
            chunk: bytes = await self._chunks()
        except httpx.TimeoutException as exc:
            raise _timeout_error(exc, _during(self._response.num_bytes_downloaded)) from exc
        except httpx.TransportError as exc:
            raise _connection_error(exc, _during(self._response.num_bytes_downloaded)) from exc
        return chunk

    async def read_error_body(self, limit: int) -> bytes:
        """Up to ``limit`` bytes of the body (see :meth:`Response.read_error_body`)."""
        raw = bytearray()
        try:
            async for piece in self._response.aiter_bytes():
                raw += piece
                if len(raw) >= limit:
                    break
        except httpx.TransportError:
            pass  # the status is what matters; keep what arrived
        return bytes(raw[:limit])

    async def aclose(self) -> None:
        """Close the response (the connection is reused only after a full body)."""
        await self._response.aclose()


TRANSPORTS = ("aiohttp", "asyncio", "httpx")


def _let_go(close: Callable[[], Awaitable[object]], loop: asyncio.AbstractEventLoop | None) -> None:
    """Close a session or client of another event loop (H3), on that loop if it still
    runs. One whose loop ``asyncio.run()`` ended was closed then (``at_loop_end``); one
    of a loop closed by hand cannot be (its connections belong to that loop) and is
    left to the garbage collector."""
    if loop is not None and not loop.is_closed():
        asyncio.run_coroutine_threadsafe(_awaited(close), loop)


async def _awaited(close: Callable[[], Awaitable[object]]) -> None:
    await close()


# H4: a caller's client or session is used as it is and left open
def make_transport(
    http_client: aiohttp.ClientSession | httpx.AsyncClient | Transport | None = None,
    transport: str | None = None,
) -> tuple[Transport, bool]:
    """The transport for ``GeminiClient(http_client=..., transport=...)`` and whether it owns it.

    ``http_client`` may be a :class:`Transport`, an ``aiohttp.ClientSession``
    or an ``httpx.AsyncClient`` (H4); otherwise ``transport`` names the stack
    to create (``"asyncio"``, fastagg's own HTTP/1.1 client and the default,
    ``"aiohttp"`` or ``"httpx"``).
    """
    if http_client is not None:
        if transport is not None:
            raise ValueError(
                "pass either http_client= (your own client) or transport= (the stack "
                "GeminiClient creates), not both"
            )
        if isinstance(http_client, aiohttp.ClientSession):
            return AiohttpTransport(http_client), False
        if isinstance(http_client, httpx.AsyncClient):
            return HttpxTransport(http_client), False
        if isinstance(http_client, Transport):
            return http_client, False
        raise TypeError(
            f"http_client must be an aiohttp.ClientSession, an httpx.AsyncClient or a "
            f"fastagg.transport.Transport, not {type(http_client).__name__}"
        )
    # H3: the measured default
    name = "asyncio" if transport is None else transport
    if name == "aiohttp":
        return AiohttpTransport(), True
    if name == "httpx":
        return HttpxTransport(), True
    if name == "asyncio":
        return AsyncioTransport(), True
    raise ValueError(f"unknown transport {transport!r}; use one of: {', '.join(TRANSPORTS)}")
