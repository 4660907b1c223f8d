"""Payload validation (F8, F10): size -> UTF-8 -> JSON -> object."""

from __future__ import annotations

import orjson

from .._json import JSONObject
from .error import _NOT_AN_OBJECT, EVENT_TOO_LARGE, INVALID_JSON, INVALID_UTF8, Problem


def _parse_payload(payload: bytes, limit: int) -> JSONObject | Problem:
    """The event of a usable payload, else the problem (``INVALID_JSON`` ...).

    The checks run in the order of F10: size, UTF-8, JSON, object. orjson
    only accepts valid UTF-8, so UTF-8 is checked only when it refuses.
    """
    if len(payload) > limit:
        return EVENT_TOO_LARGE
    try:
        value = orjson.loads(payload)
    except orjson.JSONDecodeError:
        try:
            payload.decode("utf-8")
        except UnicodeDecodeError:
            return INVALID_UTF8
        return INVALID_JSON
    if not isinstance(value, dict):
        return _NOT_AN_OBJECT
    return value
