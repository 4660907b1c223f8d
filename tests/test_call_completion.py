"""Whether the model finished a call (C13), responseId changes (E10), the jsonPath depth (C9).

Both implementations, through the ``impl`` fixture, public API only.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

from test_aggregation_rules import chunk, fc, pa, run_chunks, sse

SIG = "c2lnbmF0dXJl"


def opening(**extra: Any) -> dict[str, Any]:
    """The first chunk of a streamed call (signed), still open."""
    return chunk(
        {"text": "Checking."},
        fc({"thoughtSignature": SIG}, id="c1", name="get_weather", willContinue=True, **extra),
    )


FRAGMENT = chunk(
    fc(
        partialArgs=[pa("$.city", stringValue="Paris, Ile-de-F", willContinue=True)],
        willContinue=True,
    )
)


def test_c13_call_ended_by_its_end_marker_is_finished(impl: ModuleType) -> None:
    result, deltas = run_chunks(impl, opening(), FRAGMENT, chunk(fc()), chunk(finish="STOP"))
    assert result.unfinished_calls == []
    assert result.candidates[0].unfinished_calls == []
    call = {"id": "c1", "name": "get_weather", "args": {"city": "Paris, Ile-de-F"}}
    assert impl.CallEnd(0, 1, call) in deltas


def test_c13_will_continue_false_and_complete_parts_are_finished(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk(fc(name="a", args={"x": 1})),
        chunk(fc(name="b", willContinue=True)),
        chunk(fc(partialArgs=[pa("$.y", numberValue=2)], willContinue=False)),
    )
    assert [c["name"] for c in result.function_calls] == ["a", "b"]
    assert result.unfinished_calls == []


def test_c13_call_flushed_at_close_is_listed_as_unfinished(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    deltas = agg.feed(sse(opening(), FRAGMENT))
    assert agg.snapshot().unfinished_calls == [1]  # still open
    result = agg.close()
    # Flushed so nothing is lost (its signature stays), but never ended by the model:
    # no CallEnd delta, and the result says so.
    assert [type(d).__name__ for d in deltas] == ["TextDelta", "CallStart", "ArgDelta"]
    assert result.unfinished_calls == [1]
    assert result.candidates[0].unfinished_calls == [1]
    assert result.parts[1] == {
        "functionCall": {"id": "c1", "name": "get_weather", "args": {"city": "Paris, Ile-de-F"}},
        "thoughtSignature": SIG,
    }
    assert result.function_calls == [
        {"id": "c1", "name": "get_weather", "args": {"city": "Paris, Ile-de-F"}}
    ]
    assert result.warnings == []


def test_c13_only_the_open_call_of_several_is_unfinished(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk(fc(id="a", name="f", willContinue=True)),
        chunk(fc(id="a")),
        chunk(fc(id="b", name="g", willContinue=True)),
        chunk(fc(id="c", name="h", args={})),
    )
    assert [c["id"] for c in result.function_calls] == ["a", "b", "c"]
    assert result.unfinished_calls == [1]


def test_c13_unfinished_calls_per_candidate(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk(fc(name="f", args={}), index=0),
        chunk(fc(name="g", willContinue=True), index=1),
    )
    assert result.unfinished_calls == []
    assert [c.unfinished_calls for c in result.candidates] == [[], [0]]


def test_c13_nameless_flushed_call_is_left_out_not_listed(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl, chunk(fc(partialArgs=[pa("$.x", numberValue=1)], willContinue=True))
    )
    assert result.parts == []
    assert result.unfinished_calls == []


def test_e10_changed_response_id_is_warned_about(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk({"text": "a"}, responseId="r1"),
        chunk({"text": "b"}, responseId="r1"),
        chunk({"text": "c"}, responseId="r2"),
        chunk({"text": "d"}, responseId=None),
        chunk({"text": "e"}, responseId=7),
    )
    assert result.response_id == 7
    assert result.text == "abcde"
    assert result.warnings == [
        'E10: event 2: responseId changed from "r1" to "r2"; the body holds more than one '
        "response and they were aggregated as one model turn",
        'E10: event 4: responseId changed from "r2" to 7; the body holds more than one '
        "response and they were aggregated as one model turn",
    ]


def test_e10_one_response_id_gives_no_warning(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl, chunk({"text": "a"}, responseId="r1"), chunk({"text": "b"}, responseId="r1")
    )
    assert result.warnings == []


def test_c9_jsonpath_may_be_as_deep_as_the_json_nesting_limit(impl: ModuleType) -> None:
    deep = "$" + ".d" * 1024
    result, deltas = run_chunks(
        impl,
        chunk(
            fc(
                name="f",
                partialArgs=[pa(deep, stringValue="v"), pa(deep + ".e", stringValue="w")],
            )
        ),
    )
    node = result.function_calls[0]["args"]
    for _ in range(1024):
        node = node["d"]
    assert node == "v"
    assert result.warnings == [
        f"C5: candidate 0, part 0: partial arg at {json.dumps(deep + '.e')} skipped: "
        "jsonPath deeper than 1024 segments"
    ]
    assert impl.ArgDelta(0, 0, deep, "v") in deltas
