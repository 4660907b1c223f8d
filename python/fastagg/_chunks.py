"""Turning what `feed_chunk()` accepts into a plain JSON dict (aggregation addendum D3).

Shared by the Rust core and the reference, so both see the same payload.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from typing import Any


def chunk_to_mapping(chunk: Any) -> dict[str, Any]:
    """Return ``chunk`` as a REST camelCase dict of plain JSON values.

    Accepts a mapping, or a google-genai ``GenerateContentResponse`` (anything
    with pydantic's ``model_dump``): it is dumped by alias with ``None``
    values left out. ``bytes`` values (google-genai keeps ``thought_signature``
    as bytes) become standard base64 strings, as the wire carries them.
    """
    if not isinstance(chunk, Mapping):
        dump = getattr(chunk, "model_dump", None)
        if dump is None:
            raise TypeError(
                f"feed_chunk() takes a dict or a google-genai GenerateContentResponse, "
                f"not {type(chunk).__name__}"
            )
        chunk = dump(by_alias=True, exclude_none=True)
    converted = _plain(chunk, "$")
    assert isinstance(converted, dict)
    return converted


def _plain(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        # JSON parsers (orjson, serde_json) read integers outside 64 bits as floats.
        return value if -(2**63) <= value < 2**64 else float(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"feed_chunk(): {where} is {value!r}, which JSON cannot carry")
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"feed_chunk(): key {key!r} in {where} is not a string")
            out[key] = _plain(item, f"{where}.{key}")
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if hasattr(value, "value") and hasattr(type(value), "__members__"):  # an Enum
        return _plain(value.value, where)
    raise TypeError(
        f"feed_chunk(): {where} is a {type(value).__name__}, which is not a JSON type"
    )
