//! The result of aggregation (api.md `AggregatedResponse`, `Candidate`; D rules):
//! what `close()` and `snapshot()` return and its `GenerateContentResponse` form (D2).

use std::sync::Arc;

use serde_json::{Map, Value};

use super::candidate::CandidateState;
use super::State;
use crate::diagnostics::Diagnostic;
use crate::scan::Scanner;

/// One candidate of the result (api.md `Candidate`).
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateResult {
    pub index: u32,
    pub parts: Vec<Part>,
    pub text: String,
    pub thought_text: String,
    /// Indices into `parts` of the calls the model finished (C11, C13), in
    /// part order: `function_calls`.
    pub call_parts: Vec<usize>,
    /// Indices into `parts` of the streamed calls the model did not finish (C13).
    pub unfinished_calls: Vec<usize>,
    pub finish_reason: Option<String>,
    pub finish_message: Option<String>,
    pub metadata: Map<String, Value>,
}

/// The aggregate (api.md `AggregatedResponse`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Response {
    pub candidates: Vec<CandidateResult>,
    pub usage: Option<Value>,
    pub model_version: Option<Value>,
    pub response_id: Option<Value>,
    pub create_time: Option<Value>,
    pub prompt_feedback: Option<Value>,
    /// E15: the last non-null `modelStatus` (stage, retirement time, message).
    pub model_status: Option<Value>,
    pub error: Option<Value>,
    /// E14: the latest non-empty `continuationToken` of candidate 0.
    pub continuation_token: Option<String>,
    /// E14: candidate 0 got output in an event after the one that carried
    /// `continuation_token` (any output at all when no token came).
    pub output_after_token: bool,
    pub complete: bool,
    pub truncated: bool,
    /// X3: what was skipped, repaired or dropped, in order.
    pub diagnostics: Vec<Diagnostic>,
}

impl Response {
    /// X3: the rendered diagnostics.
    #[must_use]
    pub fn warnings(&self) -> Vec<String> {
        self.diagnostics.iter().map(Diagnostic::message).collect()
    }

    /// Candidate 0, which the flat accessors describe (E4).
    #[must_use]
    pub fn first(&self) -> Option<&CandidateResult> {
        self.candidates.iter().find(|c| c.index == 0)
    }

    /// A GenerateContentResponse-shaped value (D2).
    #[must_use]
    pub fn to_value(&self) -> Value {
        let mut out = Map::new();
        let candidates = self
            .candidates
            .iter()
            .map(CandidateResult::to_value)
            .collect();
        out.insert("candidates".into(), Value::Array(candidates));
        if let Some(u) = &self.usage {
            out.insert("usageMetadata".into(), u.clone());
        }
        for (key, value) in [
            ("modelVersion", &self.model_version),
            ("responseId", &self.response_id),
            ("createTime", &self.create_time),
            ("promptFeedback", &self.prompt_feedback),
            ("modelStatus", &self.model_status),
            ("error", &self.error),
        ] {
            if let Some(v) = value {
                out.insert(key.into(), v.clone());
            }
        }
        Value::Object(out)
    }
}

/// One part of a result (R7): a merged text run, a part kept as the JSON
/// text it came as, or a part the aggregator built (a streamed call, a part
/// of a `feed_chunk()` object).
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// A merged run of plain text parts (P1).
    Text {
        text: String,
        thought: bool,
    },
    /// A part kept as received (P3, P4, complete calls).
    Raw(RawPart),
    Value(Value),
}

/// A part's JSON text as it arrived (validated strictly, R8).
#[derive(Debug, Clone, PartialEq)]
pub struct RawPart {
    /// R9: shared, not copied, with the `CallEnd` of a complete call.
    pub json: Arc<str>,
    /// What C11 reads, for a function-call part.
    pub call: Option<RawCall>,
}

/// C11 of a function-call part kept as text.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RawCall {
    pub id: Option<String>,
    pub name: Option<String>,
    /// Where the `args` object is in the part's text.
    pub args: Option<(usize, usize)>,
}

impl Part {
    /// The part as a tree.
    #[must_use]
    pub fn to_value(&self) -> Value {
        match self {
            Self::Text { text, thought } => {
                let mut part = Map::new();
                part.insert("text".into(), Value::String(text.clone()));
                if *thought {
                    part.insert("thought".into(), Value::Bool(true));
                }
                Value::Object(part)
            }
            Self::Raw(raw) => json_value(&raw.json),
            Self::Value(value) => value.clone(),
        }
    }

    /// C11: the call of a function-call part.
    #[must_use]
    pub fn call(&self) -> CallRef<'_> {
        match self {
            Self::Raw(raw) => raw.call_ref(),
            Self::Value(part) => call_ref(part.get("functionCall")),
            Self::Text { .. } => call_ref(None),
        }
    }
}

impl RawPart {
    /// C11: the call of a function-call part.
    #[must_use]
    pub fn call_ref(&self) -> CallRef<'_> {
        let Some(call) = &self.call else {
            return call_ref(None);
        };
        CallRef {
            id: call.id.as_deref(),
            name: call.name.as_deref(),
            args: call
                .args
                .and_then(|(start, end)| self.json.get(start..end))
                .map(Args::Json),
        }
    }
}

/// The call a `CallEnd` delta reports: `{"id", "name", "args"}` (C11).
#[derive(Debug, Clone, PartialEq)]
pub enum EndedCall {
    /// R9: a call that came whole, as its part's text (the same `Arc`, not
    /// a copy): a consumer that never reads it pays nothing for it.
    Raw(RawPart),
    /// A streamed call (its arguments were built here) or an Interactions step.
    Value(Value),
}

impl EndedCall {
    /// The call as a tree.
    #[must_use]
    pub fn to_value(&self) -> Value {
        match self {
            Self::Raw(part) => part.call_ref().to_value(),
            Self::Value(value) => value.clone(),
        }
    }
}

/// The tree of JSON text that was validated when it arrived.
pub(super) fn json_value(json: &str) -> Value {
    Scanner::new(json).value().unwrap_or(Value::Null)
}

/// A call's arguments object, as a tree or as its JSON text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Args<'a> {
    Value(&'a Value),
    Json(&'a str),
}

impl Args<'_> {
    #[must_use]
    pub fn to_value(self) -> Value {
        match self {
            Self::Value(v) => v.clone(),
            Self::Json(json) => json_value(json),
        }
    }
}

/// One entry of `function_calls` (C11), borrowed from its part.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallRef<'a> {
    pub id: Option<&'a str>,
    pub name: Option<&'a str>,
    /// None stands for `{}` (no args object on the part).
    pub args: Option<Args<'a>>,
}

impl CallRef<'_> {
    /// `{"id": id or None, "name": name or None, "args": args or {}}`.
    #[must_use]
    pub fn to_value(&self) -> Value {
        call_dict(
            self.id.map(str::to_owned),
            self.name.map(str::to_owned),
            self.args
                .map_or_else(|| Value::Object(Map::new()), Args::to_value),
        )
    }
}

/// C11 read from a function-call part: `id` and `name` only when strings,
/// `args` only when an object.
pub(super) fn call_ref(fc: Option<&Value>) -> CallRef<'_> {
    CallRef {
        id: fc.and_then(|fc| fc.get("id")).and_then(Value::as_str),
        name: fc.and_then(|fc| fc.get("name")).and_then(Value::as_str),
        args: fc
            .and_then(|fc| fc.get("args"))
            .filter(|a| a.is_object())
            .map(Args::Value),
    }
}

impl CandidateResult {
    /// The calls of this candidate the model finished, in part order (C11, C13).
    pub fn function_calls(&self) -> impl Iterator<Item = CallRef<'_>> {
        self.call_parts
            .iter()
            .filter_map(|&i| self.parts.get(i))
            .map(Part::call)
    }

    /// The streamed calls the model did not finish, in part order, each with
    /// the index of its part (C13).
    pub fn unfinished(&self) -> impl Iterator<Item = (usize, CallRef<'_>)> {
        self.unfinished_calls
            .iter()
            .filter_map(|&i| self.parts.get(i).map(|part| (i, part.call())))
    }

    /// `unfinished_calls` as values: `{"id", "name", "args", "part"}` (C13).
    #[must_use]
    pub fn unfinished_values(&self) -> Vec<Value> {
        self.unfinished()
            .map(|(i, call)| {
                let mut value = call.to_value();
                if let Value::Object(map) = &mut value {
                    map.insert("part".into(), Value::from(i));
                }
                value
            })
            .collect()
    }

    /// The parts as trees.
    #[must_use]
    pub fn part_values(&self) -> Vec<Value> {
        self.parts.iter().map(Part::to_value).collect()
    }

    #[must_use]
    pub fn content(&self) -> Value {
        content_value(self.part_values())
    }

    pub(super) fn to_value(&self) -> Value {
        let mut out = Map::new();
        out.insert("content".into(), self.content());
        if let Some(r) = &self.finish_reason {
            out.insert("finishReason".into(), Value::String(r.clone()));
        }
        if let Some(m) = &self.finish_message {
            out.insert("finishMessage".into(), Value::String(m.clone()));
        }
        for (k, v) in &self.metadata {
            out.insert(k.clone(), v.clone());
        }
        out.insert("index".into(), Value::from(self.index));
        Value::Object(out)
    }
}

/// `{"role": "model", "parts": parts}`.
#[must_use]
pub fn content_value(parts: Vec<Value>) -> Value {
    let mut content = Map::new();
    content.insert("role".into(), Value::String("model".into()));
    content.insert("parts".into(), Value::Array(parts));
    Value::Object(content)
}

pub(super) fn call_dict(id: Option<String>, name: Option<String>, args: Value) -> Value {
    let mut call = Map::new();
    call.insert("id".into(), id.map_or(Value::Null, Value::String));
    call.insert("name".into(), name.map_or(Value::Null, Value::String));
    call.insert("args".into(), args);
    Value::Object(call)
}

impl State {
    /// The current state as a result, unchanged (`snapshot()`).
    pub(super) fn render(&self) -> Response {
        let candidates = self
            .in_index_order()
            .into_iter()
            .map(|pos| self.candidates[pos].clone().into_result());
        self.response(candidates.collect())
    }

    /// The final result, moving the parts out of the state (`close()`).
    pub(super) fn finish(&mut self) -> Response {
        let mut candidates = std::mem::take(&mut self.candidates);
        candidates.sort_unstable_by_key(|c| c.index);
        self.response(
            candidates
                .into_iter()
                .map(CandidateState::into_result)
                .collect(),
        )
    }

    pub(super) fn response(&self, candidates: Vec<CandidateResult>) -> Response {
        // RULE E6: candidate 0 finished and no error was recorded.
        let complete = self.error.is_none()
            && candidates
                .iter()
                .any(|c| c.index == 0 && c.finish_reason.is_some());
        Response {
            candidates,
            usage: self.usage.clone().map(Value::Object),
            model_version: self.model_version.clone(),
            response_id: self.response_id.clone(),
            create_time: self.create_time.clone(),
            prompt_feedback: self.prompt_feedback.clone(),
            model_status: self.model_status.clone(),
            error: self.error.clone(),
            continuation_token: self.continuation_token.clone(),
            output_after_token: self.output_after_token,
            complete,
            truncated: self.truncated,
            diagnostics: self.warnings.render(),
        }
    }
}
