"""The generic WHATWG decoder ``SseDecoder`` (F15).

Every test runs against both implementations through the ``impl`` fixture
(the Rust module ``fastagg._fastagg`` and the pure-Python ``fastagg.reference``)
and uses only the public API.
"""

from __future__ import annotations

from types import ModuleType


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
