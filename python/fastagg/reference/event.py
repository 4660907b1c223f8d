"""Payload validation (F8, F10): size -> UTF-8 -> JSON -> object."""

from __future__ import annotations

from typing import Any

import orjson

from .error import _NOT_AN_OBJECT, EVENT_TOO_LARGE, INVALID_JSON, INVALID_UTF8


def _parse_payload(payload: bytes, limit: int) -> tuple[str | None, Any]:
    """``(None, event)`` for a usable payload, else ``(problem, None)``.

    The checks run in the order of F10: size, UTF-8, JSON, object. orjson
    only accepts valid UTF-8, so UTF-8 is checked only when it refuses.
    """
    if len(payload) > limit:
        return EVENT_TOO_LARGE, None
    try:
        value = orjson.loads(payload)
    except orjson.JSONDecodeError:
        try:
            payload.decode("utf-8")
        except UnicodeDecodeError:
            return INVALID_UTF8, None
        return INVALID_JSON, None
    if not isinstance(value, dict):
        return _NOT_AN_OBJECT, None
    return None, value
