"""R9: the `CallEnd` of a complete call shares its part's text (no copy of
the arguments); its `call` is built from that text on first read (R2).

Both implementations through the ``impl`` fixture: the values must not depend
on the way the Rust binding builds them.
"""

from __future__ import annotations

from types import ModuleType

# Written by hand so that the text holds what a tree would not keep as it
# came: an escape, a repeated key, a `-0` and a number in exponent form.
BODY = (
    b'data: {"candidates": [{"content": {"role": "model", "parts": ['
    b'{"functionCall": {"id": "c1", "name": "f", "args": '
    b'{"q": "caf\\u00e9 \\"x\\"", "k": 1, "n": [-0, 1e2], "k": 2}}, "thoughtSignature": "c2ln"},'
    b'{"functionCall": {"name": "g"}}'
    b"]}}]}\r\n\r\n"
)


def call_ends(impl: ModuleType) -> tuple[list[object], object]:
    agg = impl.StreamAggregator(deltas=True)
    ends = [d for d in agg.feed(BODY) if isinstance(d, impl.CallEnd)]
    return ends, agg.close()


def test_r9_call_end_of_a_complete_call_is_built_from_its_part_text(impl: ModuleType) -> None:
    ends, _ = call_ends(impl)
    assert [(e.candidate, e.index, e.call) for e in ends] == [
        (0, 0, {"id": "c1", "name": "f", "args": {"q": 'café "x"', "k": 2, "n": [0, 100.0]}}),
        (0, 1, {"id": None, "name": "g", "args": {}}),
    ]
    # The key order of the text: a repeated key keeps its first place.
    assert list(ends[0].call["args"]) == ["q", "k", "n"]
    assert type(ends[0].call["args"]["n"][0]) is int


def test_r9_call_end_call_is_the_same_object_on_every_read(impl: ModuleType) -> None:
    ends, _ = call_ends(impl)
    assert ends[0].call is ends[0].call


def test_r9_call_end_and_the_result_agree_on_the_arguments(impl: ModuleType) -> None:
    ends, result = call_ends(impl)
    assert [e.call for e in ends] == result.function_calls
