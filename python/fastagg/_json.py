"""Named shapes of JSON data, instead of ``dict[str, Any]`` everywhere (issue 11)."""

from __future__ import annotations

from typing import Any, TypeAlias

# Any JSON value as ``json.loads`` / ``orjson.loads`` returns it.
JSONValue: TypeAlias = "str | int | float | bool | list[JSONValue] | dict[str, JSONValue] | None"
# A JSON object. Values are ``Any``: payloads are untrusted and read with
# isinstance checks, and ``dict`` is invariant, so a recursive value type
# would reject every literal that is not annotated.
JSONObject: TypeAlias = dict[str, Any]
# A REST camelCase ``Part`` (``{"text": ...}``, ``{"functionCall": ...}``, ...).
Part: TypeAlias = JSONObject
# A REST ``Content``: ``{"role": ..., "parts": [Part, ...]}``.
Content: TypeAlias = JSONObject
