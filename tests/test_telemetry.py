"""OpenTelemetry spans and metrics of a turn (spec/observability.md T1-T9), read back from the
SDK's in-memory exporter and metric reader.

The tests in this process hand fastagg.telemetry a tracer and a meter of their own (a global
provider can be set once per process, and would turn telemetry on for every later test);
finding the global providers, and importing nothing without them, is checked in subprocesses.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from fastagg import GeminiClient, TurnLimits, run_turn, telemetry, tool
from fastagg.testing import FakeGemini, Step, call, chunk, final, signature, text, usage

ROOT = Path(__file__).resolve().parent.parent
MODEL = "gemini-3-flash-preview"
QUESTION = [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}]


@pytest.fixture
def otel(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[InMemorySpanExporter, Any]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    monkeypatch.setattr(telemetry, "_tracer", provider.get_tracer("fastagg"))
    APP.append(provider.get_tracer("app"))
    monkeypatch.setattr(telemetry, "_instruments", telemetry._Instruments(meters.get_meter("f")))
    monkeypatch.delenv(telemetry.CAPTURE_ENV, raising=False)
    yield exporter, reader
    APP.clear()
    provider.shutdown()
    meters.shutdown()


APP: list[Any] = []  # the application's tracer, from the test's provider


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    # the tool's own span: a synchronous tool runs in a thread with a copy of the context
    with APP[0].start_as_current_span("the tool's own work"):
        return {"city": city, "temp_c": 24}


@tool
async def broken(city: str) -> dict[str, Any]:
    """Always fails."""
    raise ValueError(f"no weather for {city}")


def _two_steps(name: str = "get_weather") -> list[Step]:
    return [
        Step(
            [
                chunk(call(name, {"city": "Paris"}, id="call-1", signature=signature("a"))),
                final(usage=usage(10, 3), response_id="r1"),
            ]
        ),
        Step([chunk(text("Sunny and 24 °C.")), final(signature("b"), usage=usage(20, 4, 2))]),
    ]


async def _turn(script: list[Step], tools: list[Any], **kwargs: Any) -> Any:
    async with FakeGemini(script) as server:
        async with GeminiClient(MODEL, api_key="k", base_url=server.url) as model:
            return await run_turn(model, QUESTION, tools=tools, **kwargs), server.url


def _by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        out.setdefault(span.name, []).append(span)
    return out


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def _metrics(reader: Any) -> dict[str, Any]:
    data = reader.get_metrics_data()
    return {
        m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
    }


async def test_t2_t3_t4_a_two_step_tool_turn_is_one_tree_of_spans(otel: Any) -> None:
    exporter, _ = otel
    result, url = await _turn(_two_steps(), [get_weather])
    assert result.stop_reason.value == "completed"
    spans = exporter.get_finished_spans()
    names = _by_name(spans)
    assert sorted(names) == [
        "execute_tool get_weather",
        f"generate_content {MODEL}",
        "invoke_agent",
        "the tool's own work",
    ]
    (turn,) = names["invoke_agent"]
    first, second = names[f"generate_content {MODEL}"]
    (tool_span,) = names["execute_tool get_weather"]
    (inner,) = names["the tool's own work"]
    assert turn.parent is None
    assert turn.kind is SpanKind.INTERNAL
    assert first.kind is SpanKind.CLIENT and second.kind is SpanKind.CLIENT
    assert tool_span.kind is SpanKind.INTERNAL
    for child in (first, second, tool_span):
        assert child.parent is not None
        assert child.parent.span_id == turn.context.span_id
        assert child.context.trace_id == turn.context.trace_id
    assert inner.parent is not None and inner.parent.span_id == tool_span.context.span_id
    port = _port(url)
    base = {
        "gen_ai.provider.name": "gcp.gemini",
        "gen_ai.request.model": MODEL,
        "server.address": "127.0.0.1",
        "server.port": port,
    }
    assert dict(turn.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        **base,
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 9,
        "gen_ai.response.finish_reasons": ("stop",),
        "fastagg.stop_reason": "completed",
        "fastagg.finish_reason": "stop",
        "fastagg.steps": 2,
        "fastagg.retries": 0,
        "fastagg.retries.malformed": 0,
        "fastagg.retries.no-finish": 0,
        "fastagg.retries.provider": 0,
        "fastagg.hops": 0,
        "fastagg.tool_calls": 1,
    }
    assert dict(first.attributes or {}) == {
        "gen_ai.operation.name": "generate_content",
        **base,
        "fastagg.step": 1,
        "fastagg.attempt": 1,
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 3,
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.response.id": "r1",
        "gen_ai.response.model": MODEL,
    }
    assert dict(second.attributes or {})["gen_ai.usage.output_tokens"] == 6  # thinking counts
    assert dict(second.attributes or {})["fastagg.step"] == 2
    assert dict(tool_span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": "call-1",
        "gen_ai.tool.description": "Current weather for a city.",
    }
    for span in spans:
        assert span.status.status_code is StatusCode.UNSET
    # T3: the request's span ends when its body does, before the tool starts
    assert first.end_time is not None and tool_span.start_time is not None
    assert first.end_time <= tool_span.start_time


async def test_t6_the_genai_client_metrics_of_each_request(otel: Any) -> None:
    _, reader = otel
    _, url = await _turn(_two_steps(), [get_weather])
    found = _metrics(reader)
    assert sorted(found) == [
        "gen_ai.client.operation.duration",
        "gen_ai.client.operation.time_to_first_chunk",
        "gen_ai.client.token.usage",
    ]
    base = {
        "gen_ai.operation.name": "generate_content",
        "gen_ai.provider.name": "gcp.gemini",
        "gen_ai.request.model": MODEL,
        "gen_ai.response.model": MODEL,
        "server.address": "127.0.0.1",
        "server.port": _port(url),
    }
    duration = found["gen_ai.client.operation.duration"]
    assert duration.unit == "s"
    (point,) = duration.data.data_points
    assert dict(point.attributes) == base
    assert point.count == 2
    assert list(point.explicit_bounds) == [0.01 * 2.0**i for i in range(14)]
    first = found["gen_ai.client.operation.time_to_first_chunk"]
    assert first.unit == "s"
    (point,) = first.data.data_points
    assert dict(point.attributes) == base and point.count == 2
    tokens = found["gen_ai.client.token.usage"]
    assert tokens.unit == "{token}"
    by_type = {p.attributes["gen_ai.token.type"]: p for p in tokens.data.data_points}
    assert sorted(by_type) == ["input", "output"]
    assert (by_type["input"].sum, by_type["input"].count) == (30, 2)
    assert (by_type["output"].sum, by_type["output"].count) == (9, 2)
    assert dict(by_type["input"].attributes) == {**base, "gen_ai.token.type": "input"}
    assert list(by_type["input"].explicit_bounds) == [4.0**i for i in range(14)]


async def test_t5_a_provider_error_ending_the_turn_is_an_error_on_both_spans(otel: Any) -> None:
    exporter, reader = otel
    script = [Step(http_error=400, error_message="API key not valid. Please pass a valid API key.")]
    result, _ = await _turn(script, [])
    assert result.stop_reason.value == "provider-error"
    names = _by_name(exporter.get_finished_spans())
    (turn,) = names["invoke_agent"]
    (request,) = names[f"generate_content {MODEL}"]
    for span in (turn, request):
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "API key not valid. Please pass a valid API key."
        assert dict(span.attributes or {})["error.type"] == "400"
    assert dict(turn.attributes or {})["fastagg.stop_reason"] == "provider-error"
    (point,) = _metrics(reader)["gen_ai.client.operation.duration"].data.data_points
    assert point.attributes["error.type"] == "400"


async def test_t5_a_retried_500_gives_one_error_span_per_attempt(otel: Any) -> None:
    exporter, _ = otel
    script = [Step(http_error=500), Step(http_error=500)]
    limits = TurnLimits(provider_retries=1, retry_backoff=0.01, max_retry_backoff=0.01)
    result, _ = await _turn(script, [], limits=limits)
    assert result.stop_reason.value == "provider-error"
    names = _by_name(exporter.get_finished_spans())
    attempts = names[f"generate_content {MODEL}"]
    assert [dict(s.attributes or {})["fastagg.attempt"] for s in attempts] == [1, 2]
    assert [dict(s.attributes or {})["error.type"] for s in attempts] == ["500", "500"]
    (turn,) = names["invoke_agent"]
    attributes = dict(turn.attributes or {})
    assert (attributes["error.type"], attributes["fastagg.retries"]) == ("500", 1)
    assert attributes["fastagg.retries.provider"] == 1


async def test_t4_a_failing_tool_is_an_error_span_and_the_turn_goes_on(otel: Any) -> None:
    exporter, _ = otel
    result, _ = await _turn(_two_steps("broken"), [broken])
    assert result.stop_reason.value == "completed"
    names = _by_name(exporter.get_finished_spans())
    (span,) = names["execute_tool broken"]
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "ValueError: no weather for Paris"
    assert dict(span.attributes or {})["error.type"] == "ValueError"
    (turn,) = names["invoke_agent"]
    assert turn.status.status_code is StatusCode.UNSET


async def test_t7_no_content_on_spans_unless_the_application_opts_in(
    otel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter, _ = otel
    await _turn(_two_steps(), [get_weather])
    content_keys = {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
    for span in exporter.get_finished_spans():
        assert not content_keys & set(span.attributes or {})
    exporter.clear()
    monkeypatch.setenv(telemetry.CAPTURE_ENV, "true")
    await _turn(_two_steps(), [get_weather], system_instruction="Be brief.")
    names = _by_name(exporter.get_finished_spans())
    first = dict(names[f"generate_content {MODEL}"][0].attributes or {})
    assert first["gen_ai.input.messages"] == (
        '[{"role":"user","parts":[{"type":"text","content":"Weather in Paris?"}]}]'
    )
    assert first["gen_ai.system_instructions"] == '[{"type":"text","content":"Be brief."}]'
    assert first["gen_ai.output.messages"] == (
        '[{"role":"assistant","parts":[{"type":"tool_call","id":"call-1","name":"get_weather",'
        '"arguments":{"city":"Paris"}}],"finish_reason":"stop"}]'
    )
    tool_span = dict(names["execute_tool get_weather"][0].attributes or {})
    assert tool_span["gen_ai.tool.call.arguments"] == '{"city":"Paris"}'
    assert tool_span["gen_ai.tool.call.result"] == '{"city":"Paris","temp_c":24}'


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


_TURN = """
import asyncio, sys
from fastagg import GeminiClient, run_turn
from fastagg.testing import FakeGemini, Step, chunk, final, text

async def main():
    async with FakeGemini([Step([chunk(text("Hi.")), final()])]) as server:
        async with GeminiClient("gemini-3-flash-preview", api_key="k", base_url=server.url) as m:
            return await run_turn(m, [{"role": "user", "parts": [{"text": "Hi"}]}])
"""


def test_t1_a_turn_without_opentelemetry_imports_none_of_it() -> None:
    out = _run(
        _TURN
        + """
print(asyncio.run(main()).stop_reason.value)
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""
    )
    assert out == "completed\n[]\n"


def test_t1_opentelemetry_imported_without_a_provider_records_nothing() -> None:
    out = _run(
        _TURN
        + """
import opentelemetry.trace, opentelemetry.metrics
from fastagg import telemetry
from fastagg.loop.turn import Turn
seen = []
real = Turn.__init__
def spy(self, *a, **k):
    real(self, *a, **k)
    seen.append(self.otel)
Turn.__init__ = spy
print(asyncio.run(main()).stop_reason.value, seen, telemetry._tracer, telemetry._instruments)
"""
    )
    assert out == "completed [None] None None\n"


def test_t1_the_global_providers_are_found_when_set() -> None:
    out = _run(
        _TURN
        + """
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
asyncio.run(main())
print([s.name for s in exporter.get_finished_spans()])
print(sorted(m.name for rm in reader.get_metrics_data().resource_metrics
             for sm in rm.scope_metrics for m in sm.metrics))
"""
    )
    assert out == (
        "['generate_content gemini-3-flash-preview', 'invoke_agent']\n"
        # no usageMetadata in that response: no token metric (the conventions: MUST NOT)
        "['gen_ai.client.operation.duration', 'gen_ai.client.operation.time_to_first_chunk']\n"
    )


def test_t1_a_disabled_sdk_records_nothing() -> None:
    out = _run(
        """
import os
os.environ["OTEL_SDK_DISABLED"] = "true"
"""
        + _TURN
        + """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from fastagg import telemetry
trace.set_tracer_provider(TracerProvider())
print(telemetry.for_turn(object()))
"""
    )
    assert out == "None\n"


def test_t8_off_a_turn_calls_into_telemetry_once() -> None:
    """T8: without OpenTelemetry a two-step tool turn makes one call into fastagg.telemetry."""
    out = _run(
        """
import asyncio, sys
from fastagg import GeminiClient, run_turn, tool
from fastagg.testing import FakeGemini, Step, call, chunk, final, signature, text

@tool
async def lookup(key: str) -> str:
    \"\"\"Look a key up.\"\"\"
    return key.upper()

script = [
    Step([chunk(call("lookup", {"key": "a"}, signature=signature("a"))), final()]),
    Step([chunk(text("A.")), final(signature("b"))]),
]
seen = []

def profile(frame, event, arg):
    if event == "call" and frame.f_code.co_filename.endswith("fastagg/telemetry.py"):
        seen.append(frame.f_code.co_name)

async def main():
    async with FakeGemini(script) as server:
        async with GeminiClient("gemini-3-flash-preview", api_key="k", base_url=server.url) as m:
            sys.setprofile(profile)
            try:
                result = await run_turn(m, [{"role": "user", "parts": [{"text": "a?"}]}], tools=[lookup])
            finally:
                sys.setprofile(None)
    print(result.stop_reason.value, result.steps_used, seen)

asyncio.run(main())
"""
    )
    assert out == "completed 2 ['for_turn']\n"
