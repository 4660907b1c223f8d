"""OpenTelemetry spans and metrics of a turn, per the GenAI semantic conventions (T1-T9).

Nothing here imports OpenTelemetry until an application has imported it
itself and set a tracer or meter provider (T1): :func:`for_turn` looks at
``sys.modules`` first, so a turn without telemetry pays a dictionary lookup.
Only the API (``opentelemetry-api``, the ``fastagg[otel]`` extra) is used;
the application owns the SDK, its processors and exporters.

The spans (T2-T5): the turn ``invoke_agent`` (INTERNAL), each model request
``generate_content {model}`` (CLIENT) and each tool call ``execute_tool
{tool}`` (INTERNAL), both children of the turn; the request is the current
span while its body is read and a tool's while it runs, so spans an HTTP
client or the tool itself makes nest under them. The metrics (T6):
``gen_ai.client.operation.duration``, ``gen_ai.client.token.usage`` and
``gen_ai.client.operation.time_to_first_chunk``, one record per model request.
Messages, tool arguments and results are recorded only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` opts in (T7).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import orjson

# Internal to the turn loop: nothing here is public API (spec/api.md).
__all__: list[str] = []

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# T7: the values that opt in (the OpenTelemetry Python GenAI instrumentations' own; the
# events-only mode records nothing on spans, and fastagg writes no events)
_CAPTURE_ON = frozenset({"true", "1", "span_only", "span_and_event"})
# T6: the bucket boundaries the conventions advise
_TOKEN_BUCKETS = [4.0**i for i in range(14)]
_SECONDS_BUCKETS = [0.01 * 2.0**i for i in range(14)]
SCOPE = "fastagg"

# The tracer and the instruments, once a real provider was seen (a global provider is
# set once: later sets are refused by the API, so a found one stays).
_tracer: Any = None
_instruments: _Instruments | None = None


def for_turn(model: Any) -> TurnTelemetry | None:
    """The telemetry of one turn, or None: no OpenTelemetry imported, no provider set,
    or the SDK disabled (T1). Called once per turn."""
    modules = sys.modules
    if "opentelemetry.trace" not in modules and "opentelemetry.metrics" not in modules:
        return None
    tracer = _tracer if _tracer is not None else _find_tracer()
    instruments = _instruments if _instruments is not None else _find_meter()
    if tracer is None and instruments is None:
        return None
    return TurnTelemetry(tracer, instruments, model)


def _find_tracer() -> Any:
    global _tracer
    if "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None  # none set: the API's default
    tracer = provider.get_tracer(SCOPE, _version())
    if isinstance(tracer, trace.NoOpTracer):
        return None  # OTEL_SDK_DISABLED
    _tracer = tracer
    return tracer


def _find_meter() -> _Instruments | None:
    global _instruments
    if "opentelemetry.metrics" not in sys.modules:
        return None
    from opentelemetry import metrics

    provider = metrics.get_meter_provider()
    # none set: the API's default is a private proxy class (the name is all there is to see)
    if isinstance(provider, metrics.NoOpMeterProvider) or type(provider).__name__.startswith(
        "_Proxy"
    ):
        return None
    meter = provider.get_meter(SCOPE, _version())
    if isinstance(meter, metrics.NoOpMeter):
        return None  # OTEL_SDK_DISABLED
    _instruments = _Instruments(meter)
    return _instruments


def _version() -> str:
    from ._version import __version__

    return __version__


def reset() -> None:
    """Forget the tracer and meter found (tests set providers of their own)."""
    global _tracer, _instruments
    _tracer = None
    _instruments = None


class _Instruments:
    """The GenAI client metrics (T6)."""

    __slots__ = ("duration", "first_chunk", "tokens")

    def __init__(self, meter: Any) -> None:
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS,
        )
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self.first_chunk = meter.create_histogram(
            "gen_ai.client.operation.time_to_first_chunk",
            unit="s",
            description="Time to receive the first chunk of a streamed response.",
            explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS,
        )


def capture_content() -> bool:
    """T7: whether the application opted in to recording messages and tool data."""
    return os.environ.get(CAPTURE_ENV, "").strip().lower() in _CAPTURE_ON


class TurnTelemetry:
    """The spans and metrics of one turn; exists only when telemetry is on (T1)."""

    __slots__ = (
        "attributes",
        "capture",
        "context",
        "current",
        "instruments",
        "model",
        "span",
        "token",
        "tracer",
    )

    def __init__(self, tracer: Any, instruments: _Instruments | None, model: Any) -> None:
        self.tracer = tracer
        self.instruments = instruments
        self.model = str(getattr(model, "model", "") or "")
        vertex = getattr(model, "vertex", False) is True
        # T2: what the conventions want at span creation (sampling may use them)
        attributes: dict[str, Any] = {
            "gen_ai.provider.name": "gcp.vertex_ai" if vertex else "gcp.gemini",
            "gen_ai.request.model": self.model,
        }
        url = getattr(model, "url", None)
        if isinstance(url, str):
            try:
                parts = urlsplit(url)
                host, port = parts.hostname, parts.port
            except ValueError:
                host, port = None, None
            if host:
                attributes["server.address"] = host
                attributes["server.port"] = port or (80 if parts.scheme == "http" else 443)
        self.attributes = attributes
        self.capture = capture_content()
        self.span: Any = None
        self.context: Any = None
        self.token: Any = None
        self.current: RequestTelemetry | None = None  # the request being read

    def timed(self, model: Any) -> Any:
        """``model`` with its response bodies timed to their first chunk (T6)."""
        return _TimedModel(model, self)

    # -- the turn (T2) ---------------------------------------------------

    def start(self) -> None:
        """Open the turn's span and make it current in the turn's task."""
        if self.tracer is None:
            return
        from opentelemetry import context, trace

        self.span = self.tracer.start_span(
            "invoke_agent",
            kind=trace.SpanKind.INTERNAL,
            attributes={"gen_ai.operation.name": "invoke_agent", **self.attributes},
        )
        self.context = trace.set_span_in_context(self.span)
        self.token = context.attach(self.context)

    def end(self, result: Any) -> None:
        """Close the turn's span with how the turn ended (T2, T5)."""
        span = self.span
        if span is None:
            return
        usage = result.usage or {}
        retries = result.retries
        attributes: dict[str, Any] = {
            "fastagg.stop_reason": result.stop_reason.value,
            "fastagg.steps": result.steps_used,
            "fastagg.retries": sum(retries.values()),
            "fastagg.hops": result.hops,
            "fastagg.tool_calls": result.tool_call_count,
        }
        for kind, n in retries.items():
            attributes[f"fastagg.retries.{kind}"] = n
        _usage_attributes(attributes, usage)
        if result.raw_finish_reason:
            attributes["gen_ai.response.finish_reasons"] = [result.raw_finish_reason.lower()]
        if result.finish_reason is not None:
            attributes["fastagg.finish_reason"] = result.finish_reason
        span.set_attributes(attributes)
        if result.error is not None:  # T5: a provider error ended the turn
            _failed(span, error_type(result.error), result.error.message)
        self._close()

    def fail(self, exc: BaseException) -> None:
        """The turn raised (the caller's cancellation, an ``on_event`` handler's error)."""
        if self.span is None:
            return
        _failed(self.span, type(exc).__qualname__, _text(exc))
        self._close()

    def _close(self) -> None:
        from opentelemetry import context

        self.span.end()
        context.detach(self.token)
        self.span = self.token = None

    # -- one model request (T3, T6) --------------------------------------

    def request(self, step: int, attempt: int, kind: str, request: Any) -> RequestTelemetry:
        self.current = RequestTelemetry(self, step, attempt, kind, request)
        return self.current

    # -- one tool call (T4) ----------------------------------------------

    def tool(self, name: str, call_id: Any, args: Any, description: str | None) -> ToolSpan:
        return ToolSpan(self, name, call_id, args, description)


class RequestTelemetry:
    """One model request: its span (current while the body is read) and its metrics."""

    __slots__ = ("first", "span", "started", "token", "turn")

    def __init__(
        self, turn: TurnTelemetry, step: int, attempt: int, kind: str, request: Any
    ) -> None:
        self.turn = turn
        self.started = time.perf_counter()
        self.first: float | None = None
        self.span: Any = None
        self.token: Any = None
        if turn.tracer is None:
            return
        from opentelemetry import context, trace

        attributes = {
            "gen_ai.operation.name": "generate_content",
            **turn.attributes,
            "fastagg.step": step,
            "fastagg.attempt": attempt,
        }
        if kind != "step":
            attributes["fastagg.request_kind"] = kind
        if turn.capture and isinstance(request, Mapping):
            _request_content(attributes, request)
        name = f"generate_content {turn.model}" if turn.model else "generate_content"
        self.span = turn.tracer.start_span(
            name, context=turn.context, kind=trace.SpanKind.CLIENT, attributes=attributes
        )
        self.token = context.attach(trace.set_span_in_context(self.span, turn.context))

    def body(self, body: Any) -> Any:
        """The response body, timed to its first chunk (T6)."""
        return _TimedBody(body, self)

    def chunk(self) -> None:
        if self.first is None:
            self.first = time.perf_counter()

    def end(self, result: Any, error: Any, usages: Sequence[Mapping[str, Any]], hops: int) -> None:
        """The body ended: the response, its usage, its error (T3, T5, T6)."""
        usage: dict[str, int] = {}
        _usage_attributes(usage, _summed(usages))
        failure = None
        message = None
        if error is not None:
            failure, message = error_type(error), getattr(error, "message", None)
        else:
            in_stream = getattr(result, "error", None)
            if isinstance(in_stream, Mapping):
                code = in_stream.get("code") or in_stream.get("status")
                failure = str(code) if code is not None else "_OTHER"
                message = str(in_stream.get("message") or "")
        response_model = _str_or_none(getattr(result, "model_version", None))
        span = self.span
        if span is not None:
            attributes: dict[str, Any] = dict(usage)
            finish = getattr(result, "finish_reason", None)
            if finish:
                attributes["gen_ai.response.finish_reasons"] = [str(finish).lower()]
            response_id = _str_or_none(getattr(result, "response_id", None))
            if response_id:
                attributes["gen_ai.response.id"] = response_id
            if response_model:
                attributes["gen_ai.response.model"] = response_model
            if hops:
                attributes["fastagg.hops"] = hops
            if self.turn.capture:
                _response_content(attributes, result)
            span.set_attributes(attributes)
            if failure is not None:
                _failed(span, failure, message)
        self._record(failure, response_model, usage)
        self._close()

    def cut(self, cause: str) -> None:
        """The request was cut off (abort, deadline, stall, the caller): error ``cause``."""
        if self.span is not None:
            _failed(self.span, cause, None)
        self._record(cause, None, {})
        self._close()

    def _record(self, failure: str | None, response_model: str | None, usage: Any) -> None:
        instruments = self.turn.instruments
        if instruments is None:
            return
        now = time.perf_counter()
        attributes = {"gen_ai.operation.name": "generate_content", **self.turn.attributes}
        if response_model:
            attributes["gen_ai.response.model"] = response_model
        if self.first is not None:
            instruments.first_chunk.record(self.first - self.started, attributes)
        if "gen_ai.usage.input_tokens" in usage:
            instruments.tokens.record(
                usage["gen_ai.usage.input_tokens"], {**attributes, "gen_ai.token.type": "input"}
            )
        if "gen_ai.usage.output_tokens" in usage:
            instruments.tokens.record(
                usage["gen_ai.usage.output_tokens"], {**attributes, "gen_ai.token.type": "output"}
            )
        if failure is not None:
            attributes["error.type"] = failure
        instruments.duration.record(now - self.started, attributes)

    def _close(self) -> None:
        if self.span is not None:
            from opentelemetry import context

            self.span.end()
            context.detach(self.token)
            self.span = self.token = None


class ToolSpan:
    """One tool call's span, current while the tool runs (T4)."""

    __slots__ = ("capture", "span", "token")

    def __init__(
        self, turn: TurnTelemetry, name: str, call_id: Any, args: Any, description: str | None
    ) -> None:
        self.capture = turn.capture
        self.span: Any = None
        self.token: Any = None
        if turn.tracer is None:
            return
        from opentelemetry import context, trace

        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
        }
        if isinstance(call_id, str):
            attributes["gen_ai.tool.call.id"] = call_id
        if description:
            attributes["gen_ai.tool.description"] = description
        if self.capture:
            attributes["gen_ai.tool.call.arguments"] = _json(args or {})
        self.span = turn.tracer.start_span(
            f"execute_tool {name}",
            context=turn.context,
            kind=trace.SpanKind.INTERNAL,
            attributes=attributes,
        )
        self.token = context.attach(trace.set_span_in_context(self.span, turn.context))

    def end(self, response: Any, failure: str | None) -> None:
        """The call was answered with ``response``; ``failure`` is its error type, if any."""
        span = self.span
        if span is None:
            return
        if isinstance(response, Mapping):
            if failure is None and self.capture and "output" in response:
                span.set_attribute("gen_ai.tool.call.result", _json(response["output"]))
            if failure is not None:
                _failed(span, failure, _str_or_none(response.get("error")))
        elif failure is not None:
            _failed(span, failure, None)
        self._close()

    def fail(self, exc: BaseException) -> None:
        if self.span is not None:
            _failed(self.span, type(exc).__qualname__, None)
            self._close()

    def _close(self) -> None:
        from opentelemetry import context

        self.span.end()
        context.detach(self.token)
        self.span = self.token = None


class _TimedModel:
    """The turn's model client, its bodies timed for the request being read (T6)."""

    __slots__ = ("_model", "_turn")

    def __init__(self, model: Any, turn: TurnTelemetry) -> None:
        self._model = model
        self._turn = turn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def stream(self, request: Any, *, timeout: float | None) -> Any:
        return self._timed(self._model.stream(request, timeout=timeout))

    def resume(self, *args: Any, **kwargs: Any) -> Any:
        return self._timed(self._model.resume(*args, **kwargs))

    def _timed(self, body: Any) -> Any:
        current = self._turn.current
        return body if current is None else _TimedBody(body, current)


class _TimedBody:
    """A response body that tells its request when the first chunk came (T6)."""

    __slots__ = ("_body", "_request")

    def __init__(self, body: Any, request: RequestTelemetry) -> None:
        self._body = body
        self._request = request

    async def __aenter__(self) -> Any:
        chunks = await self._body.__aenter__()
        pump = getattr(chunks, "pump", None)
        if pump is not None:
            return _TimedPump(chunks, pump, self._request)
        return _timed(chunks, self._request)

    async def __aexit__(self, *exc: object) -> Any:
        return await self._body.__aexit__(*exc)


class _TimedPump:
    """A pushing body (H11): the sink is told of the first chunk, then called directly."""

    __slots__ = ("_chunks", "_pump", "_request")

    def __init__(self, chunks: Any, pump: Any, request: RequestTelemetry) -> None:
        self._chunks = chunks
        self._pump = pump
        self._request = request

    def __aiter__(self) -> Any:
        return _timed(self._chunks, self._request)

    async def pump(self, sink: Any) -> Any:
        return await self._pump(_FirstSink(sink, self._request))


class _FirstSink:
    """The sink of a pushing body, timing its first chunk."""

    __slots__ = ("_request", "_seen", "_sink")

    def __init__(self, sink: Any, request: RequestTelemetry) -> None:
        self._sink = sink
        self._request = request
        self._seen = False

    def __call__(self, chunk: bytes) -> None:
        if not self._seen:
            self._seen = True
            self._request.chunk()
        self._sink(chunk)


async def _timed(chunks: Any, request: RequestTelemetry) -> Any:
    async for chunk in chunks:
        request.chunk()
        yield chunk


# -- attribute helpers ----------------------------------------------------


def error_type(error: Any) -> str:
    """T5: ``error.type`` of a provider error: the HTTP status (``"400"``, ``"500"``),
    ``"timeout"`` for a timed-out request, else the error's code (``"CONNECTION"``,
    ``"MALFORMED_STREAM"``, ``"NO_FINISH_REASON"`` ...), else ``"_OTHER"``."""
    status = getattr(error, "status", None)
    if status is not None:
        return str(status)
    if getattr(error, "kind", None) == "timeout":
        return "timeout"
    code = getattr(error, "code", None)
    return str(code) if code else "_OTHER"


def _failed(span: Any, failure: str, message: str | None) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", failure)
    span.set_status(Status(StatusCode.ERROR, message or None))


def _usage_attributes(out: dict[str, Any], usage: Mapping[str, Any]) -> None:
    """T3: input and output tokens as the service billed them (thinking is output)."""
    prompt = usage.get("promptTokenCount", usage.get("total_input_tokens"))
    if isinstance(prompt, int):
        out["gen_ai.usage.input_tokens"] = prompt
    output = 0
    seen = False
    for key in (
        "candidatesTokenCount",
        "thoughtsTokenCount",
        "total_output_tokens",
        "total_thought_tokens",
    ):
        value = usage.get(key)
        if isinstance(value, int):
            output += value
            seen = True
    if seen:
        out["gen_ai.usage.output_tokens"] = output
    cached = usage.get("cachedContentTokenCount", usage.get("total_cached_tokens"))
    if isinstance(cached, int):
        out["gen_ai.usage.cache_read.input_tokens"] = cached


def _summed(usages: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    if len(usages) == 1:
        return usages[0]
    total: dict[str, int] = {}
    for usage in usages:
        for key, value in usage.items():
            if type(value) is int:
                total[key] = total.get(key, 0) + value
    return total


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _text(exc: BaseException) -> str | None:
    try:
        return str(exc) or None
    except Exception:
        return None


def _json(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()


# -- content capture (T7) -------------------------------------------------


def _request_content(attributes: dict[str, Any], request: Mapping[str, Any]) -> None:
    contents = request.get("contents")
    if isinstance(contents, list):
        attributes["gen_ai.input.messages"] = _json([_message(c) for c in contents])
    system = request.get("systemInstruction")
    if isinstance(system, Mapping):
        parts = system.get("parts")
        if isinstance(parts, list):
            attributes["gen_ai.system_instructions"] = _json([_part(p) for p in parts])


def _response_content(attributes: dict[str, Any], result: Any) -> None:
    parts = getattr(result, "parts", None)
    if not isinstance(parts, list):
        return
    message: dict[str, Any] = {"role": "assistant", "parts": [_part(p) for p in parts]}
    finish = getattr(result, "finish_reason", None)
    if finish:
        message["finish_reason"] = str(finish).lower()
    attributes["gen_ai.output.messages"] = _json([message])


def _message(content: Any) -> dict[str, Any]:
    if not isinstance(content, Mapping):
        return {"role": "user", "parts": []}
    role = "assistant" if content.get("role") == "model" else "user"
    parts = content.get("parts")
    out = [_part(p) for p in parts] if isinstance(parts, list) else []
    if out and all(p.get("type") == "tool_call_response" for p in out):
        role = "tool"
    return {"role": role, "parts": out}


def _part(part: Any) -> dict[str, Any]:
    """A Gemini part in the conventions' message schema."""
    if not isinstance(part, Mapping):
        return {"type": "unknown"}
    if "text" in part:
        kind = "reasoning" if part.get("thought") is True else "text"
        return {"type": kind, "content": part["text"]}
    call = part.get("functionCall")
    if isinstance(call, Mapping):
        return {
            "type": "tool_call",
            "id": call.get("id"),
            "name": call.get("name"),
            "arguments": call.get("args"),
        }
    response = part.get("functionResponse")
    if isinstance(response, Mapping):
        return {"type": "tool_call_response", "id": response.get("id"), "response": response}
    for key in part:
        if key not in ("thoughtSignature", "thought"):
            return {"type": key}
    return {"type": "unknown"}
