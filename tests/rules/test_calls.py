"""Function calls (C1-C3, C6-C8, C10-C17): complete and streamed calls, routing, close.

Every test runs against both implementations through the ``impl`` fixture
(the Rust module ``fastagg._fastagg`` and the pure-Python ``fastagg.reference``)
and uses only the public API.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from streams import as_json, chunk, fc, pa, run_chunks, sse, sse_body


def test_c1_complete_call_kept_byte_exact(impl: ModuleType) -> None:
    part = {
        "thoughtSignature": "c2ln",
        "functionCall": {"args": {"b": 1.0, "a": [1, 2]}, "name": "f", "id": "x1"},
    }
    result, deltas = run_chunks(impl, chunk({"text": "hi"}, part, {"text": "bye"}))
    assert as_json(result.parts) == as_json([{"text": "hi"}, part, {"text": "bye"}])
    call = {"id": "x1", "name": "f", "args": {"b": 1.0, "a": [1, 2]}}
    assert as_json(result.function_calls) == as_json([call])
    assert deltas == [
        impl.TextDelta(0, 0, "hi", False),
        impl.CallStart(0, 1, "x1", "f"),
        impl.CallEnd(0, 1, call),
        impl.TextDelta(0, 2, "bye", False),
    ]


def test_c1_complete_call_without_args(impl: ModuleType) -> None:
    result, _ = run_chunks(impl, chunk(fc(name="now")))
    assert result.parts == [{"functionCall": {"name": "now"}}]
    assert result.function_calls == [{"id": None, "name": "now", "args": {}}]


def test_c1_will_continue_makes_a_named_call_streamed(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl,
        chunk(fc(name="f", args={"a": 1}, willContinue=True)),
        chunk(fc(args={"b": 2}, willContinue=False)),
    )
    assert as_json(result.parts) == as_json(
        [{"functionCall": {"name": "f", "args": {"a": 1, "b": 2}}}]
    )
    assert deltas == [
        impl.CallStart(0, 0, None, "f"),
        impl.CallEnd(0, 0, {"id": None, "name": "f", "args": {"a": 1, "b": 2}}),
    ]


def test_c1_named_chunk_without_will_continue_is_a_complete_call(
    impl: ModuleType,
) -> None:
    # Even with the id of an open call: it has a name and no willContinue (C1).
    result, deltas = run_chunks(
        impl,
        chunk(fc(id="i", name="f", willContinue=True)),
        chunk(fc(id="i", name="f")),
        chunk(fc(id="i", willContinue=False)),
    )
    assert result.parts == [
        {"functionCall": {"id": "i", "name": "f", "args": {}}},
        {"functionCall": {"id": "i", "name": "f"}},
    ]
    assert deltas == [
        impl.CallStart(0, 0, "i", "f"),
        impl.CallStart(0, 1, "i", "f"),
        impl.CallEnd(0, 1, {"id": "i", "name": "f", "args": {}}),
        impl.CallEnd(0, 0, {"id": "i", "name": "f", "args": {}}),
    ]


def test_c2_chunk_with_id_routes_to_open_call_with_that_id(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl,
        chunk(
            fc(id="a", name="alpha", willContinue=True),
            fc(id="b", name="beta", willContinue=True),
        ),
        chunk(fc(id="a", partialArgs=[pa("$.x", stringValue="1")], willContinue=True)),
        chunk(fc(id="b", partialArgs=[pa("$.y", stringValue="2")])),
        chunk(fc(id="a")),
    )
    assert as_json(result.parts) == as_json(
        [
            {"functionCall": {"id": "a", "name": "alpha", "args": {"x": "1"}}},
            {"functionCall": {"id": "b", "name": "beta", "args": {"y": "2"}}},
        ]
    )
    assert deltas == [
        impl.CallStart(0, 0, "a", "alpha"),
        impl.CallStart(0, 1, "b", "beta"),
        impl.ArgDelta(0, 0, "$.x", "1"),
        impl.ArgDelta(0, 1, "$.y", "2"),
        impl.CallEnd(0, 1, {"id": "b", "name": "beta", "args": {"y": "2"}}),
        impl.CallEnd(0, 0, {"id": "a", "name": "alpha", "args": {"x": "1"}}),
    ]


def test_c2_unknown_id_starts_a_new_call(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl,
        chunk(fc(id="a", name="f", args={"n": 1})),  # complete: not an open call
        chunk(fc(id="a", partialArgs=[pa("$.n", numberValue=2)], willContinue=True)),
        chunk(fc(name="g", willContinue=True)),
    )
    assert deltas[2:] == [
        impl.CallStart(0, 1, "a", None),
        impl.ArgDelta(0, 1, "$.n", 2),
        impl.CallStart(0, 2, None, "g"),
    ]
    assert result.warnings == [
        'candidate 0, part 1: a streamed function call with id "a" never received a name and was left out; its args: {"n":2}'
    ]
    assert result.parts == [
        {"functionCall": {"id": "a", "name": "f", "args": {"n": 1}}},
        {"functionCall": {"name": "g", "args": {}}},
    ]


def test_c2_name_without_id_starts_a_new_call(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk(fc(name="f", willContinue=True)),
        chunk(fc(name="f", willContinue=True)),
    )
    assert result.parts == [
        {"functionCall": {"name": "f", "args": {}}},
        {"functionCall": {"name": "f", "args": {}}},
    ]


def test_c2_path_affinity_picks_the_call_holding_the_path(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl,
        chunk(
            fc(
                name="alpha",
                partialArgs=[pa("$.x", stringValue="P")],
                willContinue=True,
            )
        ),
        chunk(fc(name="beta", partialArgs=[pa("$.y", stringValue="Q")], willContinue=True)),
        chunk(fc(partialArgs=[pa("$.x", stringValue="R")], willContinue=True)),
        chunk(fc(partialArgs=[pa("$.new", stringValue="S")], willContinue=True)),
    )
    assert as_json(result.parts) == as_json(
        [
            {"functionCall": {"name": "alpha", "args": {"x": "PR", "new": "S"}}},
            {"functionCall": {"name": "beta", "args": {"y": "Q"}}},
        ]
    )
    assert deltas[-2:] == [
        impl.ArgDelta(0, 0, "$.x", "R"),
        impl.ArgDelta(0, 0, "$.new", "S"),
    ]


def test_c2_several_holders_most_recently_updated_wins(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk(fc(name="a", args={"k": "1"}, willContinue=True)),
        chunk(fc(name="b", args={"k": "2"}, willContinue=True)),
        chunk(fc(id=None, partialArgs=[pa("$.k", stringValue="x")], willContinue=True)),
        chunk(fc(name="c", willContinue=True)),
        chunk(fc(partialArgs=[pa("$.k", stringValue="y")], willContinue=True)),
    )
    assert as_json(result.parts) == as_json(
        [
            {"functionCall": {"name": "a", "args": {"k": "1"}}},
            {"functionCall": {"name": "b", "args": {"k": "2xy"}}},
            {"functionCall": {"name": "c", "args": {}}},
        ]
    )


def test_c2_end_marker_closes_most_recent_open_call(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl,
        chunk(fc(name="a", willContinue=True), fc(name="b", willContinue=True)),
        chunk(fc(willContinue=False)),
        chunk(fc(partialArgs=[pa("$.z", boolValue=True)], willContinue=True)),
        chunk(fc()),
    )
    assert deltas == [
        impl.CallStart(0, 0, None, "a"),
        impl.CallStart(0, 1, None, "b"),
        impl.CallEnd(0, 1, {"id": None, "name": "b", "args": {}}),
        impl.ArgDelta(0, 0, "$.z", True),
        impl.CallEnd(0, 0, {"id": None, "name": "a", "args": {"z": True}}),
    ]
    assert result.warnings == []


def test_c10_end_marker_with_no_open_call_is_ignored(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl, chunk({"text": "a"}, fc(), fc(willContinue=False), {"text": "b"})
    )
    assert deltas == [
        impl.TextDelta(0, 0, "a", False),
        impl.TextDelta(0, 0, "b", False),
    ]
    assert result.parts == [{"text": "ab"}]
    assert result.warnings == []


def test_c10_open_calls_are_per_candidate(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk(fc(name="f", willContinue=True), index=0),
        chunk(fc(partialArgs=[pa("$.a", numberValue=1)], willContinue=True), index=1),
        chunk(fc(), index=0),
    )
    assert result.parts == [{"functionCall": {"name": "f", "args": {}}}]
    assert result.candidates[1].parts == []
    assert result.warnings == [
        'candidate 1, part 0: a streamed function call never received a name and was left out; its args: {"a":1}'
    ]


def test_c3_streamed_call_keeps_its_position_and_does_not_end_the_run(
    impl: ModuleType,
) -> None:
    result, deltas = run_chunks(
        impl,
        chunk({"text": "a"}),
        chunk(fc({"thoughtSignature": "cw=="}, name="w", willContinue=True)),
        chunk({"text": "b"}),
        chunk(fc(partialArgs=[pa("$.s", stringValue="x")], willContinue=True)),
        chunk({"text": "c"}),
        chunk(fc()),
    )
    assert as_json(result.parts) == as_json(
        [
            {"text": "a"},
            {
                "functionCall": {"name": "w", "args": {"s": "x"}},
                "thoughtSignature": "cw==",
            },
            {"text": "bc"},
        ]
    )
    assert [d.index for d in deltas if isinstance(d, impl.TextDelta)] == [0, 2, 2]


def test_c6_argument_will_continue_never_closes_the_call(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed(
        sse(
            chunk(fc(name="f", willContinue=True)),
            chunk(
                fc(
                    partialArgs=[pa("$.a", stringValue="x", willContinue=False)],
                    willContinue=True,
                )
            ),
        )
    )
    snap = agg.snapshot()
    assert snap.parts == [{"functionCall": {"name": "f", "args": {"a": "x"}}}]
    deltas = agg.feed(sse(chunk(fc(partialArgs=[pa("$.a", stringValue="y", willContinue=True)]))))
    assert deltas == [
        impl.ArgDelta(0, 0, "$.a", "y"),
        impl.CallEnd(0, 0, {"id": None, "name": "f", "args": {"a": "xy"}}),
    ]


def test_c6_first_signature_kept_later_different_one_warned(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk({"text": "t"}, fc(name="f", willContinue=True)),
        chunk(fc({"thoughtSignature": "Zmlyc3Q="}, willContinue=True)),
        chunk(fc({"thoughtSignature": "Zmlyc3Q=", "text": "dropped"}, willContinue=True)),
        chunk(fc({"thoughtSignature": "b3RoZXI="})),
    )
    assert as_json(result.parts) == as_json(
        [
            {"text": "t"},
            {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "Zmlyc3Q="},
        ]
    )
    assert result.warnings == [
        "candidate 0, part 1: a later chunk carried a different thoughtSignature; the first one was kept"
    ]


def test_c6_nameless_call_left_out_and_reported(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl,
        chunk({"text": "a"}),
        chunk(
            fc(
                partialArgs=[
                    pa("$.p", stringValue="caf\u00e9"),
                    pa("$.n", numberValue=1.5),
                ],
                willContinue=True,
            )
        ),
        chunk({"text": "b"}),
        chunk(fc()),
        chunk({"text": "c"}),
    )
    assert result.parts == [{"text": "a"}, {"text": "bc"}]
    assert result.function_calls == []
    assert result.warnings == [
        'candidate 0, part 1: a streamed function call never received a name and was left out; its args: {"p":"café","n":1.5}'
    ]
    assert deltas == [
        impl.TextDelta(0, 0, "a", False),
        impl.CallStart(0, 1, None, None),
        impl.ArgDelta(0, 1, "$.p", "caf\u00e9"),
        impl.ArgDelta(0, 1, "$.n", 1.5),
        impl.TextDelta(0, 2, "b", False),
        impl.TextDelta(0, 2, "c", False),
    ]


# Floats whose two nearest shortest forms are equally near (an exact tie):
# Python's repr keeps the even last digit; Rust's `{:e}` took the odd one.
TIE_FLOATS = (
    (8796093022208.8125, "8796093022208.812"),
    (1099006878916.78125, "1099006878916.7812"),
    (2.0**-25, "2.9802322387695312e-08"),
    (1.3589859008789062e-05, "1.3589859008789062e-05"),
)


def test_c6_message_writes_args_floats_as_python_repr(impl: ModuleType) -> None:
    # Notation `cj` (spec/aggregation.md): floats in a message as `repr(float)`
    # writes them, ties included.
    values = [pa(f"$.f{i}", numberValue=f) for i, (f, _) in enumerate(TIE_FLOATS)]
    result, _ = run_chunks(impl, chunk(fc(partialArgs=values, willContinue=True)), chunk(fc()))
    written = ",".join(f'"f{i}":{text}' for i, (_, text) in enumerate(TIE_FLOATS))
    assert result.warnings == [
        "candidate 0, part 0: a streamed function call never received a name and was "
        f"left out; its args: {{{written}}}"
    ]


def test_c6_message_floats_agree_with_the_reference_over_many_ties() -> None:
    # The same rule over 3,000 seeded binary fractions, most of them exact ties.
    import random

    import fastagg._fastagg as rust
    import fastagg.reference as reference

    rng = random.Random(2026)
    floats = [
        rng.randint(1, 2**20) / 2.0 ** rng.randint(1, 40) * 10.0 ** rng.randint(-12, 14)
        for _ in range(1000)
    ]
    floats += [rng.randint(2**40, 2**52) + rng.randint(0, 255) / 256 for _ in range(1000)]
    floats += [rng.randint(1, 2**12) / 2.0 ** rng.randint(14, 40) for _ in range(1000)]
    values = [pa(f"$.v[{i}]", numberValue=f) for i, f in enumerate(floats)]
    stream = [chunk(fc(partialArgs=values, willContinue=True)), chunk(fc())]
    (got, _), (want, _) = (run_chunks(impl, *stream) for impl in (rust, reference))
    assert got.warnings == want.warnings
    assert want.warnings[0].endswith("[" + ",".join(map(repr, floats)) + "]}")


def test_c6_call_named_by_a_later_chunk(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl,
        chunk(fc(id="i", partialArgs=[pa("$.a", numberValue=1)], willContinue=True)),
        chunk(fc(id="i", name="late", willContinue=False)),
    )
    assert result.parts == [{"functionCall": {"id": "i", "name": "late", "args": {"a": 1}}}]
    assert deltas[-1] == impl.CallEnd(0, 0, {"id": "i", "name": "late", "args": {"a": 1}})


def test_c7_ids_never_invented(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl, chunk(fc(name="f", args={}), fc(name="g", willContinue=True, id=7), fc())
    )
    assert result.parts == [
        {"functionCall": {"name": "f", "args": {}}},
        {"functionCall": {"name": "g", "args": {}}},
    ]
    assert [c["id"] for c in result.function_calls] == [None, None]


def test_c8_different_later_name_warned_first_kept(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk(fc(id="c1", name="first", willContinue=True)),
        chunk(fc(id="c1", name="second", willContinue=True)),
        chunk(fc(id="c1", name="first", willContinue=False)),
    )
    assert result.parts == [{"functionCall": {"id": "c1", "name": "first", "args": {}}}]
    assert result.warnings == [
        'candidate 0, part 0: a later chunk named the call "second" but it is named "first"; the first name was kept'
    ]


def test_c11_function_calls_in_part_order(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk(fc(name="s", id="1", willContinue=True)),
        chunk(fc(name="c", args={"x": [1]}), {"text": "t"}),
        chunk(fc(id="1", partialArgs=[pa("$.y", numberValue=2)])),
    )
    assert as_json(result.function_calls) == as_json(
        [
            {"id": "1", "name": "s", "args": {"y": 2}},
            {"id": None, "name": "c", "args": {"x": [1]}},
        ]
    )


def test_c12_close_closes_open_calls_in_slot_order_per_candidate(
    impl: ModuleType,
) -> None:
    result, _ = run_chunks(
        impl,
        chunk(fc(partialArgs=[pa("$.b", numberValue=1)], willContinue=True), index=1),
        chunk(
            fc(id="y", partialArgs=[pa("$.a", numberValue=1)], willContinue=True),
            index=0,
        ),
        chunk(
            fc(id="x", partialArgs=[pa("$.a", numberValue=2)], willContinue=True),
            index=0,
        ),
        chunk(fc(name="named", willContinue=True), index=0),
    )
    assert result.warnings == [
        'candidate 0, part 0: a streamed function call with id "y" never received a name and was left out; its args: {"a":1}',
        'candidate 0, part 1: a streamed function call with id "x" never received a name and was left out; its args: {"a":2}',
        'candidate 1, part 0: a streamed function call never received a name and was left out; its args: {"b":1}',
    ]
    assert result.parts == [{"functionCall": {"name": "named", "args": {}}}]


def test_c12_snapshot_leaves_nameless_open_calls_out_silently(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed(
        sse(
            chunk(
                fc(partialArgs=[pa("$.a", numberValue=1)], willContinue=True),
                {"text": "x"},
            )
        )
    )
    snap = agg.snapshot()
    assert snap.parts == [{"text": "x"}]
    assert snap.warnings == []
    assert agg.close().warnings == [
        'candidate 0, part 0: a streamed function call never received a name and was left out; its args: {"a":1}'
    ]


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


CUT = {"id": "c1", "name": "get_weather", "args": {"city": "Paris, Ile-de-F"}, "part": 1}


def test_c13_call_flushed_at_close_is_listed_as_unfinished(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    deltas = agg.feed(sse(opening(), FRAGMENT))
    snap = agg.snapshot()
    assert (snap.unfinished_calls, snap.function_calls) == ([CUT], [])  # still open
    assert agg.finish() == []  # flushed: no CallEnd (D5)
    result = agg.close()
    # Flushed so nothing is lost (its signature stays), but never ended by the model:
    # no CallEnd delta, never among the calls to run, and the result says so.
    assert [type(d).__name__ for d in deltas] == ["TextDelta", "CallStart", "ArgDelta"]
    assert result.unfinished_calls == [CUT]
    assert result.candidates[0].unfinished_calls == [CUT]
    assert result.parts[1] == {
        "functionCall": {"id": "c1", "name": "get_weather", "args": {"city": "Paris, Ile-de-F"}},
        "thoughtSignature": SIG,
    }
    assert result.function_calls == []
    assert result.candidates[0].function_calls == []
    assert result.warnings == []


def test_c13_unfinished_calls_are_built_once_their_args_the_dict_of_the_part(
    impl: ModuleType,
) -> None:
    agg = impl.StreamAggregator()
    agg.feed(sse(opening(), FRAGMENT))
    result = agg.close()
    assert result.unfinished_calls is result.unfinished_calls
    assert result.unfinished_calls is result.candidates[0].unfinished_calls
    (cut,) = result.unfinished_calls
    assert cut["args"] is result.parts[1]["functionCall"]["args"]


def test_c13_a_finished_call_beside_a_cut_off_one_is_the_only_call_to_run(
    impl: ModuleType,
) -> None:
    body = "Your refund of 40 EUR was "
    result, deltas = run_chunks(
        impl,
        chunk(fc(id="a", name="lookup", args={"q": "x"})),
        chunk(fc(id="b", name="send_email", willContinue=True)),
        chunk(fc(id="b", willContinue=True, partialArgs=[pa("$.body", stringValue=body)])),
    )
    assert result.function_calls == [{"id": "a", "name": "lookup", "args": {"q": "x"}}]
    assert result.unfinished_calls == [
        {"id": "b", "name": "send_email", "args": {"body": body}, "part": 1}
    ]
    assert [d.call["id"] for d in deltas if isinstance(d, impl.CallEnd)] == ["a"]


def test_c13_only_the_open_call_of_several_is_unfinished(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk(fc(id="a", name="f", willContinue=True)),
        chunk(fc(id="a")),
        chunk(fc(id="b", name="g", willContinue=True)),
        chunk(fc(id="c", name="h", args={})),
    )
    assert [c["id"] for c in result.function_calls] == ["a", "c"]
    assert result.unfinished_calls == [{"id": "b", "name": "g", "args": {}, "part": 1}]


def test_c13_unfinished_calls_per_candidate(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk(fc(name="f", args={}), index=0),
        chunk(fc(name="g", willContinue=True), index=1),
    )
    assert result.unfinished_calls == []
    assert [c.unfinished_calls for c in result.candidates] == [
        [],
        [{"id": None, "name": "g", "args": {}, "part": 0}],
    ]
    assert [c.function_calls for c in result.candidates] == [
        [{"id": None, "name": "f", "args": {}}],
        [],
    ]


def test_c13_nameless_flushed_call_is_left_out_not_listed(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl, chunk(fc(partialArgs=[pa("$.x", numberValue=1)], willContinue=True))
    )
    assert result.parts == []
    assert result.unfinished_calls == []


def interleaved(n: int) -> list[bytes]:
    """``n`` streamed calls opened one after another, then each given its argument in
    turn, then each closed: every call stays open until its own end marker."""
    opening = [chunk(fc(id=f"c{i}", name="f", willContinue=True)) for i in range(n)]
    fragments = [
        chunk(fc(id=f"c{i}", willContinue=True, partialArgs=[pa("$.n", numberValue=i)]))
        for i in range(n)
    ]
    ends = [chunk(fc(id=f"c{i}")) for i in range(n)]
    return [*opening, *fragments, *ends, chunk(finish="STOP")]


def test_c14_65_and_200_open_streamed_calls_each_keep_their_arguments(
    impl: ModuleType,
) -> None:
    for n in (64, 65, 200):
        result, deltas = run_chunks(impl, *interleaved(n))
        assert result.function_calls == [
            {"id": f"c{i}", "name": "f", "args": {"n": i}} for i in range(n)
        ], n
        assert (result.unfinished_calls, result.warnings) == ([], []), n
        ends = [(d.index, d.call["args"]) for d in deltas if isinstance(d, impl.CallEnd)]
        assert ends == [(i, {"n": i}) for i in range(n)], n


def test_c14_a_call_stays_open_however_many_open_after_it(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed(sse(chunk(fc(id="first", name="f", willContinue=True))))
    agg.feed(sse(*[chunk(fc(id=f"c{i}", name="g", willContinue=True)) for i in range(100)]))
    agg.feed(sse(chunk(fc(id="first", partialArgs=[pa("$.late", stringValue="x")]))))
    result = agg.close()
    assert result.function_calls == [{"id": "first", "name": "f", "args": {"late": "x"}}]
    assert [c["part"] for c in result.unfinished_calls] == list(range(1, 101))
    assert result.warnings == []


def test_c17_ten_thousand_interleaved_streamed_calls_keep_their_own_arguments(
    impl: ModuleType,
) -> None:
    n = 10_000
    agg = impl.StreamAggregator()
    agg.feed(sse_body(interleaved(n)))  # sse() joins quadratically: 30 001 events here
    result = agg.close()
    calls = result.function_calls
    assert len(calls) == n
    assert all(
        call == {"id": f"c{i}", "name": "f", "args": {"n": i}} for i, call in enumerate(calls)
    )
    assert (result.unfinished_calls, result.warnings) == ([], [])


def test_c17_id_less_fragments_search_the_64_most_recent_calls_for_their_path(
    impl: ModuleType,
) -> None:
    # 70 named calls without ids, each holding its own key; then id-less fragments.
    opening = [
        chunk(fc(name=f"f{i}", willContinue=True, partialArgs=[pa(f"$.k{i}", stringValue="a")]))
        for i in range(70)
    ]
    recent = chunk(fc(willContinue=True, partialArgs=[pa("$.k6", stringValue="b")]))
    old = chunk(fc(willContinue=True, partialArgs=[pa("$.k0", stringValue="c")]))
    result, _ = run_chunks(impl, *opening, recent, old)
    args = {c["name"]: c["args"] for c in result.unfinished_calls}
    # f6-f69 are the 64 most recently updated: f6 holds $.k6 and takes the fragment.
    # Then f6, f7-f69 are: none holds $.k0 (f0 is older), so the fragment goes to the
    # most recently updated call, f6, as C2.3 routes a fragment no call holds.
    assert args["f6"] == {"k6": "ab", "k0": "c"}
    assert args["f0"] == {"k0": "a"}
    assert len(args) == 70


def test_c15_complete_call_without_a_name_is_left_out_with_a_warning(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl,
        chunk({"text": "a"}, fc(args={"q": 1}), fc(id="x", name=7, args={"k": [1.5]})),
        chunk(fc(name="ok", args={})),
    )
    assert result.warnings == [
        'event 0: candidates[0].content.parts[1] is a function call without a name; it was left out (its args: {"q":1})',
        'event 0: candidates[0].content.parts[2] is a function call with id "x" without a name; it was left out (its args: {"k":[1.5]})',
    ]
    assert result.function_calls == [{"id": None, "name": "ok", "args": {}}]
    assert result.parts == [{"text": "a"}, {"functionCall": {"name": "ok", "args": {}}}]
    assert [type(d).__name__ for d in deltas] == ["TextDelta", "CallStart", "CallEnd"]
