"""HTTP transports for :class:`fastagg.GeminiClient`: aiohttp (the default) and httpx.

A transport POSTs a serialized request and hands back a :class:`Response`:
status, reason, headers, and the body chunks as an async iterator. Each maps
its own exceptions to :class:`~fastagg.errors.ProviderError`
(``kind="timeout"`` or ``kind="connection"``), so retries and error messages
are the same whichever stack reads the bytes (H3-H7 in ``spec/turn-loop.md``).

``AiohttpTransport`` is the default: aiohttp's C parser reads a body for about a
fifth of httpx's CPU (``benches/e2e.py``), and fastagg owns no HTTP code
(``docs/decisions/http-on-aiohttp.md``). ``HttpxTransport`` is for users who
already hold an ``httpx.AsyncClient`` (``pip install 'fastagg[httpx]'``; httpx
is imported only then). On both, fastagg follows no redirect (H15), keeps the
credentials out of every error (H16), bounds an inflated body (H18) and the
request's write (H19).

The hot path is one ``__anext__`` frame per chunk around the stack's own read
(H6): no wrapper generator, no re-chunking, no copy.
"""

from __future__ import annotations

import asyncio
import inspect
import ssl
import sys
import urllib.parse
import urllib.request
import warnings
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from types import BuiltinMethodType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import aiohttp
import aiohttp.payload

from ..errors import ProviderError, ProviderErrorKind
from ._loop_end import at_loop_end

if TYPE_CHECKING:
    import httpx

__all__ = [
    "AiohttpTransport",
    "HttpxTransport",
    "Response",
    "Transport",
    "make_transport",
    "pump",
]

# Without a per-request timeout, connecting and sending are bounded and reading is
# not: a thinking model may be silent for minutes, and the turn loop owns the clocks (H1).
# The wait for a free pooled connection has no bound of its own (H22): streams queued
# behind long ones wait as long as the caller's timeout allows.
CONNECT_TIMEOUT = 30.0
WRITE_TIMEOUT = 60.0
MAX_CONNECTIONS = 100
MAX_KEEPALIVE = 20  # httpx's idle connections
# H18: an inflated body may grow to this many times the compressed bytes so far, plus SLACK.
MAX_RATIO = 200
SLACK = 1 << 20
_TOO_LARGE_BYTES = 1 << 20  # aiohttp warns about a bytes payload above this (TOO_LARGE_BYTES_BODY)


@runtime_checkable
class Response(Protocol):
    """One streaming HTTP response; iterating it yields the body chunks.

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
    bytes): this is ``async for chunk in body: feed(chunk)``, or the body's own
    ``pump(feed)`` when it has one (a third-party transport that pushes its
    bytes). Errors are those of iterating ``body``, raised after every byte
    before them was fed (H7); what ``feed`` raises ends the body and is raised
    as it is. ``feed`` is called synchronously: a coroutine function is a
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

        ``timeout`` (seconds, a plain per-request float) bounds connecting, sending
        and every wait for bytes; None bounds only connecting and sending (H1).
        Raises :class:`ProviderError` for transport failures and timeouts. A
        redirect is returned as the response it is, never followed (H15).
        """
        ...

    async def aclose(self) -> None:
        """Close the connection pool (only when the transport created it)."""
        ...


# --------------------------------------------------------------------------
# What both stacks share: errors (H5, H16), proxies (H3), inflating (H18)
# --------------------------------------------------------------------------

BEFORE = "before the response started"


def during(received: int) -> str:
    return f"after {received} bytes of the body"


# H5: the same error kinds and message shape on every transport
def _error(
    exc: BaseException, where: str, verb: str, code: str, kind: ProviderErrorKind
) -> ProviderError:
    name = type(exc).__name__
    error = ProviderError(
        None, code, f"{verb} {where}: {name}: {str(exc) or name}", True, kind=kind
    )
    # H16: the stack's exception is not chained. aiohttp's keep the request (its
    # headers: the API key) in request_info and in their args, httpx's in .request;
    # its type and text are in the message. Raised outside the `except` that caught
    # it, the error has no __context__ either.
    error.__cause__ = None
    error.__suppress_context__ = True
    return error


def timeout_error(exc: BaseException, where: str) -> ProviderError:
    return _error(exc, where, "timed out", "DEADLINE_EXCEEDED", "timeout")


def connection_error(exc: BaseException, where: str) -> ProviderError:
    return _error(exc, where, "connection failed", "CONNECTION", "connection")


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``: the key proxy lookups are kept under."""
    end = url.find("/", url.find("//") + 2)
    return url if end < 0 else url[:end]


def proxy_for(env: Mapping[str, str], origin: str) -> str | None:
    """The proxy URL the environment ``env`` routes ``origin`` through, or None (H3):
    ``http(s)_proxy`` / ``all_proxy``, ``no_proxy`` read by the standard library's rules."""
    parts = urllib.parse.urlsplit(origin)
    proxy = env.get(parts.scheme) or env.get("all")
    # NO_PROXY is read by the stdlib's own rules (not in typeshed).
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if proxy is None or bypass(parts.hostname or "", env):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


class CompressedBodyError(Exception):
    """A compressed body fastagg refused to inflate (H18); the message says why. It is
    the named cause in a ``ProviderError(kind="connection")``'s message."""


# H18: a compressed body is inflated at most MAX_RATIO times its size plus SLACK
class _Inflater:
    """gzip or deflate (zlib) bytes in, at most ``MAX_RATIO`` times the bytes taken so
    far plus ``SLACK`` out, in total: a server that compresses although asked for
    identity is still read, and a decompression bomb is refused before it expands
    (what fits in the bound is handed out first, the error comes with the next read)."""

    __slots__ = ("_coding", "_given", "_over", "_taken", "_unpack")

    def __init__(self, coding: str) -> None:
        self._coding = coding
        self._unpack = zlib.decompressobj(47)  # a gzip or a zlib header, detected
        self._taken = 0
        self._given = 0
        self._over = False

    def __call__(self, data: bytes) -> bytes:
        unpack = self._unpack
        if self._over:
            raise self._bomb()
        if unpack.eof:
            return b""  # bytes after the end of the compressed stream are dropped
        self._taken += len(data)
        room = MAX_RATIO * self._taken + SLACK - self._given
        try:
            out = unpack.decompress(data, room)
        except zlib.error as exc:
            raise CompressedBodyError(f"the {self._coding} body is not valid: {exc}") from None
        if unpack.unconsumed_tail:
            self._over = True
            if not out:
                raise self._bomb()
        self._given += len(out)
        return out

    def _bomb(self) -> CompressedBodyError:
        return CompressedBodyError(
            f"the {self._coding} body expands more than {MAX_RATIO} times its size: "
            "refused as a decompression bomb"
        )

    def check_end(self) -> None:
        if self._over:
            raise self._bomb()
        if not self._unpack.eof:
            raise CompressedBodyError(
                f"the {self._coding} body ended before its compressed stream did"
            )


def _inflater(headers: Mapping[str, str]) -> _Inflater | None:
    """The inflater of a body with this ``Content-Encoding`` (None for identity)."""
    coding = headers.get("content-encoding", "").strip().lower()
    if coding in ("", "identity"):
        return None
    if coding in ("gzip", "x-gzip", "deflate"):
        return _Inflater(coding)
    raise CompressedBodyError(
        f"the server compressed the body with {coding!r}, which fastagg does not decode "
        "(it asked for identity)"
    )


if sys.version_info >= (3, 11):

    async def _bounded(awaitable: Any, seconds: float) -> Any:
        """``await awaitable``, a TimeoutError after ``seconds``; a cancellation of the
        caller always propagates (H14), even one that lands in the loop iteration in which
        ``awaitable`` completes (``asyncio.wait_for`` up to 3.11 returns the result then)."""
        async with asyncio.timeout(seconds):
            return await awaitable

else:

    async def _bounded(awaitable: Any, seconds: float) -> Any:
        """As above, on 3.10 (no ``asyncio.timeout``): the timer cancels this task and
        only that cancellation becomes the TimeoutError (H14)."""
        task = asyncio.current_task()
        assert task is not None
        expired = False

        def expire() -> None:
            nonlocal expired
            expired = True
            task.cancel()

        timer = asyncio.get_running_loop().call_later(seconds, expire)
        try:
            return await awaitable
        except asyncio.CancelledError:
            if expired:
                raise TimeoutError(f"no answer within {seconds:g}s") from None
            raise
        finally:
            timer.cancel()


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


# --------------------------------------------------------------------------
# aiohttp
# --------------------------------------------------------------------------


class _SentWithin(aiohttp.payload.BytesPayload):
    """A request body whose write gives up after ``seconds`` (H19): aiohttp has no
    write timeout and starts its read timeout only once the body is written, so a
    server that never reads held the request for ever."""

    def __init__(self, body: bytes, seconds: float) -> None:
        if len(body) > _TOO_LARGE_BYTES:  # its advice (an io.BytesIO) would not help here
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ResourceWarning)
                super().__init__(body, content_type="application/json")
        else:
            super().__init__(body, content_type="application/json")
        self.seconds = seconds
        self.expired = False

    async def write_with_length(self, writer: Any, content_length: int | None) -> None:
        try:
            await _bounded(super().write_with_length(writer, content_length), self.seconds)
        except TimeoutError:
            self.expired = True
            raise


# H3: one Transport per HTTP stack
class AiohttpTransport:
    """Streams over an ``aiohttp.ClientSession`` (the default transport).

    Without ``session`` it creates one on first use: a ``TCPConnector`` with
    100 connections, HTTP/1.1 keep-alive and the system's TLS trust store, or
    ``ssl_context`` (used for every request, proxied ones included: H17).
    Proxies come from the environment (``HTTP(S)_PROXY``, ``ALL_PROXY``,
    ``NO_PROXY``), read when the transport is made, as httpx does (H3):
    aiohttp's own ``trust_env=True`` would look them and ``.netrc`` up again
    in two worker threads on every request. A given ``session`` is used as
    it is (its own ``trust_env`` and TLS apply) and is not closed by
    :meth:`aclose`; on it too, no redirect is followed (H15), the body is not
    inflated by aiohttp but bounded by fastagg (H18) and the request's write is
    bounded (H19).
    """

    def __init__(
        self,
        session: aiohttp.ClientSession | None = None,
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if session is not None and ssl_context is not None:
            raise ValueError(
                "pass ssl_context= only without session=: your session's connector has its "
                "own (aiohttp.TCPConnector(ssl=context))"
            )
        self._session = session
        self._ssl = ssl_context
        self._session_loop: asyncio.AbstractEventLoop | None = None  # where ours was made
        self._guard: AsyncGenerator[None, None] | None = None  # closes ours when that loop ends
        self._owns = session is None
        self._env_proxies = urllib.request.getproxies_environment() if self._owns else {}
        self._proxy_for: dict[str, tuple[str | None, aiohttp.BasicAuth | None]] = {}
        # Timeout objects are immutable: build the default once.
        self._default_timeout = aiohttp.ClientTimeout(
            total=None, connect=None, sock_connect=CONNECT_TIMEOUT, sock_read=None
        )

    async def _new_session(self) -> aiohttp.ClientSession:
        """Our session for the running loop, made on first use (a ClientSession must be
        made inside a running loop) and again under each new loop, as a client used
        under one ``asyncio.run()`` after another is; closed when its loop ends (H3)."""
        if self._session is not None:
            _let_go(self._session.close, self._session_loop)
        connector = aiohttp.TCPConnector(
            limit=MAX_CONNECTIONS, limit_per_host=0, ssl=self._ssl if self._ssl else True
        )
        session = self._session = aiohttp.ClientSession(
            connector=connector, timeout=self._default_timeout
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
        """GET ``url`` (see :meth:`Transport.post`)."""
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
        data = None if body is None else _SentWithin(body, _cap(timeout, WRITE_TIMEOUT))
        try:
            response = await session.request(
                method,
                url,
                data=data,
                headers=headers,
                timeout=client_timeout,
                proxy=proxy,
                proxy_auth=proxy_auth,
                allow_redirects=False,  # H15: the key would go with it
                auto_decompress=False,  # H18: inflated by _Inflater, bounded
            )
        # aiohttp's timeouts subclass asyncio.TimeoutError (not the builtin before 3.11).
        except asyncio.TimeoutError as exc:
            error = timeout_error(exc, BEFORE)
        except aiohttp.InvalidURL:
            raise
        except aiohttp.ClientError as exc:
            expired = data is not None and data.expired
            error = (timeout_error if expired else connection_error)(exc, BEFORE)
        else:
            return AiohttpResponse(response)
        raise error  # H16: outside the except, so the stack's exception is no __context__

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


def _retrieved(closed: asyncio.Future[None]) -> None:
    """Mark a connection's ``closed`` future's exception as seen (H20): aiohttp sets one
    when the connection is reset, and one nobody read is logged as "Future exception
    was never retrieved" when collected."""
    if not closed.cancelled():
        closed.exception()


class AiohttpResponse:
    """The body of one aiohttp response: ``content.readany()`` per chunk (H6)."""

    __slots__ = ("_closed", "_inflate", "_readany", "_response", "headers", "reason", "status")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status = response.status
        self.reason = response.reason or ""
        self.headers: Mapping[str, str] = response.headers
        # readany() returns everything buffered at once (one feed() per socket
        # read, not per HTTP chunk).
        self._readany = response.content.readany
        try:
            self._inflate = _inflater(response.headers)
        except CompressedBodyError as exc:
            response.close()
            raise connection_error(exc, BEFORE) from None
        # H7: aiohttp's parser can fail mid-body (a broken chunk-size line) and close
        # the connection without telling the body, whose reader would then wait for
        # the timeout: the connection's end ends a body that has not ended.
        connection = response.connection
        protocol = None if connection is None else connection.protocol
        # A future from aiohttp 3.12.4 on (the floor, H12); None once the connection is gone.
        closed = getattr(protocol, "closed", None)
        self._closed = closed if isinstance(closed, asyncio.Future) else None
        if self._closed is not None:
            # H20: once per connection (a kept-alive one serves many responses).
            self._closed.remove_done_callback(_retrieved)
            self._closed.add_done_callback(_retrieved)
            self._closed.add_done_callback(self._connection_ended)

    @property
    def received(self) -> int:
        """Bytes of the body received so far, as they came over the wire (for the log, O2)."""
        return int(self._response.content.total_bytes)

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
        while True:
            error = None
            try:
                chunk = await self._readany()
            except asyncio.TimeoutError as exc:
                error = timeout_error(exc, during(self._response.content.total_bytes))
            except aiohttp.ClientError as exc:
                # H7: readany() raises as soon as the connection is lost, even with
                # bytes still buffered; hand those out first. The reader keeps its
                # exception, so the next call raises it.
                chunk = self._buffered()
                if not chunk:
                    # Nothing is left buffered, so every byte received was yielded:
                    # the reader's own count replaces a counter on the hot path.
                    error = connection_error(exc, during(self._response.content.total_bytes))
            else:
                if not chunk:
                    if self._inflate is not None:
                        self._inflated_end()
                    raise StopAsyncIteration
            if error is not None:
                raise error  # H16: outside the except, so the stack's exception is no context
            if self._inflate is None:
                return chunk
            chunk = self._inflated(chunk)
            if chunk:
                return chunk

    def _inflated(self, chunk: bytes) -> bytes:
        assert self._inflate is not None
        try:
            return self._inflate(chunk)
        except CompressedBodyError as exc:
            self._response.close()
            raise connection_error(exc, during(self._response.content.total_bytes)) from None

    def _inflated_end(self) -> None:
        assert self._inflate is not None
        try:
            self._inflate.check_end()
        except CompressedBodyError as exc:
            raise connection_error(exc, during(self._response.content.total_bytes)) from None

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
                raw += piece if self._inflate is None else self._inflate(piece)
        except (asyncio.TimeoutError, aiohttp.ClientError, CompressedBodyError):
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
# httpx (optional: pip install 'fastagg[httpx]')
# --------------------------------------------------------------------------

_HTTPX_NEEDED = (
    "transport='httpx' needs httpx: pip install 'fastagg[httpx]' (or use the default "
    "transport, aiohttp)"
)


def _httpx() -> Any:
    """The httpx module, imported on first use (H21)."""
    try:
        import httpx
    except ImportError as exc:
        raise ImportError(f"{_HTTPX_NEEDED}; the import failed: {exc}") from exc
    return httpx


def _bounded_httpx(own: httpx.Timeout, timeout: float | None) -> httpx.Timeout:
    """Each phase of the client's ``own`` timeout capped at ``timeout`` (L36)."""
    if timeout is None:
        return own
    cap = max(timeout, 0.001)
    timeouts: httpx.Timeout = _httpx().Timeout(
        connect=_cap(own.connect, cap),
        read=_cap(own.read, cap),
        write=_cap(own.write, cap),
        pool=_cap(own.pool, cap),
    )
    return timeouts


class HttpxTransport:
    """Streams over an ``httpx.AsyncClient`` (needs ``pip install 'fastagg[httpx]'``).

    Without ``client`` it creates one: 100 connections, 20 kept alive,
    proxies from the environment, certifi's trust store or ``ssl_context``. A
    given ``client`` is used as it is and is not closed by :meth:`aclose`; on it
    too, no redirect is followed (H15) and an inflated body is bounded (H18).
    """

    def __init__(
        self, client: httpx.AsyncClient | None = None, *, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        hx = _httpx()
        if client is not None and ssl_context is not None:
            raise ValueError(
                "pass ssl_context= only without client=: your client has its own "
                "(httpx.AsyncClient(verify=context))"
            )
        self._httpx = hx
        self._ssl = ssl_context
        self._default_timeout = hx.Timeout(
            connect=CONNECT_TIMEOUT, read=None, write=WRITE_TIMEOUT, pool=None
        )
        self._owns = client is None
        self.client: httpx.AsyncClient = client if client is not None else self._new_client()
        self._client_loop: asyncio.AbstractEventLoop | None = None  # where ours first ran
        self._guard: AsyncGenerator[None, None] | None = None  # closes ours when that loop ends

    def _new_client(self) -> httpx.AsyncClient:
        hx = self._httpx
        client: httpx.AsyncClient = hx.AsyncClient(
            timeout=self._default_timeout,
            limits=hx.Limits(
                max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_KEEPALIVE
            ),
            verify=self._ssl if self._ssl is not None else True,
        )
        return client

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
        """GET ``url`` (see :meth:`Transport.post`)."""
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
        hx = self._httpx
        try:
            # H15: never follow a redirect, whatever the client's own setting
            response = await client.send(request, stream=True, follow_redirects=False)
        except hx.TimeoutException as exc:
            error = timeout_error(exc, BEFORE)
        except hx.TransportError as exc:
            error = connection_error(exc, BEFORE)
        else:
            try:
                return HttpxResponse(response, hx)
            except CompressedBodyError as exc:
                await response.aclose()
                error = connection_error(exc, BEFORE)
        raise error  # H16: outside the except, so the stack's exception is no __context__

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
    """The body of one httpx response: ``aiter_raw()``, inflated by fastagg when
    compressed (H6, H18)."""

    __slots__ = ("_chunks", "_failures", "_inflate", "_response", "headers", "reason", "status")

    def __init__(self, response: httpx.Response, hx: Any) -> None:
        self._response = response
        self.status = response.status_code
        self.reason = response.reason_phrase
        self.headers: Mapping[str, str] = response.headers
        self._inflate = _inflater(response.headers)
        self._chunks: Any = response.aiter_raw().__anext__
        self._failures = (hx.TimeoutException, hx.TransportError)

    def __aiter__(self) -> HttpxResponse:
        return self

    @property
    def received(self) -> int:
        """Bytes of the body received so far, as they came over the wire (for the log, O2)."""
        return int(self._response.num_bytes_downloaded)

    async def __anext__(self) -> bytes:
        while True:
            try:
                chunk: bytes = await self._chunks()
            except StopAsyncIteration:
                if self._inflate is not None:
                    self._check(self._inflate.check_end)
                raise
            except self._failures as exc:
                error = self._mapped(exc)
            else:
                if self._inflate is None:
                    return chunk
                chunk = self._check(self._inflate, chunk)
                if chunk:
                    return chunk
                continue
            raise error  # H16: outside the except

    def _mapped(self, exc: BaseException) -> ProviderError:
        where = during(self._response.num_bytes_downloaded)
        if isinstance(exc, self._failures[0]):
            return timeout_error(exc, where)
        return connection_error(exc, where)

    def _check(self, step: Callable[..., Any], *args: Any) -> Any:
        try:
            return step(*args)
        except CompressedBodyError as exc:
            where = during(self._response.num_bytes_downloaded)
            raise connection_error(exc, where) from None

    async def read_error_body(self, limit: int) -> bytes:
        """Up to ``limit`` bytes of the body (see :meth:`Response.read_error_body`)."""
        raw = bytearray()
        try:
            async for piece in self._response.aiter_raw():
                raw += piece if self._inflate is None else self._inflate(piece)
                if len(raw) >= limit:
                    break
        except (*self._failures, CompressedBodyError):
            pass  # the status is what matters; keep what arrived
        return bytes(raw[:limit])

    async def aclose(self) -> None:
        """Close the response (the connection is reused only after a full body)."""
        await self._response.aclose()


TRANSPORTS = ("aiohttp", "httpx")


def _let_go(close: Callable[[], Awaitable[object]], loop: asyncio.AbstractEventLoop | None) -> None:
    """Close a session or client of another event loop (H3), on that loop if it still
    runs. One whose loop ``asyncio.run()`` ended was closed then (``at_loop_end``); one
    of a loop closed by hand cannot be (its connections belong to that loop) and is
    left to the garbage collector."""
    if loop is not None and not loop.is_closed():
        asyncio.run_coroutine_threadsafe(_awaited(close), loop)


async def _awaited(close: Callable[[], Awaitable[object]]) -> None:
    await close()


def _is_httpx_client(http_client: object) -> bool:
    """Whether ``http_client`` is an ``httpx.AsyncClient``, without importing httpx."""
    module = sys.modules.get("httpx")  # a caller's client means httpx is imported
    return module is not None and isinstance(http_client, module.AsyncClient)


# H4: a caller's client or session is used as it is and left open
def make_transport(
    http_client: aiohttp.ClientSession | httpx.AsyncClient | Transport | None = None,
    transport: str | None = None,
) -> tuple[Transport, bool]:
    """The transport for ``GeminiClient(http_client=..., transport=...)`` and whether it owns it.

    ``http_client`` may be a :class:`Transport`, an ``aiohttp.ClientSession``
    or an ``httpx.AsyncClient`` (H4); otherwise ``transport`` names the stack
    to create (``"aiohttp"``, the default, or ``"httpx"``).
    """
    if http_client is not None:
        if transport is not None:
            raise ValueError(
                "pass either http_client= (your own client) or transport= (the stack "
                "GeminiClient creates), not both"
            )
        if isinstance(http_client, aiohttp.ClientSession):
            return AiohttpTransport(http_client), False
        if _is_httpx_client(http_client):
            return HttpxTransport(http_client), False  # type: ignore[arg-type]
        if isinstance(http_client, Transport):
            return http_client, False
        raise TypeError(
            f"http_client must be an aiohttp.ClientSession, an httpx.AsyncClient or a "
            f"fastagg.transport.Transport, not {type(http_client).__name__}"
        )
    # H8: aiohttp is the default
    if transport is None or transport == "aiohttp":
        return AiohttpTransport(), True
    if transport == "httpx":
        return HttpxTransport(), True
    if transport == "asyncio":
        raise ValueError(
            "transport='asyncio' (fastagg's own HTTP/1.1 client) was removed: aiohttp is the "
            "default now; leave transport= out, or pass 'aiohttp' or 'httpx'"
        )
    raise ValueError(f"unknown transport {transport!r}; use one of: {', '.join(TRANSPORTS)}")
