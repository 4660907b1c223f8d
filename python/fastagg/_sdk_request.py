"""Requests between google-genai objects and REST camelCase (integrations G5, G6).

``run_turn`` takes SDK ``Content`` / ``GenerateContentConfig`` objects
(:func:`loop_inputs`); ``fastagg.genai.GenaiClient`` sends the loop's REST
request through the SDK (:func:`to_sdk`). One table of which config fields
live at the top level of a ``GenerateContentRequest`` serves both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._chunks import chunk_to_mapping
from ._json import JSONObject, Request

__all__ = ["loop_inputs", "to_sdk"]

# GenerateContentConfig fields that are top-level request fields; every other
# wire field of the config belongs in generationConfig.
TOP_LEVEL = frozenset(
    {
        "systemInstruction",
        "tools",
        "toolConfig",
        "safetySettings",
        "cachedContent",
        "labels",
        "modelArmorConfig",
        "serviceTier",
        "store",
    }
)
# Client-side settings of the SDK: no request field carries them.
SDK_ONLY = {
    "httpOptions": "set HTTP options on the client (GeminiClient(timeout=..., headers=...))",
    "shouldReturnHttpResponse": "fastagg always reads the raw body",
    "automaticFunctionCalling": "run_turn runs the tools itself (pass them as tools=[...])",
    "automaticContinuation": "the turn loop decides every next request",
}


def _is_sdk(value: Any) -> bool:
    return type(value).__module__.startswith("google.genai")


def loop_inputs(
    contents: Sequence[Any],
    tools: Sequence[Any],
    system_instruction: Any,
    config: Any,
) -> tuple[list[Any], Sequence[Any], Any, Any]:
    """``run_turn``'s inputs with google-genai objects turned into REST dicts (G5).

    ``Content`` objects (also as ``system_instruction``) become their wire
    dicts; a ``GenerateContentConfig`` is split into top-level request fields
    and ``generationConfig``. SDK ``Tool`` / ``FunctionDeclaration`` objects
    in ``tools`` are refused: they carry no code to run.
    """
    out_contents = [chunk_to_mapping(c) if _is_sdk(c) else c for c in contents]
    for t in tools:
        if _is_sdk(t):
            raise TypeError(
                f"run_turn(tools=...) got a google-genai {type(t).__name__}, which has no "
                "code to run. Pass the Python function itself (its declaration comes from its "
                "signature and docstring), or fastagg.Tool(name, fn, description=..., "
                "parameters=<JSON schema>); server-side tools such as google_search go in "
                "config={'tools': [...]} or GenerateContentConfig(tools=[...])"
            )
    if _is_sdk(system_instruction):
        system_instruction = chunk_to_mapping(system_instruction)
    if _is_sdk(config):
        config = config_to_request(
            chunk_to_mapping(config), "run_turn(config=GenerateContentConfig)"
        )
    return out_contents, tools, system_instruction, config


def config_to_request(config: Mapping[str, Any], where: str) -> JSONObject:
    """A GenerateContentConfig in camelCase as request fields (G5)."""
    out: JSONObject = {}
    generation: JSONObject = {}
    for key, value in config.items():
        if key in SDK_ONLY:
            raise ValueError(
                f"{where}: {key} is a setting of the google-genai client; {SDK_ONLY[key]}"
            )
        if key in TOP_LEVEL:
            out[key] = value
        else:
            generation[key] = value
    if generation:
        out["generationConfig"] = generation
    return out


def to_sdk(request: Request, timeout: float | None, types: Any) -> tuple[list[Any], Any]:
    """A REST ``GenerateContentRequest`` as google-genai ``contents`` and ``config`` (G6).

    Validated here, so a request the SDK cannot express fails before sending.
    """
    config: JSONObject = {}
    contents: list[Any] = []
    for key, value in request.items():
        if key == "contents":
            contents = [types.Content.model_validate(c) for c in value]
        elif key == "generationConfig":
            config.update(value)
        elif key in TOP_LEVEL:
            config[key] = value
        else:
            raise ValueError(
                f"GenaiClient: the request field {key!r} has no GenerateContentConfig "
                "counterpart; use fastagg.GeminiClient for it"
            )
    config["automaticFunctionCalling"] = {"disable": True}
    if timeout is not None:
        config["httpOptions"] = {"timeout": max(1, int(timeout * 1000))}
    return contents, types.GenerateContentConfig.model_validate(config)
