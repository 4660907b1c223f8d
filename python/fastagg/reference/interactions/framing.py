"""Interactions framing (I2-I4): ``event:`` + ``data:`` lines, the ``[DONE]`` sentinel."""

from __future__ import annotations

from typing import Final, Literal

from ..framing.lines import _BOM, _LINE_END

_FIELD_ROOM = 16  # room for a field name and its colon beyond max_event_bytes
_FrameKind = Literal["payload", "too-large", "done", "after-done", "unterminated"]
_PAYLOAD: Final = "payload"
_TOO_LARGE: Final = "too-large"
_DONE: Final = "done"
_AFTER_DONE: Final = "after-done"
_UNTERMINATED: Final = "unterminated"
# (kind, offset, data, SSE event name)
_Frame = tuple[_FrameKind, int, bytes, str | None]


def _is_blank(data: bytes | bytearray) -> bool:
    return not data.strip(b" \t\r\n")


class _Framer:
    """``event:`` + ``data:`` lines; a line is kept up to the limit, the rest counted."""

    def __init__(self, limit: int) -> None:
        self._max = limit
        self._skip_lf = False
        self._pos = 0
        self._line = bytearray()
        self._line_len = 0
        self._line_start = 0
        self._first_line = True
        self._data = bytearray()
        self._data_len = 0
        self._has_data = False
        self._too_large = False
        self._offset = 0
        self._name: str | None = None
        self.done = False
        self._after_done_reported = False
        self._closed = False

    def _keep(self, piece: bytes) -> None:
        room = max(self._max + _FIELD_ROOM - len(self._line), 0)
        self._line += piece[:room]
        self._line_len += len(piece)

    def reconnect(self) -> None:
        """A resumed body follows (I20): drop the partial line and event."""
        self._skip_lf = False
        self._line.clear()
        self._line_len = 0
        self._first_line = True
        self._data.clear()
        self._data_len = 0
        self._has_data = False
        self._too_large = False
        self._name = None

    def feed(self, data: bytes, out: list[_Frame]) -> None:
        if self._closed:
            return
        base = self._pos
        self._pos += len(data)
        i, n = 0, len(data)
        if self._skip_lf and n:
            self._skip_lf = False
            if data[0] == 0x0A:
                i = 1
        while i < n:
            m = _LINE_END.search(data, i)
            if m is None:
                if self._line_len == 0:
                    self._line_start = base + i
                self._keep(data[i:])
                return
            end = m.start()
            if self._line_len == 0:
                self._line_start = base + i
            self._keep(data[i:end])
            i = end + 1
            if data[end] == 0x0D:
                if i < n:
                    if data[i] == 0x0A:
                        i += 1
                else:
                    self._skip_lf = True
            self._end_line(out)

    def close(self, out: list[_Frame]) -> None:
        if self._closed:
            return
        if self._line_len > 0:
            self._end_line(out)
        self._closed = True
        if self._has_data and not self.done:
            if self._too_large:
                out.append((_TOO_LARGE, self._offset, b"", None))
            elif not _is_blank(self._data):
                out.append((_UNTERMINATED, self._offset, bytes(self._data), self._name))

    def _end_line(self, out: list[_Frame]) -> None:
        line = bytes(self._line)
        length = self._line_len
        self._line.clear()
        self._line_len = 0
        if self._first_line:
            self._first_line = False
            if line.startswith(_BOM):
                line = line[len(_BOM) :]
                length -= len(_BOM)
                self._line_start += len(_BOM)
        self._field(line, length, out)

    def _field(self, line: bytes, length: int, out: list[_Frame]) -> None:
        if self.done:
            if not self._after_done_reported and not _is_blank(line):
                self._after_done_reported = True
                out.append((_AFTER_DONE, self._line_start, b"", None))
            return
        if length == 0:
            self._dispatch(out)
            return
        if line[:1] == b":":
            return
        colon = line.find(b":")
        if colon >= 0:
            field = line[:colon]
            value_at = colon + 1 + (1 if line[colon + 1 : colon + 2] == b" " else 0)
        else:
            field, value_at = line, len(line)
        value = line[value_at:]
        value_len = max(length - value_at, 0)
        if field == b"data":
            first = not self._has_data
            if first:
                self._has_data = True
                self._offset = self._line_start
            total = self._data_len + (0 if first else 1) + value_len
            if total > self._max:
                self._too_large = True
                self._data.clear()
            elif not self._too_large:
                if not first:
                    self._data += b"\n"
                self._data += value
            self._data_len = total
        elif field == b"event":
            self._name = value.decode("utf-8", "replace")

    def _dispatch(self, out: list[_Frame]) -> None:
        name, self._name = self._name, None
        if not self._has_data:
            return
        self._has_data = False
        self._data_len = 0
        if self._too_large:
            self._too_large = False
            self._data.clear()
            out.append((_TOO_LARGE, self._offset, b"", None))
            return
        data = bytes(self._data)
        self._data.clear()
        if data == b"[DONE]":
            self.done = True
            out.append((_DONE, 0, b"", None))
        elif not _is_blank(data):
            out.append((_PAYLOAD, self._offset, data, name))
