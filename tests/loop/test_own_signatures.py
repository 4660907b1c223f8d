"""The model's own output that cannot be sent back as it came (turn-loop.md L33a)."""

from __future__ import annotations

from typing import Any

from fastagg import events
from fastagg.limits import StopReason
from fastagg.request import SENTINEL_SIGNATURE
from fastagg.testing.chunks import call, chunk, signature, thought
from scripted_model import USER, Reply, ScriptedModel, answer, assert_replayable, turn


def lookup(q: str) -> dict[str, Any]:
    """Look something up."""
    return {"found": q.upper()}


def unsigned_calls() -> Reply:
    """A step of two calls, neither signed: what Gemini 3 must not send, and a proxy may."""
    return Reply(
        [
            chunk(thought("Planning.")),
            chunk(
                call("lookup", {"q": "a"}, id="u-0"),
                call("lookup", {"q": "b"}, id="u-1"),
                finish_reason="STOP",
            ),
        ]
    )


RESPONSES = {
    "role": "user",
    "parts": [
        {
            "functionResponse": {
                "id": "u-0",
                "name": "lookup",
                "response": {"output": {"found": "A"}},
            }
        },
        {
            "functionResponse": {
                "id": "u-1",
                "name": "lookup",
                "response": {"output": {"found": "B"}},
            }
        },
    ],
}


async def test_l33a_the_models_own_unsigned_call_gets_the_sentinel_and_the_turn_goes_on() -> None:
    model = ScriptedModel(unsigned_calls(), answer("Done.", sig=signature("end")))
    seen: list[Any] = []
    result = await turn(model, tools=[lookup], on_event=seen.append)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.signatures == {"stripped": 0, "sentinels": 1}
    signed = {
        "role": "model",
        "parts": [
            {"text": "Planning.", "thought": True},
            {
                "functionCall": {"id": "u-0", "name": "lookup", "args": {"q": "a"}},
                "thoughtSignature": SENTINEL_SIGNATURE,
            },
            {"functionCall": {"id": "u-1", "name": "lookup", "args": {"q": "b"}}},
        ],
    }
    assert model.requests[1]["contents"][1:] == [signed, RESPONSES]
    assert result.contents[1:3] == [signed, RESPONSES]
    assert_replayable(result.contents)
    # Said once, with the step whose request carries it, before that step starts.
    said = [e for e in seen if isinstance(e, events.Lifecycle)]
    starts = [e for e in seen if isinstance(e, events.StepStart)]
    assert seen.index(said[0]) == seen.index(starts[1]) - 1
    assert [(e.phase, e.step, e.detail) for e in said] == [
        (
            "signature-sentinel",
            2,
            "put the sentinel signature on the first function call of contents[1] ('lookup'): "
            "gemini-3-flash-preview (Gemini API) sent it without a thoughtSignature, and the next "
            "request needs one there",
        )
    ]


async def test_l33a_without_sentinels_the_turn_ends_with_a_history_error_and_keeps_everything() -> (
    None
):
    model = ScriptedModel(unsigned_calls())
    result = await turn(model, tools=[lookup], signature_policy="strip")
    assert len(model.requests) == 1  # the request the service would refuse is not sent
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert result.contents[2] == RESPONSES  # the tools' answers are kept
    assert result.tool_call_count == 2
    assert result.error is not None
    assert (result.error.kind, result.error.code, result.error.retryable) == (
        "history",
        "UNSENDABLE_OUTPUT",
        False,
    )
    assert str(result.error.message) == (
        "the model's own output cannot be sent back in the next request: Function call is "
        "missing a thought_signature in functionCall parts at contents[1].parts[1]: the first "
        "function call of every model content of the current turn must carry the "
        "thoughtSignature it was received with (use strip_signatures(...) when replaying "
        "history from another model)"
    )
    assert result.message == (
        "The model service failed (its output at contents[1].parts[1] cannot be sent back). "
        "Please try again."
    )


async def test_l33a_a_function_response_in_the_models_content_ends_the_turn_not_raises() -> None:
    odd = {"functionResponse": {"name": "lookup", "response": {}}}
    reply = Reply([chunk(call("lookup", {"q": "a"}, id="x", signature=signature("x")), odd)])
    reply.events[-1]["candidates"][0]["finishReason"] = "STOP"
    model = ScriptedModel(reply)
    result = await turn(model, USER, tools=[lookup])
    assert len(model.requests) == 1
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert result.error is not None and result.error.code == "UNSENDABLE_OUTPUT"
    assert result.message == (
        "The model service failed (its output at contents[1].parts[1] cannot be sent back). "
        "Please try again."
    )
