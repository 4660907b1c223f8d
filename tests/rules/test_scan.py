"""The payload scan (R8) and parts kept as JSON text (R7), on both implementations.

The Rust core reads a payload in one strict scan and keeps each complete part as
its JSON text; the twin parses with orjson. What a user reads must not differ by
a type, a sign or a key order.
"""

from __future__ import annotations

from types import ModuleType

import orjson
import pytest

from fastagg import _fastagg


def _parts_of(impl: ModuleType, part_json: bytes) -> list[object]:
    body = b'[{"candidates":[{"content":{"parts":[' + part_json + b"]}}]}]"
    agg = impl.StreamAggregator()
    agg.feed(body)
    parts: list[object] = agg.close().parts
    return parts


def _typed(value: object) -> object:
    """A value with every number's type and a float's sign made visible."""
    if isinstance(value, dict):
        return [(k, _typed(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


def test_r8_minus_zero_integer_is_the_int_zero(impl: ModuleType) -> None:
    # orjson reads `-0` as the int 0; the Rust core once gave the float -0.0.
    parts = _parts_of(impl, b'{"x": -0, "y": -0.0}')
    assert _typed(parts) == [[("x", ("int", 0)), ("y", ("float", "-0.0"))]]


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (b"18446744073709551615", ("int", 18446744073709551615)),
        (b"-9223372036854775808", ("int", -9223372036854775808)),
        (b"18446744073709551616", ("float", "1.8446744073709552e+19")),
        (b"1E2", ("float", "100.0")),
        (b"1.5e-400", ("float", "0.0")),
    ],
)
def test_r8_numbers_read_as_orjson_reads_them(
    impl: ModuleType, number: bytes, expected: tuple[str, object]
) -> None:
    parts = _parts_of(impl, b'{"functionCall": {"name": "f", "args": {"n": ' + number + b"}}}")
    assert _typed(parts) == [
        [("functionCall", [("name", ("str", "f")), ("args", [("n", expected)])])]
    ]


def test_r7_kept_part_is_what_arrived(impl: ModuleType) -> None:
    # Whitespace, escapes, a repeated key (first position, last value), nesting.
    text = (
        b'{ "thoughtSignature" : "c2ln\\u00e9" , "functionCall": {"id": "c1", "name": "f",'
        b' "args": {"b": [1, 2.5, {"\\ud83d\\ude00": null}], "a": true, "b": "last"}}, "z": {}}'
    )
    parts = _parts_of(impl, text)
    assert parts == [orjson.loads(text)]
    assert _typed(parts) == _typed([orjson.loads(text)])
    fc = parts[0]["functionCall"]  # type: ignore[index]
    assert list(fc["args"]) == ["b", "a"]


def test_r7_function_calls_share_the_kept_parts_args() -> None:
    # The Rust binding builds each kept part once; `function_calls` reads its args object.
    body = (
        b'[{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"q":[1]}}}]}}]}]'
    )
    agg = _fastagg.StreamAggregator()
    agg.feed(body)
    result = agg.close()
    assert result.function_calls == [{"id": None, "name": "f", "args": {"q": [1]}}]
    assert result.function_calls[0]["args"] is result.parts[0]["functionCall"]["args"]


@pytest.mark.parametrize(
    "bad",
    [b'{"x": "\\ud800"}', b'{"x": 1e400}', b'{"x": [1,]}', b'{"x": 01}', b'{"x": "a\tb"}'],
)
def test_r8_a_bad_value_inside_a_kept_part_skips_the_event(impl: ModuleType, bad: bytes) -> None:
    body = b'[{"candidates":[{"content":{"parts":[' + bad + b"]}}]}]"
    agg = impl.StreamAggregator(strict=False)
    agg.feed(body)
    result = agg.close()
    assert result.parts == []
    assert [d.code for d in result.diagnostics] == ["invalid_json"]


def test_r8_interactions_events_read_minus_zero_as_the_int_zero(impl: ModuleType) -> None:
    # The Interactions events were read by serde_json, which made `-0` the float -0.0.
    agg = impl.StreamAggregator(api="interactions")
    agg.feed(
        b'event: step.start\ndata: {"event_type":"step.start","index":0,"step":'
        b'{"type":"function_call","id":"c","name":"f","arguments":{"x":-0,"y":-0.0}}}\n\n'
        b'event: step.stop\ndata: {"event_type":"step.stop","index":0}\n\n'
    )
    calls = agg.close().function_calls
    assert _typed(calls) == [
        [
            ("id", ("str", "c")),
            ("name", ("str", "f")),
            ("args", [("x", ("int", 0)), ("y", ("float", "-0.0"))]),
        ]
    ]
