"""How fastagg's objects print (spec/api.md V1-V5): like a dataclass, short for big payloads.

One implementation for the compiled core and the twin: the extension's ``__repr__`` methods
call these functions, so ``repr`` reads the same from both (V1). Values are shortened (V2): a
string over :data:`MAX_CHARS` characters, a list or dict over :data:`MAX_ITEMS` entries, a
container nested deeper than :data:`MAX_DEPTH`, or anything past the :data:`BUDGET` of
entries one ``repr`` shows, is cut with ``...`` and followed by its full size in parentheses:
``'Paris is the ...' (231 chars)``, ``[1, 2, ...] (20 items)``, ``{...} (3 keys)``.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

__all__ = ["candidate", "interaction", "record", "response", "turn_result"]

MAX_CHARS = 60
"""Characters of a string shown before ``...`` (V2)."""
MAX_ITEMS = 8
"""Entries of one list or dict shown before ``...`` (V2)."""
MAX_DEPTH = 4
"""Containers nested deeper than this show only their size (V2)."""
BUDGET = 50
"""Entries (list items, dict keys) one whole ``repr`` shows, first fields first (V2)."""


class _Size:
    """A list shown only by its size: ``[...] (3 items)``, or ``[]`` (V3)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


class _Shortener:
    """Renders values within one ``repr``'s shared budget of entries."""

    def __init__(self) -> None:
        self.left = BUDGET

    def __call__(self, value: Any, depth: int = 0) -> str:
        if isinstance(value, _Size):
            n = len(value.value)
            return f"[...] ({_plural(n, 'item')})" if n else "[]"
        if isinstance(value, Enum):
            return f"{type(value).__name__}.{value.name}"
        if isinstance(value, str):
            if len(value) <= MAX_CHARS:
                return repr(value)
            return f"{value[:MAX_CHARS] + '...'!r} ({_plural(len(value), 'char')})"
        if isinstance(value, dict):
            return self._entries(value.items(), len(value), depth, "{", "}", "key", self._pair)
        if isinstance(value, list):
            return self._entries(value, len(value), depth, "[", "]", "item", self)
        if isinstance(value, tuple):
            if len(value) == 1 and depth < MAX_DEPTH and self.left > 0:
                self.left -= 1
                return f"({self(value[0], depth + 1)},)"
            return self._entries(value, len(value), depth, "(", ")", "item", self)
        try:
            return repr(value)
        except ValueError:  # an int over Python's digit limit for str()
            return f"<int of {value.bit_length()} bits>"

    def _pair(self, pair: tuple[Any, Any], depth: int) -> str:
        key, value = pair
        return f"{self(key, depth)}: {self(value, depth)}"

    def _entries(
        self,
        entries: Any,
        n: int,
        depth: int,
        opening: str,
        closing: str,
        unit: str,
        render: Any,
    ) -> str:
        if n == 0:
            return opening + closing
        if depth >= MAX_DEPTH or self.left <= 0:
            return f"{opening}...{closing} ({_plural(n, unit)})"
        shown: list[str] = []
        for entry in entries:
            if len(shown) == MAX_ITEMS or self.left <= 0:
                break
            self.left -= 1
            shown.append(render(entry, depth + 1))
        if len(shown) == n:
            return opening + ", ".join(shown) + closing
        return f"{opening}{', '.join(shown)}, ...{closing} ({_plural(n, unit)})"


def _render(name: str, fields: list[tuple[str, Any]]) -> str:
    short = _Shortener()
    return f"{name}({', '.join(f'{key}={short(value)}' for key, value in fields)})"


def _fields(obj: Any, spec: str) -> list[tuple[str, Any]]:
    """The fields ``spec`` names, in order: ``name`` always, ``name?`` when it says something
    (not None, False, empty or zero), ``#name`` by its size only (V3)."""
    out: list[tuple[str, Any]] = []
    for word in spec.split():
        if word.startswith("#"):
            out.append((word[1:], _Size(getattr(obj, word[1:]))))
        elif word.endswith("?"):
            value = getattr(obj, word[:-1])
            if value:
                out.append((word[:-1], value))
        else:
            out.append((word, getattr(obj, word)))
    return out


def record(obj: Any) -> str:
    """A delta, a turn event or an ``SseEvent``: every field, in ``__match_args__`` order (V4)."""
    names: tuple[str, ...] = type(obj).__match_args__
    return _render(type(obj).__name__, [(name, getattr(obj, name)) for name in names])


def response(obj: Any) -> str:
    """``AggregatedResponse``: candidate 0's answer first, then how it ended (V3)."""
    fields = _fields(
        obj,
        "text thought_text? function_calls unfinished_calls? finish_reason finish_message? "
        "complete truncated? prompt_feedback? error? warnings? usage? #parts",
    )
    if len(obj.candidates) > 1:
        fields.append(("candidates", _Size(obj.candidates)))
    return _render("AggregatedResponse", fields)


def candidate(obj: Any) -> str:
    """``Candidate``: its index, then as ``AggregatedResponse`` (V3)."""
    return _render(
        "Candidate",
        _fields(
            obj,
            "index text thought_text? function_calls unfinished_calls? finish_reason "
            "finish_message? #parts",
        ),
    )


def interaction(obj: Any) -> str:
    """``InteractionResponse``: its id and status, then as ``AggregatedResponse`` (V3)."""
    fields = _fields(
        obj,
        "interaction_id status text thought_text? function_calls unfinished_calls? complete "
        "truncated? error? warnings? usage? #steps",
    )
    fields[0] = ("id", fields[0][1])
    return _render("InteractionResponse", fields)


def turn_result(obj: Any) -> str:
    """``TurnResult``: why the turn ended and its answer first (V5)."""
    fields = _fields(
        obj,
        "stop_reason text message? finish_reason raw_finish_reason steps_used tool_call_count "
        "elapsed error? usage",
    )
    retries = {k: v for k, v in obj.retries.items() if v}
    if retries:
        fields.append(("retries", retries))
    if any(obj.signatures.values()):
        fields.append(("signatures", obj.signatures))
    if obj.hops:
        fields.append(("hops", obj.hops))
    fields.append(("contents", _Size(obj.contents)))
    return _render("TurnResult", fields)
