"""How a step's last response ends it, on both APIs, end to end through run_turn over loopback
HTTP against FakeGemini: the Interactions statuses and error codes (spec/interactions.md I25),
stale tokens (L56), a drop whose token does not cover the output (L59), an HTTP error in a hop
(L64); and two request-side rules of the Interactions loop (I22 signatures, I24 chaining)."""

from __future__ import annotations

from typing import Any

import pytest

from fastagg import GeminiClient
from fastagg.events import Lifecycle
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import run_turn
from fastagg.testing import FakeGemini, InteractionTurn, Step
from fastagg.testing.chunks import chunk, text, usage
from fastagg.testing.fake_interactions import error_event, text_step

USER = [{"role": "user", "parts": [{"text": "Write the manual."}]}]
FAST_RETRY = TurnLimits(retry_backoff=0.01, max_retry_backoff=0.02)


def client(server: FakeGemini, api: str = "interactions") -> GeminiClient:
    return GeminiClient("gemini-3.8-flash", api_key="k", base_url=server.url, api=api)


def lifecycle(events: list[Any]) -> list[tuple[str, str | None]]:
    return [(e.phase, e.detail) for e in events if isinstance(e, Lifecycle)]


def sent_tokens(server: FakeGemini) -> list[str | None]:
    records = server.interactions.records  # type: ignore[union-attr]
    return [(body or {}).get("continuation_token") for _, _, _, body in records]


@pytest.mark.parametrize(
    ("status", "finish"),
    [
        ("completed", "stop"),
        ("incomplete", "length"),
        ("budget_exceeded", "length"),
        ("requires_continuation", "length"),  # L56: no token, so not continued
        ("cancelled", "stop"),
    ],
)
async def test_i25_a_status_is_the_raw_finish_reason_of_the_answer(
    status: str, finish: str
) -> None:
    answer = InteractionTurn(text_step(0, "Chapter 1."), status=status)
    async with FakeGemini([], interactions=[answer]) as server, client(server) as model:
        result = await run_turn(model, USER)
        tokens = sent_tokens(server)
    assert (result.stop_reason, result.finish_reason, result.raw_finish_reason) == (
        StopReason.COMPLETED,
        finish,
        status,
    )
    assert (result.text, result.hops, tokens) == ("Chapter 1.", 0, [None])


@pytest.mark.parametrize("status", ["in_progress", "queued", "idle"])
async def test_i25_a_running_status_is_no_finish(status: str) -> None:
    events: list[Any] = []
    running = InteractionTurn(text_step(0, "Chapter"), status=status)
    whole = InteractionTurn(text_step(0, "Chapter 1."))
    async with FakeGemini([], interactions=[running, whole]) as server, client(server) as model:
        result = await run_turn(model, USER, on_event=events.append)
    assert (result.stop_reason, result.text, result.retries["no-finish"]) == (
        StopReason.COMPLETED,
        "Chapter 1.",
        1,
    )
    assert lifecycle(events) == [("no-finish-retry", None)]


@pytest.mark.parametrize(
    ("code", "label"),
    [
        ("resource_exhausted", "429 RESOURCE_EXHAUSTED"),
        ("internal", "500 INTERNAL"),
        ("bad_gateway", "502 BAD_GATEWAY"),
        ("unavailable", "503 UNAVAILABLE"),
        ("gateway_timeout", "504 GATEWAY_TIMEOUT"),
        ("deadline_exceeded", "504 DEADLINE_EXCEEDED"),
    ],
)
async def test_i25_a_retryable_error_code_is_retried_as_its_http_status(
    code: str, label: str
) -> None:
    events: list[Any] = []
    failing = InteractionTurn([error_event(code, "Try again.")], status="failed")
    whole = InteractionTurn(text_step(0, "Chapter 1."))
    script = [failing, whole]
    async with FakeGemini([], interactions=script) as server, client(server) as model:
        result = await run_turn(model, USER, limits=FAST_RETRY, on_event=events.append)
    assert (result.stop_reason, result.text, result.retries["provider"]) == (
        StopReason.COMPLETED,
        "Chapter 1.",
        1,
    )
    assert lifecycle(events) == [("provider-retry", f"{label}: Try again.")]


async def test_i25_an_error_code_without_an_http_status_is_not_retried() -> None:
    # A code the error table does not know has no HTTP status (I34): not retryable.
    failing = InteractionTurn([error_event("tool_confusion", "Bad tool.")], status="failed")
    async with FakeGemini([], interactions=[failing]) as server, client(server) as model:
        result = await run_turn(model, USER, limits=FAST_RETRY)
        sent = len(server.interactions.records)  # type: ignore[union-attr]
    assert (result.stop_reason, result.finish_reason, sent) == (
        StopReason.PROVIDER_ERROR,
        "error",
        1,
    )
    assert result.error is not None
    assert (result.error.status, result.error.code, result.error.message) == (
        None,
        "TOOL_CONFUSION",
        "Bad tool.",
    )


async def test_i25_i34_a_documented_client_error_code_has_its_status_and_is_not_retried() -> None:
    # invalid_request is the documented 400 of the Interactions errors table (I34).
    failing = InteractionTurn([error_event("invalid_request", "Bad tool.")], status="failed")
    async with FakeGemini([], interactions=[failing]) as server, client(server) as model:
        result = await run_turn(model, USER, limits=FAST_RETRY)
        sent = len(server.interactions.records)  # type: ignore[union-attr]
    assert (result.stop_reason, result.finish_reason, sent) == (
        StopReason.PROVIDER_ERROR,
        "error",
        1,
    )
    assert result.error is not None
    assert (result.error.status, result.error.code, result.error.message) == (
        400,
        "INVALID_REQUEST",
        "Bad tool.",
    )


async def test_l56_a_token_on_a_finished_interaction_is_stale() -> None:
    answer = InteractionTurn(text_step(0, "Chapter 1."), continuation_token="tok-stale")
    async with FakeGemini([], interactions=[answer]) as server, client(server) as model:
        result = await run_turn(model, USER)
        tokens = sent_tokens(server)
    assert (result.stop_reason, result.finish_reason, result.text, result.hops, tokens) == (
        StopReason.COMPLETED,
        "stop",
        "Chapter 1.",
        0,
        [None],
    )


async def test_l56_a_token_on_a_stop_chunk_is_stale() -> None:
    last = chunk(text("Done."), finish_reason="STOP", continuation_token="t-stale")
    async with FakeGemini([[last]]) as server, client(server, "generate_content") as model:
        result = await run_turn(model, USER)
        sent = len(server.requests)
    assert (result.stop_reason, result.finish_reason, result.text, result.hops, sent) == (
        StopReason.COMPLETED,
        "stop",
        "Done.",
        0,
        1,
    )


async def test_l59_output_after_the_checkpoint_makes_the_drop_a_truncation() -> None:
    events: list[Any] = []
    # The token covers "one " but not "two": resuming from it would generate "two" again.
    dropped = Step(
        chunks=[chunk(text("one "), continuation_token="c1"), chunk(text("two"))],
        drop_after=2,
    )
    limits = TurnLimits(provider_retries=0)
    async with FakeGemini([dropped]) as server, client(server, "generate_content") as model:
        result = await run_turn(model, USER, limits=limits, on_event=events.append)
        sent = len(server.requests)
    assert (result.stop_reason, result.hops, sent) == (StopReason.PROVIDER_ERROR, 0, 1)
    assert result.error is not None and result.error.kind == "connection"
    assert result.text == f"one two\n\n{result.message}"
    assert [phase for phase, _ in lifecycle(events)] == ["provider-error"]


async def test_l64_an_http_error_in_a_hop_retries_the_step_from_its_first_request() -> None:
    events: list[Any] = []
    thinking = Step(
        chunks=[
            chunk(
                {"text": "planning", "thought": True},
                finish_reason="CONTINUATION",
                continuation_token="t1",
                usage=usage(5, 0, 900),
            )
        ]
    )
    script = [
        thinking,
        Step(http_error=503),
        Step(chunks=[chunk(text("Done."), finish_reason="STOP", usage=usage(6, 2))]),
    ]
    async with FakeGemini(script) as server, client(server, "generate_content") as model:
        result = await run_turn(model, USER, limits=FAST_RETRY, on_event=events.append)
        bodies = server.requests
    assert (result.stop_reason, result.text, result.hops, result.retries["provider"]) == (
        StopReason.COMPLETED,
        "Done.",
        1,
        1,
    )
    assert [b.get("continuationToken") for b in bodies] == [None, "t1", None]
    assert bodies[2] == bodies[0]
    assert [phase for phase, _ in lifecycle(events)] == ["continuation", "provider-retry"]
    assert result.contents[-1]["parts"] == [{"text": "Done."}]


# -- the request side (I22, I24) ------------------------------------------------------

CALLED = [
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
    # Unsigned, as a transcript from another client may be: generateContent would refuse it (L2).
    {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "w", "args": {"q": 1}}}]},
    {
        "role": "user",
        "parts": [{"functionResponse": {"id": "c1", "name": "w", "response": {"output": "18 C"}}}],
    },
]


async def test_i22_an_unsigned_current_turn_call_is_sent_as_a_step() -> None:
    answer = InteractionTurn(text_step(0, "18 C in Paris."))
    async with FakeGemini([], interactions=[answer]) as server, client(server) as model:
        result = await run_turn(model, CALLED)
        records = server.interactions.records  # type: ignore[union-attr]
    assert (result.stop_reason, result.text) == (StopReason.COMPLETED, "18 C in Paris.")
    assert records[0][3]["input"] == [
        {"type": "user_input", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {"type": "function_call", "id": "c1", "name": "w", "arguments": {"q": 1}},
        {"type": "function_result", "call_id": "c1", "name": "w", "result": "18 C"},
    ]


async def test_i24_a_previous_interaction_id_in_config_chains_a_fresh_transcript() -> None:
    first = InteractionTurn(text_step(0, "Paris: 18 C."))
    second = InteractionTurn(text_step(0, "Rome: 24 C."))
    follow_up = [{"role": "user", "parts": [{"text": "And Rome?"}]}]
    async with FakeGemini([], interactions=[first, second]) as server, client(server) as model:
        await run_turn(model, USER)
        config = {"previous_interaction_id": "v1_fake1"}
        result = await run_turn(model, follow_up, config=config)
        body = server.interactions.records[1][3]  # type: ignore[union-attr]
    assert (result.stop_reason, result.text) == (StopReason.COMPLETED, "Rome: 24 C.")
    assert (body["previous_interaction_id"], body["input"]) == (
        "v1_fake1",
        [{"type": "user_input", "content": [{"type": "text", "text": "And Rome?"}]}],
    )
