"""One notion of a runnable call in the loop (aggregation C13, turn-loop L32, L95).

The loop runs only what ``function_calls`` lists (calls the model finished). A step
whose response holds a call cut off mid-stream (``unfinished_calls``) or a call
without a name (left out by the aggregator with its warning, C15) runs no tool and
is retried, never reported as a completed answer. End to end through ``run_turn``
over loopback against FakeGemini / FakeInteractions.
"""

from __future__ import annotations

from typing import Any

from fastagg import GeminiClient
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import MALFORMED_NOTE, run_turn
from fastagg.loop.classify import Budget, Outcome, Response, classify
from fastagg.testing import (
    FakeGemini,
    InteractionTurn,
    Step,
    call,
    chunk,
    final,
    signature,
    streamed_call,
    text,
)
from fastagg.testing.fake_interactions import arguments_step, text_step

USER = {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
FAST = TurnLimits(max_steps=5, turn_timeout=30, wrapup_lead=0, retry_backoff=0.01)
NAMELESS = {"functionCall": {"id": "n1", "args": {"city": "Paris"}}}
ANSWER = Step([chunk(text("Sunny in Paris.")), final(signature("answer"))])


def whole(sig: str) -> Step:
    return Step([chunk(call("get_weather", {"city": "Paris"}, id="c1", signature=sig)), final()])


async def turn(script: list[Any], limits: TurnLimits = FAST) -> tuple[Any, FakeGemini, list[str]]:
    seen: list[str] = []

    def get_weather(city: str) -> dict[str, Any]:
        """Weather for a city."""
        seen.append(city)
        return {"city": city, "sky": "sunny"}

    async with (
        FakeGemini(script) as server,
        GeminiClient("gemini-3-flash-preview", base_url=server.url, api_key="k") as model,
    ):
        result = await run_turn(model, [USER], tools=[get_weather], limits=limits)
    return result, server, seen


def budget() -> Budget:
    return Budget(provider=2, no_finish=2, malformed_sent=0, malformed_max=1)


# ---------------------------------------------------------------- C13 / L32: cut-off calls


def test_l32_a_cut_off_call_only_in_unfinished_calls_with_a_finish_is_malformed() -> None:
    # C13: the cut-off call is no longer among the calls: the finish alone must not
    # make the step an answer.
    verdict = classify(
        Response("STOP", calls=[], unfinished=(0, "send_email")), None, True, budget()
    )
    assert (verdict.outcome, verdict.calls, verdict.lifecycle) == (
        Outcome.MALFORMED_RETRY,
        [],
        "the stream ended inside the call 'send_email' (part 0); it was not run",
    )


def test_l32_a_cut_off_call_only_in_unfinished_calls_without_a_finish_says_why() -> None:
    verdict = classify(Response(None, calls=[], unfinished=(1, "send_email")), None, True, budget())
    assert (verdict.outcome, verdict.lifecycle) == (
        Outcome.NO_FINISH_RETRY,
        "the stream ended inside the call 'send_email' (part 1); it was not run",
    )


async def test_l32_a_finished_call_beside_a_cut_off_one_waits_for_the_retry() -> None:
    cut = streamed_call("get_weather", {"city": "Paris, Ile"}, id="c2", piece=5)[:-2]
    done = chunk(call("get_weather", {"city": "Paris"}, id="c1", signature=signature("s1")))
    first = Step([done, *cut, final()])
    result, server, seen = await turn([first, whole(signature("s2")), ANSWER])
    assert seen == ["Paris"]  # the finished call ran once, from the retry; the cut one never
    assert result.stop_reason == StopReason.COMPLETED
    assert result.retries["malformed"] == 1
    assert server.requests[1]["contents"] == [
        USER,
        {"role": "user", "parts": [{"text": MALFORMED_NOTE}]},
    ]


# ---------------------------------------------------------------- L95: calls without a name


async def test_l95_a_complete_call_without_a_name_is_retried_not_a_completed_answer() -> None:
    result, server, seen = await turn(
        [Step([chunk(NAMELESS), final(signature("s1"))]), whole(signature("s2")), ANSWER]
    )
    assert seen == ["Paris"]
    assert result.stop_reason == StopReason.COMPLETED
    assert result.text == "Sunny in Paris."
    assert result.retries["malformed"] == 1
    # the nameless step appended nothing; the corrective note went out before the retry
    assert server.requests[1]["contents"] == [
        USER,
        {"role": "user", "parts": [{"text": MALFORMED_NOTE}]},
    ]


async def test_l95_persisting_calls_without_a_name_end_as_a_malformed_error() -> None:
    limits = TurnLimits(max_steps=5, turn_timeout=30, wrapup_lead=0, malformed_retries=1)
    nameless = Step([chunk(text("Let me check."), NAMELESS), final()])
    result, server, seen = await turn([nameless, nameless], limits)
    assert seen == []
    assert len(server.requests) == 2
    assert result.stop_reason == StopReason.PROVIDER_ERROR
    assert result.error is not None
    assert (result.error.kind, result.error.code) == ("malformed", "NAMELESS_FUNCTION_CALL")
    assert result.message == (
        "The model service failed (the model sent a function call without a name 2 times). "
        "Please try again."
    )
    assert [c["role"] for c in result.contents] == ["user", "user"]  # no model output kept


async def test_l95_a_named_call_beside_a_nameless_one_waits_for_the_retry() -> None:
    named = call("get_weather", {"city": "Paris"}, id="c1", signature=signature("s1"))
    result, _, seen = await turn(
        [Step([chunk(named, NAMELESS), final()]), whole(signature("s2")), ANSWER]
    )
    assert seen == ["Paris"]  # once, from the retry
    assert (result.stop_reason, result.retries["malformed"]) == (StopReason.COMPLETED, 1)


async def test_l95_a_streamed_call_that_never_got_a_name_is_malformed() -> None:
    fragment = {
        "functionCall": {
            "partialArgs": [{"jsonPath": "$.city", "stringValue": "Paris"}],
            "willContinue": True,
        }
    }
    first = Step([chunk(fragment), chunk({"functionCall": {}}), final()])
    result, _, seen = await turn([first, whole(signature("s2")), ANSWER])
    assert seen == ["Paris"]
    assert (result.stop_reason, result.retries["malformed"]) == (StopReason.COMPLETED, 1)


async def test_l95_without_a_finish_reason_it_is_a_no_finish_retry() -> None:
    result, _, seen = await turn([Step([chunk(NAMELESS)]), whole(signature("s2")), ANSWER])
    assert seen == ["Paris"]
    assert result.stop_reason == StopReason.COMPLETED
    assert (result.retries["no-finish"], result.retries["malformed"]) == (1, 0)


async def test_l95_an_interactions_call_step_without_a_name_is_never_run() -> None:
    start = {"type": "function_call", "id": "fc1", "arguments": {"city": "Paris"}}  # no name
    nameless = InteractionTurn(
        [
            {"event_type": "step.start", "index": 0, "step": start},
            {"event_type": "step.stop", "index": 0},
        ],
        status="requires_action",
    )
    calls = InteractionTurn(
        arguments_step(0, "fc2", "get_weather", '{"city":"Paris"}'), status="requires_action"
    )
    answer = InteractionTurn(text_step(0, "Sunny in Paris."))
    seen: list[str] = []

    def get_weather(city: str) -> str:
        """Weather for a city."""
        seen.append(city)
        return "sunny"

    async with (
        FakeGemini([], interactions=[nameless, calls, answer]) as server,
        GeminiClient(
            "gemini-3.8-flash", api_key="k", base_url=server.url, api="interactions"
        ) as model,
    ):
        result = await run_turn(model, [USER], tools=[get_weather], limits=FAST)
    assert seen == ["Paris"]
    assert (result.stop_reason, result.retries["malformed"]) == (StopReason.COMPLETED, 1)
