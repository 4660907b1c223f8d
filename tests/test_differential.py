"""Differential property tests: the Rust aggregator and the pure-Python
reference, fed the same random realistic streams under random byte splits,
give identical deltas, results, warnings and errors, and the same diagnostics
field by field (spec/diagnostics.md X3, X4); each is split-invariant (F7)."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastagg._fastagg as rust
import fastagg.reference as reference
from fastagg.errors import MalformedStreamError
from random_budget import examples
from streams import delta_tuple, error_view, result_view

EXAMPLES = examples(400)

IDS = st.sampled_from(["c1", "c2"])
NAMES = st.sampled_from(["get_weather", "write_file"])
SIGS = st.sampled_from(["c2lnLWE=", "c2lnLWI=", "UPDiDZpGV+X0CBoq7GJtMZHhOIgI4uD3RRz9kous/w=="])
TEXT = st.text(
    alphabet=st.sampled_from(list('ab yz."\\\n\t{}[]:,é漢😀\u2028\u0085\r')), max_size=12
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["k", "v", "x y"]), inner, max_size=3),
    ),
    max_leaves=6,
)
PATHS = st.sampled_from(
    [
        "$.content",
        "$.path",
        "$.items[0].sku",
        "$.items[2]",
        "$['odd key']",
        "$.meta.tag",
        "$..bad",
        "$.a[*]",
        "$",
        "$[0]",
        "$.items[99999]",
        "$.content.x",
    ]
)


@st.composite
def partial_arg(draw: st.DrawFn) -> dict[str, Any]:
    arg: dict[str, Any] = {"jsonPath": draw(PATHS)}
    kind = draw(
        st.sampled_from(
            ["stringValue", "stringValue", "numberValue", "boolValue", "nullValue", None]
        )
    )
    if kind == "stringValue":
        arg[kind] = draw(TEXT)
    elif kind == "numberValue":
        arg[kind] = draw(
            st.one_of(st.integers(-1000, 1000), st.floats(allow_nan=False, allow_infinity=False))
        )
    elif kind == "boolValue":
        arg[kind] = draw(st.booleans())
    elif kind == "nullValue":
        arg[kind] = draw(st.sampled_from([None, "NULL_VALUE"]))
    if draw(st.booleans()):
        arg["willContinue"] = True
    return arg


@st.composite
def part(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.integers(0, 12))
    if kind <= 2:
        return {"text": draw(TEXT)}
    if kind == 3:
        return {"text": draw(TEXT), "thought": True}
    if kind == 4:
        return {"text": draw(TEXT), "thoughtSignature": draw(SIGS)}
    if kind == 5:
        return draw(
            st.sampled_from(
                [
                    {},
                    {"thoughtSignature": "c2ln"},
                    {"inlineData": {"mimeType": "image/png", "data": "aGk="}},
                ]
            )
        )
    fc: dict[str, Any] = {}
    if kind == 6:  # complete call
        fc = {
            "name": draw(NAMES),
            "args": draw(st.dictionaries(st.sampled_from(["city", "n"]), JSON_VALUES, max_size=2)),
        }
        if draw(st.booleans()):
            fc = {"id": draw(IDS), **fc}
    elif kind in (7, 8):  # streamed start
        if draw(st.booleans()):
            fc["id"] = draw(IDS)
        fc["name"] = draw(NAMES)
        if draw(st.booleans()):
            fc["partialArgs"] = draw(st.lists(partial_arg(), min_size=1, max_size=2))
        fc["willContinue"] = True
    elif kind in (9, 10, 11):  # continuation
        if draw(st.booleans()):
            fc["id"] = draw(IDS)
        fc["partialArgs"] = draw(st.lists(partial_arg(), min_size=1, max_size=3))
        fc["willContinue"] = draw(st.sampled_from([True, True, False]))
    else:  # end marker
        fc = draw(st.sampled_from([{}, {"willContinue": False}]))
    out: dict[str, Any] = {"functionCall": fc}
    if draw(st.integers(0, 3)) == 0:
        out["thoughtSignature"] = draw(SIGS)
    return out


@st.composite
def payload(draw: st.DrawFn) -> Any:
    """A GenerateContentResponse-like dict, or (kind 2) raw bytes that are not one."""
    kind = draw(st.integers(0, 20))
    if kind == 0:
        payload: Any = {
            "error": {
                "code": 500,
                "message": "An internal error has occurred.",
                "status": "INTERNAL",
            }
        }
    elif kind == 1:
        payload = {
            "usageMetadata": {
                "trafficType": "ON_DEMAND",
                "promptTokenCount": draw(st.integers(0, 50)),
            }
        }
    elif kind == 2:
        return draw(st.sampled_from([b"{bad json", b"[1, 2]", b'"\xff\xfe"', b"garbage"]))
    else:
        candidate: dict[str, Any] = {
            "content": {"role": "model", "parts": draw(st.lists(part(), max_size=4))}
        }
        if draw(st.integers(0, 6)) == 0:
            candidate["finishReason"] = draw(
                st.sampled_from(["STOP", "MAX_TOKENS", "MALFORMED_FUNCTION_CALL"])
            )
        if draw(st.integers(0, 8)) == 0:
            candidate["index"] = 1
        if draw(st.integers(0, 3)) == 0:  # E14: checkpoint tokens, some not strings
            candidate["continuationToken"] = draw(st.sampled_from(["c1", "c2", "", 7, None]))
        if draw(st.integers(0, 8)) == 0:
            candidate["safetyRatings"] = [
                {"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "NEGLIGIBLE"}
            ]
        payload = {"candidates": [candidate]}
        if draw(st.integers(0, 4)) == 0:
            payload["usageMetadata"] = {
                "promptTokenCount": 5,
                "totalTokenCount": draw(st.integers(5, 99)),
            }
            payload["modelVersion"] = "gemini-3-flash-preview"
        if draw(st.integers(0, 4)) == 0:  # E10: a second response spliced in
            payload["responseId"] = draw(st.sampled_from(["r1", "r2", 7, None]))
    return payload


SSE_ODDITIES = [
    b": keep-alive\r\n",
    b"data: [DONE]\r\n\r\n",
    b"event: message\r\nid: 7\r\n",
    b'{\n  "error": {\n    "code": 503,\n    "status": "UNAVAILABLE"\n  }\n}\n',
]


@st.composite
def sse_event(draw: st.DrawFn) -> bytes:
    """One SSE event (any line ending), or an SSE oddity (comment, [DONE], bare block)."""
    if draw(st.integers(0, 12)) == 0:
        return draw(st.sampled_from(SSE_ODDITIES))
    item = draw(payload())
    if isinstance(item, dict):
        item = json.dumps(item, ensure_ascii=draw(st.booleans())).encode()
    newline = draw(st.sampled_from([b"\r\n", b"\n", b"\r"]))
    return b"data: " + item + newline + newline


@st.composite
def array_body(draw: st.DrawFn) -> bytes:
    """JSON-array framing (F1, F12), pretty-printed or compact, maybe unclosed or trailed."""
    items = []
    for item in draw(st.lists(payload(), max_size=6)):
        if isinstance(item, dict):
            item = json.dumps(item, indent=draw(st.sampled_from([None, 2]))).encode()
        items.append(item)
    body = b"[" + draw(st.sampled_from([b",", b"\n,\r\n"])).join(items)
    return body + draw(st.sampled_from([b"]", b"\n]", b"", b"] x", b"]\n"]))


@st.composite
def stream(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    if draw(st.integers(0, 4)) == 0:
        body = draw(array_body())
    else:
        body = b"".join(draw(st.lists(sse_event(), max_size=8)))
    if body and draw(st.integers(0, 5)) == 0:
        body = body[: draw(st.integers(0, len(body)))]  # cut off mid-stream (F6)
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=6)))
    return body, cuts


def pieces_of(body: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *cuts, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(bounds)]


def run(
    module: Any, pieces: list[bytes], strict: bool, snapshots: bool = False
) -> tuple[list[Any], dict[str, Any], int, int]:
    """Feed the pieces; return per-call outcomes (with a snapshot() after each
    when asked), the result and the counters."""
    agg = module.StreamAggregator(strict=strict)
    outcomes: list[Any] = []
    for piece in pieces:
        if snapshots:
            outcomes.append(("snapshot", result_view(agg.snapshot())))
        try:
            outcomes.append(("ok", [delta_tuple(d) for d in agg.feed(piece)]))
        except MalformedStreamError as err:
            outcomes.append(
                (
                    "error",
                    [error_view(e) for e in err.errors],
                    [delta_tuple(d) for d in err.deltas],
                )
            )
    return outcomes, result_view(agg.close()), agg.events_seen, agg.bytes_seen


def flat_deltas(outcomes: list[Any]) -> list[Any]:
    return [d for o in outcomes if o[0] != "snapshot" for d in (o[1] if o[0] == "ok" else o[2])]


def flat_errors(outcomes: list[Any]) -> list[Any]:
    return [e for o in outcomes if o[0] == "error" for e in o[1]]


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(stream(), st.booleans())
def test_f7_rust_and_reference_agree_under_random_splits(
    case: tuple[bytes, list[int]], strict: bool
) -> None:
    body, cuts = case
    pieces = pieces_of(body, cuts)
    got_rust = run(rust, pieces, strict, snapshots=True)
    got_ref = run(reference, pieces, strict, snapshots=True)
    assert got_rust == got_ref
    # F7, for each implementation: the same bytes in one piece give the same
    # deltas, errors and result.
    for module, split in ((rust, got_rust), (reference, got_ref)):
        whole = run(module, [body], strict)
        assert flat_deltas(whole[0]) == flat_deltas(split[0])
        assert flat_errors(whole[0]) == flat_errors(split[0])
        assert whole[1:] == split[1:]


def run_mode(module: Any, pieces: list[bytes], strict: bool, deltas: Any) -> list[Any]:
    """Feed the pieces with ``deltas=``: per call its deltas (or error deltas) and
    ``visible_output`` after it, then ``finish()``'s, the result, ``visible_output`` at the end."""
    agg = module.StreamAggregator(strict=strict, deltas=deltas)
    out: list[Any] = []
    for piece in pieces:
        try:
            got = [delta_tuple(d) for d in agg.feed(piece)]
        except MalformedStreamError as err:
            got = [delta_tuple(d) for d in err.deltas]
        out.append((got, agg.visible_output))
    out.append(([delta_tuple(d) for d in agg.finish()], agg.visible_output))
    out.append((result_view(agg.close()), agg.visible_output))
    return out


def displayed(deltas: list[Any]) -> list[Any]:
    """What R5's ``"display"`` keeps of ``deltas=True``: candidate 0's text, call starts, args."""
    return [d for d in deltas if d[0] in ("TextDelta", "CallStart", "ArgDelta") and d[1] == 0]


def visible(deltas: list[Any]) -> bool:
    """L3's visible output, read from ``deltas=True``: answer text or a call start, candidate 0."""
    return any(
        d[1] == 0 and (d[0] == "CallStart" or (d[0] == "TextDelta" and not d[4])) for d in deltas
    )


@settings(
    max_examples=max(EXAMPLES // 4, 50),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(stream(), st.booleans())
def test_r5_display_deltas_and_visible_output_agree_under_random_splits(
    case: tuple[bytes, list[int]], strict: bool
) -> None:
    pieces = pieces_of(*case)
    got = run_mode(rust, pieces, strict, "display")
    assert got == run_mode(reference, pieces, strict, "display")
    # R5: the subsequence of deltas=True per call, the same result, and
    # visible_output as deltas=True's deltas say, in every mode.
    full = run_mode(rust, pieces, strict, True)
    off = run_mode(rust, pieces, strict, False)
    seen = False
    for shown, every, none in zip(got[:-1], full[:-1], off[:-1], strict=True):
        seen = seen or visible(every[0])
        assert shown == (displayed(every[0]), seen)
        assert none == ([], seen)
    assert got[-1] == full[-1] == off[-1] == (full[-1][0], seen)


MANY_IDS = [f"c{i}" for i in range(150)]
MANY_KEYS = [f"$.k{i}" for i in range(150)]


@st.composite
def many_calls_chunk(draw: st.DrawFn) -> dict[str, Any]:
    """A streamed-call chunk among many calls open at once (often more than 64): opened by id or by name
    alone, extended by id or by path alone (C2.3, C17), or ended."""
    kind = draw(st.integers(0, 11))
    fc: dict[str, Any]
    if kind <= 5:  # a new call (named; an id most of the time)
        fc = {"name": draw(NAMES), "willContinue": True}
        if kind <= 3:
            fc["id"] = draw(st.sampled_from(MANY_IDS))
    elif kind <= 10:  # a fragment, by id or by path alone
        fc = {"willContinue": draw(st.sampled_from([True] * 15 + [False]))}
        if kind <= 8:
            fc["id"] = draw(st.sampled_from(MANY_IDS))
        fc["partialArgs"] = [
            {"jsonPath": draw(st.sampled_from(MANY_KEYS)), "stringValue": draw(TEXT)}
        ]
    else:  # an end marker, by id or alone (the most recently updated call)
        fc = draw(st.sampled_from([{}, {"id": draw(st.sampled_from(MANY_IDS))}]))
    return {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": fc}]}}]}


@settings(
    max_examples=max(EXAMPLES // 8, 50),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(many_calls_chunk(), min_size=60, max_size=400))
def test_c17_rust_and_reference_route_many_open_calls_alike(chunks: list[dict[str, Any]]) -> None:
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)
    got_rust = run(rust, [body], True, snapshots=True)
    assert got_rust == run(reference, [body], True, snapshots=True)
    # C13: every named call is in exactly one list, and a CallEnd marks the finished ones.
    result = rust.StreamAggregator()
    deltas = result.feed(body)
    closed = result.close()
    ended = [d.call for d in deltas if isinstance(d, rust.CallEnd)]
    kept = [k for k, part in enumerate(closed.parts) if "functionCall" in part]
    cut = [c["part"] for c in closed.unfinished_calls]
    # CallEnds come as calls close, function_calls in part order: the same calls.
    assert sorted(map(json.dumps, closed.function_calls)) == sorted(map(json.dumps, ended))
    assert len(ended) + len(cut) == len(kept)
    assert set(cut) <= set(kept)
