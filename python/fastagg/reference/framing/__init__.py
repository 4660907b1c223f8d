"""Raw body bytes -> frames (event payloads, framing warnings), F1-F7, F9-F15.

``_BodyFramer`` detects the framing (F1) and hands the bytes to the SSE
(``sse``) or the JSON-array (``array``) framer; ``decoder`` is the generic
WHATWG decoder (F15), which shares only the line splitting.
"""

from __future__ import annotations

from ..diagnostics import _diagnostic
from .array import _ArrayFramer
from .lines import (
    _NON_WS,
    INCOMPLETE,
    PAYLOAD,
    TOO_LARGE,
    UNREADABLE,
    UNTERMINATED,
    WARNING,
    Frame,
    _BomStripper,
)
from .sse import _SseFramer

__all__ = ["INCOMPLETE", "PAYLOAD", "TOO_LARGE", "UNREADABLE", "UNTERMINATED", "WARNING", "Frame"]

_OPEN_BRACKET = 0x5B
# U4: the first bytes of a gzip or zlib body.
_COMPRESSION = {b"\x1f\x8b": "gzip", b"\x78\x01": "zlib", b"\x78\x9c": "zlib", b"\x78\xda": "zlib"}
_MAGIC_FIRST = (0x1F, 0x78)


class _BodyFramer:
    """Raw body bytes -> frames: BOM, framing detection (F1), offsets (F9)."""

    def __init__(self, limit: int) -> None:
        self._bom = _BomStripper()
        self._pos = 0  # stream offset of the next byte handed to a framer
        self._mode: str | None = None  # None until the first non-whitespace byte
        self._sse = _SseFramer(limit)
        self._array = _ArrayFramer(limit)
        self._magic: bytes | None = b""  # U4: the body's first byte held; None once decided

    def feed(self, data: bytes, out: list[Frame]) -> None:
        if self._mode == "refused":
            return
        if self._magic is not None and data:
            held = self._magic + data
            if held[0] not in _MAGIC_FIRST:
                self._magic = None
            elif len(held) < 2:
                self._magic = held
                return
            else:
                self._magic = None
                encoding = _COMPRESSION.get(held[:2])
                if encoding is not None:
                    self._mode = "refused"
                    out.append(
                        Frame(UNREADABLE, 0, _diagnostic("compressed_body", encoding=encoding))
                    )
                    return
                data = held
        data, dropped = self._bom.feed(data)
        self._pos += dropped
        self._feed(data, out)

    def close(self, out: list[Frame]) -> None:
        if self._mode == "refused":
            return
        if self._magic:
            self._feed(self._magic, out)
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
            if self._sse.refused:
                self._mode = "refused"
