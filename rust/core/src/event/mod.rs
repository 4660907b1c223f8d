//! One event payload, read straight into the shapes the aggregator uses.
//!
//! A Gemini event is mostly fixed structure around a little text. Building a
//! generic JSON tree for it (a hash map per object) costs more than the rest
//! of the work together, so the levels the aggregator walks (event,
//! candidate, content, part) are read into typed fields by one strict scan of
//! the payload (R8, `bytes.rs`), plain text parts keep a borrowed slice of
//! it, and every other part is kept as its own JSON text (R7), built into
//! Python objects once, when a result is read. A field off its expected
//! shape is validated and marked (`Shaped::Other`) for E7's warning, which
//! says where it was and what was expected; values the aggregator keeps as
//! they came (usage, metadata, errors) stay generic `Value`s. `feed_chunk()`
//! hands over parsed objects instead: `tree.rs` reads those into the same
//! shapes.

use std::borrow::Cow;

use serde_json::{Map, Number, Value};

mod bytes;
mod tree;

pub use bytes::parse_event;
pub use tree::{event_from_map, partial_args_from_value};

/// orjson's nesting limit, which both implementations share (F10).
pub const MAX_JSON_DEPTH: usize = 1024;

/// A field that should have one JSON type but may have another. A value
/// off the shape is validated and skipped, not kept: what E7 reports of it
/// is where it was and what was expected.
#[derive(Debug)]
pub enum Shaped<T> {
    Null,
    Expected(T),
    Other,
}

/// One payload, split into what the aggregator reads (E1-E3).
#[derive(Debug, Default)]
pub struct EventIn<'a> {
    pub candidates: Option<Shaped<Items<CandidateIn<'a>>>>,
    pub usage: Option<Shaped<Fields<'a>>>,
    pub model_version: Option<TextOrValue<'a>>,
    pub response_id: Option<TextOrValue<'a>>,
    pub create_time: Option<TextOrValue<'a>>,
    /// `error`, `promptFeedback` and `modelStatus`, boxed together: rare, and the event is
    /// moved on every payload, in a few stores while it is at most 128 bytes
    /// (above that, a call to `memcpy`).
    pub rare: Option<Box<RareIn<'a>>>,
}

/// The top-level fields of an event that seldom come.
#[derive(Debug, Default)]
pub struct RareIn<'a> {
    pub error: Option<Value>,
    pub prompt_feedback: Option<TextOrValue<'a>>,
    /// `modelStatus` (E15): the model's lifecycle stage and retirement.
    pub model_status: Option<Value>,
}

#[derive(Debug, Default)]
pub struct CandidateIn<'a> {
    pub index: Option<Shaped<Number>>,
    pub content: Option<Shaped<ContentIn<'a>>>,
    /// When a string (any other value is ignored, E3).
    pub finish_reason: Option<Cow<'a, str>>,
    pub finish_message: Option<Cow<'a, str>>,
    /// Every other key, in arrival order (E5). Boxed, as the call below: a
    /// candidate is moved whole several times an event, and under 128 bytes
    /// a move is a few stores where above it is a call to `memcpy`.
    pub rest: Option<Box<Map<String, Value>>>,
}

#[derive(Debug, Default)]
pub struct ContentIn<'a> {
    pub parts: Option<Shaped<Items<PartIn<'a>>>>,
}

/// A list of shaped items.
pub type Items<T> = Vec<Shaped<T>>;

/// An object read as its entries in arrival order, keys borrowed from the
/// payload when they have no escapes (`usageMetadata`, merged key by key).
#[derive(Debug, Default)]
pub struct Fields<'a>(pub Vec<(Cow<'a, str>, Value)>);

/// A part: plain text (only `text`, a string, and `thought`, a boolean: P1)
/// or any other object, as its JSON text or, from `feed_chunk()`, as a tree.
#[derive(Debug)]
pub enum PartIn<'a> {
    /// RULE P8: `text` (a string) and optionally `thought` (a boolean), nothing else.
    Plain { text: Cow<'a, str>, thought: bool },
    /// R7: any other part of a payload, kept as received.
    Raw(RawPartIn<'a>),
    /// Any other part of an object handed over by `feed_chunk()`.
    Object(Map<String, Value>),
}

/// A part kept as its JSON text, with what the aggregator reads of it
/// (the last entry wins for a key that repeats, as in a parsed object).
#[derive(Debug)]
pub struct RawPartIn<'a> {
    /// The part object exactly as it came (validated).
    pub json: &'a str,
    /// `{}` (P6).
    pub empty: bool,
    /// `text`, when it is a string (P3).
    pub text: Option<Cow<'a, str>>,
    /// `thought` is `true`.
    pub thought: bool,
    /// The part has a `functionCall` key (P7), whatever its value.
    pub has_call_key: bool,
    /// `functionCall`, when it is an object (C1, C3). Boxed: a part is moved
    /// whole several times an event, a plain text part too (`PartIn`'s size
    /// is its largest variant's), and this keeps it under 128 bytes.
    pub call: Option<Box<CallPeek<'a>>>,
    /// Where `thoughtSignature`'s value is in the part's text (a streamed
    /// chunk's signature goes to its call, P5).
    pub signature: Option<(usize, usize)>,
}

/// What C1, C3 and C11 read of a `functionCall` object.
#[derive(Debug, Default)]
pub struct CallPeek<'a> {
    /// RULE C3: a streamed chunk, as opposed to a complete call (C1).
    pub streamed: bool,
    /// `id`, when it is a string.
    pub id: Option<Cow<'a, str>>,
    /// `name`, when it is a string.
    pub name: Option<Cow<'a, str>>,
    /// Where `args` is in the part's text, when it is an object.
    pub args: Option<(usize, usize)>,
    /// `partialArgs`, read in the same pass: it is applied to the call's
    /// arguments (C4), never kept as text.
    pub partial_args: Option<Shaped<Items<PartialArgIn<'a>>>>,
    /// `willContinue` is `true` (C6).
    pub keeps_open: bool,
}

/// R10: one item of `partialArgs`, read field by field into what C4, C5 and
/// C9 use of it (no map is built; the last entry wins for a key that repeats,
/// as in a parsed object). Every other key is validated and skipped.
#[derive(Debug, Default)]
pub struct PartialArgIn<'a> {
    pub json_path: Option<Shaped<Cow<'a, str>>>,
    pub string_value: Option<Shaped<Cow<'a, str>>>,
    pub number_value: Option<Shaped<Number>>,
    pub bool_value: Option<Shaped<bool>>,
    /// `nullValue` is present (whatever its value: it writes null).
    pub null_value: bool,
}

/// Why a payload could not be used (F8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    InvalidUtf8,
    InvalidJson,
    NotAnObject,
}

/// A string kept borrowed when it has no escapes, or any other value.
#[derive(Debug)]
pub enum TextOrValue<'a> {
    Text(Cow<'a, str>),
    /// Boxed: rare, and four of these are in every event.
    Value(Box<Value>),
}

impl TextOrValue<'_> {
    #[must_use]
    pub fn into_value(self) -> Value {
        match self {
            Self::Text(t) => Value::String(t.into_owned()),
            Self::Value(v) => *v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f10_nesting_around_serde_jsons_own_limit_parses() {
        for depth in 120..=136 {
            let doc = format!("{{\"a\":{}1{}}}", "[".repeat(depth), "]".repeat(depth));
            assert!(parse_event(doc.as_bytes()).is_ok(), "depth {depth}");
        }
    }

    /// F10: invalid UTF-8 is found wherever it is (a key, a kept or skipped
    /// string, around an escape, after the value), and wins over invalid
    /// JSON anywhere in the payload.
    #[test]
    fn f10_invalid_utf8_anywhere_is_reported_before_invalid_json() {
        let part = |p: &str| format!(r#"{{"candidates":[{{"content":{{"parts":[{p}]}}}}]}}"#);
        let cases: Vec<(Vec<u8>, ParseError)> = vec![
            (b"{\"\xff\":1}".to_vec(), ParseError::InvalidUtf8),
            (
                b"{\"a\":{\"b\":[\"x\xc3\"]}}".to_vec(),
                ParseError::InvalidUtf8,
            ),
            (b"{\"a\":\"a\\n\xc3\"}".to_vec(), ParseError::InvalidUtf8),
            (b"{\"a\":\"\xc3\\n\xa9\"}".to_vec(), ParseError::InvalidUtf8),
            (
                b"{\"a\":\"\xed\xa0\x80\"}".to_vec(),
                ParseError::InvalidUtf8,
            ),
            (b"{\"a\":,\"b\":\"\xff\"}".to_vec(), ParseError::InvalidUtf8),
            (b"{\"a\":1}\xff".to_vec(), ParseError::InvalidUtf8),
            (b"{\"a\":1} x".to_vec(), ParseError::InvalidJson),
            (b"{\"a\":\xc3\xa9}".to_vec(), ParseError::InvalidJson),
            (b"[\"\xe2\x82\"]".to_vec(), ParseError::InvalidUtf8),
            (
                b"{\"usageMetadata\":{\"k\":\"\xf0\x9f\"}}".to_vec(),
                ParseError::InvalidUtf8,
            ),
            (
                b"{\"modelVersion\":\"m\\t\xff\"}".to_vec(),
                ParseError::InvalidUtf8,
            ),
        ];
        let mut cases = cases;
        for p in [
            "{\"text\":\"ok \u{20ac}\u{fffd}\"}",
            "{\"text\":\"a\\nb\"}",
            "{\"functionCall\":{\"name\":\"f\",\"args\":{\"q\":\"\u{1f600}\"}}}",
        ] {
            let good = part(p);
            assert!(parse_event(good.as_bytes()).is_ok(), "{good}");
            // The same with the last byte of its last non-ASCII character
            // cut: that character is no longer whole.
            let mut bad = good.into_bytes();
            if let Some(at) = bad.iter().rposition(|&b| b >= 0x80) {
                bad.remove(at);
                cases.push((bad, ParseError::InvalidUtf8));
            }
        }
        // A kept text with a lone lead byte after an escape.
        let mut lone = part("{\"text\":\"a\\n\u{e9}\"}").into_bytes();
        if let Some(at) = lone.iter().rposition(|&b| b == 0xA9) {
            lone.remove(at);
        }
        cases.push((lone, ParseError::InvalidUtf8));
        for (payload, expected) in cases {
            assert_eq!(parse_event(&payload).err(), Some(expected), "{payload:?}");
        }
    }

    #[test]
    fn r8_strings_read_from_bytes_are_the_strings_of_the_payload() {
        let payload = "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"caf\u{e9} \u{65e5}\\n\u{1f600}\"},\
            {\"thoughtSignature\":\"s\u{e9}g\",\"functionCall\":{\"id\":\"\u{e9}\",\"name\":\"n\u{e9}\",\"args\":{\"k\":\"v\u{e9}\"}}}]}}],\
            \"modelVersion\":\"m\u{e9}\"}";
        let event = parse_event(payload.as_bytes()).expect("valid");
        let Some(Shaped::Expected(candidates)) = event.candidates else {
            panic!("candidates")
        };
        let Some(Shaped::Expected(c)) = candidates.into_iter().next() else {
            panic!("candidate")
        };
        let Some(Shaped::Expected(content)) = c.content else {
            panic!("content")
        };
        let Some(Shaped::Expected(parts)) = content.parts else {
            panic!("parts")
        };
        let mut parts = parts.into_iter();
        match parts.next() {
            Some(Shaped::Expected(PartIn::Plain {
                text,
                thought: false,
            })) => {
                assert_eq!(text, "caf\u{e9} \u{65e5}\n\u{1f600}");
            }
            other => panic!("{other:?}"),
        }
        match parts.next() {
            Some(Shaped::Expected(PartIn::Raw(raw))) => {
                assert_eq!(raw.json, "{\"thoughtSignature\":\"s\u{e9}g\",\"functionCall\":{\"id\":\"\u{e9}\",\"name\":\"n\u{e9}\",\"args\":{\"k\":\"v\u{e9}\"}}}");
                let call = raw.call.expect("call");
                assert_eq!(
                    (call.id.as_deref(), call.name.as_deref()),
                    (Some("\u{e9}"), Some("n\u{e9}"))
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(event.model_version, Some(TextOrValue::Text(t)) if t == "m\u{e9}"));
    }

    #[test]
    fn f10_nesting_up_to_1024_levels_parses() {
        let ok = format!("{{\"a\":{}1{}}}", "[".repeat(1023), "]".repeat(1023));
        assert!(parse_event(ok.as_bytes()).is_ok());
        let too_deep = format!("{{\"a\":{}1{}}}", "[".repeat(1024), "]".repeat(1024));
        assert_eq!(
            parse_event(too_deep.as_bytes()).err(),
            Some(ParseError::InvalidJson)
        );
        assert_eq!(parse_event(b"[1]").err(), Some(ParseError::NotAnObject));
        assert_eq!(parse_event(b"{} x").err(), Some(ParseError::InvalidJson));
        assert_eq!(
            parse_event(b"{\"a\": \"\xff\"}").err(),
            Some(ParseError::InvalidUtf8)
        );
    }
}
