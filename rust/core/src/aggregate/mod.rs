//! The aggregation state machine: event payloads -> the aggregated model turn
//! (aggregation.md E, P, C rules; addendum E7-E9, P7-P9, C8-C12, D1-D3).

mod calls;
mod candidate;
mod handover;
mod merge;
mod parts;
mod paths;
mod render;
mod response;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::diagnostics::Diagnostic;
use crate::error::MalformedStream;
use crate::event::{event_from_map, parse_event, EventIn, Fields, ParseError, Shaped};
use crate::framing::{BodyFramer, Frame};

use candidate::{CandidateState, Checkpoint};
pub use handover::{Step, TakenString};
use merge::{merge_fields, response_id_change, set_last, shape};
pub use render::{cj, py_float_repr, q};
pub use response::{
    content_value, Args, CallRef, CandidateResult, EndedCall, Part, RawCall, RawPart, Response,
};

/// The largest `max_array_index` accepted (D2b).
pub const MAX_ARRAY_INDEX_CAP: usize = (1 << 31) - 1;
/// The largest `max_event_bytes` accepted (D2b): Python's `sys.maxsize`.
pub const MAX_EVENT_BYTES_CAP: usize = isize::MAX as usize;

/// Which deltas `feed()` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deltas {
    /// Every delta of every candidate.
    All,
    /// RULE R5: only what a live display of the first candidate shows: its
    /// text (and thought), call-start and argument deltas; no `CallEnd` (so no
    /// copy of a finished call's arguments), `Finish` or `StreamError`.
    Display,
    /// None.
    Off,
}

impl Deltas {
    /// Whether the text, call-start and argument deltas of `candidate` are reported.
    #[must_use]
    pub fn shows(self, candidate: u32) -> bool {
        match self {
            Self::All => true,
            Self::Display => candidate == 0,
            Self::Off => false,
        }
    }

    /// Whether `CallEnd`, `Finish` and `StreamError` are reported.
    #[must_use]
    pub fn all(self) -> bool {
        self == Self::All
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub deltas: Deltas,
    pub strict: bool,
    pub max_event_bytes: usize,
    pub max_array_index: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            deltas: Deltas::All,
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
        call: EndedCall,
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

/// At most this many warnings are kept (D7); the others are counted.
const MAX_WARNINGS: usize = 1000;

/// The warnings of a stream, bounded (D7): bad input cannot make them grow
/// without limit (`strict=False` turns every bad event into one).
#[derive(Debug, Default)]
struct Warnings {
    kept: Vec<Diagnostic>,
    dropped: u64,
}

impl Warnings {
    fn push(&mut self, diagnostic: Diagnostic) {
        if self.kept.len() < MAX_WARNINGS {
            self.kept.push(diagnostic);
        } else {
            self.dropped += 1;
        }
    }

    fn append(&mut self, diagnostics: &mut Vec<Diagnostic>) {
        for diagnostic in diagnostics.drain(..) {
            self.push(diagnostic);
        }
    }

    /// The kept warnings, then one that counts the others.
    fn render(&self) -> Vec<Diagnostic> {
        let mut out = self.kept.clone();
        if self.dropped > 0 {
            // RULE D7, X3: one diagnostic counts the ones not kept.
            out.push(Diagnostic::WarningsDropped {
                count: self.dropped,
                limit: MAX_WARNINGS as u64,
            });
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
    /// C5: the last `jsonPath`s parsed.
    paths: paths::PathCache,
    usage: Option<Map<String, Value>>,
    model_version: Option<Value>,
    response_id: Option<Value>,
    create_time: Option<Value>,
    prompt_feedback: Option<Value>,
    model_status: Option<Value>,
    error: Option<Value>,
    /// E14: candidate 0's latest token, and output in an event after it.
    continuation_token: Option<String>,
    output_after_token: bool,
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
    /// `visible_output()` when `close()` moved the candidates out (R5).
    closed_visible: bool,
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
                paths: paths::PathCache::default(),
                usage: None,
                model_version: None,
                response_id: None,
                create_time: None,
                prompt_feedback: None,
                model_status: None,
                error: None,
                continuation_token: None,
                output_after_token: false,
                warnings: Warnings::default(),
                truncated: false,
                events_seen: 0,
                bytes_seen: 0,
                clock: 0,
            },
            ended: false,
            closed: None,
            closed_visible: false,
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

    /// RULE R5: whether candidate 0 has produced answer text or a function
    /// call (thoughts do not count), whatever `Deltas` asks for: a consumer
    /// that takes no deltas still learns that visible output happened.
    #[must_use]
    pub fn visible_output(&self) -> bool {
        let state = &self.state;
        self.closed_visible
            || state
                .positions
                .get(&0)
                .and_then(|&pos| state.candidates.get(pos))
                .is_some_and(|c| c.visible)
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
            state.on_frame(frame, deltas, &mut errors);
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
            state.warn(err.diagnostic);
        }
        if state.bytes_seen > 0 && state.events_seen == 0 {
            state.warn(Diagnostic::NoEventFound {
                bytes: state.bytes_seen,
            });
        }
        state.close_open_calls(deltas);
    }

    /// Ends the stream (`finish()` unless done) and returns the result;
    /// idempotent (D3).
    pub fn close(&mut self) -> Arc<Response> {
        self.close_taking(usize::MAX).0
    }

    /// RULE R13: `close()`, with every string of at least `min` bytes in a
    /// streamed call's arguments moved out of the result before it is
    /// shared ([`Response::take_long_strings`]; none when `min` is
    /// `usize::MAX`, or when the aggregator was closed before).
    pub fn close_taking(&mut self, min: usize) -> (Arc<Response>, Vec<TakenString>) {
        if let Some(done) = &self.closed {
            return (Arc::clone(done), Vec::new());
        }
        self.finish(&mut Vec::new());
        self.closed_visible = self.visible_output();
        let mut response = self.state.finish();
        let taken = if min == usize::MAX {
            Vec::new()
        } else {
            response.take_long_strings(min)
        };
        let done = Arc::new(response);
        self.closed = Some(Arc::clone(&done));
        (done, taken)
    }
}

impl State {
    fn next_event_index(&mut self) -> u64 {
        let index = self.events_seen;
        self.events_seen += 1;
        index
    }

    fn warn(&mut self, diagnostic: Diagnostic) {
        self.warnings.push(diagnostic);
    }

    fn report(&mut self, err: MalformedStream, errors: &mut Vec<MalformedStream>) {
        if self.opts.strict {
            errors.push(err);
        } else {
            self.warn(err.diagnostic);
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
            Frame::Warning(diagnostic) => self.warn(diagnostic),
            Frame::Unterminated { offset, data } => match parse_event(data) {
                Ok(event) => {
                    self.warn(Diagnostic::UnterminatedEventProcessed { offset });
                    let index = self.next_event_index();
                    self.apply_event(index, event, deltas);
                }
                _ => self.drop_incomplete(offset),
            },
            Frame::Incomplete { offset } => self.drop_incomplete(offset),
            // U4, U5: raised whatever `strict` says: this is not one bad event
            // to skip, nothing of the body can be read as it was fed.
            Frame::Unreadable(diagnostic) => {
                errors.push(MalformedStream::unreadable(diagnostic, self.events_seen));
            }
        }
    }

    fn drop_incomplete(&mut self, offset: u64) {
        self.truncated = true;
        self.warn(Diagnostic::IncompleteEventDropped { offset });
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

    /// RULE E0: one payload in order: error, candidates, usage, then the top-level fields.
    fn apply_event(&mut self, event: u64, payload: EventIn<'_>, deltas: &mut Vec<Delta>) {
        let (error, prompt_feedback, model_status) = match payload.rare {
            Some(rare) => (rare.error, rare.prompt_feedback, rare.model_status),
            None => (None, None, None),
        };
        if let Some(error) = error.filter(|e| !e.is_null()) {
            // E1, E8: recorded verbatim, the payload contributes nothing else.
            if self.opts.deltas.all() {
                deltas.push(Delta::StreamError {
                    error: error.clone(),
                });
            }
            self.error = Some(error);
            return;
        }
        match payload.candidates {
            // RULE E2: a payload without candidates is normal (metadata-only chunks).
            None | Some(Shaped::Null) => {}
            Some(Shaped::Expected(items)) => {
                let mut mark = Checkpoint::default();
                for (j, candidate) in items.into_iter().enumerate() {
                    self.apply_candidate(event, j, candidate, deltas, &mut mark);
                }
                // RULE E14: a token covers the output of its own event, not of later ones.
                self.output_after_token |= mark.output;
                if let Some(token) = mark.token {
                    self.continuation_token = Some(token);
                    self.output_after_token = false;
                }
            }
            Some(Shaped::Other) => self.warn(shape(event, "candidates", "a list")),
        }
        match payload.usage {
            None | Some(Shaped::Null) => {}
            Some(Shaped::Expected(Fields(entries))) => {
                // E3: running totals, merged field by field.
                merge_fields(self.usage.get_or_insert_with(Map::new), entries);
            }
            Some(Shaped::Other) => self.warn(shape(event, "usageMetadata", "an object")),
        }
        set_last(&mut self.model_version, payload.model_version);
        if let Some(diagnostic) = response_id_change(
            event,
            self.response_id.as_ref(),
            payload.response_id.as_ref(),
        ) {
            self.warn(diagnostic);
        }
        set_last(&mut self.response_id, payload.response_id);
        set_last(&mut self.create_time, payload.create_time);
        set_last(&mut self.prompt_feedback, prompt_feedback);
        // RULE E15: `modelStatus` is kept, last non-null, like the fields above.
        if let Some(status) = model_status.filter(|v| !v.is_null()) {
            self.model_status = Some(status);
        }
    }
}
