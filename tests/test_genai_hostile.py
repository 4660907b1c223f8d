"""G1 and G4 under random input: ``to_genai()`` never raises, whatever a stream carried,
and ``feed_chunk()`` reads what it built as ``model_dump`` would.

Random responses put unknown keys, and values of the wrong type under known
keys, at every level the SDK models (response, candidate, content, part,
function call, usage, prompt feedback). Whatever the aggregate holds,
``to_genai()`` returns a ``GenerateContentResponse``, warns at most once
(``GenaiConversionWarning``), and the Rust core and the reference give the
same response and the same warning. G4: the SDK object ``to_genai()`` returns,
odd values and all, reads through ``chunk_to_mapping`` (the fields read
directly) exactly as through ``model_dump`` and D2a's conversion.
"""

from __future__ import annotations

import re
import warnings
from types import ModuleType
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastagg
import fastagg.reference
from fastagg._chunks import _GENAI_LOCAL_FIELDS, _plain, chunk_to_mapping
from random_budget import examples

types = pytest.importorskip("google.genai.types")
fastagg_genai = pytest.importorskip("fastagg.genai")

SDK_ENUM_WARNING = re.compile(r".* is not a valid [A-Za-z]+", re.S)
ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from(["a", "role", "text", "name"]), st.integers(0, 3), max_size=2),
)


def _with_noise(draw: Any, base: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """``base`` with some known keys given odd values and some unknown keys added."""
    out = dict(base)
    for key in draw(st.lists(st.sampled_from(keys), max_size=2, unique=True)):
        out[key] = draw(ODD)
    for key in draw(st.lists(st.sampled_from(["futureThing", "x_extra", "zz"]), max_size=2)):
        out[key] = draw(ODD)
    return out


@st.composite
def _part(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["text", "thought", "call", "response"]))
    if kind == "response":  # a list of enums, deep inside
        layers = draw(st.lists(st.one_of(ODD, st.sampled_from(["FOREGROUND", "x"])), max_size=2))
        inner = {"videoMetadata": {"contentLayers": layers}}
        base: dict[str, Any] = {"functionResponse": {"name": "f", "response": {}, "parts": [inner]}}
    elif kind == "call":
        call = _with_noise(
            draw, {"name": "f", "args": {"a": draw(ODD)}}, ["id", "name", "args", "willContinue"]
        )
        base = {"functionCall": call}
    else:
        base = {"text": draw(st.text(max_size=5))}
        if kind == "thought":
            base["thought"] = True
    if draw(st.booleans()):
        base["thoughtSignature"] = draw(st.sampled_from(["c2ln", "not base64!", ""]))
    return _with_noise(draw, base, ["text", "thought", "thoughtSignature", "functionCall"])


@st.composite
def _chunk(draw: Any) -> dict[str, Any]:
    content = _with_noise(
        draw, {"role": "model", "parts": draw(st.lists(_part(), max_size=3))}, ["role"]
    )
    candidate = _with_noise(
        draw,
        {"content": content, "index": 0},
        ["finishReason", "index", "safetyRatings", "citationMetadata", "finishMessage"],
    )
    usage = _with_noise(
        draw, {"promptTokenCount": 3}, ["promptTokenCount", "totalTokenCount", "thoughtsTokenCount"]
    )
    chunk: dict[str, Any] = {"candidates": [candidate], "usageMetadata": usage}
    if draw(st.booleans()):
        chunk["promptFeedback"] = _with_noise(draw, {}, ["blockReason", "safetyRatings"])
    return _with_noise(draw, chunk, ["modelVersion", "responseId", "createTime"])


def _convert(impl: ModuleType, chunks: list[dict[str, Any]]) -> tuple[Any, list[str]] | None:
    agg = impl.StreamAggregator()
    try:
        for chunk in chunks:
            agg.feed_chunk(chunk)
    except fastagg.FastaggError:
        return None  # refused by the aggregator: G1 speaks of what it holds
    result = agg.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        response = result.to_genai()
    assert isinstance(response, types.GenerateContentResponse)
    # The SDK keeps an enum string it does not know and says so itself ("X is not a
    # valid FinishReason"); every other warning is G1's one.
    ours = [w for w in caught if not SDK_ENUM_WARNING.fullmatch(str(w.message))]
    assert all(w.category is fastagg_genai.GenaiConversionWarning for w in ours), ours
    assert len(ours) <= 1, ours
    return response.model_dump(mode="json"), [str(w.message) for w in caught]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_chunk(), min_size=1, max_size=3))
def test_g1_to_genai_never_raises_on_random_responses_and_both_impls_agree(
    chunks: list[dict[str, Any]],
) -> None:
    rust = _convert(fastagg, chunks)
    reference = _convert(fastagg.reference, chunks)
    assert rust == reference


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_chunk(), min_size=1, max_size=3))
def test_g4_sdk_objects_built_from_random_responses_read_as_model_dump_reads_them(
    chunks: list[dict[str, Any]],
) -> None:
    agg = fastagg.StreamAggregator()
    try:
        for chunk in chunks:
            agg.feed_chunk(chunk)
    except fastagg.FastaggError:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        response = agg.close().to_genai()
        dumped = response.model_dump(by_alias=True, exclude_none=True, exclude=_GENAI_LOCAL_FIELDS)
        # bytes, not ==: key order and int-versus-float are part of "exactly"
        assert orjson.dumps(chunk_to_mapping(response)) == orjson.dumps(_plain(dumped, "$", 1))
