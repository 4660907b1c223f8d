//! A generator of valid Gemini streams (text and thoughts, signed parts,
//! complete and streamed calls routed by id, by name, by path affinity and by
//! recency, end markers, in-stream errors, usage, citations, several
//! candidates) in SSE or JSON-array framing. Split anywhere it aggregates like
//! one piece (F7); signatures are never copied (P5); results are ordered (E4).
#![no_main]

use arbitrary::Arbitrary;
use fastagg_core::aggregate::{Aggregator, Options};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

#[derive(Arbitrary, Debug)]
enum ArgValue {
    Str(String),
    Num(i32),
    Bool(bool),
    Null,
}

#[derive(Arbitrary, Debug)]
enum Piece {
    Text {
        text: String,
        thought: bool,
    },
    Signed {
        text: String,
    },
    SignatureOnly,
    Complete {
        name: u8,
        id: Option<u8>,
        args: Vec<(u8, i32)>,
        signed: bool,
    },
    Stream {
        id: Option<u8>,
        name: Option<u8>,
        path: u8,
        index: u8,
        value: ArgValue,
        more: bool,
        signed: bool,
    },
    EndMarker {
        more: Option<bool>,
    },
}

#[derive(Arbitrary, Debug)]
enum Event {
    Parts {
        candidate: u8,
        pieces: Vec<Piece>,
        finish: Option<u8>,
    },
    Error {
        code: u16,
    },
    Usage {
        prompt: u32,
        total: Option<u32>,
    },
    Citation {
        candidate: u8,
        start: u8,
    },
}

#[derive(Arbitrary, Debug)]
struct Stream {
    events: Vec<Event>,
    array_framing: bool,
    lf_only: bool,
    cut: u8,
}

const PATHS: [&str; 6] = ["$.a", "$.b.c", "$.l[{}]", "$['k k']", "$.l[{}].x", "$.s"];
const FINISH: [&str; 4] = ["STOP", "MAX_TOKENS", "MALFORMED_FUNCTION_CALL", "SAFETY"];

fn value(v: &ArgValue) -> (&'static str, Value) {
    match v {
        ArgValue::Str(s) => ("stringValue", Value::String(s.clone())),
        ArgValue::Num(n) => ("numberValue", json!(n)),
        ArgValue::Bool(b) => ("boolValue", json!(b)),
        ArgValue::Null => ("nullValue", Value::Null),
    }
}

fn part(piece: &Piece, sig: &mut dyn FnMut() -> String) -> Value {
    match piece {
        Piece::Text { text, thought } => {
            if *thought {
                json!({"text": text, "thought": true})
            } else {
                json!({"text": text})
            }
        }
        Piece::Signed { text } => json!({"text": text, "thoughtSignature": sig()}),
        Piece::SignatureOnly => json!({"thoughtSignature": sig()}),
        Piece::Complete {
            name,
            id,
            args,
            signed,
        } => {
            let args: Map<String, Value> = args
                .iter()
                .map(|(k, v)| (format!("k{}", k % 4), json!(v)))
                .collect();
            let mut fc = json!({"name": format!("f{}", name % 3), "args": args});
            if let Some(id) = id {
                fc["id"] = json!(format!("id{}", id % 4));
            }
            let mut p = json!({"functionCall": fc});
            if *signed {
                p["thoughtSignature"] = json!(sig());
            }
            p
        }
        Piece::Stream {
            id,
            name,
            path,
            index,
            value: v,
            more,
            signed,
        } => {
            let path =
                PATHS[usize::from(*path) % PATHS.len()].replace("{}", &(index % 4).to_string());
            let (key, v) = value(v);
            let mut fc = json!({"partialArgs": [{"jsonPath": path, key: v}], "willContinue": more});
            if let Some(id) = id {
                fc["id"] = json!(format!("id{}", id % 4));
            }
            if let Some(name) = name {
                fc["name"] = json!(format!("f{}", name % 3));
            }
            let mut p = json!({"functionCall": fc});
            if *signed {
                p["thoughtSignature"] = json!(sig());
            }
            p
        }
        Piece::EndMarker { more } => match more {
            Some(m) => json!({"functionCall": {"willContinue": m}}),
            None => json!({"functionCall": {}}),
        },
    }
}

fn body(stream: &Stream) -> Vec<u8> {
    let mut n = 0;
    let mut sig = move || {
        n += 1;
        format!("c2ln{n:04}==")
    };
    let payloads: Vec<Value> = stream
        .events
        .iter()
        .map(|event| match event {
            Event::Parts {
                candidate,
                pieces,
                finish,
            } => {
                let parts: Vec<Value> = pieces.iter().map(|p| part(p, &mut sig)).collect();
                let mut cand =
                    json!({"content": {"role": "model", "parts": parts}, "index": candidate % 3});
                if let Some(f) = finish {
                    cand["finishReason"] = json!(FINISH[usize::from(*f) % FINISH.len()]);
                }
                json!({"candidates": [cand]})
            }
            Event::Error { code } => {
                json!({"error": {"code": code, "status": "INTERNAL", "message": "boom"}})
            }
            Event::Usage { prompt, total } => {
                json!({"usageMetadata": {"promptTokenCount": prompt, "totalTokenCount": total}})
            }
            Event::Citation { candidate, start } => json!({"candidates": [{"index": candidate % 3,
                "citationMetadata": {"citations": [{"startIndex": start % 8}]}}]}),
        })
        .collect();
    let mut out = Vec::new();
    if stream.array_framing {
        out.extend_from_slice(b"[");
        for (i, p) in payloads.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b",\r\n");
            }
            out.extend_from_slice(p.to_string().as_bytes());
        }
        out.extend_from_slice(b"]");
    } else {
        let end: &[u8] = if stream.lf_only { b"\n\n" } else { b"\r\n\r\n" };
        for p in &payloads {
            out.extend_from_slice(b"data: ");
            out.extend_from_slice(p.to_string().as_bytes());
            out.extend_from_slice(end);
        }
    }
    out
}

fn run(pieces: &[&[u8]]) -> String {
    let mut agg = Aggregator::new(Options::default());
    let mut deltas = Vec::new();
    for piece in pieces {
        let errors = agg.feed(piece, &mut deltas).unwrap_or_default();
        assert!(errors.is_empty(), "a valid stream was refused: {errors:?}");
    }
    agg.finish(&mut deltas);
    let result = agg.close();
    // P5: every signature is on one part at most.
    let mut seen = std::collections::HashSet::new();
    for cand in &result.candidates {
        for p in cand.part_values() {
            if let Some(Value::String(s)) = p.get("thoughtSignature") {
                assert!(seen.insert(s.clone()), "P5: signature {s} on two parts");
            }
        }
    }
    // E4: candidates in index order.
    assert!(result
        .candidates
        .windows(2)
        .all(|w| w[0].index < w[1].index));
    format!("{deltas:?} {result:?}")
}

fuzz_target!(|stream: Stream| {
    let bytes = body(&stream);
    let step = usize::from(stream.cut % 23) + 1;
    let pieces: Vec<&[u8]> = bytes.chunks(step).collect();
    assert_eq!(run(&pieces), run(&[&bytes]), "F7: split {step}");
});
