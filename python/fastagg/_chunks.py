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

from ._json import JSONObject

# SDK-side attributes of a google-genai response that are not wire data.
_GENAI_LOCAL_FIELDS = {"sdk_http_response", "parsed", "automatic_function_calling_history"}


def chunk_to_mapping(chunk: Any) -> JSONObject:
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
    try:
        return _to_mapping(chunk)
    except RecursionError:
        # D2c: a ValueError like any other unreadable chunk, not a RecursionError.
        raise ValueError(
            "feed_chunk(): the chunk is nested deeper than Python's recursion limit allows "
            f"(sys.getrecursionlimit() is {sys.getrecursionlimit()})"
        ) from None


def _to_mapping(chunk: Any) -> JSONObject:
    if isinstance(chunk, Mapping):
        return _plain(chunk, "$", 1)  # type: ignore[no-any-return]
    if _model_of(type(chunk)) is not None:
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
    return _plain(dump(by_alias=True, exclude_none=True, exclude=_GENAI_LOCAL_FIELDS), "$", 1)  # type: ignore[no-any-return]


class _NeedsPath(Exception):
    """A value the fast path does not handle: redo the chunk on the path-tracking one."""


class _Model:
    """How to read one pydantic model class: wire names, field order, non-None defaults."""

    __slots__ = ("alias", "always", "layouts", "order")

    def __init__(self, fields: Mapping[str, Any]) -> None:
        wire = [name for name in fields if name not in _GENAI_LOCAL_FIELDS]
        self.alias = {name: getattr(fields[name], "alias", None) or name for name in wire}
        self.order = {name: i for i, name in enumerate(wire)}
        # Fields a model holds without their being set: those with a default
        # other than None (google-genai has none, but a subclass may).
        self.always = frozenset(
            name
            for name in wire
            if getattr(fields[name], "default", None) is not None
            or getattr(fields[name], "default_factory", None) is not None
        )
        # G8: per set of set fields (as pydantic iterates it), the (field, wire
        # name) pairs in field order; a chunk's models repeat a few such sets.
        self.layouts: dict[tuple[str, ...], tuple[tuple[str, str], ...]] = {}

    def layout(self, names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
        found = self.layouts.get(names)
        if found is None:
            wire = sorted((n for n in names if n in self.alias), key=self.order.__getitem__)
            found = tuple((n, self.alias[n]) for n in wire)
            if len(self.layouts) < _MAX_LAYOUTS:  # odd chunks cannot grow it without bound
                self.layouts[names] = found
        return found


_MAX_LAYOUTS = 256


# Per class: how to read it when it is a pydantic model, else None.
_MODELS: dict[type, _Model | None] = {}


def _model_of(cls: type) -> _Model | None:
    try:
        return _MODELS[cls]
    except KeyError:
        pass
    fields = getattr(cls, "model_fields", None)
    info = (
        _Model(fields)
        if isinstance(fields, Mapping) and hasattr(cls, "__pydantic_fields_set__")
        else None
    )
    _MODELS[cls] = info
    return info


def _fast(value: Any) -> Any:
    """``_plain(model_dump(by_alias=True, exclude_none=True))`` for the common types (G4).

    A model is read through its set fields (pydantic records every field given
    or assigned), in field order: google-genai models have ~20 fields, of
    which a chunk sets a few.
    """
    t = type(value)
    if t is str or t is bool or value is None:
        return value
    info = _MODELS[t] if t in _MODELS else _model_of(t)
    if info is not None:
        names = value.__pydantic_fields_set__
        if info.always:
            names = names | info.always
        held = value.__dict__
        out = {}
        for name, wire in info.layout(tuple(names)):
            item = held.get(name)
            if item is not None:
                # G8: strings (most leaves) without a call.
                out[wire] = item if type(item) is str else _fast(item)
        return out
    if t is list:
        return [_fast(item) for item in value]
    if t is dict:
        plain = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NeedsPath
            plain[key] = _fast(item)
        return plain
    if t is int and -(2**63) <= value < 2**64:
        return value
    if t is float and math.isfinite(value):
        return value
    if t is bytes:
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, enum.Enum):
        return _fast(value.value)
    if t is datetime.datetime:
        return value.isoformat().replace("+00:00", "Z")
    raise _NeedsPath


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
        out: JSONObject = {}
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
