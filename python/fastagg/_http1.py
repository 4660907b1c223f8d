"""fastagg's own HTTP/1.1 client: one ``asyncio.Protocol`` per connection (H8).

The body is framed (chunked, ``Content-Length`` or until the server closes)
inside ``data_received``, so a socket read costs one callback, a few slices
and one wake of the reader: no stream-reader object, no per-chunk
coroutine of the stack's own. ``benches/e2e.py`` measures it beside aiohttp
and httpx and beside a bare Protocol that parses nothing.

Parsing is strict (RFC 9112): a status line that is not ``HTTP/1.x``, a
header block over 64 KiB, a chunk-size line that is not hex, a chunk that
does not end in CRLF or a body cut short are errors that name what was
wrong; the bytes received before one are handed out first (H7).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import zlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

from ._fastagg import ChunkedDecoder

__all__ = ["Connection", "Headers", "HttpProtocolError", "IncompleteBody"]

MAX_HEAD = 64 * 1024  # status line and headers of one response
MAX_LINE = 4096  # one chunk-size or trailer line (the core's http_chunked::MAX_LINE)
HIGH_WATER = 1 << 20  # unread body bytes at which reading pauses
MAX_EXPANSION = 200  # decompressed ÷ compressed bytes of a gzip or deflate body, at most

# What the connection is reading (``Connection.state``).
IDLE, HEAD, CHUNKED, LENGTH, UNTIL_CLOSE, DONE = range(6)


class HttpProtocolError(Exception):
    """The server's bytes are not HTTP/1.1 (what was wrong, and where)."""


class IncompleteBody(ConnectionError):
    """The connection closed before the response body was complete."""


class Headers(Mapping[str, str]):
    """Response headers, looked up case-insensitively; a repeated header's
    values are joined with ``", "`` (RFC 9110 section 5.3)."""

    __slots__ = ("_items",)

    def __init__(self, items: dict[str, str]) -> None:
        self._items = items  # keys in lower case

    def __getitem__(self, key: str) -> str:
        return self._items[key.lower()]

    def get(self, key: str, default: Any = None) -> Any:
        return self._items.get(key.lower(), default)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


def parse_head(raw: bytes) -> tuple[int, str, Headers, bool]:
    """Status, reason, headers and "HTTP/1.1" of one response head (without its blank line)."""
    text = raw.decode("latin-1")  # one decode for the head; header bytes are latin-1
    first, _, rest = text.partition("\r\n")
    version, _, status = first.partition(" ")
    code, _, reason = status.partition(" ")
    if version not in ("HTTP/1.1", "HTTP/1.0") or len(code) != 3 or not code.isdigit():
        shown = first[:80].encode("latin-1")
        raise HttpProtocolError(
            f"the response does not start with an HTTP/1.x status line: {shown!r}"
        )
    items: dict[str, str] = {}
    for line in rest.split("\r\n") if rest else ():
        name, colon, value = line.partition(":")
        # No name, a space before the colon, or a line folded onto the previous one.
        if not colon or not name or name[0] in " \t" or name[-1] in " \t":
            raise HttpProtocolError(
                f"a response header line is malformed: {line[:80].encode('latin-1')!r}"
            )
        key = name.lower()
        value = value.strip(" \t")
        items[key] = f"{items[key]}, {value}" if key in items else value
    return int(code), reason, Headers(items), version == "HTTP/1.1"


Head = tuple[int, str, Headers, bool]  # status, reason, headers, "HTTP/1.1"


def read_head(head: bytearray, data: bytes) -> tuple[Head | None, bytes]:
    """The final response head that ``head`` (bytes kept from earlier reads) and
    ``data`` begin with, and the bytes after it; (None, b"") while it is incomplete,
    ``head`` then keeping what came. Interim ``1xx`` answers are skipped."""
    if not head:  # H9: the usual case, the whole head in the first read, parsed from it
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            found = parse_head(data[:end])
            if not 100 <= found[0] < 200:
                return found, data[end + 4 :]
    start = max(0, len(head) - 3)
    head += data
    while True:
        end = head.find(b"\r\n\r\n", start)
        if end < 0:
            if len(head) > MAX_HEAD:
                raise HttpProtocolError(
                    f"the response head is over {MAX_HEAD} bytes without its blank line"
                )
            return None, b""
        found = parse_head(bytes(head[:end]))
        rest = bytes(head[end + 4 :])
        del head[:]
        if not 100 <= found[0] < 200:
            return found, rest
        if found[0] == 101:
            raise HttpProtocolError("the server switched protocols (101); nothing asked it to")
        head += rest  # an interim response (100 Continue, 103): the real one follows
        start = 0


class Inflater:
    """Decodes a gzip or deflate body, never to more than MAX_EXPANSION times the
    compressed bytes so far (plus 1 MiB): a decompression bomb is an error, not a
    memory spike."""

    __slots__ = ("compressed", "decoder", "inflated")

    def __init__(self, coding: str) -> None:
        if coding in ("gzip", "x-gzip"):
            self.decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            self.decoder = zlib.decompressobj(zlib.MAX_WBITS)
        else:
            raise HttpProtocolError(
                f"the response has Content-Encoding {coding!r}; this transport decodes gzip "
                "and deflate (it asks for identity): use transport='aiohttp' for others"
            )
        self.compressed = self.inflated = 0  # bytes into and out of the decoder

    @classmethod
    def of(cls, headers: Mapping[str, str]) -> Inflater | None:
        """The decoder the response's Content-Encoding needs; None for identity."""
        coding = headers.get("content-encoding", "identity").strip().lower()
        return None if coding in ("", "identity") else cls(coding)

    def inflate(self, piece: bytes, received: int) -> bytes:
        """``piece`` decompressed (``received``: decoded body bytes before it)."""
        self.compressed += len(piece)
        room = MAX_EXPANSION * self.compressed + HIGH_WATER - self.inflated
        try:
            out: bytes = self.decoder.decompress(piece, max(room, 1))
        except zlib.error as exc:
            raise HttpProtocolError(f"the compressed body is corrupt: {exc}") from None
        self.inflated += len(out)
        if self.decoder.unconsumed_tail:
            raise HttpProtocolError(
                f"the compressed body expands more than {MAX_EXPANSION}x its size "
                f"(after {received + len(out)} bytes): refused as a decompression bomb"
            )
        return out

    def flush(self) -> bytes:
        out: bytes = self.decoder.flush()
        return out


def framing(status: int, items: Mapping[str, str], http11: bool) -> tuple[int, bool, int]:
    """How a response's body is framed (RFC 9112 section 6.3): the state to read it in,
    whether the connection may be kept alive, and a ``Content-Length`` (-1: none)."""
    keep_alive = http11 and "close" not in items.get("connection", "").lower()
    coding = items.get("transfer-encoding")
    if coding is not None:
        if coding.lower().rsplit(",", 1)[-1].strip() == "chunked":
            return CHUNKED, keep_alive, -1
        return UNTIL_CLOSE, False, -1
    length = items.get("content-length")
    if length is not None:
        values = {v.strip() for v in length.split(",")}
        value = values.pop()
        if values or not value.isdigit():
            raise HttpProtocolError(f"the response has an invalid Content-Length {length!r}")
        return LENGTH, keep_alive, int(value)
    if status in (204, 304):
        return LENGTH, keep_alive, 0
    return UNTIL_CLOSE, False, -1


class Connection(asyncio.Protocol):
    """One HTTP/1.1 connection, one response at a time.

    ``send()`` writes a request; ``data_received`` parses the head, then frames
    the body into ``body`` (a list of byte strings the reader takes whole)
    and wakes the one waiting reader. ``error`` is the stack's exception once
    the connection failed; ``done`` is set when the body ended cleanly.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.state = IDLE
        self.head = bytearray()
        self.chunks: ChunkedDecoder | None = None  # the core's decoder of a chunked body
        self.left = 0  # bytes still due of a Content-Length body
        self.body: list[bytes] = []
        self.buffered = 0  # decoded bytes in ``body``
        self.received = 0  # decoded bytes handed out or buffered
        self.response: tuple[int, str, Headers] | None = None
        self.decoder: Inflater | None = None
        self.keep_alive = False
        self.done = False
        self.error: BaseException | None = None
        self.lost = False
        self.reading_paused = False
        self.writing_paused = False
        self.waiter: asyncio.Future[None] | None = None
        self.drainer: asyncio.Future[None] | None = None
        self.got_bytes = False  # any byte of this response arrived
        self.on_idle_lost: Any = None  # the pool's callback for an idle connection that closed
        # H11: while a reader pumps the body, each framed piece goes to ``sink`` inside
        # data_received and the reader is woken only at the end (or a failure).
        self.sink: Callable[[bytes], object] | None = None
        self.sink_error: Exception | None = None  # what ``sink`` raised; it is then dropped
        self.stamp = 0.0  # loop time of the last read while a pump has a timeout
        self.stamping = False
        self.timer: asyncio.TimerHandle | None = None

    # --- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # H10: whatever the event loop made: uvloop's transports have asyncio's
        # methods but are not subclasses of its classes.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.got_bytes = True
        state = self.state
        try:
            if state == HEAD:
                data = self._head(data)
                state = self.state
            if not data:
                pass
            elif state == CHUNKED:
                self._chunked(data)
            elif state == LENGTH:
                self._length(data)
            elif state == UNTIL_CLOSE:
                self._put(data)
            else:
                # Bytes with no request to answer: the connection cannot be trusted again.
                self.keep_alive = False
        except HttpProtocolError as exc:
            self._fail(exc)
            if self.transport is not None:
                self.transport.close()
        if self.sink is not None and not self.done and self.error is None:
            if self.stamping:  # H11: the pump's idle timer reads it when it fires
                self.stamp = self.loop.time()
            return  # H11: mid-body, a pumped reader has nothing to wake for
        if self.sink_error is not None and self.transport is not None:
            self.transport.close()  # the rest of this body has nowhere to go
        if self.buffered > HIGH_WATER and not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def eof_received(self) -> bool:
        if self.state == UNTIL_CLOSE:
            self._finish()
        return False  # let the transport close

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.keep_alive = False
        if self.state == UNTIL_CLOSE and exc is None:
            self._finish()
        elif self.state != IDLE and not self.done and self.error is None:
            where = "before the response head ended" if self.state == HEAD else "mid-body"
            self._fail(exc or IncompleteBody(f"the server closed the connection {where}"))
        elif self.state == IDLE and self.on_idle_lost is not None:
            self.on_idle_lost(self)
        for future in (self.waiter, self.drainer):
            if future is not None and not future.done():
                future.set_result(None)

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self.drainer is not None and not self.drainer.done():
            self.drainer.set_result(None)

    # --- the request --------------------------------------------------------------------------

    def send(self, request: bytes) -> None:
        """Write one request and expect its response."""
        assert self.transport is not None and self.state == IDLE
        self.state = HEAD
        self.head.clear()
        self.chunks = None
        self.left = self.buffered = self.received = 0
        self.body = []
        self.response = self.decoder = None
        self.done = self.got_bytes = False
        self.sink = self.sink_error = None
        self.transport.write(request)

    async def drain(self) -> None:
        """Wait until the kernel took the request (the socket's write buffer drained)."""
        while self.writing_paused and not self.lost:
            self.drainer = self.loop.create_future()
            try:
                await self.drainer
            finally:
                self.drainer = None
        if self.error is not None:
            raise self.error

    async def wait(self, timeout: float | None) -> None:
        """Wait for the next bytes (or the end, or a failure); TimeoutError after ``timeout``."""
        waiter = self.waiter = self.loop.create_future()
        timer = None if timeout is None else self.loop.call_later(timeout, _expire, waiter)
        try:
            await waiter
        finally:
            self.waiter = None
            if timer is not None:
                timer.cancel()

    async def pump(self, sink: Callable[[bytes], object], timeout: float | None) -> None:
        """Hand every body piece still to come to ``sink`` as it is framed, inside
        ``data_received``; return at the end of the body, a failure, or when ``sink``
        raised (``sink_error``). TimeoutError when no bytes arrive for ``timeout`` (H11).
        """
        loop = self.loop
        waiter = self.waiter = loop.create_future()
        self.sink = sink
        if timeout is not None:
            self.stamping = True
            self.stamp = loop.time()
            self.timer = loop.call_at(self.stamp + timeout, self._idle, waiter, timeout)
        try:
            await waiter
        finally:
            self.waiter = self.sink = None
            self.stamping = False
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None

    def _idle(self, waiter: asyncio.Future[None], timeout: float) -> None:
        """The pump's one timer: expire when the last read is ``timeout`` old, else
        wait for the rest (a timer per read would cost what a wake does)."""
        due = self.stamp + timeout
        if self.loop.time() >= due:
            self.timer = None
            _expire(waiter)
        else:
            self.timer = self.loop.call_at(due, self._idle, waiter, timeout)

    def take(self) -> bytes:
        """Every body byte buffered, in one piece."""
        body = self.body
        self.body = []
        self.buffered = 0
        if self.reading_paused and self.transport is not None:
            self.reading_paused = False
            self.transport.resume_reading()
        return body[0] if len(body) == 1 else b"".join(body)

    def reusable(self) -> bool:
        """The response ended cleanly and the connection may carry another request."""
        return self.done and self.keep_alive and not self.lost and not self.body

    def close(self) -> None:
        """Close the connection from any event loop or thread (H8).

        Its own loop closes it; another loop still running is asked to; a loop
        that has ended can run nothing, so the TCP connection is shut down at
        once and its descriptor is released when the transport is collected.
        """
        self.keep_alive = False
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        loop = self.loop
        if loop.is_closed():
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):  # already reset by the peer
                    sock.shutdown(socket.SHUT_RDWR)
        elif loop is _running_loop():
            transport.close()
        else:
            loop.call_soon_threadsafe(transport.close)

    # --- framing ------------------------------------------------------------------------------

    def _head(self, data: bytes) -> bytes:
        found, rest = read_head(self.head, data)
        if found is not None:
            status, reason, headers, http11 = found
            self._frame(status, headers, http11)
            self.response = (status, reason, headers)
        return rest

    def _frame(self, status: int, headers: Headers, http11: bool) -> None:
        items = headers._items  # lower-case names: looked up as they are
        self.state, self.keep_alive, length = framing(status, items, http11)
        self.decoder = Inflater.of(items) if "content-encoding" in items else None
        if self.state == CHUNKED:
            self.chunks = ChunkedDecoder()
        elif self.state == LENGTH:
            self.left = length
            if length == 0:
                self._finish()

    def _put(self, piece: bytes) -> None:
        if self.decoder is not None:
            piece = self.decoder.inflate(piece, self.received)
            if not piece:
                return
        self._deliver(piece)

    def _deliver(self, piece: bytes) -> None:
        self.received += len(piece)
        sink = self.sink
        if sink is None:
            if self.sink_error is None:  # after a sink failed, the rest is dropped
                self.body.append(piece)
                self.buffered += len(piece)
            return
        try:
            sink(piece)
        except Exception as exc:  # H11: the reader's own error, raised to it by pump()
            self.sink = None
            self.sink_error = exc
            self.keep_alive = False

    def _finish(self) -> None:
        if self.decoder is not None:
            rest = self.decoder.flush()
            if rest:
                self._deliver(rest)
        self.state = DONE
        self.done = True

    def _length(self, data: bytes) -> None:
        left = self.left
        if len(data) < left:
            self.left = left - len(data)
            self._put(data)
            return
        self._put(data if len(data) == left else data[:left])
        if len(data) > left:
            self.keep_alive = False  # bytes beyond the body: not a connection to reuse
        self.left = 0
        self._finish()

    def _chunked(self, data: bytes) -> None:
        chunks = self.chunks
        assert chunks is not None
        payload = chunks.decode(data)  # the core's decoder: one pass, one copy
        if payload:
            self._put(payload)
        if chunks.done:
            self._finish()
            if chunks.beyond:
                self.keep_alive = False  # bytes beyond the body
        elif chunks.error is not None:
            kind, line = chunks.error
            raise HttpProtocolError(_chunk_error(kind, line, self.received))

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc
        self.keep_alive = False


def _chunk_error(kind: str, line: bytes, received: int) -> str:
    where = f"(after {received} bytes of the body)"
    if kind == "not-hex":
        return f"a chunk-size line is not hexadecimal: {line[:40]!r} {where}"
    if kind == "too-large":
        return f"a chunk size has more than 15 hex digits: {line[:40]!r} {where}"
    if kind == "line-too-long":
        return f"a chunk-size line is over {MAX_LINE} bytes {where}"
    return f"a chunk of the body does not end with CRLF {where}"


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError("no bytes arrived in time"))
