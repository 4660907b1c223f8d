"""The JSON-array framing sent without ``alt=sse`` (F1, F12)."""

from __future__ import annotations

import re

from ..diagnostics import _diagnostic
from .lines import _NON_WS, WARNING, Frame, _Buffer, _event_frame, _string_step

_QUOTE, _COMMA = 0x22, 0x2C
_CLOSERS = b"]}"
_WHITESPACE = b" \t\r\n"
_NESTED_SPECIAL = re.compile(rb'[\[\]{}"]')
# At the top level of an array element: what changes state, or whitespace
# (kept aside until we know whether it is inside the element or trailing).
_ELEMENT_SPECIAL = re.compile(rb'[\[\]{}",]|[ \t\r\n]+')


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
                    offset = base + m.start()
                    diagnostic = _diagnostic("array_trailing_data", offset=offset)
                    out.append(Frame(WARNING, offset, diagnostic))
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
                    # RULE F12a: an object or array element goes out at its closing bracket.
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
