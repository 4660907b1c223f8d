"""Function-call arguments as incremental strict JSON (I14-I17)."""

from __future__ import annotations

import re
from typing import Any

from ..._json import JSONValue
from ..aggregate.render import _q

MAX_LIVE_PATH = 1024
_MAX_DEPTH = 1024
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING_RUN = re.compile(r'[^"\\\x00-\x1f]+')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_LITERALS = (("true", True), ("false", False), ("null", None))
_WS = " \t\n\r"
_STRING_STATES = frozenset({"str", "escape", "unicode", "low"})
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
    """One call's argument text, parsed as it arrives.

    Longer than ~300 lines on purpose: the lexer state (``lex``, ``cur``), the
    container stack and the live path are one state machine that every
    method reads and writes; split into classes, they would only hand that
    state to each other.
    """

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

    def feed(self, fragment: str, live: bool, out: list[tuple[str, JSONValue]]) -> bool:
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

    def _emit(self, value: Any, out: list[tuple[str, JSONValue]], long_path: list[bool]) -> None:
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

    def _send_piece(
        self, done: bool, out: list[tuple[str, JSONValue]], long_path: list[bool]
    ) -> None:
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

    def _finish_number(self, out: list[tuple[str, JSONValue]], long_path: list[bool]) -> None:
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

    def _end_string(
        self, live: bool, out: list[tuple[str, JSONValue]], long_path: list[bool]
    ) -> None:
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

    def _char(
        self, c: str, live: bool, out: list[tuple[str, JSONValue]], long_path: list[bool]
    ) -> None:
        lex = self.lex
        if lex in _STRING_STATES:
            self._string_char(c, live, out, long_path)
        elif lex == "number":
            self._number_char(c, live, out, long_path)
        elif lex == "literal":
            self._literal_char(c, out, long_path)
        elif c not in _WS:
            self._structural_char(c, lex)

    def _structural_char(self, c: str, lex: str) -> None:
        """A character outside strings and scalars: where the grammar allows it, or an error."""
        if lex == "start":
            if c != "{":
                raise _ParseError("arguments are not a JSON object")
            self._open(True)
        elif lex == "value":
            self._begin_value(c)
        elif lex == "arrfirst":
            if c == "]":
                self._close_container()
            else:
                self._begin_value(c)
        elif lex in ("objfirst", "key"):
            if c == "}" and lex == "objfirst":
                self._close_container()
            elif c == '"':
                self.cur, self.cur_len, self.sent = [], 0, 0
                self.key_str = True
                self.lex = "str"
            else:
                raise _ParseError(f"unexpected character {_q(c)}")
        elif lex == "colon":
            if c != ":":
                raise _ParseError(f"unexpected character {_q(c)}")
            self.lex = "value"
        elif lex == "after":
            kind = self.stack[-1][0] if self.stack else None
            if c == "," and kind == "obj":
                self.lex = "key"
            elif c == "," and kind == "arr":
                self.lex = "value"
            elif (c == "}" and kind == "obj") or (c == "]" and kind == "arr"):
                self._close_container()
            else:
                raise _ParseError(f"unexpected character {_q(c)}")
        elif lex == "done":
            raise _ParseError(f"unexpected character {_q(c)}")

    def _string_char(
        self, c: str, live: bool, out: list[tuple[str, JSONValue]], long_path: list[bool]
    ) -> None:
        """A character inside a string: its end, an escape, or a \\u escape's digits."""
        lex = self.lex
        if lex == "str":
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
            self._unicode_digit(c)
        elif self.low_stage == 0 and c == "\\":  # "low": the backslash-u of the low surrogate
            self.low_stage = 1
        elif self.low_stage == 1 and c == "u":
            self.uni = ""
            self.lex = "unicode"
        else:
            raise _ParseError("lone surrogate")

    def _unicode_digit(self, c: str) -> None:
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

    def _number_char(
        self, c: str, live: bool, out: list[tuple[str, JSONValue]], long_path: list[bool]
    ) -> None:
        nxt = _num_next(self.num_state, c)
        if nxt is not None:
            self.num += c
            self.num_state = nxt
            return
        if self.num_state not in _NUM_ACCEPT:
            raise _ParseError(f"unexpected character {_q(c)}")
        self._finish_number(out, long_path)
        self._char(c, live, out, long_path)  # the delimiter belongs to what follows

    def _literal_char(
        self, c: str, out: list[tuple[str, JSONValue]], long_path: list[bool]
    ) -> None:
        word, value = _LITERALS[self.lit]
        if self.lit_pos >= len(word) or word[self.lit_pos] != c:
            raise _ParseError(f"unexpected character {_q(c)}")
        if self.lit_pos + 1 == len(word):
            self._emit(value, out, long_path)
            self._put(value)
        else:
            self.lit_pos += 1
