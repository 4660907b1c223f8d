"""Partial args (C4, C5, C9, C16): jsonPath forms, writes, padding, depth.

Every test runs against both implementations through the ``impl`` fixture
(the Rust module ``fastagg._fastagg`` and the pure-Python ``fastagg.reference``)
and uses only the public API.
"""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from streams import as_json, c16, chunk, fc, pa, run_chunks, sse


def test_c4_args_object_sets_top_level_keys(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk(fc(name="f", args={"a": "x", "b": {"c": 1}}, willContinue=True)),
        chunk(fc(partialArgs=[pa("$.a", stringValue="y")], willContinue=True)),
        chunk(fc(args={"b": 2, "z": None}, partialArgs=[pa("$.a", stringValue="z")])),
    )
    assert as_json(result.function_calls[0]["args"]) == as_json({"a": "xyz", "b": 2, "z": None})


def test_c4_arrays_padding_nesting_and_replacement(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl,
        chunk(
            fc(
                name="put",
                args={"keep": {"a": 1}, "n": None, "s": 5},
                partialArgs=[
                    pa("$.items[2].tags[1]", stringValue="t"),
                    pa("$.n.deep", numberValue=3.0),  # null in the way: created
                    pa("$.s", stringValue="text"),  # a string replaces the number
                    pa("$.s", stringValue="+"),
                    pa("$['keep']['b']", nullValue=None),
                    pa("$.flag", boolValue=False),
                    pa("$.flag", numberValue=7),
                    pa("$.e", stringValue=""),
                    pa("$.novalue", willContinue=True),
                ],
            )
        ),
    )
    args = {
        "keep": {"a": 1, "b": None},
        "n": {"deep": 3.0},
        "s": "text+",
        "items": [None, None, {"tags": [None, "t"]}],
        "flag": 7,
        "e": "",
    }
    assert as_json(result.parts) == as_json([{"functionCall": {"name": "put", "args": args}}])
    assert deltas == [
        impl.CallStart(0, 0, None, "put"),
        impl.ArgDelta(0, 0, "$.items[2].tags[1]", "t"),
        impl.ArgDelta(0, 0, "$.n.deep", 3.0),
        impl.ArgDelta(0, 0, "$.s", "text"),
        impl.ArgDelta(0, 0, "$.s", "+"),
        impl.ArgDelta(0, 0, "$['keep']['b']", None),
        impl.ArgDelta(0, 0, "$.flag", False),
        impl.ArgDelta(0, 0, "$.flag", 7),
        impl.ArgDelta(0, 0, "$.e", ""),
        impl.CallEnd(0, 0, {"id": None, "name": "put", "args": args}),
    ]
    assert isinstance(deltas[2].value, float)


def test_c4_null_value_key_presence_whatever_its_value(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk(
            fc(
                name="f",
                args={"a": 1, "b": 2},
                partialArgs=[
                    pa("$.a", nullValue="NULL_VALUE"),
                    pa("$.b", nullValue=None),
                ],
            )
        ),
    )
    assert as_json(result.function_calls[0]["args"]) == as_json({"a": None, "b": None})


def test_c4_type_conflicts_skipped_with_warning(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk(
            fc(
                name="f",
                willContinue=True,
                args={"s": "str", "o": {"k": 1}, "l": [1]},
                partialArgs=[
                    pa("$.s.x", stringValue="a"),
                    pa("$.o[0]", numberValue=1),
                    pa("$.l.k", numberValue=1),
                    pa("$.l[0].k", numberValue=1),
                    pa("$[0]", numberValue=1),
                ],
            )
        ),
    )
    assert result.warnings == [
        'candidate 0, part 0: partial arg at "$.s.x" skipped: type conflict with the existing value',
        'candidate 0, part 0: partial arg at "$.o[0]" skipped: type conflict with the existing value',
        'candidate 0, part 0: partial arg at "$.l.k" skipped: type conflict with the existing value',
        'candidate 0, part 0: partial arg at "$.l[0].k" skipped: type conflict with the existing value',
        'candidate 0, part 0: partial arg at "$[0]" skipped: type conflict with the existing value',
    ]
    # The call is still open (willContinue): an unfinished call, its args as received.
    assert as_json(result.unfinished_calls[0]["args"]) == as_json(
        {"s": "str", "o": {"k": 1}, "l": [1]}
    )


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("$..a", "unsupported jsonPath syntax"),
        ("$.a[]", "unsupported jsonPath syntax"),
        ("$.a[*]", "unsupported jsonPath syntax"),
        ("$[-1]", "unsupported jsonPath syntax"),
        ("$.a[01]", "unsupported jsonPath syntax"),
        ("$.a[ 1]", "unsupported jsonPath syntax"),
        ("$", "unsupported jsonPath syntax"),
        ("a.b", "unsupported jsonPath syntax"),
        ("$.a.", "unsupported jsonPath syntax"),
        ("$['a]", "unsupported jsonPath syntax"),
        ("$['a']x", "unsupported jsonPath syntax"),
        ("$['\\x']", "unsupported jsonPath syntax"),
        ("$['\\udc00']", "unsupported jsonPath syntax"),
        ("$.a[6]", "array index above max_array_index (5)"),
        ("$.a[99999999999999999999999]", "array index above max_array_index (5)"),
        ("$" + ".a" * 1025, "jsonPath deeper than 1024 segments"),
    ],
)
def test_c5_unsupported_path_skipped_with_warning(impl: ModuleType, path: str, reason: str) -> None:
    result, deltas = run_chunks(
        impl,
        chunk(
            fc(
                name="f",
                partialArgs=[pa(path, stringValue="v"), pa("$.ok", stringValue="w")],
            )
        ),
        max_array_index=5,
    )
    assert result.warnings == [
        f"candidate 0, part 0: partial arg at {json.dumps(path)} skipped: {reason}"
    ]
    assert result.function_calls == [{"id": None, "name": "f", "args": {"ok": "w"}}]
    assert impl.ArgDelta(0, 0, "$.ok", "w") in deltas


def test_c5_supported_path_forms(impl: ModuleType) -> None:
    deep = "$" + ".d" * 100
    result, _ = run_chunks(
        impl,
        chunk(
            fc(
                name="f",
                partialArgs=[
                    pa("$['odd key'][\"x.y\"]", numberValue=1),
                    pa("$['\\'q\\'\\u00e9\\ud83d\\ude00\\n']", numberValue=2),
                    pa("$.a b.c-d[0]", numberValue=3),
                    pa("$.l[5]", numberValue=4),
                    pa(deep, numberValue=5),
                ],
            )
        ),
        max_array_index=5,
    )
    args = result.function_calls[0]["args"]
    assert args["odd key"] == {"x.y": 1}
    assert args["'q'\u00e9\U0001f600\n"] == 2
    assert args["a b"] == {"c-d": [3]}
    assert args["l"] == [None, None, None, None, None, 4]
    node = args
    for _ in range(100):
        node = node["d"]
    assert node == 5
    assert result.warnings == []


def test_c5_missing_or_non_string_path_and_wrong_value_types(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk(
            fc(
                name="f",
                partialArgs=[
                    {"stringValue": "a"},
                    {"jsonPath": 3, "numberValue": 1},
                    pa("$.a", stringValue=1),
                    pa("$.a", numberValue=True),
                    pa("$.a", numberValue="1"),
                    pa("$.a", boolValue=0),
                    {"jsonPath": "$.ignored"},
                ],
            )
        ),
    )
    assert result.warnings == [
        "candidate 0, part 0: partial arg at <missing> skipped: unsupported jsonPath syntax",
        "candidate 0, part 0: partial arg at <not a string> skipped: unsupported jsonPath syntax",
        'candidate 0, part 0: partial arg at "$.a" skipped: stringValue is not a string',
        'candidate 0, part 0: partial arg at "$.a" skipped: numberValue is not a number',
        'candidate 0, part 0: partial arg at "$.a" skipped: numberValue is not a number',
        'candidate 0, part 0: partial arg at "$.a" skipped: boolValue is not a boolean',
    ]
    assert result.function_calls == [{"id": None, "name": "f", "args": {}}]


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
        f"candidate 0, part 0: partial arg at {json.dumps(deep + '.e')} skipped: "
        "jsonPath deeper than 1024 segments"
    ]
    assert impl.ArgDelta(0, 0, deep, "v") in deltas


def test_c16_abusive_padding_path_is_skipped_and_nothing_else_is_lost(impl: ModuleType) -> None:
    abusive = "$.k" + "[10000]" * 3
    result, deltas = run_chunks(
        impl,
        chunk(
            fc(
                name="f",
                willContinue=True,
                partialArgs=[pa("$.ok", stringValue="v"), pa(abusive, nullValue=None)],
            )
        ),
        chunk(
            fc(
                partialArgs=[
                    pa("$.list[8]", numberValue=1),
                    pa("$.list[17]", numberValue=2),
                    pa("$.list[27]", numberValue=3),
                    pa("$.ok", stringValue="w"),
                ]
            )
        ),
    )
    assert result.warnings == [
        f"candidate 0, part 0: partial arg at {json.dumps(abusive)} skipped: {c16(10000, 0)}",
        f'candidate 0, part 0: partial arg at "$.list[27]" skipped: {c16(27, 18)}',
    ]
    args = result.function_calls[0]["args"]
    assert args == {"ok": "vw", "list": [None] * 8 + [1] + [None] * 8 + [2]}
    assert [d.json_path for d in deltas if isinstance(d, impl.ArgDelta)] == [
        "$.ok",
        "$.list[8]",
        "$.list[17]",
        "$.ok",
    ]


def test_c16_memory_of_padding_is_linear_in_the_input(impl: ModuleType) -> None:
    # Partial args naming fresh deep array paths at the largest index allowed
    # (before C16, at index 10 000: 1 250 times more nulls).
    def args_size(n: int) -> tuple[int, int]:
        paths = [f"$.k{i}" + "[8]" * 20 for i in range(n)]
        body = sse(chunk(fc(name="f", partialArgs=[pa(p, numberValue=1) for p in paths])))
        agg = impl.StreamAggregator()
        agg.feed(body)
        result = agg.close()
        assert result.warnings == []
        return len(json.dumps(result.function_calls[0]["args"])), len(body)

    (small, _), (large, large_body) = args_size(500), args_size(1000)
    assert large < 2.05 * small
    assert large < 16 * large_body  # 9 values per 3-byte segment at most
