"""The errors of bad payloads (F8, F10): kinds and message texts, word for word."""

from __future__ import annotations

from ..errors import MalformedStreamError

INVALID_JSON = "invalid-json"
INVALID_UTF8 = "invalid-utf8"
EVENT_TOO_LARGE = "event-too-large"
_NOT_AN_OBJECT = "not-an-object"  # reported with kind "invalid-json"


def _malformed(problem: str, index: int, offset: int, limit: int) -> MalformedStreamError:
    """The error of F10 with its message, word for word."""
    where = f"event {index} at byte {offset}"
    if problem == INVALID_UTF8:
        message = f"{where} is not valid UTF-8; it was skipped"
    elif problem == EVENT_TOO_LARGE:
        message = (
            f"{where} is larger than max_event_bytes ({limit}); it was skipped "
            "(raise max_event_bytes if such events are expected)"
        )
    elif problem == _NOT_AN_OBJECT:
        message = f"{where} is JSON but not an object; it was skipped"
    else:
        message = (
            f"{where} is not valid JSON; it was skipped "
            "(is this the body of a streamGenerateContent response?)"
        )
    kind = INVALID_JSON if problem == _NOT_AN_OBJECT else problem
    return MalformedStreamError(message, kind, offset, index)
