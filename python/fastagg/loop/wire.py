"""The seam between the turn loop and a wire format (L2, L27, L31).

The loop keeps the transcript as a list of contents and asks a :class:`Wire`
for everything that depends on the format: the request of the next step, the
aggregator of its stream, what of the aggregated result the classifier reads,
the model content to append, and the user content answering the calls.
:class:`GenerateContentWire` is the ``generateContent`` implementation,
:class:`InteractionsWire` the Interactions API one (spec/interactions.md
I22-I27); :func:`wire_for` picks one from the client's ``api``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .._fastagg import StreamAggregator
from .._json import Content, FunctionCall, JSONObject, Part, Request
from ..client.interactions_wire import InteractionsTurn
from ..model import ModelClient
from ..request import RequestGuard
from ..signatures import requires_signatures
from ..tools import Tool
from .classify import Response

# Internal to the turn loop: nothing here is public API (spec/api.md).
__all__: list[str] = []


class Wire(Protocol):
    """What the loop needs from a wire format."""

    def request(self) -> Request:
        """The request of the next attempt over the transcript as it is now, checked (L2)."""
        ...

    def final_request(self, note: Content) -> Request:
        """The step-cap request: the transcript, ``note``, tools off (L9, L27), checked (L2)."""
        ...

    def recheck(self) -> None:
        """Check the whole transcript again at the next request (L33a: a content changed)."""
        ...

    def aggregator(self, display: bool) -> Any:
        """A fresh aggregator for one response stream; ``display``: the loop has a sink
        and delivers the stream's deltas (else it needs none, L70)."""
        ...

    def visible(self, agg: Any) -> bool | None:
        """Whether visible output came into ``agg`` (L3), when the aggregator keeps that
        flag itself; None when the loop reads it from the deltas."""
        ...

    def drain(self, agg: Any) -> list[Any]:
        """The deltas an ended body still holds (a last event without its blank line, D5)."""
        ...

    def result(self, aggregated: Any) -> Any:
        """The loop's view of an aggregate (closed, or a snapshot of a cut-off stream)."""
        ...

    def resumable(self, request: Request, partial: Any) -> bool:
        """Whether a dropped stream of ``request`` can be reopened where it broke (I26)."""
        ...

    def response(self, result: Any) -> Response:
        """What :func:`~fastagg.loop.classify.classify` reads of an aggregated result."""
        ...

    def model_turn(self, result: Any) -> Content | None:
        # L11: appended verbatim (signatures byte-exact); reasoning alone is not appended
        """The content to append for a result; None when it holds nothing of substance."""
        ...

    def tool_turn(
        self, calls: list[FunctionCall], responses: list[JSONObject], extra: list[str]
    ) -> Content:
        """The user content answering ``calls`` in order, then ``extra`` text parts."""
        ...

    def note(self, text: str) -> Content:
        """A user content of one text part (a note of the loop to the model)."""
        ...

    def is_note(self, content: Content, text: str) -> bool: ...


def wire_for(
    model: ModelClient,
    contents: list[Content],
    tools: list[Tool],
    system_instruction: str | Content | None,
    config: JSONObject | None,
) -> GenerateContentWire:
    """The wire format the client speaks: its ``api`` attribute, ``generateContent`` without."""
    if getattr(model, "api", None) == "interactions":
        # I22: on the Interactions API signatures live on the model's steps, checked there.
        guard = RequestGuard(require_signatures=False)
        return InteractionsWire(contents, tools, system_instruction, config, guard)
    guard = RequestGuard(require_signatures=requires_signatures(model.model))
    return GenerateContentWire(contents, tools, system_instruction, config, guard)


class GenerateContentWire:
    """``generateContent`` requests over REST contents and parts."""

    def __init__(
        self,
        contents: list[Content],
        tools: list[Tool],
        system_instruction: str | Content | None,
        config: JSONObject | None,
        guard: RequestGuard,
    ) -> None:
        self.contents = contents
        self.base = _base_request(tools, system_instruction, config)
        # The request holds the transcript list itself: a step copies nothing, and
        # the guard only checks the contents added since the previous request.
        self._request: Request = {"contents": contents, **self.base}
        self.guard = guard

    def request(self) -> Request:
        # L2: a request the service would reject raises before it is sent
        self.guard.extend(self.contents)
        self.guard.check_end()
        return self._request

    def recheck(self) -> None:
        # L33a: a fresh guard; the next request checks every content again
        """Check the whole transcript again at the next request (L33a: a content changed)."""
        self.guard = RequestGuard(require_signatures=self.guard.requires_signatures)

    def final_request(self, note: Content) -> Request:
        guard = self.guard.fork()
        guard.extend(self.contents)
        guard.add(note)
        guard.check_end()
        request = {**self.base, "contents": [*self.contents, note]}
        request["toolConfig"] = _tools_off(request.get("toolConfig"))
        return request

    def aggregator(self, display: bool) -> StreamAggregator[Any]:
        # R5: with a sink the loop reads candidate 0's text, thought and call deltas,
        # nothing else; L70: without one it reads no delta, only visible_output.
        return StreamAggregator(deltas="display" if display else False)

    def visible(self, agg: Any) -> bool | None:
        return bool(agg.visible_output)

    def drain(self, agg: Any) -> list[Any]:
        deltas: list[Any] = agg.finish()
        return deltas

    def result(self, aggregated: Any) -> Any:
        return aggregated

    def resumable(self, request: Request, partial: Any) -> bool:
        return False

    def response(self, result: Any) -> Response:
        # C13: the calls to run are function_calls; a call the model did not finish is
        # only in unfinished_calls ({"id", "name", "args", "part"}), never run (L32).
        unfinished = None
        if result.unfinished_calls:
            cut = result.unfinished_calls[0]
            unfinished = (cut["part"], cut["name"])
        finish = result.finish_reason
        # L19: a block reason matters only to a response without a finish reason (L71:
        # not read otherwise); None first: an ABC isinstance of None costs a Python frame
        feedback = None if finish else result.prompt_feedback
        block = (
            feedback.get("blockReason")
            if feedback is not None and isinstance(feedback, Mapping)
            else None
        )
        return Response(
            finish,
            result.finish_message,
            result.function_calls,
            unfinished,
            result.error,
            str(block) if block else None,
            _nameless(result),
        )

    def model_turn(self, result: Any) -> Content | None:
        return result.content if _has_substance(result.parts) else None

    def tool_turn(
        self, calls: list[FunctionCall], responses: list[JSONObject], extra: list[str]
    ) -> Content:
        parts: list[Part] = []
        for call, response in zip(calls, responses, strict=True):
            fr: JSONObject = {}
            if call.get("id") is not None:
                fr["id"] = call["id"]
            fr["name"] = call["name"]
            fr["response"] = response
            parts.append({"functionResponse": fr})
        if extra:
            parts.extend({"text": text} for text in extra)
        return {"role": "user", "parts": parts}

    def note(self, text: str) -> Content:
        return {"role": "user", "parts": [{"text": text}]}

    def is_note(self, content: Content, text: str) -> bool:
        return content.get("role") == "user" and content.get("parts") == [{"text": text}]


class InteractionsWire(GenerateContentWire):
    """The Interactions API (I22-I27): the same transcript and requests (``GeminiClient``
    converts them, I23/I24), its own aggregator and results read as generateContent's."""

    def final_request(self, note: Content) -> Request:
        request = super().final_request(note)
        given = request.get("generation_config")
        if isinstance(given, Mapping) and "tool_choice" in given:
            # L122: a tool_choice the caller gave in config would win over the step cap's
            # NONE key by key (I23); the final answer is asked with tools off all the same.
            request["generation_config"] = {**given, "tool_choice": "none"}
        return request

    def aggregator(self, display: bool) -> StreamAggregator[Any]:
        # R5: the Interactions aggregator has no display subset and no visible_output:
        # the loop reads visible output from its deltas, with or without a sink.
        return StreamAggregator(api="interactions")

    def visible(self, agg: Any) -> bool | None:
        return None

    def drain(self, agg: Any) -> list[Any]:
        # I28: the status decides, not [DONE]; close() dispatches an event left pending (I4)
        return []

    def result(self, aggregated: Any) -> Any:
        return InteractionsTurn(aggregated)  # I25

    def resumable(self, request: Request, partial: Any) -> bool:
        # I26: only a stored interaction the service has created can be reopened.
        return request.get("store") is not False and partial.interaction_id is not None


def _base_request(
    tools: list[Tool],
    system_instruction: str | Content | None,
    config: JSONObject | None,
) -> JSONObject:
    """The request fields every step sends besides ``contents`` (L31)."""
    base: JSONObject = {}
    if system_instruction is not None:
        base["systemInstruction"] = (
            {"parts": [{"text": system_instruction}]}
            if isinstance(system_instruction, str)
            else system_instruction
        )
    if tools:
        base["tools"] = [{"functionDeclarations": [t.declaration() for t in tools]}]
    # L31: config fields merge in deeply; its tools go after the declarations
    for key, value in (config or {}).items():
        if key == "contents":
            raise ValueError("config cannot set contents; pass them as the contents argument")
        if key == "tools" and "tools" in base:
            base["tools"] = [*base["tools"], *value]
        elif isinstance(value, Mapping) and isinstance(base.get(key), Mapping):
            base[key] = _merge(base[key], value)
        else:
            base[key] = value
    return base


def _merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> JSONObject:
    out = dict(a)
    for key, value in b.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _tools_off(tool_config: Any) -> JSONObject:
    """``toolConfig`` with function calling disabled (mode NONE; no allowed names, L27),
    whatever mode the caller chose (AUTO, ANY, VALIDATED, L121); its other keys kept."""
    config = dict(tool_config) if isinstance(tool_config, Mapping) else {}
    calling = dict(config.get("functionCallingConfig") or {})
    calling.pop("allowedFunctionNames", None)
    calling["mode"] = "NONE"
    config["functionCallingConfig"] = calling
    return config


def _nameless(result: Any) -> bool:
    """L95: the response held a function call without a name. The aggregator leaves such a
    call out of ``parts`` and ``function_calls`` and says so in a diagnostic (C15's
    ``nameless_call``; C6's ``nameless_streamed_call`` for a streamed call of candidate 0
    that never got one), read by its code, not its text (X6); a result may also list one
    without a name (an Interactions call step)."""
    for call in result.function_calls:
        if not isinstance(call.get("name"), str):
            return True
    for d in result.diagnostics:
        if d.code == "nameless_call" or (d.code == "nameless_streamed_call" and d.candidate == 0):
            return True
    return False


def _has_substance(parts: list[Part]) -> bool:
    """False for an empty or reasoning-only model content (thoughts, empty signed text)."""
    for part in parts:
        if part.get("thought") is True:
            continue
        if (
            "text" in part
            and not part["text"]
            and all(k in ("text", "thought", "thoughtSignature") for k in part)
        ):
            continue
        return True
    return False
