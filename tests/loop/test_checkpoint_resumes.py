"""L80: a drop after a checkpoint token is judged per event, whatever the body chunks.

A fast server (or a proxy that buffers) delivers several events in one body
chunk; the loop must still tell whether the latest checkpoint token covers
every piece of output that arrived, on both wire formats, so a resume never
generates text that was already delivered.
"""

from __future__ import annotations

from typing import Any

from fastagg.limits import StopReason, TurnLimits
from fastagg.testing.chunks import chunk, text
from fastagg.testing.fake_interactions import checkpoint_event, text_step
from scripted_model import Reply, ScriptedModel, turn

NO_RETRY = TurnLimits(provider_retries=0)
STATELESS = {"store": False}  # I26 does not apply: a drop can only resume from a token


def tokens(model: ScriptedModel, key: str = "continuationToken") -> list[str | None]:
    return [r.get(key) for r in model.requests]


def interactions(*replies: Reply) -> ScriptedModel:
    model = ScriptedModel(*replies)
    model.api = "interactions"  # type: ignore[attr-defined]
    return model


def completed(interaction: str) -> dict[str, Any]:
    return {
        "event_type": "interaction.completed",
        "interaction": {"id": interaction, "status": "completed"},
    }


async def test_l80_token_then_output_in_one_body_chunk_makes_the_drop_a_truncation() -> None:
    # "two" came after the token c1 in the same body chunk: resuming would generate it again.
    dropped = Reply(
        [chunk(text("one "), continuation_token="c1"), chunk(text("two"))],
        drop_after=2,
        together=True,
    )
    model = ScriptedModel(dropped)
    result = await turn(model, limits=NO_RETRY)
    assert (result.stop_reason, result.hops, tokens(model)) == (
        StopReason.PROVIDER_ERROR,
        0,
        [None],
    )
    assert result.error is not None and result.error.kind == "connection"
    assert result.text == f"one two\n\n{result.message}"


async def test_l80_output_then_token_in_one_body_chunk_resumes_from_the_token() -> None:
    dropped = Reply(
        [chunk(text("one ")), chunk(text("two"), continuation_token="c1")],
        drop_after=2,
        together=True,
    )
    rest = Reply([chunk(text(" three"), finish_reason="STOP")])
    model = ScriptedModel(dropped, rest)
    result = await turn(model, limits=NO_RETRY)
    assert (result.stop_reason, result.text, result.hops, tokens(model)) == (
        StopReason.COMPLETED,
        "one two three",
        0,
        [None, "c1"],
    )


async def test_l80_interactions_checkpoint_then_output_in_one_body_chunk_is_a_truncation() -> None:
    events = [*text_step(0, "one ")[:2], checkpoint_event("c1"), text_step(0, "two")[1]]
    model = interactions(Reply(events, drop_after=len(events), together=True))
    result = await turn(model, limits=NO_RETRY, config=STATELESS)
    assert (result.stop_reason, result.hops, tokens(model)) == (
        StopReason.PROVIDER_ERROR,
        0,
        [None],
    )
    assert result.text == f"one two\n\n{result.message}"


async def test_l80_interactions_output_then_checkpoint_in_one_body_chunk_resumes() -> None:
    events = [*text_step(0, "one ", "two")[:3], checkpoint_event("c1")]
    rest = Reply([*text_step(0, " three"), completed("i2")])
    model = interactions(Reply(events, drop_after=len(events), together=True), rest)
    result = await turn(model, limits=NO_RETRY, config=STATELESS)
    assert (result.stop_reason, result.text, result.hops, tokens(model)) == (
        StopReason.COMPLETED,
        "one two three",
        0,
        [None, "c1"],
    )
