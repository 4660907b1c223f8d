"""Rendering helpers: compact JSON (``q``, ``cj``), fresh copies, JSON identity."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from ..._json import JSONValue
from ..json_path import _StrBuf

_T = TypeVar("_T")


def _q(s: str) -> str:
    """``q(s)``: the JSON string literal of ``s`` without ASCII escaping."""
    return json.dumps(s, ensure_ascii=False)


def _cj(value: JSONValue) -> str:
    """``cj(v)``: compact JSON without ASCII escaping, floats as ``repr``."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


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


def _json_identity(value: JSONValue) -> str:
    """Equal for equal JSON values: tells 1, 1.0 and true apart (unlike ``==``),
    ignores key order."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _same_json(a: JSONValue, b: JSONValue) -> bool:
    if type(a) is str and type(b) is str:
        return a == b
    return _json_identity(a) == _json_identity(b)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same(value: _T) -> _T:
    return value
