//! The aggregation state machine: event payloads -> the aggregated model turn
//! (aggregation.md E, P, C rules; addendum E7-E9, P7-P9, C8-C12, D1-D3).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Number, Value};

use crate::error::MalformedStream;
use crate::event::{
    event_from_map, parse_event, CandidateIn, EventIn, Fields, ParseError, PartIn, Shaped,
    TextOrValue,
};
use crate::json_path::{self, PathError, Segment, Write, WriteError};
use crate::sse::{BodyFramer, Frame};

/// At most this many streamed calls are open at once per candidate (C14).
const MAX_OPEN_CALLS: usize = 64;

/// Objects with at most this many keys are merged without a hash map.
const SMALL_OBJECT: usize = 16;

/// Candidate indices must be below this (E7).
const MAX_CANDIDATE_INDEX: u64 = 1 << 31;

/// The largest `max_array_index` accepted (D2b).
pub const MAX_ARRAY_INDEX_CAP: usize = (1 << 31) - 1;
/// The largest `max_event_bytes` accepted (D2b): Python's `sys.maxsize`.
pub const MAX_EVENT_BYTES_CAP: usize = isize::MAX as usize;

#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub deltas: bool,
    pub strict: bool,
    pub max_event_bytes: usize,
    pub max_array_index: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            deltas: true,
            strict: true,
            max_event_bytes: 64 * 1024 * 1024,
            max_array_index: 10_000,
        }
    }
}

/// What `feed()` reports for live display (aggregation.md "Deltas").
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    Text {
        candidate: u32,
        index: usize,
        text: String,
        thought: bool,
    },
    CallStart {
        candidate: u32,
        index: usize,
        id: Option<String>,
        name: Option<String>,
    },
    Arg {
        candidate: u32,
        index: usize,
        json_path: String,
        value: Value,
    },
    CallEnd {
        candidate: u32,
        index: usize,
        call: Value,
    },
    Finish {
        candidate: u32,
        reason: String,
    },
    StreamError {
        error: Value,
    },
}

/// `feed*()` after `close()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

/// One candidate of the result (api.md `Candidate`).
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateResult {
    pub index: u32,
    pub parts: Vec<Value>,
    pub text: String,
    pub thought_text: String,
    /// Indices into `parts` of the function-call parts (C11), in part order.
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
    pub error: Option<Value>,
    pub complete: bool,
    pub truncated: bool,
    pub warnings: Vec<String>,
}

impl Response {
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
            ("error", &self.error),
        ] {
            if let Some(v) = value {
                out.insert(key.into(), v.clone());
            }
        }
        Value::Object(out)
    }
}

/// One entry of `function_calls` (C11), borrowed from its part.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallRef<'a> {
    pub id: Option<&'a str>,
    pub name: Option<&'a str>,
    /// None stands for `{}` (no args object on the part).
    pub args: Option<&'a Value>,
}

impl CallRef<'_> {
    /// `{"id": id or None, "name": name or None, "args": args or {}}`.
    #[must_use]
    pub fn to_value(&self) -> Value {
        call_dict(
            self.id.map(str::to_owned),
            self.name.map(str::to_owned),
            self.args
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new())),
        )
    }
}

/// C11 read from a function-call part: `id` and `name` only when strings,
/// `args` only when an object.
fn call_ref(fc: Option<&Value>) -> CallRef<'_> {
    CallRef {
        id: fc.and_then(|fc| fc.get("id")).and_then(Value::as_str),
        name: fc.and_then(|fc| fc.get("name")).and_then(Value::as_str),
        args: fc.and_then(|fc| fc.get("args")).filter(|a| a.is_object()),
    }
}

impl CandidateResult {
    /// The function calls of this candidate, in part order (C11).
    pub fn function_calls(&self) -> impl Iterator<Item = CallRef<'_>> {
        self.call_parts
            .iter()
            .filter_map(|&i| self.parts.get(i))
            .map(|part| call_ref(part.get("functionCall")))
    }

    #[must_use]
    pub fn content(&self) -> Value {
        content_value(self.parts.clone())
    }

    fn to_value(&self) -> Value {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PartKind {
    /// A P3 part: string `text` plus other keys.
    Text { thought: bool },
    /// A complete function-call part (C1).
    Call,
    /// Every other kept part (P4).
    Other,
}

#[derive(Debug, Clone)]
enum Slot {
    /// A merged run of plain text parts (P1).
    Run { text: String, thought: bool },
    /// A part kept byte-exact (P3, P4, complete calls).
    Kept {
        part: Map<String, Value>,
        kind: PartKind,
    },
    /// A streamed call, by its index in `CandidateState::calls` (C3).
    Streamed(usize),
}

#[derive(Debug, Clone)]
struct StreamedCall {
    id: Option<String>,
    name: Option<String>,
    args: Map<String, Value>,
    signature: Option<Value>,
    /// Closed by `close()` or by the C14 limit, not by the model (C13).
    flushed: bool,
    /// Value of the aggregator's clock at the last chunk routed here (C10).
    touched: u64,
    slot: usize,
}

impl StreamedCall {
    fn call_value(&self) -> Value {
        call_dict(
            self.id.clone(),
            self.name.clone(),
            Value::Object(self.args.clone()),
        )
    }

    /// The call's part (C6); None for a call that never got a name.
    fn into_part(self) -> Option<Value> {
        let name = self.name?;
        let mut fc = Map::new();
        if let Some(id) = self.id {
            fc.insert("id".into(), Value::String(id));
        }
        fc.insert("name".into(), Value::String(name));
        fc.insert("args".into(), Value::Object(self.args));
        let mut part = Map::new();
        part.insert("functionCall".into(), Value::Object(fc));
        if let Some(sig) = self.signature {
            part.insert("thoughtSignature".into(), sig);
        }
        Some(Value::Object(part))
    }
}

fn call_dict(id: Option<String>, name: Option<String>, args: Value) -> Value {
    let mut call = Map::new();
    call.insert("id".into(), id.map_or(Value::Null, Value::String));
    call.insert("name".into(), name.map_or(Value::Null, Value::String));
    call.insert("args".into(), args);
    Value::Object(call)
}

#[derive(Debug, Clone)]
struct CandidateState {
    index: u32,
    slots: Vec<Slot>,
    /// The slot of the text run that the next plain text part may extend.
    run: Option<usize>,
    calls: Vec<StreamedCall>,
    finish_reason: Option<String>,
    finish_message: Option<String>,
    metadata: Map<String, Value>,
    /// E9a: identities of the kept citation entries, per list key.
    citation_seen: HashMap<String, HashSet<String>>,
    /// Indices into `calls` of the open calls, in slot order (C14).
    open: Vec<usize>,
}

impl CandidateState {
    fn new(index: u32) -> Self {
        Self {
            index,
            slots: Vec::new(),
            run: None,
            calls: Vec::new(),
            finish_reason: None,
            finish_message: None,
            metadata: Map::new(),
            citation_seen: HashMap::new(),
            open: Vec::new(),
        }
    }

    /// The result of this candidate, consuming the state (`close()` moves
    /// every part out instead of copying it; `snapshot()` renders a clone).
    fn into_result(self) -> CandidateResult {
        let mut out = CandidateResult {
            index: self.index,
            parts: Vec::with_capacity(self.slots.len()),
            text: String::new(),
            thought_text: String::new(),
            call_parts: Vec::new(),
            unfinished_calls: Vec::new(),
            finish_reason: self.finish_reason,
            finish_message: self.finish_message,
            metadata: self.metadata,
        };
        let mut calls: Vec<Option<StreamedCall>> = self.calls.into_iter().map(Some).collect();
        for slot in self.slots {
            match slot {
                Slot::Run { text, thought } => {
                    push_text(&mut out, &text, thought);
                    let mut part = Map::new();
                    part.insert("text".into(), Value::String(text));
                    if thought {
                        part.insert("thought".into(), Value::Bool(true));
                    }
                    out.parts.push(Value::Object(part));
                }
                Slot::Kept { part, kind } => {
                    match kind {
                        PartKind::Text { thought } => {
                            if let Some(Value::String(text)) = part.get("text") {
                                push_text(&mut out, text, thought);
                            }
                        }
                        PartKind::Call => out.call_parts.push(out.parts.len()),
                        PartKind::Other => {}
                    }
                    out.parts.push(Value::Object(part));
                }
                Slot::Streamed(k) => {
                    let Some(call) = calls.get_mut(k).and_then(Option::take) else {
                        continue;
                    };
                    let unfinished = call.flushed || self.open.contains(&k);
                    if let Some(part) = call.into_part() {
                        if unfinished {
                            out.unfinished_calls.push(out.parts.len());
                        }
                        out.call_parts.push(out.parts.len());
                        out.parts.push(part);
                    }
                }
            }
        }
        out
    }
}

fn push_text(out: &mut CandidateResult, text: &str, thought: bool) {
    if thought {
        out.thought_text.push_str(text);
    } else {
        out.text.push_str(text);
    }
}

/// At most this many warnings are kept (D7); the others are counted.
const MAX_WARNINGS: usize = 1000;

/// The warnings of a stream, bounded (D7): bad input cannot make them grow
/// without limit (`strict=False` turns every bad event into one).
#[derive(Debug, Default)]
struct Warnings {
    kept: Vec<String>,
    dropped: u64,
}

impl Warnings {
    fn push(&mut self, text: String) {
        if self.kept.len() < MAX_WARNINGS {
            self.kept.push(text);
        } else {
            self.dropped += 1;
        }
    }

    fn append(&mut self, texts: &mut Vec<String>) {
        for text in texts.drain(..) {
            self.push(text);
        }
    }

    /// The kept warnings, then one that counts the others.
    fn render(&self) -> Vec<String> {
        let mut out = self.kept.clone();
        if self.dropped > 0 {
            out.push(format!(
                "D7: {} more warnings were not kept (at most {MAX_WARNINGS} are)",
                self.dropped
            ));
        }
        out
    }
}

/// Everything but the framer, so a frame callback can borrow it mutably.
#[derive(Debug)]
struct State {
    opts: Options,
    /// In order of first arrival; `positions` finds one by index in O(1), and
    /// results list them in index order (E4).
    candidates: Vec<CandidateState>,
    positions: HashMap<u32, usize>,
    usage: Option<Map<String, Value>>,
    model_version: Option<Value>,
    response_id: Option<Value>,
    create_time: Option<Value>,
    prompt_feedback: Option<Value>,
    error: Option<Value>,
    warnings: Warnings,
    truncated: bool,
    events_seen: u64,
    bytes_seen: u64,
    clock: u64,
}

/// The streaming aggregator: feed body bytes, get deltas, close for the result.
pub struct Aggregator {
    framer: BodyFramer,
    state: State,
    /// `finish()` ran: the input is over (D5).
    ended: bool,
    closed: Option<Arc<Response>>,
}

impl Aggregator {
    #[must_use]
    pub fn new(opts: Options) -> Self {
        Self {
            framer: BodyFramer::new(opts.max_event_bytes),
            state: State {
                opts,
                candidates: Vec::new(),
                positions: HashMap::new(),
                usage: None,
                model_version: None,
                response_id: None,
                create_time: None,
                prompt_feedback: None,
                error: None,
                warnings: Warnings::default(),
                truncated: false,
                events_seen: 0,
                bytes_seen: 0,
                clock: 0,
            },
            ended: false,
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
        self.ended
    }

    /// Whether framing dropped the buffer of an oversized event (more than
    /// 1 MiB of it) since the last call (F17): a caller whose allocator keeps
    /// freed pages mapped can ask it to return them now.
    pub fn take_released(&mut self) -> bool {
        self.framer.take_released()
    }

    /// Feeds raw body bytes (any split). Deltas go to `deltas`; the returned
    /// list holds the payloads that were skipped as malformed (F8, F10),
    /// empty with `strict = false` (they become warnings).
    pub fn feed(
        &mut self,
        data: &[u8],
        deltas: &mut Vec<Delta>,
    ) -> Result<Vec<MalformedStream>, Closed> {
        if self.ended {
            return Err(Closed);
        }
        let mut errors = Vec::new();
        let state = &mut self.state;
        self.framer.feed(data, &mut |frame| {
            state.on_frame(frame, deltas, &mut errors)
        });
        state.bytes_seen += data.len() as u64;
        Ok(errors)
    }

    /// Feeds one complete payload (`feed_event`, D3).
    pub fn feed_event(
        &mut self,
        payload: &[u8],
        deltas: &mut Vec<Delta>,
    ) -> Result<Vec<MalformedStream>, Closed> {
        if self.ended {
            return Err(Closed);
        }
        let mut errors = Vec::new();
        let offset = self.state.bytes_seen;
        self.state.bytes_seen += payload.len() as u64;
        if payload.len() > self.state.opts.max_event_bytes {
            let index = self.state.next_event_index();
            let err = MalformedStream::too_large(offset, index, self.state.opts.max_event_bytes);
            self.state.report(err, &mut errors);
        } else {
            self.state.on_payload(offset, payload, deltas, &mut errors);
        }
        Ok(errors)
    }

    /// Feeds one already parsed payload (`feed_chunk`, D3).
    pub fn feed_value(
        &mut self,
        payload: Map<String, Value>,
        deltas: &mut Vec<Delta>,
    ) -> Result<(), Closed> {
        if self.ended {
            return Err(Closed);
        }
        let index = self.state.next_event_index();
        self.state
            .apply_event(index, event_from_map(payload), deltas);
        Ok(())
    }

    /// The current state rendered, without changing it.
    #[must_use]
    pub fn snapshot(&self) -> Response {
        match &self.closed {
            Some(done) => (**done).clone(),
            None => self.state.render(),
        }
    }

    /// Ends the input (F6, F14, C12): the final line, a pending event and the
    /// open calls are processed, their deltas go to `deltas` (D5). Later
    /// calls do nothing; `feed*` is refused afterwards.
    pub fn finish(&mut self, deltas: &mut Vec<Delta>) {
        if self.ended {
            return;
        }
        self.ended = true;
        let mut errors = Vec::new();
        let state = &mut self.state;
        self.framer
            .close(&mut |frame| state.on_frame(frame, deltas, &mut errors));
        // close() never raises: a bad payload completed by the final line is a warning.
        for err in errors {
            state.warn(format!("F8: {}", err.message));
        }
        if state.bytes_seen > 0 && state.events_seen == 0 {
            state.warnings.push(format!(
                "F2: no event was found in {} bytes of body (expected a \
                 streamGenerateContent?alt=sse response)",
                state.bytes_seen
            ));
        }
        state.close_open_calls(deltas);
    }

    /// Ends the stream (`finish()` unless done) and returns the result;
    /// idempotent (D3).
    pub fn close(&mut self) -> Arc<Response> {
        if let Some(done) = &self.closed {
            return Arc::clone(done);
        }
        self.finish(&mut Vec::new());
        let done = Arc::new(self.state.finish());
        self.closed = Some(Arc::clone(&done));
        done
    }
}

impl State {
    fn next_event_index(&mut self) -> u64 {
        let index = self.events_seen;
        self.events_seen += 1;
        index
    }

    fn warn(&mut self, text: String) {
        self.warnings.push(text);
    }

    fn report(&mut self, err: MalformedStream, errors: &mut Vec<MalformedStream>) {
        if self.opts.strict {
            errors.push(err);
        } else {
            self.warnings.push(format!("F8: {}", err.message));
        }
    }

    fn on_frame(
        &mut self,
        frame: Frame<'_>,
        deltas: &mut Vec<Delta>,
        errors: &mut Vec<MalformedStream>,
    ) {
        match frame {
            Frame::Payload { offset, data } => self.on_payload(offset, data, deltas, errors),
            Frame::TooLarge { offset } => {
                let index = self.next_event_index();
                let err = MalformedStream::too_large(offset, index, self.opts.max_event_bytes);
                self.report(err, errors);
            }
            Frame::Warning(text) => self.warn(text),
            Frame::Unterminated { offset, data } => match parse_event(data) {
                Ok(event) => {
                    self.warn(format!(
                        "F6: the stream ended inside an unterminated event at byte {offset}; \
                             it was complete JSON and was processed"
                    ));
                    let index = self.next_event_index();
                    self.apply_event(index, event, deltas);
                }
                _ => self.drop_incomplete(offset),
            },
            Frame::Incomplete { offset } => self.drop_incomplete(offset),
        }
    }

    fn drop_incomplete(&mut self, offset: u64) {
        self.truncated = true;
        self.warn(format!(
            "F6: the stream ended inside an incomplete event at byte {offset}; it was dropped \
             and the result is marked truncated"
        ));
    }

    /// F8/F10: UTF-8, then JSON, then "is an object".
    fn on_payload(
        &mut self,
        offset: u64,
        data: &[u8],
        deltas: &mut Vec<Delta>,
        errors: &mut Vec<MalformedStream>,
    ) {
        let index = self.next_event_index();
        match parse_event(data) {
            Ok(event) => self.apply_event(index, event, deltas),
            Err(ParseError::InvalidUtf8) => {
                self.report(MalformedStream::invalid_utf8(offset, index), errors);
            }
            Err(ParseError::NotAnObject) => {
                self.report(MalformedStream::not_an_object(offset, index), errors);
            }
            Err(ParseError::InvalidJson) => {
                self.report(MalformedStream::invalid_json(offset, index), errors);
            }
        }
    }

    fn apply_event(&mut self, event: u64, payload: EventIn<'_>, deltas: &mut Vec<Delta>) {
        if let Some(error) = payload.error.filter(|e| !e.is_null()) {
            // E1, E8: recorded verbatim, the payload contributes nothing else.
            if self.opts.deltas {
                deltas.push(Delta::StreamError {
                    error: error.clone(),
                });
            }
            self.error = Some(error);
            return;
        }
        match payload.candidates {
            None | Some(Shaped::Null) => {}
            Some(Shaped::Expected(items)) => {
                for (j, candidate) in items.into_iter().enumerate() {
                    self.apply_candidate(event, j, candidate, deltas);
                }
            }
            Some(Shaped::Other(_)) => self.warn(shape(event, "candidates", "a list")),
        }
        match payload.usage {
            None | Some(Shaped::Null) => {}
            Some(Shaped::Expected(Fields(entries))) => {
                // E3: running totals, merged field by field.
                merge_fields(self.usage.get_or_insert_with(Map::new), entries);
            }
            Some(Shaped::Other(_)) => self.warn(shape(event, "usageMetadata", "an object")),
        }
        set_last(&mut self.model_version, payload.model_version);
        if let Some(warning) =
            response_id_change(event, self.response_id.as_ref(), &payload.response_id)
        {
            self.warn(warning);
        }
        set_last(&mut self.response_id, payload.response_id);
        set_last(&mut self.create_time, payload.create_time);
        set_last(&mut self.prompt_feedback, payload.prompt_feedback);
    }

    fn candidate_position(&mut self, index: u32) -> usize {
        // The usual stream has one candidate: a short scan beats hashing.
        let found = if self.candidates.len() <= 8 {
            self.candidates.iter().position(|c| c.index == index)
        } else {
            self.positions.get(&index).copied()
        };
        found.unwrap_or_else(|| {
            let pos = self.candidates.len();
            self.candidates.push(CandidateState::new(index));
            self.positions.insert(index, pos);
            pos
        })
    }

    /// Positions of the candidates in index order (E4).
    fn in_index_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.candidates.len()).collect();
        order.sort_unstable_by_key(|&pos| self.candidates[pos].index);
        order
    }

    fn apply_candidate(
        &mut self,
        event: u64,
        j: usize,
        candidate: Shaped<CandidateIn<'_>>,
        deltas: &mut Vec<Delta>,
    ) {
        let Shaped::Expected(cand) = candidate else {
            self.warn(shape(event, &format!("candidates[{j}]"), "an object"));
            return;
        };
        let index = match cand.index {
            None | Some(Value::Null) => 0,
            Some(Value::Number(n)) if n.as_u64().is_some_and(|i| i < MAX_CANDIDATE_INDEX) => {
                u32::try_from(n.as_u64().unwrap_or(0)).unwrap_or(0)
            }
            Some(_) => {
                self.warn(shape(
                    event,
                    &format!("candidates[{j}].index"),
                    "a non-negative integer below 2^31",
                ));
                return;
            }
        };
        let pos = self.candidate_position(index);
        match cand.content {
            None | Some(Shaped::Null) => {}
            Some(Shaped::Expected(content)) => match content.parts {
                None | Some(Shaped::Null) => {}
                Some(Shaped::Expected(parts)) => {
                    for (p, part) in parts.into_iter().enumerate() {
                        self.apply_part(event, j, p, pos, part, deltas);
                    }
                }
                Some(Shaped::Other(_)) => {
                    self.warn(shape(
                        event,
                        &format!("candidates[{j}].content.parts"),
                        "a list",
                    ));
                }
            },
            Some(Shaped::Other(_)) => self.warn(shape(
                event,
                &format!("candidates[{j}].content"),
                "an object",
            )),
        }
        if let Some(Value::String(reason)) = cand.finish_reason {
            if !reason.is_empty() {
                if self.opts.deltas {
                    deltas.push(Delta::Finish {
                        candidate: index,
                        reason: reason.clone(),
                    });
                }
                self.candidates[pos].finish_reason = Some(reason);
            }
        }
        if let Some(Value::String(message)) = cand.finish_message {
            if !message.is_empty() {
                self.candidates[pos].finish_message = Some(message);
            }
        }
        for (key, value) in cand.rest {
            if value.is_null() {
                continue;
            }
            if key == "citationMetadata" {
                match value {
                    Value::Object(citations) => {
                        let cand = &mut self.candidates[pos];
                        merge_citations(&mut cand.metadata, &mut cand.citation_seen, citations);
                    }
                    _ => self.warn(shape(
                        event,
                        &format!("candidates[{j}].citationMetadata"),
                        "an object",
                    )),
                }
            } else {
                // E5: last non-null wins, first-arrival position kept.
                self.candidates[pos].metadata.insert(key, value);
            }
        }
    }

    fn apply_part(
        &mut self,
        event: u64,
        j: usize,
        p: usize,
        pos: usize,
        part: Shaped<PartIn<'_>>,
        deltas: &mut Vec<Delta>,
    ) {
        let want_deltas = self.opts.deltas;
        let part = match part {
            Shaped::Expected(PartIn::Plain { text, thought }) => {
                self.candidates[pos].append_text(text, thought, want_deltas, deltas);
                return;
            }
            Shaped::Expected(PartIn::Object(part)) => part,
            Shaped::Null | Shaped::Other(_) => {
                self.warn(shape(
                    event,
                    &format!("candidates[{j}].content.parts[{p}]"),
                    "an object",
                ));
                return;
            }
        };
        if part.is_empty() {
            return; // P6
        }
        if matches!(part.get("functionCall"), Some(Value::Object(_))) {
            self.apply_call_part(event, j, p, pos, part, deltas);
            return;
        }
        // Plain text parts were read as `PartIn::Plain`; a string `text` here
        // has other keys (P3), unless `functionCall` makes it P4 (P7).
        let kind = match part.get("text") {
            Some(Value::String(_)) if !part.contains_key("functionCall") => PartKind::Text {
                thought: matches!(part.get("thought"), Some(Value::Bool(true))),
            },
            _ => PartKind::Other,
        };
        let cand = &mut self.candidates[pos];
        cand.run = None;
        let slot = cand.slots.len();
        if let (true, PartKind::Text { thought }) = (want_deltas, kind) {
            if let Some(Value::String(text)) = part.get("text") {
                if !text.is_empty() {
                    deltas.push(Delta::Text {
                        candidate: cand.index,
                        index: slot,
                        text: text.clone(),
                        thought,
                    });
                }
            }
        }
        cand.slots.push(Slot::Kept { part, kind });
    }

    fn apply_call_part(
        &mut self,
        event: u64,
        j: usize,
        p: usize,
        pos: usize,
        mut part: Map<String, Value>,
        deltas: &mut Vec<Delta>,
    ) {
        let Some(Value::Object(fc)) = part.get("functionCall") else {
            return;
        };
        let streamed = match fc.get("partialArgs") {
            None | Some(Value::Null) => false,
            Some(Value::Array(items)) => !items.is_empty(),
            Some(_) => true,
        } || fc.contains_key("willContinue")
            || (!fc.contains_key("name") && !fc.contains_key("args"));
        let want_deltas = self.opts.deltas;
        if !streamed {
            let info = call_ref(part.get("functionCall"));
            if info.name.is_none() {
                // C15: a call nobody can answer is not replayed.
                let id_clause = info
                    .id
                    .map(|id| format!(" with id {}", q(id)))
                    .unwrap_or_default();
                let args = info.args.map_or_else(|| "{}".to_owned(), cj);
                self.warn(format!(
                    "C15: event {event}: candidates[{j}].content.parts[{p}] is a function \
                     call{id_clause} without a name; it was left out (its args: {args})"
                ));
                return;
            }
            let call = want_deltas.then(|| info.to_value());
            let cand = &mut self.candidates[pos];
            cand.run = None;
            let slot = cand.slots.len();
            if let Some(call) = call {
                let (id, name) = id_and_name(&call);
                deltas.push(Delta::CallStart {
                    candidate: cand.index,
                    index: slot,
                    id,
                    name,
                });
                deltas.push(Delta::CallEnd {
                    candidate: cand.index,
                    index: slot,
                    call,
                });
            }
            cand.slots.push(Slot::Kept {
                part,
                kind: PartKind::Call,
            });
            return;
        }
        let signature = part
            .shift_remove("thoughtSignature")
            .filter(|v| !v.is_null());
        let Some(Value::Object(mut fc)) = part.shift_remove("functionCall") else {
            return;
        };
        let partial_args = match fc.shift_remove("partialArgs") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items,
            Some(_) => {
                self.warn(shape(
                    event,
                    &format!("candidates[{j}].content.parts[{p}].functionCall.partialArgs"),
                    "a list",
                ));
                Vec::new()
            }
        };
        let id = string_field(&fc, "id");
        let name = string_field(&fc, "name");
        let max_index = self.opts.max_array_index;
        self.clock += 1;
        let clock = self.clock;
        let cand = &mut self.candidates[pos];
        let candidate = cand.index;
        let Some(k) = cand.route(id.as_deref(), name.is_some(), &partial_args, max_index) else {
            return; // C2.4: an end marker with no open call
        };
        let k = match k {
            Route::Existing(k) => k,
            Route::New => {
                if cand.open.len() == MAX_OPEN_CALLS {
                    // C14: the least recently updated open call is closed first.
                    let lru = cand
                        .open
                        .iter()
                        .copied()
                        .min_by_key(|&k| cand.calls[k].touched)
                        .unwrap_or_default();
                    let mut closing = Vec::new();
                    closing.push(format!(
                        "C14: candidate {candidate}, part {}: more than {MAX_OPEN_CALLS} \
                         streamed calls were open at once; this one was closed",
                        cand.calls[lru].slot
                    ));
                    cand.open.retain(|&k| k != lru);
                    cand.calls[lru].flushed = true; // C13: closed by the limit, not the model
                    close_call(
                        candidate,
                        &mut cand.calls[lru],
                        want_deltas,
                        deltas,
                        &mut closing,
                    );
                    self.warnings.append(&mut closing);
                }
                cand.run = None;
                let slot = cand.slots.len();
                let k = cand.calls.len();
                cand.open.push(k);
                cand.slots.push(Slot::Streamed(k));
                cand.calls.push(StreamedCall {
                    id: id.clone(),
                    name: name.clone(),
                    args: Map::new(),
                    signature: None,
                    flushed: false,
                    touched: clock,
                    slot,
                });
                if want_deltas {
                    deltas.push(Delta::CallStart {
                        candidate,
                        index: slot,
                        id: id.clone(),
                        name: name.clone(),
                    });
                }
                k
            }
        };
        let mut warnings = Vec::new();
        let call = &mut cand.calls[k];
        call.touched = clock;
        let slot = call.slot;
        if let Some(name) = name {
            match &call.name {
                None => call.name = Some(name),
                Some(old) if *old != name => warnings.push(format!(
                    "C2: candidate {candidate}, part {slot}: a later chunk named the call {} but \
                     it is named {}; the first name was kept",
                    q(&name),
                    q(old)
                )),
                Some(_) => {}
            }
        }
        if let Some(sig) = signature {
            match &call.signature {
                None => call.signature = Some(sig),
                Some(old) if *old != sig => warnings.push(format!(
                    "C6: candidate {candidate}, part {slot}: a later chunk carried a different \
                     thoughtSignature; the first one was kept"
                )),
                Some(_) => {}
            }
        }
        if let Some(Value::Object(args)) = fc.shift_remove("args") {
            for (key, value) in args {
                call.args.insert(key, value);
            }
        }
        for (m, arg) in partial_args.into_iter().enumerate() {
            let Value::Object(arg) = arg else {
                warnings.push(shape(
                    event,
                    &format!("candidates[{j}].content.parts[{p}].functionCall.partialArgs[{m}]"),
                    "an object",
                ));
                continue;
            };
            match apply_partial_arg(&mut call.args, &arg, max_index) {
                Ok(None) => {}
                Ok(Some((json_path, value))) => {
                    if want_deltas {
                        deltas.push(Delta::Arg {
                            candidate,
                            index: slot,
                            json_path,
                            value,
                        });
                    }
                }
                Err(reason) => warnings.push(format!(
                    "C5: candidate {candidate}, part {slot}: partial arg at {} skipped: {reason}",
                    path_repr(arg.get("jsonPath"))
                )),
            }
        }
        let keeps_open = matches!(fc.get("willContinue"), Some(Value::Bool(true)));
        if !keeps_open {
            close_call(candidate, call, want_deltas, deltas, &mut warnings);
            cand.open.retain(|&open| open != k);
        }
        self.warnings.append(&mut warnings);
    }

    fn close_open_calls(&mut self, deltas: &mut Vec<Delta>) {
        let want_deltas = self.opts.deltas;
        let mut warnings = Vec::new();
        for pos in self.in_index_order() {
            let cand = &mut self.candidates[pos];
            let candidate = cand.index;
            for k in std::mem::take(&mut cand.open) {
                let call = &mut cand.calls[k];
                call.flushed = true; // C13: the model never finished it
                close_call(candidate, call, want_deltas, deltas, &mut warnings);
            }
        }
        self.warnings.append(&mut warnings);
    }

    /// The current state as a result, unchanged (`snapshot()`).
    fn render(&self) -> Response {
        let candidates = self
            .in_index_order()
            .into_iter()
            .map(|pos| self.candidates[pos].clone().into_result());
        self.response(candidates.collect())
    }

    /// The final result, moving the parts out of the state (`close()`).
    fn finish(&mut self) -> Response {
        let mut candidates = std::mem::take(&mut self.candidates);
        candidates.sort_unstable_by_key(|c| c.index);
        self.response(
            candidates
                .into_iter()
                .map(CandidateState::into_result)
                .collect(),
        )
    }

    fn response(&self, candidates: Vec<CandidateResult>) -> Response {
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
            error: self.error.clone(),
            complete,
            truncated: self.truncated,
            warnings: self.warnings.render(),
        }
    }
}

enum Route {
    Existing(usize),
    New,
}

impl CandidateState {
    fn append_text(
        &mut self,
        text: Cow<'_, str>,
        thought: bool,
        want_deltas: bool,
        deltas: &mut Vec<Delta>,
    ) {
        if text.is_empty() {
            return; // P2
        }
        let candidate = self.index;
        if let Some(run) = self.run {
            if let Some(Slot::Run {
                text: acc,
                thought: t,
            }) = self.slots.get_mut(run)
            {
                if *t == thought {
                    acc.push_str(&text);
                    if want_deltas {
                        deltas.push(Delta::Text {
                            candidate,
                            index: run,
                            text: text.into_owned(),
                            thought,
                        });
                    }
                    return;
                }
            }
        }
        let slot = self.slots.len();
        let text = text.into_owned();
        if want_deltas {
            deltas.push(Delta::Text {
                candidate,
                index: slot,
                text: text.clone(),
                thought,
            });
        }
        self.slots.push(Slot::Run { text, thought });
        self.run = Some(slot);
    }

    /// C2 routing; None when the chunk is to be ignored (C2.4).
    fn route(
        &self,
        id: Option<&str>,
        has_name: bool,
        partial_args: &[Value],
        max_index: usize,
    ) -> Option<Route> {
        // Only open calls are scanned, and C14 keeps them few.
        let open = || self.open.iter().map(|&k| (k, &self.calls[k]));
        let most_recent = |it: &mut dyn Iterator<Item = (usize, &StreamedCall)>| {
            it.max_by_key(|(_, c)| c.touched).map(|(k, _)| k)
        };
        if let Some(id) = id {
            let found = open()
                .find(|(_, c)| c.id.as_deref() == Some(id))
                .map(|(k, _)| k);
            return Some(found.map_or(Route::New, Route::Existing));
        }
        if has_name {
            return Some(Route::New);
        }
        if partial_args.is_empty() {
            return most_recent(&mut open()).map(Route::Existing);
        }
        let paths: Vec<Vec<Segment>> = partial_args
            .iter()
            .filter_map(|arg| match arg.get("jsonPath") {
                Some(Value::String(path)) => json_path::parse(path, max_index).ok(),
                _ => None,
            })
            .collect();
        let holding = most_recent(
            &mut open().filter(|(_, c)| paths.iter().any(|p| json_path::holds_value(&c.args, p))),
        );
        Some(match holding.or_else(|| most_recent(&mut open())) {
            Some(k) => Route::Existing(k),
            None => Route::New,
        })
    }
}

fn close_call(
    candidate: u32,
    call: &mut StreamedCall,
    want_deltas: bool,
    deltas: &mut Vec<Delta>,
    warnings: &mut Vec<String>,
) {
    if call.name.is_some() {
        if want_deltas {
            deltas.push(Delta::CallEnd {
                candidate,
                index: call.slot,
                call: call.call_value(),
            });
        }
    } else {
        let id_clause = call
            .id
            .as_deref()
            .map(|id| format!(" with id {}", q(id)))
            .unwrap_or_default();
        warnings.push(format!(
            "C6: candidate {candidate}, part {}: a streamed function call{id_clause} never \
             received a name and was left out; its args: {}",
            call.slot,
            cj(&Value::Object(call.args.clone()))
        ));
    }
}

fn id_and_name(call: &Value) -> (Option<String>, Option<String>) {
    let get = |key: &str| call.get(key).and_then(Value::as_str).map(str::to_owned);
    (get("id"), get("name"))
}

fn string_field(map: &Map<String, Value>, key: &str) -> Option<String> {
    match map.get(key) {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    }
}

/// C4/C9: applies one partial arg; `Ok(None)` when it has no value key.
fn apply_partial_arg(
    args: &mut Map<String, Value>,
    arg: &Map<String, Value>,
    max_index: usize,
) -> Result<Option<(String, Value)>, String> {
    let Some((key, value)) = ["stringValue", "numberValue", "boolValue", "nullValue"]
        .into_iter()
        .find_map(|k| arg.get(k).map(|v| (k, v)))
    else {
        return Ok(None);
    };
    let write = match (key, value) {
        ("stringValue", Value::String(s)) => Write::AppendString(s),
        ("stringValue", _) => return Err("stringValue is not a string".into()),
        ("numberValue", Value::Number(_)) => Write::Replace(value.clone()),
        ("numberValue", _) => return Err("numberValue is not a number".into()),
        ("boolValue", Value::Bool(_)) => Write::Replace(value.clone()),
        ("boolValue", _) => return Err("boolValue is not a boolean".into()),
        _ => Write::Replace(Value::Null),
    };
    let Some(Value::String(path)) = arg.get("jsonPath") else {
        return Err("unsupported jsonPath syntax".into());
    };
    let segments = json_path::parse(path, max_index).map_err(|e| match e {
        PathError::Syntax => "unsupported jsonPath syntax".to_owned(),
        PathError::IndexAboveMax => format!("array index above max_array_index ({max_index})"),
        PathError::TooDeep => format!("jsonPath deeper than {} segments", json_path::MAX_SEGMENTS),
    })?;
    let delta_value = match &write {
        Write::AppendString(s) => Value::String((*s).to_owned()),
        Write::Replace(v) => v.clone(),
    };
    json_path::write(args, &segments, write).map_err(|e| match e {
        WriteError::TypeConflict => "type conflict with the existing value".to_owned(),
        // C16: the reason names its rule, the warning keeps the C5 form.
        WriteError::TooFar { index, len } => format!(
            "array index {index} is more than {} past the end of an array of {len} (C16)",
            json_path::PAD_SLACK
        ),
    })?;
    Ok(Some((path.clone(), delta_value)))
}

fn path_repr(path: Option<&Value>) -> String {
    match path {
        Some(Value::String(s)) => q(s),
        None => "<missing>".to_owned(),
        Some(_) => "<not a string>".to_owned(),
    }
}

/// E9: citation lists concatenated without exact duplicates; other keys last non-null.
/// `seen` holds the identities of the entries kept in each list, so that a
/// duplicate is found in O(1) (E9a).
fn merge_citations(
    meta: &mut Map<String, Value>,
    seen: &mut HashMap<String, HashSet<String>>,
    incoming: Map<String, Value>,
) {
    let slot = meta
        .entry("citationMetadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    let Value::Object(kept) = slot else { return };
    for (key, value) in incoming {
        if value.is_null() {
            continue;
        }
        let is_list_key = key == "citations" || key == "citationSources";
        match (is_list_key, value) {
            (true, Value::Array(new)) => {
                let known = seen.entry(key.clone()).or_default();
                let list = match kept.get_mut(&key) {
                    Some(Value::Array(old)) => old,
                    _ => {
                        known.clear();
                        kept.insert(key.clone(), Value::Array(Vec::new()));
                        match kept.get_mut(&key) {
                            Some(Value::Array(old)) => old,
                            _ => continue,
                        }
                    }
                };
                for entry in new {
                    let mut id = String::new();
                    write_identity(&entry, &mut id);
                    if known.insert(id) {
                        list.push(entry);
                    }
                }
            }
            (_, value) => {
                seen.remove(&key);
                kept.insert(key, value);
            }
        }
    }
}

/// E10: the warning for a `responseId` that differs from the one kept, if it does.
fn response_id_change(
    event: u64,
    kept: Option<&Value>,
    new: &Option<TextOrValue<'_>>,
) -> Option<String> {
    let kept = kept?;
    let changed = match new.as_ref()? {
        TextOrValue::Text(text) => !matches!(kept, Value::String(s) if s == text),
        TextOrValue::Value(Value::Null) => false,
        TextOrValue::Value(value) => kept != value,
    };
    changed.then(|| {
        let shown = match new {
            Some(TextOrValue::Text(text)) => q(text),
            Some(TextOrValue::Value(value)) => cj(value),
            None => String::new(),
        };
        format!(
            "E10: event {event}: responseId changed from {} to {shown}; the body holds more \
             than one response and they were aggregated as one model turn",
            cj(kept)
        )
    })
}

/// The E9a identity of a JSON value: compact JSON with object keys sorted,
/// so that key order does not matter while `1`, `1.0` and `true` differ.
fn write_identity(v: &Value, out: &mut String) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_identity(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&q(k));
                out.push(':');
                write_identity(item, out);
            }
            out.push('}');
        }
        scalar => write_cj(scalar, out),
    }
}

/// E3: a later non-null value replaces an earlier one; a string equal to
/// the kept one (the usual case: the same model version on every event) is
/// not copied again.
fn set_last(field: &mut Option<Value>, value: Option<TextOrValue<'_>>) {
    match value {
        None | Some(TextOrValue::Value(Value::Null)) => {}
        Some(TextOrValue::Text(text)) => {
            if !matches!(field, Some(Value::String(kept)) if *kept == text) {
                *field = Some(Value::String(text.into_owned()));
            }
        }
        Some(TextOrValue::Value(value)) => *field = Some(value),
    }
}

/// E3 for one object: each key's last value in the object (JSON objects keep
/// the last of duplicate keys) replaces the kept one unless it is null; new
/// keys are added in order of first appearance.
fn merge_fields(kept: &mut Map<String, Value>, mut entries: Vec<(Cow<'_, str>, Value)>) {
    if entries.len() > SMALL_OBJECT {
        // Many keys: collapse duplicates through a map (first position, last
        // value, as a JSON object reads) so the cost stays linear.
        let mut object = Map::with_capacity(entries.len());
        for (key, value) in entries {
            object.insert(key.into_owned(), value);
        }
        for (key, value) in object {
            if !value.is_null() {
                kept.insert(key, value); // an existing key keeps its position
            }
        }
        return;
    }
    for i in 0..entries.len() {
        let key = &entries[i].0;
        if entries[..i].iter().any(|(k, _)| k == key) {
            continue; // a duplicate, handled with its first appearance
        }
        let last = entries.iter().rposition(|(k, _)| k == key).unwrap_or(i);
        let value = std::mem::take(&mut entries[last].1);
        if value.is_null() {
            continue;
        }
        let key = &entries[i].0;
        match kept.get_mut(key.as_ref()) {
            Some(slot) => *slot = value,
            None => {
                kept.insert(key.to_string(), value);
            }
        }
    }
}

fn shape(event: u64, place: &str, expected: &str) -> String {
    format!("E7: event {event}: {place} is not {expected}; ignored")
}

/// `q(s)`: a JSON string literal without ASCII escaping (Python
/// `json.dumps(s, ensure_ascii=False)`).
#[must_use]
pub fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `cj(v)`: compact JSON as Python writes it (`separators=(",", ":")`,
/// `ensure_ascii=False`, floats as `repr(float)`).
#[must_use]
pub fn cj(v: &Value) -> String {
    let mut out = String::new();
    write_cj(v, &mut out);
    out
}

fn write_cj(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&py_number(n)),
        Value::String(s) => out.push_str(&q(s)),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_cj(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&q(k));
                out.push(':');
                write_cj(item, out);
            }
            out.push('}');
        }
    }
}

/// A number as Python's `repr` writes it.
fn py_number(n: &Number) -> String {
    if n.is_f64() {
        n.as_f64().map_or_else(|| n.to_string(), py_float_repr)
    } else {
        n.to_string()
    }
}

/// Python's `repr(float)`: shortest round-trip digits, scientific notation
/// when the exponent is below -4 or at least 16.
#[must_use]
pub fn py_float_repr(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let sci = format!("{f:e}"); // e.g. "-1.2345e-7", shortest round trip
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = mantissa
        .strip_prefix('-')
        .map_or(("", mantissa), |m| ("-", m));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let body = if point <= 0 {
            format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
        } else {
            let point = point as usize;
            if digits.len() <= point {
                format!("{digits}{}.0", "0".repeat(point - digits.len()))
            } else {
                format!("{}.{}", &digits[..point], &digits[point..])
            }
        };
        format!("{sign}{body}")
    } else {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{first}{frac}e{esign}{:02}", exp.unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn sse(events: &[Value]) -> Vec<u8> {
        let mut out = Vec::new();
        for e in events {
            out.extend_from_slice(b"data: ");
            out.extend_from_slice(e.to_string().as_bytes());
            out.extend_from_slice(b"\r\n\r\n");
        }
        out
    }

    fn run(events: &[Value]) -> (Arc<Response>, Vec<Delta>) {
        let mut agg = Aggregator::new(Options::default());
        let mut deltas = Vec::new();
        let errors = agg.feed(&sse(events), &mut deltas);
        assert_eq!(errors, Ok(vec![]));
        (agg.close(), deltas)
    }

    impl CandidateResult {
        fn new_empty() -> Self {
            CandidateState::new(0).into_result()
        }
    }

    #[test]
    fn e11_routing_sees_only_open_calls_and_at_most_64() {
        let mut agg = Aggregator::new(Options::default());
        let mut deltas = Vec::new();
        let call = |name: bool, more: bool| {
            let mut fc = json!({"willContinue": more, "partialArgs": [{"jsonPath": "$.a", "numberValue": 1}]});
            if name {
                fc["name"] = json!("f");
            }
            parts_event(json!([{ "functionCall": fc }]))
        };
        // Sequential streamed calls: one open at a time, however many were closed.
        for _ in 0..500 {
            let body = sse(&[
                call(true, true),
                call(false, true),
                json!({"candidates": [{"content": {"parts": [{"functionCall": {}}]}}]}),
            ]);
            assert_eq!(agg.feed(&body, &mut deltas), Ok(vec![]));
            assert!(agg.state.candidates[0].open.is_empty());
        }
        // Calls left open: never more than 64 (C14).
        for _ in 0..200 {
            assert_eq!(agg.feed(&sse(&[call(true, true)]), &mut deltas), Ok(vec![]));
        }
        assert_eq!(agg.state.candidates[0].open.len(), MAX_OPEN_CALLS);
        assert_eq!(agg.state.candidates[0].calls.len(), 700);
        let result = agg.close();
        assert_eq!(result.candidates[0].call_parts.len(), 700);
        assert_eq!(result.warnings.len(), 136);
    }

    fn parts_event(parts: Value) -> Value {
        json!({"candidates": [{"content": {"role": "model", "parts": parts}}]})
    }

    #[test]
    fn p1_text_runs_merge_and_p3_signed_parts_stay_apart() {
        let (res, deltas) = run(&[
            parts_event(json!([{"text": "a", "thought": true}, {"text": "b", "thought": true}])),
            parts_event(
                json!([{"text": "c"}, {"text": "d", "thoughtSignature": "czE="}, {"text": "e"}]),
            ),
        ]);
        let first = res
            .first()
            .cloned()
            .unwrap_or_else(CandidateResult::new_empty);
        assert_eq!(
            first.parts,
            vec![
                json!({"text": "ab", "thought": true}),
                json!({"text": "c"}),
                json!({"text": "d", "thoughtSignature": "czE="}),
                json!({"text": "e"}),
            ]
        );
        assert_eq!(first.text, "cde");
        assert_eq!(first.thought_text, "ab");
        assert_eq!(deltas.len(), 5);
        assert_eq!(
            deltas[3],
            Delta::Text {
                candidate: 0,
                index: 2,
                text: "d".into(),
                thought: false
            }
        );
    }

    #[test]
    fn c2_path_affinity_routes_fragments_without_ids() {
        let fc = |v: Value| parts_event(json!([{"functionCall": v}]));
        let (res, _) = run(&[
            fc(
                json!({"name": "a", "partialArgs": [{"jsonPath": "$.x", "stringValue": "P"}], "willContinue": true}),
            ),
            fc(
                json!({"name": "b", "partialArgs": [{"jsonPath": "$.y", "stringValue": "Q"}], "willContinue": true}),
            ),
            fc(
                json!({"partialArgs": [{"jsonPath": "$.x", "stringValue": "R"}], "willContinue": true}),
            ),
            fc(json!({})),
            fc(json!({})),
        ]);
        let first = res
            .first()
            .cloned()
            .unwrap_or_else(CandidateResult::new_empty);
        assert_eq!(
            first.parts,
            vec![
                json!({"functionCall": {"name": "a", "args": {"x": "PR"}}}),
                json!({"functionCall": {"name": "b", "args": {"y": "Q"}}}),
            ]
        );
    }

    #[test]
    fn c13_only_a_call_flushed_at_close_is_unfinished() {
        let (res, deltas) = run(&[
            parts_event(json!([{"functionCall": {"name": "a", "willContinue": true}}])),
            parts_event(json!([{"functionCall": {}}])),
            parts_event(json!([{"functionCall": {"name": "b", "willContinue": true}}])),
        ]);
        assert_eq!(
            res.first().map(|c| c.unfinished_calls.clone()),
            Some(vec![1])
        );
        let ended: Vec<usize> = deltas
            .iter()
            .filter_map(|d| match d {
                Delta::CallEnd { index, .. } => Some(*index),
                _ => None,
            })
            .collect();
        assert_eq!(ended, vec![0]);
    }

    #[test]
    fn e10_changed_response_id_is_warned_about() {
        let (res, _) = run(&[
            json!({"responseId": "r1"}),
            json!({"responseId": "r1"}),
            json!({"responseId": "r2"}),
        ]);
        assert_eq!(
            res.warnings,
            vec![
                r#"E10: event 2: responseId changed from "r1" to "r2"; the body holds more than one response and they were aggregated as one model turn"#
            ]
        );
    }

    #[test]
    fn c12_nameless_call_left_out_with_warning() {
        let (res, _) = run(&[parts_event(
            json!([{"functionCall": {"id": "z", "partialArgs": [{"jsonPath": "$.v", "numberValue": 1.5e20}], "willContinue": true}}]),
        )]);
        assert_eq!(
            res.warnings,
            vec![
                r#"C6: candidate 0, part 0: a streamed function call with id "z" never received a name and was left out; its args: {"v":1.5e+20}"#
            ]
        );
        assert!(res.first().is_some_and(|c| c.parts.is_empty()));
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

    fn feed_all(pieces: &[&[u8]], strict: bool) -> (Vec<Delta>, Vec<MalformedStream>, Response) {
        let mut agg = Aggregator::new(Options {
            strict,
            ..Options::default()
        });
        let (mut deltas, mut errors) = (Vec::new(), Vec::new());
        for piece in pieces {
            errors.extend(agg.feed(piece, &mut deltas).unwrap_or_default());
        }
        let done = agg.close();
        (deltas, errors, (*done).clone())
    }

    /// Bytes that look like a Gemini stream often enough to reach deep states.
    fn streamish() -> impl Strategy<Value = Vec<u8>> {
        let atoms = prop::sample::select(vec![
            &b"data: "[..],
            b"\r\n",
            b"\n",
            b"\r",
            b"{",
            b"}",
            b"[",
            b"]",
            b",",
            b":",
            b"\"",
            b"\\",
            b"\"candidates\"",
            b"\"content\"",
            b"\"parts\"",
            b"\"text\"",
            b"\"thought\"",
            b"true",
            b"\"functionCall\"",
            b"\"partialArgs\"",
            b"\"jsonPath\"",
            b"\"$.a[0]\"",
            b"\"stringValue\"",
            b"\"willContinue\"",
            b"\"name\"",
            b"\"id\"",
            b"\"error\"",
            b"\"index\"",
            b"1",
            b"null",
            b"\"thoughtSignature\"",
            b"\"x\"",
            b"\xff",
            b"\xe6\xbc",
            b" ",
            b": c\n",
        ]);
        prop::collection::vec(atoms, 0..120).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// F7 and "no panic reachable from input": any bytes, any split, in
        /// both modes, give the same deltas, errors and result as one piece.
        #[test]
        fn f7_any_bytes_any_split_never_panics(
            body in prop_oneof![streamish(), prop::collection::vec(any::<u8>(), 0..300)],
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
            strict in any::<bool>(),
        ) {
            let mut at: Vec<usize> = cuts.iter().map(|i| i.index(body.len() + 1)).collect();
            at.sort_unstable();
            let mut pieces: Vec<&[u8]> = Vec::new();
            let mut start = 0;
            for &cut in &at {
                pieces.push(&body[start..cut]);
                start = cut;
            }
            pieces.push(&body[start..]);
            let whole = feed_all(&[&body], strict);
            let split = feed_all(&pieces, strict);
            prop_assert_eq!(whole, split);
        }
    }

    #[test]
    fn cj_writes_floats_like_python_repr() {
        for (f, want) in [
            (0.5, "0.5"),
            (100.0, "100.0"),
            (1e16, "1e+16"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (-0.0, "-0.0"),
            (123_456_789.125, "123456789.125"),
            (1e22, "1e+22"),
        ] {
            assert_eq!(py_float_repr(f), want);
        }
        assert_eq!(
            cj(&json!({"a": [1, "é\n", null, true]})),
            r#"{"a":[1,"é\n",null,true]}"#
        );
    }
}
