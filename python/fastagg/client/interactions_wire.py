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
from typing import TYPE_CHECKING, Any

import orjson

from .._json import JSONObject

if TYPE_CHECKING:
    from ..diagnostics import Diagnostic

__all__ = ["InteractionsTurn", "request_body"]

# I25, I34: the string codes of Interactions errors (the API errors page's table, and the
# google.rpc names some streams use), as the HTTP status the loop's retry rules (L3) read.
_ERROR_CODES = {
    "invalid_request": 400,
    "failed_precondition": 400,
    "parameter_unknown": 400,
    "invalid_argument": 400,
    "authentication": 401,
    "unauthenticated": 401,
    "payment_required": 402,
    "permission_denied": 403,
    "not_found": 404,
    "model_not_found": 404,
    "already_exists": 409,
    "aborted": 409,
    "out_of_range": 416,
    "rate_limit_exceeded": 429,
    "quota_exceeded": 429,
    "too_many_requests": 429,
    "resource_exhausted": 429,
    "cancelled": 499,
    "api_error": 500,
    "internal": 500,
    "unknown": 500,
    "data_loss": 500,
    "unimplemented": 501,
    "bad_gateway": 502,
    "service_unavailable": 503,
    "unavailable": 503,
    "gateway_timeout": 504,
    "deadline_exceeded": 504,
}
# I34: google.rpc.Code numbers (a step's ``error`` is a google.rpc.Status) as their names.
_RPC_NAMES = (
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
)
# I35: codes that say what became of the model's output: the finish reason they name.
_FINISH_CODES = frozenset(
    {
        "safety",
        "recitation",
        "language",
        "prohibited_content",
        "spii",
        "blocklist",
        "image_safety",
        "image_prohibited_content",
        "image_recitation",
        "image_other",
        "content_blocked",
        "malformed_function_call",
        "malformed_tool_call",
        "unexpected_tool_call",
        "no_image",
        "too_many_tool_calls",
        "missing_thought_signature",
    }
)
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
        mode = calling["mode"].lower()
        names = calling.get("allowedFunctionNames")
        # I38: allowed names go with their mode as allowed_tools (a bare mode would drop them)
        if isinstance(names, list) and names and mode != "none":
            out["tool_choice"] = {"allowed_tools": {"mode": mode, "tools": list(names)}}
        else:
            out["tool_choice"] = mode
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
        self.diagnostics: Sequence[Diagnostic] = response.diagnostics  # X3; the loop reads codes
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
        self.error = _rpc_error(response.error, None)
        if self.error is None:
            # I33: an error the interaction or a step recorded is no data on a finished turn
            first = _recorded_error(response.interaction, self.steps)
            code = _code_name(first.get("code")) if first is not None else None
            if first is not None and code in _FINISH_CODES:
                self.finish_reason = code.upper()  # I35: a finish reason, not a failure
            elif first is not None:  # I36: whatever the status said, the step failed
                self.error = _rpc_error(first, None)
            elif self.finish_reason == "failed":
                self.error = _rpc_error(None, "failed")

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


def _recorded_error(interaction: Any, steps: Sequence[Any]) -> JSONObject | None:
    """The first error an interaction recorded without an ``error`` event (I33): its
    ``errors[]`` in order, then each step's ``error`` in index order."""
    errors = interaction.get("errors") if isinstance(interaction, Mapping) else None
    for error in errors if isinstance(errors, list) else ():
        if isinstance(error, Mapping) and error:
            return dict(error)
    for step in steps:
        error = step.get("error") if isinstance(step, Mapping) else None
        if isinstance(error, Mapping) and error:
            return dict(error)
    return None


def _code_name(code: Any) -> str | None:
    """A string error code in snake_case: a URI's last segment (the SDK calls it a URI)."""
    if not isinstance(code, str) or not code:
        return None
    return re.split(r"[/#:]", code.rstrip("/"))[-1].lower() or None


def _rpc_error(error: Any, status: str | None) -> JSONObject | None:
    """An Interactions error in google.rpc form (I25, I34): a string ``code`` as its HTTP
    status and upper-cased name, a google.rpc.Code number (a step's ``google.rpc.Status``)
    as its HTTP status and name; ``failed`` without an error is an error too (I25)."""
    if error is None:
        if status == "failed":
            return {"status": "FAILED", "message": "the interaction failed"}
        return None
    if not isinstance(error, Mapping):
        return {"message": str(error)}
    code = error.get("code")
    out: JSONObject = {}
    name = _code_name(code)
    if name is not None:
        if name in _ERROR_CODES:
            out["code"] = _ERROR_CODES[name]
        out["status"] = name.upper()
    elif isinstance(code, int) and not isinstance(code, bool):
        if 0 < code < len(_RPC_NAMES):
            out["code"] = _ERROR_CODES[_RPC_NAMES[code].lower()]
            out["status"] = _RPC_NAMES[code]
        else:
            out["code"] = code
    if isinstance(error.get("status"), str):
        out["status"] = error["status"]
    out["message"] = error.get("message")
    if isinstance(error.get("details"), list):
        out["details"] = error["details"]
    return out
