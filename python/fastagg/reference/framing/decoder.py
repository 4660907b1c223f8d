"""The generic WHATWG server-sent-events decoder (F15)."""

from __future__ import annotations

from dataclasses import dataclass

from ... import _repr
from .lines import _as_bytes, _BomStripper, _LineSplitter


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One event of a WHATWG server-sent-events stream (F15)."""

    event: str
    data: str
    id: str | None
    retry: int | None

    __repr__ = _repr.record


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
