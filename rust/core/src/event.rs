//! Parsing one event payload straight into the shapes the aggregator uses.
//!
//! A Gemini event is mostly fixed structure around a little text. Building a
//! generic JSON tree for it (a hash map per object) costs more than the rest
//! of the work together, so the levels the aggregator walks (event, candidate,
//! content, part) are read by visitors into typed fields, and plain text parts
//! keep a borrowed slice of the payload. Anything off the expected shape is
//! kept as a generic `Value`, so nothing is lost and the E7 warnings still
//! see what arrived. Parts other than plain text are kept as key-ordered maps
//! (byte-exact, P3/P4).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Number, Value};
use smallvec::SmallVec;

/// orjson's nesting limit, which both implementations share (F10).
pub const MAX_JSON_DEPTH: usize = 1024;

/// A field that should have one JSON type but may have another.
#[derive(Debug)]
pub enum Shaped<T> {
    Null,
    Expected(T),
    Other(Value),
}

/// One payload, split into what the aggregator reads (E1-E3).
#[derive(Debug, Default)]
pub struct EventIn<'a> {
    pub error: Option<Value>,
    pub candidates: Option<Shaped<Items<CandidateIn<'a>>>>,
    pub usage: Option<Shaped<Fields<'a>>>,
    pub model_version: Option<TextOrValue<'a>>,
    pub response_id: Option<TextOrValue<'a>>,
    pub create_time: Option<TextOrValue<'a>>,
    pub prompt_feedback: Option<TextOrValue<'a>>,
}

#[derive(Debug, Default)]
pub struct CandidateIn<'a> {
    pub index: Option<Value>,
    pub content: Option<Shaped<ContentIn<'a>>>,
    pub finish_reason: Option<Value>,
    pub finish_message: Option<Value>,
    /// Every other key, in arrival order (E5).
    pub rest: Map<String, Value>,
}

#[derive(Debug, Default)]
pub struct ContentIn<'a> {
    pub parts: Option<Shaped<Items<PartIn<'a>>>>,
}

/// A list of shaped items. (Kept on the heap: inline storage made these
/// structs large, and moving them through the parser cost more than the
/// allocation.)
pub type Items<T> = Vec<Shaped<T>>;

/// An object read as its entries in arrival order, keys borrowed from the
/// payload when they have no escapes (`usageMetadata`, merged key by key).
#[derive(Debug, Default)]
pub struct Fields<'a>(pub Vec<(Cow<'a, str>, Value)>);

/// A part: plain text (only `text`, a string, and `thought`, a boolean: P1)
/// or any other object, kept with its keys in order.
#[derive(Debug)]
pub enum PartIn<'a> {
    /// RULE P8: `text` (a string) and optionally `thought` (a boolean), nothing else.
    Plain {
        text: Cow<'a, str>,
        thought: bool,
    },
    Object(Map<String, Value>),
}

/// Why a payload could not be used (F8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    InvalidUtf8,
    InvalidJson,
    NotAnObject,
}

/// Parses one payload; nesting up to orjson's limit. UTF-8 is validated by
/// the parser itself (outside strings JSON is ASCII), so a failed parse is
/// classified afterwards: invalid UTF-8 first, then invalid JSON (F10).
pub fn parse_event(data: &[u8]) -> Result<EventIn<'_>, ParseError> {
    let mut de = serde_json::Deserializer::from_slice(data);
    let first = Top::deserialize(&mut de).and_then(|top| de.end().map(|()| top));
    let top = match first {
        Ok(top) => top,
        Err(e) if needs_deep_parse(&e, data) => {
            // Deep documents are rare: parse again without serde_json's
            // limit, growing the stack on the heap as needed.
            let mut de = serde_json::Deserializer::from_slice(data);
            de.disable_recursion_limit();
            match Top::deserialize(serde_stacker::Deserializer::new(&mut de))
                .and_then(|top| de.end().map(|()| top))
            {
                Ok(top) => top,
                Err(_) => return Err(classify(data)),
            }
        }
        Err(_) => return Err(classify(data)),
    };
    match top {
        Top::Event(event) => Ok(*event),
        Top::NotAnObject => Err(ParseError::NotAnObject),
    }
}

fn classify(data: &[u8]) -> ParseError {
    if std::str::from_utf8(data).is_err() {
        ParseError::InvalidUtf8
    } else {
        ParseError::InvalidJson
    }
}

/// Reads an already parsed payload object (`feed_chunk`).
#[must_use]
pub fn event_from_map(map: Map<String, Value>) -> EventIn<'static> {
    match Top::deserialize(Value::Object(map)) {
        Ok(Top::Event(event)) => *event,
        // An object always reads as an event; nothing else can happen.
        _ => EventIn::default(),
    }
}

/// `serde_json` refuses documents nested deeper than this.
const SERDE_DEPTH_LIMIT: usize = 128;

/// F10: a parse that failed may have hit `serde_json`'s nesting limit, below
/// orjson's: decided from the error's category and the document's depth,
/// never from the error's text (another crate's wording is not an interface).
pub(crate) fn needs_deep_parse(err: &serde_json::Error, data: &[u8]) -> bool {
    err.is_syntax() && (SERDE_DEPTH_LIMIT..=MAX_JSON_DEPTH).contains(&nesting_depth(data))
}

/// The deepest nesting of arrays and objects outside strings.
pub(crate) fn nesting_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

// ------------------------------------------------------------------ visitors

enum Top<'a> {
    Event(Box<EventIn<'a>>),
    NotAnObject,
}

impl<'de> Deserialize<'de> for Top<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Top<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                EventIn::from_map(map).map(|e| Top::Event(Box::new(e)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<TextOrValue<'de>>()?.is_some() {}
                Ok(Top::NotAnObject)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Top::NotAnObject)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Top::NotAnObject)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Top::NotAnObject)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Top::NotAnObject)
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Top::NotAnObject)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Top::NotAnObject)
            }
        }
        d.deserialize_any(V)
    }
}

/// Types read from a JSON object by a visitor.
trait FromMap<'de>: Sized {
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error>;
}

impl<'de> FromMap<'de> for EventIn<'de> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut out = EventIn::default();
        while let Some(key) = map.next_key::<Key<'de>>()?.map(|k| k.0) {
            match key.as_ref() {
                "error" => out.error = Some(map.next_value()?),
                "candidates" => out.candidates = Some(map.next_value()?),
                "usageMetadata" => out.usage = Some(map.next_value()?),
                "modelVersion" => out.model_version = Some(map.next_value()?),
                "responseId" => out.response_id = Some(map.next_value()?),
                "createTime" => out.create_time = Some(map.next_value()?),
                "promptFeedback" => out.prompt_feedback = Some(map.next_value()?),
                _ => {
                    // Read (not skipped) so the nesting limit applies as in orjson.
                    map.next_value::<TextOrValue<'de>>()?;
                }
            }
        }
        Ok(out)
    }
}

impl<'de> FromMap<'de> for CandidateIn<'de> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut out = CandidateIn::default();
        while let Some(key) = map.next_key::<Key<'de>>()?.map(|k| k.0) {
            match key.as_ref() {
                "index" => out.index = Some(map.next_value()?),
                "content" => out.content = Some(map.next_value()?),
                "finishReason" => out.finish_reason = Some(map.next_value()?),
                "finishMessage" => out.finish_message = Some(map.next_value()?),
                _ => {
                    out.rest.insert(key.into_owned(), map.next_value()?);
                }
            }
        }
        Ok(out)
    }
}

impl<'de> FromMap<'de> for Fields<'de> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut out = Fields::default();
        while let Some(key) = map.next_key::<Key<'de>>()?.map(|k| k.0) {
            out.0.push((key, map.next_value()?));
        }
        Ok(out)
    }
}

impl<'de> FromMap<'de> for ContentIn<'de> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut out = ContentIn::default();
        while let Some(key) = map.next_key::<Key<'de>>()?.map(|k| k.0) {
            if key == "parts" {
                out.parts = Some(map.next_value()?);
            } else {
                map.next_value::<TextOrValue<'de>>()?;
            }
        }
        Ok(out)
    }
}

impl<'de> FromMap<'de> for PartIn<'de> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        // Entries so far, while they still look like plain text.
        let mut seen: SmallVec<[(Cow<'de, str>, TextOrValue<'de>); 2]> = SmallVec::new();
        while let Some(key) = map.next_key::<Key<'de>>()?.map(|k| k.0) {
            let value = map.next_value::<TextOrValue<'de>>()?;
            let plain = matches!(
                (key.as_ref(), &value),
                ("text", TextOrValue::Text(_)) | ("thought", TextOrValue::Value(Value::Bool(_)))
            );
            seen.push((key, value));
            if !plain {
                // Not plain text: keep every key in arrival order.
                let mut object = Map::new();
                for (k, v) in seen {
                    object.insert(k.into_owned(), v.into_value());
                }
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    object.insert(k, v);
                }
                return Ok(PartIn::Object(object));
            }
        }
        let mut text = None;
        let mut thought = false;
        let mut has_thought = false;
        for (key, value) in &mut seen {
            match value {
                TextOrValue::Text(t) if key == "text" => text = Some(std::mem::take(t)),
                TextOrValue::Value(Value::Bool(b)) => {
                    thought = *b;
                    has_thought = true;
                }
                _ => {}
            }
        }
        Ok(if let Some(text) = text {
            PartIn::Plain { text, thought }
        } else {
            let mut object = Map::new();
            if has_thought {
                object.insert("thought".into(), Value::Bool(thought));
            }
            PartIn::Object(object)
        })
    }
}

/// An object key, borrowed from the payload when it has no escapes (serde's
/// own `Cow<str>` always allocates).
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

/// A string kept borrowed when it has no escapes, or any other value.
#[derive(Debug)]
pub enum TextOrValue<'a> {
    Text(Cow<'a, str>),
    Value(Value),
}

impl TextOrValue<'_> {
    #[must_use]
    pub fn into_value(self) -> Value {
        match self {
            Self::Text(t) => Value::String(t.into_owned()),
            Self::Value(v) => v,
        }
    }
}

impl<'de> Deserialize<'de> for TextOrValue<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TextOrValue<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(TextOrValue::Text(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(TextOrValue::Text(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
                Ok(TextOrValue::Text(Cow::Owned(s)))
            }
            fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
                Ok(TextOrValue::Value(Value::Bool(b)))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Self::Value, E> {
                Ok(TextOrValue::Value(Value::from(n)))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Self::Value, E> {
                Ok(TextOrValue::Value(Value::from(n)))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Self::Value, E> {
                Number::from_f64(n)
                    .map(|n| TextOrValue::Value(Value::Number(n)))
                    .ok_or_else(|| E::custom("number is not finite"))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(TextOrValue::Value(Value::Null))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                ValueSeed.visit_seq(seq).map(TextOrValue::Value)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                ValueSeed.visit_map(map).map(TextOrValue::Value)
            }
        }
        d.deserialize_any(V)
    }
}

/// Builds a generic `Value` from visitor calls (the arms that are off shape).
#[derive(Clone, Copy)]
struct ValueSeed;

impl<'de> Visitor<'de> for ValueSeed {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Value, E> {
        Number::from_f64(n)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number is not finite"))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Value>()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some((k, v)) = map.next_entry::<String, Value>()? {
            object.insert(k, v);
        }
        Ok(Value::Object(object))
    }
}

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// The visitor methods that keep a scalar of the wrong type as `Shaped::Other`.
macro_rules! scalars_are_other {
    () => {
        fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
            Ok(Shaped::Other(Value::Bool(b)))
        }
        fn visit_i64<E>(self, n: i64) -> Result<Self::Value, E> {
            Ok(Shaped::Other(Value::from(n)))
        }
        fn visit_u64<E>(self, n: u64) -> Result<Self::Value, E> {
            Ok(Shaped::Other(Value::from(n)))
        }
        fn visit_f64<E: de::Error>(self, n: f64) -> Result<Self::Value, E> {
            ValueSeed.visit_f64(n).map(Shaped::Other)
        }
        fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
            Ok(Shaped::Other(Value::String(s.to_owned())))
        }
    };
}

/// `Shaped<T>` for objects: a map is read as `T`, anything else kept as is.
impl<'de, T: FromMap<'de>> Deserialize<'de> for Shaped<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: FromMap<'de>> Visitor<'de> for V<T> {
            type Value = Shaped<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::from_map(map).map(Shaped::Expected)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Shaped::Null)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                ValueSeed.visit_seq(seq).map(Shaped::Other)
            }
            scalars_are_other!();
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// Lists of shaped items: an array is read item by item, anything else kept.
impl<'de, T> Deserialize<'de> for Shaped<Items<T>>
where
    T: FromMap<'de>,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: FromMap<'de>> Visitor<'de> for V<T> {
            type Value = Shaped<Items<T>>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Items::new();
                while let Some(item) = seq.next_element::<Shaped<T>>()? {
                    items.push(item);
                }
                Ok(Shaped::Expected(items))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Shaped::Null)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                ValueSeed.visit_map(map).map(Shaped::Other)
            }
            scalars_are_other!();
        }
        d.deserialize_any(V(std::marker::PhantomData))
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
