"""Interactions requests name their API revision, and errors the interaction recorded
(``errors[]``, a step's ``error``) end or retry the step instead of hiding in a completed
turn, end to end over loopback (spec/interactions.md I32-I37)."""

from __future__ import annotations

from typing import Any

import pytest

from fastagg import GeminiClient
from fastagg.errors import ProviderError
from fastagg.events import Lifecycle
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import run_turn
from fastagg.testing import FakeGemini, InteractionTurn, Step
from fastagg.testing.chunks import chunk, final, text
from fastagg.testing.fake_interactions import arguments_step, error_step, text_step
from interactions_turns import ANSWER, CALLS, get_weather

USER = [{"role": "user", "parts": [{"text": "Weather in Paris and London?"}]}]
FAST = TurnLimits(retry_backoff=0.0, max_retry_backoff=0.0)


def client(server: FakeGemini, **kwargs: Any) -> GeminiClient:
    kwargs.setdefault("api", "interactions")
    return GeminiClient("gemini-3.8-flash", api_key="k", base_url=server.url, **kwargs)


def revisions(server: FakeGemini) -> list[str | None]:
    return [h.get("api-revision") for h in server.interactions.headers]  # type: ignore[union-attr]


async def test_i32_every_interactions_request_names_the_pinned_revision() -> None:
    dropped = InteractionTurn(CALLS.events, status=CALLS.status, drop_after=3)
    async with FakeGemini([], interactions=[dropped, ANSWER]) as server, client(server) as model:
        result = await run_turn(model, USER, tools=[get_weather])
        methods = [r[0] for r in server.interactions.records]  # type: ignore[union-attr]
        assert revisions(server) == ["2026-05-20", "2026-05-20", "2026-05-20"]
        with pytest.raises(ProviderError, match="script exhausted"):  # refused, still recorded
            async with model.create({"input": "hi"}):
                pass
    assert result.stop_reason is StopReason.COMPLETED
    assert methods == ["POST", "GET", "POST"]  # create, resume, the follow-up
    assert revisions(server)[-1] == "2026-05-20"


async def test_i32_a_generate_content_request_names_no_revision() -> None:
    async with (
        FakeGemini([Step([chunk(text("Hi.")), final()])]) as server,
        client(server, api="generate_content") as model,
    ):
        result = await run_turn(model, USER)
    assert result.stop_reason is StopReason.COMPLETED
    assert "api-revision" not in server.records[0].headers
    assert "Api-Revision" not in server.records[0].headers


@pytest.mark.parametrize(
    ("kwargs", "sent"),
    [
        ({"api_revision": "2026-05-07"}, "2026-05-07"),
        ({"api_revision": None}, None),
        ({"headers": {"Api-Revision": "2026-06-01"}}, "2026-06-01"),
        ({"headers": {"api-revision": "2026-06-01"}, "api_revision": "2026-05-07"}, "2026-06-01"),
    ],
)
async def test_i32_the_revision_named_omitted_or_given_in_headers(
    kwargs: dict[str, Any], sent: str | None
) -> None:
    async with FakeGemini([], interactions=[ANSWER]) as server, client(server, **kwargs) as model:
        await run_turn(model, USER)
        assert revisions(server) == [sent]


def test_i32_api_revision_must_be_a_str() -> None:
    with pytest.raises(TypeError, match="api_revision"):
        GeminiClient("m", api_key="k", api_revision=20260520)  # type: ignore[arg-type]


async def test_i36_completed_interaction_with_an_error_is_no_completed_turn() -> None:
    broken = InteractionTurn(
        text_step(0, "Paris is "),
        errors=[{"code": "api_error", "message": "Generation stopped by an internal fault."}],
    )
    async with FakeGemini([], interactions=[broken]) as server, client(server) as model:
        result = await run_turn(model, USER, limits=FAST)
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert (result.finish_reason, result.raw_finish_reason) == ("error", "completed")
    error = result.error
    assert isinstance(error, ProviderError)
    assert (error.status, error.code, error.kind) == (500, "API_ERROR", "in-stream")
    assert error.message == "Generation stopped by an internal fault."
    assert error.body == {
        "code": 500,
        "status": "API_ERROR",
        "message": "Generation stopped by an internal fault.",
    }
    assert result.text.startswith("Paris is \n\n")  # L20: shown, never appended
    assert result.contents == USER


async def test_i34_a_retryable_recorded_error_before_any_output_is_retried() -> None:
    failed = InteractionTurn(
        status="failed",
        errors=[{"code": "rate_limit_exceeded", "message": "Too many tokens per minute."}],
    )
    events: list[Any] = []
    async with FakeGemini([], interactions=[failed, ANSWER]) as server, client(server) as model:
        result = await run_turn(model, USER, limits=FAST, on_event=events.append)
        bodies = [r[3] for r in server.interactions.records]  # type: ignore[union-attr]
    assert result.stop_reason is StopReason.COMPLETED
    assert result.text == "Paris: 18 C, clear. London: 12 C, rain."
    assert result.retries["provider"] == 1
    assert bodies[0]["input"] == bodies[1]["input"]
    details = [e.detail for e in events if isinstance(e, Lifecycle) and e.phase == "provider-retry"]
    assert details == ["429 RATE_LIMIT_EXCEEDED: Too many tokens per minute."]


async def test_i33_i34_a_step_error_is_a_google_rpc_status() -> None:
    overloaded = InteractionTurn(error_step(0, 14, "The model is overloaded."))
    async with FakeGemini([], interactions=[overloaded, ANSWER]) as server, client(server) as model:
        result = await run_turn(model, USER, limits=FAST)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.retries["provider"] == 1

    refused = InteractionTurn(error_step(0, 3, "The prompt names an unknown file.", "Sure"))
    async with FakeGemini([], interactions=[refused]) as server, client(server) as model:
        result = await run_turn(model, USER, limits=FAST)
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    error = result.error
    assert isinstance(error, ProviderError)
    assert (error.status, error.code, error.retryable) == (400, "INVALID_ARGUMENT", False)
    assert error.message == "The prompt names an unknown file."


async def test_i36_calls_of_an_interaction_with_an_error_are_not_run() -> None:
    ran: list[str] = []

    def get_weather(city: str) -> str:
        """Current weather for a city."""
        ran.append(city)
        return "sunny"

    calls = InteractionTurn(
        arguments_step(0, "c1", "get_weather", '{"city":"Paris"}'),
        status="requires_action",
        errors=[{"code": "permission_denied", "message": "The tool's project is not allowed."}],
    )
    async with FakeGemini([], interactions=[calls]) as server, client(server) as model:
        result = await run_turn(model, USER, tools=[get_weather], limits=FAST)
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert (result.error.status, result.error.code) == (403, "PERMISSION_DENIED")  # type: ignore[union-attr]
    assert ran == [] and result.tool_call_count == 0
    assert result.contents == USER


async def test_i35_a_blocked_generation_is_a_content_filter_answer() -> None:
    blocked = InteractionTurn(
        status="failed", errors=[{"code": "safety", "message": "The output was blocked."}]
    )
    async with FakeGemini([], interactions=[blocked]) as server, client(server) as model:
        result = await run_turn(model, USER, limits=FAST)
    assert result.stop_reason is StopReason.COMPLETED
    assert (result.finish_reason, result.raw_finish_reason) == ("content-filter", "SAFETY")
    assert result.error is None


async def test_i34_a_uri_code_reads_as_its_last_segment() -> None:
    down = InteractionTurn(
        status="failed",
        errors=[
            {
                "code": "https://generativelanguage.googleapis.com/errors/service_unavailable",
                "message": "Try again later.",
            }
        ],
    )
    async with FakeGemini([], interactions=[down, down]) as server, client(server) as model:
        result = await run_turn(model, USER, limits=TurnLimits(provider_retries=1, retry_backoff=0))
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    error = result.error
    assert isinstance(error, ProviderError)
    assert (error.status, error.code, error.retryable) == (503, "SERVICE_UNAVAILABLE", True)
    assert result.retries["provider"] == 1


async def test_i37_fake_interactions_serves_errors_and_step_errors() -> None:
    errors = [{"code": "api_error", "message": "fault"}]
    turn = InteractionTurn(error_step(0, 13, "step fault", "Hi"), errors=errors)
    async with FakeGemini([], interactions=[turn]) as server, client(server) as model:
        async with model.create({"input": "hi"}) as body:
            async for _ in body:
                pass
        stored = server.interactions.interactions["v1_fake1"]  # type: ignore[union-attr]
        headers = server.interactions.headers  # type: ignore[union-attr]
    assert [e["event_type"] for e in stored.events] == [
        "interaction.created",
        "step.start",
        "step.delta",
        "step.stop",
        "interaction.completed",
    ]
    assert stored.events[1]["step"] == {
        "type": "model_output",
        "error": {"code": 13, "message": "step fault"},
    }
    assert stored.events[-1]["interaction"] == {
        "id": "v1_fake1",
        "status": "completed",
        "errors": errors,
    }
    assert headers[0]["accept"] == "text/event-stream"
    assert headers[0]["x-goog-api-key"] == "k"
