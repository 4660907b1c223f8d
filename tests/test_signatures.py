"""The signature policy per backend and model family (turn-loop addendum L33, L34)."""

from __future__ import annotations

from typing import Any

import pytest

from fastagg.request import SENTINEL_SIGNATURE
from fastagg.signatures import (
    Origin,
    SignaturePolicy,
    model_family,
    prepare_history,
    requires_signatures,
)
from fastagg.testing.chunks import call, signature, text

Q = {"role": "user", "parts": [{"text": "Weather?"}]}
OLD_Q = {"role": "user", "parts": [{"text": "Hi"}]}
G25 = Origin("gemini-2.5-flash")
G3 = Origin("gemini-3-flash-preview")
G3_VERTEX = Origin("gemini-3-flash-preview", "vertex")
SIG = signature("2.5")


def fr(name: str = "w") -> dict[str, Any]:
    return {"role": "user", "parts": [{"functionResponse": {"name": name, "response": {}}}]}


def model(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "model", "parts": list(parts)}


HISTORY = [
    OLD_Q,
    model(text("Hello", signature=SIG)),  # an older turn: stripped, no sentinel
    Q,
    model(call("w", {"c": 1}, signature=SIG), call("w", {"c": 2})),
    {"role": "user", "parts": [fr()["parts"][0], fr()["parts"][0]]},
]


@pytest.mark.parametrize(
    ("name", "family", "required"),
    [
        ("gemini-3-flash-preview", "gemini-3", True),
        ("models/gemini-3.1-pro-preview", "gemini-3.1", True),
        ("gemini-2.5-flash", "gemini-2.5", False),
        ("gemini-2.0-flash-001", "gemini-2.0", False),
        ("gemini-1.5-pro", "gemini-1.5", False),
        ("publishers/google/models/gemini-2.5-pro", "gemini-2.5", False),
        ("tuned-model-x", "tuned-model-x", True),
    ],
)
def test_l34_families_and_which_require_signatures(name: str, family: str, required: bool) -> None:
    assert (model_family(name), requires_signatures(name)) == (family, required)


def test_l34_a_target_accepts_its_own_family_on_its_own_backend_only() -> None:
    assert G3.accepts(Origin("gemini-3-pro-preview"))
    assert not G3.accepts(G25)
    assert not G3.accepts(G3_VERTEX)
    assert not G3_VERTEX.accepts(G3)


def test_l33_foreign_history_is_stripped_and_the_current_turn_gets_the_sentinel() -> None:
    out, origins, changes = prepare_history(HISTORY, G25, G3)
    assert out == [
        OLD_Q,
        model({"text": "Hello"}),
        Q,
        model(
            {
                "functionCall": {"name": "w", "args": {"c": 1}},
                "thoughtSignature": SENTINEL_SIGNATURE,
            },
            call("w", {"c": 2}),
        ),
        HISTORY[4],
    ]
    assert origins == [None, G25, None, G25, None]
    assert [(c.action, c.where, c.count) for c in changes] == [
        ("strip", "contents[1]", 1),
        ("strip", "contents[3]", 1),
        ("sentinel", "the first function call of contents[3] ('w')", 1),
    ]
    assert changes[0].detail == (
        "removed 1 thought signature from contents[1]: issued by gemini-2.5-flash (Gemini API), "
        "which gemini-3-flash-preview (Gemini API) does not accept"
    )
    assert changes[2].detail == (
        "put the sentinel signature on the first function call of contents[3] ('w'): its "
        "signature from gemini-2.5-flash (Gemini API) cannot be sent to gemini-3-flash-preview "
        "(Gemini API), which requires one there"
    )
    assert HISTORY[3]["parts"][0]["thoughtSignature"] == SIG  # the input is not modified


def test_l33_same_origin_is_kept_as_given() -> None:
    out, _, changes = prepare_history(HISTORY, Origin("gemini-3-pro-preview"), G3)
    assert out == HISTORY and changes == []
    assert all(a is b for a, b in zip(out, HISTORY, strict=True))


def test_l33_other_backend_is_foreign() -> None:
    out, _, changes = prepare_history(HISTORY, G3, G3_VERTEX)
    assert [c.action for c in changes] == ["strip", "strip", "sentinel"]
    assert out[3]["parts"][0]["thoughtSignature"] == SENTINEL_SIGNATURE


def test_l33_unknown_origin_is_sent_as_given() -> None:
    out, origins, changes = prepare_history(HISTORY, None, G3)
    assert out == HISTORY and changes == [] and origins == [None] * 5
    per_content = [None, G25, None, None, None]
    out, _, changes = prepare_history(HISTORY, per_content, G3)
    assert [(c.action, c.where) for c in changes] == [("strip", "contents[1]")]
    assert out[3] is HISTORY[3]


def test_l33_a_target_that_needs_no_signature_gets_no_sentinel() -> None:
    out, _, changes = prepare_history(HISTORY, G3, G25)
    assert [c.action for c in changes] == ["strip", "strip"]
    assert out[3]["parts"][0] == {"functionCall": {"name": "w", "args": {"c": 1}}}


@pytest.mark.parametrize(
    ("policy", "actions"),
    [
        (SignaturePolicy.KEEP, []),
        ("keep", []),
        (SignaturePolicy.STRIP, ["strip", "strip"]),
        (SignaturePolicy.SENTINEL, ["strip", "strip", "sentinel"]),
        (SignaturePolicy.AUTO, ["strip", "strip"]),
    ],
)
def test_l33_policy_is_overridable(policy: Any, actions: list[str]) -> None:
    out, _, changes = prepare_history(HISTORY, G3, G25, policy)  # target 2.5 needs none
    assert [c.action for c in changes] == actions
    if not actions:
        assert out == HISTORY


def test_l33_a_content_left_empty_is_dropped_with_its_origin() -> None:
    history = [Q, model({"text": "", "thoughtSignature": SIG}), Q]
    out, origins, changes = prepare_history(history, [None, G25, None], G3)
    assert out == [Q, Q]
    assert origins == [None, None]
    assert [(c.action, c.where) for c in changes] == [("strip", "contents[1]")]


def test_l33_history_origin_must_match_the_contents() -> None:
    with pytest.raises(ValueError, match="history_origin has 1 entries but contents has 5"):
        prepare_history(HISTORY, [G25], G3)
    with pytest.raises(TypeError, match=r"history_origin\[0\] is str"):
        prepare_history([Q], ["gemini-2.5-flash"], G3)  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"Origin.backend must be 'gemini' or 'vertex'"):
        Origin("gemini-3-flash-preview", "aistudio")


def test_l33_a_content_that_is_not_an_object_is_left_to_the_request_guard() -> None:
    out, _, changes = prepare_history([Q, "oops", Q], [None, G25, None], G3)  # type: ignore[list-item]
    assert out == [Q, "oops", Q] and changes == []
