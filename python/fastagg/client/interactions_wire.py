"""The Interactions API as a wire format of the turn loop (spec/interactions.md I22-I27).

The loop keeps one transcript shape whatever the API: generateContent contents
(REST camelCase). On ``api="interactions"`` two conversions sit at the edges:

- :func:`request_body` turns a loop request (``contents``, ``systemInstruction``,
  ``tools``, ``generationConfig``, ``toolConfig``, Interactions fields given in
  ``config``) into an Interactions create body: stateful by default (only the
  contents after the last model turn are sent, with ``previous_interaction_id``),
  every step when ``store`` is false. ``GeminiClient(api="interactions")`` calls
  it in ``stream()``.
- :class:`InteractionsTurn` shows an ``InteractionResponse`` the way the loop
  reads an ``AggregatedResponse``: ``parts``/``content`` in generateContent form
  (the model's steps kept verbatim under ``content["interaction"]`` for the
  next request), the status as the raw finish reason, errors as google.rpc.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from .._json import JSONObject

__all__ = ["InteractionsTurn", "request_body"]

# I25: the string codes of Interactions error events, as the HTTP status and google.rpc
# code the loop's retry rules (L3) read.
_ERROR_CODES = {
    "resource_exhausted": 429,
    "internal": 500,
    "bad_gateway": 502,
    "unavailable": 503,
    "gateway_timeout": 504,
    "deadline_exceeded": 504,
}
_RUNNING = frozenset({"in_progress", "queued", "idle"})
_LOOP_KEYS = frozenset(
    {
        "contents",
        "systemInstruction",
        "tools",
        "toolConfig",
        "generationConfig",
        "continuationToken",
    }
)
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def request_body(request: Mapping[str, Any]) -> JSONObject:
    """The Interactions create body for a loop request (I23, I24); ``model``/``stream`` not added."""
    body = {k: v for k, v in request.items() if k not in _LOOP_KEYS}  # I23: verbatim
    contents = request.get("contents") or []
    system = request.get("systemInstruction")
    if isinstance(system, Mapping):
        body["system_instruction"] = "".join(
            p.get("text", "") for p in system.get("parts") or () if isinstance(p, Mapping)
        )
    tools = _tools(request.get("tools"))
    if tools:
        body["tools"] = tools
    config = _generation_config(request.get("generationConfig"), request.get("toolConfig"))
    if config or "generation_config" in body:
        body["generation_config"] = {**config, **body.get("generation_config", {})}
    token = request.get("continuationToken")
    stateless = request.get("store") is False
    if token is not None:
        # L58: a hop resends the same request with the token; a stored hop names the
        # interaction that issued it (previous_interaction_id, set by the loop) and no input.
        body["continuation_token"] = token
        if not stateless:
            return body
    start = 0
    if not stateless:
        for i in range(len(contents) - 1, -1, -1):
            stored = contents[i].get("interaction") if contents[i].get("role") == "model" else None
            if isinstance(stored, Mapping) and isinstance(stored.get("id"), str):
                body["previous_interaction_id"] = stored["id"]
                start = i + 1
                break
    body["input"] = [step for content in contents[start:] for step in _steps(content)]
    return body


def _steps(content: Mapping[str, Any]) -> list[JSONObject]:
    """The Interactions steps of one transcript content (I24)."""
    parts = [p for p in content.get("parts") or () if isinstance(p, Mapping)]
    if content.get("role") == "model":
        stored = content.get("interaction")
        if isinstance(stored, Mapping) and isinstance(stored.get("steps"), list):
            return list(stored["steps"])  # the model's own steps, verbatim
        return [s for p in parts if (s := _model_step(p)) is not None]
    steps: list[JSONObject] = []
    texts: list[JSONObject] = []
    for part in parts:
        response = part.get("functionResponse")
        if isinstance(response, Mapping):
            steps.append(_function_result(response))
        elif isinstance(part.get("text"), str):
            texts.append({"type": "text", "text": part["text"]})
    if texts:
        steps.append({"type": "user_input", "content": texts})
    return steps


def _model_step(part: Mapping[str, Any]) -> JSONObject | None:
    call = part.get("functionCall")
    if isinstance(call, Mapping):
        return {
            "type": "function_call",
            "id": call.get("id"),
            "name": call.get("name"),
            "arguments": call.get("args") or {},
        }
    if not isinstance(part.get("text"), str):
        return None
    if part.get("thought") is True:
        step: JSONObject = {
            "type": "thought",
            "summary": [{"type": "text", "text": part["text"]}],
        }
        if isinstance(part.get("thoughtSignature"), str):
            step["signature"] = part["thoughtSignature"]
        return step
    return {"type": "model_output", "content": [{"type": "text", "text": part["text"]}]}


def _function_result(response: Mapping[str, Any]) -> JSONObject:
    """L26's ``{"output": ...}`` / ``{"error": ...}`` as a ``function_result`` step."""
    step: JSONObject = {"type": "function_result", "call_id": response.get("id")}
    if response.get("name") is not None:
        step["name"] = response["name"]
    answer = response.get("response")
    if isinstance(answer, Mapping) and "error" in answer:
        step["result"], step["is_error"] = _result_value(answer["error"]), True
    elif isinstance(answer, Mapping) and "output" in answer:
        step["result"] = _result_value(answer["output"])
    else:
        step["result"] = _result_value(answer)
    return step


def _result_value(value: Any) -> Any:
    """A string or an object as it is; anything else as its JSON text (a list would read as
    content items)."""
    if isinstance(value, (str, dict)):
        return value
    return orjson.dumps(value).decode()


def _tools(tools: Any) -> list[JSONObject]:
    """generateContent ``tools`` as the flat Interactions list (I23)."""
    out: list[JSONObject] = []
    for tool in tools or ():
        if not isinstance(tool, Mapping):
            continue
        declarations = tool.get("functionDeclarations")
        if isinstance(declarations, list):
            for d in declarations:
                flat = {"type": "function", "name": d.get("name")}
                if d.get("description") is not None:
                    flat["description"] = d["description"]
                schema = d.get("parametersJsonSchema", d.get("parameters"))
                if schema is not None:
                    flat["parameters"] = schema
                out.append(flat)
        elif "type" in tool:
            out.append(dict(tool))
        else:  # {"googleSearch": {...}} -> {"type": "google_search", ...}
            for key, value in tool.items():
                out.append({"type": _snake(key), **(value if isinstance(value, Mapping) else {})})
    return out


def _generation_config(config: Any, tool_config: Any) -> JSONObject:
    """``generationConfig`` keys in snake_case, ``thinkingConfig`` flattened, the
    function-calling mode as ``tool_choice`` (I23)."""
    out: JSONObject = {}
    for key, value in config.items() if isinstance(config, Mapping) else ():
        if key == "thinkingConfig" and isinstance(value, Mapping):
            if value.get("thinkingLevel") is not None:
                out["thinking_level"] = str(value["thinkingLevel"]).lower()
            if value.get("includeThoughts") is not None:
                out["thinking_summaries"] = "auto" if value["includeThoughts"] else "none"
        else:
            out[_snake(key)] = value
    calling = tool_config.get("functionCallingConfig") if isinstance(tool_config, Mapping) else None
    if isinstance(calling, Mapping) and isinstance(calling.get("mode"), str):
        out["tool_choice"] = calling["mode"].lower()
    return out


def _snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


class InteractionsTurn:
    """An ``InteractionResponse`` as the loop reads an ``AggregatedResponse`` (I25).

    ``finish_reason`` is the raw status (``requires_action``, ``completed``,
    ``incomplete``, ``requires_continuation``, ``failed`` ...; None without
    ``interaction.completed``). ``parts`` hold one part per thought, output
    and call step; ``content`` adds the steps themselves under ``interaction``
    (with the interaction's ``id``), which is what the next request sends.
    """

    finish_message = None
    prompt_feedback = None

    def __init__(self, response: Any) -> None:
        self.response = response
        self.steps: list[JSONObject] = response.steps
        status = response.status
        # I25: a status the interaction is still in is no finish (a dropped hop says in_progress).
        self.finish_reason: str | None = None if status in _RUNNING else status
        self.text: str = response.text
        self.usage: JSONObject | None = response.usage
        self.warnings: list[str] = response.warnings
        self.interaction_id: str | None = response.interaction_id
        self.continuation_token: str | None = response.continuation_token
        self.output_after_token: bool = response.output_after_token  # E14, read by L80
        self.last_event_id: str | None = response.last_event_id
        self.parts: list[JSONObject] = []
        part_of: dict[int, int] = {}  # step position -> part index
        for n, step in enumerate(self.steps):
            part = _step_part(step)
            if part is not None:
                part_of[n] = len(self.parts)
                self.parts.append(part)
        calls = [k for n, k in part_of.items() if self.steps[n].get("type") == "function_call"]
        # C13: unfinished calls as the core gives them, with the index of their part instead
        # of their step (L32 reads them); step indexes count from 0 without gaps except on a
        # resumed stream, where the first call stands in.
        self.unfinished_calls: list[JSONObject] = [
            {
                "id": c["id"],
                "name": c["name"],
                "args": c["args"],
                "part": _part_of_step(c["step"], part_of, calls),
            }
            for c in response.unfinished_calls
            if calls
        ]
        self.function_calls: list[JSONObject] = response.function_calls  # finished only (C13)
        self.error = _rpc_error(response.error, self.finish_reason)

    @property
    def content(self) -> JSONObject:
        stored: JSONObject = {"steps": self.steps}
        if self.interaction_id is not None:
            stored = {"id": self.interaction_id, **stored}
        return {"role": "model", "parts": self.parts, "interaction": stored}


def _part_of_step(step: int, part_of: Mapping[int, int], calls: Sequence[int]) -> int:
    """The part index standing for call step ``step`` (the first call's when unknown)."""
    at = part_of.get(step)
    return at if at is not None and at in calls else calls[0]


def _step_part(step: Mapping[str, Any]) -> JSONObject | None:
    """One generateContent part standing for ``step`` (None for server-side tool steps)."""
    kind = step.get("type")
    if kind == "function_call":
        args = step.get("arguments")
        call = {"id": step.get("id"), "name": step.get("name")}
        return {"functionCall": {**call, "args": args if isinstance(args, dict) else {}}}
    if kind == "model_output":
        return {"text": _texts(step.get("content"))}
    if kind == "thought":
        part: JSONObject = {"text": _texts(step.get("summary")), "thought": True}
        if isinstance(step.get("signature"), str):
            part["thoughtSignature"] = step["signature"]
        return part
    return None


def _texts(items: Any) -> str:
    return "".join(
        i["text"]
        for i in items or ()
        if isinstance(i, Mapping) and i.get("type") == "text" and isinstance(i.get("text"), str)
    )


def _rpc_error(error: Any, status: str | None) -> JSONObject | None:
    """An Interactions error (string ``code``) in google.rpc form; ``failed`` without one is
    an error too (I25)."""
    if error is None:
        if status == "failed":
            return {"status": "FAILED", "message": "the interaction failed"}
        return None
    if not isinstance(error, Mapping):
        return {"message": str(error)}
    code = error.get("code")
    out: JSONObject = {}
    if isinstance(code, str):
        if code.lower() in _ERROR_CODES:
            out["code"] = _ERROR_CODES[code.lower()]
        out["status"] = code.upper()
    elif isinstance(code, int):
        out["code"] = code
    out["message"] = error.get("message")
    return out
