"""Turn loop: step classification, retries, step cap, history, usage, events (turn-loop.md L1, L3, L4, L9-L13)."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import Any

from fastagg import events
from fastagg.errors import ProviderError
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import FINAL_ANSWER_NOTE, MALFORMED_NOTE, stream_turn
from fastagg.testing.chunks import (
    call,
    chunk,
    error_chunk,
    final,
    malformed_call,
    signature,
    streamed_call,
    text,
    thought,
    usage,
)
from scripted_model import (
    USER,
    Reply,
    ScriptedModel,
    answer,
    assert_replayable,
    calls,
    pending_tasks,
    turn,
)

FAST: dict[str, Any] = {"retry_backoff": 0.001}


async def lookup(q: str) -> dict[str, Any]:
    """Look something up.

    Args:
        q: What to look up.
    """
    return {"found": q.upper()}


def cap_message(n: int, max_steps: int) -> str:
    return (
        f"I gathered information across {n} tool calls but reached the {max_steps}-step limit for a "
        "single turn before I could finish. Please narrow the request or break it into smaller asks "
        "and I'll continue."
    )


# -- L3.5 / L11: a plain answer -------------------------------------------------


async def test_l3_answer_completes_and_is_appended_verbatim() -> None:
    model = ScriptedModel(answer("It is sunny.", sig=signature("a")))
    result = await turn(model)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.finish_reason == "stop"
    assert result.raw_finish_reason == "STOP"
    assert result.text == "It is sunny."
    assert result.message is None
    assert result.error is None
    assert result.steps_used == 1
    assert result.contents == [
        *USER,
        {
            "role": "model",
            "parts": [{"text": "It is sunny."}, {"text": "", "thoughtSignature": signature("a")}],
        },
    ]
    assert model.requests == [{"contents": USER}]
    assert model.timeouts == [model.timeouts[0]] and 299 < model.timeouts[0] <= 300


async def test_l11_reasoning_only_answer_is_not_appended() -> None:
    # A SAFETY finish with only a thought: completed, content-filter, nothing appended.
    model = ScriptedModel(Reply([chunk(thought("Hmm.")), chunk(finish_reason="SAFETY")]))
    result = await turn(model)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.finish_reason == "content-filter"
    assert result.raw_finish_reason == "SAFETY"
    assert result.text == ""
    assert result.contents == USER


async def test_l19_blocked_prompt_is_a_content_filter_answer_not_a_retry() -> None:
    blocked = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": usage(7)}
    model = ScriptedModel(Reply([blocked]))
    result = await turn(model)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.finish_reason == "content-filter"
    assert result.raw_finish_reason == "PROHIBITED_CONTENT"
    assert result.retries == {"malformed": 0, "no-finish": 0, "provider": 0}
    assert len(model.requests) == 1


async def test_l3_max_tokens_answer_maps_to_length() -> None:
    model = ScriptedModel(Reply([chunk(text("Half an ans"), finish_reason="MAX_TOKENS")]))
    result = await turn(model)
    assert (result.stop_reason, result.finish_reason, result.text) == (
        StopReason.COMPLETED,
        "length",
        "Half an ans",
    )


# -- L3.2 / L11: tool steps, signatures byte-exact -----------------------------


async def test_l11_signatures_byte_exact_across_steps() -> None:
    step1 = calls(("lookup", {"q": "a"}), ("lookup", {"q": "b"}), seed="one")
    step2 = Reply(
        [
            chunk(
                text("Checking more."),
                call("lookup", {"q": "c"}, id="two-0", signature=signature("two")),
                finish_reason="STOP",
            )
        ]
    )
    model = ScriptedModel(step1, step2, answer("Done.", sig=signature("end")))
    result = await turn(model, tools=[lookup])
    assert result.stop_reason is StopReason.COMPLETED
    model1 = {
        "role": "model",
        "parts": [
            {"text": "Planning.", "thought": True},
            {
                "functionCall": {"id": "one-0", "name": "lookup", "args": {"q": "a"}},
                "thoughtSignature": signature("one"),
            },
            {"functionCall": {"id": "one-1", "name": "lookup", "args": {"q": "b"}}},
        ],
    }
    responses1 = {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "id": "one-0",
                    "name": "lookup",
                    "response": {"output": {"found": "A"}},
                }
            },
            {
                "functionResponse": {
                    "id": "one-1",
                    "name": "lookup",
                    "response": {"output": {"found": "B"}},
                }
            },
        ],
    }
    model2 = {
        "role": "model",
        "parts": [
            {"text": "Checking more."},
            {
                "functionCall": {"id": "two-0", "name": "lookup", "args": {"q": "c"}},
                "thoughtSignature": signature("two"),
            },
        ],
    }
    assert model.requests[1]["contents"] == [*USER, model1, responses1]
    assert model.requests[2]["contents"][:4] == [*USER, model1, responses1, model2]
    assert result.contents[-1] == {
        "role": "model",
        "parts": [{"text": "Done."}, {"text": "", "thoughtSignature": signature("end")}],
    }
    assert "+" in signature("one") and "/" in signature("one")  # the standard alphabet survived
    assert result.tool_call_count == 3
    assert result.steps_used == 3


# -- L3.3 malformed calls ------------------------------------------------------


async def test_l18_malformed_once_recovered_retry_carries_note() -> None:
    model = ScriptedModel(Reply([malformed_call(usage=usage(10))]), answer("Sunny."))
    result = await turn(model)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.text == "Sunny."
    note = {"role": "user", "parts": [{"text": MALFORMED_NOTE}]}
    assert model.requests[0]["contents"] == USER
    assert model.requests[1]["contents"] == [*USER, note]
    assert result.retries == {"malformed": 1, "no-finish": 0, "provider": 0}
    assert result.steps_used == 1


async def test_l3_malformed_twice_is_provider_error_after_exactly_one_retry() -> None:
    model = ScriptedModel(Reply([malformed_call()]), Reply([malformed_call()]))
    result = await turn(model)
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert result.finish_reason == "error"
    assert result.raw_finish_reason == "MALFORMED_FUNCTION_CALL"
    assert len(model.requests) == 2
    assert result.retries["malformed"] == 1
    assert result.error is not None and result.error.kind == "malformed"
    assert result.error.code == "MALFORMED_FUNCTION_CALL"
    assert result.message == (
        "The model service failed (the model sent MALFORMED_FUNCTION_CALL 2 times). Please try again."
    )
    assert result.text == result.message
    assert_replayable(result.contents)


async def test_l3_unexpected_tool_call_with_a_signed_call_runs_the_call() -> None:
    step = Reply(
        [
            chunk(
                call("lookup", {"q": "x"}, id="u", signature=signature("u")),
                finish_reason="UNEXPECTED_TOOL_CALL",
            )
        ]
    )
    model = ScriptedModel(step, answer("Ok."))
    result = await turn(model, tools=[lookup])
    assert result.stop_reason is StopReason.COMPLETED
    assert model.requests[1]["contents"][1]["parts"][0]["thoughtSignature"] == signature("u")


# -- L3.4 no finish reason -----------------------------------------------------


def thought_then_500() -> Reply:
    return Reply(
        [chunk(thought("Let me think"), usage=usage(10, 0, 4)), error_chunk(500, "INTERNAL")]
    )


async def test_l3_thought_only_with_embedded_500_is_retried_on_a_user_ending_history() -> None:
    model = ScriptedModel(thought_then_500(), answer("Sunny."))
    result = await turn(model, limits=TurnLimits(**FAST))
    assert result.stop_reason is StopReason.COMPLETED
    assert result.text == "Sunny."
    assert model.requests[1] == model.requests[0]
    assert model.requests[1]["contents"][-1]["role"] == "user"
    assert result.retries == {"malformed": 0, "no-finish": 1, "provider": 0}
    assert [c["role"] for c in result.contents] == ["user", "model"]


async def test_l16_thought_only_500_three_times_is_retryable_no_finish_reason_error() -> None:
    model = ScriptedModel(thought_then_500(), thought_then_500(), thought_then_500())
    result = await turn(model, limits=TurnLimits(**FAST))
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert result.finish_reason == "error"
    assert result.raw_finish_reason is None
    assert len(model.requests) == 3
    assert result.retries == {"malformed": 0, "no-finish": 2, "provider": 0}
    error = result.error
    assert isinstance(error, ProviderError)
    assert (error.kind, error.code, error.retryable) == (
        "no-finish-reason",
        "NO_FINISH_REASON",
        True,
    )
    assert error.body == error_chunk(500, "INTERNAL")["error"]
    assert (
        result.message
        == "The model service failed (no finish reason in 3 attempts). Please try again."
    )
    assert result.contents == USER


async def test_l3_stream_cut_without_finish_reason_is_retried() -> None:
    model = ScriptedModel(Reply([chunk(thought("Hmm"))]), Reply([]), answer("Here."))
    result = await turn(model, limits=TurnLimits(**FAST))
    assert result.stop_reason is StopReason.COMPLETED
    assert result.retries["no-finish"] == 2
    assert model.requests[0] == model.requests[1] == model.requests[2]


# -- L3.1 provider errors ------------------------------------------------------


async def test_l3_503_before_output_is_retried_honouring_retry_after() -> None:
    overloaded = ProviderError(
        503, "UNAVAILABLE", "The model is overloaded.", True, retry_after=0.05
    )
    model = ScriptedModel(Reply(error=overloaded), answer("Sunny."))
    result = await turn(model, limits=TurnLimits(retry_backoff=10.0))
    assert result.stop_reason is StopReason.COMPLETED
    assert result.retries == {"malformed": 0, "no-finish": 0, "provider": 1}
    # The loop's clock (uvloop's counts milliseconds); 1e-9 for the rounding of a difference.
    assert model.times[1] - model.times[0] > 0.05 - 1e-9
    assert model.requests[0] == model.requests[1]


async def test_l17_retry_after_beyond_the_deadline_fails_at_once() -> None:
    quota = ProviderError(429, "RESOURCE_EXHAUSTED", "Quota exceeded.", True, retry_after=60.0)
    model = ScriptedModel(Reply(error=quota))
    result = await turn(model, limits=TurnLimits(turn_timeout=5.0))
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert result.error is quota
    assert (
        result.message
        == "The model service failed (HTTP 429 RESOURCE_EXHAUSTED). Please try again."
    )
    assert result.elapsed < 5.0


async def test_l3_l20_l24_503_after_visible_text_is_not_retried() -> None:
    model = ScriptedModel(
        Reply([chunk(text("Partial answer")), error_chunk(503, "UNAVAILABLE", "overloaded")])
    )
    result = await turn(model, limits=TurnLimits(**FAST))
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert len(model.requests) == 1
    assert result.error is not None and (result.error.status, result.error.code) == (
        503,
        "UNAVAILABLE",
    )
    assert result.error.kind == "in-stream"
    message = "The model service failed (503 UNAVAILABLE in the response stream). Please try again."
    assert result.message == message
    assert result.text == f"Partial answer\n\n{message}"
    assert result.contents == USER


async def test_l3_dropped_connection_after_text_is_not_retried() -> None:
    model = ScriptedModel(Reply([chunk(text("Part")), chunk(text("ial"))], drop_after=1))
    result = await turn(model, limits=TurnLimits(**FAST))
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert result.error is not None and result.error.kind == "connection"
    assert result.text == "Part\n\nThe model service failed (connection lost). Please try again."


async def test_l3_non_retryable_http_error_is_not_retried() -> None:
    bad = ProviderError(400, "INVALID_ARGUMENT", "Bad request.", False)
    model = ScriptedModel(Reply(error=bad))
    result = await turn(model)
    assert (result.stop_reason, len(model.requests), result.retries["provider"]) == (
        StopReason.PROVIDER_ERROR,
        1,
        0,
    )
    # U3: a refused request says why, and not to send it again
    assert result.message == (
        "The model service refused the request (HTTP 400 INVALID_ARGUMENT: Bad request.). "
        "Sending it again will not help: the request must change."
    )


async def test_l3_l15_provider_retries_are_bounded_per_step() -> None:
    err = ProviderError(500, "INTERNAL", "boom", True)
    model = ScriptedModel(Reply(error=err), Reply(error=err), Reply(error=err))
    result = await turn(model, limits=TurnLimits(**FAST))
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert len(model.requests) == 3
    assert result.retries["provider"] == 2


# -- L9 step cap ---------------------------------------------------------------


def runaway(n: int) -> list[Reply]:
    return [calls(("lookup", {"q": str(i)}), seed=f"s{i}") for i in range(n)]


async def test_l9_l27_runaway_hits_step_cap_and_final_request_has_tools_disabled() -> None:
    model = ScriptedModel(*runaway(3), Reply([final(finish_reason="STOP")]))
    result = await turn(model, tools=[lookup], limits=TurnLimits(max_steps=3))
    assert result.stop_reason is StopReason.STEP_CAP
    assert result.steps_used == 3
    assert len(model.requests) == 4
    last = model.requests[3]
    assert last["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}
    assert last["contents"][-1] == {"role": "user", "parts": [{"text": FINAL_ANSWER_NOTE}]}
    assert "functionResponse" in last["contents"][-2]["parts"][0]
    assert all("toolConfig" not in r for r in model.requests[:3])
    # the final answer was empty: the cap message is the answer
    assert result.finish_reason == "tool-calls"
    assert result.message == cap_message(3, 3)
    assert result.text == cap_message(3, 3)
    assert result.contents == model.requests[3]["contents"][:-1]
    assert_replayable(result.contents)


async def test_l9_l24_final_answer_text_becomes_the_answer() -> None:
    model = ScriptedModel(*runaway(2), answer("Best answer so far."))
    result = await turn(model, tools=[lookup], limits=TurnLimits(max_steps=2))
    assert result.stop_reason is StopReason.STEP_CAP
    assert result.text == "Best answer so far."
    assert result.finish_reason == "stop"
    assert result.message == cap_message(2, 2)
    assert result.contents[-2] == {"role": "user", "parts": [{"text": FINAL_ANSWER_NOTE}]}
    assert result.contents[-1]["parts"][0] == {"text": "Best answer so far."}
    assert result.steps_used == 2


async def test_l9_final_answer_is_bounded_by_synth_timeout() -> None:
    model = ScriptedModel(*runaway(1), Reply(hang=True))
    result = await turn(model, tools=[lookup], limits=TurnLimits(max_steps=1, synth_timeout=0.05))
    assert result.stop_reason is StopReason.STEP_CAP
    assert result.finish_reason == "tool-calls"
    assert result.text == (
        "I gathered information across 1 tool call but reached the 1-step limit for a single turn before "
        "I could finish. Please narrow the request or break it into smaller asks and I'll continue."
    )
    assert model.timeouts[1] == 0.05


# -- L1 context guard ----------------------------------------------------------


async def test_l1_l23_context_cap_before_the_next_request() -> None:
    model = ScriptedModel(calls(("lookup", {"q": "x" * 50}), prompt=90))
    result = await turn(model, tools=[lookup], limits=TurnLimits(max_context_tokens=100))
    assert result.stop_reason is StopReason.CONTEXT_CAP
    assert len(model.requests) == 1
    assert result.message == (
        "I had to stop because this conversation no longer fits the model's context window. "
        "Start a new conversation or ask me to summarize."
    )
    assert_replayable(result.contents)


# -- L12 usage -----------------------------------------------------------------


async def test_l12_usage_summed_over_every_request_including_retries() -> None:
    err = ProviderError(503, "UNAVAILABLE", "busy", True, retry_after=0.0)
    model = ScriptedModel(
        Reply(error=err),
        thought_then_500(),  # usage(10, 0, 4)
        Reply([chunk(text("Hi"), finish_reason="STOP", usage=usage(10, 2))]),
    )
    result = await turn(model, limits=TurnLimits(**FAST))
    assert result.stop_reason is StopReason.COMPLETED
    assert result.usage_by_step == [
        {},
        {"promptTokenCount": 10, "thoughtsTokenCount": 4, "totalTokenCount": 14},
        {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12},
    ]
    assert result.usage == {
        "promptTokenCount": 20,
        "thoughtsTokenCount": 4,
        "totalTokenCount": 26,
        "candidatesTokenCount": 2,
    }


async def test_l12_usage_includes_the_final_answer_request() -> None:
    model = ScriptedModel(*runaway(1), answer("Final.", prompt=30, out=3))
    result = await turn(model, tools=[lookup], limits=TurnLimits(max_steps=1))
    assert [u["promptTokenCount"] for u in result.usage_by_step] == [10, 30]
    assert result.usage["promptTokenCount"] == 40
    assert result.usage["totalTokenCount"] == 15 + 33


# -- L13 events ----------------------------------------------------------------


async def test_l13_event_sequence_of_a_tool_turn() -> None:
    model = ScriptedModel(calls(("lookup", {"q": "a"}), seed="e"), answer("Sunny today."))
    seen: list[Any] = []
    result = await turn(model, tools=[lookup], on_event=seen.append)
    kinds = [type(e).__name__ for e in seen]
    assert kinds == [
        "StepStart",
        "ThoughtDelta",
        "ToolCallDelta",
        "StepEnd",
        "ToolCallStart",
        "ToolCallEnd",
        "StepStart",
        "AnswerDelta",
        "AnswerDelta",
        "StepEnd",
        "TurnEnd",
    ]
    assert seen[0] == events.StepStart(1, 50, 1, "step")
    assert seen[1] == events.ThoughtDelta(1, "Planning.")
    assert seen[2] == events.ToolCallDelta(1, 1, "lookup", None, None)
    assert seen[3] == events.StepEnd(1, 1, "STOP", usage(10, 5), "tool-calls")
    assert seen[4] == events.ToolCallStart(1, 0, "e-0", "lookup", {"q": "a"})
    end = seen[5]
    assert (end.step, end.index, end.id, end.name, end.status, end.response) == (
        1,
        0,
        "e-0",
        "lookup",
        "ok",
        {"output": {"found": "A"}},
    )
    assert [e.text for e in seen if isinstance(e, events.AnswerDelta)] == ["Sunny ", "today."]
    assert seen[-1] == events.TurnEnd(result)


async def test_l13_l30_streamed_call_arguments_are_delivered_live() -> None:
    streamed = streamed_call("lookup", {"q": "abc"}, id="s1", signature=signature("s"), piece=2)
    model = ScriptedModel(Reply([*streamed, final()]), answer("Done."))
    seen: list[Any] = []
    result = await turn(model, tools=[lookup], on_event=seen.append)
    assert result.stop_reason is StopReason.COMPLETED
    assert [e for e in seen if isinstance(e, events.ToolCallDelta)] == [
        events.ToolCallDelta(1, 0, "lookup", None, None),
        events.ToolCallDelta(1, 0, "lookup", "$.q", "ab"),
        events.ToolCallDelta(1, 0, "lookup", "$.q", "c"),
    ]


async def test_l13_stream_turn_delivers_text_live() -> None:
    model = ScriptedModel(
        Reply(
            [chunk(text("Hello ")), chunk(text("world")), final(signature("x"))],
            pause_after={1: 0.05},
        )
    )
    got: list[Any] = []
    async for event in stream_turn(model, list(USER)):
        if isinstance(event, events.AnswerDelta) and not got:
            assert model.closed == 0  # the response is still streaming
        got.append(event)
    assert pending_tasks() == []
    assert [e.text for e in got if isinstance(e, events.AnswerDelta)] == ["Hello ", "world"]
    assert isinstance(got[-1], events.TurnEnd)
    assert got[-1].result.text == "Hello world"


async def test_l13_l45_closing_stream_turn_early_cancels_the_turn_cleanly() -> None:
    model = ScriptedModel(Reply([chunk(text("Hello"))], stall_after=1))
    async with aclosing(stream_turn(model, list(USER))) as stream:
        async for event in stream:
            if isinstance(event, events.AnswerDelta):
                break
    assert pending_tasks() == []
    assert model.closed == model.opened == 1


async def test_l13_async_on_event_is_awaited_in_order() -> None:
    model = ScriptedModel(answer("A B"))
    order: list[str] = []

    async def on_event(event: Any) -> None:
        await asyncio.sleep(0)
        order.append(type(event).__name__)

    await turn(model, on_event=on_event)
    assert order == ["StepStart", "AnswerDelta", "AnswerDelta", "StepEnd", "TurnEnd"]


async def test_l13_l15_l41_retry_lifecycle_events() -> None:
    model = ScriptedModel(Reply([malformed_call()]), thought_then_500(), answer("Ok."))
    seen: list[Any] = []
    await turn(model, on_event=seen.append, limits=TurnLimits(**FAST))
    phases = [(e.phase, e.detail) for e in seen if isinstance(e, events.Lifecycle)]
    # L41: a no-finish retry names the in-stream error it retried, as "{status} {code}: {message}"
    internal = (
        "500 INTERNAL: An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting"
    )
    assert phases == [("malformed-retry", None), ("no-finish-retry", internal)]
    starts = [(e.step, e.attempt) for e in seen if isinstance(e, events.StepStart)]
    assert starts == [(1, 1), (1, 2), (1, 3)]
