//! The rule vectors of `tests/vectors/*.json` and the vendored conformance set
//! `tests/conformance/scenarios.json`, run on the core under several chunkings
//! (F7). The format: `tests/vectors/README.md`.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use fastagg_core::aggregate::{Aggregator, CandidateResult, Options};
use fastagg_core::diagnostics::{Diagnostic, Field};
use fastagg_core::error::MalformedStream;
use fastagg_core::interactions::IxAggregator;
use serde_json::{Map, Value};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Case {
    label: String,
    interactions: bool,
    body: Vec<u8>,
    opts: Options,
    expect: Map<String, Value>,
}

/// `data: <payload>\r\n\r\n` per payload; strings verbatim, values as compact JSON.
fn frame_events(events: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for event in events {
        out.extend_from_slice(b"data: ");
        match event {
            Value::String(s) => out.extend_from_slice(s.as_bytes()),
            other => out.extend_from_slice(other.to_string().as_bytes()),
        }
        out.extend_from_slice(b"\r\n\r\n");
    }
    out
}

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| {
            let s = std::str::from_utf8(pair).expect("hex digits are ASCII");
            u8::from_str_radix(s, 16).expect("a pair of hex digits")
        })
        .collect()
}

fn case_of(file: &str, interactions: bool, v: &Value) -> Case {
    let name = v["name"].as_str().expect("every vector has a name");
    let body = if let Some(Value::Array(events)) = v.get("events").or_else(|| v.get("chunks")) {
        frame_events(events)
    } else if let Some(Value::String(body)) = v.get("body") {
        body.as_bytes().to_vec()
    } else if let Some(Value::String(h)) = v.get("body_hex") {
        hex(h)
    } else {
        panic!("{file}: {name}: no events, body or body_hex");
    };
    let mut opts = Options::default();
    if let Some(Value::Object(o)) = v.get("options") {
        if let Some(strict) = o.get("strict").and_then(Value::as_bool) {
            opts.strict = strict;
        }
        if let Some(n) = o.get("max_event_bytes").and_then(Value::as_u64) {
            opts.max_event_bytes = usize::try_from(n).expect("a usize");
        }
        if let Some(n) = o.get("max_array_index").and_then(Value::as_u64) {
            opts.max_array_index = usize::try_from(n).expect("a usize");
        }
    }
    Case {
        label: format!("{file}: {name}"),
        interactions,
        body,
        opts,
        expect: v["expect"].as_object().cloned().unwrap_or_default(),
    }
}

fn load(path: &Path) -> Vec<Case> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("?")
        .to_owned();
    // The conformance set is a bare list of cases; vector files wrap theirs.
    let (interactions, list) = match &doc {
        Value::Array(items) => (false, items.clone()),
        _ => (
            doc.get("api").and_then(Value::as_str) == Some("interactions"),
            doc["vectors"].as_array().cloned().unwrap_or_default(),
        ),
    };
    list.iter()
        .map(|v| case_of(&file, interactions, v))
        .collect()
}

/// The whole body; every two-piece split (short bodies); byte by byte; 7-byte pieces.
fn chunkings(body: &[u8]) -> Vec<(String, Vec<&[u8]>)> {
    let mut out = vec![("whole".to_owned(), vec![body])];
    if body.len() <= 512 {
        for cut in 1..body.len() {
            out.push((format!("split at {cut}"), vec![&body[..cut], &body[cut..]]));
        }
    }
    if body.len() <= 4096 {
        out.push(("bytewise".to_owned(), body.chunks(1).collect()));
    }
    out.push(("7-byte pieces".to_owned(), body.chunks(7).collect()));
    out
}

fn field_value(field: Field<'_>) -> Value {
    match field {
        Field::Int(n) => Value::from(n),
        Field::Str(s) | Field::OptStr(Some(s)) => Value::String(s.to_owned()),
        Field::OptStr(None) => Value::Null,
        Field::Json(v) => v.clone(),
    }
}

fn diagnostic_keys(
    out: &mut Map<String, Value>,
    diagnostics: &[Diagnostic],
    errors: &[MalformedStream],
) {
    let codes = |ds: &mut dyn Iterator<Item = &Diagnostic>| -> Value {
        Value::Array(ds.map(|d| Value::from(d.code())).collect())
    };
    out.insert(
        "warnings".into(),
        Value::from(
            diagnostics
                .iter()
                .map(Diagnostic::message)
                .collect::<Vec<_>>(),
        ),
    );
    out.insert("diagnostics".into(), codes(&mut diagnostics.iter()));
    let fields = diagnostics
        .iter()
        .map(|d| {
            Value::Object(
                d.fields()
                    .into_iter()
                    .map(|(n, f)| (n.to_owned(), field_value(f)))
                    .collect(),
            )
        })
        .collect();
    out.insert("diagnostic_fields".into(), Value::Array(fields));
    out.insert(
        "errors".into(),
        codes(&mut errors.iter().map(|e| &e.diagnostic)),
    );
}

fn opt<T: Into<Value> + Clone>(value: Option<&T>) -> Value {
    value.cloned().map_or(Value::Null, Into::into)
}

/// Every `expect` key of a classic result, observed.
fn run_classic(pieces: &[&[u8]], opts: Options) -> Map<String, Value> {
    let mut agg = Aggregator::new(opts);
    let mut errors = Vec::new();
    for piece in pieces {
        errors.extend(agg.feed(piece, &mut Vec::new()).expect("not closed"));
    }
    let res = agg.close();
    let (events_seen, bytes_seen) = (agg.events_seen(), agg.bytes_seen());
    let first = res.first();
    let mut out = Map::new();
    let parts = first.map(CandidateResult::part_values).unwrap_or_default();
    out.insert("parts".into(), Value::Array(parts));
    let calls = first
        .map(|c| c.function_calls().map(|f| f.to_value()).collect())
        .unwrap_or_default();
    out.insert("function_calls".into(), Value::Array(calls));
    out.insert("usage".into(), opt(res.usage.as_ref()));
    out.insert("error".into(), opt(res.error.as_ref()));
    out.insert(
        "text".into(),
        Value::from(first.map(|c| c.text.clone()).unwrap_or_default()),
    );
    let thought = first.map(|c| c.thought_text.clone()).unwrap_or_default();
    out.insert("thought_text".into(), Value::from(thought));
    out.insert(
        "finish_reason".into(),
        opt(first.and_then(|c| c.finish_reason.as_ref())),
    );
    out.insert("response_id".into(), opt(res.response_id.as_ref()));
    out.insert("model_version".into(), opt(res.model_version.as_ref()));
    out.insert("model_status".into(), opt(res.model_status.as_ref()));
    out.insert("to_dict".into(), res.to_value());
    out.insert("complete".into(), Value::from(res.complete));
    out.insert("truncated".into(), Value::from(res.truncated));
    let unfinished = first
        .map(CandidateResult::unfinished_values)
        .unwrap_or_default();
    out.insert("unfinished_calls".into(), Value::Array(unfinished));
    let indices: Vec<u32> = res.candidates.iter().map(|c| c.index).collect();
    out.insert("candidates".into(), Value::from(indices));
    out.insert("events_seen".into(), Value::from(events_seen));
    out.insert("bytes_seen".into(), Value::from(bytes_seen));
    diagnostic_keys(&mut out, &res.diagnostics, &errors);
    out
}

/// Every `expect` key of an interactions result, observed.
fn run_interactions(pieces: &[&[u8]], opts: Options) -> Map<String, Value> {
    let mut agg = IxAggregator::new(opts);
    let mut errors = Vec::new();
    for piece in pieces {
        errors.extend(agg.feed(piece, &mut Vec::new()).expect("not closed"));
    }
    let res = agg.close();
    let (events_seen, bytes_seen) = (agg.events_seen(), agg.bytes_seen());
    let mut out = Map::new();
    let steps = res.steps.iter().map(|(_, s)| s.clone()).collect();
    out.insert("steps".into(), Value::Array(steps));
    out.insert(
        "function_calls".into(),
        Value::Array(res.function_calls.clone()),
    );
    out.insert("usage".into(), opt(res.usage.as_ref()));
    out.insert("error".into(), opt(res.error.as_ref()));
    out.insert("interaction".into(), Value::Object(res.interaction.clone()));
    out.insert("text".into(), Value::from(res.text.clone()));
    out.insert("thought_text".into(), Value::from(res.thought_text.clone()));
    out.insert("status".into(), opt(res.status.as_ref()));
    out.insert("interaction_id".into(), opt(res.interaction_id.as_ref()));
    out.insert("last_event_id".into(), opt(res.last_event_id.as_ref()));
    out.insert(
        "continuation_token".into(),
        opt(res.continuation_token.as_ref()),
    );
    out.insert("complete".into(), Value::from(res.complete));
    out.insert("done".into(), Value::from(res.done));
    out.insert("truncated".into(), Value::from(res.truncated));
    out.insert(
        "unfinished_calls".into(),
        Value::Array(res.unfinished_calls.clone()),
    );
    out.insert("events_seen".into(), Value::from(events_seen));
    out.insert("bytes_seen".into(), Value::from(bytes_seen));
    diagnostic_keys(&mut out, &res.diagnostics, &errors);
    out
}

/// JSON text: `Value`'s equality ignores object key order, the vectors do not.
fn as_json(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Runs every case under every chunking; returns one line per mismatch.
fn failures(cases: &[Case]) -> String {
    let mut report = String::new();
    for case in cases {
        for (how, pieces) in chunkings(&case.body) {
            let got = if case.interactions {
                run_interactions(&pieces, case.opts)
            } else {
                run_classic(&pieces, case.opts)
            };
            for (key, want) in &case.expect {
                let Some(seen) = got.get(key) else {
                    let _ = writeln!(report, "{} [{how}]: unknown expect key {key}", case.label);
                    continue;
                };
                // As JSON text: key order and 1 versus 1.0 matter.
                if as_json(seen) != as_json(want) {
                    let _ = writeln!(
                        report,
                        "{} [{how}] {key}:\n  got  {seen}\n  want {want}",
                        case.label
                    );
                }
            }
            if report.len() > 20_000 {
                return report;
            }
        }
    }
    report
}

fn vector_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(repo().join("tests/vectors"))
        .expect("tests/vectors exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

#[test]
fn rule_vectors_hold_under_every_chunking() {
    let files = vector_files();
    assert!(!files.is_empty());
    let cases: Vec<Case> = files.iter().flat_map(|f| load(f)).collect();
    let report = failures(&cases);
    assert!(report.is_empty(), "{report}");
}

#[test]
fn conformance_scenarios_hold_under_every_chunking() {
    let cases = load(&repo().join("tests/conformance/scenarios.json"));
    assert_eq!(cases.len(), 15);
    let report = failures(&cases);
    assert!(report.is_empty(), "{report}");
}

#[test]
fn vector_names_are_unique_and_cite_a_rule() {
    let mut seen = std::collections::HashSet::new();
    for file in vector_files() {
        let doc: Value = serde_json::from_str(&fs::read_to_string(&file).unwrap_or_default())
            .unwrap_or_default();
        for v in doc["vectors"].as_array().into_iter().flatten() {
            let name = v["name"].as_str().unwrap_or_default();
            let rules: Vec<String> = v["rules"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_lowercase)
                .collect();
            let first = name.split('_').next().unwrap_or_default();
            assert!(
                rules.iter().any(|r| r == first),
                "{}: {name} does not start with one of its rules",
                file.display()
            );
            assert!(seen.insert(name.to_owned()), "{name} is not unique");
        }
    }
}
