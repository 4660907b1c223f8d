"""Structured diagnostics, shared by the Rust core and the pure-Python twin (spec/diagnostics.md).

A diagnostic says what a stream's aggregation skipped, repaired or dropped:
its catalog ``code``, the ``rule`` that decided it, the rendered ``message``
(the text ``warnings`` lists; it names no rule, X6) and its typed fields. The codes, rules, fields and
templates come from the catalog ``diagnostics.json`` beside this module (X1), which
the Rust core embeds at compile time; it is read here on first use, not at import (R1).
"""

from __future__ import annotations

import os
from typing import NoReturn

_Entry = tuple[str, tuple[str, ...], str]
#: X1, once read: (field name -> type, code -> (rule, fields in order, template)).
_read: tuple[dict[str, str], dict[str, _Entry]] | None = None


def _load() -> tuple[dict[str, str], dict[str, _Entry]]:
    """X1: the catalog ``diagnostics.json``, read the first time a diagnostic is made."""
    global _read
    if _read is None:
        import json  # here, not at import (R1)

        path = os.path.join(os.path.dirname(__file__), "diagnostics.json")
        with open(path, encoding="utf-8") as fh:
            catalog = json.load(fh)
        entries = {
            e["code"]: (e["rule"], tuple(e["fields"]), e["template"])
            for e in catalog["diagnostics"]
        }
        _read = (catalog["fields"], entries)  # whole or not at all, for other threads
    return _read


def _catalog() -> dict[str, _Entry]:
    """X1: code -> (rule, fields in order, template)."""
    return _load()[1]


def _field_types() -> dict[str, str]:
    """X1: field name -> type: ``int``, ``str``, ``str?`` (None when absent) or ``json``."""
    return _load()[0]


class Diagnostic:
    """One diagnostic (X5): frozen; ``code``, ``rule``, ``message`` and the catalog's fields.

    Every catalog field is an attribute; it is None when this diagnostic's code
    does not have it (or, for the ``str?`` fields, when it is absent).
    """

    __slots__ = (
        "args",
        "bytes",
        "call_id",
        "candidate",
        "code",
        "count",
        "encoding",
        "event",
        "event_type",
        "expected",
        "json_path",
        "kept_id",
        "kept_name",
        "limit",
        "message",
        "name",
        "new_id",
        "offset",
        "part",
        "path",
        "reason",
        "rule",
        "step",
        "step_type",
    )

    code: str
    rule: str
    message: str
    event: int | None
    offset: int | None
    bytes: int | None
    limit: int | None
    count: int | None
    path: str | None
    expected: str | None
    kept_id: object
    new_id: object
    candidate: int | None
    part: int | None
    name: str | None
    kept_name: str | None
    json_path: str | None
    reason: str | None
    call_id: str | None
    args: object
    event_type: str | None
    step: int | None
    step_type: str | None
    encoding: str | None

    def __init__(self, code: str, message: str, **fields: object) -> None:
        entry = _catalog().get(code)
        if entry is None:
            raise ValueError(f"unknown diagnostic code {code!r}")
        rule, names, _ = entry
        if set(fields) != set(names):
            raise TypeError(
                f"diagnostic {code!r} has the fields {list(names)}, got {sorted(fields)}"
            )
        put = object.__setattr__
        put(self, "code", code)
        put(self, "rule", rule)
        put(self, "message", message)
        for slot in self.__slots__:
            if slot not in ("code", "rule", "message"):
                put(self, slot, fields.get(slot))

    def fields(self) -> dict[str, object]:
        """This code's own fields, in catalog order."""
        return {name: getattr(self, name) for name in _catalog()[self.code][1]}

    def as_dict(self) -> dict[str, object]:
        """``{"code", "rule", "message"}`` and this code's own fields (X5)."""
        return {"code": self.code, "rule": self.rule, "message": self.message, **self.fields()}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Diagnostic):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        # The message is rendered from code and fields, and JSON fields may be dicts.
        return hash((self.code, self.message))

    def __repr__(self) -> str:
        shown = "".join(f", {k}={v!r}" for k, v in self.fields().items())
        return f"Diagnostic(code={self.code!r}, rule={self.rule!r}{shown})"

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"Diagnostic is frozen: cannot set {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Diagnostic is frozen: cannot delete {name!r}")

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (self.code, self.message, self.fields()))


def _rebuild(code: str, message: str, fields: dict[str, object]) -> Diagnostic:
    return Diagnostic(code, message, **fields)
