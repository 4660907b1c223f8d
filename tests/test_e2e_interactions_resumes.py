"""Resuming stored interactions, and the statuses a turn ends on, end to end through run_turn
over loopback HTTP against FakeGemini (spec/interactions.md I25, I26; spec/turn-loop.md L59)."""

from __future__ import annotations

from typing import Any

from fastagg import GeminiClient
from fastagg.events import Lifecycle
from fastagg.limits import StopReason
from fastagg.loop import run_turn
from fastagg.testing import FakeGemini, InteractionTurn
from fastagg.testing.fake_interactions import text_step

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
        *(("stream-resume", f"L59: resume {n} of 3") for n in (1, 2, 3)),
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
