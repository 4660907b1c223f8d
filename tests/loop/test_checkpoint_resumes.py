"""L80: a drop after a checkpoint token is judged per event, whatever the body chunks.

A fast server (or a proxy that buffers) delivers several events in one body
chunk; the loop must still tell whether the latest checkpoint token covers
every piece of output that arrived, on both wire formats, so a resume never
generates text that was already delivered.
"""

from __future__ import annotations

from typing import Any

from fastagg.events import ToolCallDelta
from fastagg.limits import StopReason, TurnLimits
from fastagg.testing.chunks import call, chunk, signature, text
from fastagg.testing.fake_interactions import checkpoint_event, text_step
from scripted_model import Reply, ScriptedModel, answer, turn

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


# -- L90, I29: a call split by a drop is one call -----------------------------------------

CITY = "Paris, Ile-de-France"


def piece(value: str, *, more: bool) -> dict[str, Any]:
    """A streamed call's fragment of ``$.city`` (``more``: the string goes on)."""
    arg: dict[str, Any] = {"jsonPath": "$.city", "stringValue": value}
    if more:
        arg["willContinue"] = True
    return {"functionCall": {"partialArgs": [arg], "willContinue": True}}


class Weather:
    def __init__(self) -> None:
        self.cities: list[str] = []

    def get_weather(self, city: str) -> str:
        """Current weather for a city."""
        self.cities.append(city)
        return "18 C"


async def test_l90_a_call_after_text_dropped_twice_is_finished_where_it_started() -> None:
    sig = signature("w")
    opened = call("get_weather", None, signature=sig, will_continue=True)
    first = Reply(
        [
            chunk(text("Let me look.")),
            chunk(opened),
            chunk(piece("Paris", more=True), continuation_token="c1"),
        ],
        drop_after=3,
    )
    # The first resume brings a piece and a new checkpoint, and drops again.
    second = Reply([chunk(piece(", Ile", more=True), continuation_token="c2")], drop_after=1)
    third = Reply(
        [
            chunk(piece("-de-France", more=False)),
            chunk({"functionCall": {}}, text(" Done."), finish_reason="STOP"),
        ]
    )
    model = ScriptedModel(first, second, third, answer("Sunny."))
    weather = Weather()
    events: list[Any] = []
    result = await turn(model, tools=[weather.get_weather], limits=NO_RETRY, on_event=events.append)
    assert weather.cities == [CITY]
    assert (result.stop_reason, tokens(model)) == (StopReason.COMPLETED, [None, "c1", "c2", None])
    whole = {
        "functionCall": {"name": "get_weather", "args": {"city": CITY}},
        "thoughtSignature": sig,
    }
    assert result.contents[1]["parts"] == [{"text": "Let me look."}, whole, {"text": " Done."}]
    deltas = [(e.part, e.name, e.value) for e in events if isinstance(e, ToolCallDelta)]
    assert deltas == [
        (1, "get_weather", None),
        (1, "get_weather", "Paris"),
        (1, "get_weather", ", Ile"),
        (1, "get_weather", "-de-France"),
    ]


async def test_i29_a_continuing_event_s_running_usage_stays_with_the_new_request() -> None:
    opened = [
        {
            "event_type": "step.start",
            "index": 0,
            "step": {"type": "function_call", "id": "f1", "name": "get_weather", "arguments": {}},
        },
        {
            "event_type": "step.delta",
            "index": 0,
            "delta": {"type": "arguments_delta", "arguments": '{"city": "Paris, Ile'},
        },
        checkpoint_event("c1"),
    ]
    rest = [
        {
            "event_type": "step.delta",
            "index": 0,
            "delta": {"type": "arguments_delta", "arguments": '-de-France"}'},
            "metadata": {"total_usage": {"total_input_tokens": 7}},
        },
        {
            "event_type": "step.stop",
            "index": 0,
            "usage": {"total_input_tokens": 8, "total_output_tokens": 2},
            "event_id": "r-2",
        },
        {"event_type": "interaction.completed", "interaction": {"status": "requires_action"}},
    ]
    model = interactions(
        Reply(opened, drop_after=len(opened)),
        Reply(rest),
        Reply([*text_step(0, "Sunny."), completed("i3")]),
    )
    weather = Weather()
    result = await turn(model, tools=[weather.get_weather], limits=NO_RETRY, config=STATELESS)
    assert weather.cities == [CITY]
    assert tokens(model, "continuationToken") == [None, "c1", None]
    # The dropped request reported no usage; the resumed one's is its step.stop's.
    assert result.usage_by_step[:2] == [{}, {"total_input_tokens": 8, "total_output_tokens": 2}]


async def test_i29_a_continuing_body_s_last_event_without_its_blank_line_still_counts() -> None:
    opened = [
        {
            "event_type": "step.start",
            "index": 0,
            "step": {"type": "function_call", "id": "f1", "name": "get_weather", "arguments": {}},
        },
        {
            "event_type": "step.delta",
            "index": 0,
            "delta": {"type": "arguments_delta", "arguments": '{"city": "Paris, Ile'},
        },
        checkpoint_event("c1"),
    ]
    rest = [
        {
            "event_type": "step.delta",
            "index": 0,
            "delta": {"type": "arguments_delta", "arguments": '-de-France"}'},
        },
        {"event_type": "step.stop", "index": 0},
    ]
    # I28: the status decides; the completed event is the body's last, without its blank line.
    last = (
        b'data: {"event_type":"interaction.completed","interaction":{"status":"requires_action"}}'
    )
    model = interactions(
        Reply(opened, drop_after=len(opened)),
        Reply(rest, raw=last),
        Reply([*text_step(0, "Sunny."), completed("i3")]),
    )
    weather = Weather()
    result = await turn(model, tools=[weather.get_weather], limits=NO_RETRY, config=STATELESS)
    assert weather.cities == [CITY]
    assert (result.stop_reason, result.text, result.retries["no-finish"]) == (
        StopReason.COMPLETED,
        "Sunny.",
        0,
    )
