"""Raw body bytes -> frames (event payloads, framing warnings), F1-F7, F9-F15.

``_BodyFramer`` detects the framing (F1) and hands the bytes to the SSE
(``sse``) or the JSON-array (``array``) framer; ``decoder`` is the generic
WHATWG decoder (F15), which shares only the line splitting.
"""

from __future__ import annotations

from .array import _ArrayFramer
from .lines import (
    _NON_WS,
    INCOMPLETE,
    PAYLOAD,
    TOO_LARGE,
    UNTERMINATED,
    WARNING,
    Frame,
    _BomStripper,
)
from .sse import _SseFramer

__all__ = ["INCOMPLETE", "PAYLOAD", "TOO_LARGE", "UNTERMINATED", "WARNING", "Frame"]

_OPEN_BRACKET = 0x5B


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
