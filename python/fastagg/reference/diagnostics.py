"""Structured diagnostics (spec/diagnostics.md X1-X5), rendered from the shared catalog.

Every warning of the twin is a ``Diagnostic``: a code of
``spec/diagnostics.json`` (carried as ``fastagg._diagnostics_table``), its
rule, its typed fields, and the message ``_diagnostic()`` renders from the
code's template (X2). ``.warnings`` are the messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .._diagnostics_table import DIAGNOSTICS
from .._json import JSONObject, JSONValue
from .aggregate.render import _cj

# X2: `{field}` or `{field!j}`, and `[[...]]` groups left out when a field in them is null.
_PLACEHOLDER = re.compile(r"\{([a-z_]+)(!j)?\}")
_OPTIONAL = re.compile(r"\[\[(.*?)\]\]")


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One warning or error, structured (X5): code, rule, rendered message and the catalog's fields.

    A field the code does not have is None. ``message`` is what ``.warnings``
    holds.
    """

    code: str
    rule: str
    message: str
    event: int | None = None
    offset: int | None = None
    bytes: int | None = None
    limit: int | None = None
    count: int | None = None
    path: str | None = None
    expected: str | None = None
    kept_id: JSONValue = None
    new_id: JSONValue = None
    candidate: int | None = None
    part: int | None = None
    name: str | None = None
    kept_name: str | None = None
    json_path: str | None = None
    reason: str | None = None
    call_id: str | None = None
    args: JSONValue = None
    event_type: str | None = None
    step: int | None = None
    step_type: str | None = None

    def as_dict(self) -> JSONObject:
        """``{"code", "rule", "message"}`` plus the code's own fields (X5)."""
        out: JSONObject = {"code": self.code, "rule": self.rule, "message": self.message}
        for name in DIAGNOSTICS[self.code][1]:
            out[name] = getattr(self, name)
        return out


def _field_text(value: JSONValue, as_json: bool) -> str:
    return _cj(value) if as_json else str(value)


def _render(template: str, values: JSONObject) -> str:
    """X2: the template with its placeholders replaced and its optional groups decided."""

    def group(m: re.Match[str]) -> str:
        inner = m.group(1)
        names = _PLACEHOLDER.findall(inner)
        return inner if all(values[name] is not None for name, _ in names) else ""

    text = _OPTIONAL.sub(group, template)
    return _PLACEHOLDER.sub(lambda m: _field_text(values[m.group(1)], bool(m.group(2))), text)


def _diagnostic(code: str, **values: Any) -> Diagnostic:
    """The diagnostic ``code`` with ``values`` (exactly the code's catalog fields), rendered."""
    rule, names, template = DIAGNOSTICS[code]
    assert set(values) == set(names), (code, sorted(values))  # X1: the catalog's fields, no other
    message = f"{rule}: {_render(template, values)}"
    return Diagnostic(code, rule, message, **values)


def _text(diagnostic: Diagnostic) -> str:
    """The message without its ``"{rule}: "`` prefix: the text of an exception (X4)."""
    return diagnostic.message[len(diagnostic.rule) + 2 :]
