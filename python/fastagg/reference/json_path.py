"""jsonPath parsing and writes: the paths of streamed partial args (C4, C5, C9, C10, C16)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from .._json import JSONObject, JSONValue

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


def _holds_value(args: JSONObject, path: tuple[Segment, ...]) -> bool:
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


def _write_problem(args: JSONObject, path: tuple[Segment, ...]) -> str | None:
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
    args: JSONObject, path: tuple[Segment, ...], value: JSONValue, *, append: bool
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
    if append and isinstance(value, str):  # a stringValue fragment extends a string (C4)
        if isinstance(current, _StrBuf):
            current.fragments.append(value)
            return None
        if isinstance(current, str):
            node[seg] = _StrBuf([current, value])
            return None
    node[seg] = value
    return None
