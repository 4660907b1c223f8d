"""Finish reasons the service sends today (turn-loop addendum L35; contract L4)."""

from __future__ import annotations

from typing import Any

import pytest

from fastagg import map_finish_reason
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import MALFORMED_NOTE
from fastagg.testing.chunks import call, chunk, final, signature, text
from scripted_model import USER, Reply, ScriptedModel, answer, turn

LIMITS = TurnLimits(max_steps=5, turn_timeout=30, wrapup_lead=0)


def finish(raw: str, words: str = "") -> Reply:
    parts = [text(words)] if words else []
    return Reply([chunk(*parts, finish_reason=raw, finish_message=f"{raw} happened")])


@pytest.mark.parametrize(
    ("raw", "unified"),
    [
        ("TOO_MANY_TOOL_CALLS", "tool-calls"),
        ("MODEL_ARMOR", "content-filter"),
        ("IMAGE_SAFETY", "content-filter"),
        ("IMAGE_PROHIBITED_CONTENT", "content-filter"),
        ("IMAGE_RECITATION", "content-filter"),
        ("IMAGE_OTHER", "stop"),
        ("NO_IMAGE", "stop"),
        ("ESCALATION", "stop"),
        ("PUP_LIMITED_DISABLED", "stop"),
        ("SOMETHING_NEW_NEXT_YEAR", "stop"),
    ],
)
async def test_l35_answer_finish_reasons_complete_with_raw_kept(raw: str, unified: str) -> None:
    model = ScriptedModel(finish(raw, "partial answer"))
    result = await turn(model, limits=LIMITS)
    assert result.stop_reason == StopReason.COMPLETED
    assert (result.finish_reason, result.raw_finish_reason) == (unified, raw)
    assert result.text == "partial answer"
    assert map_finish_reason(raw) == unified


async def test_l35_malformed_response_is_resent_as_is_without_the_call_note() -> None:
    model = ScriptedModel(finish("MALFORMED_RESPONSE"), answer("Sunny."))
    events: list[Any] = []
    result = await turn(model, limits=LIMITS, on_event=events.append)
    assert result.stop_reason == StopReason.COMPLETED
    assert result.retries["malformed"] == 1
    assert model.requests[1]["contents"] == USER
    assert [e.phase for e in events if type(e).__name__ == "Lifecycle"] == ["malformed-retry"]


async def test_l35_persisting_malformed_response_is_a_provider_error() -> None:
    model = ScriptedModel(finish("MALFORMED_RESPONSE"), finish("MALFORMED_RESPONSE"))
    result = await turn(model, limits=LIMITS)
    assert result.stop_reason == StopReason.PROVIDER_ERROR
    assert result.error is not None
    assert (result.error.kind, result.error.code, result.error.retryable) == (
        "malformed",
        "MALFORMED_RESPONSE",
        True,
    )
    assert result.message == (
        "The model service failed (the model sent MALFORMED_RESPONSE 2 times). Please try again."
    )
    assert MALFORMED_NOTE not in str(model.requests)


async def test_l35_missing_thought_signature_is_not_retried_and_names_the_part() -> None:
    history = [
        *USER,
        {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {}}}]},
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": 1}}}],
        },
    ]
    model = ScriptedModel(finish("MISSING_THOUGHT_SIGNATURE"), model="gemini-2.5-flash")
    result = await turn(model, history, limits=LIMITS)
    assert len(model.requests) == 1
    assert result.stop_reason == StopReason.PROVIDER_ERROR
    assert result.finish_reason == "error"
    assert result.raw_finish_reason == "MISSING_THOUGHT_SIGNATURE"
    assert result.error is not None
    assert (result.error.kind, result.error.code, result.error.retryable) == (
        "history",
        "MISSING_THOUGHT_SIGNATURE",
        False,
    )
    assert result.error.message == (
        "the model refused the history: contents[1].parts[0] (function call 'get_weather') has "
        "no thoughtSignature; keep the signatures the model returned, or declare the history's "
        "origin (run_turn(history_origin=...)) so the sentinel is put there"
    )
    assert result.message == (
        "The model service failed (no thought signature at contents[1].parts[0] (function call "
        "'get_weather')). Please try again."
    )


async def test_l35_missing_thought_signature_with_every_call_signed_says_so() -> None:
    history = [
        *USER,
        {"role": "model", "parts": [call("f", {}, signature=signature("x"))]},
        {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]},
    ]
    model = ScriptedModel(Reply([final(finish_reason="MISSING_THOUGHT_SIGNATURE")]))
    result = await turn(model, history, limits=LIMITS)
    assert result.error is not None
    assert result.error.code == "MISSING_THOUGHT_SIGNATURE"
    assert result.message == (
        "The model service failed (a thought signature was refused). Please try again."
    )
