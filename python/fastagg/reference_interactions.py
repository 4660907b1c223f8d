"""Pure-Python twin of the Rust Interactions aggregator (``spec/interactions.md``).

``fastagg.reference.StreamAggregator(api="interactions")`` returns an
``InteractionsAggregator``. It follows the I rules to the letter, warning
texts included, and is the oracle of the differential tests. Layers, top to
bottom: framing (I2-I4), the argument parser (I14-I17), steps (I9-I13), the
aggregator and its result (I5-I8, I18).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from .errors import AggregatorClosed, MalformedStreamError
from .reference import (
    _MAX_ARRAY_INDEX_CAP,
    _MAX_EVENT_BYTES_CAP,
    ArgDelta,
    CallEnd,
    CallStart,
    Delta,
    Finish,
    StreamError,
    TextDelta,
    _as_bytes,
    _check_limit,
    _q,
)

__all__ = ["InteractionResponse", "InteractionsAggregator"]

# --------------------------------------------------------------------------
# Framing (I2-I4)
# --------------------------------------------------------------------------

_BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"[\r\n]")
_FIELD_ROOM = 16  # room for a field name and its colon beyond max_event_bytes
_PAYLOAD, _TOO_LARGE, _DONE, _AFTER_DONE, _UNTERMINATED = (
    "payload",
    "too-large",
    "done",
    "after-done",
    "unterminated",
)
_Frame = tuple[str, int, bytes, "str | None"]


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


# --------------------------------------------------------------------------
# Arguments: incremental strict JSON (I14-I17)
# --------------------------------------------------------------------------

MAX_LIVE_PATH = 1024
_MAX_DEPTH = 1024
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING_RUN = re.compile(r'[^"\\\x00-\x1f]+')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_LITERALS = (("true", True), ("false", False), ("null", None))
_WS = " \t\n\r"
# Number states: which ones end a number, and the transitions.
_NUM_ACCEPT = {"zero", "int", "frac", "exp"}


def _num_next(state: str, c: str) -> str | None:
    digit = "0" <= c <= "9"
    if state == "minus":
        return "zero" if c == "0" else "int" if digit else None
    if state == "int" and digit:
        return "int"
    if state in ("zero", "int") and c == ".":
        return "dot"
    if state in ("dot", "frac") and digit:
        return "frac"
    if state in ("zero", "int", "frac") and c in "eE":
        return "e"
    if state == "e" and c in "+-":
        return "esign"
    if state in ("e", "esign", "exp") and digit:
        return "exp"
    return None


def _segment(container: list[Any] | None) -> str:
    """The path segment of the value being read in ``container`` (none at the top)."""
    if container is None:
        return ""
    kind, value, key = container[0], container[1], container[2]
    if kind == "obj":
        if key is None:
            return ""
        return f".{key}" if _IDENT.fullmatch(key) else f"[{_q(key)}]"
    return f"[{len(value)}]"


class _ParseError(Exception):
    pass


class _ArgParser:
    """One call's argument text, parsed as it arrives."""

    def __init__(self) -> None:
        self.lex = "start"
        self.key_str = False  # the string being read is a key
        self.stack: list[list[Any]] = []  # [kind, map|list, key, path_len, path_bytes]
        self.segs: list[str] = []
        self.path_bytes = 1  # UTF-8 length of "$" + segments
        self.cur: list[str] = []
        self.cur_len = 0  # characters in cur
        self.sent = 0  # pieces of cur already yielded live
        self.num = ""
        self.num_state = ""
        self.uni = ""  # hex digits of a \u escape
        self.high: int | None = None
        self.low_stage = 0
        self.lit = 0
        self.lit_pos = 0
        self.root: Any = None
        self.has_root = False
        self.raw: list[str] = []
        self.chars = 0
        self.error: str | None = None
        self.long_path_warned = False
        self.live = True  # live pieces are wanted (the aggregator's ``deltas`` option)

    # --- feeding ---

    def feed(self, fragment: str, live: bool, out: list[tuple[str, Any]]) -> bool:
        self.raw.append(fragment)
        self.live = live
        long_path = [False]
        if self.lex == "failed":
            return False
        i, n = 0, len(fragment)
        while i < n:
            if self.lex == "str":
                m = _STRING_RUN.match(fragment, i)
                if m is not None:
                    run = m.group()
                    self.cur.append(run)
                    self.cur_len += len(run)
                    self.chars += len(run)
                    i = m.end()
                    continue
            c = fragment[i]
            try:
                if c >= "\x80":
                    raise _ParseError(f"unexpected character {_q(c)}")
                self._char(c, live, out, long_path)
            except _ParseError as e:
                self._fail(str(e))
                return long_path[0]
            self.chars += 1
            i += 1
        if live and self.lex in ("str", "escape", "unicode", "low") and not self.key_str:
            self._send_piece(False, out, long_path)
        return long_path[0]

    def _fail(self, reason: str) -> None:
        self.error = f"arguments are not valid JSON at character {self.chars}: {reason}"
        self.lex = "failed"

    def finish(self) -> tuple[bool, Any]:
        """``step.stop``: ``(True, arguments)`` or ``(False, error text)``."""
        if self.lex == "done":
            return True, self.root
        if self.lex != "failed":
            self._fail("unexpected end")
        return False, self.error

    def raw_text(self) -> str:
        return "".join(self.raw)

    def partial(self) -> Any:
        """The arguments so far (I17), or the raw text after an error."""
        if self.lex == "failed":
            return self.raw_text()
        if self.has_root:
            return self.root
        carry: Any = None
        has = False
        if self.lex in ("str", "escape", "unicode", "low") and not self.key_str:
            carry, has = "".join(self.cur), True
        for kind, value, key, _, _ in reversed(self.stack):
            if kind == "obj":
                copy: Any = dict(value)
                if key is not None and has:
                    copy[key] = carry
            else:
                copy = list(value)
                if has:
                    copy.append(carry)
            carry, has = copy, True
        return carry if has else {}

    # --- values ---

    def _path(self) -> str:
        return "$" + "".join(self.segs)

    def _emit(self, value: Any, out: list[tuple[str, Any]], long_path: list[bool]) -> None:
        top = self.stack[-1] if self.stack else None
        if top is None or not self.live:
            return
        if top[0] == "obj":
            if top[2] is None:
                return
            extra = len(top[2].encode("utf-8")) + 1
        else:
            extra = 2
        if self.path_bytes + extra > MAX_LIVE_PATH:
            long_path[0] = True
            return
        seg = _segment(top)
        if self.path_bytes + len(seg.encode("utf-8")) > MAX_LIVE_PATH:
            long_path[0] = True
            return
        out.append((self._path() + seg, value))

    def _send_piece(self, done: bool, out: list[tuple[str, Any]], long_path: list[bool]) -> None:
        piece = "".join(self.cur[self.sent :])
        if piece or (done and self.cur_len == 0):
            self._emit(piece, out, long_path)
        self.sent = len(self.cur)

    def _put(self, value: Any) -> None:
        if not self.stack:
            self.root, self.has_root = value, True
            self.lex = "done"
            return
        top = self.stack[-1]
        if top[0] == "obj":
            if top[2] is not None:
                top[1][top[2]] = value
                top[2] = None
        else:
            top[1].append(value)
        self.lex = "after"

    def _open(self, obj: bool) -> None:
        if len(self.stack) >= _MAX_DEPTH:
            raise _ParseError(f"nesting deeper than {_MAX_DEPTH}")
        seg = _segment(self.stack[-1] if self.stack else None)
        frame: list[Any] = [
            "obj" if obj else "arr",
            {} if obj else [],
            None,
            len(self.segs),
            self.path_bytes,
        ]
        if seg:
            self.segs.append(seg)
            self.path_bytes += len(seg.encode("utf-8"))
        self.stack.append(frame)
        self.lex = "objfirst" if obj else "arrfirst"

    def _close_container(self) -> None:
        _, value, _, path_len, path_bytes = self.stack.pop()
        del self.segs[path_len:]
        self.path_bytes = path_bytes
        self._put(value)

    def _finish_number(self, out: list[tuple[str, Any]], long_path: list[bool]) -> None:
        text, self.num = self.num, ""
        value: Any
        if any(c in text for c in ".eE"):
            value = float(text)
            if value in (float("inf"), float("-inf")):
                raise _ParseError("number out of range")
        else:
            value = int(text)
            if not -(2**63) <= value < 2**64:
                value = float(text)
        self._emit(value, out, long_path)
        self._put(value)

    def _begin_value(self, c: str) -> None:
        if c == "{":
            self._open(True)
        elif c == "[":
            self._open(False)
        elif c == '"':
            self.cur, self.cur_len, self.sent = [], 0, 0
            self.key_str = False
            self.lex = "str"
        elif c == "-" or "0" <= c <= "9":
            self.num = c
            self.num_state = "minus" if c == "-" else "zero" if c == "0" else "int"
            self.lex = "number"
        elif c in "tfn":
            self.lit = "tfn".index(c)
            self.lit_pos = 1
            self.lex = "literal"
        else:
            raise _ParseError(f"unexpected character {_q(c)}")

    def _end_string(self, live: bool, out: list[tuple[str, Any]], long_path: list[bool]) -> None:
        text = "".join(self.cur)
        if self.key_str:
            top = self.stack[-1]
            top[2] = text
            self.lex = "colon"
        else:
            if live:
                self._send_piece(True, out, long_path)
            self._put(text)
        self.cur, self.cur_len, self.sent = [], 0, 0

    def _push_char(self, ch: str) -> None:
        self.cur.append(ch)
        self.cur_len += 1

    def _char(self, c: str, live: bool, out: list[tuple[str, Any]], long_path: list[bool]) -> None:
        lex = self.lex
        ws = c in _WS
        if lex == "start":
            if ws:
                return
            if c != "{":
                raise _ParseError("arguments are not a JSON object")
            self._open(True)
        elif lex == "value":
            if not ws:
                self._begin_value(c)
        elif lex == "arrfirst":
            if ws:
                return
            if c == "]":
                self._close_container()
            else:
                self._begin_value(c)
        elif lex in ("objfirst", "key"):
            if ws:
                return
            if c == "}" and lex == "objfirst":
                self._close_container()
            elif c == '"':
                self.cur, self.cur_len, self.sent = [], 0, 0
                self.key_str = True
                self.lex = "str"
            else:
                raise _ParseError(f"unexpected character {_q(c)}")
        elif lex == "colon":
            if ws:
                return
            if c != ":":
                raise _ParseError(f"unexpected character {_q(c)}")
            self.lex = "value"
        elif lex == "after":
            if ws:
                return
            kind = self.stack[-1][0] if self.stack else None
            if c == "," and kind == "obj":
                self.lex = "key"
            elif c == "," and kind == "arr":
                self.lex = "value"
            elif (c == "}" and kind == "obj") or (c == "]" and kind == "arr"):
                self._close_container()
            else:
                raise _ParseError(f"unexpected character {_q(c)}")
        elif lex == "str":
            if c == '"':
                self._end_string(live, out, long_path)
            elif c == "\\":
                self.lex = "escape"
            else:  # a control character; plain runs are taken whole by feed()
                raise _ParseError(f"unexpected character {_q(c)}")
        elif lex == "escape":
            if c == "u":
                self.uni, self.high = "", None
                self.lex = "unicode"
            elif c in _ESCAPES:
                self._push_char(_ESCAPES[c])
                self.lex = "str"
            else:
                raise _ParseError("invalid escape")
        elif lex == "unicode":
            if c not in "0123456789abcdefABCDEF":
                raise _ParseError("invalid escape")
            self.uni += c
            if len(self.uni) < 4:
                return
            code = int(self.uni, 16)
            if self.high is None:
                if 0xD800 <= code <= 0xDBFF:
                    self.high, self.low_stage = code, 0
                    self.lex = "low"
                    return
                if 0xDC00 <= code <= 0xDFFF:
                    raise _ParseError("lone surrogate")
                self._push_char(chr(code))
            else:
                if not 0xDC00 <= code <= 0xDFFF:
                    raise _ParseError("lone surrogate")
                self._push_char(chr(0x10000 + ((self.high - 0xD800) << 10) + (code - 0xDC00)))
                self.high = None
            self.lex = "str"
        elif lex == "low":
            if self.low_stage == 0 and c == "\\":
                self.low_stage = 1
            elif self.low_stage == 1 and c == "u":
                self.uni = ""
                self.lex = "unicode"
            else:
                raise _ParseError("lone surrogate")
        elif lex == "number":
            nxt = _num_next(self.num_state, c)
            if nxt is not None:
                self.num += c
                self.num_state = nxt
                return
            if self.num_state not in _NUM_ACCEPT:
                raise _ParseError(f"unexpected character {_q(c)}")
            self._finish_number(out, long_path)
            self._char(c, live, out, long_path)  # the delimiter belongs to what follows
        elif lex == "literal":
            word, value = _LITERALS[self.lit]
            if self.lit_pos >= len(word) or word[self.lit_pos] != c:
                raise _ParseError(f"unexpected character {_q(c)}")
            if self.lit_pos + 1 == len(word):
                self._emit(value, out, long_path)
                self._put(value)
            else:
                self.lit_pos += 1
        elif lex == "done" and not ws:
            raise _ParseError(f"unexpected character {_q(c)}")


# --------------------------------------------------------------------------
# Steps (I9-I13)
# --------------------------------------------------------------------------

_IMPLIED = {
    "text": "model_output",
    "thought_summary": "thought",
    "thought_signature": "thought",
    "arguments_delta": "function_call",
}


def _list_at(step: dict[str, Any], key: str) -> list[Any]:
    """The list under ``key``, made a list when missing or another type (I12)."""
    items = step.get(key)
    if not isinstance(items, list):
        items = []
        step[key] = items
    return items


def _append_text(items: list[Any], text: str) -> None:
    last = items[-1] if items else None
    if isinstance(last, dict) and last.get("type") == "text" and isinstance(last.get("text"), str):
        last["text"] += text
    else:
        items.append({"type": "text", "text": text})


class _Step:
    def __init__(self, value: dict[str, Any]) -> None:
        self.value = value
        self.stopped = False
        self.parser: _ArgParser | None = None
        self.invalid = False

    @property
    def type(self) -> str | None:
        t = self.value.get("type")
        return t if isinstance(t, str) else None

    def is_call(self) -> bool:
        return self.type == "function_call"

    def apply(
        self, kind: str, delta: dict[str, Any], live: bool, args: list[tuple[str, Any]]
    ) -> tuple[tuple[str, bool] | None, bool, str | None]:
        """``(text delta, long path, problem)`` of one delta (I12)."""
        text_out: tuple[str, bool] | None = None
        long_path = False
        problem: str | None = None
        if kind == "text":
            text = delta.get("text")
            if isinstance(text, str):
                _append_text(_list_at(self.value, "content"), text)
                if text:
                    text_out = (text, False)
        elif kind == "thought_summary":
            content = delta.get("content")
            if isinstance(content, dict):
                t = content.get("text") if content.get("type") == "text" else None
                summary = _list_at(self.value, "summary")
                if isinstance(t, str):
                    _append_text(summary, t)
                    if t:
                        text_out = (t, True)
                else:
                    summary.append(dict(content))
        elif kind == "thought_signature":
            sig = delta.get("signature")
            if isinstance(sig, str):
                self.value["signature"] = sig
        elif kind == "arguments_delta":
            fragment = delta.get("arguments")
            if isinstance(fragment, str):
                if self.parser is None:
                    self.parser = _ArgParser()
                long_path = self.parser.feed(fragment, live, args)
        elif kind == "text_annotation_delta":
            annotations = delta.get("annotations")
            extra = list(annotations) if isinstance(annotations, list) else []
            content = self.value.get("content")
            last = content[-1] if isinstance(content, list) and content else None
            if isinstance(last, dict):
                _list_at(last, "annotations").extend(extra)
            else:
                problem = "annotations without content were skipped"
        elif kind in ("image", "audio", "video", "document"):
            _list_at(self.value, "content").append(dict(delta))
        else:
            for k, v in delta.items():
                if k != "type":
                    self.value[k] = v
        return text_out, long_path, problem

    def stop(self) -> str | None:
        """``step.stop`` (I13); the I16 error text when the arguments do not parse."""
        if self.stopped:
            return None
        self.stopped = True
        if self.parser is None:
            return None
        ok, result = self.parser.finish()
        if ok:
            self.value["arguments"] = result
            return None
        self.invalid = True
        self.value["arguments"] = self.parser.raw_text()
        return str(result)

    def render(self) -> dict[str, Any]:
        value: dict[str, Any] = _deep_copy(self.value)
        if not self.stopped and self.parser is not None:
            value["arguments"] = _deep_copy(self.parser.partial())
        return value

    def call(self, rendered: dict[str, Any]) -> dict[str, Any]:
        def get(k: str) -> str | None:
            v = self.value.get(k)
            return v if isinstance(v, str) else None

        args = rendered.get("arguments")
        return {
            "id": get("id"),
            "name": get("name"),
            "args": args if isinstance(args, dict) and not self.invalid else {},
        }

    def unfinished(self) -> bool:
        return self.is_call() and (not self.stopped or self.invalid)


def _deep_copy(value: Any) -> Any:
    """A fresh copy of JSON data (results never share state with the aggregator)."""
    return orjson.loads(orjson.dumps(value)) if isinstance(value, (dict, list)) else value


# --------------------------------------------------------------------------
# The aggregator and its result (I1, I5-I8, I18)
# --------------------------------------------------------------------------


class InteractionResponse:
    """The aggregated interaction (read-only, I18)."""

    def __init__(self, **fields: Any) -> None:
        self._fields = fields

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_fields"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        f = self._fields
        return (
            f"InteractionResponse(id={f['interaction_id']!r}, status={f['status']!r}, "
            f"steps={len(f['steps'])}, text={f['text'][:60]!r})"
        )

    def to_dict(self) -> dict[str, Any]:
        """``{"id"?, "status"?, "steps", "usage"?, "error"?}`` (fresh objects)."""
        out: dict[str, Any] = {}
        f = self._fields
        if f["interaction_id"] is not None:
            out["id"] = f["interaction_id"]
        if f["status"] is not None:
            out["status"] = f["status"]
        out["steps"] = _deep_copy(f["steps"])
        if f["usage"] is not None:
            out["usage"] = _deep_copy(f["usage"])
        if f["error"] is not None:
            out["error"] = _deep_copy(f["error"])
        return out

    def to_json(self) -> bytes:
        """``to_dict()`` as compact UTF-8 JSON."""
        return orjson.dumps(self.to_dict())


def _malformed(problem: str, n: int, offset: int, limit: int) -> MalformedStreamError:
    where = f"event {n} at byte {offset}"
    kind = "invalid-json"
    if problem == "invalid-utf8":
        message, kind = f"{where} is not valid UTF-8; it was skipped", problem
    elif problem == "event-too-large":
        message, kind = (
            f"{where} is larger than max_event_bytes ({limit}); it was skipped "
            "(raise max_event_bytes if such events are expected)",
            problem,
        )
    elif problem == "not-an-object":
        message = f"{where} is JSON but not an object; it was skipped"
    else:
        message = (
            f"{where} is not valid JSON; it was skipped "
            "(is this the body of a streamed Interactions API response?)"
        )
    return MalformedStreamError(message, kind, offset, n)


def _parse(data: bytes) -> tuple[str | None, dict[str, Any] | None]:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return "invalid-utf8", None
        return "invalid-json", None
    if not isinstance(value, dict):
        return "not-an-object", None
    return None, value


def _str(obj: dict[str, Any], key: str) -> str | None:
    v = obj.get(key)
    return v if isinstance(v, str) else None


_STATUS_EVENTS = {
    "interaction.status_update": None,
    "interaction.in_progress": "in_progress",
    "interaction.requires_action": "requires_action",
}


class InteractionsAggregator:
    """Aggregates the body of a streamed Interactions API response (I1)."""

    def __init__(
        self,
        *,
        api: str = "interactions",
        deltas: bool = True,
        strict: bool = True,
        max_event_bytes: int = 64 * 1024 * 1024,
        max_array_index: int = 10_000,
    ) -> None:
        if api != "interactions":
            raise ValueError(f"api must be 'generate_content' or 'interactions', got {api!r}")
        self._deltas = bool(deltas)
        self._strict = bool(strict)
        self._max = _check_limit("max_event_bytes", max_event_bytes, _MAX_EVENT_BYTES_CAP)
        _check_limit("max_array_index", max_array_index, _MAX_ARRAY_INDEX_CAP)
        self._framer = _Framer(self._max)
        self._steps: dict[int, _Step] = {}
        self._interaction: dict[str, Any] = {}
        self._interaction_id: str | None = None
        self._status: str | None = None
        self._last_event_id: str | None = None
        self._continuation_token: str | None = None
        self._usage: Any = None
        self._error: Any = None
        self._complete = False
        self._truncated = False
        self._warnings: list[str] = []
        self._events_seen = 0
        self._bytes_seen = 0
        self._result: InteractionResponse | None = None

    @property
    def events_seen(self) -> int:
        """Payloads dispatched so far, good and bad (I2)."""
        return self._events_seen

    @property
    def bytes_seen(self) -> int:
        """Bytes given to ``feed()`` and ``feed_event()`` so far."""
        return self._bytes_seen

    def feed(self, data: bytes | bytearray | memoryview) -> list[Delta]:
        """Process a chunk of the body; return its deltas (I4 errors raised after it)."""
        self._check_open()
        chunk = _as_bytes(data)
        frames: list[_Frame] = []
        self._framer.feed(chunk, frames)
        deltas: list[Delta] = []
        errors: list[MalformedStreamError] = []
        for frame in frames:
            self._frame(frame, deltas, errors)
        self._bytes_seen += len(chunk)
        return self._finish_call(deltas, errors)

    def feed_event(self, payload: bytes | str) -> list[Delta]:
        """Process one data payload (its SSE event name unknown)."""
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
        if len(data) > self._max:
            self._report("event-too-large", offset, errors)
        else:
            self._payload(offset, data, None, deltas, errors)
        return self._finish_call(deltas, errors)

    def reconnect(self) -> None:
        """The connection dropped and the resumed stream follows (I20)."""
        self._check_open()
        self._framer.reconnect()

    def feed_chunk(self, chunk: Any) -> list[Delta]:
        """Not supported for this API (I1)."""
        raise TypeError(
            "feed_chunk() is not supported with api='interactions'; feed the body bytes with "
            "feed() or one data payload with feed_event()"
        )

    def snapshot(self) -> InteractionResponse:
        """The result so far; the state is not changed."""
        if self._result is not None:
            return self._result
        return self._render(closing=False)

    def finish(self) -> list[Any]:
        """Only for ``api="generate_content"`` (D5); here the stream ends with ``[DONE]``."""
        raise TypeError(
            "finish() is only for api='generate_content'; an Interactions stream ends with its [DONE] event: call close()"
        )

    def close(self) -> InteractionResponse:
        """End the stream (I3, I4, I17) and return the result; idempotent."""
        if self._result is not None:
            return self._result
        frames: list[_Frame] = []
        self._framer.close(frames)
        deltas: list[Delta] = []
        errors: list[MalformedStreamError] = []
        for frame in frames:
            self._frame(frame, deltas, errors)
        for err in errors:
            self._warnings.append(f"I4: {err}")
        result = self._render(closing=True)
        if self._bytes_seen > 0 and not self._framer.done:
            result._fields["warnings"].append("I3: the stream ended without the [DONE] sentinel")
        self._result = result
        return result

    # --- internals ---

    def _check_open(self) -> None:
        if self._result is not None:
            raise AggregatorClosed(
                "feed() after close(): this StreamAggregator is finished; "
                "create a new one for the next stream"
            )

    def _finish_call(self, deltas: list[Delta], errors: list[MalformedStreamError]) -> list[Delta]:
        out = deltas if self._deltas else []
        if errors:
            first = errors[0]
            first.deltas = out
            first.errors = errors
            raise first
        return out

    def _next_index(self) -> int:
        n = self._events_seen
        self._events_seen += 1
        return n

    def _report(self, problem: str, offset: int, errors: list[MalformedStreamError]) -> None:
        err = _malformed(problem, self._next_index(), offset, self._max)
        if self._strict:
            errors.append(err)
        else:
            self._warnings.append(f"I4: {err}")

    def _frame(
        self, frame: _Frame, deltas: list[Delta], errors: list[MalformedStreamError]
    ) -> None:
        kind, offset, data, name = frame
        if kind == _PAYLOAD:
            self._payload(offset, data, name, deltas, errors)
        elif kind == _TOO_LARGE:
            self._report("event-too-large", offset, errors)
        elif kind == _AFTER_DONE:
            self._warnings.append(f"I3: data after the [DONE] sentinel (byte {offset}) was ignored")
        elif kind == _UNTERMINATED:
            n = self._next_index()
            problem, event = _parse(data)
            if problem is None and event is not None:
                self._apply(n, event, name, deltas)
            else:
                self._warnings.append(f"I4: {_malformed(problem or '', n, offset, self._max)}")
                self._truncated = True

    def _payload(
        self,
        offset: int,
        data: bytes,
        name: str | None,
        deltas: list[Delta],
        errors: list[MalformedStreamError],
    ) -> None:
        problem, event = _parse(data)
        if problem is not None or event is None:
            self._report(problem or "", offset, errors)
            return
        self._apply(self._next_index(), event, name, deltas)

    def _apply(self, n: int, event: dict[str, Any], name: str | None, deltas: list[Delta]) -> None:
        event_id = _str(event, "event_id")
        if event_id is not None:
            self._last_event_id = event_id
        kind = _str(event, "event_type")
        if kind is None:
            kind = name
        if kind in ("interaction.created", "interaction.completed"):
            self._on_interaction(event, kind == "interaction.completed", deltas)
        elif kind in _STATUS_EVENTS:
            self._on_status(event, _STATUS_EVENTS[kind])
        elif kind in ("step.start", "step.delta", "step.stop"):
            self._on_step(n, kind, event, deltas)
        elif kind == "error":
            error = event.get("error")
            if error is None:
                error = event
            self._error = error
            self._complete = False
            if self._deltas:
                deltas.append(StreamError(_deep_copy(error)))
        else:
            shown = "<missing>" if kind is None else _q(kind)
            self._warnings.append(f"I5: event {n}: unknown event type {shown} skipped")

    def _on_interaction(self, event: dict[str, Any], completed: bool, deltas: list[Delta]) -> None:
        status: str | None = None
        obj = event.get("interaction")
        if isinstance(obj, dict):
            for k, v in obj.items():
                if v is not None:
                    self._interaction[k] = v
            if _str(obj, "id") is not None:
                self._interaction_id = _str(obj, "id")
            status = _str(obj, "status")
            if status is not None:
                self._status = status
            if isinstance(obj.get("usage"), dict):
                self._usage = obj["usage"]
            if _str(obj, "continuation_token") is not None:
                self._continuation_token = _str(obj, "continuation_token")
        if completed:
            self._complete = self._error is None
            if status and self._deltas:
                deltas.append(Finish(0, status))

    def _on_status(self, event: dict[str, Any], from_name: str | None) -> None:
        if self._interaction_id is None and _str(event, "interaction_id") is not None:
            self._interaction_id = _str(event, "interaction_id")
        obj = event.get("interaction")
        nested = _str(obj, "status") if isinstance(obj, dict) else None
        status = next(
            (s for s in (_str(event, "status"), nested, from_name) if s is not None), None
        )
        if status is not None:
            self._status = status
        if isinstance(event.get("usage"), dict):
            self._usage = event["usage"]
        if _str(event, "continuation_token") is not None:
            self._continuation_token = _str(event, "continuation_token")

    def _on_step(self, n: int, kind: str, event: dict[str, Any], deltas: list[Delta]) -> None:
        index = event.get("index")
        if type(index) is not int or not 0 <= index < 2**31:
            self._warnings.append(f"I9: event {n}: {kind} without a valid step index skipped")
            return
        if kind == "step.start":
            if index in self._steps:
                self._warnings.append(
                    f"I10: event {n}: step {index} already started; "
                    "the repeated step.start was skipped"
                )
                return
            value = event.get("step")
            step = _Step(dict(value) if isinstance(value, dict) else {})
            self._call_start(step, index, deltas)
            self._steps[index] = step
        elif kind == "step.delta":
            delta = event.get("delta")
            if not isinstance(delta, dict) or not isinstance(delta.get("type"), str):
                self._warnings.append(
                    f"I12: event {n}: step {index}: a delta without a type was skipped"
                )
                return
            dtype = delta["type"]
            self._ensure_step(n, index, _IMPLIED.get(dtype, dtype), deltas)
            meta = event.get("metadata")
            if isinstance(meta, dict) and isinstance(meta.get("total_usage"), dict):
                self._usage = meta["total_usage"]
            step = self._steps[index]
            if step.stopped:
                self._warnings.append(
                    f"I12: event {n}: step {index}: a delta after step.stop was skipped"
                )
                return
            args: list[tuple[str, Any]] = []
            text, long_path, problem = step.apply(dtype, delta, self._deltas, args)
            if long_path and step.parser is not None and not step.parser.long_path_warned:
                step.parser.long_path_warned = True
                self._warnings.append(
                    f"I15: step {index}: argument paths longer than 1024 bytes are not streamed live"
                )
            if problem is not None:
                self._warnings.append(f"I12: event {n}: step {index}: {problem}")
            if self._deltas:
                if text is not None:
                    deltas.append(TextDelta(0, index, text[0], text[1]))
                for path, value in args:
                    deltas.append(ArgDelta(0, index, path, value))
        else:
            self._ensure_step(n, index, None, deltas)
            if isinstance(event.get("usage"), dict):
                self._usage = event["usage"]
            step = self._steps[index]
            if step.stopped:
                return
            err = step.stop()
            if err is not None:
                self._warnings.append(f"I16: step {index}: {err}")
            elif step.is_call() and self._deltas:
                deltas.append(CallEnd(0, index, step.call(step.render())))

    def _ensure_step(self, n: int, index: int, kind: str | None, deltas: list[Delta]) -> None:
        if index in self._steps:
            return
        self._warnings.append(f"I11: event {n}: step {index} had no step.start")
        step = _Step({} if kind is None else {"type": kind})
        self._call_start(step, index, deltas)
        self._steps[index] = step

    def _call_start(self, step: _Step, index: int, deltas: list[Delta]) -> None:
        if self._deltas and step.is_call():
            get = step.value.get
            sid, sname = get("id"), get("name")
            deltas.append(
                CallStart(
                    0,
                    index,
                    sid if isinstance(sid, str) else None,
                    sname if isinstance(sname, str) else None,
                )
            )

    def _render(self, closing: bool) -> InteractionResponse:
        warnings = list(self._warnings)
        steps: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        unfinished: list[int] = []
        text: list[str] = []
        thought: list[str] = []
        for index in sorted(self._steps):
            step = self._steps[index]
            rendered = step.render()
            kind = step.type
            if kind == "model_output":
                _collect(rendered, "content", text)
            elif kind == "thought":
                _collect(rendered, "summary", thought)
            elif kind == "function_call":
                calls.append(step.call(rendered))
            if step.unfinished():
                unfinished.append(index)
            if closing and not step.stopped:
                shown = "null" if kind is None else _q(kind)
                warnings.append(f"I17: step {index} ({shown}) never received step.stop")
            steps.append(rendered)
        return InteractionResponse(
            steps=steps,
            function_calls=calls,
            interaction_id=self._interaction_id,
            status=self._status,
            last_event_id=self._last_event_id,
            continuation_token=self._continuation_token,
            interaction=_deep_copy(self._interaction),
            usage=_deep_copy(self._usage),
            error=_deep_copy(self._error),
            complete=self._complete,
            done=self._framer.done,
            truncated=self._truncated,
            warnings=warnings,
            unfinished_calls=unfinished,
            text="".join(text),
            thought_text="".join(thought),
        )


def _collect(rendered: dict[str, Any], key: str, out: list[str]) -> None:
    items = rendered.get(key)
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict) and item.get("type") == "text":
                t = item.get("text")
                if isinstance(t, str):
                    out.append(t)
