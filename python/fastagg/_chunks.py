"""Turning what ``feed_chunk()`` accepts into a plain JSON dict (aggregation addendum D2a, D3).

Shared by the Rust core and the reference, so both see the same payload.
"""

from __future__ import annotations

import base64
import datetime
import enum
import math
from collections.abc import Mapping
from typing import Any

# SDK-side attributes of a google-genai response that are not wire data.
_GENAI_LOCAL_FIELDS = {"sdk_http_response", "parsed", "automatic_function_calling_history"}


def chunk_to_mapping(chunk: Any) -> dict[str, Any]:
    """Return ``chunk`` as a fresh REST camelCase dict of plain JSON values.

    Accepts a mapping, or a google-genai ``GenerateContentResponse`` (anything
    with pydantic's ``model_dump``): it is dumped by alias, ``None`` values and
    SDK-only fields left out. SDK objects are read field by field
    (integrations G4), which gives the same dict as ``model_dump`` at a
    fraction of its cost; anything unusual takes the ``model_dump`` path,
    whose errors name the offending place. ``bytes`` (google-genai keeps
    ``thought_signature`` as bytes) become standard base64 strings, as the
    wire carries them; datetimes become RFC 3339 strings; enums their value;
    integers outside 64 bits floats (as a JSON parser reads them).
    """
    if isinstance(chunk, Mapping):
        return _plain(chunk, "$")  # type: ignore[no-any-return]
    if _aliases(type(chunk)) is not None:
        try:
            return _fast(chunk)  # type: ignore[no-any-return]
        except _NeedsPath:
            pass
    dump = getattr(chunk, "model_dump", None)
    if dump is None:
        raise TypeError(
            "feed_chunk() takes a dict or a google-genai GenerateContentResponse, "
            f"not {type(chunk).__name__}"
        )
    return _plain(dump(by_alias=True, exclude_none=True, exclude=_GENAI_LOCAL_FIELDS), "$")  # type: ignore[no-any-return]


class _NeedsPath(Exception):
    """A value the fast path does not handle: redo the chunk on the path-tracking one."""


# Per pydantic model class: field name -> wire (alias) name, SDK-only fields left
# out; None for any other class.
_ALIASES: dict[type, dict[str, str] | None] = {}


def _aliases(cls: type) -> dict[str, str] | None:
    try:
        return _ALIASES[cls]
    except KeyError:
        pass
    fields = getattr(cls, "model_fields", None)
    table = None
    if isinstance(fields, Mapping) and hasattr(cls, "model_dump"):
        table = {
            name: getattr(info, "alias", None) or name
            for name, info in fields.items()
            if name not in _GENAI_LOCAL_FIELDS
        }
    _ALIASES[cls] = table
    return table


def _fast(value: Any) -> Any:
    """``_plain(model_dump(by_alias=True, exclude_none=True))`` for the common types (G4)."""
    t = type(value)
    if t is str or t is bool or value is None:
        return value
    table = _ALIASES[t] if t in _ALIASES else _aliases(t)
    if table is not None:
        return {
            table[name]: _fast(item)
            for name, item in value.__dict__.items()
            if item is not None and name in table
        }
    if t is list:
        return [_fast(item) for item in value]
    if t is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NeedsPath
            out[key] = _fast(item)
        return out
    if t is int and -(2**63) <= value < 2**64:
        return value
    if t is float and math.isfinite(value):
        return value
    if t is bytes:
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, enum.Enum):
        return _fast(value.value)
    raise _NeedsPath


def _plain(value: Any, where: str) -> Any:
    if value is None or type(value) in (str, bool):
        return value
    if isinstance(value, enum.Enum):
        return _plain(value.value, where)
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
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"feed_chunk(): key {key!r} in {where} is not a string")
            out[str.__str__(key)] = _plain(item, f"{where}.{key}")
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat().replace("+00:00", "Z")
    raise TypeError(f"feed_chunk(): {where} is a {type(value).__name__}, which is not a JSON type")
