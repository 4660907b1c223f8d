"""Smaller turn-loop gaps (turn-loop addendum L13 fields, L36-L39)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from fastagg import events
from fastagg.client import GeminiClient
from fastagg.errors import ProviderError
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import WRAPUP_NOTE
from fastagg.testing import FakeGemini, Step
from fastagg.testing.chunks import call, chunk, signature, text
from scripted_model import USER, Reply, ScriptedModel, answer, turn

ran: list[dict[str, Any]] = []


def lookup(q: str) -> dict[str, Any]:
    """Look something up."""
    ran.append({"q": q})
    return {"q": q, "hits": 1}


def step_calls(*parts: dict[str, Any]) -> Reply:
    return Reply([chunk(*parts, finish_reason="STOP")])


# -- L36 request_timeout ----------------------------------------------------------------


async def test_l36_request_timeout_bounds_each_model_call_within_the_time_left() -> None:
    model = ScriptedModel(answer("Ok."))
    await turn(model, limits=TurnLimits(request_timeout=5.0, turn_timeout=1000.0))
    assert model.timeouts == [5.0]
    model = ScriptedModel(answer("Ok."))
    await turn(model, limits=TurnLimits(request_timeout=500.0, turn_timeout=20.0))
    assert model.timeouts[0] is not None and 19.0 < model.timeouts[0] <= 20.0
    model = ScriptedModel(answer("Ok."))
    await turn(model, limits=TurnLimits(request_timeout=7.0, turn_timeout=float("inf")))
    assert model.timeouts == [7.0]


def test_l36_request_timeout_must_be_positive() -> None:
    try:
        TurnLimits(request_timeout=0)
    except ValueError as exc:
        assert str(exc) == "TurnLimits.request_timeout must be positive or None, not 0"
    else:
        raise AssertionError("request_timeout=0 was accepted")


async def test_l36_the_time_left_never_replaces_a_smaller_client_timeout() -> None:
    slow = Step(chunks=[chunk(finish_reason="STOP")], delay_first_byte=30.0)
    async with (
        FakeGemini([slow]) as server,
        httpx.AsyncClient(timeout=httpx.Timeout(0.2)) as http,
    ):
        client = GeminiClient(
            "gemini-3-flash-preview", base_url=server.url, api_key="k", http_client=http
        )
        with_time_left = TurnLimits(turn_timeout=60.0, provider_retries=0)
        result = await turn_over(client, with_time_left)
    assert result.stop_reason == StopReason.PROVIDER_ERROR
    assert result.error is not None and result.error.kind == "timeout"


async def turn_over(client: GeminiClient, limits: TurnLimits) -> Any:
    from fastagg.loop import run_turn

    return await run_turn(client, list(USER), limits=limits)


# -- L37 retries count what was sent ------------------------------------------------------


async def test_l37_a_retry_cut_short_by_an_abort_is_not_counted() -> None:
    busy = ProviderError(503, "UNAVAILABLE", "overloaded", True, retry_after=20.0)
    model = ScriptedModel(Reply(error=busy), answer("never sent"))
    abort = asyncio.Event()

    def on_event(event: Any) -> None:
        if isinstance(event, events.Lifecycle) and event.phase == "provider-retry":
            abort.set()

    result = await turn(model, limits=TurnLimits(turn_timeout=60.0), abort=abort, on_event=on_event)
    assert result.stop_reason == StopReason.ABORTED
    assert len(model.requests) == 1
    assert result.retries == {"malformed": 0, "no-finish": 0, "provider": 0}


async def test_l37_a_retry_that_was_sent_is_counted() -> None:
    busy = ProviderError(503, "UNAVAILABLE", "overloaded", True, retry_after=0.0)
    model = ScriptedModel(Reply(error=busy), answer("Ok."))
    result = await turn(model, limits=TurnLimits(turn_timeout=60.0))
    assert result.stop_reason == StopReason.COMPLETED
    assert result.retries == {"malformed": 0, "no-finish": 0, "provider": 1}


# -- L38 the wrap-up nudge only for a budget the caller set -------------------------------


async def test_l38_no_wrapup_nudge_for_the_default_turn_timeout() -> None:
    model = ScriptedModel(
        step_calls(call("lookup", {"q": "a"}, id="a", signature=signature("a"))), answer("Ok.")
    )
    await turn(model, tools=[lookup], limits=TurnLimits(wrapup_lead=1e6))
    assert [list(p) for p in model.requests[1]["contents"][-1]["parts"]] == [["functionResponse"]]


async def test_l38_wrapup_nudge_when_the_caller_set_the_same_budget() -> None:
    model = ScriptedModel(
        step_calls(call("lookup", {"q": "a"}, id="a", signature=signature("a"))), answer("Ok.")
    )
    await turn(model, tools=[lookup], limits=TurnLimits(turn_timeout=300.0, wrapup_lead=1e6))
    last = model.requests[1]["contents"][-1]["parts"][-1]
    assert last == {"text": WRAPUP_NOTE.format(remaining="5m")}
    assert TurnLimits().turn_budget_set is False
    assert TurnLimits(turn_timeout=300.0).turn_budget_set is True


# -- L13 Lifecycle fields -------------------------------------------------------------------


async def test_l13a_lifecycle_events_carry_provider_and_timestamp() -> None:
    model = ScriptedModel(Reply([chunk(finish_reason="MALFORMED_FUNCTION_CALL")]), answer("Ok."))
    seen: list[Any] = []
    before = time.time()
    await turn(model, on_event=seen.append)
    after = time.time()
    (event,) = [e for e in seen if isinstance(e, events.Lifecycle)]
    assert (event.phase, event.provider, event.detail) == ("malformed-retry", "gemini", None)
    assert event.timestamp is not None and before <= event.timestamp <= after


# -- L39 two calls with one id ---------------------------------------------------------------


async def test_l39_same_id_twice_in_a_step_runs_once_and_answers_both_parts() -> None:
    ran.clear()
    sig = signature("dup")
    model = ScriptedModel(
        step_calls(
            call("lookup", {"q": "a"}, id="x", signature=sig), call("lookup", {"q": "a"}, id="x")
        ),
        answer("Ok."),
    )
    seen: list[Any] = []
    result = await turn(model, tools=[lookup], on_event=seen.append)
    assert ran == [{"q": "a"}]
    assert result.tool_call_count == 1
    sent = model.requests[1]["contents"]
    assert len([p for p in sent[1]["parts"] if "functionCall" in p]) == 2  # both parts kept
    response = {"output": {"q": "a", "hits": 1}}
    assert sent[2]["parts"] == [
        {"functionResponse": {"id": "x", "name": "lookup", "response": response}},
        {"functionResponse": {"id": "x", "name": "lookup", "response": response}},
    ]
    warnings = [e for e in seen if isinstance(e, events.Lifecycle)]
    assert [(e.phase, e.tool_name) for e in warnings] == [("duplicate-call-id", "lookup")]
    assert warnings[0].detail == (
        "call 1 repeats the id 'x' of call 0 of this step with the same name and "
        "arguments; the tool ran once and each part gets its response"
    )
    ends = [(e.index, e.status) for e in seen if isinstance(e, events.ToolCallEnd)]
    assert sorted(ends) == [(0, "ok"), (1, "ok")]


async def test_l39_same_id_in_a_later_step_reuses_the_answer() -> None:
    ran.clear()
    model = ScriptedModel(
        step_calls(call("lookup", {"q": "a"}, id="x", signature=signature("1"))),
        step_calls(call("lookup", {"q": "a"}, id="x", signature=signature("2"))),
        answer("Ok."),
    )
    result = await turn(model, tools=[lookup])
    assert ran == [{"q": "a"}]
    assert result.stop_reason == StopReason.COMPLETED
    assert model.requests[2]["contents"][4]["parts"][0]["functionResponse"]["response"] == {
        "output": {"q": "a", "hits": 1}
    }


async def test_l39_same_id_with_other_arguments_runs_both_and_warns() -> None:
    ran.clear()
    model = ScriptedModel(
        step_calls(
            call("lookup", {"q": "a"}, id="x", signature=signature("3")),
            call("lookup", {"q": "b"}, id="x"),
        ),
        answer("Ok."),
    )
    seen: list[Any] = []
    result = await turn(model, tools=[lookup], on_event=seen.append)
    assert sorted(r["q"] for r in ran) == ["a", "b"]
    assert result.tool_call_count == 2
    (warning,) = [e for e in seen if isinstance(e, events.Lifecycle)]
    assert warning.detail == (
        "call 1 reuses the id 'x' of another call of this turn with a different name or "
        "arguments; both were run"
    )


# -- L40 a body that switches responseId ------------------------------------------------------


async def test_l40_a_spliced_body_is_reported_not_silently_merged() -> None:
    model = ScriptedModel(
        Reply(
            [
                chunk(text("Part one. "), response_id="r1"),
                chunk(text("Part two."), finish_reason="STOP", response_id="r2"),
            ]
        )
    )
    seen: list[Any] = []
    result = await turn(model, on_event=seen.append)
    assert result.stop_reason == StopReason.COMPLETED
    (event,) = [e for e in seen if isinstance(e, events.Lifecycle)]
    assert (event.phase, event.step) == ("response-id-changed", 1)
    assert event.detail == (
        'event 1: responseId changed from "r1" to "r2"; the body holds more than one '
        "response and they were aggregated as one model turn"
    )
