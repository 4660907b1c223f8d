"""The errors of bad payloads (F8, F10, I4): kinds and their diagnostics."""

from __future__ import annotations

from typing import Final, Literal

from ..diagnostics import Diagnostic
from ..errors import MalformedStreamError
from .diagnostics import _diagnostic, _text

# What is wrong with a payload; MalformedStreamError.kind is one of the first three.
Problem = Literal["invalid-json", "invalid-utf8", "event-too-large", "not-an-object"]
INVALID_JSON: Final = "invalid-json"
INVALID_UTF8: Final = "invalid-utf8"
EVENT_TOO_LARGE: Final = "event-too-large"
_NOT_AN_OBJECT: Final = "not-an-object"  # reported with kind "invalid-json"
# The catalog code of each problem; the Interactions API's codes have the prefix "ix_".
_CODES: dict[Problem, str] = {
    INVALID_JSON: "invalid_json",
    _NOT_AN_OBJECT: "not_an_object",
    INVALID_UTF8: "invalid_utf8",
    EVENT_TOO_LARGE: "event_too_large",
}


def _bad_payload(
    problem: Problem, index: int, offset: int, limit: int, *, interactions: bool = False
) -> Diagnostic:
    """The diagnostic of a bad payload (F8, F10; I4 with ``interactions``)."""
    code = ("ix_" if interactions else "") + _CODES[problem]
    if problem == EVENT_TOO_LARGE:
        return _diagnostic(code, event=index, offset=offset, limit=limit)
    return _diagnostic(code, event=index, offset=offset)


def _malformed(
    problem: str, index: int, offset: int, diagnostic: Diagnostic
) -> MalformedStreamError:
    """The error of a bad payload in strict mode; its text is its diagnostic's (X4)."""
    kind = INVALID_JSON if problem == _NOT_AN_OBJECT else problem
    return MalformedStreamError(_text(diagnostic), kind, offset, index, diagnostic=diagnostic)
