//! Tests of the Interactions aggregator, by rule id (spec/interactions.md).

use proptest::prelude::*;
use serde_json::{json, Value};

use super::args::{ArgParser, ArgPiece};
use super::*;

const PARALLEL: &str = concat!(
    "event: interaction.created\n",
    "data: {\"interaction\":{\"id\":\"v1_Aa1\",\"status\":\"in_progress\",\"object\":\"interaction\"},\"event_type\":\"interaction.created\",\"event_id\":\"e1\"}\n\n",
    "event: step.start\n",
    "data: {\"index\":0,\"step\":{\"type\":\"thought\"},\"event_type\":\"step.start\"}\n\n",
    "event: step.delta\n",
    "data: {\"index\":0,\"delta\":{\"signature\":\"EqQBCq+/=\",\"type\":\"thought_signature\"},\"event_type\":\"step.delta\"}\n\n",
    "event: step.stop\n",
    "data: {\"index\":0,\"event_type\":\"step.stop\"}\n\n",
    "event: step.start\n",
    "data: {\"index\":1,\"step\":{\"id\":\"fc7\",\"type\":\"function_call\",\"name\":\"get_weather\",\"arguments\":{}},\"event_type\":\"step.start\"}\n\n",
    "event: step.start\n",
    "data: {\"index\":2,\"step\":{\"id\":\"q3v\",\"type\":\"function_call\",\"name\":\"get_weather\",\"arguments\":{}},\"event_type\":\"step.start\"}\n\n",
    "event: step.delta\n",
    "data: {\"index\":1,\"delta\":{\"arguments\":\"{\\\"city\\\":\\\"Pa\",\"type\":\"arguments_delta\"},\"event_type\":\"step.delta\"}\n\n",
    "event: step.delta\n",
    "data: {\"index\":2,\"delta\":{\"arguments\":\"{\\\"city\\\":\\\"London\\\"}\",\"type\":\"arguments_delta\"},\"event_type\":\"step.delta\",\"event_id\":\"e7\"}\n\n",
    "event: step.delta\n",
    "data: {\"index\":1,\"delta\":{\"arguments\":\"ris\\\"}\",\"type\":\"arguments_delta\"},\"event_type\":\"step.delta\"}\n\n",
    "event: step.stop\n",
    "data: {\"index\":2,\"event_type\":\"step.stop\"}\n\n",
    "event: step.stop\n",
    "data: {\"index\":1,\"event_type\":\"step.stop\"}\n\n",
    "event: interaction.completed\n",
    "data: {\"interaction\":{\"id\":\"v1_Aa1\",\"status\":\"requires_action\",\"usage\":{\"total_tokens\":241}},\"event_type\":\"interaction.completed\"}\n\n",
    "event: done\n",
    "data: [DONE]\n\n",
);

fn run(chunks: &[&[u8]]) -> (Vec<Delta>, IxResponse) {
    let mut agg = IxAggregator::new(Options::default());
    let mut deltas = Vec::new();
    for c in chunks {
        let errors = agg.feed(c, &mut deltas).unwrap_or_default();
        assert!(errors.is_empty(), "{errors:?}");
    }
    let result = (*agg.close()).clone();
    (deltas, result)
}

fn run_lenient(chunks: &[&[u8]]) -> (Vec<Delta>, IxResponse) {
    let mut agg = IxAggregator::new(Options {
        strict: false,
        ..Options::default()
    });
    let mut deltas = Vec::new();
    for c in chunks {
        let _ = agg.feed(c, &mut deltas);
    }
    let result = (*agg.close()).clone();
    (deltas, result)
}

fn args_of(fragments: &[&str]) -> (Vec<ArgPiece>, Result<Value, String>) {
    let mut p = ArgParser::new();
    let mut out = Vec::new();
    for f in fragments {
        p.feed(f, true, &mut out);
    }
    let r = p.finish();
    (out, r)
}

fn piece(path: &str, value: Value) -> ArgPiece {
    ArgPiece {
        json_path: path.into(),
        value,
    }
}

#[test]
fn i9_parallel_calls_route_by_index_and_stream_arguments() {
    let (deltas, r) = run(&[PARALLEL.as_bytes()]);
    assert_eq!(r.interaction_id.as_deref(), Some("v1_Aa1"));
    assert_eq!(r.status.as_deref(), Some("requires_action"));
    assert_eq!(r.last_event_id.as_deref(), Some("e7"));
    assert!(r.complete && r.done);
    assert_eq!(r.warnings(), Vec::<String>::new());
    assert_eq!(
        r.function_calls,
        vec![
            json!({"id": "fc7", "name": "get_weather", "args": {"city": "Paris"}}),
            json!({"id": "q3v", "name": "get_weather", "args": {"city": "London"}}),
        ]
    );
    assert_eq!(
        r.steps[0].1,
        json!({"type": "thought", "signature": "EqQBCq+/="})
    );
    assert_eq!(r.usage, Some(json!({"total_tokens": 241})));
    let args: Vec<_> = deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Arg {
                index,
                json_path,
                value,
                ..
            } => Some((*index, json_path.clone(), value.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        args,
        vec![
            (1, "$.city".to_owned(), json!("Pa")),
            (2, "$.city".to_owned(), json!("London")),
            (1, "$.city".to_owned(), json!("ris")),
        ]
    );
    assert!(
        matches!(deltas.last(), Some(Delta::Finish { reason, .. }) if reason == "requires_action")
    );
}

#[test]
fn i14_escapes_and_surrogates_split_anywhere() {
    let text = r#"{"s":"a\u00e9\ud83d\ude00\n","n":[1,-2.5e3,true,null,{}],"k y":false}"#;
    let whole = args_of(&[text]).1;
    assert_eq!(
        whole,
        Ok(json!({"s": "a\u{e9}\u{1F600}\n", "n": [1, -2500.0, true, null, {}], "k y": false}))
    );
    for cut in 1..text.len() {
        let (a, b) = text.split_at(cut);
        assert_eq!(args_of(&[a, b]).1, whole, "cut at {cut}");
    }
}

#[test]
fn i15_live_pieces_and_paths() {
    let (pieces, _) = args_of(&[r#"{"s":"ab"#, r"c\u00", r#"e9","a":[1,"#, r#""","x"]}"#]);
    assert_eq!(
        pieces,
        vec![
            piece("$.s", json!("ab")),
            piece("$.s", json!("c")),
            piece("$.s", json!("\u{e9}")),
            piece("$.a[0]", json!(1)),
            piece("$.a[1]", json!("")),
            piece("$.a[2]", json!("x")),
        ]
    );
    let (pieces, _) = args_of(&[r#"{"a b":{"c":[[true]]}}"#]);
    assert_eq!(pieces, vec![piece("$[\"a b\"].c[0][0]", json!(true))]);
}

#[test]
fn i16_invalid_arguments_name_the_character() {
    let cases = [
        (
            r#"{"a":01}"#,
            "arguments are not valid JSON at character 6: unexpected character \"1\"",
        ),
        (
            r"[1]",
            "arguments are not valid JSON at character 0: arguments are not a JSON object",
        ),
        (
            r#"{"a":"\x"}"#,
            "arguments are not valid JSON at character 7: invalid escape",
        ),
        (
            r#"{"a":"\udc00"}"#,
            "arguments are not valid JSON at character 11: lone surrogate",
        ),
        (
            r#"{"a":1,}"#,
            "arguments are not valid JSON at character 7: unexpected character \"}\"",
        ),
        (
            r#"{"a":1"#,
            "arguments are not valid JSON at character 6: unexpected end",
        ),
        (
            r#"{"é":1} é"#,
            "arguments are not valid JSON at character 8: unexpected character \"é\"",
        ),
        (
            "{\"a\":\"\n\"}",
            "arguments are not valid JSON at character 6: unexpected character \"\\n\"",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(args_of(&[text]).1, Err(want.to_owned()), "{text}");
    }
    let deep = "[".repeat(1100);
    let text = format!("{{\"a\":{deep}");
    assert_eq!(
        args_of(&[&text]).1,
        Err("arguments are not valid JSON at character 1028: nesting deeper than 1024".into())
    );
}

#[test]
fn i16_invalid_call_is_unfinished_and_keeps_its_raw_text() {
    let body = concat!(
        "data: {\"event_type\":\"step.start\",\"index\":0,\"step\":{\"type\":\"function_call\",\"id\":\"c\",\"name\":\"f\",\"arguments\":{}}}\n\n",
        "data: {\"event_type\":\"step.delta\",\"index\":0,\"delta\":{\"type\":\"arguments_delta\",\"arguments\":\"{oops\"}}\n\n",
        "data: {\"event_type\":\"step.stop\",\"index\":0}\n\n",
        "data: [DONE]\n\n",
    );
    let (deltas, r) = run(&[body.as_bytes()]);
    assert_eq!(
        r.unfinished_calls,
        vec![json!({"id": "c", "name": "f", "args": {}, "step": 0})]
    );
    assert!(r.function_calls.is_empty()); // C13: never among the calls to run
    assert_eq!(r.steps[0].1["arguments"], json!("{oops"));
    assert_eq!(
        r.warnings(),
        vec!["step 0: arguments are not valid JSON at character 1: unexpected character \"o\""]
    );
    assert!(!deltas.iter().any(|d| matches!(d, Delta::CallEnd { .. })));
}

#[test]
fn i17_open_call_renders_its_partial_arguments() {
    let body = concat!(
        "data: {\"event_type\":\"step.start\",\"index\":3,\"step\":{\"type\":\"function_call\",\"id\":\"c\",\"name\":\"f\",\"arguments\":{}}}\n\n",
        "data: {\"event_type\":\"step.delta\",\"index\":3,\"delta\":{\"type\":\"arguments_delta\",\"arguments\":\"{\\\"a\\\":[1,\\\"x\\\",2\"}}\n\n",
    );
    let (_, r) = run(&[body.as_bytes()]);
    assert_eq!(r.steps[0].1["arguments"], json!({"a": [1, "x"]}));
    assert_eq!(
        r.unfinished_calls,
        vec![json!({"id": "c", "name": "f", "args": {"a": [1, "x"]}, "step": 3})]
    );
    assert!(r.function_calls.is_empty());
    assert_eq!(
        r.warnings(),
        vec![
            "step 3 (\"function_call\") never received step.stop",
            "the stream ended without the [DONE] sentinel"
        ]
    );
}

#[test]
fn i4_strict_errors_keep_good_events_and_close_reports_truncation() {
    let mut agg = IxAggregator::new(Options::default());
    let mut deltas = Vec::new();
    let errors = agg
        .feed(b"data: {nope\n\ndata: {\"event_type\":\"error\",\"error\":{\"code\":\"x\"}}\n\ndata: {\"a\"", &mut deltas)
        .unwrap_or_default();
    assert_eq!(errors.len(), 1);
    assert_eq!(
        errors[0].message(),
        "event 0 at byte 0 is not valid JSON; it was skipped (is this the body of a streamed Interactions API response?)"
    );
    assert_eq!(
        deltas,
        vec![Delta::StreamError {
            error: json!({"code": "x"})
        }]
    );
    let r = agg.close();
    assert!(r.truncated);
    assert_eq!(r.error, Some(json!({"code": "x"})));
    assert_eq!(
        r.warnings(),
        vec![
            "event 2 at byte 64 is not valid JSON; it was skipped (is this the body of a streamed Interactions API response?)",
            "the stream ended without the [DONE] sentinel"
        ]
    );
    assert!(agg.feed(b"x", &mut deltas).is_err());
}

#[test]
fn i20_reconnect_discards_the_partial_event_and_resumes() {
    let body = PARALLEL.as_bytes();
    let (_, whole) = run(&[body]);
    // Cut inside the event that follows the `e7` event, then replay from there.
    let replay_from = PARALLEL
        .find("event: step.delta\ndata: {\"index\":1,\"delta\":{\"arguments\":\"ris")
        .unwrap_or(0);
    let mut agg = IxAggregator::new(Options::default());
    let mut deltas = Vec::new();
    let _ = agg.feed(&body[..replay_from + 30], &mut deltas);
    assert_eq!(agg.snapshot().last_event_id.as_deref(), Some("e7"));
    assert_eq!(agg.reconnect(), Ok(()));
    let _ = agg.feed(&body[replay_from..], &mut deltas);
    assert_eq!(*agg.close(), whole);
    assert_eq!(agg.reconnect(), Err(Closed));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// I2/I14: any split of the body gives the same deltas (concatenated
    /// string pieces aside) and the same result.
    #[test]
    fn split_invariance(cuts in proptest::collection::vec(0usize..PARALLEL.len(), 0..12)) {
        let body = PARALLEL.as_bytes();
        let mut cuts = cuts;
        cuts.sort_unstable();
        let mut chunks = Vec::new();
        let mut last = 0;
        for c in cuts {
            chunks.push(&body[last..c]);
            last = c;
        }
        chunks.push(&body[last..]);
        let (_, whole) = run(&[body]);
        let (_, split) = run(&chunks);
        prop_assert_eq!(whole, split);
    }

    /// I4: arbitrary bytes and argument text never panic; the result is
    /// the same in one piece as split.
    #[test]
    fn arbitrary_input_never_panics(body in proptest::collection::vec(any::<u8>(), 0..400), cut in 0usize..400, text in ".{0,40}") {
        let cut = cut.min(body.len());
        let (_, whole) = run_lenient(&[&body]);
        let (_, split) = run_lenient(&[&body[..cut], &body[cut..]]);
        prop_assert_eq!(whole, split);
        let mut p = ArgParser::new();
        let mut out = Vec::new();
        p.feed(&text, true, &mut out);
        let _ = p.partial();
        let _ = p.finish();
    }

    /// I14/I15: arguments split anywhere parse to the same value, and the
    /// live pieces rebuild the string values.
    #[test]
    fn args_split_invariance(cuts in proptest::collection::vec(0usize..60, 0..8)) {
        let text = r#"{"q":"d\u00e9j\u00e0 \ud83d\ude00 \"vu\"","n":[12,{"x":-0.5}]}"#;
        let mut cuts: Vec<usize> = cuts.into_iter().filter(|&c| text.is_char_boundary(c) && c < text.len()).collect();
        cuts.sort_unstable();
        let mut frags = Vec::new();
        let mut last = 0;
        for c in cuts {
            frags.push(&text[last..c]);
            last = c;
        }
        frags.push(&text[last..]);
        let (pieces, value) = args_of(&frags);
        prop_assert_eq!(value, Ok(serde_json::from_str::<Value>(text).unwrap_or_default()));
        let q: String = pieces.iter().filter(|p| p.json_path == "$.q").filter_map(|p| p.value.as_str()).collect();
        prop_assert_eq!(q, "d\u{e9}j\u{e0} \u{1F600} \"vu\"");
    }
}

#[test]
fn e14_step_events_after_the_latest_token_are_not_covered() {
    let status = "event: interaction.status_update\ndata: {\"event_type\":\"interaction.status_update\",\"status\":\"in_progress\",\"continuation_token\":\"c1\"}\n\n";
    let start = "data: {\"event_type\":\"step.start\",\"index\":0,\"step\":{\"type\":\"model_output\"}}\n\n";
    let delta = "data: {\"event_type\":\"step.delta\",\"index\":0,\"delta\":{\"type\":\"text\",\"text\":\"x\"}}\n\n";
    let covered = format!("{start}{delta}{status}");
    let (_, r) = run(&[covered.as_bytes()]);
    assert_eq!(
        (r.continuation_token.as_deref(), r.output_after_token),
        (Some("c1"), false)
    );
    let after = format!("{start}{status}{delta}");
    let (_, r) = run(&[after.as_bytes()]);
    assert_eq!(
        (r.continuation_token.as_deref(), r.output_after_token),
        (Some("c1"), true)
    );
    let (_, r) = run(&[start.as_bytes()]);
    assert_eq!((r.continuation_token, r.output_after_token), (None, true));
}
