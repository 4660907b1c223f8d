//! Candidate state (E4 index order, E5 metadata, E7 candidate shapes) and
//! its rendering into a `CandidateResult`.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Map, Value};

use super::calls::StreamedCall;
use super::merge::{merge_citations, merge_logprobs, shape};
use super::response::{call_ref, CallRef, Part, RawPart};
use super::{CandidateResult, Delta, State};
use crate::event::{CandidateIn, PartIn, Shaped};

/// Candidate indices must be below this (E7).
pub(super) const MAX_CANDIDATE_INDEX: u64 = 1 << 31;

/// What the candidate-0 objects of one event brought (E14).
#[derive(Debug, Default)]
pub(super) struct Checkpoint {
    /// A part that is kept or extends a text run (not dropped by P2, P6, E7).
    pub(super) output: bool,
    /// A non-empty string `continuationToken`.
    pub(super) token: Option<String>,
}

/// E14: output is a part the candidate keeps or extends a run with.
fn is_output(part: &Shaped<PartIn<'_>>) -> bool {
    match part {
        Shaped::Expected(PartIn::Plain { text, .. }) => !text.is_empty(),
        Shaped::Expected(PartIn::Raw(part)) => !part.empty,
        Shaped::Expected(PartIn::Object(part)) => !part.is_empty(),
        Shaped::Null | Shaped::Other => false,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PartKind {
    /// A P3 part: string `text` plus other keys.
    Text { thought: bool },
    /// A complete function-call part (C1).
    Call,
    /// Every other kept part (P4): among them the server-side tool parts
    /// `toolCall` / `toolResponse` (P10), `executableCode` /
    /// `codeExecutionResult` (P11) and `audioTranscription` (P12), which the
    /// next request carries back unchanged; P13 lists every kind.
    Other,
}

#[derive(Debug, Clone)]
pub(super) enum Slot {
    /// A merged run of plain text parts (P1).
    Run { text: String, thought: bool },
    /// A part kept byte-exact (P3, P4, complete calls).
    Kept { part: Kept, kind: PartKind },
    /// A streamed call, by its index in `CandidateState::calls` (C3).
    Streamed(usize),
}

/// A part kept as it came.
#[derive(Debug, Clone)]
pub(super) enum Kept {
    /// R7: its JSON text; `text` is a P3 part's text.
    Raw { part: RawPart, text: Option<String> },
    /// A part of a `feed_chunk()` object.
    Tree(Map<String, Value>),
}

impl Kept {
    pub(super) fn text(&self) -> Option<&str> {
        match self {
            Self::Raw { text, .. } => text.as_deref(),
            Self::Tree(part) => part.get("text").and_then(Value::as_str),
        }
    }

    /// C11: the call of a function-call part.
    pub(super) fn call(&self) -> CallRef<'_> {
        match self {
            Self::Raw { part, .. } => part.call_ref(),
            Self::Tree(part) => call_ref(part.get("functionCall")),
        }
    }

    fn into_part(self) -> Part {
        match self {
            Self::Raw { part, .. } => Part::Raw(part),
            Self::Tree(part) => Part::Value(Value::Object(part)),
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct CandidateState {
    pub(super) index: u32,
    pub(super) slots: Vec<Slot>,
    /// The slot of the text run that the next plain text part may extend.
    pub(super) run: Option<usize>,
    pub(super) calls: Vec<StreamedCall>,
    pub(super) finish_reason: Option<String>,
    pub(super) finish_message: Option<String>,
    pub(super) metadata: Map<String, Value>,
    /// E9a: identities of the kept citation entries, per list key.
    pub(super) citation_seen: HashMap<String, HashSet<String>>,
    /// C17: the open calls by recency: the clock of the last chunk routed
    /// to each (unique per chunk) -> its index into `calls`.
    pub(super) recent: BTreeMap<u64, usize>,
    /// C17: the open calls that have an id, by id (unique among open calls, C2.1).
    pub(super) open_ids: HashMap<String, usize>,
    /// R5: answer text or a function call came (`visible_output`).
    pub(super) visible: bool,
}

impl CandidateState {
    pub(super) fn new(index: u32) -> Self {
        Self {
            index,
            slots: Vec::new(),
            run: None,
            calls: Vec::new(),
            finish_reason: None,
            finish_message: None,
            metadata: Map::new(),
            citation_seen: HashMap::new(),
            recent: BTreeMap::new(),
            open_ids: HashMap::new(),
            visible: false,
        }
    }

    /// The result of this candidate, consuming the state (`close()` moves
    /// every part out instead of copying it; `snapshot()` renders a clone).
    pub(super) fn into_result(self) -> CandidateResult {
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
                    out.parts.push(Part::Text { text, thought });
                }
                Slot::Kept { part, kind } => {
                    match kind {
                        PartKind::Text { thought } => {
                            if let Some(text) = part.text() {
                                push_text(&mut out, text, thought);
                            }
                        }
                        PartKind::Call => out.call_parts.push(out.parts.len()),
                        PartKind::Other => {}
                    }
                    out.parts.push(part.into_part());
                }
                Slot::Streamed(k) => {
                    let Some(call) = calls.get_mut(k).and_then(Option::take) else {
                        continue;
                    };
                    let finished = call.finished;
                    if let Some(part) = call.into_part() {
                        // RULE C13: only a call the model finished may be run.
                        if finished {
                            out.call_parts.push(out.parts.len());
                        } else {
                            out.unfinished_calls.push(out.parts.len());
                        }
                        out.parts.push(Part::Value(part));
                    }
                }
            }
        }
        out
    }
}

pub(super) fn push_text(out: &mut CandidateResult, text: &str, thought: bool) {
    if thought {
        out.thought_text.push_str(text);
    } else {
        out.text.push_str(text);
    }
}

impl State {
    /// RULE E11: found by index in O(1) whatever the arrival order.
    pub(super) fn candidate_position(&mut self, index: u32) -> usize {
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
    pub(super) fn in_index_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.candidates.len()).collect();
        order.sort_unstable_by_key(|&pos| self.candidates[pos].index);
        order
    }

    pub(super) fn apply_candidate(
        &mut self,
        event: u64,
        j: usize,
        candidate: Shaped<CandidateIn<'_>>,
        deltas: &mut Vec<Delta>,
        mark: &mut Checkpoint,
    ) {
        let Shaped::Expected(cand) = candidate else {
            self.warn(shape(event, &format!("candidates[{j}]"), "an object"));
            return;
        };
        let index = match cand.index {
            None | Some(Shaped::Null) => 0,
            Some(Shaped::Expected(n)) if n.as_u64().is_some_and(|i| i < MAX_CANDIDATE_INDEX) => {
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
                        mark.output |= index == 0 && is_output(&part);
                        self.apply_part(event, j, p, pos, part, deltas);
                    }
                }
                Some(Shaped::Other) => {
                    self.warn(shape(
                        event,
                        &format!("candidates[{j}].content.parts"),
                        "a list",
                    ));
                }
            },
            Some(Shaped::Other) => self.warn(shape(
                event,
                &format!("candidates[{j}].content"),
                "an object",
            )),
        }
        if let Some(reason) = cand.finish_reason {
            if !reason.is_empty() {
                let reason = reason.into_owned();
                if self.opts.deltas.all() {
                    deltas.push(Delta::Finish {
                        candidate: index,
                        reason: reason.clone(),
                    });
                }
                self.candidates[pos].finish_reason = Some(reason);
            }
        }
        if let Some(message) = cand.finish_message {
            if !message.is_empty() {
                self.candidates[pos].finish_message = Some(message.into_owned());
            }
        }
        self.apply_candidate_keys(event, j, pos, cand.rest, mark);
    }

    /// E5, E9, E14: the other keys of a candidate object, in arrival order.
    fn apply_candidate_keys(
        &mut self,
        event: u64,
        j: usize,
        pos: usize,
        rest: Option<Box<Map<String, Value>>>,
        mark: &mut Checkpoint,
    ) {
        let Some(rest) = rest else { return };
        let index = self.candidates[pos].index;
        for (key, value) in *rest {
            if value.is_null() {
                continue;
            }
            if index == 0 && key == "continuationToken" {
                if let Value::String(token) = &value {
                    if !token.is_empty() {
                        mark.token = Some(token.clone());
                    }
                }
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
            } else if key == "logprobsResult" {
                // RULE E16: per-chunk log probabilities add up.
                merge_logprobs(&mut self.candidates[pos].metadata, value);
            } else {
                // E5: last non-null wins, first-arrival position kept.
                self.candidates[pos].metadata.insert(key, value);
            }
        }
    }
}
