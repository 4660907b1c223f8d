//! Tests of the aggregation pipeline through `Aggregator` (rules named per test).

use super::*;
use proptest::prelude::*;
use serde_json::json;

fn sse(events: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in events {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(e.to_string().as_bytes());
        out.extend_from_slice(b"\r\n\r\n");
    }
    out
}

fn run(events: &[Value]) -> (Arc<Response>, Vec<Delta>) {
    let mut agg = Aggregator::new(Options::default());
    let mut deltas = Vec::new();
    let errors = agg.feed(&sse(events), &mut deltas);
    assert_eq!(errors, Ok(vec![]));
    (agg.close(), deltas)
}

impl CandidateResult {
    fn new_empty() -> Self {
        CandidateState::new(0).into_result()
    }
}

#[test]
fn e11_routing_state_holds_only_open_calls() {
    let mut agg = Aggregator::new(Options::default());
    let mut deltas = Vec::new();
    let call = |name: bool, more: bool| {
        let mut fc =
            json!({"willContinue": more, "partialArgs": [{"jsonPath": "$.a", "numberValue": 1}]});
        if name {
            fc["name"] = json!("f");
        }
        parts_event(json!([{ "functionCall": fc }]))
    };
    // Sequential streamed calls: one open at a time, however many were closed.
    for _ in 0..500 {
        let body = sse(&[
            call(true, true),
            call(false, true),
            json!({"candidates": [{"content": {"parts": [{"functionCall": {}}]}}]}),
        ]);
        assert_eq!(agg.feed(&body, &mut deltas), Ok(vec![]));
        assert!(agg.state.candidates[0].recent.is_empty());
    }
    // Calls left open: all of them stay open (C14), none closed for room.
    for _ in 0..200 {
        assert_eq!(agg.feed(&sse(&[call(true, true)]), &mut deltas), Ok(vec![]));
    }
    assert_eq!(agg.state.candidates[0].recent.len(), 200);
    assert!(agg.state.candidates[0].open_ids.is_empty()); // none had an id
    assert_eq!(agg.state.candidates[0].calls.len(), 700);
    let result = agg.close();
    assert_eq!(result.candidates[0].call_parts.len(), 500);
    assert_eq!(result.candidates[0].unfinished_calls.len(), 200);
    assert_eq!(result.warnings().len(), 0);
}

#[test]
fn c17_ten_thousand_interleaved_calls_route_by_id_and_recency() {
    let n = 10_000;
    let fc = |v: Value| parts_event(json!([{ "functionCall": v }]));
    let mut agg = Aggregator::new(Options::default());
    let mut deltas = Vec::new();
    let mut body = Vec::new();
    for i in 0..n {
        body.extend(sse(&[fc(
            json!({"id": format!("c{i}"), "name": "f", "willContinue": true}),
        )]));
    }
    for i in 0..n {
        body.extend(sse(&[fc(json!({
            "id": format!("c{i}"), "willContinue": true,
            "partialArgs": [{"jsonPath": "$.n", "numberValue": i}]
        }))]));
    }
    assert_eq!(agg.feed(&body, &mut deltas), Ok(vec![]));
    let cand = &agg.state.candidates[0];
    assert_eq!((cand.recent.len(), cand.open_ids.len()), (n, n));
    // The most recently updated is the last one a fragment reached.
    assert_eq!(cand.recent.values().next_back(), Some(&(n - 1)));
    let mut end = Vec::new();
    for i in (0..n).rev() {
        end.extend(sse(&[fc(json!({"id": format!("c{i}")}))]));
    }
    assert_eq!(agg.feed(&end, &mut deltas), Ok(vec![]));
    assert!(agg.state.candidates[0].recent.is_empty());
    let result = agg.close();
    let first = result
        .first()
        .cloned()
        .unwrap_or_else(CandidateResult::new_empty);
    let calls: Vec<Value> = first.function_calls().map(|c| c.to_value()).collect();
    assert_eq!(calls.len(), n);
    for (i, call) in calls.iter().enumerate() {
        assert_eq!(
            call,
            &json!({"id": format!("c{i}"), "name": "f", "args": {"n": i}})
        );
    }
    assert!(result.warnings().is_empty());
}

#[allow(clippy::needless_pass_by_value)] // called with json! literals
fn parts_event(parts: Value) -> Value {
    json!({"candidates": [{"content": {"role": "model", "parts": parts}}]})
}

#[test]
fn p1_text_runs_merge_and_p3_signed_parts_stay_apart() {
    let (res, deltas) = run(&[
        parts_event(json!([{"text": "a", "thought": true}, {"text": "b", "thought": true}])),
        parts_event(
            json!([{"text": "c"}, {"text": "d", "thoughtSignature": "czE="}, {"text": "e"}]),
        ),
    ]);
    let first = res
        .first()
        .cloned()
        .unwrap_or_else(CandidateResult::new_empty);
    assert_eq!(
        first.part_values(),
        vec![
            json!({"text": "ab", "thought": true}),
            json!({"text": "c"}),
            json!({"text": "d", "thoughtSignature": "czE="}),
            json!({"text": "e"}),
        ]
    );
    assert_eq!(first.text, "cde");
    assert_eq!(first.thought_text, "ab");
    assert_eq!(deltas.len(), 5);
    assert_eq!(
        deltas[3],
        Delta::Text {
            candidate: 0,
            index: 2,
            text: "d".into(),
            thought: false
        }
    );
}

#[test]
fn c2_path_affinity_routes_fragments_without_ids() {
    let fc = |v: Value| parts_event(json!([{"functionCall": v}]));
    let (res, _) = run(&[
        fc(
            json!({"name": "a", "partialArgs": [{"jsonPath": "$.x", "stringValue": "P"}], "willContinue": true}),
        ),
        fc(
            json!({"name": "b", "partialArgs": [{"jsonPath": "$.y", "stringValue": "Q"}], "willContinue": true}),
        ),
        fc(json!({"partialArgs": [{"jsonPath": "$.x", "stringValue": "R"}], "willContinue": true})),
        fc(json!({})),
        fc(json!({})),
    ]);
    let first = res
        .first()
        .cloned()
        .unwrap_or_else(CandidateResult::new_empty);
    assert_eq!(
        first.part_values(),
        vec![
            json!({"functionCall": {"name": "a", "args": {"x": "PR"}}}),
            json!({"functionCall": {"name": "b", "args": {"y": "Q"}}}),
        ]
    );
}

#[test]
fn c13_only_a_call_flushed_at_close_is_unfinished() {
    let (res, deltas) = run(&[
        parts_event(json!([{"functionCall": {"name": "a", "willContinue": true}}])),
        parts_event(json!([{"functionCall": {}}])),
        parts_event(json!([{"functionCall": {"name": "b", "willContinue": true}}])),
    ]);
    assert_eq!(
        res.first()
            .map(|c| (c.call_parts.clone(), c.unfinished_calls.clone())),
        Some((vec![0], vec![1]))
    );
    assert_eq!(
        res.first().map(CandidateResult::unfinished_values),
        Some(vec![
            json!({"id": null, "name": "b", "args": {}, "part": 1})
        ])
    );
    let ended: Vec<usize> = deltas
        .iter()
        .filter_map(|d| match d {
            Delta::CallEnd { index, .. } => Some(*index),
            _ => None,
        })
        .collect();
    assert_eq!(ended, vec![0]);
}

#[test]
fn e10_changed_response_id_is_warned_about() {
    let (res, _) = run(&[
        json!({"responseId": "r1"}),
        json!({"responseId": "r1"}),
        json!({"responseId": "r2"}),
    ]);
    assert_eq!(
        res.warnings(),
        vec![
            r#"event 2: responseId changed from "r1" to "r2"; the body holds more than one response and they were aggregated as one model turn"#
        ]
    );
}

#[test]
fn c12_nameless_call_left_out_with_warning() {
    let (res, _) = run(&[parts_event(
        json!([{"functionCall": {"id": "z", "partialArgs": [{"jsonPath": "$.v", "numberValue": 1.5e20}], "willContinue": true}}]),
    )]);
    assert_eq!(
        res.warnings(),
        vec![
            r#"candidate 0, part 0: a streamed function call with id "z" never received a name and was left out; its args: {"v":1.5e+20}"#
        ]
    );
    assert!(res.first().is_some_and(|c| c.parts.is_empty()));
}

fn feed_all(pieces: &[&[u8]], strict: bool) -> (Vec<Delta>, Vec<MalformedStream>, Response) {
    let mut agg = Aggregator::new(Options {
        strict,
        ..Options::default()
    });
    let (mut deltas, mut errors) = (Vec::new(), Vec::new());
    for piece in pieces {
        errors.extend(agg.feed(piece, &mut deltas).unwrap_or_default());
    }
    let done = agg.close();
    (deltas, errors, (*done).clone())
}

/// Bytes that look like a Gemini stream often enough to reach deep states.
fn streamish() -> impl Strategy<Value = Vec<u8>> {
    let atoms = prop::sample::select(vec![
        &b"data: "[..],
        b"\r\n",
        b"\n",
        b"\r",
        b"{",
        b"}",
        b"[",
        b"]",
        b",",
        b":",
        b"\"",
        b"\\",
        b"\"candidates\"",
        b"\"content\"",
        b"\"parts\"",
        b"\"text\"",
        b"\"thought\"",
        b"true",
        b"\"functionCall\"",
        b"\"partialArgs\"",
        b"\"jsonPath\"",
        b"\"$.a[0]\"",
        b"\"stringValue\"",
        b"\"willContinue\"",
        b"\"name\"",
        b"\"id\"",
        b"\"error\"",
        b"\"index\"",
        b"1",
        b"null",
        b"\"thoughtSignature\"",
        b"\"x\"",
        b"\xff",
        b"\xe6\xbc",
        b" ",
        b": c\n",
    ]);
    prop::collection::vec(atoms, 0..120).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// F7 and "no panic reachable from input": any bytes, any split, in
    /// both modes, give the same deltas, errors and result as one piece.
    #[test]
    fn f7_any_bytes_any_split_never_panics(
        body in prop_oneof![streamish(), prop::collection::vec(any::<u8>(), 0..300)],
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        strict in any::<bool>(),
    ) {
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(body.len() + 1)).collect();
        at.sort_unstable();
        let mut pieces: Vec<&[u8]> = Vec::new();
        let mut start = 0;
        for &cut in &at {
            pieces.push(&body[start..cut]);
            start = cut;
        }
        pieces.push(&body[start..]);
        let whole = feed_all(&[&body], strict);
        let split = feed_all(&pieces, strict);
        prop_assert_eq!(whole, split);
    }
}

fn run_with(deltas: Deltas, body: &[u8]) -> (Vec<Delta>, bool, Response) {
    let mut agg = Aggregator::new(Options {
        deltas,
        strict: false,
        ..Options::default()
    });
    let mut out = Vec::new();
    let _ = agg.feed(body, &mut out);
    agg.finish(&mut out);
    let visible = agg.visible_output();
    let result = (*agg.close()).clone();
    assert_eq!(agg.visible_output(), visible, "R5: close() keeps it");
    (out, visible, result)
}

/// What `Deltas::Display` keeps of every delta.
fn shown(delta: &Delta) -> bool {
    match delta {
        Delta::Text { candidate, .. }
        | Delta::CallStart { candidate, .. }
        | Delta::Arg { candidate, .. } => *candidate == 0,
        _ => false,
    }
}

/// A part of a stream with several candidates, thoughts and both kinds of calls.
fn part() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"text": "a"})),
        Just(json!({"text": "t", "thought": true})),
        Just(json!({"text": "k", "thoughtSignature": "s"})),
        Just(json!({"text": ""})),
        Just(json!({"functionCall": {"name": "f", "args": {"x": [1]}}})),
        Just(json!({"functionCall": {"args": {"x": 1}}})),
        Just(json!({"functionCall": {"name": "g", "willContinue": true}})),
        Just(
            json!({"functionCall": {"partialArgs": [{"jsonPath": "$.q", "stringValue": "v"}], "willContinue": true}})
        ),
        Just(json!({"functionCall": {}})),
    ]
}

fn event() -> impl Strategy<Value = Value> {
    (0u32..3, prop::collection::vec(part(), 0..3), any::<bool>()).prop_map(
        |(index, parts, finish)| {
            let mut cand = json!({"index": index, "content": {"parts": parts}});
            if finish {
                cand["finishReason"] = json!("STOP");
            }
            json!({"candidates": [cand]})
        },
    )
}

#[test]
fn r5_display_skips_call_end_finish_and_other_candidates() {
    let body = sse(&[
        json!({"candidates": [{"content": {"parts": [{"text": "t", "thought": true}, {"functionCall": {"name": "f", "args": {"x": 1}}}]}}]}),
        json!({"candidates": [{"index": 1, "content": {"parts": [{"text": "b"}]}, "finishReason": "STOP"}]}),
        json!({"candidates": [{"content": {"parts": [{"text": "a"}]}, "finishReason": "STOP"}]}),
    ]);
    let (deltas, _, _) = run_with(Deltas::Display, &body);
    assert_eq!(
        deltas,
        vec![
            Delta::Text {
                candidate: 0,
                index: 0,
                text: "t".into(),
                thought: true
            },
            Delta::CallStart {
                candidate: 0,
                index: 1,
                id: None,
                name: Some("f".into())
            },
            Delta::Text {
                candidate: 0,
                index: 2,
                text: "a".into(),
                thought: false
            },
        ]
    );
}

#[test]
fn r5_a_thought_is_not_visible_output() {
    let body = sse(&[
        json!({"candidates": [{"content": {"parts": [{"text": "t", "thought": true}]}}]}),
        json!({"candidates": [{"index": 1, "content": {"parts": [{"text": "b"}]}}]}),
    ]);
    assert!(!run_with(Deltas::Off, &body).1);
}

#[test]
fn r5_a_streamed_call_start_is_visible_output_without_deltas() {
    let body = sse(&[
        json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": "g", "willContinue": true}}]}}]}),
    ]);
    assert!(run_with(Deltas::Off, &body).1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// R5: `Display` reports exactly candidate 0's text, call-start and
    /// argument deltas of `All`, and changes neither the result nor
    /// `visible_output`, which is a candidate 0 answer text or call start.
    #[test]
    fn r5_display_is_the_candidate_zero_subset(events in prop::collection::vec(event(), 0..8)) {
        let body = sse(&events);
        let (all, visible, result) = run_with(Deltas::All, &body);
        let (display, display_visible, display_result) = run_with(Deltas::Display, &body);
        let (none, off_visible, off_result) = run_with(Deltas::Off, &body);
        let expected: Vec<Delta> = all.iter().filter(|d| shown(d)).cloned().collect();
        prop_assert_eq!(display, expected);
        prop_assert!(none.is_empty());
        let seen = all.iter().any(|d| matches!(
            d,
            Delta::Text { candidate: 0, thought: false, .. } | Delta::CallStart { candidate: 0, .. }
        ));
        prop_assert_eq!((visible, display_visible, off_visible), (seen, seen, seen));
        prop_assert_eq!(&display_result, &result);
        prop_assert_eq!(&off_result, &result);
    }
}

#[test]
fn e14_a_token_covers_its_own_event_and_not_later_output() {
    let text = |s: &str| json!({"text": s});
    let with_token = |part: Value, token: &str| json!({"candidates": [{"content": {"parts": [part]}, "continuationToken": token}]});
    let plain = |part: Value| json!({"candidates": [{"content": {"parts": [part]}}]});
    let (covered, _) = run(&[plain(text("a")), with_token(text("b"), "c1")]);
    assert_eq!(
        (
            covered.continuation_token.as_deref(),
            covered.output_after_token
        ),
        (Some("c1"), false)
    );
    let (after, _) = run(&[with_token(text("a"), "c1"), plain(text("b"))]);
    assert_eq!(
        (
            after.continuation_token.as_deref(),
            after.output_after_token
        ),
        (Some("c1"), true)
    );
    // P2/P6 drop these parts: they are no output; an empty token is no token.
    let (dropped, _) = run(&[
        with_token(text("a"), "c1"),
        plain(text("")),
        plain(json!({})),
        with_token(text(""), ""),
    ]);
    assert_eq!(
        (
            dropped.continuation_token.as_deref(),
            dropped.output_after_token
        ),
        (Some("c1"), false)
    );
}

#[test]
fn r9_call_end_of_a_complete_call_shares_the_part_text() {
    let (res, deltas) = run(&[parts_event(json!([
        {"functionCall": {"id": "c1", "name": "f", "args": {"q": "caf\u{e9}", "n": [1, -0]}}},
        {"functionCall": {"name": "g"}},
    ]))]);
    let ended: Vec<&EndedCall> = deltas
        .iter()
        .filter_map(|d| match d {
            Delta::CallEnd { call, .. } => Some(call),
            _ => None,
        })
        .collect();
    let parts = res.first().map(|c| c.parts.clone()).unwrap_or_default();
    let (
        [EndedCall::Raw(first), EndedCall::Raw(second)],
        [Part::Raw(kept_first), Part::Raw(kept_second)],
    ) = (ended.as_slice(), parts.as_slice())
    else {
        panic!("two raw calls expected: {ended:?} {parts:?}");
    };
    // One text, two owners: no copy of the arguments for the delta.
    assert!(Arc::ptr_eq(&first.json, &kept_first.json));
    assert!(Arc::ptr_eq(&second.json, &kept_second.json));
    assert_eq!(
        ended.iter().map(|c| c.to_value()).collect::<Vec<_>>(),
        vec![
            json!({"id": "c1", "name": "f", "args": {"q": "caf\u{e9}", "n": [1, 0]}}),
            json!({"id": null, "name": "g", "args": {}}),
        ]
    );
}
