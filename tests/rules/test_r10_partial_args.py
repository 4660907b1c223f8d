"""R10: `partialArgs` items are read field by field, with the meaning a
parsed object has (C4, C5, C9): the value keys by their fixed precedence, the
last entry of a repeated key, other keys skipped, every wrong type warned.

Both implementations, and both ways in: the payload's bytes (the scan) and
`feed_chunk()` of a dict (the tree path).
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest


def body(call: bytes) -> bytes:
    return (
        b'data: {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": '
        + call
        + b"}]}}]}\r\n\r\n"
    )


def calls_and_warnings(impl: ModuleType, call: bytes) -> tuple[Any, list[str]]:
    """The calls the result holds, finished or not (the ones here stay open: C13), and
    the warnings."""
    agg = impl.StreamAggregator()
    agg.feed(body(call))
    result = agg.close()
    held = [
        {"id": c["id"], "name": c["name"], "args": c["args"]}
        for c in [*result.function_calls, *result.unfinished_calls]
    ]
    return held, list(result.warnings)


def f(args: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"id": None, "name": "f", "args": args}]


def test_r10_string_value_wins_over_bool_value_whatever_their_order(impl: ModuleType) -> None:
    call = (
        b'{"name": "f", "partialArgs": [{"boolValue": true, "jsonPath": "$.a", '
        b'"stringValue": "x"}], "willContinue": true}'
    )
    assert calls_and_warnings(impl, call) == (f({"a": "x"}), [])


def test_r10_a_repeated_key_keeps_its_last_value(impl: ModuleType) -> None:
    call = (
        b'{"name": "f", "partialArgs": [{"jsonPath": "$.a", "jsonPath": "$.b", '
        b'"numberValue": 1, "numberValue": 2}], "willContinue": true}'
    )
    assert calls_and_warnings(impl, call) == (f({"b": 2}), [])


def test_r10_other_keys_are_skipped_however_deep(impl: ModuleType) -> None:
    call = (
        b'{"name": "f", "partialArgs": [{"jsonPath": "$.a", "extra": {"deep": [1, {"x": null}]}, '
        b'"numberValue": -0}], "willContinue": true}'
    )
    assert calls_and_warnings(impl, call) == (f({"a": 0}), [])


BAD_ITEMS: list[Any] = [
    {"jsonPath": 5, "stringValue": "x"},
    {"jsonPath": "$.b", "stringValue": None},
    {"jsonPath": "$.c", "numberValue": "1"},
    {"jsonPath": "$.d", "boolValue": 1},
    {"stringValue": "y"},
    {"jsonPath": "$.e", "nullValue": "NULL_VALUE"},
    7,
]
BAD_WARNINGS = [
    "candidate 0, part 0: partial arg at <not a string> skipped: unsupported jsonPath syntax",
    'candidate 0, part 0: partial arg at "$.b" skipped: stringValue is not a string',
    'candidate 0, part 0: partial arg at "$.c" skipped: numberValue is not a number',
    'candidate 0, part 0: partial arg at "$.d" skipped: boolValue is not a boolean',
    "candidate 0, part 0: partial arg at <missing> skipped: unsupported jsonPath syntax",
    "event 0: candidates[0].content.parts[0].functionCall.partialArgs[6] is not an object; ignored",
]


def test_r10_every_wrong_type_is_warned_and_null_value_writes_null(impl: ModuleType) -> None:
    call = {"name": "f", "partialArgs": BAD_ITEMS, "willContinue": True}
    got = calls_and_warnings(impl, json.dumps(call).encode())
    assert got == (f({"e": None}), BAD_WARNINGS)


@pytest.mark.parametrize("way", ["bytes", "feed_chunk"])
def test_r10_the_tree_path_reads_what_the_scan_reads(impl: ModuleType, way: str) -> None:
    event = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {
                            "functionCall": {
                                "name": "f",
                                "partialArgs": BAD_ITEMS,
                                "willContinue": True,
                            }
                        }
                    ],
                }
            }
        ]
    }
    agg = impl.StreamAggregator()
    if way == "bytes":
        agg.feed(b"data: " + json.dumps(event).encode() + b"\r\n\r\n")
    else:
        agg.feed_chunk(event)
    result = agg.close()
    unfinished = [{**f({"e": None})[0], "part": 0}]  # still open at close (C13)
    assert (result.unfinished_calls, list(result.warnings)) == (unfinished, BAD_WARNINGS)
