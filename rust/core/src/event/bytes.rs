//! A payload read by one strict scan (R8): the levels the aggregator walks
//! are read into typed fields, everything else is skipped, validated, and
//! never built.

use std::borrow::Cow;

use serde_json::Value;

use super::{
    CallPeek, CandidateIn, ContentIn, EventIn, Fields, Items, ParseError, PartIn, PartialArgIn,
    RawPartIn, Shaped, TextOrValue,
};
use crate::scan::{Scan, Scanner};

/// Parses one payload. F10's order: invalid UTF-8 anywhere first, then
/// invalid JSON, then a value that is not an object.
pub fn parse_event(data: &[u8]) -> Result<EventIn<'_>, ParseError> {
    let text = simdutf8::basic::from_utf8(data).map_err(|_| ParseError::InvalidUtf8)?;
    let mut s = Scanner::new(text);
    let event = if s.peek() == Some(b'{') {
        read_event(&mut s).map(Some)
    } else {
        s.skip_value().map(|()| None)
    };
    match event {
        Ok(event) if s.at_end() => event.ok_or(ParseError::NotAnObject),
        _ => Err(ParseError::InvalidJson),
    }
}

fn read_event<'a>(s: &mut Scanner<'a>) -> Scan<EventIn<'a>> {
    let mut out = EventIn::default();
    s.begin_object()?;
    let mut first = true;
    while let Some(key) = s.next_key(&mut first)? {
        match key.as_ref() {
            "error" => out.rare.get_or_insert_default().error = Some(s.value()?),
            "candidates" => out.candidates = Some(items(s, read_candidate)?),
            "usageMetadata" => out.usage = Some(shaped(s, read_fields)?),
            "modelVersion" => out.model_version = Some(text_or_value(s)?),
            "responseId" => out.response_id = Some(text_or_value(s)?),
            "createTime" => out.create_time = Some(text_or_value(s)?),
            "promptFeedback" => {
                out.rare.get_or_insert_default().prompt_feedback = Some(text_or_value(s)?);
            }
            "modelStatus" => out.rare.get_or_insert_default().model_status = Some(s.value()?),
            // E17: every other top-level key is the SDK's, not the service's: ignored.
            _ => s.skip_value()?,
        }
    }
    Ok(out)
}

/// An object read by `read`; null, or any other value kept as it is.
fn shaped<'a, T>(
    s: &mut Scanner<'a>,
    read: impl FnOnce(&mut Scanner<'a>) -> Scan<T>,
) -> Scan<Shaped<T>> {
    if s.peek() == Some(b'{') {
        return read(s).map(Shaped::Expected);
    }
    other(s)
}

/// A value off the expected shape: null, or any other (validated, skipped).
fn other<T>(s: &mut Scanner<'_>) -> Scan<Shaped<T>> {
    let null = s.peek() == Some(b'n');
    s.skip_value()?;
    Ok(if null { Shaped::Null } else { Shaped::Other })
}

/// A list of objects, each read by `read`; null, or any other value kept.
fn items<'a, T>(
    s: &mut Scanner<'a>,
    read: impl Fn(&mut Scanner<'a>) -> Scan<T>,
) -> Scan<Shaped<Items<T>>> {
    if s.peek() != Some(b'[') {
        return other(s);
    }
    s.begin_array()?;
    // Nearly every list here (candidates, parts) has one item: room for one,
    // not the four a first push would make.
    let mut out = if s.peek() == Some(b']') {
        Items::new()
    } else {
        Items::with_capacity(1)
    };
    let mut first = true;
    while s.next_item(&mut first)? {
        out.push(shaped(s, &read)?);
    }
    Ok(Shaped::Expected(out))
}

fn text_or_value<'a>(s: &mut Scanner<'a>) -> Scan<TextOrValue<'a>> {
    if s.peek() == Some(b'"') {
        s.string().map(TextOrValue::Text)
    } else {
        s.value().map(|v| TextOrValue::Value(Box::new(v)))
    }
}

fn read_candidate<'a>(s: &mut Scanner<'a>) -> Scan<CandidateIn<'a>> {
    let mut out = CandidateIn::default();
    s.begin_object()?;
    let mut first = true;
    while let Some(key) = s.next_key(&mut first)? {
        match key.as_ref() {
            "index" => {
                out.index = Some(match s.peek() {
                    Some(b'-' | b'0'..=b'9') => Shaped::Expected(s.number()?),
                    _ => other(s)?,
                });
            }
            "content" => out.content = Some(shaped(s, read_content)?),
            "finishReason" => {
                let next = s.peek();
                out.finish_reason = string_or_skip(s, next)?;
            }
            "finishMessage" => {
                let next = s.peek();
                out.finish_message = string_or_skip(s, next)?;
            }
            _ => {
                let value = s.value()?;
                out.rest
                    .get_or_insert_default()
                    .insert(key.into_owned(), value);
            }
        }
    }
    Ok(out)
}

fn read_fields<'a>(s: &mut Scanner<'a>) -> Scan<Fields<'a>> {
    let mut out = Fields::default();
    s.begin_object()?;
    let mut first = true;
    while let Some(key) = s.next_key(&mut first)? {
        let value = s.value()?;
        out.0.push((key, value));
    }
    Ok(out)
}

fn read_content<'a>(s: &mut Scanner<'a>) -> Scan<ContentIn<'a>> {
    let mut out = ContentIn::default();
    s.begin_object()?;
    let mut first = true;
    while let Some(key) = s.next_key(&mut first)? {
        if key == "parts" {
            out.parts = Some(items(s, read_part)?);
        } else {
            s.skip_value()?;
        }
    }
    Ok(out)
}

/// A part: plain text (P8) or its JSON text with what the aggregator reads.
fn read_part<'a>(s: &mut Scanner<'a>) -> Scan<PartIn<'a>> {
    let start = s.position();
    let mut part = RawPartIn {
        json: "",
        empty: true,
        text: None,
        thought: false,
        has_call_key: false,
        call: None,
        signature: None,
    };
    // Every entry so far is a string `text` or a boolean `thought`.
    let mut plain = true;
    s.begin_object()?;
    let mut first = true;
    while let Some(key) = s.next_key(&mut first)? {
        part.empty = false;
        let next = s.peek();
        match (key.as_ref(), next) {
            ("text", Some(b'"')) => part.text = Some(s.string()?),
            ("thought", Some(b't' | b'f')) => part.thought = s.value()? == Value::Bool(true),
            ("thoughtSignature", _) => {
                plain = false;
                let at = s.position();
                s.skip_value()?;
                part.signature = Some((at - start, s.position() - start));
            }
            ("functionCall", Some(b'{')) => {
                plain = false;
                part.has_call_key = true;
                part.call = Some(Box::new(read_call(s, start)?));
            }
            (key, _) => {
                plain = false;
                match key {
                    "text" => part.text = None,
                    "thought" => part.thought = false,
                    "functionCall" => {
                        part.has_call_key = true;
                        part.call = None;
                    }
                    _ => {}
                }
                s.skip_value()?;
            }
        }
    }
    part.json = s.since(start);
    Ok(match part.text {
        Some(text) if plain => PartIn::Plain {
            text,
            thought: part.thought,
        },
        _ => PartIn::Raw(part),
    })
}

/// C3 and C11 read from a `functionCall` object; `args` located relative
/// to the part's start.
fn read_call<'a>(s: &mut Scanner<'a>, part_start: usize) -> Scan<CallPeek<'a>> {
    let mut out = CallPeek::default();
    let (mut has_name, mut has_args, mut will_continue, mut partial) = (false, false, false, false);
    s.begin_object()?;
    let mut first = true;
    while let Some(key) = s.next_key(&mut first)? {
        let next = s.peek();
        let start = s.position();
        match key.as_ref() {
            "id" => out.id = string_or_skip(s, next)?,
            "name" => {
                has_name = true;
                out.name = string_or_skip(s, next)?;
            }
            "args" => {
                has_args = true;
                s.skip_value()?;
                out.args =
                    (next == Some(b'{')).then(|| (start - part_start, s.position() - part_start));
            }
            "partialArgs" => {
                let args = items(s, read_partial_arg)?;
                // Null and `[]` mark no chunk; any other value does (C3).
                partial = match &args {
                    Shaped::Null => false,
                    Shaped::Expected(items) => !items.is_empty(),
                    Shaped::Other => true,
                };
                out.partial_args = Some(args);
            }
            "willContinue" => {
                will_continue = true;
                out.keeps_open = s.value()? == Value::Bool(true);
            }
            _ => s.skip_value()?,
        }
    }
    // RULE C3: a chunk streams when it has partial arguments, says it will
    // continue, or has neither a name nor arguments (an end marker).
    out.streamed = partial || will_continue || (!has_name && !has_args);
    Ok(out)
}

/// R10: a `partialArgs` item into its typed fields.
fn read_partial_arg<'a>(s: &mut Scanner<'a>) -> Scan<PartialArgIn<'a>> {
    let mut out = PartialArgIn::default();
    s.begin_object()?;
    let mut first = true;
    while let Some(key) = s.next_key(&mut first)? {
        match key.as_ref() {
            "jsonPath" => out.json_path = Some(string(s)?),
            "stringValue" => out.string_value = Some(string(s)?),
            "numberValue" => {
                out.number_value = Some(match s.peek() {
                    Some(b'-' | b'0'..=b'9') => match s.value()? {
                        Value::Number(n) => Shaped::Expected(n),
                        _ => Shaped::Other,
                    },
                    _ => other(s)?,
                });
            }
            "boolValue" => {
                out.bool_value = Some(match s.peek() {
                    Some(b't' | b'f') => Shaped::Expected(s.value()? == Value::Bool(true)),
                    _ => other(s)?,
                });
            }
            "nullValue" => {
                out.null_value = true;
                s.skip_value()?;
            }
            _ => s.skip_value()?,
        }
    }
    Ok(out)
}

/// A string, or null or any other value.
fn string<'a>(s: &mut Scanner<'a>) -> Scan<Shaped<Cow<'a, str>>> {
    if s.peek() == Some(b'"') {
        s.string().map(Shaped::Expected)
    } else {
        other(s)
    }
}

fn string_or_skip<'a>(s: &mut Scanner<'a>, next: Option<u8>) -> Scan<Option<Cow<'a, str>>> {
    if next == Some(b'"') {
        s.string().map(Some)
    } else {
        s.skip_value().map(|()| None)
    }
}
