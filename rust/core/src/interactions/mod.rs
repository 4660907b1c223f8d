//! The Interactions API stream (spec/interactions.md): bytes of a streamed
//! `POST /interactions` body in, the model's steps out. Sans-IO, like the
//! classic aggregator, and reporting through the same [`Delta`] type so one
//! consumer handles both formats.

pub mod args;
pub mod framing;
pub mod steps;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::aggregate::{Closed, Delta, Deltas, EndedCall, Options};
use crate::diagnostics::Diagnostic;
use crate::error::{ErrorKind, MalformedStream};
use crate::scan::Scanner;
use framing::{IxFrame, IxFramer};
use steps::{implied_type, Step};

/// Step indexes must be below this (I9).
const MAX_STEP_INDEX: u64 = 1 << 31;

/// The aggregate of one interaction stream (I18).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IxResponse {
    /// `(index, step)` in index order.
    pub steps: Vec<(u32, Value)>,
    pub interaction_id: Option<String>,
    pub status: Option<String>,
    pub last_event_id: Option<String>,
    pub continuation_token: Option<String>,
    /// E14: a step event came after the one that set `continuation_token`
    /// (any step event at all when none did).
    pub output_after_token: bool,
    pub interaction: Map<String, Value>,
    pub usage: Option<Value>,
    pub error: Option<Value>,
    pub complete: bool,
    pub done: bool,
    pub truncated: bool,
    /// X3: what was skipped, repaired or dropped, in order.
    pub diagnostics: Vec<Diagnostic>,
    /// C13: `{"id", "name", "args", "step"}` of each call step the model did
    /// not finish or whose arguments did not parse (I16, I17), index order.
    pub unfinished_calls: Vec<Value>,
    pub text: String,
    pub thought_text: String,
    /// `{"id", "name", "args"}` per call step the model finished (C13), index order.
    pub function_calls: Vec<Value>,
}

impl IxResponse {
    /// X3: the rendered diagnostics.
    #[must_use]
    pub fn warnings(&self) -> Vec<String> {
        self.diagnostics.iter().map(Diagnostic::message).collect()
    }

    /// `{"id"?, "status"?, "steps", "usage"?, "error"?}` (I18).
    #[must_use]
    pub fn to_value(&self) -> Value {
        let mut out = Map::new();
        if let Some(id) = &self.interaction_id {
            out.insert("id".into(), Value::String(id.clone()));
        }
        if let Some(status) = &self.status {
            out.insert("status".into(), Value::String(status.clone()));
        }
        out.insert(
            "steps".into(),
            Value::Array(self.steps.iter().map(|(_, s)| s.clone()).collect()),
        );
        if let Some(u) = &self.usage {
            out.insert("usage".into(), u.clone());
        }
        if let Some(e) = &self.error {
            out.insert("error".into(), e.clone());
        }
        Value::Object(out)
    }
}

#[derive(Debug, Default)]
struct State {
    deltas: bool,
    strict: bool,
    max: usize,
    steps: BTreeMap<u32, Step>,
    interaction: Map<String, Value>,
    interaction_id: Option<String>,
    status: Option<String>,
    last_event_id: Option<String>,
    continuation_token: Option<String>,
    output_after_token: bool,
    usage: Option<Value>,
    error: Option<Value>,
    complete: bool,
    done: bool,
    truncated: bool,
    warnings: Vec<Diagnostic>,
    events_seen: u64,
    bytes_seen: u64,
}

/// The streaming aggregator for `api="interactions"`.
#[derive(Debug)]
pub struct IxAggregator {
    framer: IxFramer,
    state: State,
    closed: Option<Arc<IxResponse>>,
}

/// Parses one payload like orjson (I4, R8: the scanner the generateContent
/// events use, so `-0` is the int 0 here too). The error says whether the
/// payload was JSON but not an object.
fn parse_payload(data: &[u8]) -> Result<Map<String, Value>, (ErrorKind, bool)> {
    let text = simdutf8::basic::from_utf8(data).map_err(|_| (ErrorKind::InvalidUtf8, false))?;
    let mut s = Scanner::new(text);
    match s.value() {
        Ok(Value::Object(map)) if s.at_end() => Ok(map),
        Ok(_) if s.at_end() => Err((ErrorKind::InvalidJson, true)),
        _ => Err((ErrorKind::InvalidJson, false)),
    }
}

fn malformed(
    kind: ErrorKind,
    not_object: bool,
    offset: u64,
    n: u64,
    max: usize,
) -> MalformedStream {
    let event = n;
    let diagnostic = match kind {
        ErrorKind::InvalidUtf8 => Diagnostic::IxInvalidUtf8 { event, offset },
        ErrorKind::EventTooLarge => Diagnostic::IxEventTooLarge {
            event,
            offset,
            limit: max as u64,
        },
        ErrorKind::InvalidJson if not_object => Diagnostic::IxNotAnObject { event, offset },
        // Only the three payload kinds come here (U4 and U5 are not the Interactions framer's).
        ErrorKind::InvalidJson | ErrorKind::CompressedBody | ErrorKind::LinesWithoutEnds => {
            Diagnostic::IxInvalidJson { event, offset }
        }
    };
    MalformedStream::new(kind, offset, n, diagnostic)
}

fn str_of<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key).and_then(Value::as_str)
}

impl IxAggregator {
    #[must_use]
    pub fn new(opts: Options) -> Self {
        Self {
            framer: IxFramer::new(opts.max_event_bytes),
            state: State {
                // `Deltas::Display` is the generateContent aggregator's (R5):
                // the Interactions one reports every delta or none.
                deltas: opts.deltas != Deltas::Off,
                strict: opts.strict,
                max: opts.max_event_bytes,
                ..State::default()
            },
            closed: None,
        }
    }

    #[must_use]
    pub fn events_seen(&self) -> u64 {
        self.state.events_seen
    }

    #[must_use]
    pub fn bytes_seen(&self) -> u64 {
        self.state.bytes_seen
    }

    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.closed.is_some()
    }

    /// Feeds body bytes (any split); returns the bad payloads completed by
    /// them (strict mode; otherwise they become warnings).
    pub fn feed(
        &mut self,
        data: &[u8],
        deltas: &mut Vec<Delta>,
    ) -> Result<Vec<MalformedStream>, Closed> {
        if self.closed.is_some() {
            return Err(Closed);
        }
        let mut errors = Vec::new();
        let state = &mut self.state;
        self.framer.feed(data, &mut |frame| {
            state.on_frame(frame, deltas, &mut errors);
        });
        state.bytes_seen += data.len() as u64;
        Ok(errors)
    }

    /// A dropped connection will be followed by the resumed stream (I20).
    pub fn reconnect(&mut self) -> Result<(), Closed> {
        if self.closed.is_some() {
            return Err(Closed);
        }
        self.framer.reconnect();
        Ok(())
    }

    /// Feeds one complete data payload (I18 `feed_event`).
    pub fn feed_event(
        &mut self,
        payload: &[u8],
        deltas: &mut Vec<Delta>,
    ) -> Result<Vec<MalformedStream>, Closed> {
        if self.closed.is_some() {
            return Err(Closed);
        }
        let mut errors = Vec::new();
        let offset = self.state.bytes_seen;
        self.state.bytes_seen += payload.len() as u64;
        if payload.len() > self.state.max {
            let n = self.state.next_index();
            let err = malformed(ErrorKind::EventTooLarge, false, offset, n, self.state.max);
            self.state.report(err, &mut errors);
        } else {
            self.state
                .on_payload(offset, payload, None, deltas, &mut errors);
        }
        Ok(errors)
    }

    /// The result so far, without changing the state.
    #[must_use]
    pub fn snapshot(&self) -> IxResponse {
        match &self.closed {
            Some(done) => (**done).clone(),
            None => self.state.render(false),
        }
    }

    /// Ends the stream (I3, I4, I17) and returns the result; idempotent.
    pub fn close(&mut self) -> Arc<IxResponse> {
        if let Some(done) = &self.closed {
            return Arc::clone(done);
        }
        let mut deltas = Vec::new();
        let mut errors = Vec::new();
        let state = &mut self.state;
        self.framer
            .close(&mut |frame| state.on_frame(frame, &mut deltas, &mut errors));
        // close() never raises: a bad final event is a warning.
        for err in errors {
            state.warnings.push(err.diagnostic);
        }
        let mut result = state.render(true);
        if state.bytes_seen > 0 && !state.done {
            result.diagnostics.push(Diagnostic::IxMissingDone);
        }
        let done = Arc::new(result);
        self.closed = Some(Arc::clone(&done));
        done
    }
}

impl State {
    fn next_index(&mut self) -> u64 {
        let n = self.events_seen;
        self.events_seen += 1;
        n
    }

    fn report(&mut self, err: MalformedStream, errors: &mut Vec<MalformedStream>) {
        if self.strict {
            errors.push(err);
        } else {
            self.warnings.push(err.diagnostic);
        }
    }

    fn on_frame(
        &mut self,
        frame: IxFrame,
        deltas: &mut Vec<Delta>,
        errors: &mut Vec<MalformedStream>,
    ) {
        match frame {
            IxFrame::Payload { offset, data, name } => {
                self.on_payload(offset, &data, name.as_deref(), deltas, errors);
            }
            IxFrame::TooLarge { offset } => {
                let n = self.next_index();
                let err = malformed(ErrorKind::EventTooLarge, false, offset, n, self.max);
                self.report(err, errors);
            }
            IxFrame::Done => self.done = true,
            IxFrame::AfterDone { offset } => {
                self.warnings.push(Diagnostic::IxDataAfterDone { offset });
            }
            IxFrame::Unterminated { offset, data, name } => {
                self.on_unterminated(offset, &data, name.as_deref(), deltas);
            }
        }
    }

    /// An event cut off by the end of the stream (I4): used when whole.
    fn on_unterminated(
        &mut self,
        offset: u64,
        data: &[u8],
        name: Option<&str>,
        deltas: &mut Vec<Delta>,
    ) {
        let n = self.next_index();
        match parse_payload(data) {
            Ok(map) => self.apply(n, &map, name, deltas),
            Err((kind, not_object)) => {
                let err = malformed(kind, not_object, offset, n, self.max);
                self.warnings.push(err.diagnostic);
                self.truncated = true;
            }
        }
    }

    fn on_payload(
        &mut self,
        offset: u64,
        data: &[u8],
        name: Option<&str>,
        deltas: &mut Vec<Delta>,
        errors: &mut Vec<MalformedStream>,
    ) {
        let n = self.next_index();
        match parse_payload(data) {
            Ok(map) => self.apply(n, &map, name, deltas),
            Err((kind, not_object)) => {
                let err = malformed(kind, not_object, offset, n, self.max);
                self.report(err, errors);
            }
        }
    }

    /// One event (I5-I13).
    fn apply(
        &mut self,
        n: u64,
        map: &Map<String, Value>,
        name: Option<&str>,
        deltas: &mut Vec<Delta>,
    ) {
        if let Some(id) = str_of(map, "event_id") {
            self.last_event_id = Some(id.to_owned());
        }
        let kind = str_of(map, "event_type")
            .map(str::to_owned)
            .or_else(|| name.map(str::to_owned));
        match kind.as_deref() {
            Some(k @ ("interaction.created" | "interaction.completed")) => {
                self.on_interaction(map, k == "interaction.completed", deltas);
            }
            Some(
                k @ ("interaction.status_update"
                | "interaction.in_progress"
                | "interaction.requires_action"),
            ) => {
                self.on_status(map, k);
            }
            Some(k @ ("step.start" | "step.delta" | "step.stop")) => {
                self.on_step(n, k, map, deltas);
            }
            // RULE I8: the latest error is kept, complete cleared; later events still apply.
            Some("error") => {
                let error = match map.get("error") {
                    Some(e) if !e.is_null() => e.clone(),
                    _ => Value::Object(map.clone()),
                };
                self.error = Some(error.clone());
                self.complete = false;
                if self.deltas {
                    deltas.push(Delta::StreamError { error });
                }
            }
            Some(other) => self.warnings.push(Diagnostic::IxUnknownEventType {
                event: n,
                event_type: other.to_owned(),
            }),
            None => self
                .warnings
                .push(Diagnostic::IxMissingEventType { event: n }),
        }
    }

    /// RULE I6: `interaction` objects merge key by key; I7: the latest usage.
    fn on_interaction(
        &mut self,
        map: &Map<String, Value>,
        completed: bool,
        deltas: &mut Vec<Delta>,
    ) {
        let mut status = None;
        if let Some(Value::Object(obj)) = map.get("interaction") {
            for (k, v) in obj {
                if !v.is_null() {
                    self.interaction.insert(k.clone(), v.clone());
                }
            }
            if let Some(id) = str_of(obj, "id") {
                self.interaction_id = Some(id.to_owned());
            }
            if let Some(s) = str_of(obj, "status") {
                self.status = Some(s.to_owned());
                status = Some(s.to_owned());
            }
            if let Some(u @ Value::Object(_)) = obj.get("usage") {
                self.usage = Some(u.clone());
            }
            if let Some(t) = str_of(obj, "continuation_token") {
                self.set_token(t);
            }
        }
        if completed {
            self.complete = self.error.is_none();
            if let Some(reason) = status.filter(|s| !s.is_empty()) {
                if self.deltas {
                    deltas.push(Delta::Finish {
                        candidate: 0,
                        reason,
                    });
                }
            }
        }
    }

    /// RULE I7: a status update carries the latest status and usage.
    fn on_status(&mut self, map: &Map<String, Value>, kind: &str) {
        if self.interaction_id.is_none() {
            if let Some(id) = str_of(map, "interaction_id") {
                self.interaction_id = Some(id.to_owned());
            }
        }
        let nested = match map.get("interaction") {
            Some(Value::Object(obj)) => str_of(obj, "status"),
            _ => None,
        };
        let from_name = match kind {
            "interaction.in_progress" => Some("in_progress"),
            "interaction.requires_action" => Some("requires_action"),
            _ => None,
        };
        if let Some(s) = str_of(map, "status").or(nested).or(from_name) {
            self.status = Some(s.to_owned());
        }
        if let Some(u @ Value::Object(_)) = map.get("usage") {
            self.usage = Some(u.clone());
        }
        if let Some(t) = str_of(map, "continuation_token") {
            self.set_token(t);
        }
    }

    /// RULE E14: a token covers the steps' output so far, not what comes after it.
    fn set_token(&mut self, token: &str) {
        self.continuation_token = Some(token.to_owned());
        self.output_after_token = false;
    }

    /// RULE I9: step events are routed by their index.
    fn on_step(&mut self, n: u64, kind: &str, map: &Map<String, Value>, deltas: &mut Vec<Delta>) {
        let index = match map.get("index").and_then(Value::as_u64) {
            Some(i) if i < MAX_STEP_INDEX => u32::try_from(i).unwrap_or(u32::MAX),
            _ => {
                self.warnings.push(Diagnostic::IxStepIndexInvalid {
                    event: n,
                    event_type: kind.to_owned(),
                });
                return;
            }
        };
        match kind {
            "step.start" => self.step_start(n, index, map, deltas),
            "step.delta" => self.step_delta(n, index, map, deltas),
            _ => self.step_stop(n, index, map, deltas),
        }
    }

    /// RULE I10: a step starts once.
    fn step_start(
        &mut self,
        n: u64,
        index: u32,
        map: &Map<String, Value>,
        deltas: &mut Vec<Delta>,
    ) {
        if self.steps.contains_key(&index) {
            self.warnings.push(Diagnostic::IxStepRestarted {
                event: n,
                step: index,
            });
            return;
        }
        let value = match map.get("step") {
            Some(Value::Object(step)) => step.clone(),
            _ => Map::new(),
        };
        let step = Step::new(value);
        self.call_start(&step, index as usize, deltas);
        self.steps.insert(index, step);
        self.output_after_token = true; // E14
    }

    /// RULE I12: a typed delta extends an open step.
    fn step_delta(
        &mut self,
        n: u64,
        index: u32,
        map: &Map<String, Value>,
        deltas: &mut Vec<Delta>,
    ) {
        let delta = match map.get("delta") {
            Some(Value::Object(d)) if d.get("type").is_some_and(Value::is_string) => d,
            _ => {
                self.warnings.push(Diagnostic::IxDeltaWithoutType {
                    event: n,
                    step: index,
                });
                return;
            }
        };
        let dtype = str_of(delta, "type").unwrap_or_default();
        self.ensure_step(n, index, Some(implied_type(dtype)), deltas);
        if let Some(Value::Object(meta)) = map.get("metadata") {
            if let Some(u @ Value::Object(_)) = meta.get("total_usage") {
                self.usage = Some(u.clone());
            }
        }
        let live = self.deltas;
        let Some(step) = self.steps.get_mut(&index) else {
            return;
        };
        if step.stopped {
            self.warnings.push(Diagnostic::IxDeltaAfterStop {
                event: n,
                step: index,
            });
            return;
        }
        let applied = step.apply(dtype, delta, live);
        self.output_after_token = true; // E14
        if applied.long_path {
            if let Some(parser) = step.parser.as_mut() {
                if !parser.long_path_warned {
                    // RULE I15: said once per step.
                    parser.long_path_warned = true;
                    self.warnings
                        .push(Diagnostic::IxLongArgPath { step: index });
                }
            }
        }
        if let Some(problem) = applied.problem {
            self.warnings.push(Diagnostic::IxDeltaSkipped {
                event: n,
                step: index,
                reason: problem.to_owned(),
            });
        }
        if live {
            let slot = index as usize;
            if let Some((text, thought)) = applied.text {
                deltas.push(Delta::Text {
                    candidate: 0,
                    index: slot,
                    text,
                    thought,
                });
            }
            for piece in applied.args {
                deltas.push(Delta::Arg {
                    candidate: 0,
                    index: slot,
                    json_path: piece.json_path,
                    value: piece.value,
                });
            }
        }
    }

    /// RULE I13, I16: `step.stop` parses a call's arguments.
    fn step_stop(&mut self, n: u64, index: u32, map: &Map<String, Value>, deltas: &mut Vec<Delta>) {
        self.ensure_step(n, index, None, deltas);
        if let Some(u @ Value::Object(_)) = map.get("usage") {
            self.usage = Some(u.clone());
        }
        let Some(step) = self.steps.get_mut(&index) else {
            return;
        };
        if step.stopped {
            return;
        }
        self.output_after_token = true; // E14
        if let Some(err) = step.stop() {
            self.warnings.push(Diagnostic::IxBadArguments {
                step: index,
                reason: err,
            });
        } else if step.is_call() && self.deltas {
            let rendered = step.render();
            deltas.push(Delta::CallEnd {
                candidate: 0,
                index: index as usize,
                call: EndedCall::Value(step.call(&rendered)),
            });
        }
    }

    /// A step for a delta or stop without its start (I11).
    fn ensure_step(&mut self, n: u64, index: u32, kind: Option<&str>, deltas: &mut Vec<Delta>) {
        if self.steps.contains_key(&index) {
            return;
        }
        self.warnings.push(Diagnostic::IxStepWithoutStart {
            event: n,
            step: index,
        });
        let mut value = Map::new();
        if let Some(k) = kind {
            value.insert("type".into(), Value::String(k.to_owned()));
        }
        let step = Step::new(value);
        self.call_start(&step, index as usize, deltas);
        self.steps.insert(index, step);
    }

    fn call_start(&self, step: &Step, slot: usize, deltas: &mut Vec<Delta>) {
        if self.deltas && step.is_call() {
            let get = |k: &str| str_of(&step.value, k).map(str::to_owned);
            deltas.push(Delta::CallStart {
                candidate: 0,
                index: slot,
                id: get("id"),
                name: get("name"),
            });
        }
    }

    /// The result; `closing` adds the I17 warnings (to the result only:
    /// nothing is fed after `close()`).
    fn render(&self, closing: bool) -> IxResponse {
        let mut out = IxResponse {
            interaction_id: self.interaction_id.clone(),
            status: self.status.clone(),
            last_event_id: self.last_event_id.clone(),
            continuation_token: self.continuation_token.clone(),
            output_after_token: self.output_after_token,
            interaction: self.interaction.clone(),
            usage: self.usage.clone(),
            error: self.error.clone(),
            complete: self.complete,
            done: self.done,
            truncated: self.truncated,
            ..IxResponse::default()
        };
        out.diagnostics.clone_from(&self.warnings);
        for (&index, step) in &self.steps {
            let rendered = step.render();
            match step.step_type() {
                Some("model_output") => collect_text(&rendered, "content", &mut out.text),
                Some("thought") => collect_text(&rendered, "summary", &mut out.thought_text),
                // RULE C13: only a call the model finished may be run; the
                // others are shown with their arguments so far and their step.
                Some("function_call") if step.unfinished() => {
                    let mut call = step.call(&rendered);
                    if let Value::Object(map) = &mut call {
                        map.insert("step".into(), Value::from(index));
                    }
                    out.unfinished_calls.push(call);
                }
                Some("function_call") => out.function_calls.push(step.call(&rendered)),
                _ => {}
            }
            if closing && !step.stopped {
                out.diagnostics.push(Diagnostic::IxStepNeverStopped {
                    step: index,
                    step_type: step.step_type().map(str::to_owned),
                });
            }
            out.steps.push((index, rendered));
        }
        out
    }
}

/// Appends the text items of `rendered[key]` (I18 flat accessors).
fn collect_text(rendered: &Value, key: &str, out: &mut String) {
    if let Some(Value::Array(items)) = rendered.get(key) {
        for item in items {
            if item.get("type").and_then(Value::as_str) == Some("text") {
                if let Some(t) = item.get("text").and_then(Value::as_str) {
                    out.push_str(t);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
