"""Resuming stored interactions, and the statuses a turn ends on, end to end through run_turn
over loopback HTTP against FakeGemini (spec/interactions.md I25, I26; spec/turn-loop.md L59)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fastagg import GeminiClient
from fastagg.events import Lifecycle, ToolCallDelta
from fastagg.limits import StopReason
from fastagg.loop import run_turn
from fastagg.testing import FakeGemini, InteractionTurn
from fastagg.testing.fake_interactions import (
    arguments_step,
    checkpoint_event,
    text_step,
    thought_step,
)

USER = [{"role": "user", "parts": [{"text": "Write the manual."}]}]
USAGE = {"total_input_tokens": 20, "total_output_tokens": 5}


def client(server: FakeGemini) -> GeminiClient:
    return GeminiClient("gemini-3.8-flash", api_key="k", base_url=server.url, api="interactions")


def requests(server: FakeGemini) -> list[tuple[str, str | None]]:
    """(method, last_event_id) of each request the Interactions endpoints got."""
    records = server.interactions.records  # type: ignore[union-attr]
    return [(method, query.get("last_event_id")) for method, _, query, _ in records]


def lifecycle(events: list[Any]) -> list[tuple[str, str | None]]:
    return [(e.phase, e.detail) for e in events if isinstance(e, Lifecycle)]


def flaky(*resume_drops: int) -> InteractionTurn:
    """Events e0 created, e1 start, e2..e6 the texts a..e, e7 stop, e8 completed: the
    stream drops after e1 and each listed resume after one more event."""
    return InteractionTurn(
        text_step(0, "a", "b", "c", "d", "e"),
        usage=USAGE,
        drop_after=2,
        resume_drops=resume_drops,
    )


async def test_i26_three_resumes_that_drop_again_then_the_error_ends_the_turn() -> None:
    events: list[Any] = []
    async with FakeGemini([], interactions=[flaky(1, 1, 1)]) as server, client(server) as model:
        result = await run_turn(model, USER, on_event=events.append)
        sent = requests(server)
    assert sent == [
        ("POST", None),
        ("GET", "v1_fake1-e1"),
        ("GET", "v1_fake1-e2"),
        ("GET", "v1_fake1-e3"),
    ]
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert result.error is not None and result.error.kind == "connection"
    # L64: after visible output the drop ends the turn with what arrived, nothing appended.
    assert (result.text, result.contents) == (f"abc\n\n{result.message}", USER)
    assert (result.hops, result.retries["provider"], result.usage_by_step) == (0, 0, [{}])
    # Each drop's message names the bytes its own body brought: compare the rest.
    cause = result.error.message.split(" bytes ", 1)[1]
    assert [(p, d.split(" bytes ", 1)[1]) for p, d in lifecycle(events)[:3] if d] == [
        ("stream-resume", cause)
    ] * 3
    assert [(p, d and d.split(" after ", 1)[0]) for p, d in lifecycle(events)] == [
        *(("stream-resume", f"resume {n} of 3") for n in (1, 2, 3)),
        ("provider-error", None),
    ]


async def test_i26_a_third_resume_that_holds_completes_the_answer() -> None:
    events: list[Any] = []
    async with FakeGemini([], interactions=[flaky(1, 1)]) as server, client(server) as model:
        result = await run_turn(model, USER, on_event=events.append)
        sent = requests(server)
    assert sent == [
        ("POST", None),
        ("GET", "v1_fake1-e1"),
        ("GET", "v1_fake1-e2"),
        ("GET", "v1_fake1-e3"),
    ]
    assert (result.stop_reason, result.finish_reason, result.text) == (
        StopReason.COMPLETED,
        "stop",
        "abcde",
    )
    assert (result.hops, result.usage_by_step, result.usage) == (0, [USAGE], USAGE)
    assert [phase for phase, _ in lifecycle(events)] == ["stream-resume"] * 3


async def test_i26_the_resume_count_starts_again_at_each_hop() -> None:
    events: list[Any] = []
    hop_1 = InteractionTurn(
        text_step(0, "a", "b"),
        status="requires_continuation",
        continuation_token="tok-1",
        usage=USAGE,
        drop_after=2,
        resume_drops=(1, 1),
    )
    script = [hop_1, flaky(1, 1)]
    async with FakeGemini([], interactions=script) as server, client(server) as model:
        result = await run_turn(model, USER, on_event=events.append)
        sent = requests(server)
    assert sent == [
        ("POST", None),
        ("GET", "v1_fake1-e1"),
        ("GET", "v1_fake1-e2"),
        ("GET", "v1_fake1-e3"),
        ("POST", None),
        ("GET", "v1_fake2-e1"),
        ("GET", "v1_fake2-e2"),
        ("GET", "v1_fake2-e3"),
    ]
    assert (result.stop_reason, result.text, result.hops) == (
        StopReason.COMPLETED,
        "ababcde",
        1,
    )
    assert [phase for phase, _ in lifecycle(events)] == [
        *["stream-resume"] * 3,
        "continuation",
        *["stream-resume"] * 3,
    ]


# -- I29: a stateless resume (or a hop) inside a call step finishes that call ---------------

CITY = "Paris, Ile-de-France"
STATELESS = {"store": False}
SIGNATURE = "EqQBCqEBAY89a1=="
WEATHER_USER = [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}]
WEATHER_INPUT = [{"type": "user_input", "content": [{"type": "text", "text": "Weather in Paris?"}]}]


class Weather:
    """A ``get_weather`` tool that records every city it was run with."""

    def __init__(self) -> None:
        self.cities: list[str] = []

    def get_weather(self, city: str) -> str:
        """Current weather for a city."""
        self.cities.append(city)
        return "18 C, clear"


def arguments(index: int, text: str) -> dict[str, Any]:
    return {
        "event_type": "step.delta",
        "index": index,
        "delta": {"type": "arguments_delta", "arguments": text},
    }


def stop(index: int) -> dict[str, Any]:
    return {"event_type": "step.stop", "index": index}


# created, the thought step (4 events), the call's start and first fragment, the checkpoint
# covering them: the connection drops there, inside the call's arguments.
CALL_CUT = [
    *thought_step(0, SIGNATURE, "Looking it up"),
    *arguments_step(1, "fc1", "get_weather", '{"city":"Paris, Ile')[:2],
    checkpoint_event("ck-1"),
]
SUNNY = InteractionTurn(text_step(0, "Sunny in Paris."), usage=USAGE)
THE_CALL = {
    "type": "function_call",
    "id": "fc1",
    "name": "get_weather",
    "arguments": {"city": CITY},
}


def cut(**faults: Any) -> InteractionTurn:
    return InteractionTurn(CALL_CUT, status="requires_action", drop_after=8, **faults)


def sent_bodies(server: FakeGemini) -> list[dict[str, Any]]:
    records = server.interactions.records  # type: ignore[union-attr]
    return [{k: v for k, v in (r[3] or {}).items() if k != "tools"} for r in records]


async def resumed_turn(
    resumed: InteractionTurn, *rest: InteractionTurn, config: dict[str, Any] | None = None
) -> tuple[Any, Weather, list[Any], list[dict[str, Any]]]:
    weather = Weather()
    events: list[Any] = []
    script = [cut(), resumed, *rest]
    async with FakeGemini([], interactions=script) as server, client(server) as model:
        result = await run_turn(
            model,
            WEATHER_USER,
            tools=[weather.get_weather],
            config=STATELESS if config is None else config,
            on_event=events.append,
        )
        sent = sent_bodies(server)
    return result, weather, events, sent


async def test_i29_a_stateless_resume_inside_a_call_finishes_that_call() -> None:
    # The resumed interaction carries on after ck-1: the rest of the argument text, for a
    # step it never started (its steps count from 0 again, I11).
    resumed = InteractionTurn(
        [arguments(0, '-de-France"}'), stop(0)], status="requires_action", usage=USAGE
    )
    result, weather, events, sent = await resumed_turn(resumed, SUNNY)
    assert weather.cities == [CITY]
    assert (result.stop_reason, result.finish_reason, result.text) == (
        StopReason.COMPLETED,
        "stop",
        "Sunny in Paris.",
    )
    assert (result.retries["malformed"], result.tool_call_count, result.hops) == (0, 1, 0)
    assert [phase for phase, _ in lifecycle(events)] == ["continuation-resume"]
    hop = {"model": "gemini-3.8-flash", "store": False, "stream": True}
    assert sent[:2] == [
        {**hop, "input": WEATHER_INPUT},
        {**hop, "input": WEATHER_INPUT, "continuation_token": "ck-1"},
    ]
    # I24: the next request resends the model's steps verbatim: one call, its whole arguments.
    thought = {
        "type": "thought",
        "summary": [{"type": "text", "text": "Looking it up"}],
        "signature": SIGNATURE,
    }
    answered = {
        "type": "function_result",
        "call_id": "fc1",
        "name": "get_weather",
        "result": "18 C, clear",
    }
    assert sent[2] == {**hop, "input": [*WEATHER_INPUT, thought, THE_CALL, answered]}
    deltas = [
        (e.part, e.name, e.json_path, e.value) for e in events if isinstance(e, ToolCallDelta)
    ]
    assert deltas == [
        (1, "get_weather", None, None),
        (1, "get_weather", "$.city", "Paris, Ile"),
        (1, "get_weather", "$.city", "-de-France"),
    ]
    assert result.usage_by_step == [{}, USAGE, USAGE]


async def test_i29_a_resumed_stream_that_starts_the_call_again_by_its_id_continues_it() -> None:
    again = {
        "event_type": "step.start",
        "index": 0,
        "step": {"type": "function_call", "id": "fc1", "name": "get_weather", "arguments": {}},
    }
    resumed = InteractionTurn(
        [again, arguments(0, '-de-France"}'), stop(0)], status="requires_action"
    )
    result, weather, events, _ = await resumed_turn(resumed, SUNNY)
    assert weather.cities == [CITY]
    assert (result.stop_reason, result.retries["malformed"]) == (StopReason.COMPLETED, 0)
    assert [phase for phase, _ in lifecycle(events)] == ["continuation-resume"]
    # The repeated start is not applied again: no I10 warning, the call shown once.
    deltas = [(e.part, e.json_path) for e in events if isinstance(e, ToolCallDelta)]
    assert deltas == [(1, None), (1, "$.city"), (1, "$.city")]


async def test_i30_a_resume_that_never_finishes_the_call_runs_no_tool() -> None:
    resumed = InteractionTurn(text_step(0, "It is sunny."), status="completed")
    retried = InteractionTurn(
        [
            *thought_step(0, SIGNATURE),
            *arguments_step(1, "fc2", "get_weather", '{"city":"Paris, Ile-de-France"}'),
        ],
        status="requires_action",
    )
    result, weather, events, sent = await resumed_turn(resumed, retried, SUNNY)
    assert weather.cities == [CITY]  # only the retry's whole call ran
    assert (result.stop_reason, result.retries["malformed"]) == (StopReason.COMPLETED, 1)
    assert [phase for phase, _ in lifecycle(events)] == ["continuation-resume", "malformed-retry"]
    assert [b.get("continuation_token") for b in sent] == [None, "ck-1", None, None]


async def test_i29_a_call_open_at_the_end_of_a_stored_hop_is_finished_by_the_next_hop() -> None:
    hop_1 = InteractionTurn(
        CALL_CUT[:-1],
        status="requires_continuation",
        continuation_token="tok-1",
        usage=USAGE,
    )
    hop_2 = InteractionTurn(
        [arguments(0, '-de-France"}'), stop(0)], status="requires_action", usage=USAGE
    )
    weather = Weather()
    events: list[Any] = []
    async with (
        FakeGemini([], interactions=[hop_1, hop_2, SUNNY]) as server,
        client(server) as model,
    ):
        result = await run_turn(
            model, WEATHER_USER, tools=[weather.get_weather], on_event=events.append
        )
        sent = sent_bodies(server)
    assert weather.cities == [CITY]
    assert (result.stop_reason, result.hops, result.retries["malformed"]) == (
        StopReason.COMPLETED,
        1,
        0,
    )
    # I24: the stored turn goes on from the last hop's interaction.
    assert sent[2]["previous_interaction_id"] == "v1_fake2"
    assert sent[2]["input"] == [
        {
            "type": "function_result",
            "call_id": "fc1",
            "name": "get_weather",
            "result": "18 C, clear",
        }
    ]


async def test_i29_a_hop_that_drops_after_continuing_the_call_resumes_after_those_events() -> None:
    hop_1 = InteractionTurn(
        CALL_CUT[:-1], status="requires_continuation", continuation_token="tok-1"
    )
    # Events: e0 created, e1 the rest of the arguments, e2 the call's stop, e3 completed;
    # the stream drops after e2: the resume asks for what follows the continuing events.
    hop_2 = InteractionTurn(
        [arguments(0, '-de-France"}'), stop(0)], status="requires_action", drop_after=3
    )
    weather = Weather()
    events: list[Any] = []
    async with (
        FakeGemini([], interactions=[hop_1, hop_2, SUNNY]) as server,
        client(server) as model,
    ):
        result = await run_turn(
            model, WEATHER_USER, tools=[weather.get_weather], on_event=events.append
        )
        sent = requests(server)
    assert weather.cities == [CITY]
    assert (result.stop_reason, result.hops, result.retries["malformed"]) == (
        StopReason.COMPLETED,
        1,
        0,
    )
    assert sent == [("POST", None), ("POST", None), ("GET", "v1_fake2-e2"), ("POST", None)]
    assert [phase for phase, _ in lifecycle(events)] == ["continuation", "stream-resume"]


async def test_i31_a_drop_after_interaction_completed_is_a_finished_body() -> None:
    # e0 created, e1 start, e2..e6 the texts, e7 stop, e8 completed: then the connection
    # closes mid-body (a chunked body with no last chunk, no [DONE]). Everything the
    # interaction had arrived: no resume, no retry, no error.
    turn = InteractionTurn(text_step(0, "a", "b", "c", "d", "e"), usage=USAGE, drop_after=9)
    events: list[Any] = []
    async with FakeGemini([], interactions=[turn]) as server, client(server) as model:
        result = await run_turn(model, USER, on_event=events.append)
        sent = requests(server)
    assert sent == [("POST", None)]
    assert (result.stop_reason, result.finish_reason, result.text, result.error) == (
        StopReason.COMPLETED,
        "stop",
        "abcde",
        None,
    )
    assert (result.usage, result.retries["provider"], lifecycle(events)) == (USAGE, 0, [])


async def test_i31_a_pushing_body_that_fails_after_output_sends_no_fresh_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A transport whose body pushes its bytes (H11 pump) and then fails: what it showed
    # was shown, so after three failed resumes the turn ends there (L64), as it does for a
    # body that is iterated; it never starts the interaction again with a fresh request.
    from fastagg.client import transport

    async def pump(self: Any, feed: Callable[[bytes], object]) -> None:
        async for piece in self:
            feed(piece)

    monkeypatch.setattr(transport.AiohttpResponse, "pump", pump, raising=False)
    async with FakeGemini([], interactions=[flaky(1, 1, 1)]) as server, client(server) as model:
        result = await run_turn(model, USER)
        sent = requests(server)
    assert sent == [
        ("POST", None),
        ("GET", "v1_fake1-e1"),
        ("GET", "v1_fake1-e2"),
        ("GET", "v1_fake1-e3"),
    ]
    assert (result.stop_reason, result.retries["provider"]) == (StopReason.PROVIDER_ERROR, 0)
    assert (result.text, result.contents) == (f"abc\n\n{result.message}", USER)
