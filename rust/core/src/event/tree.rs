//! An already parsed payload object (`feed_chunk()`), read into the same
//! shapes as a payload's bytes; its parts stay trees.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::{
    CandidateIn, ContentIn, EventIn, Fields, Items, PartIn, PartialArgIn, Shaped, TextOrValue,
};

#[must_use]
pub fn event_from_map(map: Map<String, Value>) -> EventIn<'static> {
    let mut out = EventIn::default();
    for (key, value) in map {
        match key.as_str() {
            "error" => out.rare.get_or_insert_default().error = Some(value),
            "candidates" => out.candidates = Some(items(value, candidate)),
            "usageMetadata" => {
                out.usage = Some(shaped(value, |m| {
                    Fields(m.into_iter().map(|(k, v)| (Cow::Owned(k), v)).collect())
                }));
            }
            "modelVersion" => out.model_version = Some(text_or_value(value)),
            "responseId" => out.response_id = Some(text_or_value(value)),
            "createTime" => out.create_time = Some(text_or_value(value)),
            "promptFeedback" => {
                out.rare.get_or_insert_default().prompt_feedback = Some(text_or_value(value));
            }
            "modelStatus" => out.rare.get_or_insert_default().model_status = Some(value),
            _ => {}
        }
    }
    out
}

/// R10: `partialArgs` of a `feed_chunk()` object into the shapes the scan reads.
#[must_use]
pub fn partial_args_from_value(value: Value) -> Shaped<Items<PartialArgIn<'static>>> {
    items(value, |map| {
        let mut out = PartialArgIn::default();
        for (key, value) in map {
            let null = value.is_null();
            match (key.as_str(), value) {
                ("jsonPath", Value::String(s)) => out.json_path = Some(Shaped::Expected(s.into())),
                ("jsonPath", _) => out.json_path = Some(off(null)),
                ("stringValue", Value::String(s)) => {
                    out.string_value = Some(Shaped::Expected(s.into()));
                }
                ("stringValue", _) => out.string_value = Some(off(null)),
                ("numberValue", Value::Number(n)) => out.number_value = Some(Shaped::Expected(n)),
                ("numberValue", _) => out.number_value = Some(off(null)),
                ("boolValue", Value::Bool(b)) => out.bool_value = Some(Shaped::Expected(b)),
                ("boolValue", _) => out.bool_value = Some(off(null)),
                ("nullValue", _) => out.null_value = true,
                _ => {}
            }
        }
        out
    })
}

/// The string of a string value.
fn owned_string(value: Value) -> Option<Cow<'static, str>> {
    match value {
        Value::String(s) => Some(Cow::Owned(s)),
        _ => None,
    }
}

/// Null, or a value of another type than the field's.
fn off<T>(null: bool) -> Shaped<T> {
    if null {
        Shaped::Null
    } else {
        Shaped::Other
    }
}

fn shaped<T>(value: Value, read: impl FnOnce(Map<String, Value>) -> T) -> Shaped<T> {
    match value {
        Value::Object(map) => Shaped::Expected(read(map)),
        Value::Null => Shaped::Null,
        _ => Shaped::Other,
    }
}

fn items<T>(value: Value, read: impl Fn(Map<String, Value>) -> T) -> Shaped<Items<T>> {
    match value {
        Value::Array(values) => {
            Shaped::Expected(values.into_iter().map(|v| shaped(v, &read)).collect())
        }
        Value::Null => Shaped::Null,
        _ => Shaped::Other,
    }
}

fn text_or_value(value: Value) -> TextOrValue<'static> {
    match value {
        Value::String(s) => TextOrValue::Text(Cow::Owned(s)),
        other => TextOrValue::Value(Box::new(other)),
    }
}

fn candidate(map: Map<String, Value>) -> CandidateIn<'static> {
    let mut out = CandidateIn::default();
    for (key, value) in map {
        match key.as_str() {
            "index" => {
                out.index = Some(match value {
                    Value::Number(n) => Shaped::Expected(n),
                    other => off(other.is_null()),
                });
            }
            "content" => {
                out.content = Some(shaped(value, |mut m| ContentIn {
                    parts: m.remove("parts").map(|p| items(p, part)),
                }));
            }
            "finishReason" => out.finish_reason = owned_string(value),
            "finishMessage" => out.finish_message = owned_string(value),
            _ => {
                out.rest.get_or_insert_default().insert(key, value);
            }
        }
    }
    out
}

/// RULE P8: plain text when every entry is a string `text` or a boolean
/// `thought` and there is a `text`.
fn part(mut map: Map<String, Value>) -> PartIn<'static> {
    let plain = map.contains_key("text")
        && map.iter().all(|(k, v)| match k.as_str() {
            "text" => v.is_string(),
            "thought" => v.is_boolean(),
            _ => false,
        });
    if !plain {
        return PartIn::Object(map);
    }
    let thought = map.get("thought").and_then(Value::as_bool).unwrap_or(false);
    match map.shift_remove("text") {
        Some(Value::String(text)) => PartIn::Plain {
            text: Cow::Owned(text),
            thought,
        },
        _ => PartIn::Object(map),
    }
}
