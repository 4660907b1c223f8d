"""The twin's diagnostics (spec/diagnostics.md X1-X5), rendered from the shared catalog.

Every warning of the twin is a ``fastagg.Diagnostic`` (the one class the Rust
binding builds too): a code of the catalog ``fastagg/diagnostics.json`` with its
typed fields, and the message ``_diagnostic()`` renders from the code's template
(X2). ``.warnings`` are the messages.
"""

from __future__ import annotations

import re

from .._json import JSONObject, JSONValue
from ..diagnostics import Diagnostic, _catalog
from .aggregate.render import _cj

# X2: `{field}` or `{field!j}`, and `[[...]]` groups left out when a field in them is null.
_PLACEHOLDER = re.compile(r"\{([a-z_]+)(!j)?\}")
_OPTIONAL = re.compile(r"\[\[(.*?)\]\]")


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


def _diagnostic(code: str, **values: JSONValue) -> Diagnostic:
    """The diagnostic ``code`` with ``values`` (exactly the code's catalog fields), rendered."""
    _rule, _names, template = _catalog()[code]
    return Diagnostic(code, _render(template, values), **values)  # X6: no rule id in it


def _text(diagnostic: Diagnostic) -> str:
    """The text of an exception: the diagnostic's message (X4)."""
    return diagnostic.message
