"""Turning what ``feed_chunk()`` accepts into a plain JSON dict (aggregation addendum D2a, D3).

Shared by the Rust core and the reference, so both see the same payload.
"""

from __future__ import annotations

import base64
import datetime
import enum
import math
import sys
from collections.abc import Mapping
from typing import Any

# SDK-side attributes of a google-genai response that are not wire data.
_GENAI_LOCAL_FIELDS = {"sdk_http_response", "parsed", "automatic_function_calling_history"}


def chunk_to_mapping(chunk: Any) -> dict[str, Any]:
    """Return ``chunk`` as a fresh REST camelCase dict of plain JSON values.

    Accepts a mapping, or a google-genai ``GenerateContentResponse`` (anything
    with pydantic's ``model_dump``): it is dumped by alias, ``None`` values and
    SDK-only fields left out. ``bytes`` (google-genai keeps
    ``thought_signature`` as bytes) become standard base64 strings, as the
    wire carries them; datetimes become RFC 3339 strings; enums their value;
    integers outside 64 bits floats (as a JSON parser reads them).
    """
    if not isinstance(chunk, Mapping):
        dump = getattr(chunk, "model_dump", None)
        if dump is None:
            raise TypeError(
                "feed_chunk() takes a dict or a google-genai GenerateContentResponse, "
                f"not {type(chunk).__name__}"
            )
        chunk = dump(by_alias=True, exclude_none=True, exclude=_GENAI_LOCAL_FIELDS)
    try:
        return _plain(chunk, "$", 1)  # type: ignore[no-any-return]
    except RecursionError:
        # D2c: a ValueError like any other unreadable chunk, not a RecursionError.
        raise ValueError(
            "feed_chunk(): the chunk is nested deeper than Python's recursion limit allows "
            f"(sys.getrecursionlimit() is {sys.getrecursionlimit()})"
        ) from None


MAX_DEPTH = 1024  # F10: the nesting limit of orjson and of fastagg


def _plain(value: Any, where: str, depth: int) -> Any:
    if value is None or type(value) in (str, bool):
        return value
    if isinstance(value, enum.Enum):
        return _plain(value.value, where, depth)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        value = int(value)
        return value if -(2**63) <= value < 2**64 else float(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"feed_chunk(): {where} is {value!r}, which JSON cannot carry")
        return float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if depth > MAX_DEPTH and isinstance(value, (Mapping, list, tuple)):
        raise ValueError(f"feed_chunk(): {where} is nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"feed_chunk(): key {key!r} in {where} is not a string")
            out[str.__str__(key)] = _plain(item, f"{where}.{key}", depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat().replace("+00:00", "Z")
    raise TypeError(f"feed_chunk(): {where} is a {type(value).__name__}, which is not a JSON type")
