"""Pure-Python twin of the Rust streaming core (``fastagg._fastagg``).

It follows ``spec/contract/aggregation.md`` and the developers' addendum
``spec/aggregation.md`` to the letter, warning texts included: it is the
oracle of the differential tests and the baseline of the benchmarks. It is
written for clarity first, but every step is linear in its input (no buffer is
re-scanned or re-joined per chunk).

The module reads top to bottom in four layers:

1. framing: raw body bytes -> frames (event payloads, framing warnings), F1-F15;
2. payload validation: size -> UTF-8 -> JSON -> object, F8/F10;
3. the event / candidate / part / call state machine, E, P and C rules;
4. rendering results (``AggregatedResponse``, ``Candidate``), D2/D3.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from ._chunks import chunk_to_mapping
from ._genai_convert import to_genai
from .errors import AggregatorClosed, MalformedStreamError

if TYPE_CHECKING:
    from google.genai import types as genai_types

__all__ = [
    "AggregatedResponse",
    "ArgDelta",
    "CallEnd",
    "CallStart",
    "Candidate",
    "Finish",
    "SseDecoder",
    "SseEvent",
    "StreamAggregator",
    "StreamError",
    "TextDelta",
]


# --------------------------------------------------------------------------
# Public value types: deltas (what feed() returns) and SSE events
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A non-empty text fragment of part ``index`` of candidate ``candidate``."""

    candidate: int
    index: int
    text: str
    thought: bool


@dataclass(frozen=True, slots=True)
class CallStart:
    """A function call was first seen; ``name`` is None for a streamed call not yet named."""

    candidate: int
    index: int
    id: str | None
    name: str | None


@dataclass(frozen=True, slots=True)
class ArgDelta:
    """A streamed argument was applied: a string fragment, a number, a bool or None."""

    candidate: int
    index: int
    json_path: str
    value: Any


@dataclass(frozen=True, slots=True)
class CallEnd:
    """A function call is complete; ``call`` is ``{"id", "name", "args"}``."""

    candidate: int
    index: int
    call: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Finish:
    """A finish reason arrived for candidate ``candidate``."""

    candidate: int
    reason: str


@dataclass(frozen=True, slots=True)
class StreamError:
    """An in-stream error object (E1), verbatim."""

    error: Any


Delta = TextDelta | CallStart | ArgDelta | CallEnd | Finish | StreamError


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One event of a WHATWG server-sent-events stream (F15)."""

    event: str
    data: str
    id: str | None
    retry: int | None


# --------------------------------------------------------------------------
# Layer 1: framing (bytes -> frames)
# --------------------------------------------------------------------------

_BOM = b"\xef\xbb\xbf"
_CR, _LF = 0x0D, 0x0A
_QUOTE, _BACKSLASH, _COMMA = 0x22, 0x5C, 0x2C
_OPEN_BRACE, _OPEN_BRACKET = 0x7B, 0x5B
_CLOSERS = b"]}"
_WHITESPACE = b" \t\r\n"
_DONE = b"[DONE]"

_LINE_END = re.compile(rb"[\r\n]")
_NON_WS = re.compile(rb"[^ \t\r\n]")
_STRING_SPECIAL = re.compile(rb'["\\]')
_BLOCK_SPECIAL = re.compile(rb'[{}"]')
_NESTED_SPECIAL = re.compile(rb'[\[\]{}"]')
# At the top level of an array element: what changes state, or whitespace
# (kept aside until we know whether it is inside the element or trailing).
_ELEMENT_SPECIAL = re.compile(rb'[\[\]{}",]|[ \t\r\n]+')

# Frame kinds. "unterminated" and "incomplete" only come from close() (F14).
PAYLOAD = "payload"
TOO_LARGE = "too-large"
WARNING = "warning"
UNTERMINATED = "unterminated"
INCOMPLETE = "incomplete"


class Frame(NamedTuple):
    """What the framer hands to the aggregator."""

    kind: str
    offset: int
    data: bytes | str | None = None  # payload bytes, or the text of a warning


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
    """The bytes of one event, kept only while they fit in ``limit`` (F11)."""

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


def _string_step(scan: _Block | _Element, data: bytes, i: int) -> int:
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


class _Block:
    """A bare JSON block (F4, F13): lines collected until braces balance outside strings."""

    __slots__ = ("buf", "closed", "depth", "escape", "in_string", "offset")

    def __init__(self, offset: int, limit: int) -> None:
        self.offset = offset
        self.buf = _Buffer(limit)
        self.depth = 0
        self.in_string = False
        self.escape = False
        self.closed = False  # the count returned to zero: the block ends with this line

    def feed(self, seg: bytes) -> None:
        self.buf.add(seg)
        if not self.closed:
            self._scan(seg)

    def _scan(self, seg: bytes) -> None:
        i, n = 0, len(seg)
        while i < n:
            if self.in_string:
                i = _string_step(self, seg, i)
                continue
            m = _BLOCK_SPECIAL.search(seg, i)
            if m is None:
                return
            i = m.end()
            c = seg[m.start()]
            if c == _QUOTE:
                self.in_string = True
            elif c == _OPEN_BRACE:
                self.depth += 1
            else:
                self.depth -= 1
                if self.depth == 0:
                    self.closed = True
                    return


# Kinds of SSE line, decided from its first bytes.
_LINE_UNKNOWN, _LINE_DATA, _LINE_BLOCK, _LINE_IGNORED = range(4)


class _SseFramer:
    """SSE framing for the aggregator (F2-F6, F9, F11, F13, F14).

    Lines are handled as they stream in: a ``data`` line's value goes straight
    into the event buffer, a bare block line into the block, any other line is
    never kept. Only the first six bytes of a line are held to classify it.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._lines = _LineSplitter()
        self._kind = _LINE_UNKNOWN
        self._in_line = False  # bytes of the current line have been seen
        self._line_offset = 0
        self._head = b""  # first bytes of a line that may still become "data:"
        self._event_offset: int | None = None  # offset of the event's first data line
        self._data = _Buffer(limit)
        self._block: _Block | None = None

    def feed(self, data: bytes, base: int, out: list[Frame]) -> None:
        for start, end, ends_line in self._lines.split(data):
            if end > start:
                self._line_bytes(data[start:end], base + start)
            if ends_line:
                self._end_line(out)

    def close(self, out: list[Frame]) -> None:
        if self._in_line:  # F14: a final line without a line end is still a line
            self._end_line(out)
        if self._block is not None:
            out.append(_event_frame(self._block.offset, self._block.buf, pending=True))
            self._block = None
        elif self._event_offset is not None:
            frame = self._take_event(pending=True)
            if frame is not None:
                out.append(frame)

    def _line_bytes(self, seg: bytes, seg_offset: int) -> None:
        if not self._in_line:
            self._in_line = True
            self._line_offset = seg_offset
        if self._kind == _LINE_UNKNOWN:
            self._classify(seg, ended=False)
        elif self._kind == _LINE_DATA:
            self._data.add(seg)
        elif self._kind == _LINE_BLOCK:
            assert self._block is not None
            self._block.feed(seg)

    def _classify(self, seg: bytes, *, ended: bool) -> None:
        """Decide the kind of the current line and route its first bytes."""
        if self._block is not None:
            self._kind = _LINE_BLOCK
            self._block.feed(b"\n")  # the lines of a block are joined with "\n"
            self._block.feed(seg)
            return
        take = 6 - len(self._head)
        head, rest = self._head + seg[:take], seg[take:]
        self._head = b""
        first = head[:1]
        if first == b":":
            self._kind = _LINE_IGNORED
        elif first == b"{" and self._event_offset is None:
            self._kind = _LINE_BLOCK
            self._block = _Block(self._line_offset, self._limit)
            self._block.feed(head)
            self._block.feed(rest)
        elif head.startswith(b"data:"):
            if len(head) < 6 and not ended:
                self._head = head  # is the next byte the optional space?
                return
            self._start_data_line()
            self._data.add(head[6:] if head[5:6] == b" " else head[5:])
            self._data.add(rest)
        elif head == b"data" and ended:
            self._start_data_line()
        elif b"data:".startswith(head) and not ended:
            self._head = head
        else:
            self._kind = _LINE_IGNORED

    def _start_data_line(self) -> None:
        self._kind = _LINE_DATA
        if self._event_offset is None:
            self._event_offset = self._line_offset
        else:
            self._data.add(b"\n")

    def _end_line(self, out: list[Frame]) -> None:
        if self._kind == _LINE_UNKNOWN:
            if not self._in_line and self._block is None:
                frame = self._take_event(pending=False)  # a blank line dispatches
                if frame is not None:
                    out.append(frame)
                return
            self._classify(b"", ended=True)
        if self._kind == _LINE_BLOCK:
            assert self._block is not None
            if self._block.closed:
                out.append(_event_frame(self._block.offset, self._block.buf, pending=False))
                self._block = None
        self._kind = _LINE_UNKNOWN
        self._in_line = False
        self._head = b""

    def _take_event(self, *, pending: bool) -> Frame | None:
        offset, buf = self._event_offset, self._data
        self._event_offset, self._data = None, _Buffer(self._limit)
        if offset is None:
            return None
        frame = _event_frame(offset, buf, pending=pending)
        data = frame.data
        if isinstance(data, bytes) and (data == _DONE or not _NON_WS.search(data)):
            return None  # F5 [DONE], F9 empty or whitespace-only data: not a payload
        return frame


class _Element:
    """One element of the JSON-array framing (F1, F12) being collected."""

    __slots__ = (
        "buf",
        "container",
        "depth",
        "escape",
        "in_string",
        "offset",
        "ws",
        "ws_size",
    )

    def __init__(self, offset: int, limit: int, container: bool) -> None:
        self.offset = offset
        self.container = container  # began with "{" or "[": complete when that closes
        self.buf = _Buffer(limit)
        self.depth = 0  # nesting inside the element
        self.in_string = False
        self.escape = False
        # Whitespace at the element's top level, not yet known to be inside it.
        self.ws: list[bytes] = []
        self.ws_size = 0

    def add(self, seg: bytes) -> None:
        if not seg:
            return
        if self.ws_size:  # the whitespace was inside the element after all
            if self.buf.size + self.ws_size > self.buf.limit:
                self.buf.skip(self.ws_size)
            else:
                for piece in self.ws:
                    self.buf.add(piece)
            self.ws, self.ws_size = [], 0
        self.buf.add(seg)

    def add_whitespace(self, seg: bytes) -> None:
        self.ws_size += len(seg)
        if self.buf.size + self.ws_size <= self.buf.limit:
            self.ws.append(seg)
        else:  # too many to fit if something follows: count only
            self.ws = []


class _ArrayFramer:
    """The JSON-array framing sent without ``alt=sse`` (F1, F12).

    An element that begins with ``{`` or ``[`` is complete (and dispatched at
    once) when that bracket closes; any other element ends at the next
    top-level comma. A ``]`` or ``}`` at the array's top level ends the array.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._opened = False  # the leading "[" was consumed
        self._ended = False  # the closing "]" was seen
        self._warned = False
        self._elem: _Element | None = None

    def feed(self, data: bytes, base: int, out: list[Frame]) -> None:
        i, n = 0, len(data)
        while i < n:
            if self._ended:
                m = _NON_WS.search(data, i)
                if m is not None and not self._warned:
                    self._warned = True
                    out.append(
                        Frame(
                            WARNING,
                            base + m.start(),
                            f"F1: data after the end of the JSON array at byte "
                            f"{base + m.start()} was ignored",
                        )
                    )
                return
            if self._elem is not None:
                i = self._scan_element(data, i, out)
                continue
            m = _NON_WS.search(data, i)
            if m is None:
                return
            j = m.start()
            c = data[j]
            i = j + 1
            if not self._opened:
                self._opened = True  # the mode check guarantees this byte is "["
            elif c == _COMMA:
                pass  # a separator, or an empty element: ignored
            elif c in _CLOSERS:
                self._ended = True
            else:
                self._elem = _Element(base + j, self._limit, c in b"[{")
                i = j

    def close(self, out: list[Frame]) -> None:
        if self._elem is not None:
            out.append(_event_frame(self._elem.offset, self._elem.buf, pending=True))
            self._elem = None

    def _scan_element(self, data: bytes, i: int, out: list[Frame]) -> int:
        """Consume element bytes from ``i``; return where scanning stopped."""
        e = self._elem
        assert e is not None
        n = len(data)
        start = i  # first byte not yet added to the element
        while i < n:
            if e.in_string:
                i = _string_step(e, data, i)
            elif e.depth > 0:
                m = _NESTED_SPECIAL.search(data, i)
                if m is None:
                    i = n
                    break
                i = m.end()
                c = data[m.start()]
                if c == _QUOTE:
                    e.in_string = True
                elif c in b"[{":
                    e.depth += 1
                else:
                    e.depth -= 1
                    if e.depth == 0 and e.container:
                        e.add(data[start:i])
                        self._finish_element(out)
                        return i
            else:
                m = _ELEMENT_SPECIAL.search(data, i)
                if m is None:
                    i = n
                    break
                j = m.start()
                c = data[j]
                if c in _WHITESPACE:
                    e.add(data[start:j])
                    e.add_whitespace(data[j : m.end()])
                    i = start = m.end()
                elif c == _COMMA or c in _CLOSERS:
                    e.add(data[start:j])
                    self._finish_element(out)
                    self._ended = c != _COMMA
                    return j + 1
                else:
                    i = m.end()
                    if c == _QUOTE:
                        e.in_string = True
                    else:
                        e.depth += 1
        e.add(data[start:i])
        return i

    def _finish_element(self, out: list[Frame]) -> None:
        assert self._elem is not None
        out.append(_event_frame(self._elem.offset, self._elem.buf, pending=False))
        self._elem = None


class _BodyFramer:
    """Raw body bytes -> frames: BOM, framing detection (F1), offsets (F9)."""

    def __init__(self, limit: int) -> None:
        self._bom = _BomStripper()
        self._pos = 0  # stream offset of the next byte handed to a framer
        self._mode: str | None = None  # None until the first non-whitespace byte
        self._sse = _SseFramer(limit)
        self._array = _ArrayFramer(limit)

    def feed(self, data: bytes, out: list[Frame]) -> None:
        data, dropped = self._bom.feed(data)
        self._pos += dropped
        self._feed(data, out)

    def close(self, out: list[Frame]) -> None:
        self._feed(self._bom.close(), out)
        if self._mode == "array":
            self._array.close(out)
        else:
            self._sse.close(out)

    def _feed(self, data: bytes, out: list[Frame]) -> None:
        if not data:
            return
        base = self._pos
        self._pos += len(data)
        if self._mode is None:
            m = _NON_WS.search(data)
            if m is None:
                # Whitespace means nothing to either framing; the SSE framer
                # sees it so that its line state is right if SSE it is.
                self._sse.feed(data, base, out)
                return
            if data[m.start()] == _OPEN_BRACKET:
                self._mode = "array"
                self._array.feed(data[m.start() :], base + m.start(), out)
                return
            self._mode = "sse"
        if self._mode == "array":
            self._array.feed(data, base, out)
        else:
            self._sse.feed(data, base, out)


# --------------------------------------------------------------------------
# The generic WHATWG decoder (F15)
# --------------------------------------------------------------------------


def _is_retry_value(value: str) -> bool:
    """All ASCII digits, and small enough for a 64-bit unsigned integer (as in Rust)."""
    return value.isascii() and value.isdigit() and len(value) <= 20 and int(value) < 2**64


class SseDecoder:
    """A generic WHATWG server-sent-events decoder (any provider).

    ``feed()`` returns the events completed by the bytes given; ``close()``
    processes a final unterminated line and dispatches a pending event whose
    data buffer is not empty (an extension: WHATWG discards it). Invalid UTF-8
    becomes U+FFFD. No size limit applies.
    """

    def __init__(self) -> None:
        self._bom = _BomStripper()
        self._lines = _LineSplitter()
        self._line: list[bytes] = []
        self._data: list[str] = []
        self._event_type = ""
        self._last_id: str | None = None
        self._retry: int | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> list[SseEvent]:
        """Decode a chunk of the stream; return the events it completed."""
        out: list[SseEvent] = []
        self._feed(self._bom.feed(_as_bytes(data))[0], out)
        return out

    def close(self) -> list[SseEvent]:
        """End of stream: return the events still pending."""
        out: list[SseEvent] = []
        self._feed(self._bom.close(), out)
        if self._line:
            self._process_line(out)
        if self._data:
            self._dispatch(out)
        return out

    def _feed(self, data: bytes, out: list[SseEvent]) -> None:
        for start, end, ends_line in self._lines.split(data):
            if end > start:
                self._line.append(data[start:end])
            if ends_line:
                self._process_line(out)

    def _process_line(self, out: list[SseEvent]) -> None:
        line = b"".join(self._line).decode("utf-8", "replace")
        self._line = []
        if not line:
            self._dispatch(out)
            return
        if line[0] == ":":
            return
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event_type = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        elif name == "retry" and _is_retry_value(value):
            self._retry = int(value)

    def _dispatch(self, out: list[SseEvent]) -> None:
        if self._data:
            event_type = self._event_type or "message"
            out.append(SseEvent(event_type, "\n".join(self._data), self._last_id, self._retry))
        self._data = []
        self._event_type = ""
        self._retry = None


# --------------------------------------------------------------------------
# Layer 2: payload validation (F8, F10)
# --------------------------------------------------------------------------

INVALID_JSON = "invalid-json"
INVALID_UTF8 = "invalid-utf8"
EVENT_TOO_LARGE = "event-too-large"
_NOT_AN_OBJECT = "not-an-object"  # reported with kind "invalid-json"


def _parse_payload(payload: bytes, limit: int) -> tuple[str | None, Any]:
    """``(None, event)`` for a usable payload, else ``(problem, None)``.

    The checks run in the order of F10: size, UTF-8, JSON, object. orjson
    only accepts valid UTF-8, so UTF-8 is checked only when it refuses.
    """
    if len(payload) > limit:
        return EVENT_TOO_LARGE, None
    try:
        value = orjson.loads(payload)
    except orjson.JSONDecodeError:
        try:
            payload.decode("utf-8")
        except UnicodeDecodeError:
            return INVALID_UTF8, None
        return INVALID_JSON, None
    if not isinstance(value, dict):
        return _NOT_AN_OBJECT, None
    return None, value


def _malformed(problem: str, index: int, offset: int, limit: int) -> MalformedStreamError:
    """The error of F10 with its message, word for word."""
    where = f"event {index} at byte {offset}"
    if problem == INVALID_UTF8:
        message = f"{where} is not valid UTF-8; it was skipped"
    elif problem == EVENT_TOO_LARGE:
        message = (
            f"{where} is larger than max_event_bytes ({limit}); it was skipped "
            "(raise max_event_bytes if such events are expected)"
        )
    elif problem == _NOT_AN_OBJECT:
        message = f"{where} is JSON but not an object; it was skipped"
    else:
        message = (
            f"{where} is not valid JSON; it was skipped "
            "(is this the body of a streamGenerateContent response?)"
        )
    kind = INVALID_JSON if problem == _NOT_AN_OBJECT else problem
    return MalformedStreamError(message, kind, offset, index)


def _as_bytes(data: object) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"expected bytes, bytearray or memoryview, got {type(data).__name__}")


# --------------------------------------------------------------------------
# Layer 3: the state machine (E, P and C rules)
# --------------------------------------------------------------------------


def _q(s: str) -> str:
    """``q(s)``: the JSON string literal of ``s`` without ASCII escaping."""
    return json.dumps(s, ensure_ascii=False)


def _cj(value: Any) -> str:
    """``cj(v)``: compact JSON without ASCII escaping, floats as ``repr``."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- jsonPath (C5) -----------------------------------------------------------

_SYNTAX = "unsupported jsonPath syntax"
_TOO_DEEP = "jsonPath deeper than 1024 segments"
_CONFLICT = "type conflict with the existing value"
_MAX_SEGMENTS = 1024  # the JSON nesting limit (F10): streamed args as deep as whole ones
_NAME = re.compile(r"[^.\[\]]+")
_INDEX = re.compile(r"0|[1-9][0-9]*")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_ESCAPES = {
    "\\": "\\",
    "'": "'",
    '"': '"',
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}

Segment = str | int


@lru_cache(maxsize=4096)
def parse_json_path(path: str, max_index: int) -> tuple[Segment, ...] | str:
    """The segments of ``path`` (keys are ``str``, indices ``int``), or why it is refused.

    Problems are reported in the order they appear in the path; the depth limit
    is hit when the 1025th segment has been read.
    """
    if path[:1] != "$":
        return _SYNTAX
    segments: list[Segment] = []
    i, n = 1, len(path)
    while i < n:
        if path[i] == ".":
            m = _NAME.match(path, i + 1)
            if m is None:
                return _SYNTAX
            segments.append(m.group())
            i = m.end()
        elif path[i] == "[" and path[i + 1 : i + 2] in ("'", '"'):
            key, i = _parse_quoted(path, i + 1)
            if key is None:
                return _SYNTAX
            segments.append(key)
        elif path[i] == "[":
            m = _INDEX.match(path, i + 1)
            if m is None or path[m.end() : m.end() + 1] != "]":
                return _SYNTAX
            digits = m.group()
            if len(digits) > len(str(max_index)) or int(digits) > max_index:
                return f"array index above max_array_index ({max_index})"
            segments.append(int(digits))
            i = m.end() + 1
        else:
            return _SYNTAX
        if len(segments) > _MAX_SEGMENTS:
            return _TOO_DEEP
    if not segments:
        return _SYNTAX  # a bare "$" names no argument
    return tuple(segments)


def _parse_quoted(path: str, i: int) -> tuple[str | None, int]:
    """Read ``'key']`` or ``"key"]`` starting at the quote ``path[i]``."""
    quote, n = path[i], len(path)
    chars: list[str] = []
    i += 1
    while i < n and path[i] != quote:
        c = path[i]
        if c != "\\":
            chars.append(c)
            i += 1
            continue
        e = path[i + 1 : i + 2]
        if e in _ESCAPES:
            chars.append(_ESCAPES[e])
            i += 2
            continue
        if e != "u" or not _HEX4.fullmatch(path, i + 2, i + 6):
            return None, i
        code = int(path[i + 2 : i + 6], 16)
        i += 6
        if 0xD800 <= code < 0xDC00:  # a high surrogate needs its low half
            if path[i : i + 2] != "\\u" or not _HEX4.fullmatch(path, i + 2, i + 6):
                return None, i
            low = int(path[i + 2 : i + 6], 16)
            if not 0xDC00 <= low < 0xE000:
                return None, i
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
            i += 6
        elif 0xDC00 <= code < 0xE000:
            return None, i
        chars.append(chr(code))
    if path[i + 1 : i + 2] != "]":  # also: no closing quote
        return None, i
    return "".join(chars), i + 2


# --- argument values ---------------------------------------------------------


class _StrBuf:
    """A string argument growing by ``stringValue`` fragments, joined when rendered."""

    __slots__ = ("fragments",)

    def __init__(self, fragments: list[str]) -> None:
        self.fragments = fragments

    def value(self) -> str:
        if len(self.fragments) > 1:
            self.fragments = ["".join(self.fragments)]
        return self.fragments[0]


_MISSING = object()


def _holds_value(args: dict[str, Any], path: tuple[Segment, ...]) -> bool:
    """Whether ``path`` resolves to an existing value (null included) (C10)."""
    node: Any = args
    for seg in path:
        if isinstance(seg, int):
            if not isinstance(node, list) or seg >= len(node):
                return False
            node = node[seg]
        else:
            if not isinstance(node, dict) or seg not in node:
                return False
            node = node[seg]
    return True


_PAD_SLACK = 8  # C16: how far past the end of an array an index may point


def _write_problem(args: dict[str, Any], path: tuple[Segment, ...]) -> str | None:
    """The first problem of writing at ``path``, left to right (C9, C16), or None.

    Along the existing values: an object is needed before a key, an array
    before an index; every index may be at most ``_PAD_SLACK`` past the end of
    its array (an array still to be created is empty).
    """
    node: Any = args
    for seg in path:
        if node is None or node is _MISSING:
            if isinstance(seg, int) and seg > _PAD_SLACK:
                return _too_far(seg, 0)
            continue
        if isinstance(seg, int):
            if not isinstance(node, list):
                return _CONFLICT
            if seg > len(node) + _PAD_SLACK:
                return _too_far(seg, len(node))
            node = node[seg] if seg < len(node) else _MISSING
        else:
            if not isinstance(node, dict):
                return _CONFLICT
            node = node.get(seg, _MISSING)
    return None


def _too_far(index: int, length: int) -> str:
    return (
        f"array index {index} is more than {_PAD_SLACK} past the end of an array of {length} (C16)"
    )


def _assign(
    args: dict[str, Any], path: tuple[Segment, ...], value: Any, *, append: bool
) -> str | None:
    """Apply one partial arg (C4, C9); the reason when it is refused (nothing changed then)."""
    problem = _write_problem(args, path)
    if problem is not None:
        return problem
    node: Any = args
    last = len(path) - 1
    for depth, seg in enumerate(path):
        if isinstance(seg, int):
            if seg >= len(node):
                node.extend([None] * (seg + 1 - len(node)))
            current = node[seg]
        else:
            current = node.get(seg, _MISSING)
        if depth == last:
            break
        if current is None or current is _MISSING:
            current = [] if isinstance(path[depth + 1], int) else {}
            node[seg] = current
        node = current
    seg = path[last]
    if append and isinstance(current, _StrBuf):
        current.fragments.append(value)
    elif append and isinstance(current, str):
        node[seg] = _StrBuf([current, value])
    else:
        node[seg] = value
    return None


def _render_json(value: Any) -> Any:
    """A fresh copy of a JSON value; growing strings become plain strings.

    Iterative: streamed args may nest 1024 levels (C9), deeper than Python's
    recursion limit.
    """
    if isinstance(value, _StrBuf):
        return value.value()
    if not isinstance(value, (dict, list)):
        return value
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            if isinstance(item, (dict, list)):
                copy: Any = {} if isinstance(item, dict) else []
                stack.append((item, copy))
            elif isinstance(item, _StrBuf):
                copy = item.value()
            else:
                copy = item
            if isinstance(target, dict):
                target[key] = copy
            else:
                target.append(copy)
    return root


def _json_identity(value: Any) -> str:
    """Equal for equal JSON values: tells 1, 1.0 and true apart (unlike ``==``),
    ignores key order."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _same_json(a: Any, b: Any) -> bool:
    if type(a) is str and type(b) is str:
        return a == b
    return _json_identity(a) == _json_identity(b)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# --- parts of a candidate ----------------------------------------------------


class _TextRun:
    """Consecutive plain text parts with one thought flag (P1)."""

    __slots__ = ("fragments", "thought")

    def __init__(self, thought: bool) -> None:
        self.thought = thought
        self.fragments: list[str] = []

    def text(self) -> str:
        if len(self.fragments) > 1:
            self.fragments = ["".join(self.fragments)]
        return self.fragments[0]


class _KeptPart:
    """A part kept as received (P3, P4, complete calls)."""

    __slots__ = ("is_call", "part", "text", "thought")

    def __init__(
        self,
        part: dict[str, Any],
        text: str | None = None,
        thought: bool = False,
        is_call: bool = False,
    ) -> None:
        self.part = part
        self.text = text  # the text a P3 part adds to text / thought_text
        self.thought = thought
        self.is_call = is_call


class _StreamedCall:
    """A function call assembled from streamed chunks (C2-C12)."""

    __slots__ = ("args", "finished", "id", "name", "signature", "slot", "touched")

    def __init__(self, slot: int, call_id: str | None, name: str | None) -> None:
        self.slot = slot
        self.finished = False  # C13: closed by the model, not flushed by close()
        self.id = call_id
        self.name = name
        self.args: dict[str, Any] = {}
        self.signature: Any = None  # any JSON value but null (P5: kept as received)
        self.touched = 0  # clock of the last chunk routed here


_Slot = _TextRun | _KeptPart | _StreamedCall


class _CandidateState:
    __slots__ = (
        "citation_seen",
        "finish_message",
        "finish_reason",
        "index",
        "metadata",
        "open_calls",
        "slots",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.slots: list[_Slot] = []
        self.open_calls: list[_StreamedCall] = []
        self.finish_reason: str | None = None
        self.finish_message: str | None = None
        self.metadata: dict[str, Any] = {}
        self.citation_seen: dict[str, set[str]] = {}


_MAX_OPEN_CALLS = 64  # C14: streamed calls open at once per candidate
_CANDIDATE_OWN_KEYS = frozenset({"content", "finishReason", "finishMessage", "index"})
_CITATION_LISTS = ("citations", "citationSources")
_VALUE_KEYS = ("stringValue", "numberValue", "boolValue", "nullValue")


class _TurnState:
    """Everything aggregated so far from the event payloads."""

    def __init__(self, max_array_index: int, warnings: _Warnings) -> None:
        self.max_array_index = max_array_index
        self.warnings = warnings
        self.candidates: dict[int, _CandidateState] = {}
        self.usage: dict[str, Any] | None = None
        self.model_version: Any = None
        self.response_id: Any = None
        self.create_time: Any = None
        self.prompt_feedback: Any = None
        self.error: Any = None
        self._clock = itertools.count(1)

    # --- events (E1-E9) ---

    def apply(self, event: dict[str, Any], i: int, deltas: list[Delta] | None) -> None:
        """Fold event payload number ``i`` into the state."""
        error = event.get("error")
        if error is not None:  # E1, E8
            self.error = error
            if deltas is not None:
                deltas.append(StreamError(_render_json(error)))
            return
        candidates = event.get("candidates")
        if isinstance(candidates, list):
            for j, candidate in enumerate(candidates):
                self._candidate(candidate, i, j, deltas)
        elif candidates is not None:
            self._shape(i, "candidates", "a list")
        usage = event.get("usageMetadata")
        if isinstance(usage, dict):  # E3: running totals, merged key by key
            if self.usage is None:
                self.usage = {}
            for key, value in usage.items():
                if value is not None:
                    self.usage[key] = value
        elif usage is not None:
            self._shape(i, "usageMetadata", "an object")
        for key, attr in (
            ("modelVersion", "model_version"),
            ("responseId", "response_id"),
            ("createTime", "create_time"),
            ("promptFeedback", "prompt_feedback"),
        ):
            value = event.get(key)
            if value is not None:
                if attr == "response_id" and self.response_id is not None:
                    self._response_id_change(i, value)
                setattr(self, attr, value)

    def _response_id_change(self, i: int, value: Any) -> None:
        """E10: a body that switches responseId holds several responses; say so."""
        if not _same_json(self.response_id, value):
            self.warnings.append(
                f"E10: event {i}: responseId changed from {_cj(self.response_id)} to {_cj(value)}; "
                "the body holds more than one response and they were aggregated as one model turn"
            )

    def _shape(self, i: int, where: str, expected: str) -> None:
        self.warnings.append(f"E7: event {i}: {where} is not {expected}; ignored")

    def _candidate(self, obj: Any, i: int, j: int, deltas: list[Delta] | None) -> None:
        if not isinstance(obj, dict):
            self._shape(i, f"candidates[{j}]", "an object")
            return
        index = obj.get("index")
        if index is None:
            index = 0
        elif type(index) is not int or not 0 <= index < 2**31:
            self._shape(i, f"candidates[{j}].index", "a non-negative integer below 2^31")
            return
        cand = self.candidates.get(index)
        if cand is None:
            cand = self.candidates[index] = _CandidateState(index)
        content = obj.get("content")
        if isinstance(content, dict):
            parts = content.get("parts")
            if isinstance(parts, list):
                for p, part in enumerate(parts):
                    if isinstance(part, dict):
                        self._part(cand, part, i, j, p, deltas)
                    else:
                        self._shape(i, f"candidates[{j}].content.parts[{p}]", "an object")
            elif parts is not None:
                self._shape(i, f"candidates[{j}].content.parts", "a list")
        elif content is not None:
            self._shape(i, f"candidates[{j}].content", "an object")
        reason = obj.get("finishReason")
        if isinstance(reason, str) and reason:
            cand.finish_reason = reason
            if deltas is not None:
                deltas.append(Finish(index, reason))
        message = obj.get("finishMessage")
        if isinstance(message, str) and message:
            cand.finish_message = message
        for key, value in obj.items():
            if value is None or key in _CANDIDATE_OWN_KEYS:
                continue
            if key == "citationMetadata":
                self._citations(cand, value, i, j)
            else:
                cand.metadata[key] = value  # E5: last non-null wins

    def _citations(self, cand: _CandidateState, value: Any, i: int, j: int) -> None:
        """E9: citation lists concatenated without exact duplicates, other keys replaced."""
        if not isinstance(value, dict):
            self._shape(i, f"candidates[{j}].citationMetadata", "an object")
            return
        kept = cand.metadata.get("citationMetadata")
        if kept is None:
            kept = cand.metadata["citationMetadata"] = {}
        for key, item in value.items():
            if item is None:
                continue
            if key not in _CITATION_LISTS or not isinstance(item, list):
                kept[key] = item
                cand.citation_seen.pop(key, None)
                continue
            entries = kept.get(key)
            seen = cand.citation_seen.get(key)
            if not isinstance(entries, list) or seen is None:
                entries = kept[key] = []
                seen = cand.citation_seen[key] = set()
            for entry in item:
                identity = _json_identity(entry)
                if identity not in seen:
                    seen.add(identity)
                    entries.append(entry)

    # --- parts (P1-P9) ---

    def _part(
        self,
        cand: _CandidateState,
        part: dict[str, Any],
        i: int,
        j: int,
        p: int,
        deltas: list[Delta] | None,
    ) -> None:
        if not part:
            return  # P6
        call = part.get("functionCall")
        if isinstance(call, dict):  # P7
            self._function_call(cand, part, call, i, j, p, deltas)
            return
        text = part.get("text")
        if not isinstance(text, str):  # P4 (P8: a non-string text too)
            cand.slots.append(_KeptPart(part))
            return
        thought = part.get("thought", False)
        if len(part) == 1 or (len(part) == 2 and "thought" in part and isinstance(thought, bool)):
            if not text:
                return  # P2
            slots = cand.slots
            run = slots[-1] if slots else None
            if not isinstance(run, _TextRun) or run.thought is not thought:
                run = _TextRun(thought)
                slots.append(run)
            run.fragments.append(text)
            if deltas is not None:
                deltas.append(TextDelta(cand.index, len(slots) - 1, text, thought))
            return
        thought = thought is True  # P3: a text part with other keys, kept as is
        cand.slots.append(_KeptPart(part, text, thought))
        if text and deltas is not None:
            deltas.append(TextDelta(cand.index, len(cand.slots) - 1, text, thought))

    # --- function calls (C1-C12) ---

    def _function_call(
        self,
        cand: _CandidateState,
        part: dict[str, Any],
        fc: dict[str, Any],
        i: int,
        j: int,
        p: int,
        deltas: list[Delta] | None,
    ) -> None:
        partial_args = fc.get("partialArgs")
        # C1 by key presence. A partialArgs of the wrong type still marks the
        # streaming feature, so such a part is never replayed as it came.
        streamed = (
            (partial_args is not None and partial_args != [])
            or "willContinue" in fc
            or ("name" not in fc and "args" not in fc)
        )
        if not streamed:  # C1: a complete call, kept as received
            if not isinstance(fc.get("name"), str):  # C15: a call nobody can answer
                info = _complete_call_info(fc)
                with_id = f" with id {_q(info['id'])}" if info["id"] is not None else ""
                self.warnings.append(
                    f"C15: event {i}: candidates[{j}].content.parts[{p}] is a function "
                    f"call{with_id} without a name; it was left out (its args: {_cj(info['args'])})"
                )
                return
            cand.slots.append(_KeptPart(part, is_call=True))
            if deltas is not None:
                k = len(cand.slots) - 1
                info = _complete_call_info(fc)
                deltas.append(CallStart(cand.index, k, info["id"], info["name"]))
                deltas.append(CallEnd(cand.index, k, info))
            return
        if not isinstance(partial_args, list):
            if partial_args is not None:
                where = f"candidates[{j}].content.parts[{p}].functionCall.partialArgs"
                self._shape(i, where, "a list")
            partial_args = []

        call_id = fc.get("id") if isinstance(fc.get("id"), str) else None
        name = fc.get("name") if isinstance(fc.get("name"), str) else None
        call = self._route(cand, call_id, name, partial_args)
        if call is None:
            return  # C2.4 / C10: an end marker with no open call
        call.touched = next(self._clock)
        c = cand.index
        # C8: a new call reserves its slot at the end (ending the text run).
        if call.slot < 0:
            if len(cand.open_calls) == _MAX_OPEN_CALLS:  # C14: close the least recently updated
                oldest = min(cand.open_calls, key=lambda c: c.touched)
                self.warnings.append(
                    f"C14: candidate {cand.index}, part {oldest.slot}: more than "
                    f"{_MAX_OPEN_CALLS} streamed calls were open at once; this one was closed"
                )
                self._close_call(cand, oldest, deltas)
            call.slot = len(cand.slots)
            cand.slots.append(call)
            cand.open_calls.append(call)
            if deltas is not None:
                deltas.append(CallStart(c, call.slot, call.id, call.name))
        k = call.slot
        if name is not None:
            if call.name is None:
                call.name = name
            elif call.name != name:
                self.warnings.append(
                    f"C2: candidate {c}, part {k}: a later chunk named the call {_q(name)} "
                    f"but it is named {_q(call.name)}; the first name was kept"
                )
        signature = part.get("thoughtSignature")
        if signature is not None:
            if call.signature is None:
                call.signature = signature
            elif not _same_json(call.signature, signature):
                self.warnings.append(
                    f"C6: candidate {c}, part {k}: a later chunk carried a different "
                    "thoughtSignature; the first one was kept"
                )
        args = fc.get("args")
        if isinstance(args, dict):
            call.args.update(args)
        where = f"candidates[{j}].content.parts[{p}].functionCall.partialArgs"
        for m, item in enumerate(partial_args):
            if isinstance(item, dict):
                self._partial_arg(cand, call, item, deltas)
            else:
                self._shape(i, f"{where}[{m}]", "an object")
        if fc.get("willContinue") is not True:  # C6
            call.finished = True  # C13
            self._close_call(cand, call, deltas)

    def _route(
        self,
        cand: _CandidateState,
        call_id: str | None,
        name: str | None,
        partial_args: list[Any],
    ) -> _StreamedCall | None:
        """C2: the call a streamed chunk belongs to; a new one has ``slot == -1``."""
        if call_id is not None:
            for call in cand.open_calls:
                if call.id == call_id:
                    return call
            return _StreamedCall(-1, call_id, name)
        if name is not None:
            return _StreamedCall(-1, None, name)
        if not cand.open_calls:
            return _StreamedCall(-1, None, None) if partial_args else None
        if partial_args:
            paths = []
            for item in partial_args:
                path = item.get("jsonPath") if isinstance(item, dict) else None
                if isinstance(path, str):
                    parsed = parse_json_path(path, self.max_array_index)
                    if isinstance(parsed, tuple):
                        paths.append(parsed)
            holders = [
                c for c in cand.open_calls if any(_holds_value(c.args, path) for path in paths)
            ]
            if holders:
                return max(holders, key=lambda c: c.touched)
        return max(cand.open_calls, key=lambda c: c.touched)

    def _partial_arg(
        self,
        cand: _CandidateState,
        call: _StreamedCall,
        item: dict[str, Any],
        deltas: list[Delta] | None,
    ) -> None:
        """C9: apply one partial arg, or skip it with a C5 warning."""
        key = next((k for k in _VALUE_KEYS if k in item), None)
        if key is None:
            return
        value = item[key]
        path = item.get("jsonPath", _MISSING)
        reason = None
        if key == "stringValue" and not isinstance(value, str):
            reason = "stringValue is not a string"
        elif key == "numberValue" and not _is_number(value):
            reason = "numberValue is not a number"
        elif key == "boolValue" and not isinstance(value, bool):
            reason = "boolValue is not a boolean"
        elif not isinstance(path, str):
            reason = _SYNTAX
        else:
            if key == "nullValue":
                value = None
            parsed = parse_json_path(path, self.max_array_index)
            if isinstance(parsed, str):
                reason = parsed
            else:
                reason = _assign(call.args, parsed, value, append=key == "stringValue")
        if reason is not None:
            if isinstance(path, str):
                shown = _q(path)
            else:
                shown = "<missing>" if path is _MISSING else "<not a string>"
            self.warnings.append(
                f"C5: candidate {cand.index}, part {call.slot}: partial arg at {shown} skipped: {reason}"
            )
            return
        if deltas is not None:
            deltas.append(ArgDelta(cand.index, call.slot, path, value))

    def _close_call(
        self, cand: _CandidateState, call: _StreamedCall, deltas: list[Delta] | None
    ) -> None:
        cand.open_calls.remove(call)
        if call.name is None:  # C6, C12: left out of parts, reported with its args
            with_id = f" with id {_q(call.id)}" if call.id is not None else ""
            self.warnings.append(
                f"C6: candidate {cand.index}, part {call.slot}: a streamed function call{with_id} "
                f"never received a name and was left out; its args: {_cj(_render_json(call.args))}"
            )
        elif deltas is not None:
            deltas.append(CallEnd(cand.index, call.slot, _streamed_call_info(call)))

    def close_open_calls(self, deltas: list[Delta] | None) -> None:
        """C12: close every open call, in slot order, candidate by candidate."""
        for index in sorted(self.candidates):
            cand = self.candidates[index]
            for call in sorted(cand.open_calls, key=lambda c: c.slot):
                self._close_call(cand, call, deltas)


def _complete_call_info(fc: dict[str, Any]) -> dict[str, Any]:
    """C11: ``{"id", "name", "args"}`` of a complete call part, args copied."""
    call_id, name, args = fc.get("id"), fc.get("name"), fc.get("args")
    return {
        "id": call_id if isinstance(call_id, str) else None,
        "name": name if isinstance(name, str) else None,
        "args": _render_json(args) if isinstance(args, dict) else {},
    }


def _streamed_call_info(call: _StreamedCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "args": _render_json(call.args)}


# --------------------------------------------------------------------------
# Layer 4: results
# --------------------------------------------------------------------------


class Candidate:
    """One aggregated candidate (E4). Read-only."""

    __slots__ = (
        "_content",
        "_finish_message",
        "_finish_reason",
        "_function_calls",
        "_index",
        "_metadata",
        "_parts",
        "_text",
        "_thought_text",
        "_unfinished_calls",
    )

    def __init__(
        self,
        index: int,
        parts: list[dict[str, Any]],
        text: str,
        thought_text: str,
        function_calls: list[dict[str, Any]],
        finish_reason: str | None,
        finish_message: str | None,
        metadata: dict[str, Any],
        unfinished_calls: list[int],
    ) -> None:
        self._index = index
        self._unfinished_calls = unfinished_calls
        self._parts = parts
        self._content: dict[str, Any] = {"role": "model", "parts": parts}
        self._text = text
        self._thought_text = thought_text
        self._function_calls = function_calls
        self._finish_reason = finish_reason
        self._finish_message = finish_message
        self._metadata = metadata

    @property
    def index(self) -> int:
        """The candidate's ``index``."""
        return self._index

    @property
    def parts(self) -> list[dict[str, Any]]:
        """The aggregated parts, REST camelCase, replayable as they are."""
        return self._parts

    @property
    def content(self) -> dict[str, Any]:
        """``{"role": "model", "parts": parts}``."""
        return self._content

    @property
    def text(self) -> str:
        """The non-thought text, joined in part order (P9)."""
        return self._text

    @property
    def thought_text(self) -> str:
        """The thought text, joined in part order (P9)."""
        return self._thought_text

    @property
    def function_calls(self) -> list[dict[str, Any]]:
        """``[{"id", "name", "args"}]`` in part order (C11)."""
        return self._function_calls

    @property
    def unfinished_calls(self) -> list[int]:
        """Part indices of the streamed calls the model did not finish (C13)."""
        return list(self._unfinished_calls)

    @property
    def finish_reason(self) -> str | None:
        """The last non-empty ``finishReason``, raw."""
        return self._finish_reason

    @property
    def finish_message(self) -> str | None:
        """The last non-empty ``finishMessage``."""
        return self._finish_message

    @property
    def metadata(self) -> dict[str, Any]:
        """Every other candidate key (E5, E9), in first-arrival order."""
        return self._metadata

    def _to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"content": self._content}
        if self._finish_reason is not None:
            out["finishReason"] = self._finish_reason
        if self._finish_message is not None:
            out["finishMessage"] = self._finish_message
        out.update(self._metadata)
        out["index"] = self._index
        return out

    def __repr__(self) -> str:
        return f"Candidate(index={self._index}, parts={len(self.parts)}, finish_reason={self._finish_reason!r})"


class AggregatedResponse:
    """The aggregate of a stream (``snapshot()`` / ``close()``). Read-only.

    The flat accessors (``parts``, ``text`` …) refer to candidate 0.
    """

    __slots__ = (
        "_candidates",
        "_create_time",
        "_error",
        "_first",
        "_model_version",
        "_prompt_feedback",
        "_response_id",
        "_truncated",
        "_usage",
        "_warnings",
    )

    def __init__(
        self,
        candidates: list[Candidate],
        usage: dict[str, Any] | None,
        model_version: Any,
        response_id: Any,
        create_time: Any,
        prompt_feedback: Any,
        error: Any,
        truncated: bool,
        warnings: list[str],
    ) -> None:
        self._candidates = candidates
        self._first = next((c for c in candidates if c.index == 0), None)
        self._usage = usage
        self._model_version = model_version
        self._response_id = response_id
        self._create_time = create_time
        self._prompt_feedback = prompt_feedback
        self._error = error
        self._truncated = truncated
        self._warnings = warnings

    @property
    def parts(self) -> list[dict[str, Any]]:
        """Parts of candidate 0, REST camelCase, replayable as they are."""
        return self._first.parts if self._first is not None else []

    @property
    def content(self) -> dict[str, Any]:
        """``{"role": "model", "parts": parts}`` of candidate 0."""
        return self._first.content if self._first is not None else {"role": "model", "parts": []}

    @property
    def text(self) -> str:
        """Non-thought text of candidate 0."""
        return self._first.text if self._first is not None else ""

    @property
    def thought_text(self) -> str:
        """Thought text of candidate 0."""
        return self._first.thought_text if self._first is not None else ""

    @property
    def function_calls(self) -> list[dict[str, Any]]:
        """Function calls of candidate 0 in part order: ``{"id", "name", "args"}``."""
        return self._first.function_calls if self._first is not None else []

    @property
    def unfinished_calls(self) -> list[int]:
        """Part indices (into ``parts``) of candidate 0's streamed calls that the model
        did not finish: still open (``snapshot()``) or flushed by ``close()`` (C13)."""
        return self._first.unfinished_calls if self._first is not None else []

    @property
    def finish_reason(self) -> str | None:
        """Raw finish reason of candidate 0."""
        return self._first.finish_reason if self._first is not None else None

    @property
    def finish_message(self) -> str | None:
        """Finish message of candidate 0."""
        return self._first.finish_message if self._first is not None else None

    @property
    def usage(self) -> dict[str, Any] | None:
        """Merged ``usageMetadata`` (E3)."""
        return self._usage

    @property
    def model_version(self) -> Any:
        """Last non-null ``modelVersion``."""
        return self._model_version

    @property
    def response_id(self) -> Any:
        """Last non-null ``responseId``."""
        return self._response_id

    @property
    def prompt_feedback(self) -> Any:
        """Last non-null ``promptFeedback``."""
        return self._prompt_feedback

    @property
    def error(self) -> Any:
        """The last in-stream error object, verbatim (E1, E8)."""
        return self._error

    @property
    def complete(self) -> bool:
        """Candidate 0 has a finish reason and no error was recorded (E6)."""
        return self._error is None and self.finish_reason is not None

    @property
    def truncated(self) -> bool:
        """The stream ended inside an incomplete event (F6)."""
        return self._truncated

    @property
    def candidates(self) -> list[Candidate]:
        """Every candidate, in index order."""
        return self._candidates

    @property
    def warnings(self) -> list[str]:
        """Non-fatal anomalies, in the order they were found."""
        return self._warnings

    def to_dict(self) -> dict[str, Any]:
        """A ``GenerateContentResponse``-shaped dict of the aggregate (D2), fresh."""
        out: dict[str, Any] = _render_json(self._dict())
        return out

    def to_json(self) -> bytes:
        """``to_dict()`` as compact UTF-8 JSON."""
        return orjson.dumps(self._dict())

    def _dict(self) -> dict[str, Any]:
        """The D2 dict, sharing this result's containers."""
        out: dict[str, Any] = {"candidates": [c._to_dict() for c in self._candidates]}
        for key, value in (
            ("usageMetadata", self._usage),
            ("modelVersion", self._model_version),
            ("responseId", self._response_id),
            ("createTime", self._create_time),
            ("promptFeedback", self._prompt_feedback),
            ("error", self._error),
        ):
            if value is not None:
                out[key] = value
        return out

    def to_genai(self) -> genai_types.GenerateContentResponse:
        """The aggregate as a google-genai ``GenerateContentResponse`` (needs google-genai).

        What the installed SDK cannot hold (the in-stream ``error``, keys it
        does not know) is left out and named in a ``GenaiConversionWarning``
        (integrations G1).
        """
        return to_genai(self.to_dict(), stacklevel=3)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AggregatedResponse):
            return NotImplemented
        return (self.to_json(), self._warnings, self._truncated) == (
            other.to_json(),
            other._warnings,
            other._truncated,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"AggregatedResponse(parts={len(self.parts)}, finish_reason={self.finish_reason!r}, "
            f"complete={self.complete}, truncated={self._truncated}, warnings={len(self._warnings)})"
        )


def _render_candidate(cand: _CandidateState, *, fresh: bool) -> Candidate:
    """Render one candidate; ``fresh`` copies what the state keeps (for snapshots)."""
    keep = _render_json if fresh else _same
    parts: list[dict[str, Any]] = []
    text: list[str] = []
    thought_text: list[str] = []
    calls: list[dict[str, Any]] = []
    unfinished: list[int] = []
    for slot in cand.slots:
        if isinstance(slot, _TextRun):
            s = slot.text()
            parts.append({"text": s, "thought": True} if slot.thought else {"text": s})
            (thought_text if slot.thought else text).append(s)
        elif isinstance(slot, _KeptPart):
            parts.append(keep(slot.part))
            if slot.text is not None:
                (thought_text if slot.thought else text).append(slot.text)
            if slot.is_call:
                calls.append(_complete_call_info(slot.part["functionCall"]))
        elif slot.name is not None:  # a nameless call is left out (C6, C12)
            call: dict[str, Any] = {"id": slot.id} if slot.id is not None else {}
            call["name"] = slot.name
            call["args"] = _render_json(slot.args)
            part: dict[str, Any] = {"functionCall": call}
            if slot.signature is not None:
                part["thoughtSignature"] = slot.signature
            if not slot.finished:
                unfinished.append(len(parts))
            parts.append(part)
            calls.append(_streamed_call_info(slot))
    return Candidate(
        cand.index,
        parts,
        "".join(text),
        "".join(thought_text),
        calls,
        cand.finish_reason,
        cand.finish_message,
        keep(cand.metadata),
        unfinished,
    )


def _same(value: Any) -> Any:
    return value


def _render(state: _TurnState, *, truncated: bool, fresh: bool) -> AggregatedResponse:
    keep = _render_json if fresh else _same
    return AggregatedResponse(
        [_render_candidate(state.candidates[i], fresh=fresh) for i in sorted(state.candidates)],
        keep(state.usage),
        keep(state.model_version),
        keep(state.response_id),
        keep(state.create_time),
        keep(state.prompt_feedback),
        keep(state.error),
        truncated,
        state.warnings.render(),
    )


# --------------------------------------------------------------------------
# The aggregator
# --------------------------------------------------------------------------


_MAX_ARRAY_INDEX_CAP = 2**31 - 1  # D2b: the largest max_array_index accepted
_MAX_EVENT_BYTES_CAP = 2**63 - 1  # D2b: the largest max_event_bytes accepted (sys.maxsize)


def _check_limit(name: str, value: Any, cap: int) -> int:
    if type(value) is not int:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value}")
    if value > cap:
        raise ValueError(f"{name} must be at most {cap}, got {value}")
    return value


_MAX_WARNINGS = 1000  # D7
_SECOND_FEEDER = (
    "this StreamAggregator was fed from another thread first; an aggregator is fed from one "
    "thread (chunks from two threads would interleave): use one aggregator per stream"
)


class _Warnings:
    """The warnings of a stream, bounded (D7); the ones beyond the cap are counted."""

    __slots__ = ("dropped", "kept")

    def __init__(self) -> None:
        self.kept: list[str] = []
        self.dropped = 0

    def append(self, text: str) -> None:
        if len(self.kept) < _MAX_WARNINGS:
            self.kept.append(text)
        else:
            self.dropped += 1

    def render(self) -> list[str]:
        """The kept warnings, then one that counts the others."""
        if not self.dropped:
            return list(self.kept)
        summary = f"D7: {self.dropped} more warnings were not kept (at most {_MAX_WARNINGS} are)"
        return [*self.kept, summary]


class StreamAggregator:
    """Aggregates the body of a Gemini ``streamGenerateContent`` response.

    Feed raw body bytes (any split) with ``feed()``, one event payload with
    ``feed_event()``, or one parsed chunk with ``feed_chunk()``; each returns
    the deltas it produced (empty with ``deltas=False``). ``snapshot()``
    renders the aggregate so far, ``close()`` finishes the stream.
    ``api="interactions"`` returns the Interactions twin instead
    (``fastagg.reference_interactions``, spec/interactions.md I1).
    """

    def __new__(cls, *, api: str = "generate_content", **options: Any) -> Any:
        """The classic aggregator, or the Interactions twin for ``api="interactions"``."""
        if api == "generate_content":
            return super().__new__(cls)
        from .reference_interactions import InteractionsAggregator  # it imports this module

        return InteractionsAggregator(api=api, **options)

    def __init__(
        self,
        *,
        api: str = "generate_content",
        deltas: bool = True,
        strict: bool = True,
        max_event_bytes: int = 64 * 1024 * 1024,
        max_array_index: int = 10_000,
    ) -> None:
        self._deltas = bool(deltas)
        self._strict = bool(strict)
        self._max_event_bytes = _check_limit(
            "max_event_bytes", max_event_bytes, _MAX_EVENT_BYTES_CAP
        )
        self._warnings = _Warnings()
        self._framer = _BodyFramer(self._max_event_bytes)
        self._state = _TurnState(
            _check_limit("max_array_index", max_array_index, _MAX_ARRAY_INDEX_CAP), self._warnings
        )
        self._events_seen = 0
        self._bytes_seen = 0
        self._truncated = False
        self._result: AggregatedResponse | None = None  # set by close()
        self._ended = False  # set by finish() (D5)
        self._feeder: int | None = None  # the thread that fed it first (D8)

    @property
    def events_seen(self) -> int:
        """Payloads dispatched so far, good and bad (F9)."""
        return self._events_seen

    @property
    def bytes_seen(self) -> int:
        """Bytes given to ``feed()`` and ``feed_event()`` so far."""
        return self._bytes_seen

    def feed(self, data: bytes | bytearray | memoryview) -> list[Delta]:
        """Process a chunk of the raw body; return its deltas.

        Raises ``MalformedStreamError`` after the whole chunk was processed when
        one of its payloads was bad (F8, F10; ``strict=True`` only).
        """
        self._check_open()
        chunk = _as_bytes(data)
        self._bytes_seen += len(chunk)
        frames: list[Frame] = []
        self._framer.feed(chunk, frames)
        deltas: list[Delta] = []
        errors: list[MalformedStreamError] = []
        for frame in frames:
            self._frame(frame, deltas, errors)
        return self._finish_call(deltas, errors)

    def feed_event(self, payload: bytes | str) -> list[Delta]:
        """Process one complete event payload (a ``GenerateContentResponse`` JSON)."""
        self._check_open()
        data = (
            payload.encode("utf-8", "surrogatepass")
            if isinstance(payload, str)
            else _as_bytes(payload)
        )
        offset = self._bytes_seen
        self._bytes_seen += len(data)
        deltas: list[Delta] = []
        errors: list[MalformedStreamError] = []
        self._dispatch(data, offset, deltas, errors)
        return self._finish_call(deltas, errors)

    def feed_chunk(self, chunk: Mapping[str, Any] | Any) -> list[Delta]:
        """Process one parsed chunk: a REST camelCase dict or a google-genai response."""
        self._check_open()
        event = chunk_to_mapping(chunk)
        deltas: list[Delta] = []
        index = self._events_seen
        self._events_seen += 1
        self._state.apply(event, index, deltas if self._deltas else None)
        return deltas

    def reconnect(self) -> None:
        """Only for ``api="interactions"`` (spec/interactions.md I20)."""
        raise TypeError(
            "reconnect() is only for api='interactions' "
            "(a generateContent stream cannot be resumed)"
        )

    def snapshot(self) -> AggregatedResponse:
        """The aggregate so far, open calls in place; the state is not changed."""
        if self._result is not None:
            return self._result
        return _render(self._state, truncated=self._truncated, fresh=True)

    def finish(self) -> list[Delta]:
        """End the input and return the deltas that produced (D5).

        A final event without a trailing blank line is processed (F14) and the
        open calls are closed (C12); ``close()`` then returns the result and
        ``feed*`` raises ``AggregatorClosed``. Later calls return ``[]``.
        """
        if self._ended:
            return []
        self._ended = True
        deltas: list[Delta] = []
        frames: list[Frame] = []
        self._framer.close(frames)
        for frame in frames:
            self._frame(frame, deltas if self._deltas else None, None)
        if self._bytes_seen > 0 and self._events_seen == 0:
            self._warnings.append(
                f"F2: no event was found in {self._bytes_seen} bytes of body "
                "(expected a streamGenerateContent?alt=sse response)"
            )
        self._state.close_open_calls(deltas if self._deltas else None)
        return deltas

    def close(self) -> AggregatedResponse:
        """Finish the stream (F14, C12) and return the aggregate; idempotent."""
        if self._result is not None:
            return self._result
        self.finish()
        self._result = _render(self._state, truncated=self._truncated, fresh=False)
        return self._result

    # --- internals ---

    def _check_open(self) -> None:
        if self._ended:
            raise AggregatorClosed("the aggregator was closed; create a new one for another stream")
        me = threading.get_ident()
        if self._feeder is None:
            self._feeder = me
        elif self._feeder != me:  # D8: chunks from two threads would interleave
            raise RuntimeError(_SECOND_FEEDER)

    def _frame(
        self,
        frame: Frame,
        deltas: list[Delta] | None,
        errors: list[MalformedStreamError] | None,
    ) -> None:
        """Handle one frame; ``errors`` is None during ``close()``, which never raises."""
        if frame.kind == PAYLOAD:
            assert isinstance(frame.data, bytes)
            self._dispatch(frame.data, frame.offset, deltas, errors)
        elif frame.kind == TOO_LARGE:
            self._reject(EVENT_TOO_LARGE, frame.offset, errors)
        elif frame.kind == WARNING:
            assert isinstance(frame.data, str)
            self._warnings.append(frame.data)
        elif frame.kind == UNTERMINATED:
            assert isinstance(frame.data, bytes)
            problem, event = _parse_payload(frame.data, self._max_event_bytes)
            if problem is None:
                self._warnings.append(
                    f"F6: the stream ended inside an unterminated event at byte {frame.offset}; "
                    "it was complete JSON and was processed"
                )
                index = self._events_seen
                self._events_seen += 1
                self._state.apply(event, index, deltas)
            else:
                self._drop_incomplete(frame.offset)
        else:
            self._drop_incomplete(frame.offset)

    def _drop_incomplete(self, offset: int) -> None:
        self._truncated = True
        self._warnings.append(
            f"F6: the stream ended inside an incomplete event at byte {offset}; "
            "it was dropped and the result is marked truncated"
        )

    def _dispatch(
        self,
        payload: bytes,
        offset: int,
        deltas: list[Delta] | None,
        errors: list[MalformedStreamError] | None,
    ) -> None:
        problem, event = _parse_payload(payload, self._max_event_bytes)
        if problem is not None:
            self._reject(problem, offset, errors)
            return
        index = self._events_seen
        self._events_seen += 1
        self._state.apply(event, index, deltas if self._deltas else None)

    def _reject(self, problem: str, offset: int, errors: list[MalformedStreamError] | None) -> None:
        """A bad payload still counts as an event (F9); strict mode raises later (F10)."""
        error = _malformed(problem, self._events_seen, offset, self._max_event_bytes)
        self._events_seen += 1
        if self._strict and errors is not None:
            errors.append(error)
        else:
            self._warnings.append(f"F8: {error}")

    def _finish_call(self, deltas: list[Delta], errors: list[MalformedStreamError]) -> list[Delta]:
        if errors:
            first = errors[0]
            first.deltas = deltas
            first.errors = errors
            raise first
        return deltas
