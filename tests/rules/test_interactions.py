"""StreamAggregator(api="interactions") (spec/interactions.md): the conformance cases of
tests/conformance/interactions.json on the Rust core and the pure-Python twin under every
chunking, rule tests by id, and hypothesis differential tests (Rust vs twin)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastagg._fastagg as rust
import fastagg.reference as reference
from fastagg.errors import AggregatorClosed, MalformedStreamError
from random_budget import examples
from streams import as_json, chunkings, delta_tuple, diagnostics_view, error_view

CASES_FILE = Path(__file__).resolve().parent.parent / "conformance" / "interactions.json"
CASES: list[dict[str, Any]] = json.loads(CASES_FILE.read_text("utf-8"))["cases"]
EXAMPLES = examples(100)
# Compared as JSON text: key order and int/float matter (steps are resent verbatim).
JSON_FIELDS = {"steps", "function_calls", "usage", "error"}
FIELDS = [
    "interaction_id",
    "status",
    "last_event_id",
    "continuation_token",
    "output_after_token",
    "text",
    "thought_text",
    "function_calls",
    "unfinished_calls",
    "usage",
    "error",
    "complete",
    "done",
    "truncated",
    "warnings",
    "steps",
]


def view(result: Any) -> dict[str, Any]:
    """Every public field of an InteractionResponse as comparable plain data."""
    out = {
        f: as_json(getattr(result, f)) if f in JSON_FIELDS else getattr(result, f) for f in FIELDS
    }
    out["interaction"] = as_json(result.interaction)
    out["dict"] = as_json(result.to_dict())
    out["json"] = json.loads(result.to_json())
    out["diagnostics"] = diagnostics_view(result.diagnostics)
    return out


def ev(kind: str, **data: Any) -> bytes:
    data["event_type"] = kind
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


# ---------------------------------------------------------------- conformance


def test_interactions_conformance_file_is_loaded() -> None:
    assert len(CASES) == 13
    assert all({"name", "rules", "body", "deltas", "expected"} <= set(c) for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_interactions_conformance_case(impl: ModuleType, case: dict[str, Any]) -> None:
    body = case["body"].encode("utf-8")
    want_deltas = [tuple(d[:1] + d[1]) for d in case["deltas"]]
    for label, pieces in chunkings(body):
        agg = impl.StreamAggregator(api="interactions")
        got: list[tuple[Any, ...]] = []
        for piece in pieces:
            got += [delta_tuple(d) for d in agg.feed(piece)]
        result = agg.close()
        merged = merge_string_pieces(got)
        assert merged == merge_string_pieces(want_deltas), f"{case['name']} [{label}] deltas"
        if label == "whole":
            assert got == want_deltas, case["name"]
        for field, want in case["expected"].items():
            have = getattr(result, field)
            if field in JSON_FIELDS:
                assert as_json(have) == as_json(want), f"{case['name']} [{label}] {field}"
            else:
                assert have == want, f"{case['name']} [{label}] {field}"
        assert agg.bytes_seen == len(body)


def merge_string_pieces(deltas: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Deltas with consecutive text / string-argument pieces of one place joined (I15):
    how a chunking splits a fragment's pieces is not part of the contract, their sum is."""
    out: list[tuple[Any, ...]] = []
    for d in deltas:
        if out and d[0] == out[-1][0] == "TextDelta" and d[2] == out[-1][2] and d[4] == out[-1][4]:
            out[-1] = (*out[-1][:3], out[-1][3] + d[3], d[4])
        elif (
            out
            and d[0] == out[-1][0] == "ArgDelta"
            and d[2:4] == out[-1][2:4]
            and isinstance(d[4], str)
            and isinstance(out[-1][4], str)
        ):
            out[-1] = (*out[-1][:4], out[-1][4] + d[4])
        else:
            out.append(d)
    return out


# ---------------------------------------------------------------- rules


def test_i1_api_is_checked(impl: ModuleType) -> None:
    with pytest.raises(
        ValueError, match=r"^api must be 'generate_content' or 'interactions', got 'rest'$"
    ):
        impl.StreamAggregator(api="rest")
    with pytest.raises(TypeError, match="not supported with api='interactions'"):
        impl.StreamAggregator(api="interactions").feed_chunk({})
    classic = impl.StreamAggregator(api="generate_content")
    classic.feed(b'data: {"candidates":[{"content":{"parts":[{"text":"hi"}]}}]}\n\n')
    assert classic.close().text == "hi"


def test_i1_deltas_false_returns_no_deltas_and_same_result(impl: ModuleType) -> None:
    body = CASES[1]["body"].encode()
    fast = impl.StreamAggregator(api="interactions", deltas=False)
    assert fast.feed(body) == []
    slow = impl.StreamAggregator(api="interactions")
    slow.feed(body)
    assert view(fast.close()) == view(slow.close())


def test_i4_strict_error_keeps_good_events_and_lenient_warns(impl: ModuleType) -> None:
    body = (
        b"data: [1]\n\n" + ev("interaction.created", interaction={"id": "i1"}) + b"data: {\xff}\n\n"
    )
    agg = impl.StreamAggregator(api="interactions")
    with pytest.raises(MalformedStreamError) as info:
        agg.feed(body)
    err = info.value
    assert (err.kind, err.offset, err.event_index) == ("invalid-json", 0, 0)
    assert str(err) == "event 0 at byte 0 is JSON but not an object; it was skipped"
    assert [(e.kind, e.event_index) for e in err.errors] == [
        ("invalid-json", 0),
        ("invalid-utf8", 2),
    ]
    assert agg.close().interaction_id == "i1"
    lenient = impl.StreamAggregator(api="interactions", strict=False)
    lenient.feed(body)
    assert lenient.close().warnings[:2] == [
        "event 0 at byte 0 is JSON but not an object; it was skipped",
        f"event 2 at byte {len(body) - 11} is not valid UTF-8; it was skipped",
    ]


def test_i4_event_over_max_event_bytes_is_skipped_memory_bounded(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(api="interactions", strict=False, max_event_bytes=100)
    big = ev("step.delta", index=0, delta={"type": "text", "text": "x" * 10_000})
    for i in range(0, len(big), 100):
        agg.feed(big[i : i + 100])
    agg.feed(ev("interaction.created", interaction={"id": "ok"}))
    result = agg.close()
    assert result.interaction_id == "ok"
    assert result.steps == []
    assert result.warnings[0] == (
        "event 0 at byte 18 is larger than max_event_bytes (100); it was skipped "
        "(raise max_event_bytes if such events are expected)"
    )


def test_i4_unterminated_final_event_is_used_when_whole(impl: ModuleType) -> None:
    whole = impl.StreamAggregator(api="interactions")
    whole.feed(b'data: {"event_type":"interaction.created","interaction":{"id":"x"}}')
    assert (whole.close().interaction_id, whole.close().truncated) == ("x", False)
    cut = impl.StreamAggregator(api="interactions")
    cut.feed(b'data: {"event_type":"interaction.crea')
    result = cut.close()
    assert result.truncated is True
    assert result.warnings[0].startswith("event 0 at byte 0 is not valid JSON")


def test_i18_repr_is_the_same_in_both(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(api="interactions")
    agg.feed(CASES[0]["body"].encode())
    assert repr(agg.close()) == (  # spec/api.md V3
        "InteractionResponse(id='v1_ChdXb1k', status='completed', "
        "text='The GCD of 1071 and 462 is **21**.', "
        "thought_text='**Applying Euclid**\\n\\n1071 mod 462 = 147...', function_calls=[], "
        "complete=True, usage={'total_tokens': 318, 'total_input_tokens': 14, "
        "'total_output_tokens': 12, 'total_thought_tokens': 292}, steps=[...] (2 items))"
    )
    assert repr(impl.StreamAggregator(api="interactions").close()) == (
        "InteractionResponse(id=None, status=None, text='', function_calls=[], "
        "complete=False, steps=[])"
    )


def test_i18_close_is_idempotent_and_feed_after_close_raises(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(api="interactions")
    agg.feed(CASES[0]["body"].encode())
    first = agg.close()
    assert agg.close() is first
    assert agg.snapshot() is first
    with pytest.raises(AggregatorClosed):
        agg.feed(b"data: {}\n\n")


def test_i17_snapshot_shows_open_call_without_changing_state(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(api="interactions")
    agg.feed(
        ev(
            "step.start",
            index=0,
            step={"type": "function_call", "id": "c", "name": "f", "arguments": {}},
        )
    )
    agg.feed(
        ev("step.delta", index=0, delta={"type": "arguments_delta", "arguments": '{"path": "/tm'})
    )
    snap = agg.snapshot()
    assert snap.steps[0]["arguments"] == {"path": "/tm"}
    # C13: an open call step is shown with its arguments so far, never as one to run.
    assert snap.unfinished_calls == [{"id": "c", "name": "f", "args": {"path": "/tm"}, "step": 0}]
    assert snap.function_calls == []
    assert snap.warnings == []
    agg.feed(ev("step.delta", index=0, delta={"type": "arguments_delta", "arguments": 'p"}'}))
    agg.feed(ev("step.stop", index=0))
    result = agg.close()
    assert result.function_calls == [{"id": "c", "name": "f", "args": {"path": "/tmp"}}]
    assert result.unfinished_calls == []
    assert snap.steps[0]["arguments"] == {"path": "/tm"}  # the snapshot is not shared state


def test_i15_long_paths_are_not_streamed_live_but_kept(impl: ModuleType) -> None:
    key = "k" * 2000
    agg = impl.StreamAggregator(api="interactions")
    deltas = agg.feed(
        ev("step.start", index=0, step={"type": "function_call", "id": "c", "name": "f"})
    )
    text = json.dumps({key: [1, 2], "ok": True})
    deltas += agg.feed(
        ev("step.delta", index=0, delta={"type": "arguments_delta", "arguments": text})
    )
    deltas += agg.feed(ev("step.stop", index=0))
    assert [delta_tuple(d) for d in deltas if type(d).__name__ == "ArgDelta"] == [
        ("ArgDelta", 0, 0, "$.ok", True)
    ]
    result = agg.close()
    assert result.function_calls[0]["args"] == {key: [1, 2], "ok": True}
    assert (
        result.warnings[0] == "step 0: argument paths longer than 1024 bytes are not streamed live"
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"a":NaN}', 'at character 5: unexpected character "N"'),
        ('{"a":1e999}', "at character 10: number out of range"),
        ('{"a":"\\ud800x"}', "at character 12: lone surrogate"),
        ('{"a":1} {}', 'at character 8: unexpected character "{"'),
        ('{"a":[' + "[" * 1030, "at character 1028: nesting deeper than 1024"),
    ],
)
def test_i16_strict_json_errors(impl: ModuleType, text: str, reason: str) -> None:
    agg = impl.StreamAggregator(api="interactions")
    agg.feed(ev("step.start", index=0, step={"type": "function_call", "id": "c", "name": "f"}))
    agg.feed(ev("step.delta", index=0, delta={"type": "arguments_delta", "arguments": text}))
    agg.feed(ev("step.stop", index=0))
    result = agg.close()
    assert result.warnings[0] == f"step 0: arguments are not valid JSON {reason}"
    assert result.steps[0]["arguments"] == text
    assert result.unfinished_calls == [{"id": "c", "name": "f", "args": {}, "step": 0}]
    assert result.function_calls == []


def test_i14_numbers_match_a_json_parser(impl: ModuleType) -> None:
    text = '{"a":-0,"b":18446744073709551615,"c":18446744073709551616,"d":-9223372036854775809,"e":1E2,"f":0.1}'
    agg = impl.StreamAggregator(api="interactions")
    agg.feed(ev("step.start", index=0, step={"type": "function_call", "id": "c", "name": "f"}))
    agg.feed(ev("step.delta", index=0, delta={"type": "arguments_delta", "arguments": text}))
    agg.feed(ev("step.stop", index=0))
    args = agg.close().function_calls[0]["args"]
    assert as_json(args) == as_json(
        {
            "a": 0,
            "b": 18446744073709551615,
            "c": 1.8446744073709552e19,
            "d": -9.223372036854776e18,
            "e": 100.0,
            "f": 0.1,
        }
    )


def test_i20_reconnect_drops_the_partial_event_only(impl: ModuleType) -> None:
    first = ev("interaction.created", interaction={"id": "i1"}, event_id="e1")
    second = ev("step.start", index=0, step={"type": "model_output"}, event_id="e2")
    agg = impl.StreamAggregator(api="interactions")
    agg.feed(first + second[:25])
    agg.reconnect()
    agg.feed(second + ev("step.delta", index=0, delta={"type": "text", "text": "hi"}))
    result = agg.close()
    assert (result.interaction_id, result.last_event_id, result.text) == ("i1", "e2", "hi")
    assert result.warnings == [
        'step 0 ("model_output") never received step.stop',
        "the stream ended without the [DONE] sentinel",
    ]
    with pytest.raises(AggregatorClosed):
        agg.reconnect()
    with pytest.raises(TypeError, match="only for api='interactions'"):
        impl.StreamAggregator().reconnect()


# ---------------------------------------------------------------- differential

TEXT = st.text(alphabet=st.sampled_from(list('ab "\\\n{}[]:,é😀\u2028')), max_size=8)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["k", "x y", "é", "_1"]), inner, max_size=3),
    ),
    max_leaves=8,
)
INDEX = st.one_of(st.integers(0, 3), st.sampled_from([-1, "1", 2**31, 1.0]))


@st.composite
def argument_fragments(draw: st.DrawFn) -> list[str]:
    """Argument text of a call split anywhere: valid JSON, or mangled."""
    value = draw(st.dictionaries(st.sampled_from(["q", "n", "odd key"]), JSON_VALUES, max_size=3))
    text = json.dumps(value, ensure_ascii=draw(st.booleans()))
    if draw(st.integers(0, 4)) == 0 and text:
        at = draw(st.integers(0, len(text) - 1))
        text = (
            text[:at]
            + draw(st.sampled_from(["", ",", "\\", '"', "}", "\\ud800", "01"]))
            + text[at + 1 :]
        )
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=4)))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


@st.composite
def events(draw: st.DrawFn) -> list[bytes]:
    out: list[bytes] = []
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(
            st.sampled_from(
                [
                    "created",
                    "status",
                    "start",
                    "delta",
                    "args",
                    "stop",
                    "completed",
                    "error",
                    "junk",
                ]
            )
        )
        idx = draw(INDEX)
        extra: dict[str, Any] = {}
        if draw(st.booleans()):
            extra["event_id"] = draw(st.sampled_from(["e1", "e2"]))
        if kind == "created":
            out.append(
                ev(
                    "interaction.created",
                    interaction={"id": "i1", "status": "in_progress"},
                    **extra,
                )
            )
        elif kind == "status":
            name = draw(
                st.sampled_from(
                    [
                        "interaction.status_update",
                        "interaction.in_progress",
                        "interaction.requires_action",
                    ]
                )
            )
            if draw(st.booleans()):  # E14: a checkpoint
                extra["continuation_token"] = draw(st.sampled_from(["c1", "c2", ""]))
            out.append(
                ev(
                    name,
                    interaction_id="i1",
                    usage={"total_tokens": draw(st.integers(0, 9))},
                    **extra,
                )
            )
        elif kind == "start":
            step = draw(
                st.sampled_from(
                    [
                        {"type": "thought", "signature": "c2ln"},
                        {"type": "model_output"},
                        {"type": "function_call", "id": "c1", "name": "f", "arguments": {}},
                        {"type": "google_search_call", "signature": ""},
                    ]
                )
            )
            out.append(ev("step.start", index=idx, step=step, **extra))
        elif kind == "delta":
            delta = draw(
                st.sampled_from(
                    [
                        {"type": "text", "text": "hé"},
                        {"type": "thought_summary", "content": {"type": "text", "text": "t"}},
                        {"type": "thought_signature", "signature": "c2lnMg=="},
                        {"type": "text_annotation_delta", "annotations": [{"start_index": 0}]},
                        {"type": "image", "data": "AA==", "mime_type": "image/png"},
                        {
                            "type": "google_search_call",
                            "arguments": {"queries": ["x"]},
                            "signature": "s",
                        },
                        {"text": "typeless"},
                    ]
                )
            )
            out.append(
                ev(
                    "step.delta",
                    index=idx,
                    delta=delta,
                    metadata={"total_usage": {"n": 1}},
                    **extra,
                )
            )
        elif kind == "args":
            for fragment in draw(argument_fragments()):
                out.append(
                    ev(
                        "step.delta",
                        index=idx,
                        delta={"type": "arguments_delta", "arguments": fragment},
                    )
                )
        elif kind == "stop":
            out.append(ev("step.stop", index=idx, **extra))
        elif kind == "completed":
            status = draw(
                st.sampled_from(
                    [
                        "completed",
                        "requires_action",
                        "incomplete",
                        "requires_continuation",
                        "failed",
                        "",
                    ]
                )
            )
            interaction = {"id": "i1", "status": status, "usage": {"total_tokens": 5}}
            if draw(st.booleans()):  # E14: the hop's token
                interaction["continuation_token"] = "h1"
            out.append(ev("interaction.completed", interaction=interaction))
        elif kind == "error":
            out.append(ev("error", error={"code": "x", "message": "m"}))
        else:
            out.append(
                draw(
                    st.sampled_from(
                        [
                            b"data: {bad\n\n",
                            b": ping\n\n",
                            b"data: [1]\n\n",
                            b"event: done\ndata: [DONE]\n\n",
                            b"\r\n",
                        ]
                    )
                )
            )
    return out


def run(
    module: ModuleType,
    pieces: list[bytes],
    strict: bool,
    reconnect_before: frozenset[int] = frozenset(),
) -> tuple[list[Any], list[Any], dict[str, Any]]:
    agg = module.StreamAggregator(api="interactions", strict=strict)
    deltas: list[Any] = []
    errors: list[Any] = []
    for n, piece in enumerate(pieces):
        if n in reconnect_before:
            agg.reconnect()
        try:
            deltas += [delta_tuple(d) for d in agg.feed(piece)]
        except MalformedStreamError as e:
            deltas += [delta_tuple(d) for d in e.deltas]
            errors += [error_view(x) for x in e.errors]
    snap = view(agg.snapshot())
    return deltas, errors, {"snapshot": snap, "final": view(agg.close())}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events(), st.data(), st.booleans())
def test_differential_rust_and_twin_agree_under_any_split(
    body_events: list[bytes], data: st.DataObject, strict: bool
) -> None:
    body = b"".join(body_events)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=6)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    r_deltas, r_errors, r_view = run(rust, pieces, strict)
    p_deltas, p_errors, p_view = run(reference, pieces, strict)
    assert r_deltas == p_deltas
    assert r_errors == p_errors
    assert r_view == p_view
    # Split invariance (I2, I14): the whole body gives the same result.
    w_deltas, _, w_view = run(rust, [body], strict)
    assert w_view["final"] == r_view["final"]
    assert merge_string_pieces(w_deltas) == merge_string_pieces(r_deltas)
    # I20: reconnects anywhere behave the same in both.
    marks = frozenset(data.draw(st.sets(st.integers(0, len(pieces)), max_size=2)))
    assert run(rust, pieces, strict, marks) == run(reference, pieces, strict, marks)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=12),
            st.sampled_from(
                [
                    b"data: ",
                    b"event: step.delta\n",
                    b"\r",
                    b"\n",
                    b"\xef\xbb\xbf",
                    b"[DONE]",
                    b"{",
                    b'"',
                ],
            ),
            st.sampled_from(CASES).map(lambda c: c["body"].encode()[:200]),
        ),
        max_size=12,
    ),
    st.booleans(),
)
def test_differential_arbitrary_bytes_never_crash_and_agree(
    pieces: list[bytes], strict: bool
) -> None:
    assert run(rust, pieces, strict) == run(reference, pieces, strict)


def test_d5_finish_is_refused_on_an_interactions_stream(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(api="interactions")
    with pytest.raises(TypeError) as caught:
        agg.finish()
    assert str(caught.value) == (
        "finish() is only for api='generate_content'; an Interactions stream ends with its "
        "[DONE] event: call close()"
    )
