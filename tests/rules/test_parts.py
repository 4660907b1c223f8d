"""Parts (P1-P9): text runs, signed text, kept parts, the joined text.

Every test runs against both implementations through the ``impl`` fixture
(the Rust module ``fastagg._fastagg`` and the pure-Python ``fastagg.reference``)
and uses only the public API.
"""

from __future__ import annotations

from types import ModuleType

from streams import as_json, chunk, fc, run_chunks


def test_p1_text_runs_merge_by_thought_flag(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl,
        chunk({"text": "Plan", "thought": True}, {"text": " A", "thought": True}),
        chunk({"text": "Ans", "thought": False}, {"text": "wer"}),
        chunk({"text": "!", "thought": True}, {"text": "?"}, finish="STOP"),
    )
    assert as_json(result.parts) == as_json(
        [
            {"text": "Plan A", "thought": True},
            {"text": "Answer"},
            {"text": "!", "thought": True},
            {"text": "?"},
        ]
    )
    assert deltas == [
        impl.TextDelta(0, 0, "Plan", True),
        impl.TextDelta(0, 0, " A", True),
        impl.TextDelta(0, 1, "Ans", False),
        impl.TextDelta(0, 1, "wer", False),
        impl.TextDelta(0, 2, "!", True),
        impl.TextDelta(0, 3, "?", False),
        impl.Finish(0, "STOP"),
    ]
    assert result.text == "Answer?"
    assert result.thought_text == "Plan A!"


def test_p2_empty_plain_text_dropped_without_ending_the_run(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl,
        chunk({"text": "a"}, {"text": ""}, {"text": "", "thought": True}, {"text": "b"}),
    )
    assert result.parts == [{"text": "ab"}]
    assert deltas == [
        impl.TextDelta(0, 0, "a", False),
        impl.TextDelta(0, 0, "b", False),
    ]


def test_p3_signed_text_never_merged(impl: ModuleType) -> None:
    signed = {"text": "two", "thoughtSignature": "c2ln"}
    signed_thought = {"thought": True, "text": "", "thoughtSignature": "dA=="}
    result, deltas = run_chunks(
        impl,
        chunk({"text": "one"}, signed, {"text": "three"}, signed_thought, {"text": "four"}),
    )
    assert as_json(result.parts) == as_json(
        [{"text": "one"}, signed, {"text": "three"}, signed_thought, {"text": "four"}]
    )
    assert deltas == [
        impl.TextDelta(0, 0, "one", False),
        impl.TextDelta(0, 1, "two", False),
        impl.TextDelta(0, 2, "three", False),
        impl.TextDelta(0, 4, "four", False),
    ]
    assert result.text == "onetwothreefour"


def test_p4_other_parts_kept_byte_exact_and_end_the_run(impl: ModuleType) -> None:
    inline = {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
    code = {
        "executableCode": {"language": "PYTHON", "code": "print(1.0)"},
        "zeta": 1.0,
        "alpha": 2,
    }
    unknown = {"thought": True}
    result, deltas = run_chunks(
        impl, chunk({"text": "a"}, inline, {"text": "b"}, code, unknown, {"text": "c"})
    )
    assert as_json(result.parts) == as_json(
        [{"text": "a"}, inline, {"text": "b"}, code, unknown, {"text": "c"}]
    )
    assert b'"zeta":1.0,"alpha":2' in result.to_json()
    assert deltas == [
        impl.TextDelta(0, 0, "a", False),
        impl.TextDelta(0, 2, "b", False),
        impl.TextDelta(0, 5, "c", False),
    ]


def test_p5_signature_kept_verbatim_on_its_part(impl: ModuleType) -> None:
    sig = "ab-_cd=="  # URL-safe alphabet: never re-encoded
    result, _ = run_chunks(
        impl,
        chunk({"text": "x", "thoughtSignature": sig}),
        chunk({"thoughtSignature": sig}),
    )
    assert result.parts == [
        {"text": "x", "thoughtSignature": sig},
        {"thoughtSignature": sig},
    ]


def test_p6_empty_part_dropped(impl: ModuleType) -> None:
    result, _ = run_chunks(impl, chunk({"text": "a"}, {}, {"text": "b"}))
    assert result.parts == [{"text": "ab"}]


def test_p7_function_call_that_is_not_an_object_is_a_p4_part(impl: ModuleType) -> None:
    result, deltas = run_chunks(impl, chunk({"functionCall": "f()"}, {"text": "x"}))
    assert result.parts == [{"functionCall": "f()"}, {"text": "x"}]
    assert result.function_calls == []
    assert deltas == [impl.TextDelta(0, 1, "x", False)]


def test_p8_non_string_text_is_p4_and_p3_text_counts(impl: ModuleType) -> None:
    odd = {"text": 5}
    p3 = {"text": "T", "thought": "yes"}
    p3_thought = {"text": "U", "thought": True, "partMetadata": {}}
    result, deltas = run_chunks(impl, chunk(odd, p3, p3_thought))
    assert as_json(result.parts) == as_json([odd, p3, p3_thought])
    assert deltas == [impl.TextDelta(0, 1, "T", False), impl.TextDelta(0, 2, "U", True)]
    assert (result.text, result.thought_text) == ("T", "U")


def test_p9_text_joins_runs_and_signed_parts_in_part_order(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk({"text": "think", "thought": True}, {"text": "A"}),
        chunk(
            fc({"thoughtSignature": "cw=="}, name="f", args={}),
            {"text": "B", "thoughtSignature": "cw=="},
        ),
        chunk({"text": "C"}, {"text": "!", "thought": True, "thoughtSignature": "cw=="}),
    )
    assert result.text == "ABC"
    assert result.thought_text == "think!"
