"""Lines and the bytes of one event: the pieces both body framings share (F2, F3, F9, F11).

The frames the framers hand to the aggregator are defined here too, so that
the SSE and the JSON-array framers (and ``_BodyFramer`` above them) share one
definition without an import cycle.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final, Literal, NamedTuple, Protocol

if TYPE_CHECKING:
    from ...diagnostics import Diagnostic

_BOM = b"\xef\xbb\xbf"
_CR, _LF = 0x0D, 0x0A
_BACKSLASH = 0x5C

_LINE_END = re.compile(rb"[\r\n]")
_NON_WS = re.compile(rb"[^ \t\r\n]")
_STRING_SPECIAL = re.compile(rb'["\\]')


# Frame kinds. "unterminated" and "incomplete" only come from close() (F14).
FrameKind = Literal["payload", "too-large", "warning", "unterminated", "incomplete", "unreadable"]
PAYLOAD: Final = "payload"
TOO_LARGE: Final = "too-large"
WARNING: Final = "warning"
UNTERMINATED: Final = "unterminated"
INCOMPLETE: Final = "incomplete"
# U4, U5: the body as fed cannot be read (its diagnostic in ``data``); the rest is ignored.
UNREADABLE: Final = "unreadable"


class Frame(NamedTuple):
    """What the framer hands to the aggregator."""

    kind: FrameKind
    offset: int
    data: bytes | Diagnostic | None = None  # payload bytes, or a framing diagnostic


class _BomStripper:
    """Drops a UTF-8 BOM at the very start of a stream, also when it arrives split."""

    def __init__(self) -> None:
        self._held = b""
        self._done = False

    def feed(self, data: bytes) -> tuple[bytes, int]:
        """Return the bytes to process and how many leading bytes were dropped."""
        if self._done:
            return data, 0
        held = self._held + data
        if len(held) < len(_BOM) and _BOM.startswith(held):
            self._held = held
            return b"", 0
        self._done, self._held = True, b""
        if held.startswith(_BOM):
            return held[len(_BOM) :], len(_BOM)
        return held, 0

    def close(self) -> bytes:
        """The held bytes of a stream that ended inside a would-be BOM."""
        held, self._held, self._done = self._held, b"", True
        return held


class _LineSplitter:
    """Splits at CRLF, LF or a lone CR (F2, F3), a CR|LF split over two chunks included."""

    def __init__(self) -> None:
        # The last line ended with CR: a LF right after it is part of the same line end.
        self._skip_lf = False

    def split(self, data: bytes) -> Iterator[tuple[int, int, bool]]:
        """Yield ``(start, end, ends_line)`` for each piece of a line in ``data``."""
        i, n = 0, len(data)
        if self._skip_lf and n:
            self._skip_lf = False
            if data[0] == _LF:
                i = 1
        while i < n:
            m = _LINE_END.search(data, i)
            if m is None:
                yield i, n, False
                return
            j = m.start()
            yield i, j, True
            i = j + 1
            if data[j] == _CR:
                if i == n:
                    self._skip_lf = True
                elif data[i] == _LF:
                    i += 1


class _Buffer:
    """The bytes of one event, kept only while they fit in ``limit`` (F11, F17)."""

    __slots__ = ("limit", "over", "pieces", "size")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pieces: list[bytes] = []
        self.size = 0
        self.over = False

    def add(self, piece: bytes) -> None:
        if piece:
            self.size += len(piece)
            if self.over:
                return
            if self.size > self.limit:
                self.over, self.pieces = True, []
            else:
                self.pieces.append(piece)

    def skip(self, count: int) -> None:
        """Count ``count`` bytes that were not kept because they cannot fit."""
        self.size += count
        if self.size > self.limit:
            self.over, self.pieces = True, []

    def value(self) -> bytes:
        return b"".join(self.pieces)


def _event_frame(offset: int, buf: _Buffer, *, pending: bool) -> Frame:
    """The frame of a finished event (``pending``: cut off by the end of the stream)."""
    if buf.over:
        return Frame(INCOMPLETE if pending else TOO_LARGE, offset)
    return Frame(UNTERMINATED if pending else PAYLOAD, offset, buf.value())


class _StringScan(Protocol):
    """What ``_string_step`` reads and writes: the string state of a block or an element."""

    in_string: bool
    escape: bool


def _string_step(scan: _StringScan, data: bytes, i: int) -> int:
    """Advance inside a JSON string from ``data[i]``; return where to go on.

    ``scan.in_string`` / ``scan.escape`` carry the state across chunks.
    """
    if scan.escape:
        scan.escape = False
        return i + 1
    m = _STRING_SPECIAL.search(data, i)
    if m is None:
        return len(data)
    if data[m.start()] == _BACKSLASH:
        scan.escape = True
    else:
        scan.in_string = False
    return m.end()


def _as_bytes(data: object) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"expected bytes, bytearray or memoryview, got {type(data).__name__}")


def _payload_bytes(payload: object) -> bytes:
    """A ``feed_event()`` payload as bytes: a str is UTF-8 (a lone surrogate stays, to be refused)."""
    return (
        payload.encode("utf-8", "surrogatepass") if isinstance(payload, str) else _as_bytes(payload)
    )
