"""Framing (F1-F7, F9, F11-F14, F12a): SSE lines and blocks, the JSON-array framing, offsets.

Every test runs against both implementations through the ``impl`` fixture
(the Rust module ``fastagg._fastagg`` and the pure-Python ``fastagg.reference``)
and uses only the public API.
"""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from fastagg.errors import MalformedStreamError
from streams import HELLO, WORLD, chunk, dumps, fc, feed_in_pieces, pa, run, sse, view


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
    assert result.warnings == [f"data after the end of the JSON array at byte {offset} was ignored"]
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
            f"the stream ended inside an incomplete event at byte {offset}; "
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


def test_f6_unterminated_complete_event_processed_with_warning(
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
            f"the stream ended inside an unterminated event at byte {len(sse(HELLO))}; "
            "it was complete JSON and was processed"
        )
    ]
    assert agg.events_seen == 2


def test_f6_final_line_without_line_end_is_processed(impl: ModuleType) -> None:
    result = run(impl, b"data: " + dumps(WORLD))
    assert result.parts == [{"text": " world"}]
    assert result.warnings == [
        "the stream ended inside an unterminated event at byte 0; it was complete JSON and was processed"
    ]


def test_f6_incomplete_event_dropped_and_truncated(impl: ModuleType) -> None:
    body = sse(HELLO) + b'data: {"candidates": [{"content": {"parts": [{"text": " wor'
    result = run(impl, body)
    assert result.parts == [{"text": "Hello"}]
    assert result.truncated is True
    assert result.complete is False
    assert result.warnings == [
        (
            f"the stream ended inside an incomplete event at byte {len(sse(HELLO))}; "
            "it was dropped and the result is marked truncated"
        )
    ]


def test_f14_oversized_pending_event_dropped(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(max_event_bytes=10)
    agg.feed(b"data: " + b"x" * 50)
    result = agg.close()
    assert result.truncated is True
    assert result.warnings == [
        "the stream ended inside an incomplete event at byte 0; it was dropped and the result is marked truncated",
        "no event was found in 56 bytes of body (expected a streamGenerateContent?alt=sse response)",
    ]


def test_f14_no_event_found_warning(impl: ModuleType) -> None:
    body = b"<html><body>Not Found</body></html>\n"
    result = run(impl, body)
    assert result.parts == []
    assert result.warnings == [
        f"no event was found in {len(body)} bytes of body (expected a streamGenerateContent?alt=sse response)"
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
            f"event 1 at byte {offset} is not valid JSON; it was skipped "
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
            f"the stream ended inside an incomplete event at byte {len(sse(HELLO))}; "
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


def test_f12a_garbage_after_an_element_starts_the_next_element(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(strict=False)
    first = dumps(chunk({"text": "Hi"}))
    # the element "x {...}" starts after the space: only whitespace outside strings is trimmed
    assert agg.feed(b"[" + first + b' x {"b":2}]') == [impl.TextDelta(0, 0, "Hi", False)]
    result = agg.close()
    assert result.parts == [{"text": "Hi"}]
    assert [d.code for d in result.diagnostics] == ["invalid_json"]
    assert result.warnings == [
        f"event 1 at byte {2 + len(first)} is not valid JSON; it was skipped "
        "(is this the body of a streamGenerateContent response?)"
    ]
