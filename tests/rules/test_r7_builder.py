"""R7 (binding): the JSON text builder gives exactly what ``orjson.loads`` gives.

``fastagg._fastagg._json_to_py`` is the builder's private hook; the values are
compared with ``typed()``, which sees key order, the type of every number and
the sign of a zero. ``_json_to_py_via_value`` is the path the builder replaces
(a ``serde_json::Value``, then its conversion).
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastagg._fastagg import _json_to_py, _json_to_py_via_value
from random_budget import examples


def typed(value: Any) -> Any:
    """``value`` as a tree that equal values share only when their JSON types,
    key orders, number types and float signs are the same."""
    if isinstance(value, dict):
        return ("dict", [(typed(k), typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


def same_as_orjson(text: str) -> None:
    assert typed(_json_to_py(text)) == typed(orjson.loads(text))


def test_r7_key_order_is_first_arrival_and_a_repeated_key_keeps_its_place_with_the_last_value() -> (
    None
):
    text = '{"b": 1, "a": {"y": 1, "x": 2, "y": 3}, "b": [2], "c": null}'
    built = _json_to_py(text)
    assert typed(built) == typed({"b": [2], "a": {"y": 3, "x": 2}, "c": None})
    assert list(built) == ["b", "a", "c"]
    same_as_orjson(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("-1", -1),
        ("18446744073709551615", 2**64 - 1),
        ("-9223372036854775808", -(2**63)),
        ("9223372036854775808", 2**63),
        ("18446744073709551616", 1.8446744073709552e19),
        ("-9223372036854775809", -9.223372036854776e18),
        ("123456789012345678901234567890", 1.2345678901234568e29),
    ],
)
def test_r7_integers_are_ints_within_64_bits_and_floats_beyond(text: str, value: Any) -> None:
    assert typed(_json_to_py(text)) == typed(value)
    same_as_orjson(text)


def test_r7_minus_zero_is_the_int_zero_and_minus_zero_point_zero_keeps_its_sign() -> None:
    assert typed(_json_to_py("[-0, -0.0, 0.0, -0e0, -1e-400]")) == typed([0, -0.0, 0.0, -0.0, -0.0])
    same_as_orjson("[-0, -0.0, 0.0, -0e0, -1e-400]")
    # The path it replaces reads -0 as -0.0 (serde_json); orjson and the twin read 0.
    assert typed(_json_to_py_via_value("-0")) == typed(-0.0)


@pytest.mark.parametrize(
    "text",
    [
        "0.1",
        "1.5",
        "1E5",
        "1e+5",
        "2.5e-3",
        "1.7976931348623157e308",
        "5e-324",
        "2.2250738585072011e-308",
        "0.30000000000000004",
        "9007199254740993.0",
        "1.00000000000000011102230246251565404236316680908203125",
        "123456789012345678901234567890e-10",
    ],
)
def test_r7_floats_are_correctly_rounded(text: str) -> None:
    assert typed(_json_to_py(text)) == typed(float(text))
    same_as_orjson(text)


@pytest.mark.parametrize("text", ["1e400", "-1e400", "1" + "0" * 400, "[1.5e309]"])
def test_r7_a_number_beyond_the_float_range_is_a_value_error(text: str) -> None:
    with pytest.raises(
        ValueError, match=r"^invalid JSON at byte \d+: a number beyond the float range$"
    ):
        _json_to_py(text)
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (r'"\" \\ \/ \b \f \n \r \t"', '" \\ / \b \f \n \r \t'),
        (r'"\u0000\u001f\u0041\u00e9\u4e2d"', "\x00\x1fAé中"),
        (r'"\ud83d\ude00 \uD834\uDD1E"', "😀 𝄞"),
        (r'"caf\u00e9 \"q\" 日本語"', 'café "q" 日本語'),
        ('"\x7f é 😀"', "\x7f é 😀"),
        (r'{"k\u00e9y\n": 1, "日本": 2}', {"kéy\n": 1, "日本": 2}),
    ],
)
def test_r7_strings_decode_every_escape(text: str, value: Any) -> None:
    assert typed(_json_to_py(text)) == typed(value)
    same_as_orjson(text)


@pytest.mark.parametrize(
    "text",
    [r'"\ud800"', r'"\udc00"', r'"\ud800\u0041"', r'"\ud800\\"', r'"a\ud83dx"', r'"\ude00\ud83d"'],
)
def test_r7_a_lone_surrogate_escape_is_a_value_error(text: str) -> None:
    with pytest.raises(
        ValueError, match=r"^invalid JSON at byte \d+: a lone (leading|trailing) surrogate"
    ):
        _json_to_py(text)
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('"a\\x"', "invalid JSON at byte 3: an invalid escape in a string"),
        ('"a\\', "invalid JSON at byte 3: a string is not closed"),
        ('"a\\u12"', "invalid JSON at byte 6: expected 4 hex digits in a \\u escape"),
        ('"a\\u12g4"', "invalid JSON at byte 6: expected 4 hex digits in a \\u escape"),
        ('"\\ud800"', "invalid JSON at byte 7: a lone leading surrogate in a \\u escape"),
        ('"\\ud800\\u0041"', "invalid JSON at byte 9: a lone leading surrogate in a \\u escape"),
        ('"\\udc00"', "invalid JSON at byte 3: a lone trailing surrogate in a \\u escape"),
        ('"ab\\n\x01"', "invalid JSON at byte 5: a control character in a string (escape it)"),
        ('"ab\\nc', "invalid JSON at byte 6: a string is not closed"),
        (
            '"' + "x" * 40 + "\\n" + "y" * 20 + '\\z"',
            "invalid JSON at byte 64: an invalid escape in a string",
        ),
    ],
)
def test_r7_a_bad_string_is_named_at_its_byte(text: str, message: str) -> None:
    # The builder decodes escapes with the payload scan's own decoder (scan::decode);
    # its errors name the byte and the fault as the builder's own decoder did.
    with pytest.raises(ValueError) as caught:
        _json_to_py(text)
    assert str(caught.value) == message


_PIECES = {
    "ascii": "abc xyz ",
    "latin1": "café ",
    "bmp": "日本 ",
    "astral": "😀 ",
    # Mostly ASCII around a wide character: the str maker's block-at-a-time path.
    "bmp-sparse": "the ∑ of a 日 plus ",
    "astral-sparse": "an emoji 😀 in some text ",
    "escapes": 'a"b\\c\n',
}


@pytest.mark.parametrize("kind", sorted(_PIECES))
@pytest.mark.parametrize("length", [1, 15, 16, 17, 31, 33, 511, 512, 513, 5000])
def test_r7_strings_of_every_kind_and_length_equal_orjson(kind: str, length: int) -> None:
    # Around the scanner's 16-byte blocks and the 512 bytes from which the
    # builder hands non-ASCII text to Python's decoder.
    piece = _PIECES[kind]
    value = (piece * (length // len(piece) + 1))[:length]
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False)):
        assert _json_to_py(text) == value
        same_as_orjson(text)
        same_as_orjson(f'{{"{kind}": {text}, "tail": 1}}')


def test_r7_keys_of_every_length_stay_apart_across_builds() -> None:
    # Keys that share a prefix, differ in one byte or only in length: the key
    # cache keeps up to 16 bytes and must never hand one key for another.
    keys = ["", "a", "ab", "a" * 8, "a" * 7 + "b", "a" * 15, "a" * 16, "a" * 17, "a" * 15 + "b"]
    keys += ["functionCall", "thoughtSignature", "thoughtSignaturf", "x" * 40]
    text = json.dumps({k: i for i, k in enumerate(keys)})
    for _ in range(3):
        built = _json_to_py(text)
        assert list(built.items()) == [(k, i) for i, k in enumerate(keys)]
    shuffled = json.dumps({k: i for i, k in reversed(list(enumerate(keys)))})
    assert list(_json_to_py(shuffled)) == list(reversed(keys))


def test_r7_short_ascii_values_come_from_the_string_cache_as_keys_do() -> None:
    # A repeated short ASCII value (a function's name, an operator) is one
    # `str` across members, parts and builds, and the same object as an equal
    # key; a longer, non-ASCII or escaped one is made fresh.
    text = json.dumps(
        {
            "op": "eq",
            "filters": [{"op": "eq"}, {"op": "ne"}],
            "name": "search_code_16by",
            "long": ["a" * 17, "a" * 17],
            "wide": ["é", "é"],
        }
    )
    built = _json_to_py(text)
    again = _json_to_py(text)
    assert built == orjson.loads(text)
    (op_key, op), (_, filters), (_, name), (_, long), (_, wide) = built.items()
    assert filters[0]["op"] is op and again["op"] is op
    assert next(iter(filters[0])) is op_key
    assert _json_to_py('{"eq": 1}').popitem()[0] is op
    assert filters[1]["op"] == "ne"
    assert again["name"] is name and len(name) == 16
    assert long[0] == long[1] and long[0] is not long[1]
    assert wide[0] == wide[1] and wide[0] is not wide[1]
    escaped = _json_to_py('["e\\u0071", "eq"]')
    assert escaped == ["eq", "eq"] and escaped[0] is not op and escaped[1] is op


def test_r7_values_of_every_length_stay_apart_across_builds() -> None:
    values = ["", "a", "ab", "a" * 8, "a" * 7 + "b", "a" * 15, "a" * 16, "a" * 17, "a" * 15 + "b"]
    values += ["functionCall", "thoughtSignature", "thoughtSignaturf", "x" * 40]
    for _ in range(3):
        assert _json_to_py(json.dumps(values)) == values
        assert _json_to_py(json.dumps(values[::-1])) == values[::-1]


def test_r7_whitespace_and_top_level_scalars_equal_orjson() -> None:
    for text in (
        ' \t\n\r{ "a" : [ 1 , 2 ] , "b" :\ttrue }\r\n',
        "true",
        "false",
        "null",
        ' "s" ',
        "[]",
        "{}",
    ):
        same_as_orjson(text)


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=("Cs",)))
)
_VALUES = st.recursive(
    _SCALARS,
    lambda children: (
        st.lists(children, max_size=6)
        | st.dictionaries(
            st.text(st.characters(exclude_categories=("Cs",)), max_size=20), children, max_size=6
        )
    ),
    max_leaves=40,
)
_DUMPS: dict[str, Callable[[Any], str]] = {
    "orjson": lambda v: orjson.dumps(v).decode(),
    "ascii": lambda v: json.dumps(v, ensure_ascii=True),
    "indented": lambda v: json.dumps(v, ensure_ascii=False, indent=2),
    "gemini": lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ": ")),
}


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_VALUES, st.sampled_from(sorted(_DUMPS)))
def test_r7_any_json_text_builds_what_orjson_loads(value: Any, style: str) -> None:
    text = _DUMPS[style](value)
    assert typed(_json_to_py(text)) == typed(orjson.loads(text))


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_VALUES, st.sampled_from(sorted(_DUMPS)))
def test_r7_any_json_text_builds_what_the_value_path_converts(value: Any, style: str) -> None:
    # Serialisers never write -0, the one text the two read apart.
    text = _DUMPS[style](value)
    assert typed(_json_to_py(text)) == typed(_json_to_py_via_value(text))


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_VALUES, st.data())
def test_r7_a_damaged_text_builds_what_orjson_loads_or_is_a_value_error(
    value: Any, data: st.DataObject
) -> None:
    # One character of a valid text replaced, deleted or inserted: mostly
    # invalid, always read the way orjson reads it, never a crash.
    text = json.dumps(value, ensure_ascii=data.draw(st.booleans()))
    at = data.draw(st.integers(0, len(text)))
    new = data.draw(st.sampled_from([*'{}[]",:\\ 0-1.eEtfnu', "\x00", "é", "😀"]))
    cut = data.draw(st.sampled_from([0, 1]))
    text = text[:at] + new + text[at + cut :]
    try:
        expected = typed(orjson.loads(text))
    except orjson.JSONDecodeError:
        with pytest.raises(ValueError, match=r"^invalid JSON at byte \d+: "):
            _json_to_py(text)
    else:
        assert typed(_json_to_py(text)) == expected


_DEEP_WORKER = """
import threading
from fastagg._fastagg import _json_to_py
out = []

def work():
    value = _json_to_py('{"a":' * 512 + "[" * 512 + "1" + "]" * 512 + "}" * 512)
    depth = 0
    while not isinstance(value, int):
        value = value["a"] if isinstance(value, dict) else value[0]
        depth += 1
    out.append(depth)

threading.stack_size(256 * 1024)
t = threading.Thread(target=work)
t.start()
t.join()
print(out)
"""


def test_r7_1024_levels_build_in_a_thread_with_a_256_kib_stack() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _DEEP_WORKER], capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout.strip()) == (0, "[1024]"), done.stderr[-2000:]


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_r7_1025_levels_are_a_value_error(opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    text = opener * 1025 + "1" + closer * 1025
    with pytest.raises(
        ValueError, match=r"^invalid JSON at byte \d+: nested deeper than 1024 levels$"
    ):
        _json_to_py(text)
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "invalid JSON at byte 0: expected a value, found the end of the text"),
        ("[1,]", "invalid JSON at byte 3: expected a value"),
        ('{"a":1,}', "invalid JSON at byte 7: expected a key (a string)"),
        ('{"a" 1}', "invalid JSON at byte 5: expected `:` after a key"),
        ("[1 2]", "invalid JSON at byte 3: expected `,` or `]` after an array item"),
        ('{"a":1 "b":2}', "invalid JSON at byte 7: expected `,` or `}` after an object member"),
        ("01", "invalid JSON at byte 1: a number has a leading zero"),
        ("1.", "invalid JSON at byte 2: expected a digit after `.`"),
        ("1e+", "invalid JSON at byte 3: expected a digit in the exponent"),
        ("-", "invalid JSON at byte 1: expected a digit"),
        (".5", "invalid JSON at byte 0: expected a value"),
        ("tru", "invalid JSON at byte 0: expected `true`"),
        ("NaN", "invalid JSON at byte 0: expected a value"),
        ('"abc', "invalid JSON at byte 4: a string is not closed"),
        ('"ab\\', "invalid JSON at byte 4: a string is not closed"),
        ('"a\x01"', "invalid JSON at byte 2: a control character in a string (escape it)"),
        ('"\\x"', "invalid JSON at byte 2: an invalid escape in a string"),
        ('"\\u12G4"', "invalid JSON at byte 5: expected 4 hex digits in a \\u escape"),
        ("[] []", "invalid JSON at byte 3: unexpected text after the value"),
        ("// c\n1", "invalid JSON at byte 0: expected a value"),
    ],
)
def test_r7_malformed_text_is_a_value_error_naming_the_byte(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        _json_to_py(text)
    assert (type(info.value), str(info.value)) == (ValueError, message)
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(text)


_BUILT_WHEN_COLLECTED: list[Any] = []


class _BuildsWhenCollected:
    """Part of a reference cycle: the garbage collector runs ``__del__``, which
    builds a value, in the middle of whatever allocation triggered it."""

    def __init__(self) -> None:
        self.cycle = self

    def __del__(self) -> None:
        _BUILT_WHEN_COLLECTED.append(_json_to_py('{"inner": ["x", {"k": 1}]}'))


def test_r7_a_build_inside_a_build_goes_without_the_shared_cache() -> None:
    text = json.dumps({"outer": [{"k": i, "v": [i, str(i)]} for i in range(50)]})
    threshold = gc.get_threshold()
    gc.collect()
    _BUILT_WHEN_COLLECTED.clear()
    try:
        _BuildsWhenCollected()
        gc.set_threshold(1)  # the builder's first dict allocation collects the cycle
        outer = _json_to_py(text)
    finally:
        gc.set_threshold(*threshold)
    assert _BUILT_WHEN_COLLECTED == [{"inner": ["x", {"k": 1}]}]
    assert typed(outer) == typed(orjson.loads(text))
