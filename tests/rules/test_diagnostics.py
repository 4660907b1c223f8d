"""Structured diagnostics (spec/diagnostics.md X2-X5): the twin's renderer of the shared
catalog, and the diagnostics of results and errors with exact values on both implementations."""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any

import pytest

import fastagg
import fastagg.reference as reference
from fastagg.diagnostics import _catalog, _field_types
from fastagg.errors import MalformedStreamError
from fastagg.reference.diagnostics import _diagnostic
from streams import chunk, fc, pa, sse


def dicts(diagnostics: tuple[Any, ...]) -> list[dict[str, Any]]:
    return [d.as_dict() for d in diagnostics]


def test_x5_twin_builds_the_shared_diagnostic_class() -> None:
    agg = reference.StreamAggregator()
    agg.feed(sse({"candidates": 1}))
    (d,) = agg.close().diagnostics
    assert reference.Diagnostic is fastagg.Diagnostic
    assert type(d) is fastagg.Diagnostic


def test_x5_twin_diagnostic_fields_it_does_not_have_are_none() -> None:
    d = _diagnostic("signature_changed", candidate=1, part=2)
    assert d.as_dict() == {
        "code": "signature_changed",
        "rule": "C6",
        "message": "candidate 1, part 2: a later chunk carried a different thoughtSignature; "
        "the first one was kept",
        "candidate": 1,
        "part": 2,
    }
    assert (d.event, d.call_id, d.args) == (None, None, None)


def test_x2_twin_optional_group_rendered_only_when_its_field_is_not_null() -> None:
    values = {"candidate": 0, "part": 3, "args": {"q": "é"}}
    with_id = _diagnostic("nameless_streamed_call", call_id='c"1', **values)
    without = _diagnostic("nameless_streamed_call", call_id=None, **values)
    assert with_id.message == (
        'candidate 0, part 3: a streamed function call with id "c\\"1" never received '
        'a name and was left out; its args: {"q":"é"}'
    )
    assert without.message == (
        "candidate 0, part 3: a streamed function call never received a name and was "
        'left out; its args: {"q":"é"}'
    )


def test_x3_result_diagnostics_in_order_and_warnings_are_their_messages(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(strict=False)
    agg.feed(
        sse(
            chunk(fc(args={"a": 1})),
            chunk(fc(id="c1", willContinue=True, partialArgs=[pa("$.x", stringValue=3)])),
            b"{bad",
            {"candidates": 5},
        )
    )
    result = agg.close()
    assert dicts(result.diagnostics) == [
        {
            "code": "nameless_call",
            "rule": "C15",
            "message": "event 0: candidates[0].content.parts[0] is a function call without "
            'a name; it was left out (its args: {"a":1})',
            "event": 0,
            "path": "candidates[0].content.parts[0]",
            "call_id": None,
            "args": {"a": 1},
        },
        {
            "code": "partial_arg_skipped",
            "rule": "C5",
            "message": 'candidate 0, part 0: partial arg at "$.x" skipped: '
            "stringValue is not a string",
            "candidate": 0,
            "part": 0,
            "json_path": "$.x",
            "reason": "stringValue is not a string",
        },
        {
            "code": "invalid_json",
            "rule": "F8",
            "message": "event 2 at byte 264 is not valid JSON; it was skipped "
            "(is this the body of a streamGenerateContent response?)",
            "event": 2,
            "offset": 264,
        },
        {
            "code": "wrong_shape",
            "rule": "E7",
            "message": "event 3: candidates is not a list; ignored",
            "event": 3,
            "path": "candidates",
            "expected": "a list",
        },
        {
            "code": "nameless_streamed_call",
            "rule": "C6",
            "message": 'candidate 0, part 0: a streamed function call with id "c1" never '
            "received a name and was left out; its args: {}",
            "candidate": 0,
            "part": 0,
            "call_id": "c1",
            "args": {},
        },
    ]
    assert result.warnings == [d.message for d in result.diagnostics]


def test_x3_d7_bound_closes_the_list_with_warnings_dropped(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed(sse(*({"candidates": 1} for _ in range(1003))))
    diagnostics = agg.close().diagnostics
    assert len(diagnostics) == 1001
    assert diagnostics[-1].as_dict() == {
        "code": "warnings_dropped",
        "rule": "D7",
        "message": "3 more warnings were not kept (at most 1000 are)",
        "count": 3,
        "limit": 1000,
    }


def test_x4_error_carries_its_diagnostic_and_its_text_is_its_message(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    with pytest.raises(MalformedStreamError) as info:
        agg.feed(b"data: [1]\n\ndata: \xff\n\n")
    err = info.value
    assert dicts(err.diagnostics) == [
        {
            "code": "not_an_object",
            "rule": "F8",
            "message": "event 0 at byte 0 is JSON but not an object; it was skipped",
            "event": 0,
            "offset": 0,
        },
        {
            "code": "invalid_utf8",
            "rule": "F8",
            "message": "event 1 at byte 11 is not valid UTF-8; it was skipped",
            "event": 1,
            "offset": 11,
        },
    ]
    assert [str(e) for e in err.errors] == [d.message for d in err.diagnostics]


def test_x4_lenient_error_goes_to_the_result_as_the_same_diagnostic(impl: ModuleType) -> None:
    body = b"data: [1]\n\n"
    with pytest.raises(MalformedStreamError) as info:
        impl.StreamAggregator().feed(body)
    lenient = impl.StreamAggregator(strict=False)
    lenient.feed(body)
    assert lenient.close().diagnostics == info.value.diagnostics


def test_x3_interactions_result_carries_diagnostics(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(api="interactions")
    agg.feed(b'event: step.start\ndata: {"event_type":"step.start","index":0,"step":{}}\n\n')
    result = agg.close()
    assert dicts(result.diagnostics) == [
        {
            "code": "ix_step_never_stopped",
            "rule": "I17",
            "message": "step 0 (null) never received step.stop",
            "step": 0,
            "step_type": None,
        },
        {
            "code": "ix_missing_done",
            "rule": "I3",
            "message": "the stream ended without the [DONE] sentinel",
        },
    ]
    assert result.warnings == [d.message for d in result.diagnostics]


def test_x2_every_catalog_code_renders_without_leftover_placeholders() -> None:
    samples: dict[str, Any] = {"int": 7, "str": "s", "str?": None, "json": [1, "a"]}
    for code, (rule, names, _template) in _catalog().items():
        message = _diagnostic(code, **{n: samples[_field_types()[n]] for n in names}).message
        assert not message.startswith(rule), code
        assert not any(mark in message for mark in ("{", "}", "[[", "]]", "!j")), code


_RULE_ID = re.compile(r"\b[A-Z]{1,2}\d+[a-z]?\b")


def test_x6_warning_texts_carry_no_rule_id(impl: ModuleType) -> None:
    # every catalog entry, rendered with sample fields: the text alone, no rule in it
    samples: dict[str, Any] = {"int": 7, "str": "s", "str?": "c1", "json": [1, "a"]}
    for code, (rule, names, _template) in _catalog().items():
        d = _diagnostic(code, **{n: samples[_field_types()[n]] for n in names})
        assert (d.code, d.rule) == (code, rule)
        assert _RULE_ID.search(d.message) is None, d.message
    # a real stream of each API: the warnings users read are the texts, the rule stays a field
    agg = impl.StreamAggregator(strict=False)
    agg.feed(
        sse(
            chunk(fc(args={"a": 1})),
            chunk(fc(id="c1", willContinue=True, partialArgs=[pa("$.x", stringValue=3)])),
            b"{bad",
            {"candidates": 5},
        )
    )
    result = agg.close()
    assert result.warnings == [
        "event 0: candidates[0].content.parts[0] is a function call without a name; it was "
        'left out (its args: {"a":1})',
        'candidate 0, part 0: partial arg at "$.x" skipped: stringValue is not a string',
        "event 2 at byte 264 is not valid JSON; it was skipped "
        "(is this the body of a streamGenerateContent response?)",
        "event 3: candidates is not a list; ignored",
        'candidate 0, part 0: a streamed function call with id "c1" never received a name '
        "and was left out; its args: {}",
    ]
    assert [(d.code, d.rule) for d in result.diagnostics] == [
        ("nameless_call", "C15"),
        ("partial_arg_skipped", "C5"),
        ("invalid_json", "F8"),
        ("wrong_shape", "E7"),
        ("nameless_streamed_call", "C6"),
    ]
    ix = impl.StreamAggregator(api="interactions")
    ix.feed(b'event: step.start\ndata: {"event_type":"step.start","index":0,"step":{}}\n\n')
    assert ix.close().warnings == [
        "step 0 (null) never received step.stop",
        "the stream ended without the [DONE] sentinel",
    ]
    # an exception's text is the same message
    with pytest.raises(MalformedStreamError) as info:
        impl.StreamAggregator().feed(b"data: [1]\n\n")
    assert [str(e) for e in info.value.errors] == [d.message for d in info.value.diagnostics]
    assert (
        str(info.value.errors[0]) == "event 0 at byte 0 is JSON but not an object; it was skipped"
    )
