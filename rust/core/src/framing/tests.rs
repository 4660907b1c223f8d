//! Tests of the framers through `BodyFramer` and `SseDecoder` (rules named per test).

use super::*;
use proptest::prelude::*;

/// Owned copy of a [`Frame`], for comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
enum F {
    P(u64, Vec<u8>),
    Big(u64),
    W(String),
    U(u64, Vec<u8>),
    I(u64),
}

#[test]
fn f17_an_oversized_event_frees_its_buffer_and_a_large_one_is_not_kept() {
    let max = 4 << 20;
    let mut framer = BodyFramer::new(max);
    let mut out = Vec::new();
    framer.feed(b"data: {\"a\":\"", &mut |f| out.push(own(f)));
    let piece = vec![b'x'; 64 * 1024];
    let mut highest = 0;
    for _ in 0..(2 * max / piece.len()) {
        framer.feed(&piece, &mut |f| out.push(own(f)));
        highest = highest.max(framer.sse.ev.buf.capacity());
    }
    assert!(highest <= max, "{highest}");
    assert_eq!(framer.sse.ev.buf.capacity(), 0);
    framer.feed(b"\"}\n\n", &mut |f| out.push(own(f)));
    assert_eq!(out, vec![F::Big(0)]);
    // A large event that fits is delivered; its buffer is freed afterwards.
    let mut big = b"data: {\"a\":\"".to_vec();
    big.extend(vec![b'y'; 2 << 20]);
    for part in big.chunks(64 * 1024) {
        framer.feed(part, &mut |f| out.push(own(f)));
    }
    framer.feed(b"\"}\n\n", &mut |f| out.push(own(f)));
    assert_eq!(out.len(), 2);
    assert_eq!(framer.sse.ev.buf.capacity(), 0);
}

#[test]
fn f17_take_released_reports_each_dropped_oversized_buffer_once() {
    let mut framer = BodyFramer::new(4 << 20);
    let mut sink = |_: Frame<'_>| {};
    // A large event that fits: its buffer is freed at its end, not reported
    // (returning its pages would be paid again by the next large event).
    let piece = vec![b'x'; 64 * 1024];
    framer.feed(b"data: {\"a\":\"", &mut sink);
    for _ in 0..32 {
        framer.feed(&piece, &mut sink);
    }
    framer.feed(b"\"}\n\n", &mut sink);
    assert!(!framer.take_released());
    // An oversized one: its buffer is dropped once it passes the limit.
    framer.feed(b"data: {\"a\":\"", &mut sink);
    for _ in 0..80 {
        framer.feed(&piece, &mut sink);
    }
    assert!(framer.take_released());
    assert!(!framer.take_released());
    framer.feed(b"\"}\n\ndata: {}\n\n", &mut sink);
    assert!(!framer.take_released());
}

fn own(f: Frame<'_>) -> F {
    match f {
        Frame::Payload { offset, data } => F::P(offset, data.to_vec()),
        Frame::TooLarge { offset } => F::Big(offset),
        Frame::Warning(w) | Frame::Unreadable(w) => F::W(w.message()),
        Frame::Unterminated { offset, data } => F::U(offset, data.to_vec()),
        Frame::Incomplete { offset } => F::I(offset),
    }
}

fn p(o: u64, s: &str) -> F {
    F::P(o, s.as_bytes().to_vec())
}

fn u(o: u64, s: &str) -> F {
    F::U(o, s.as_bytes().to_vec())
}

fn frames_chunks(max: usize, chunks: &[&[u8]]) -> Vec<F> {
    let mut fr = BodyFramer::new(max);
    let mut v = Vec::new();
    for c in chunks {
        fr.feed(c, &mut |f| v.push(own(f)));
    }
    fr.close(&mut |f| v.push(own(f)));
    v
}

fn frames(body: &[u8]) -> Vec<F> {
    frames_chunks(1 << 20, &[body])
}

/// Whole, byte by byte, and in two pieces at every position: all equal.
fn frames_all_splits(max: usize, body: &[u8]) -> Vec<F> {
    let whole = frames_chunks(max, &[body]);
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(frames_chunks(max, &bytes), whole, "1-byte chunks");
    for k in 0..=body.len() {
        let (a, b) = body.split_at(k);
        assert_eq!(frames_chunks(max, &[a, b]), whole, "split at {k}");
    }
    whole
}

fn decode_chunks(chunks: &[&[u8]]) -> Vec<SseEvent> {
    let mut d = SseDecoder::new();
    let mut out = Vec::new();
    for c in chunks {
        d.feed(c, &mut out);
    }
    d.close(&mut out);
    out
}

fn decode_all_splits(body: &[u8]) -> Vec<SseEvent> {
    let whole = decode_chunks(&[body]);
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(decode_chunks(&bytes), whole, "1-byte chunks");
    for k in 0..=body.len() {
        let (a, b) = body.split_at(k);
        assert_eq!(decode_chunks(&[a, b]), whole, "split at {k}");
    }
    whole
}

fn ev(event: &str, data: &str, id: Option<&str>, retry: Option<u64>) -> SseEvent {
    SseEvent {
        event: event.into(),
        data: data.into(),
        id: id.map(Into::into),
        retry,
    }
}

// ----- F1 framing detection -------------------------------------------

#[test]
fn f1_bom_is_dropped_and_counted_in_offsets() {
    let body = b"\xEF\xBB\xBFdata: {\"a\":1}\n\n";
    assert_eq!(frames_all_splits(1000, body), vec![p(3, "{\"a\":1}")]);
}

#[test]
fn f1_partial_bom_is_content_of_an_ignored_line() {
    let body = b"\xEF\xBBdata: {}\n\ndata: {\"b\":2}\n\n";
    assert_eq!(frames_all_splits(1000, body), vec![p(12, "{\"b\":2}")]);
}

#[test]
fn f1_array_detected_after_bom_and_whitespace() {
    let body = b"\xEF\xBB\xBF \r\n\t[{\"a\":1}]";
    assert_eq!(frames_all_splits(1000, body), vec![p(8, "{\"a\":1}")]);
}

#[test]
fn f1_decision_waits_for_first_non_whitespace_byte() {
    let got = frames_chunks(1000, &[b"  ", b"\n", b"", b"[", b"{}", b"]"]);
    assert_eq!(got, vec![p(4, "{}")]);
    let got = frames_chunks(1000, &[b"\n\n", b"data: {}", b"\n\n"]);
    assert_eq!(got, vec![p(2, "{}")]);
}

#[test]
fn f1_leading_spaces_make_first_sse_line_an_unknown_field() {
    let body = b"  data: {\"x\":1}\n\ndata: {}\n\n";
    assert_eq!(frames_all_splits(1000, body), vec![p(17, "{}")]);
}

#[test]
fn f1_empty_and_whitespace_bodies_give_nothing() {
    assert_eq!(frames(b""), vec![]);
    assert_eq!(frames(b" \r\n "), vec![]);
    assert_eq!(frames(b"\xEF\xBB\xBF"), vec![]);
    assert_eq!(frames(b"\xEF\xBB"), vec![]);
}

// ----- F2 / F3 SSE lines -----------------------------------------------

#[test]
fn f2_crlf_lf_and_lone_cr_end_lines() {
    let body =
        b"data: {\"a\":1}\r\n\r\ndata: {\"b\":2}\n\ndata: {\"c\":3}\r\rdata: {\"d\":4}\r\n\n";
    assert_eq!(
        frames_all_splits(1000, body),
        vec![
            p(0, "{\"a\":1}"),
            p(17, "{\"b\":2}"),
            p(32, "{\"c\":3}"),
            p(47, "{\"d\":4}"),
        ]
    );
}

#[test]
fn f2_cr_lf_split_across_chunks_is_one_line_end() {
    // CR|LF split: one line end, so the event is still pending after the
    // LF and dispatched by the following blank line only.
    let got = frames_chunks(
        1000,
        &[b"data: {\"a\":1}\r", b"\ndata: {\"b\":2}\r", b"\n\r", b"\n"],
    );
    assert_eq!(got, vec![p(0, "{\"a\":1}\n{\"b\":2}")]);
    let got = frames_chunks(1000, &[b"data: {}\r", b"\n", b"\r", b"\n"]);
    assert_eq!(got, vec![p(0, "{}")]);
}

#[test]
fn f2_cr_at_chunk_end_dispatches_without_waiting() {
    let mut fr = BodyFramer::new(100);
    let mut v = Vec::new();
    fr.feed(b"data: {}\r\r", &mut |f| v.push(own(f)));
    assert_eq!(v, vec![p(0, "{}")]);
    fr.feed(b"\ndata: {\"z\":0}\n\n", &mut |f| v.push(own(f)));
    fr.close(&mut |f| v.push(own(f)));
    assert_eq!(v, vec![p(0, "{}"), p(11, "{\"z\":0}")]);
}

#[test]
fn f2_data_without_space_and_only_one_space_removed() {
    let body = b"data:{\"a\":1}\n\ndata:  {\"b\":2}\n\n";
    assert_eq!(
        frames_all_splits(1000, body),
        vec![p(0, "{\"a\":1}"), p(14, " {\"b\":2}")]
    );
}

#[test]
fn f2_multi_line_data_joined_with_newline() {
    let body = b"data: {\"a\":\ndata:1}\r\ndata\n\n";
    assert_eq!(frames_all_splits(1000, body), vec![p(0, "{\"a\":\n1}\n")]);
}

#[test]
fn f2_comments_and_other_fields_are_ignored() {
    let body = b": keep-alive\nevent: update\nid: 7\nretry: 100\ndata: {\"a\":1}\nfoo: bar\ndatax: 1\nDATA: 2\n\n: bye\n\n";
    assert_eq!(frames_all_splits(1000, body), vec![p(44, "{\"a\":1}")]);
}

#[test]
fn f2_field_lines_without_data_dispatch_nothing() {
    let body = b"event: x\nid: 1\n\n\n\ndata: {}\n\n";
    assert_eq!(frames_all_splits(1000, body), vec![p(18, "{}")]);
}

#[test]
fn f3_unicode_line_separators_are_content() {
    let body = "data: {\"t\":\"a\u{2028}b\u{2029}c\u{85}d\"}\r\n\r\n".as_bytes();
    assert_eq!(
        frames_all_splits(1000, body),
        vec![p(0, "{\"t\":\"a\u{2028}b\u{2029}c\u{85}d\"}")]
    );
}

#[test]
fn f7_payload_is_borrowed_from_the_input_chunk() {
    let body = b"data: {\"a\":1}\r\n\r\n";
    let mut fr = BodyFramer::new(100);
    let mut seen = 0;
    fr.feed(body, &mut |f| {
        if let Frame::Payload { data, .. } = f {
            let range = body.as_ptr_range();
            assert!(range.contains(&data.as_ptr()));
            seen += 1;
        }
    });
    assert_eq!(seen, 1);
    assert!(fr.sse.ev.buf.capacity() == 0, "no copy was made");
}

// ----- F4 / F13 bare JSON blocks ---------------------------------------

#[test]
fn f4_single_line_bare_block() {
    let body = b"{\"error\": {\"code\": 429}}\n";
    assert_eq!(
        frames_all_splits(1000, body),
        vec![p(0, "{\"error\": {\"code\": 429}}")]
    );
}

#[test]
fn f4_pretty_printed_block_over_several_lines() {
    let body = b"data: {\"a\":1}\r\n\r\n{\r\n  \"error\": {\r\n    \"code\": 503\r\n  }\r\n}\r\ndata: {\"b\":2}\r\n\r\n";
    assert_eq!(
        frames_all_splits(1000, body),
        vec![
            p(0, "{\"a\":1}"),
            p(17, "{\n  \"error\": {\n    \"code\": 503\n  }\n}"),
            p(59, "{\"b\":2}"),
        ]
    );
}

#[test]
fn f4_braces_inside_strings_and_escapes_do_not_count() {
    let body = b"{\"m\": \"}}} \\\" {{\",\n\"n\": \"\\\\\"}\n";
    assert_eq!(
        frames_all_splits(1000, body),
        vec![p(0, "{\"m\": \"}}} \\\" {{\",\n\"n\": \"\\\\\"}")]
    );
}

#[test]
fn f4_block_ends_only_at_end_of_line() {
    let body = b"{\"a\":1} trailing\nnext\n";
    assert_eq!(
        frames_all_splits(1000, body),
        vec![p(0, "{\"a\":1} trailing")]
    );
}

#[test]
fn f13_block_ends_with_the_line_on_which_braces_balance() {
    let body = b"{\"error\":{}} {\ndata: {}\n\n";
    assert_eq!(
        frames_all_splits(1000, body),
        vec![p(0, "{\"error\":{}} {"), p(15, "{}")]
    );
}

#[test]
fn f4_blank_and_data_lines_inside_an_open_block_belong_to_it() {
    let body = b"{\n\ndata: x\n}\n";
    assert_eq!(frames_all_splits(1000, body), vec![p(0, "{\n\ndata: x\n}")]);
}

#[test]
fn f13_brace_line_inside_an_event_is_ignored() {
    let body = b"data: {\"a\":\n{\"b\":2}\ndata: 1}\n\n";
    assert_eq!(frames_all_splits(1000, body), vec![p(0, "{\"a\":\n1}")]);
}

// ----- F5 / F9 ignored payloads ----------------------------------------

#[test]
fn f5_done_is_ignored() {
    let body = b"data: {}\n\ndata: [DONE]\n\ndata:[DONE]\n\ndata: [DONE] \n\n";
    assert_eq!(
        frames_all_splits(1000, body),
        vec![p(0, "{}"), p(37, "[DONE] ")]
    );
}

#[test]
fn f9_empty_and_whitespace_payloads_are_ignored() {
    let body = b"data:\n\ndata: \t \n\ndata\ndata\n\ndata: {}\n\n";
    assert_eq!(frames_all_splits(1000, body), vec![p(28, "{}")]);
}

// ----- F9 offsets ------------------------------------------------------

#[test]
fn f9_offset_is_first_data_line_of_event() {
    let body = b"event: a\r\n: c\r\ndata: 1\r\ndata: 2\r\n\r\n";
    assert_eq!(frames_all_splits(1000, body), vec![p(15, "1\n2")]);
}

#[test]
fn f9_offsets_across_chunks_count_everything_fed() {
    let got = frames_chunks(1000, &[b"data: {}\n", b"\n", b"\n: x\n", b"{\n}\n"]);
    assert_eq!(got, vec![p(0, "{}"), p(15, "{\n}")]);
}

// ----- F12 array framing -----------------------------------------------

#[test]
fn f12_pretty_printed_array() {
    let body = b"[{\n  \"a\": 1\n}\n,\r\n{\n  \"b\": [1, {\"c\": \"],}\"}]\n}\n]";
    assert_eq!(
        frames_all_splits(1000, body),
        vec![
            p(1, "{\n  \"a\": 1\n}"),
            p(17, "{\n  \"b\": [1, {\"c\": \"],}\"}]\n}"),
        ]
    );
}

#[test]
fn f12_element_dispatched_as_soon_as_it_is_complete() {
    let mut fr = BodyFramer::new(1000);
    let mut v = Vec::new();
    fr.feed(b"[{\"a\":1}\n", &mut |f| v.push(own(f)));
    assert_eq!(v, vec![p(1, "{\"a\":1}")]);
    fr.feed(b",\r\n{\"b\":2}", &mut |f| v.push(own(f)));
    assert_eq!(v.len(), 2);
    fr.feed(b"\n]\n", &mut |f| v.push(own(f)));
    fr.close(&mut |f| v.push(own(f)));
    assert_eq!(v, vec![p(1, "{\"a\":1}"), p(12, "{\"b\":2}")]);
}

#[test]
fn f12_empty_elements_ignored_and_scalars_trimmed() {
    assert_eq!(frames_all_splits(1000, b"[]"), vec![]);
    assert_eq!(frames_all_splits(1000, b"[ , ,]"), vec![]);
    assert_eq!(
        frames_all_splits(1000, b"[ 1 , \"a,]\" ,{},]"),
        vec![p(2, "1"), p(6, "\"a,]\""), p(13, "{}")]
    );
}

#[test]
fn f12_junk_after_a_complete_element_starts_a_new_element() {
    assert_eq!(
        frames_all_splits(1000, b"[{\"a\":1} x {\"b\":2}]"),
        vec![p(1, "{\"a\":1}"), p(9, "x {\"b\":2}")]
    );
}

#[test]
fn f12_data_after_the_array_warns_once() {
    let body = b"[{}]\n  x\ny]\n";
    assert_eq!(
        frames_all_splits(1000, body),
        vec![
            p(1, "{}"),
            F::W("data after the end of the JSON array at byte 7 was ignored".into()),
        ]
    );
    assert_eq!(frames_all_splits(1000, b"[{}] \r\n\t "), vec![p(1, "{}")]);
}

// ----- F11 size limit --------------------------------------------------

#[test]
fn f11_too_large_event_then_next_event_is_fine() {
    let body = b"data: 0123456789\n\ndata: 012345678\n\n";
    assert_eq!(
        frames_all_splits(9, body),
        vec![F::Big(0), p(18, "012345678")]
    );
}

#[test]
fn f11_size_counts_joined_data_lines() {
    // "01234\n567" is 9 bytes; "01234\n5678" is 10.
    assert_eq!(
        frames_all_splits(9, b"data: 01234\ndata: 567\n\n"),
        vec![p(0, "01234\n567")]
    );
    assert_eq!(
        frames_all_splits(9, b"data: 01234\ndata: 5678\n\n"),
        vec![F::Big(0)]
    );
}

#[test]
fn f11_oversize_data_line_in_tiny_chunks_is_not_buffered() {
    let max = 1000;
    let mut fr = BodyFramer::new(max);
    let mut v = Vec::new();
    fr.feed(b"data: ", &mut |f| v.push(own(f)));
    let chunk = [b'x'; 7];
    for _ in 0..20_000 {
        fr.feed(&chunk, &mut |f| v.push(own(f)));
        assert!(fr.sse.ev.buf.len() <= max);
    }
    assert!(fr.sse.ev.buf.capacity() <= max);
    for b in b"\r\n\r\ndata: {}\r\n\r\n" {
        fr.feed(std::slice::from_ref(b), &mut |f| v.push(own(f)));
    }
    fr.close(&mut |f| v.push(own(f)));
    assert_eq!(v, vec![F::Big(0), p(140_010, "{}")]);
}

#[test]
fn f11_long_ignored_lines_are_not_buffered() {
    let mut body = b": ".to_vec();
    body.extend_from_slice(&[b'c'; 5000]);
    body.extend_from_slice(b"\nevent: ");
    body.extend_from_slice(&[b'e'; 5000]);
    body.extend_from_slice(b"\ndata: {}\n\n");
    let chunks: Vec<&[u8]> = body.chunks(3).collect();
    let got = frames_chunks(10, &chunks);
    assert_eq!(got, vec![p(10_011, "{}")]);
}

#[test]
fn f11_block_and_array_element_too_large() {
    assert_eq!(
        frames_all_splits(10, b"{\n\"a\": 12345\n}\ndata: {}\n\n"),
        vec![F::Big(0), p(15, "{}")]
    );
    assert_eq!(
        frames_all_splits(10, b"[{\"a\":123456}, {\"b\":1}   ,\"12345678\"   ]"),
        vec![F::Big(1), p(15, "{\"b\":1}"), p(26, "\"12345678\"")]
    );
}

#[test]
fn f11_trailing_whitespace_of_an_element_does_not_count() {
    let mut body = b"[1".to_vec();
    body.extend_from_slice(&[b' '; 100]);
    body.extend_from_slice(b",2]");
    let chunks: Vec<&[u8]> = body.chunks(7).collect();
    assert_eq!(frames_chunks(5, &chunks), vec![p(1, "1"), p(103, "2")]);
}

// ----- F14 close -------------------------------------------------------

#[test]
fn f14_close_with_unterminated_data_event() {
    assert_eq!(
        frames_all_splits(100, b"data: {\"a\":1}\n"),
        vec![u(0, "{\"a\":1}")]
    );
    assert_eq!(
        frames_all_splits(100, b"data: {\"a\":1}\r\ndata: 2"),
        vec![u(0, "{\"a\":1}\n2")]
    );
}

#[test]
fn f14_final_line_without_line_end_is_processed() {
    assert_eq!(
        frames_all_splits(100, b"data: {}\n\ndata"),
        vec![p(0, "{}")]
    );
    assert_eq!(frames_all_splits(100, b"data: {}\n\ndat"), vec![p(0, "{}")]);
    assert_eq!(
        frames_all_splits(100, b"{\"a\": {}}"),
        vec![p(0, "{\"a\": {}}")]
    );
    assert_eq!(
        frames_all_splits(100, b"{\n\"a\": 1\n}"),
        vec![p(0, "{\n\"a\": 1\n}")]
    );
}

#[test]
fn f14_pending_cr_was_already_a_line_end() {
    assert_eq!(frames_all_splits(100, b"data: {}\r\r"), vec![p(0, "{}")]);
    assert_eq!(frames_all_splits(100, b"data: {}\r"), vec![u(0, "{}")]);
}

#[test]
fn f14_close_with_unbalanced_block_is_incomplete() {
    assert_eq!(
        frames_all_splits(100, b"data: {}\n\n{\n  \"error\": {\n"),
        vec![p(0, "{}"), F::I(10)]
    );
    assert_eq!(frames_all_splits(100, b"{\"a\": \"}"), vec![F::I(0)]);
}

#[test]
fn f14_close_with_oversized_pending_event_is_incomplete() {
    assert_eq!(frames_all_splits(4, b"data: 12345"), vec![F::I(0)]);
    assert_eq!(frames_all_splits(4, b"[{\"a\":1"), vec![F::I(1)]);
}

#[test]
fn f14_close_ignores_pending_done_and_whitespace() {
    assert_eq!(frames_all_splits(100, b"data: [DONE]"), vec![]);
    assert_eq!(frames_all_splits(100, b"data: \n"), vec![]);
}

#[test]
fn f14_close_with_pending_array_element() {
    assert_eq!(
        frames_all_splits(100, b"[{\"a\":1},\n {\"b\":"),
        vec![p(1, "{\"a\":1}"), u(11, "{\"b\":")]
    );
    assert_eq!(
        frames_all_splits(100, b"[{\"a\":1},\n 12  "),
        vec![p(1, "{\"a\":1}"), u(11, "12")]
    );
    assert_eq!(
        frames_all_splits(100, b"[{\"a\":1}\n"),
        vec![p(1, "{\"a\":1}")]
    );
    assert_eq!(
        frames_all_splits(100, b"[{\"a\":\"x  "),
        vec![u(1, "{\"a\":\"x  ")]
    );
}

#[test]
fn f14_feed_and_close_after_close_do_nothing() {
    let mut fr = BodyFramer::new(100);
    let mut v = Vec::new();
    fr.feed(b"data: {}", &mut |f| v.push(own(f)));
    fr.close(&mut |f| v.push(own(f)));
    fr.feed(b"\n\ndata: {}\n\n", &mut |f| v.push(own(f)));
    fr.close(&mut |f| v.push(own(f)));
    assert_eq!(v, vec![u(0, "{}")]);
}

// ----- F15 SseDecoder --------------------------------------------------

#[test]
fn f15_decoder_basic_fields() {
    let body = b"\xEF\xBB\xBFevent: add\r\nid: 1\r\nretry: 250\r\ndata: a\r\ndata:b\r\n\r\n: c\rdata: x\r\rid\nretry: 1x\ndata:  y\n\n";
    assert_eq!(
        decode_all_splits(body),
        vec![
            ev("add", "a\nb", Some("1"), Some(250)),
            ev("message", "x", Some("1"), None),
            ev("message", " y", Some(""), None),
        ]
    );
}

#[test]
fn f15_decoder_empty_data_events() {
    let body = b"data\n\ndata\ndata\n\ndata:\n\n";
    assert_eq!(
        decode_all_splits(body),
        vec![
            ev("message", "", None, None),
            ev("message", "\n", None, None),
            ev("message", "", None, None),
        ]
    );
}

#[test]
fn f15_decoder_event_type_and_retry_reset_without_data() {
    let body = b"event: x\nretry: 5\n\ndata: 1\n\n";
    assert_eq!(
        decode_all_splits(body),
        vec![ev("message", "1", None, None)]
    );
}

#[test]
fn f15_decoder_id_with_nul_is_ignored_and_id_persists() {
    let body = b"id: a\ndata: 1\n\nid: b\x00c\ndata: 2\n\ndata: 3\n\n";
    assert_eq!(
        decode_all_splits(body),
        vec![
            ev("message", "1", Some("a"), None),
            ev("message", "2", Some("a"), None),
            ev("message", "3", Some("a"), None),
        ]
    );
}

#[test]
fn f15_decoder_retry_must_be_digits() {
    let body = b"retry: 10\nretry: -1\nretry:\nretry: 99999999999999999999999\ndata: a\n\nretry: 007\ndata: b\n\n";
    assert_eq!(
        decode_all_splits(body),
        vec![
            ev("message", "a", None, Some(10)),
            ev("message", "b", None, Some(7))
        ]
    );
}

#[test]
fn f15_decoder_invalid_utf8_is_replaced() {
    let body = "data: \u{e9}t\u{e9} \u{1F600}\n\n".as_bytes().to_vec();
    assert_eq!(
        decode_all_splits(&body),
        vec![ev("message", "\u{e9}t\u{e9} \u{1F600}", None, None)]
    );
    let body = b"data: a\xFFb\xE2\x82\n\n";
    assert_eq!(
        decode_all_splits(body),
        vec![ev("message", "a\u{FFFD}b\u{FFFD}", None, None)]
    );
}

#[test]
fn f15_decoder_bom_only_at_start() {
    let body = b"\xEF\xBB\xBFdata: 1\n\n\xEF\xBB\xBFdata: 2\n\n";
    assert_eq!(
        decode_all_splits(body),
        vec![ev("message", "1", None, None)]
    );
}

#[test]
fn f15_decoder_close_dispatches_pending_event() {
    assert_eq!(
        decode_all_splits(b"data: 1\ndata: 2"),
        vec![ev("message", "1\n2", None, None)]
    );
    assert_eq!(
        decode_all_splits(b"event: e\ndata"),
        vec![ev("e", "", None, None)]
    );
    assert_eq!(decode_all_splits(b"event: e\n"), vec![]);
    assert_eq!(
        decode_all_splits(b"data: 1\r"),
        vec![ev("message", "1", None, None)]
    );
}

#[test]
fn f15_decoder_does_not_know_blocks_or_done() {
    let body = b"{\"a\":\n1}\n\ndata: [DONE]\n\n";
    assert_eq!(
        decode_all_splits(body),
        vec![ev("message", "[DONE]", None, None)]
    );
}

// ----- Properties (F7) -------------------------------------------------

fn piece_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"data: ".to_vec()),
        Just(b"data:".to_vec()),
        Just(b"data".to_vec()),
        Just(b"da".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\r\n\r\n".to_vec()),
        Just(b": comment".to_vec()),
        Just(b"event: e".to_vec()),
        Just(b"id: 1".to_vec()),
        Just(b"[DONE]".to_vec()),
        Just(b"{".to_vec()),
        Just(b"}".to_vec()),
        Just(b"[".to_vec()),
        Just(b"]".to_vec()),
        Just(b",".to_vec()),
        Just(b"\"".to_vec()),
        Just(b"\\".to_vec()),
        Just(b" ".to_vec()),
        Just(b"\xEF\xBB\xBF".to_vec()),
        Just("\u{e9}\u{2028}".as_bytes().to_vec()),
        Just(b"{\"a\": \"x}\"}".to_vec()),
        "[a-z0-9]{1,12}".prop_map(String::into_bytes),
    ]
}

fn body_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(piece_strategy(), 0..40).prop_map(|v| v.concat())
}

fn chunked(body: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut prev = 0;
    for c in cuts {
        out.push(body[prev..c].to_vec());
        prev = c;
    }
    out.push(body[prev..].to_vec());
    out
}

fn unreadable(f: &[F]) -> Option<&str> {
    match f {
        [F::W(w)] if w.starts_with("the body is ") || w.starts_with("the body's lines ") => Some(w),
        _ => None,
    }
}

#[test]
fn u4_a_gzip_or_zlib_body_is_unreadable_however_split() {
    let gzip = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xab\xae\x05\x00";
    let got = frames_all_splits(1 << 20, gzip);
    let text = unreadable(&got).expect("one U4 frame");
    assert!(text.starts_with("the body is gzip-compressed"), "{text}");
    for zlib in [&b"\x78\x9c\xab\xae\x05\x00"[..], b"\x78\x01x", b"\x78\xdax"] {
        let got = frames_all_splits(1 << 20, zlib);
        assert!(unreadable(&got)
            .expect("U4")
            .starts_with("the body is zlib-compressed"));
    }
    // Only the two header bytes at the very start count.
    assert_eq!(frames_all_splits(1 << 20, b"\x1f"), vec![]);
    assert_eq!(
        frames_all_splits(1 << 20, b"xy\ndata: {}\n\n"),
        vec![p(3, "{}")]
    );
    assert_eq!(
        frames_all_splits(1 << 20, b"\n\x1f\x8b\ndata: {}\n\n"),
        vec![p(4, "{}")]
    );
}

#[test]
fn u5_lines_fed_without_their_line_ends_are_unreadable_however_split() {
    let body = b"data: {\"a\":\"}\"}data: {\"b\":2}data: {\"c\":3}";
    let got = frames_all_splits(1 << 20, body);
    let text = unreadable(&got).expect("one U5 frame");
    assert!(
        text.starts_with("the body's lines were fed without their line ends: the line at byte 0"),
        "{text}"
    );
    // Within max_event_bytes only (the object and `data:`: 14 bytes here).
    assert!(unreadable(&frames_all_splits(14, body)).is_some());
    assert_eq!(unreadable(&frames_all_splits(13, body)), None);
}

#[test]
fn u5_valid_streams_are_not_taken_for_joined_lines() {
    // `}data:` inside a string of a single unterminated event.
    let one = b"data: {\"t\":\"a}data: b\"}";
    assert_eq!(
        frames_all_splits(1 << 20, one),
        vec![u(0, "{\"t\":\"a}data: b\"}")]
    );
    // Only the first line, and only its first `}data:`.
    let later = b"data: {}\n\ndata: {}data: {}";
    assert!(unreadable(&frames_all_splits(1 << 20, later)).is_none());
    let first_only = b"data: {\"t\":\"}data:\"}data: {}";
    assert!(unreadable(&frames_all_splits(1 << 20, first_only)).is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn f7_framer_any_split_gives_same_frames(
        body in body_strategy(),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
        max in prop_oneof![Just(1usize << 20), 0usize..40],
    ) {
        let whole = frames_chunks(max, &[&body]);
        let chunks = chunked(&body, &cuts);
        let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        prop_assert_eq!(&frames_chunks(max, &refs), &whole);
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        prop_assert_eq!(&frames_chunks(max, &bytes), &whole);
    }

    #[test]
    fn f7_array_framer_any_split_gives_same_frames(
        body in prop::collection::vec(piece_strategy(), 0..40)
            .prop_map(|v| { let mut b = b"[".to_vec(); b.extend(v.concat()); b }),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
        max in prop_oneof![Just(1usize << 20), 0usize..40],
    ) {
        let whole = frames_chunks(max, &[&body]);
        let chunks = chunked(&body, &cuts);
        let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        prop_assert_eq!(&frames_chunks(max, &refs), &whole);
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        prop_assert_eq!(&frames_chunks(max, &bytes), &whole);
    }

    #[test]
    fn f7_decoder_any_split_gives_same_events(
        body in body_strategy(),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let whole = decode_chunks(&[&body]);
        let chunks = chunked(&body, &cuts);
        let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        prop_assert_eq!(&decode_chunks(&refs), &whole);
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        prop_assert_eq!(&decode_chunks(&bytes), &whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        body in prop::collection::vec(any::<u8>(), 0..512),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
        max in 0usize..64,
    ) {
        let chunks = chunked(&body, &cuts);
        let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        let whole = frames_chunks(max, &[&body]);
        prop_assert_eq!(&frames_chunks(max, &refs), &whole);
        let _ = decode_chunks(&refs);
        let mut with_bracket = b"[".to_vec();
        with_bracket.extend_from_slice(&body);
        let _ = frames_chunks(max, &[&with_bracket]);
    }
}
