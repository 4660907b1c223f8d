"""One test per aggregation rule (spec/contract/aggregation.md, spec/aggregation.md).

Every test runs against both implementations through the ``impl`` fixture
(the Rust module ``fastagg._fastagg`` and the pure-Python ``fastagg.reference``)
and uses only the public API.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest

from fastagg.errors import AggregatorClosed, MalformedStreamError

# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def sse(*events: Any, eol: bytes = b"\r\n") -> bytes:
    """Frame payloads (dicts or raw bytes) as SSE ``data:`` events."""
    out = b""
    for event in events:
        payload = event if isinstance(event, bytes) else dumps(event)
        out += b"data: " + payload + eol + eol
    return out


def chunk(
    *parts: Any, finish: str | None = None, index: int | None = None, **top: Any
) -> dict[str, Any]:
    """A GenerateContentResponse with one candidate holding ``parts``."""
    cand: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish is not None:
        cand["finishReason"] = finish
    if index is not None:
        cand["index"] = index
    return {"candidates": [cand], **top}


def fc(part_extra: dict[str, Any] | None = None, **call: Any) -> dict[str, Any]:
    """A functionCall part."""
    return {"functionCall": call, **(part_extra or {})}


def pa(path: Any, **value: Any) -> dict[str, Any]:
    """A partial arg."""
    return {"jsonPath": path, **value}


def run(impl: ModuleType, data: bytes, **kwargs: Any) -> Any:
    agg = impl.StreamAggregator(**kwargs)
    agg.feed(data)
    return agg.close()


def run_chunks(impl: ModuleType, *chunks: dict[str, Any], **kwargs: Any) -> tuple[Any, list[Any]]:
    """Feed chunks as one SSE body; return the closed result and the deltas."""
    agg = impl.StreamAggregator(**kwargs)
    deltas = agg.feed(sse(*chunks))
    return agg.close(), deltas


def as_json(value: Any) -> str:
    """JSON text: compares key order and int/float, unlike ``==``."""
    return json.dumps(value, ensure_ascii=False)


def view(result: Any) -> tuple[bytes, list[str], bool, bool]:
    """What two results must agree on."""
    return result.to_json(), result.warnings, result.truncated, result.complete


def feed_in_pieces(impl: ModuleType, data: bytes, size: int, **kwargs: Any) -> Any:
    agg = impl.StreamAggregator(**kwargs)
    for i in range(0, len(data), size):
        agg.feed(data[i : i + size])
    return agg.close()


HELLO = chunk({"text": "Hello"})
WORLD = chunk({"text": " world"}, finish="STOP")


# --------------------------------------------------------------------------
# F: framing
# --------------------------------------------------------------------------


def test_f1_array_framing_dispatches_each_element_when_complete(
    impl: ModuleType,
) -> None:
    agg = impl.StreamAggregator()
    first = b'[{"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}]}\n'
    assert agg.feed(first) == [impl.TextDelta(0, 0, "Hel", False)]
    rest = b',\r\n{"candidates": [{"content": {"parts": [{"text": "lo"}]}, "finishReason": "STOP"}]}\n]'
    assert agg.feed(rest) == [impl.TextDelta(0, 0, "lo", False), impl.Finish(0, "STOP")]
    result = agg.close()
    assert result.parts == [{"text": "Hello"}]
    assert result.complete is True
    assert result.warnings == []
    assert agg.events_seen == 2


def test_f1_array_framing_after_bom_and_whitespace(impl: ModuleType) -> None:
    body = b"\xef\xbb\xbf \r\n\t[" + dumps(HELLO) + b"," + dumps(WORLD) + b"]\n"
    result = feed_in_pieces(impl, body, 1)
    assert result.parts == [{"text": "Hello world"}]
    assert result.warnings == []


def test_f12_array_empty_elements_are_ignored(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed(b"[ , ,\n" + dumps(HELLO) + b", ,]")
    result = agg.close()
    assert result.parts == [{"text": "Hello"}]
    assert agg.events_seen == 1
    assert result.warnings == []


def test_f12_data_after_array_end_warned_once(impl: ModuleType) -> None:
    head = b"[" + dumps(WORLD) + b"]\n  "
    result = run(impl, head + b"x ]{}")
    offset = len(head)
    assert result.warnings == [
        f"F1: data after the end of the JSON array at byte {offset} was ignored"
    ]
    assert result.parts == [{"text": " world"}]


def test_f12_array_scalar_element_is_json_but_not_an_object(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    body = b"[ 17 ,\n" + dumps(HELLO) + b"]"
    with pytest.raises(MalformedStreamError) as info:
        agg.feed(body)
    err = info.value
    assert err.kind == "invalid-json"
    assert (err.offset, err.event_index) == (2, 0)
    assert str(err) == "event 0 at byte 2 is JSON but not an object; it was skipped"
    assert err.deltas == [impl.TextDelta(0, 0, "Hello", False)]
    assert agg.close().parts == [{"text": "Hello"}]


def test_f11_array_element_too_large(impl: ModuleType) -> None:
    small = dumps(chunk({"text": "ok"}))
    big = dumps(chunk({"text": "x" * 200}))
    body = b"[" + big + b",\n  " + small + b"]"
    agg = impl.StreamAggregator(max_event_bytes=len(small))
    with pytest.raises(MalformedStreamError) as info:
        agg.feed(body)
    assert info.value.kind == "event-too-large"
    assert (info.value.offset, info.value.event_index) == (1, 0)
    assert str(info.value) == (
        f"event 0 at byte 1 is larger than max_event_bytes ({len(small)}); it was skipped "
        "(raise max_event_bytes if such events are expected)"
    )
    assert agg.close().parts == [{"text": "ok"}]


def test_f14_array_unfinished_element_dropped(impl: ModuleType) -> None:
    body = b"[" + dumps(HELLO) + b',\n{"candidates": [{"content"'
    result = run(impl, body)
    offset = body.index(b"\n{") + 1
    assert result.parts == [{"text": "Hello"}]
    assert result.truncated is True
    assert result.warnings == [
        (
            f"F6: the stream ended inside an incomplete event at byte {offset}; "
            "it was dropped and the result is marked truncated"
        )
    ]


@pytest.mark.parametrize("eol", [b"\r\n", b"\n", b"\r"])
def test_f2_crlf_lf_and_lone_cr_end_lines(impl: ModuleType, eol: bytes) -> None:
    result = run(impl, sse(HELLO, WORLD, eol=eol))
    assert result.parts == [{"text": "Hello world"}]
    assert result.warnings == []


def test_f2_cr_and_lf_in_different_chunks_are_one_line_end(impl: ModuleType) -> None:
    # Were CR|LF two line ends, the blank line would dispatch the first half alone.
    agg = impl.StreamAggregator()
    assert agg.feed(b'data: {"candidates":\r') == []
    assert agg.feed(b'\ndata: [{"content":{"parts":[{"text":"a"}]}}]}\r') == []
    assert agg.feed(b"\n\r") == [impl.TextDelta(0, 0, "a", False)]
    assert agg.feed(b"\n") == []
    assert agg.close().parts == [{"text": "a"}]


def test_f2_bom_at_start_dropped_even_when_split(impl: ModuleType) -> None:
    body = b"\xef\xbb\xbf" + sse(HELLO)
    assert feed_in_pieces(impl, body, 1).parts == [{"text": "Hello"}]
    assert feed_in_pieces(impl, body, 2).parts == [{"text": "Hello"}]


def test_f9_offsets_count_the_bom(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    with pytest.raises(MalformedStreamError) as info:
        agg.feed(b"\xef\xbb\xbfdata: nope\n\n")
    assert (info.value.offset, info.value.event_index) == (3, 0)


def test_f2_comments_and_other_fields_ignored(impl: ModuleType) -> None:
    body = (
        b": keep-alive\r\n"
        b"event: message\r\n"
        b"id: 7\r\n"
        b"retry: 1000\r\n"
        b"x-unknown: {not json\r\n"
        b"data: " + dumps(HELLO) + b"\r\n"
        b": between data lines\r\n"
        b"id: 8\r\n\r\n"
    )
    agg = impl.StreamAggregator()
    agg.feed(body)
    result = agg.close()
    assert result.parts == [{"text": "Hello"}]
    assert result.warnings == []
    assert agg.events_seen == 1


def test_f2_data_without_space_after_colon(impl: ModuleType) -> None:
    assert run(impl, b"data:" + dumps(HELLO) + b"\n\n").parts == [{"text": "Hello"}]


def test_f2_multi_line_data_joined_with_newline(impl: ModuleType) -> None:
    body = (
        b'data: {"candidates": [\n'
        b'data:   {"content": {"parts": [{"text": "multi"}]},\n'
        b'data:    "finishReason": "STOP"}]}\n'
        b"\n"
    )
    result = run(impl, body)
    assert result.parts == [{"text": "multi"}]
    assert result.finish_reason == "STOP"


def test_f3_unicode_line_separators_are_content(impl: ModuleType) -> None:
    text = "a\u2028b\u2029c\u0085d"
    result = feed_in_pieces(impl, sse(chunk({"text": text})), 3)
    assert result.text == text
    assert result.warnings == []


def test_f4_bare_error_block_pretty_printed(impl: ModuleType) -> None:
    error = {
        "code": 503,
        "message": 'The model is overloaded. {Please} try again "later" }',
        "status": "UNAVAILABLE",
    }
    block = json.dumps({"error": error}, indent=2).replace("\n", "\r\n").encode() + b"\r\n"
    agg = impl.StreamAggregator()
    deltas = agg.feed(sse(HELLO) + block)
    assert deltas == [impl.TextDelta(0, 0, "Hello", False), impl.StreamError(error)]
    result = agg.close()
    assert result.error == error
    assert result.parts == [{"text": "Hello"}]
    assert result.complete is False
    assert result.warnings == []


def test_f4_bare_block_offset_is_its_opening_brace(impl: ModuleType) -> None:
    body = sse(HELLO) + b"{\n  oops\n}\n"
    agg = impl.StreamAggregator()
    with pytest.raises(MalformedStreamError) as info:
        agg.feed(body)
    assert (info.value.kind, info.value.offset, info.value.event_index) == (
        "invalid-json",
        len(sse(HELLO)),
        1,
    )


def test_f13_block_ends_with_the_line_on_which_braces_balance(impl: ModuleType) -> None:
    # The count returns to zero mid-line: the block is that whole line.
    agg = impl.StreamAggregator()
    with pytest.raises(MalformedStreamError) as info:
        agg.feed(b'{"error": {"code": 1}} {\n' + sse(HELLO))
    assert (info.value.kind, info.value.offset, info.value.event_index) == (
        "invalid-json",
        0,
        0,
    )
    assert info.value.deltas == [impl.TextDelta(0, 0, "Hello", False)]


def test_f13_brace_line_inside_an_event_is_ignored(impl: ModuleType) -> None:
    body = b"data: " + dumps(HELLO) + b'\n{"error": {"code": 1}}\n\n'
    result = run(impl, body)
    assert result.parts == [{"text": "Hello"}]
    assert result.error is None


def test_f5_done_sentinel_ignored(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed(sse(HELLO, WORLD) + b"data: [DONE]\n\n")
    result = agg.close()
    assert result.parts == [{"text": "Hello world"}]
    assert agg.events_seen == 2
    assert result.warnings == []


def test_f9_whitespace_only_data_is_not_an_event(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    blank = b"data:\n\ndata:   \t\n\n"
    agg.feed(blank + sse(HELLO))
    assert agg.events_seen == 1
    assert agg.bytes_seen == len(blank) + len(sse(HELLO))


def test_f14_unterminated_complete_event_processed_with_warning(
    impl: ModuleType,
) -> None:
    body = sse(HELLO) + b"data: " + dumps(WORLD) + b"\r\n"
    agg = impl.StreamAggregator()
    agg.feed(body)
    result = agg.close()
    assert result.parts == [{"text": "Hello world"}]
    assert result.truncated is False
    assert result.complete is True
    assert result.warnings == [
        (
            f"F6: the stream ended inside an unterminated event at byte {len(sse(HELLO))}; "
            "it was complete JSON and was processed"
        )
    ]
    assert agg.events_seen == 2


def test_f14_final_line_without_line_end_is_processed(impl: ModuleType) -> None:
    result = run(impl, b"data: " + dumps(WORLD))
    assert result.parts == [{"text": " world"}]
    assert result.warnings == [
        "F6: the stream ended inside an unterminated event at byte 0; it was complete JSON and was processed"
    ]


def test_f14_incomplete_event_dropped_and_truncated(impl: ModuleType) -> None:
    body = sse(HELLO) + b'data: {"candidates": [{"content": {"parts": [{"text": " wor'
    result = run(impl, body)
    assert result.parts == [{"text": "Hello"}]
    assert result.truncated is True
    assert result.complete is False
    assert result.warnings == [
        (
            f"F6: the stream ended inside an incomplete event at byte {len(sse(HELLO))}; "
            "it was dropped and the result is marked truncated"
        )
    ]


def test_f14_oversized_pending_event_dropped(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(max_event_bytes=10)
    agg.feed(b"data: " + b"x" * 50)
    result = agg.close()
    assert result.truncated is True
    assert result.warnings == [
        "F6: the stream ended inside an incomplete event at byte 0; it was dropped and the result is marked truncated",
        "F2: no event was found in 56 bytes of body (expected a streamGenerateContent?alt=sse response)",
    ]


def test_f14_no_event_found_warning(impl: ModuleType) -> None:
    body = b"<html><body>Not Found</body></html>\n"
    result = run(impl, body)
    assert result.parts == []
    assert result.warnings == [
        f"F2: no event was found in {len(body)} bytes of body (expected a streamGenerateContent?alt=sse response)"
    ]


def test_f14_empty_body_gives_no_warning(impl: ModuleType) -> None:
    result = impl.StreamAggregator().close()
    assert result.warnings == []
    assert result.to_dict() == {"candidates": []}


def test_f14_bare_block_completed_by_the_final_line_is_processed(
    impl: ModuleType,
) -> None:
    result = run(impl, sse(HELLO) + b'{"error": {\n  "code": 429}}')
    assert result.error == {"code": 429}
    assert result.warnings == []


def test_f14_bad_block_completed_at_close_becomes_a_warning(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed(sse(HELLO) + b"{oops}")
    result = agg.close()
    offset = len(sse(HELLO))
    assert result.warnings == [
        (
            f"F8: event 1 at byte {offset} is not valid JSON; it was skipped "
            "(is this the body of a streamGenerateContent response?)"
        )
    ]
    assert result.truncated is False
    assert agg.events_seen == 2


def test_f14_unfinished_bare_block_dropped(impl: ModuleType) -> None:
    result = run(impl, sse(HELLO) + b'{\n  "error": {"code": 500,\n')
    assert result.error is None
    assert result.truncated is True
    assert result.warnings == [
        (
            f"F6: the stream ended inside an incomplete event at byte {len(sse(HELLO))}; "
            "it was dropped and the result is marked truncated"
        )
    ]


def test_f11_long_line_that_is_not_data_is_ignored(impl: ModuleType) -> None:
    payload = dumps(HELLO)
    body = b": " + b"c" * 500 + b"\nx-pad: " + b"p" * 500 + b"\n" + sse(payload)
    result = feed_in_pieces(impl, body, 64, max_event_bytes=len(payload))
    assert result.parts == [{"text": "Hello"}]
    assert result.warnings == []


def test_f2_data_field_without_colon_adds_an_empty_line(impl: ModuleType) -> None:
    body = b'data: {"candidates": [{"content": {"parts": [{"text": "x"}]}}]\ndata\ndata: }\n\n'
    assert run(impl, body).parts == [{"text": "x"}]


def test_f1_feed_rejects_text(impl: ModuleType) -> None:
    with pytest.raises(TypeError):
        impl.StreamAggregator().feed("data: {}\n\n")


def test_f7_result_independent_of_chunking(impl: ModuleType) -> None:
    body = (
        b"\xef\xbb\xbf: hi\r\n"
        + sse(chunk({"text": "caf\u00e9 \u2028 \U0001f600", "thought": True}), eol=b"\r")
        + sse(chunk(fc({"thoughtSignature": "c2ln"}, name="f", willContinue=True)))
        + sse(
            chunk(
                fc(
                    partialArgs=[pa("$.a[1]", stringValue="\u00e9\u00e9")],
                    willContinue=True,
                )
            )
        )
        + b'{\n "error": {"message": "x}"}\n}\n'
        + sse(chunk(fc(), finish="STOP"), eol=b"\n")
    )
    whole = view(run(impl, body))
    assert whole[0].startswith(b'{"candidates":[{"content":{"role":"model","parts":[{"text":"caf')
    for size in (1, 2, 3, 7):
        assert view(feed_in_pieces(impl, body, size)) == whole
    for cut in range(len(body)):
        agg = impl.StreamAggregator()
        agg.feed(body[:cut])
        agg.feed(body[cut:])
        assert view(agg.close()) == whole


# --------------------------------------------------------------------------
# F8 / F10: bad payloads
# --------------------------------------------------------------------------


def test_f8_invalid_json_raises_after_whole_chunk(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    body = sse(HELLO) + b"data: {nope\r\n\r\n" + sse(WORLD)
    with pytest.raises(MalformedStreamError) as info:
        agg.feed(body)
    err = info.value
    offset = len(sse(HELLO))
    assert err.kind == "invalid-json"
    assert (err.offset, err.event_index) == (offset, 1)
    assert str(err) == (
        f"event 1 at byte {offset} is not valid JSON; it was skipped "
        "(is this the body of a streamGenerateContent response?)"
    )
    assert err.deltas == [
        impl.TextDelta(0, 0, "Hello", False),
        impl.TextDelta(0, 0, " world", False),
        impl.Finish(0, "STOP"),
    ]
    assert err.errors == [err]
    assert agg.events_seen == 3
    result = agg.close()
    assert result.parts == [{"text": "Hello world"}]
    assert result.complete is True
    assert result.warnings == []


def test_f10_every_error_of_the_call_is_collected(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    body = b"data: [1]\n\n" + b"data: \xff\xfe\n\n" + sse(HELLO)
    with pytest.raises(MalformedStreamError) as info:
        agg.feed(body)
    first = info.value
    assert [(e.kind, e.offset, e.event_index) for e in first.errors] == [
        ("invalid-json", 0, 0),
        ("invalid-utf8", 11, 1),
    ]
    assert first.errors[0] is first
    assert str(first.errors[1]) == "event 1 at byte 11 is not valid UTF-8; it was skipped"
    assert first.deltas == [impl.TextDelta(0, 0, "Hello", False)]


def test_f8_aggregator_stays_usable_after_an_error(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    with pytest.raises(MalformedStreamError):
        agg.feed(sse(HELLO) + b"data: {\n\n")
    assert agg.feed(sse(WORLD)) == [
        impl.TextDelta(0, 0, " world", False),
        impl.Finish(0, "STOP"),
    ]
    assert agg.close().text == "Hello world"


def test_f10_nesting_deeper_than_1024_is_invalid_json(impl: ModuleType) -> None:
    deep = b'{"a":' + b"[" * 1024 + b"]" * 1024 + b"}"
    ok = b'{"a":' + b"[" * 1023 + b"]" * 1023 + b"}"
    agg = impl.StreamAggregator()
    assert agg.feed(sse(ok)) == []
    with pytest.raises(MalformedStreamError) as info:
        agg.feed(sse(deep))
    assert info.value.kind == "invalid-json"
    assert str(info.value).startswith("event 1 at byte ")
    assert str(info.value).endswith(
        " is not valid JSON; it was skipped (is this the body of a streamGenerateContent response?)"
    )


def test_f11_event_too_large_error(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(max_event_bytes=64)
    big = dumps(chunk({"text": "y" * 100}))
    with pytest.raises(MalformedStreamError) as info:
        agg.feed(
            b"data: " + big[:40] + b"\ndata: " + big[40:] + b"\n\n" + sse({"modelVersion": "m"})
        )
    assert (info.value.kind, info.value.offset, info.value.event_index) == (
        "event-too-large",
        0,
        0,
    )
    assert str(info.value) == (
        "event 0 at byte 0 is larger than max_event_bytes (64); it was skipped "
        "(raise max_event_bytes if such events are expected)"
    )
    assert agg.close().model_version == "m"


def test_f11_event_of_exactly_max_event_bytes_is_accepted(impl: ModuleType) -> None:
    payload = dumps(HELLO)
    assert run(impl, sse(payload), max_event_bytes=len(payload)).parts == [{"text": "Hello"}]


def test_f8_strict_false_turns_errors_into_warnings(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(strict=False, max_event_bytes=100)
    deltas = agg.feed(
        sse(HELLO) + b"data: {x\n\ndata: 5\n\n" + b"data: " + b"z" * 101 + b"\n\n" + sse(WORLD)
    )
    assert deltas == [
        impl.TextDelta(0, 0, "Hello", False),
        impl.TextDelta(0, 0, " world", False),
        impl.Finish(0, "STOP"),
    ]
    o = len(sse(HELLO))
    assert agg.close().warnings == [
        f"F8: event 1 at byte {o} is not valid JSON; it was skipped (is this the body of a streamGenerateContent response?)",
        f"F8: event 2 at byte {o + 10} is JSON but not an object; it was skipped",
        (
            f"F8: event 3 at byte {o + 19} is larger than max_event_bytes (100); it was skipped "
            "(raise max_event_bytes if such events are expected)"
        ),
    ]


# --------------------------------------------------------------------------
# E: events
# --------------------------------------------------------------------------


def test_e1_error_event_recorded_with_stream_error_delta(impl: ModuleType) -> None:
    error = {
        "code": 500,
        "message": "An internal error has occurred.",
        "status": "INTERNAL",
        "details": [{"@type": "x"}],
    }
    agg = impl.StreamAggregator()
    deltas = agg.feed(sse(HELLO, {"usageMetadata": {"totalTokenCount": 3}, "error": error}, WORLD))
    assert deltas == [
        impl.TextDelta(0, 0, "Hello", False),
        impl.StreamError(error),
        impl.TextDelta(0, 0, " world", False),
        impl.Finish(0, "STOP"),
    ]
    result = agg.close()
    assert as_json(result.error) == as_json(error)
    assert result.usage is None  # E8: an error payload contributes nothing else
    assert result.parts == [{"text": "Hello world"}]
    assert result.complete is False


def test_e8_null_error_is_no_error(impl: ModuleType) -> None:
    result, deltas = run_chunks(impl, {**WORLD, "error": None})
    assert result.error is None
    assert result.complete is True
    assert deltas == [impl.TextDelta(0, 0, " world", False), impl.Finish(0, "STOP")]


def test_e8_last_error_kept_each_yields_a_delta(impl: ModuleType) -> None:
    result, deltas = run_chunks(impl, {"error": {"code": 1}}, {"error": {"code": 2}})
    assert deltas == [impl.StreamError({"code": 1}), impl.StreamError({"code": 2})]
    assert result.error == {"code": 2}


def test_e2_payload_without_candidates(impl: ModuleType) -> None:
    feedback = {"blockReason": "SAFETY", "safetyRatings": []}
    result, deltas = run_chunks(
        impl, {"promptFeedback": feedback, "usageMetadata": {"promptTokenCount": 3}}
    )
    assert deltas == []
    assert result.prompt_feedback == feedback
    assert result.candidates == []
    assert result.parts == []
    assert result.complete is False
    assert result.to_dict() == {
        "candidates": [],
        "usageMetadata": {"promptTokenCount": 3},
        "promptFeedback": feedback,
    }


def test_e3_top_level_fields_last_non_null_usage_merged(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        {
            "modelVersion": "m1",
            "responseId": "r1",
            "createTime": "t1",
            "usageMetadata": {"promptTokenCount": 5, "totalTokenCount": 5},
            "nonce": 1,
        },
        {
            "modelVersion": None,
            "responseId": "r2",
            "usageMetadata": {"totalTokenCount": None, "candidatesTokenCount": 2},
        },
        {"usageMetadata": {"totalTokenCount": 7}},
    )
    assert result.model_version == "m1"
    assert result.response_id == "r2"
    assert as_json(result.usage) == as_json(
        {"promptTokenCount": 5, "totalTokenCount": 7, "candidatesTokenCount": 2}
    )
    assert as_json(result.to_dict()) == as_json(
        {
            "candidates": [],
            "usageMetadata": {
                "promptTokenCount": 5,
                "totalTokenCount": 7,
                "candidatesTokenCount": 2,
            },
            "modelVersion": "m1",
            "responseId": "r2",
            "createTime": "t1",
        }
    )


def test_e4_candidates_aggregated_independently_by_index(impl: ModuleType) -> None:
    both = {
        "candidates": [
            {"content": {"parts": [{"text": "B1"}]}, "index": 1},
            {"content": {"parts": [{"text": "A1"}]}},
        ]
    }
    later = {
        "candidates": [
            {
                "content": {"parts": [{"text": "A2"}]},
                "index": 0,
                "finishReason": "STOP",
            },
            {
                "content": {"parts": [{"text": "B2"}]},
                "index": 1,
                "finishReason": "MAX_TOKENS",
            },
        ]
    }
    result, deltas = run_chunks(impl, both, later)
    assert deltas == [
        impl.TextDelta(1, 0, "B1", False),
        impl.TextDelta(0, 0, "A1", False),
        impl.TextDelta(0, 0, "A2", False),
        impl.Finish(0, "STOP"),
        impl.TextDelta(1, 0, "B2", False),
        impl.Finish(1, "MAX_TOKENS"),
    ]
    assert [c.index for c in result.candidates] == [0, 1]
    assert [c.parts for c in result.candidates] == [
        [{"text": "A1A2"}],
        [{"text": "B1B2"}],
    ]
    assert result.candidates[1].finish_reason == "MAX_TOKENS"
    assert result.text == "A1A2"
    assert result.finish_reason == "STOP"


def test_e5_finish_reason_and_message_last_non_empty(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl,
        chunk({"text": "a"}, finish="MAX_TOKENS"),
        {"candidates": [{"finishReason": "", "finishMessage": "done"}]},
        {"candidates": [{"finishReason": 3, "finishMessage": ""}]},
    )
    assert deltas == [impl.TextDelta(0, 0, "a", False), impl.Finish(0, "MAX_TOKENS")]
    assert result.finish_reason == "MAX_TOKENS"
    assert result.finish_message == "done"


def test_e5_other_candidate_keys_last_non_null_in_first_arrival_order(
    impl: ModuleType,
) -> None:
    first = {
        "candidates": [{"safetyRatings": [{"category": "A"}], "avgLogprobs": -0.5, "tokenCount": 3}]
    }
    second = {
        "candidates": [
            {
                "tokenCount": 4,
                "safetyRatings": None,
                "groundingMetadata": {"webSearchQueries": ["q"]},
                "avgLogprobs": -1.0,
            }
        ]
    }
    result, _ = run_chunks(impl, first, second)
    assert as_json(result.candidates[0].metadata) == as_json(
        {
            "safetyRatings": [{"category": "A"}],
            "avgLogprobs": -1.0,
            "tokenCount": 4,
            "groundingMetadata": {"webSearchQueries": ["q"]},
        }
    )
    assert as_json(result.to_dict()["candidates"][0]) == as_json(
        {
            "content": {"role": "model", "parts": []},
            "safetyRatings": [{"category": "A"}],
            "avgLogprobs": -1.0,
            "tokenCount": 4,
            "groundingMetadata": {"webSearchQueries": ["q"]},
            "index": 0,
        }
    )


def test_e9_citations_concatenated_without_exact_duplicates(impl: ModuleType) -> None:
    c1 = {"startIndex": 0, "uri": "a"}
    c2 = {"startIndex": 1.0, "uri": "a"}  # 1.0 is not 1
    c3 = {"startIndex": 1, "uri": "a"}
    result, _ = run_chunks(
        impl,
        {"candidates": [{"finishReason": "STOP", "citationMetadata": {"citations": [c1, c2]}}]},
        {
            "candidates": [
                {
                    "citationMetadata": {
                        "citations": [{"uri": "a", "startIndex": 0}, c3],
                        "citationSources": [c1],
                        "note": "x",
                    }
                }
            ]
        },
    )
    assert as_json(result.candidates[0].metadata) == as_json(
        {
            "citationMetadata": {
                "citations": [c1, c2, c3],
                "citationSources": [c1],
                "note": "x",
            }
        }
    )
    assert as_json(result.to_dict()["candidates"][0]) == as_json(
        {
            "content": {"role": "model", "parts": []},
            "finishReason": "STOP",
            "citationMetadata": {
                "citations": [c1, c2, c3],
                "citationSources": [c1],
                "note": "x",
            },
            "index": 0,
        }
    )


def test_e6_complete_needs_a_finish_reason_on_candidate_0(impl: ModuleType) -> None:
    result, _ = run_chunks(impl, chunk({"text": "a"}), chunk({"text": "b"}, index=1, finish="STOP"))
    assert result.complete is False
    assert result.finish_reason is None
    result, _ = run_chunks(impl, chunk({"text": "a"}, finish="STOP"))
    assert result.complete is True


def test_e7_wrong_shapes_warned_and_ignored(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl,
        {"candidates": {"0": 1}, "usageMetadata": [1]},
        {
            "candidates": [
                "x",
                {"index": -1, "content": {"parts": [{"text": "lost"}]}},
                {"index": True},
                {"index": 2**31},
                {"index": 1.0},
                {"content": [1]},
                {"content": {"parts": {"text": "x"}}},
                {
                    "content": {"parts": [7, {"text": "kept"}, None]},
                    "citationMetadata": [],
                },
                {
                    "content": {
                        "parts": [
                            {
                                "functionCall": {
                                    "name": "f",
                                    "willContinue": True,
                                    "partialArgs": "p",
                                }
                            }
                        ]
                    }
                },
                {
                    "content": {
                        "parts": [
                            {"functionCall": {"partialArgs": [1, pa("$.a", stringValue="v")]}}
                        ]
                    }
                },
                {"content": None, "finishReason": None},
            ]
        },
    )
    assert result.warnings == [
        "E7: event 0: candidates is not a list; ignored",
        "E7: event 0: usageMetadata is not an object; ignored",
        "E7: event 1: candidates[0] is not an object; ignored",
        "E7: event 1: candidates[1].index is not a non-negative integer below 2^31; ignored",
        "E7: event 1: candidates[2].index is not a non-negative integer below 2^31; ignored",
        "E7: event 1: candidates[3].index is not a non-negative integer below 2^31; ignored",
        "E7: event 1: candidates[4].index is not a non-negative integer below 2^31; ignored",
        "E7: event 1: candidates[5].content is not an object; ignored",
        "E7: event 1: candidates[6].content.parts is not a list; ignored",
        "E7: event 1: candidates[7].content.parts[0] is not an object; ignored",
        "E7: event 1: candidates[7].content.parts[2] is not an object; ignored",
        "E7: event 1: candidates[7].citationMetadata is not an object; ignored",
        "E7: event 1: candidates[8].content.parts[0].functionCall.partialArgs is not a list; ignored",
        "E7: event 1: candidates[9].content.parts[0].functionCall.partialArgs[0] is not an object; ignored",
    ]
    assert as_json(result.parts) == as_json(
        [{"text": "kept"}, {"functionCall": {"name": "f", "args": {"a": "v"}}}]
    )
    assert [c.index for c in result.candidates] == [0]
    assert impl.TextDelta(0, 0, "kept", False) in deltas


# --------------------------------------------------------------------------
# P: parts
# --------------------------------------------------------------------------


def test_p1_text_runs_merge_by_thought_flag(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl,
        chunk({"text": "Plan", "thought": True}, {"text": " A", "thought": True}),
        chunk({"text": "Ans", "thought": False}, {"text": "wer"}),
        chunk({"text": "!", "thought": True}, {"text": "?"}, finish="STOP"),
    )
    assert as_json(result.parts) == as_json(
        [
            {"text": "Plan A", "thought": True},
            {"text": "Answer"},
            {"text": "!", "thought": True},
            {"text": "?"},
        ]
    )
    assert deltas == [
        impl.TextDelta(0, 0, "Plan", True),
        impl.TextDelta(0, 0, " A", True),
        impl.TextDelta(0, 1, "Ans", False),
        impl.TextDelta(0, 1, "wer", False),
        impl.TextDelta(0, 2, "!", True),
        impl.TextDelta(0, 3, "?", False),
        impl.Finish(0, "STOP"),
    ]
    assert result.text == "Answer?"
    assert result.thought_text == "Plan A!"


def test_p2_empty_plain_text_dropped_without_ending_the_run(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl,
        chunk({"text": "a"}, {"text": ""}, {"text": "", "thought": True}, {"text": "b"}),
    )
    assert result.parts == [{"text": "ab"}]
    assert deltas == [
        impl.TextDelta(0, 0, "a", False),
        impl.TextDelta(0, 0, "b", False),
    ]


def test_p3_signed_text_never_merged(impl: ModuleType) -> None:
    signed = {"text": "two", "thoughtSignature": "c2ln"}
    signed_thought = {"thought": True, "text": "", "thoughtSignature": "dA=="}
    result, deltas = run_chunks(
        impl,
        chunk({"text": "one"}, signed, {"text": "three"}, signed_thought, {"text": "four"}),
    )
    assert as_json(result.parts) == as_json(
        [{"text": "one"}, signed, {"text": "three"}, signed_thought, {"text": "four"}]
    )
    assert deltas == [
        impl.TextDelta(0, 0, "one", False),
        impl.TextDelta(0, 1, "two", False),
        impl.TextDelta(0, 2, "three", False),
        impl.TextDelta(0, 4, "four", False),
    ]
    assert result.text == "onetwothreefour"


def test_p4_other_parts_kept_byte_exact_and_end_the_run(impl: ModuleType) -> None:
    inline = {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
    code = {
        "executableCode": {"language": "PYTHON", "code": "print(1.0)"},
        "zeta": 1.0,
        "alpha": 2,
    }
    unknown = {"thought": True}
    result, deltas = run_chunks(
        impl, chunk({"text": "a"}, inline, {"text": "b"}, code, unknown, {"text": "c"})
    )
    assert as_json(result.parts) == as_json(
        [{"text": "a"}, inline, {"text": "b"}, code, unknown, {"text": "c"}]
    )
    assert b'"zeta":1.0,"alpha":2' in result.to_json()
    assert deltas == [
        impl.TextDelta(0, 0, "a", False),
        impl.TextDelta(0, 2, "b", False),
        impl.TextDelta(0, 5, "c", False),
    ]


def test_p5_signature_kept_verbatim_on_its_part(impl: ModuleType) -> None:
    sig = "ab-_cd=="  # URL-safe alphabet: never re-encoded
    result, _ = run_chunks(
        impl,
        chunk({"text": "x", "thoughtSignature": sig}),
        chunk({"thoughtSignature": sig}),
    )
    assert result.parts == [
        {"text": "x", "thoughtSignature": sig},
        {"thoughtSignature": sig},
    ]


def test_p6_empty_part_dropped(impl: ModuleType) -> None:
    result, _ = run_chunks(impl, chunk({"text": "a"}, {}, {"text": "b"}))
    assert result.parts == [{"text": "ab"}]


def test_p7_function_call_that_is_not_an_object_is_a_p4_part(impl: ModuleType) -> None:
    result, deltas = run_chunks(impl, chunk({"functionCall": "f()"}, {"text": "x"}))
    assert result.parts == [{"functionCall": "f()"}, {"text": "x"}]
    assert result.function_calls == []
    assert deltas == [impl.TextDelta(0, 1, "x", False)]


def test_p8_non_string_text_is_p4_and_p3_text_counts(impl: ModuleType) -> None:
    odd = {"text": 5}
    p3 = {"text": "T", "thought": "yes"}
    p3_thought = {"text": "U", "thought": True, "partMetadata": {}}
    result, deltas = run_chunks(impl, chunk(odd, p3, p3_thought))
    assert as_json(result.parts) == as_json([odd, p3, p3_thought])
    assert deltas == [impl.TextDelta(0, 1, "T", False), impl.TextDelta(0, 2, "U", True)]
    assert (result.text, result.thought_text) == ("T", "U")


def test_p9_text_joins_runs_and_signed_parts_in_part_order(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk({"text": "think", "thought": True}, {"text": "A"}),
        chunk(
            fc({"thoughtSignature": "cw=="}, name="f", args={}),
            {"text": "B", "thoughtSignature": "cw=="},
        ),
        chunk({"text": "C"}, {"text": "!", "thought": True, "thoughtSignature": "cw=="}),
    )
    assert result.text == "ABC"
    assert result.thought_text == "think!"


# --------------------------------------------------------------------------
# C: function calls
# --------------------------------------------------------------------------


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


def test_c4_args_object_sets_top_level_keys(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk(fc(name="f", args={"a": "x", "b": {"c": 1}}, willContinue=True)),
        chunk(fc(partialArgs=[pa("$.a", stringValue="y")], willContinue=True)),
        chunk(fc(args={"b": 2, "z": None}, partialArgs=[pa("$.a", stringValue="z")])),
    )
    assert as_json(result.function_calls[0]["args"]) == as_json({"a": "xyz", "b": 2, "z": None})


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
        'C6: candidate 0, part 1: a streamed function call with id "a" never received a name and was left out; its args: {"n":2}'
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
        'C6: candidate 1, part 0: a streamed function call never received a name and was left out; its args: {"a":1}'
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
        'C5: candidate 0, part 0: partial arg at "$.s.x" skipped: type conflict with the existing value',
        'C5: candidate 0, part 0: partial arg at "$.o[0]" skipped: type conflict with the existing value',
        'C5: candidate 0, part 0: partial arg at "$.l.k" skipped: type conflict with the existing value',
        'C5: candidate 0, part 0: partial arg at "$.l[0].k" skipped: type conflict with the existing value',
        'C5: candidate 0, part 0: partial arg at "$[0]" skipped: type conflict with the existing value',
    ]
    assert as_json(result.function_calls[0]["args"]) == as_json(
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
        f"C5: candidate 0, part 0: partial arg at {json.dumps(path)} skipped: {reason}"
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
        "C5: candidate 0, part 0: partial arg at <missing> skipped: unsupported jsonPath syntax",
        "C5: candidate 0, part 0: partial arg at <not a string> skipped: unsupported jsonPath syntax",
        'C5: candidate 0, part 0: partial arg at "$.a" skipped: stringValue is not a string',
        'C5: candidate 0, part 0: partial arg at "$.a" skipped: numberValue is not a number',
        'C5: candidate 0, part 0: partial arg at "$.a" skipped: numberValue is not a number',
        'C5: candidate 0, part 0: partial arg at "$.a" skipped: boolValue is not a boolean',
    ]
    assert result.function_calls == [{"id": None, "name": "f", "args": {}}]


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
        "C6: candidate 0, part 1: a later chunk carried a different thoughtSignature; the first one was kept"
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
        'C6: candidate 0, part 1: a streamed function call never received a name and was left out; its args: {"p":"café","n":1.5}'
    ]
    assert deltas == [
        impl.TextDelta(0, 0, "a", False),
        impl.CallStart(0, 1, None, None),
        impl.ArgDelta(0, 1, "$.p", "caf\u00e9"),
        impl.ArgDelta(0, 1, "$.n", 1.5),
        impl.TextDelta(0, 2, "b", False),
        impl.TextDelta(0, 2, "c", False),
    ]


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
        'C2: candidate 0, part 0: a later chunk named the call "second" but it is named "first"; the first name was kept'
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
        'C6: candidate 0, part 0: a streamed function call with id "y" never received a name and was left out; its args: {"a":1}',
        'C6: candidate 0, part 1: a streamed function call with id "x" never received a name and was left out; its args: {"a":2}',
        'C6: candidate 1, part 0: a streamed function call never received a name and was left out; its args: {"b":1}',
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
        'C6: candidate 0, part 0: a streamed function call never received a name and was left out; its args: {"a":1}'
    ]


# --------------------------------------------------------------------------
# Deltas, snapshot, close, feed_event, feed_chunk
# --------------------------------------------------------------------------


def test_deltas_for_a_mixed_stream(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    deltas = agg.feed(
        sse(
            chunk({"text": "hmm", "thought": True}),
            chunk(
                fc(
                    {"thoughtSignature": "cw=="},
                    id="w1",
                    name="write",
                    willContinue=True,
                )
            ),
            chunk(
                fc(
                    id="w1",
                    partialArgs=[
                        pa("$.path", stringValue="a.txt"),
                        pa("$.n", numberValue=2),
                    ],
                    willContinue=True,
                )
            ),
            chunk({"text": "ok"}, fc(id="w1")),
            chunk(fc(name="done", args={}), finish="STOP"),
        )
    )
    assert deltas == [
        impl.TextDelta(0, 0, "hmm", True),
        impl.CallStart(0, 1, "w1", "write"),
        impl.ArgDelta(0, 1, "$.path", "a.txt"),
        impl.ArgDelta(0, 1, "$.n", 2),
        impl.TextDelta(0, 2, "ok", False),
        impl.CallEnd(0, 1, {"id": "w1", "name": "write", "args": {"path": "a.txt", "n": 2}}),
        impl.CallStart(0, 3, None, "done"),
        impl.CallEnd(0, 3, {"id": None, "name": "done", "args": {}}),
        impl.Finish(0, "STOP"),
    ]


def test_d1_deltas_are_frozen_hashable_and_matchable(impl: ModuleType) -> None:
    delta = impl.TextDelta(0, 1, "x", False)
    assert delta == impl.TextDelta(candidate=0, index=1, text="x", thought=False)
    assert hash(delta) == hash(impl.TextDelta(0, 1, "x", False))
    assert delta != impl.TextDelta(0, 1, "x", True)
    with pytest.raises(AttributeError):
        delta.text = "y"  # type: ignore[misc]
    match impl.ArgDelta(0, 2, "$.a", 3):
        case impl.ArgDelta(c, i, path, value):
            assert (c, i, path, value) == (0, 2, "$.a", 3)
    assert impl.CallStart.__match_args__ == ("candidate", "index", "id", "name")
    assert impl.CallEnd.__match_args__ == ("candidate", "index", "call")
    assert impl.Finish.__match_args__ == ("candidate", "reason")
    assert impl.StreamError.__match_args__ == ("error",)


def test_deltas_false_returns_nothing_but_aggregates(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(deltas=False)
    assert agg.feed(sse(HELLO, WORLD)) == []
    assert agg.feed_chunk(chunk({"text": "!"})) == []
    with pytest.raises(MalformedStreamError) as info:
        agg.feed(sse(HELLO) + b"data: x\n\n")
    assert info.value.deltas == []
    assert agg.close().text == "Hello world!Hello"


def test_snapshot_mid_stream_renders_open_calls_in_place(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed(
        sse(
            chunk({"text": "a"}),
            chunk(fc({"thoughtSignature": "cw=="}, name="f", willContinue=True)),
            chunk(fc(partialArgs=[pa("$.s", stringValue="pa")], willContinue=True)),
            chunk({"text": "b"}),
        )
    )
    snap = agg.snapshot()
    expected = [
        {"text": "a"},
        {
            "functionCall": {"name": "f", "args": {"s": "pa"}},
            "thoughtSignature": "cw==",
        },
        {"text": "b"},
    ]
    assert as_json(snap.parts) == as_json(expected)
    assert snap.complete is False
    assert snap.function_calls == [{"id": None, "name": "f", "args": {"s": "pa"}}]
    # Mutating a snapshot does not reach the aggregator.
    snap.parts[1]["functionCall"]["args"]["s"] = "changed"
    snap.parts.append({"text": "junk"})
    agg.snapshot().to_dict()["candidates"][0]["content"]["parts"].clear()
    agg.feed(sse(chunk(fc(partialArgs=[pa("$.s", stringValue="rt")]), finish="STOP")))
    result = agg.close()
    assert as_json(result.parts) == as_json(
        [
            {"text": "a"},
            {
                "functionCall": {"name": "f", "args": {"s": "part"}},
                "thoughtSignature": "cw==",
            },
            {"text": "b"},
        ]
    )
    assert result.complete is True


def test_snapshot_copies_kept_parts(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed(sse(chunk({"inlineData": {"mimeType": "a/b", "data": "AA=="}})))
    agg.snapshot().parts[0]["inlineData"]["data"] = "changed"
    assert agg.close().parts == [{"inlineData": {"mimeType": "a/b", "data": "AA=="}}]


def test_d3_close_twice_and_feed_after_close(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed(sse(HELLO) + b"data: {")
    first = agg.close()
    second = agg.close()
    assert second.to_json() == first.to_json()
    assert (
        second.warnings
        == first.warnings
        == [
            f"F6: the stream ended inside an incomplete event at byte {len(sse(HELLO))}; it was dropped and the result is marked truncated"
        ]
    )
    assert second.truncated is True
    with pytest.raises(AggregatorClosed):
        agg.feed(b"data: {}\n\n")
    with pytest.raises(AggregatorClosed):
        agg.feed_event(b"{}")
    with pytest.raises(AggregatorClosed):
        agg.feed_chunk({})


def test_d3_feed_event_counts_and_offsets(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    first = dumps(HELLO)
    assert agg.feed_event(first) == [impl.TextDelta(0, 0, "Hello", False)]
    assert agg.feed_event(dumps(WORLD).decode()) == [
        impl.TextDelta(0, 0, " world", False),
        impl.Finish(0, "STOP"),
    ]
    assert (agg.events_seen, agg.bytes_seen) == (2, len(first) + len(dumps(WORLD)))
    with pytest.raises(MalformedStreamError) as info:
        agg.feed_event("caf\u00e9")
    assert (info.value.kind, info.value.offset, info.value.event_index) == (
        "invalid-json",
        agg.bytes_seen - 5,
        2,
    )
    assert info.value.deltas == []
    assert info.value.errors == [info.value]
    with pytest.raises(MalformedStreamError) as info:
        agg.feed_event(b'{"a": "\xc3"}')
    assert info.value.kind == "invalid-utf8"
    assert agg.events_seen == 4
    assert agg.close().text == "Hello world"


def test_d3_feed_event_size_limit(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(max_event_bytes=5)
    with pytest.raises(MalformedStreamError) as info:
        agg.feed_event(b'{"a": 1}')
    assert info.value.kind == "event-too-large"
    assert str(info.value) == (
        "event 0 at byte 0 is larger than max_event_bytes (5); it was skipped "
        "(raise max_event_bytes if such events are expected)"
    )


def test_d3_feed_chunk_with_a_dict(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    part = {"text": "", "thoughtSignature": b"\xfb\xff\x00"}
    given = chunk({"text": "hi"}, part, finish="STOP")
    assert agg.feed_chunk(given) == [
        impl.TextDelta(0, 0, "hi", False),
        impl.Finish(0, "STOP"),
    ]
    given["candidates"][0]["content"]["parts"][0]["text"] = "mutated by the caller"
    result = agg.close()
    assert result.parts == [{"text": "hi"}, {"text": "", "thoughtSignature": "+/8A"}]
    assert agg.events_seen == 1
    assert agg.bytes_seen == 0


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ({"candidates": [{"x": object()}]}, TypeError),
        ({"usageMetadata": {"n": float("nan")}}, ValueError),
        ({"usageMetadata": {"n": float("inf")}}, ValueError),
        ({1: "x"}, TypeError),
        ({"candidates": {1, 2}}, TypeError),
    ],
)
def test_d3_feed_chunk_rejects_non_json_values(
    impl: ModuleType, bad: Any, error: type[Exception]
) -> None:
    agg = impl.StreamAggregator()
    with pytest.raises(error):
        agg.feed_chunk(bad)
    assert agg.events_seen == 0


def test_d3_feed_chunk_with_a_genai_response(impl: ModuleType) -> None:
    types = pytest.importorskip("google.genai.types")
    response = types.GenerateContentResponse(
        candidates=[
            types.Candidate(
                content=types.Content(
                    role="model",
                    parts=[
                        types.Part(text="Hi", thought=True),
                        types.Part(
                            function_call=types.FunctionCall(id="c1", name="f", args={"a": 1}),
                            thought_signature=b"\xfb\xef\xbe",
                        ),
                    ],
                ),
                finish_reason=types.FinishReason.STOP,
                index=0,
            )
        ],
        model_version="gemini-3-flash-preview",
    )
    agg = impl.StreamAggregator()
    deltas = agg.feed_chunk(response)
    call = {"id": "c1", "name": "f", "args": {"a": 1}}
    assert deltas == [
        impl.TextDelta(0, 0, "Hi", True),
        impl.CallStart(0, 1, "c1", "f"),
        impl.CallEnd(0, 1, call),
        impl.Finish(0, "STOP"),
    ]
    result = agg.close()
    assert as_json(result.parts) == as_json(
        [
            {"text": "Hi", "thought": True},
            {
                "functionCall": {"id": "c1", "args": {"a": 1}, "name": "f"},
                "thoughtSignature": "++++",
            },
        ]
    )
    assert result.model_version == "gemini-3-flash-preview"
    assert result.complete is True


def test_d2_to_dict_to_json_and_to_genai(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        {
            **chunk({"text": "A"}, finish="STOP"),
            "usageMetadata": {"totalTokenCount": 2},
            "modelVersion": "m",
            "responseId": "r",
        },
    )
    expected = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "A"}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {"totalTokenCount": 2},
        "modelVersion": "m",
        "responseId": "r",
    }
    assert as_json(result.to_dict()) == as_json(expected)
    assert result.to_json() == dumps(expected)
    result.to_dict()["candidates"].clear()
    assert len(result.candidates) == 1
    pytest.importorskip("google.genai")
    genai = result.to_genai()
    assert genai.text == "A"
    assert genai.candidates[0].finish_reason == "STOP"


# --------------------------------------------------------------------------
# SseDecoder (F15)
# --------------------------------------------------------------------------


def test_f15_decoder_fields_and_defaults(impl: ModuleType) -> None:
    dec = impl.SseDecoder()
    events = dec.feed(
        b"\xef\xbb\xbfdata: a\r\ndata:b\r\n\r\n"
        b"event: ping\nid: 1\nretry: 50\ndata\n\n"
        b": comment\nevent: x\n\n"
        b"retry: 5x\nid: 2\0\ndata:  two spaces\n\n"
        b"id\ndata: after empty id\n\n"
    )
    assert events == [
        impl.SseEvent("message", "a\nb", None, None),
        impl.SseEvent("ping", "", "1", 50),
        impl.SseEvent("message", " two spaces", "1", None),
        impl.SseEvent("message", "after empty id", "", None),
    ]


def test_f15_decoder_splits_cr_lf_across_chunks_and_replaces_bad_utf8(
    impl: ModuleType,
) -> None:
    dec = impl.SseDecoder()
    assert dec.feed(b"data: caf\xc3") == []
    assert dec.feed(b"\xa9 \xff\r") == []
    assert dec.feed(b"\n\r") == [impl.SseEvent("message", "caf\u00e9 \ufffd", None, None)]
    assert dec.feed(b"\ndata: x\r\r") == [impl.SseEvent("message", "x", None, None)]


def test_f15_decoder_close_dispatches_pending_event(impl: ModuleType) -> None:
    dec = impl.SseDecoder()
    assert dec.feed(b"event: e\ndata: {") == []
    assert dec.close() == [impl.SseEvent("e", "{", None, None)]
    dec = impl.SseDecoder()
    assert dec.feed(b"event: e\n") == []
    assert dec.close() == []


def test_f15_decoder_has_no_aggregator_rules(impl: ModuleType) -> None:
    dec = impl.SseDecoder()
    events = dec.feed(b'{"error": {}}\n\ndata: [DONE]\n\n')
    assert events == [impl.SseEvent("message", "[DONE]", None, None)]


def test_d3_options_must_be_non_negative_ints(impl: ModuleType) -> None:
    with pytest.raises(ValueError, match=r"^max_event_bytes must not be negative, got -1$"):
        impl.StreamAggregator(max_event_bytes=-1)
    with pytest.raises(TypeError, match=r"^max_event_bytes must be an int, got bool$"):
        impl.StreamAggregator(max_event_bytes=True)
    with pytest.raises(TypeError, match=r"^max_array_index must be an int, got float$"):
        impl.StreamAggregator(max_array_index=1.5)


def test_f8_feed_event_str_with_lone_surrogate_is_invalid_utf8(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    with pytest.raises(MalformedStreamError) as info:
        agg.feed_event('{"a": "\ud800"}')
    assert (info.value.kind, info.value.offset, info.value.event_index) == ("invalid-utf8", 0, 0)
    assert agg.events_seen == 1
