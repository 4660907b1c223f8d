"""Request rules: check_request (turn-loop.md L2), map_finish_reason (L4), strip_signatures (L11)."""

from __future__ import annotations

from typing import Any

import pytest

from fastagg.errors import InvalidRequestError
from fastagg.limits import StopReason
from fastagg.request import check_request, map_finish_reason, strip_signatures
from fastagg.testing.chunks import call, signature
from scripted_model import USER, ScriptedModel, answer, turn

SIG = signature("one")


def fc(name: str = "get", id: str | None = "c1", sig: str | None = SIG) -> dict[str, Any]:
    return call(name, {"x": 1}, id=id, signature=sig)


def fr(name: str = "get", id: str | None = "c1") -> dict[str, Any]:
    response: dict[str, Any] = {"name": name, "response": {"output": 1}}
    if id is not None:
        response = {"id": id, **response}
    return {"functionResponse": response}


def model(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "model", "parts": list(parts)}


def user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "parts": list(parts)}


Q = {"text": "Question?"}


def rejects(contents: list[dict[str, Any]], where: str, match: str) -> None:
    with pytest.raises(InvalidRequestError, match=match) as info:
        check_request({"contents": contents})
    assert info.value.where == where


# -- L2 ------------------------------------------------------------------------


def test_l2_accepts_a_well_formed_multi_step_turn() -> None:
    check_request(
        {
            "contents": [
                user(Q),
                model(fc(), fc("put", "c2", None)),
                user(fr(), fr("put", "c2")),
                model({"text": "Ok"}),
                user({"text": "And?"}),
            ]
        }
    )


def test_l2_rejects_a_trailing_model_turn() -> None:
    rejects(
        [user(Q), model({"text": "Hi"})],
        "contents[1]",
        "Requests ending with a model turn are not supported",
    )


def test_l2_rejects_trailing_function_calls_without_responses() -> None:
    rejects(
        [user(Q), model(fc())], "contents[1]", "Requests ending with a model turn are not supported"
    )


def test_l2_rejects_a_missing_signature_on_the_first_call_of_a_step_in_the_current_turn() -> None:
    contents = [
        user(Q),
        model(fc()),
        user(fr()),
        model(fc("get", "c2", None)),
        user(fr("get", "c2")),
    ]
    rejects(contents, "contents[3].parts[0]", "missing a thought_signature")


def test_l2_signature_is_only_required_in_the_current_turn() -> None:
    old_turn = [user(Q), model(fc(sig=None)), user(fr()), model({"text": "Done"})]
    check_request({"contents": [*old_turn, user({"text": "New question"})]})
    with pytest.raises(InvalidRequestError):
        check_request({"contents": old_turn[:3]})
    check_request({"contents": old_turn[:3]}, require_signatures=False)


def test_l2_only_the_first_call_of_a_parallel_step_needs_a_signature() -> None:
    check_request(
        {
            "contents": [
                user(Q),
                model({"text": "t"}, fc(), fc("put", "c2", None)),
                user(fr(), fr("put", "c2")),
            ]
        }
    )


def test_l2_rejects_mismatched_function_responses() -> None:
    two_calls = model(fc(), fc("put", "c2", None))
    rejects([user(Q), two_calls, user(fr())], "contents[2]", "1 function response part")
    rejects(
        [user(Q), two_calls, user(fr("put", "c2"), fr())],
        "contents[2].parts[0]",
        "named 'put' but call 0",
    )
    rejects(
        [user(Q), model(fc()), user(fr(id="zz"))],
        "contents[2].parts[0]",
        "id 'zz' does not match call id 'c1'",
    )
    rejects([user(Q), model(fc()), user(Q), user(fr())], "contents[2]", "0 function response part")


def test_l2_rejects_stray_function_responses_roles_and_empty_contents() -> None:
    rejects([user(fr())], "contents[0].parts[0]", "must directly follow")
    rejects(
        [user(Q), {"role": "assistant", "parts": [Q]}], "contents[1]", "valid role: user, model"
    )
    rejects([{"role": "user", "parts": []}], "contents[0].parts", "has no parts")
    rejects([], "contents", "contents is empty")
    with pytest.raises(InvalidRequestError):
        check_request({})


def test_l2_responses_may_be_followed_by_text_in_the_same_content() -> None:
    check_request({"contents": [user(Q), model(fc()), user(fr(), {"text": "Time check"})]})


async def test_l2_the_loop_raises_before_sending_an_invalid_request() -> None:
    scripted = ScriptedModel(answer("never"))
    with pytest.raises(InvalidRequestError, match="Requests ending with a model turn"):
        await turn(scripted, [*USER, model({"text": "prefill"})])
    assert scripted.requests == []


async def test_l2_l31_loop_skips_the_signature_rule_for_pre_gemini_3_models() -> None:
    unsigned_history = [user(Q), model(fc(sig=None)), user(fr())]
    scripted = ScriptedModel(answer("Ok."), model="gemini-2.5-flash")
    result = await turn(scripted, unsigned_history)
    assert result.stop_reason is StopReason.COMPLETED
    with pytest.raises(InvalidRequestError, match="thought_signature"):
        await turn(ScriptedModel(answer("Ok.")), unsigned_history)


# -- L4 ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "unified"),
    [
        ("MAX_TOKENS", "length"),
        ("CONTINUATION", "length"),
        ("TOO_MANY_TOOL_CALLS", "tool-calls"),
        ("MALFORMED_FUNCTION_CALL", "error"),
        ("UNEXPECTED_TOOL_CALL", "error"),
        *[
            (r, "content-filter")
            for r in (
                "SAFETY",
                "RECITATION",
                "BLOCKLIST",
                "PROHIBITED_CONTENT",
                "SPII",
                "LANGUAGE",
                "IMAGE_SAFETY",
                "IMAGE_PROHIBITED_CONTENT",
                "IMAGE_RECITATION",
                "MODEL_ARMOR",
            )
        ],
        *[
            (r, "stop")
            for r in (
                "STOP",
                "OTHER",
                "FINISH_REASON_UNSPECIFIED",
                "IMAGE_OTHER",
                "NO_IMAGE",
                "SOMETHING_NEW",
            )
        ],
        (None, None),
    ],
)
def test_l4_finish_reason_table(raw: str | None, unified: str | None) -> None:
    assert map_finish_reason(raw) == unified


# -- L11 strip_signatures ------------------------------------------------------


def test_l11_strip_signatures_removes_all_and_puts_the_sentinel_on_current_turn_calls() -> None:
    old = [
        user(Q),
        model(fc(), {"text": "", "thoughtSignature": SIG}),
        user(fr()),
        model({"text": "Done", "thoughtSignature": SIG}),
    ]
    current = [
        user({"text": "Next"}),
        model({"text": "t", "thought": True}, fc("a", "c3"), fc("b", "c4", None)),
        user(fr("a", "c3"), fr("b", "c4")),
    ]
    out = strip_signatures([*old, *current])
    assert out == [
        user(Q),
        model(call("get", {"x": 1}, id="c1")),
        user(fr()),
        model({"text": "Done"}),
        user({"text": "Next"}),
        model(
            {"text": "t", "thought": True},
            call("a", {"x": 1}, id="c3", signature="skip_thought_signature_validator"),
            call("b", {"x": 1}, id="c4"),
        ),
        user(fr("a", "c3"), fr("b", "c4")),
    ]
    check_request({"contents": out})
    assert out[0] is old[0]  # untouched contents are shared
    assert old[1]["parts"][0]["thoughtSignature"] == SIG  # the input is not modified


def test_l11_strip_signatures_without_sentinel() -> None:
    out = strip_signatures([user(Q), model(fc()), user(fr())], sentinel=False)
    assert out[1] == model(call("get", {"x": 1}, id="c1"))
    with pytest.raises(InvalidRequestError):
        check_request({"contents": out})


def test_l11_strip_signatures_drops_a_model_content_left_empty() -> None:
    out = strip_signatures(
        [user(Q), model({"text": "", "thoughtSignature": SIG}), user({"text": "x"})]
    )
    assert out == [user(Q), user({"text": "x"})]
