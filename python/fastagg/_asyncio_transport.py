"""``AsyncioTransport``: fastagg's own HTTP/1.1 client (H8), a pool of
:class:`fastagg._http1.Connection` protocols.

Errors, timeouts and the error body behave as on the other transports (H5):
the stack's exception names are the asyncio ones (``ConnectionRefusedError``,
``TimeoutError``, ``ssl.SSLError``) and this module's
``HttpProtocolError`` / ``IncompleteBody``.
"""

from __future__ import annotations

import asyncio
import ssl
import sys
import urllib.parse
import urllib.request
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import TYPE_CHECKING, Any

from . import _transport_shared as errors
from ._http1 import IDLE, Connection, Headers, HttpProtocolError
from ._loop_end import at_loop_end
from ._proxies import origin_of, proxy_for
from ._transport_shared import CONNECT_TIMEOUT, MAX_CONNECTIONS, POOL_TIMEOUT, WRITE_TIMEOUT
from ._version import __version__

if TYPE_CHECKING:
    from .transport import AiohttpTransport

__all__ = ["AsyncioResponse", "AsyncioTransport"]

MAX_IDLE = MAX_CONNECTIONS  # kept alive per origin: a whole burst, as aiohttp does
USER_AGENT = f"fastagg/{__version__}"

Origin = tuple[str, str, int]  # scheme, host, port
_FAILURES = (OSError, HttpProtocolError)  # ssl.SSLError and ConnectionError are OSErrors
# Before 3.11, asyncio.wait_for raises asyncio.TimeoutError, not the builtin.
_TIMEOUTS = (TimeoutError, asyncio.TimeoutError)


class AsyncioTransport:
    """Streams over fastagg's own HTTP/1.1 client on the running event loop.

    Each socket read is one ``data_received`` call that frames the body and
    wakes the reader; chunks are handed out whole, as aiohttp's ``readany()``
    does (H6). Up to 100 connections, HTTP/1.1 keep-alive (all of them may
    stay idle, so a burst of streams finds its connections again), the system's TLS trust store (or ``ssl_context``). It asks for
    ``Accept-Encoding: identity`` and still decodes gzip or deflate if a
    server sends them. A request whose URL the environment routes through a
    proxy (read once, when the transport is made, as the other transports
    do) is sent by an :class:`~fastagg.transport.AiohttpTransport` instead.
    """

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self._ssl = ssl_context
        self._idle: dict[Origin, list[Connection]] = {}
        self._open = 0  # connections that hold a slot (busy or idle)
        self._waiters: list[asyncio.Future[None]] = []
        self._routes: dict[str, tuple[Origin, bytes]] = {}
        self._headers_seen: tuple[dict[str, str], bytes] | None = None
        self._env_proxies = urllib.request.getproxies_environment()
        self._proxied: dict[str, bool] = {}
        self._via_proxy: AiohttpTransport | None = None
        self._closed = False
        # Per event loop with connections: what closes them when it ends (H8).
        self._loop_guards: dict[asyncio.AbstractEventLoop, AsyncGenerator[None, None]] = {}

    # --- Transport ----------------------------------------------------------------------------

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout: float | None
    ) -> Any:
        """POST ``body`` to ``url`` (see :meth:`fastagg.transport.Transport.post`)."""
        if self._env_proxies and self._uses_proxy(url):
            return await self._proxy_transport().post(url, body, headers, timeout)
        return await self._send(b"POST", url, body, headers, timeout)

    async def get(self, url: str, headers: Mapping[str, str], timeout: float | None) -> Any:
        """GET ``url`` (see :meth:`fastagg.transport.Transport.get`)."""
        if self._env_proxies and self._uses_proxy(url):
            return await self._proxy_transport().get(url, headers, timeout)
        return await self._send(b"GET", url, None, headers, timeout)

    async def aclose(self) -> None:
        """Close every idle connection; busy ones close when their response does."""
        self._closed = True
        for connections in self._idle.values():
            for conn in connections:
                conn.close()
        self._idle.clear()
        if self._via_proxy is not None:
            await self._via_proxy.aclose()

    # --- a request ----------------------------------------------------------------------------

    async def _send(
        self,
        method: bytes,
        url: str,
        body: bytes | None,
        headers: Mapping[str, str],
        timeout: float | None,
    ) -> AsyncioResponse:
        origin, head = self._route(url)
        request = b"".join((method, head, self._header_block(headers), _framing(body)))
        for attempt in (1, 2):
            try:
                # A kept-alive connection is taken without a coroutine of its own (H9).
                idle = self._idle_one(origin)
                conn, reused = (
                    (idle, True) if idle is not None else await self._acquire(origin, timeout)
                )
            except _TIMEOUTS as exc:
                raise errors.timeout_error(exc, errors.BEFORE) from exc
            except _FAILURES as exc:
                raise errors.connection_error(exc, errors.BEFORE) from exc
            try:
                conn.send(request)
                if conn.writing_paused:  # a large request: wait for the kernel to take it
                    await _bounded(conn.drain(), _cap(timeout, WRITE_TIMEOUT))
                while conn.response is None and conn.error is None and not conn.lost:
                    await conn.wait(timeout)
                if conn.response is None:
                    raise conn.error or ConnectionResetError("the server closed the connection")
                # H7: a head read together with a failure is still a response: its body
                # bytes come before the error, which the body raises in its turn.
            except _TIMEOUTS as exc:
                self._discard(conn)
                raise errors.timeout_error(exc, errors.BEFORE) from exc
            except _FAILURES as exc:
                self._discard(conn)
                # A kept-alive connection the server closed as the request left:
                # nothing of it was answered, so it is sent once more on a new one.
                if reused and not conn.got_bytes and attempt == 1:
                    continue
                raise errors.connection_error(exc, errors.BEFORE) from exc
            except BaseException:
                self._discard(conn)
                raise
            return AsyncioResponse(conn, self, origin, timeout)
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _route(self, url: str) -> tuple[Origin, bytes]:
        """The origin and the request line + Host header of ``url``, once per URL."""
        found = self._routes.get(url)
        if found is None:
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"not an http(s) URL: {url!r}")
            port = parts.port or (443 if parts.scheme == "https" else 80)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            netloc = parts.netloc.rpartition("@")[2]
            head = f" {target} HTTP/1.1\r\nhost: {netloc}\r\n".encode("ascii")
            found = ((parts.scheme, parts.hostname, port), head)
            if len(self._routes) < 1024:
                self._routes[url] = found
        return found

    def _header_block(self, headers: Mapping[str, str]) -> bytes:
        """The header lines of ``headers``, checked and encoded once while the
        caller sends the same headers (H9: a client's are the same each request)."""
        seen = self._headers_seen
        if seen is not None and seen[0] == headers:
            return seen[1]
        block = _header_lines(headers)
        self._headers_seen = (dict(headers), block)
        return block

    def _uses_proxy(self, url: str) -> bool:
        """Whether the environment's proxies route ``url``; looked up once per origin."""
        origin = origin_of(url)
        proxied = self._proxied.get(origin)
        if proxied is None:
            proxied = self._proxied[origin] = proxy_for(self._env_proxies, origin) is not None
        return proxied

    def _proxy_transport(self) -> AiohttpTransport:
        if self._via_proxy is None:
            from .transport import AiohttpTransport

            self._via_proxy = AiohttpTransport()
        return self._via_proxy

    # --- the pool -----------------------------------------------------------------------------

    async def _acquire(self, origin: Origin, timeout: float | None) -> tuple[Connection, bool]:
        """An idle connection to ``origin``, or a new one once a slot is free."""
        conn = self._idle_one(origin)
        if conn is not None:
            return conn, True
        if self._open >= MAX_CONNECTIONS and not self._close_an_idle():
            conn = await _bounded(self._turn(origin), _cap(timeout, POOL_TIMEOUT))
            if conn is not None:
                return conn, True
        self._open += 1
        try:
            conn = await _bounded(self._connect(origin), _cap(timeout, CONNECT_TIMEOUT))
        except BaseException:
            self._free_slot()
            raise
        return conn, False

    def _idle_one(self, origin: Origin) -> Connection | None:
        idle = self._idle.get(origin)
        loop = asyncio.get_running_loop()
        while idle:
            conn = idle.pop()
            conn.on_idle_lost = None
            if not conn.lost and conn.loop is loop:
                return conn
            # Closed meanwhile, or left from another event loop, which may have
            # ended (a client used under two asyncio.run() calls): not reusable.
            conn.close()
            self._free_slot()
        return None

    async def _turn(self, origin: Origin) -> Connection | None:
        """Wait for an idle connection to ``origin`` (returned) or a free slot (None)."""
        while True:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            conn = self._idle_one(origin)
            if conn is not None:
                return conn
            if self._open < MAX_CONNECTIONS or self._close_an_idle():
                return None

    def _wake(self) -> None:
        # Every waiter looks again (at most MAX_CONNECTIONS of them): a woken
        # waiter that was cancelled meanwhile cannot swallow the turn.
        if not self._waiters:
            return
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _connect(self, origin: Origin) -> Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        tls: ssl.SSLContext | None = None
        if scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            tls = self._ssl
        _, conn = await loop.create_connection(
            lambda: Connection(loop), host, port, ssl=tls, server_hostname=host if tls else None
        )
        if loop not in self._loop_guards:
            self._loop_guards[loop] = await at_loop_end(lambda: self._loop_ended(loop))
        return conn

    async def _loop_ended(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close the idle connections ``loop`` made: it is ending, and no other loop can
        use or close them (a client used under one ``asyncio.run()`` after another)."""
        self._loop_guards.pop(loop, None)
        for connections in self._idle.values():
            for conn in [c for c in connections if c.loop is loop]:
                connections.remove(conn)
                self._forget(conn)

    def _close_an_idle(self) -> bool:
        for connections in self._idle.values():
            if connections:
                self._forget(connections.pop(0))
                return True
        return False

    def _free_slot(self) -> None:
        self._open -= 1
        self._wake()

    def _forget(self, conn: Connection) -> None:
        conn.on_idle_lost = None
        conn.close()  # from whichever loop it belongs to
        self._free_slot()

    def _discard(self, conn: Connection) -> None:
        """Close a connection whose response is not (fully) read; free its slot."""
        conn.close()
        self._free_slot()

    def release(self, conn: Connection, origin: Origin) -> None:
        """Back to the pool after a whole body; closed otherwise."""
        idle = self._idle.setdefault(origin, [])
        if conn.reusable() and not self._closed and len(idle) < MAX_IDLE:
            conn.state = IDLE
            conn.on_idle_lost = lambda lost: self._lost_while_idle(lost, origin)
            idle.append(conn)
            self._wake()
            return
        self._discard(conn)

    def _lost_while_idle(self, conn: Connection, origin: Origin) -> None:
        idle = self._idle.get(origin)
        if idle and conn in idle:
            idle.remove(conn)
            conn.on_idle_lost = None
            self._free_slot()


def _cap(own: float | None, cap: float) -> float:
    return cap if own is None else max(min(own, cap), 0.001)


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


def _request(method: bytes, head: bytes, body: bytes | None, headers: Mapping[str, str]) -> bytes:
    """The whole request: request line and host (``head``), the header lines, the body."""
    return b"".join((method, head, _header_lines(headers), _framing(body)))


def _header_lines(headers: Mapping[str, str]) -> bytes:
    """The request's header lines (framing headers dropped, defaults added), checked."""
    lines = []
    seen = set()
    for name, value in headers.items():
        key = name.lower()
        if key in ("host", "content-length", "transfer-encoding", "connection"):
            continue  # framing is this transport's own
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
            raise ValueError(f"the header {name!r} has a line break or colon in its name or value")
        seen.add(key)
        lines.append(f"{name}: {value}\r\n".encode("latin-1"))
    if "accept-encoding" not in seen:
        lines.append(b"accept-encoding: identity\r\n")
    if "user-agent" not in seen:
        lines.append(f"user-agent: {USER_AGENT}\r\n".encode())
    return b"".join(lines)


def _framing(body: bytes | None) -> bytes:
    """The end of the head, then the body."""
    if body is None:
        return b"\r\n"
    return b"content-length: %d\r\n\r\n%s" % (len(body), body)


class AsyncioResponse:
    """The body of one response on an :class:`AsyncioTransport` connection (H6)."""

    __slots__ = (
        "_conn",
        "_origin",
        "_pool",
        "_released",
        "_timeout",
        "headers",
        "reason",
        "status",
    )

    def __init__(
        self, conn: Connection, pool: AsyncioTransport, origin: Origin, timeout: float | None
    ) -> None:
        assert conn.response is not None
        self.status, self.reason, headers = conn.response
        self.headers: Headers = headers
        self._conn = conn
        self._pool = pool
        self._origin = origin
        self._timeout = timeout
        self._released = False

    def __aiter__(self) -> AsyncioResponse:
        return self

    # H6: one frame per chunk; the bytes the protocol framed, whole
    async def __anext__(self) -> bytes:
        conn = self._conn
        while True:
            if conn.body:
                return conn.take()
            if conn.done:
                self._release()
                raise StopAsyncIteration
            if conn.error is not None:
                self._close()
                raise errors.connection_error(conn.error, errors.during(conn.received))
            try:
                await conn.wait(self._timeout)
            except _TIMEOUTS as exc:
                self._close()
                raise errors.timeout_error(exc, errors.during(conn.received)) from exc

    async def pump(self, feed: Callable[[bytes], object]) -> None:
        """Call ``feed`` with every piece of the body as it is framed, then return (H11).

        The pieces are what ``__anext__`` would yield, but ``feed`` is called
        inside the protocol's ``data_received``: no task is woken per socket
        read, only once at the end. What ``feed`` raises ends the body (the
        connection is closed) and is raised here as it is; transport failures
        and timeouts are raised as ``__anext__`` raises them, after every byte
        before them was fed (H7).
        """
        conn = self._conn
        try:
            if conn.body:  # framed with the head, before the pump started
                feed(conn.take())
            if not conn.done and conn.error is None and not conn.lost:
                await conn.pump(feed, self._timeout)
        except _TIMEOUTS as exc:
            self._close()
            raise errors.timeout_error(exc, errors.during(conn.received)) from exc
        except BaseException:
            self._close()
            raise
        if conn.sink_error is not None:
            self._close()
            raise conn.sink_error
        if conn.done:
            self._release()
            return
        self._close()
        raise errors.connection_error(
            conn.error or ConnectionResetError("the server closed the connection"),
            errors.during(conn.received),
        )

    async def read_error_body(self, limit: int) -> bytes:
        """Up to ``limit`` bytes of the body; a transport failure ends it quietly."""
        raw = bytearray()
        conn = self._conn
        try:
            while len(raw) < limit:
                if conn.body:
                    raw += conn.take()
                elif conn.done or conn.error is not None or conn.lost:
                    break
                else:
                    await conn.wait(self._timeout)
        except _TIMEOUTS:
            pass  # the status is what matters; keep what arrived
        return bytes(raw[:limit])

    async def aclose(self) -> None:
        """Back to the pool after a whole body; the connection is closed otherwise."""
        if self._conn.done and not self._conn.body:
            self._release()
        else:
            self._close()

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self._pool.release(self._conn, self._origin)

    def _close(self) -> None:
        if not self._released:
            self._released = True
            self._pool._discard(self._conn)
