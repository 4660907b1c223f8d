"""D2a: the core reads a dict chunk of plain JSON types itself (no Python walk); whatever
the chunk holds, what feed_chunk() returns or raises is the reference's, which always
takes the shared Python conversion (fastagg._chunks.chunk_to_mapping)."""

from __future__ import annotations

import enum
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastagg
import fastagg.reference
from random_budget import examples


class Tag(str, enum.Enum):
    A = "a"


class Level(enum.IntEnum):
    LOW = 1


class Text(str):
    pass


def outcome(module: Any, chunk: Any) -> tuple[Any, ...]:
    """What feeding ``chunk`` to a fresh aggregator of ``module`` gives, comparable."""
    agg = module.StreamAggregator()
    try:
        deltas = agg.feed_chunk(chunk)
    except Exception as exc:
        return ("raised", type(exc).__name__, str(exc), agg.close().to_dict())
    return ("fed", [repr(d) for d in deltas], agg.close().to_dict())


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**63 - 1, -(2**63), 2**63, 2**64 - 1, 2**64, -(2**63) - 1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["\ud800", "a\udfffb", Text("sub"), Tag.A, Level.LOW, b"\x00\xff", (1, 2)]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(st.text(max_size=4), st.sampled_from([1, Text("k")])), inner, max_size=4
        ),
    ),
    max_leaves=20,
)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=values, args=values, extra=values)
def test_d2a_any_dict_chunk_gives_what_the_reference_gives(
    text: Any, args: Any, extra: Any
) -> None:
    chunk = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"text": text}, {"functionCall": {"name": "f", "args": args}}],
                },
                "finishReason": "STOP",
            }
        ],
        "extra": extra,
    }
    assert outcome(fastagg, chunk) == outcome(fastagg.reference, chunk)


@pytest.mark.parametrize("depth", [60, 63, 64, 65, 100, 990, 1023, 1024, 1025])
def test_d2a_a_deep_plain_chunk_gives_what_the_reference_gives(depth: int) -> None:
    # The core walks at most 64 levels itself; deeper chunks take the Python conversion,
    # whose depth and recursion-limit errors (D2c) are the reference's.
    nested: Any = "leaf"
    for _ in range(depth):
        nested = {"k": nested}
    chunk = {
        "candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": nested}}]}}]
    }
    assert outcome(fastagg, chunk) == outcome(fastagg.reference, chunk)


def test_d2a_plain_values_convert_as_the_reference_converts() -> None:
    args = {"i": 2**63, "u": 2**64 - 1, "big": 2**64, "neg": -(2**63) - 1, "f": -0.0, "s": "\u00e9"}
    chunk = {
        "candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": args}}]}}]
    }
    fed = outcome(fastagg, chunk)
    assert fed == outcome(fastagg.reference, chunk)
    call = fed[2]["candidates"][0]["content"]["parts"][0]["functionCall"]["args"]
    assert call == {
        "i": 2**63,
        "u": 2**64 - 1,
        "big": float(2**64),
        "neg": float(-(2**63) - 1),
        "f": -0.0,
        "s": "\u00e9",
    }
