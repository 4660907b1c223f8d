"""SSE framing for the aggregator (F2-F6, F9, F11, F13, F14): ``data:`` lines and bare JSON blocks."""

from __future__ import annotations

import re

from ..diagnostics import _diagnostic
from ..event import _parse_payload
from .lines import (
    _NON_WS,
    UNREADABLE,
    Frame,
    _Buffer,
    _event_frame,
    _LineSplitter,
    _string_step,
)

_QUOTE, _OPEN_BRACE = 0x22, 0x7B
_DONE = b"[DONE]"
_BLOCK_SPECIAL = re.compile(rb'[{}"]')
_JOIN = b"}data:"  # U5: where two data lines ran together


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
        self._first_line = True  # no line end seen yet: the U5 check runs
        self._tail = b""  # the first line's last data bytes (up to 5), for a split `}data:`
        self.refused = False  # U5: the lines came without their line ends; nothing more is framed

    def feed(self, data: bytes, base: int, out: list[Frame]) -> None:
        for start, end, ends_line in self._lines.split(data):
            if end > start:
                self._line_bytes(data[start:end], base + start)
                if self.refused:
                    offset = self._event_offset or 0
                    diagnostic = _diagnostic("lines_without_ends", offset=offset)
                    out.append(Frame(UNREADABLE, offset, diagnostic))
                    self._event_offset, self._data = None, _Buffer(self._limit)
                    return
            if ends_line:
                self._first_line = False
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
            self._value(seg)
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
            self._value(head[6:] if head[5:6] == b" " else head[5:])
            self._value(rest)
        elif head == b"data" and ended:
            self._start_data_line()
        elif b"data:".startswith(head) and not ended:
            self._head = head
        else:
            self._kind = _LINE_IGNORED

    def _value(self, seg: bytes) -> None:
        """Bytes of a data line's value; on the first line, checked for U5 first."""
        if self.refused:
            return
        if self._first_line and seg and self._joined(seg):
            self.refused = True
            return
        self._data.add(seg)

    def _joined(self, value: bytes) -> bool:
        """U5: whether the first line's data so far holds a whole JSON object followed
        directly by ``data:`` (lines fed without their line ends: ``data: {..}data: {..}``).

        Only the first ``}data:`` is tried (a valid stream has none after a whole
        object there), and only when all of it lies within ``max_event_bytes``, so
        the answer does not depend on how the body was split.
        """
        if self._data.over:  # past max_event_bytes no `}data:` can count any more
            self._first_line = False
            return False
        before, tail = self._data.size, self._tail
        k = (tail + value[:5]).find(_JOIN)
        end: int | None = before - len(tail) + k + 1 if k >= 0 else None
        if end is None:
            k = value.find(_JOIN)
            end = before + k + 1 if k >= 0 else None
        self._tail = value[-5:] if len(value) >= 5 else (tail + value)[-5:]
        if end is None:
            return False
        self._first_line = False
        if end + len(_JOIN) - 1 > self._limit:
            return False
        whole = (self._data.value() + value)[:end]
        return whole[:1] == b"{" and not isinstance(_parse_payload(whole, self._limit), str)

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
