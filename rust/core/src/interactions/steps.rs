//! One step of an interaction (interactions.md I10-I13, I17): its value as
//! the wire built it, and the argument parser of a call step.

use serde_json::{Map, Value};

use super::args::{ArgParser, ArgPiece};

/// A step being assembled from `step.start` and its deltas.
#[derive(Debug, Default)]
pub struct Step {
    pub value: Map<String, Value>,
    pub stopped: bool,
    /// Present once an `arguments_delta` arrived.
    pub parser: Option<ArgParser>,
    /// The arguments did not parse (I16).
    pub invalid: bool,
}

/// What applying a delta produced for the caller to report.
#[derive(Debug, Default)]
pub struct Applied {
    /// `(text, thought)` for a `TextDelta`.
    pub text: Option<(String, bool)>,
    pub args: Vec<ArgPiece>,
    /// A value was withheld from live deltas for its path length (I15).
    pub long_path: bool,
    /// A warning suffix (after `I12: event {n}: step {i}: `).
    pub problem: Option<&'static str>,
}

/// The step type a delta implies for a step with no `step.start` (I11).
#[must_use]
pub fn implied_type(delta_type: &str) -> &str {
    match delta_type {
        "text" => "model_output",
        "thought_summary" | "thought_signature" => "thought",
        "arguments_delta" => "function_call",
        other => other,
    }
}

/// Appends text to a `content`/`summary` list, onto the last text item when
/// there is one (I12).
fn append_text(list: &mut Vec<Value>, text: &str) {
    if let Some(Value::Object(last)) = list.last_mut() {
        if last.get("type").and_then(Value::as_str) == Some("text") {
            if let Some(Value::String(s)) = last.get_mut("text") {
                s.push_str(text);
                return;
            }
        }
    }
    let mut item = Map::new();
    item.insert("type".into(), Value::String("text".into()));
    item.insert("text".into(), Value::String(text.to_owned()));
    list.push(Value::Object(item));
}

/// Runs `f` on the list under `key` (made a list when missing or another
/// type, I12).
fn with_list<R>(
    map: &mut Map<String, Value>,
    key: &str,
    f: impl FnOnce(&mut Vec<Value>) -> R,
) -> R {
    let slot = map.entry(key.to_owned()).or_insert(Value::Null);
    let mut items = match std::mem::take(slot) {
        Value::Array(items) => items,
        _ => Vec::new(),
    };
    let result = f(&mut items);
    *slot = Value::Array(items);
    result
}

impl Step {
    #[must_use]
    pub fn new(value: Map<String, Value>) -> Self {
        Self {
            value,
            ..Self::default()
        }
    }

    #[must_use]
    pub fn step_type(&self) -> Option<&str> {
        self.value.get("type").and_then(Value::as_str)
    }

    #[must_use]
    pub fn is_call(&self) -> bool {
        self.step_type() == Some("function_call")
    }

    /// Applies one delta object with a string `type` (I12).
    pub fn apply(&mut self, kind: &str, delta: &Map<String, Value>, live: bool) -> Applied {
        let mut out = Applied::default();
        match kind {
            "text" => {
                if let Some(text) = delta.get("text").and_then(Value::as_str) {
                    with_list(&mut self.value, "content", |items| append_text(items, text));
                    if !text.is_empty() {
                        out.text = Some((text.to_owned(), false));
                    }
                }
            }
            "thought_summary" => {
                if let Some(Value::Object(content)) = delta.get("content") {
                    let text = (content.get("type").and_then(Value::as_str) == Some("text"))
                        .then(|| content.get("text").and_then(Value::as_str))
                        .flatten();
                    with_list(&mut self.value, "summary", |summary| match text {
                        Some(t) => append_text(summary, t),
                        None => summary.push(Value::Object(content.clone())),
                    });
                    if let Some(t) = text.filter(|t| !t.is_empty()) {
                        out.text = Some((t.to_owned(), true));
                    }
                }
            }
            "thought_signature" => {
                if let Some(sig @ Value::String(_)) = delta.get("signature") {
                    self.value.insert("signature".into(), sig.clone());
                }
            }
            "arguments_delta" => {
                if let Some(fragment) = delta.get("arguments").and_then(Value::as_str) {
                    let parser = self.parser.get_or_insert_with(ArgParser::new);
                    out.long_path = parser.feed(fragment, live, &mut out.args);
                }
            }
            "text_annotation_delta" => {
                let annotations = match delta.get("annotations") {
                    Some(Value::Array(a)) => a.clone(),
                    _ => Vec::new(),
                };
                let last = match self.value.get_mut("content") {
                    Some(Value::Array(items)) => items.last_mut(),
                    _ => None,
                };
                match last {
                    Some(Value::Object(item)) => {
                        with_list(item, "annotations", |list| list.extend(annotations));
                    }
                    _ => out.problem = Some("annotations without content were skipped"),
                }
            }
            "image" | "audio" | "video" | "document" => {
                with_list(&mut self.value, "content", |items| {
                    items.push(Value::Object(delta.clone()));
                });
            }
            _ => {
                for (k, v) in delta {
                    if k != "type" {
                        self.value.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        out
    }

    /// `step.stop` (I13): the parsed arguments replace `arguments`; returns
    /// the I16 error text when they do not parse.
    pub fn stop(&mut self) -> Option<String> {
        if self.stopped {
            return None;
        }
        self.stopped = true;
        let parser = self.parser.as_mut()?;
        match parser.finish() {
            Ok(args) => {
                self.value.insert("arguments".into(), args);
                None
            }
            Err(e) => {
                self.invalid = true;
                self.value
                    .insert("arguments".into(), Value::String(parser.raw.clone()));
                Some(e)
            }
        }
    }

    /// The step as the result shows it (I17: an open step's arguments so far).
    #[must_use]
    pub fn render(&self) -> Value {
        let mut value = self.value.clone();
        if !self.stopped {
            if let Some(parser) = &self.parser {
                value.insert("arguments".into(), parser.partial());
            }
        }
        Value::Object(value)
    }

    /// `{"id", "name", "args"}` of a call step (I18).
    #[must_use]
    pub fn call(&self, rendered: &Value) -> Value {
        let mut call = Map::new();
        let get_str = |k: &str| {
            self.value
                .get(k)
                .filter(|v| v.is_string())
                .cloned()
                .unwrap_or(Value::Null)
        };
        call.insert("id".into(), get_str("id"));
        call.insert("name".into(), get_str("name"));
        let args = match rendered.get("arguments") {
            Some(a @ Value::Object(_)) if !self.invalid => a.clone(),
            _ => Value::Object(Map::new()),
        };
        call.insert("args".into(), args);
        Value::Object(call)
    }

    /// A call the model did not finish, or whose arguments did not parse
    /// (I16, I17).
    #[must_use]
    pub fn unfinished(&self) -> bool {
        self.is_call() && (!self.stopped || self.invalid)
    }
}
