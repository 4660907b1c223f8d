"""Named shapes of the JSON fastagg reads and writes: the Gemini REST bodies, in camelCase.

They are aliases, so a plain ``dict`` is accepted wherever one is named, and they
say which shape a value has where ``dict[str, Any]`` said nothing:

- :data:`JSONValue`: any JSON value, as ``orjson.loads`` returns it.
- :data:`JSONObject`: a JSON object of no more specific shape.
- :data:`Content`: a ``Content`` (``{"role": "user" | "model", "parts": [Part, ...]}``).
- :data:`Part`: one ``Part`` of a content (``text``, ``thought``, ``thoughtSignature``,
  ``functionCall``, ``functionResponse``, ``inlineData`` ...).
- :data:`FunctionCall`: a part's ``functionCall`` (``name``, ``args``, ``id``).
- :data:`Request`: a ``GenerateContentRequest`` body (``contents``, ``tools``,
  ``systemInstruction``, ``generationConfig`` ...).
- :data:`FunctionDeclaration`: one entry of ``tools[].functionDeclarations``.
- :data:`Schema`: a JSON Schema object (a tool's ``parameters``).
- :data:`Usage`: a ``usageMetadata`` object (``promptTokenCount`` ...); ``{}`` when none.

The object aliases are ``dict[str, Any]``, not ``dict[str, JSONValue]``: ``dict`` is
invariant, so the recursive form would refuse a caller's ``dict[str, str]`` and force a
cast at every nested read, while the shapes are checked where they enter the library
(``check_request``, the aggregator). Their members stay ``Any`` for that reason.
"""

from __future__ import annotations

from typing import Any, TypeAlias, Union

__all__ = [
    "Content",
    "FunctionCall",
    "FunctionDeclaration",
    "JSONObject",
    "JSONValue",
    "Part",
    "Request",
    "Schema",
    "Usage",
]

JSONValue: TypeAlias = Union[  # noqa: UP007  (a runtime alias: the `|` form cannot hold the name)
    bool, int, float, str, list["JSONValue"], dict[str, "JSONValue"], None
]
JSONObject: TypeAlias = dict[str, Any]
Content: TypeAlias = JSONObject
Part: TypeAlias = JSONObject
FunctionCall: TypeAlias = JSONObject
Request: TypeAlias = JSONObject
FunctionDeclaration: TypeAlias = JSONObject
Schema: TypeAlias = JSONObject
Usage: TypeAlias = JSONObject
