//! Parts (P rules): plain text runs merged (P1, P2), other parts kept (P3, P4, P6).

use std::borrow::Cow;

use serde_json::Value;

use super::calls::At;
use super::candidate::{CandidateState, Kept, PartKind, Slot};
use super::merge::shape;
use super::response::{RawCall, RawPart};
use super::{Delta, State};
use crate::event::{PartIn, RawPartIn, Shaped};

impl State {
    pub(super) fn apply_part(
        &mut self,
        event: u64,
        j: usize,
        p: usize,
        pos: usize,
        part: Shaped<PartIn<'_>>,
        deltas: &mut Vec<Delta>,
    ) {
        // R5: with `Deltas::Display` only candidate 0's text is reported.
        let want_deltas = self.opts.deltas.shows(self.candidates[pos].index);
        let part = match part {
            Shaped::Expected(PartIn::Plain { text, thought }) => {
                self.candidates[pos].append_text(text, thought, want_deltas, deltas);
                return;
            }
            Shaped::Expected(PartIn::Raw(part)) => {
                self.apply_raw_part(At { event, j, p }, pos, part, want_deltas, deltas);
                return;
            }
            Shaped::Expected(PartIn::Object(part)) => part,
            Shaped::Null | Shaped::Other => {
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
            self.apply_call_part(At { event, j, p }, pos, part, deltas);
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
        self.candidates[pos].keep_part(Kept::Tree(part), kind, want_deltas, deltas);
    }

    /// R7: a part kept as its JSON text; a streamed call chunk is read
    /// from it to be applied to its call (C3).
    fn apply_raw_part(
        &mut self,
        at: At,
        pos: usize,
        raw: RawPartIn<'_>,
        want_deltas: bool,
        deltas: &mut Vec<Delta>,
    ) {
        if raw.empty {
            return; // P6
        }
        if let Some(call) = raw.call {
            if call.streamed {
                let chunk = self.raw_chunk(at, raw.json, raw.signature, *call);
                self.apply_streamed_chunk(at, pos, chunk, deltas);
            } else {
                let call = RawCall {
                    id: call.id.map(Cow::into_owned),
                    name: call.name.map(Cow::into_owned),
                    args: call.args,
                };
                let part = RawPart {
                    json: raw.json.into(),
                    call: Some(call),
                };
                self.apply_complete_call(at, pos, Kept::Raw { part, text: None }, deltas);
            }
            return;
        }
        // P3, unless a `functionCall` that is not an object makes it P4 (P7).
        let (kind, text) = match raw.text {
            Some(text) if !raw.has_call_key => (
                PartKind::Text {
                    thought: raw.thought,
                },
                Some(text.into_owned()),
            ),
            _ => (PartKind::Other, None),
        };
        let part = RawPart {
            json: raw.json.into(),
            call: None,
        };
        self.candidates[pos].keep_part(Kept::Raw { part, text }, kind, want_deltas, deltas);
    }
}

impl CandidateState {
    /// A part kept as it came, after the text run it ends (P1).
    fn keep_part(
        &mut self,
        part: Kept,
        kind: PartKind,
        want_deltas: bool,
        deltas: &mut Vec<Delta>,
    ) {
        self.run = None;
        let slot = self.slots.len();
        if let (PartKind::Text { thought }, Some(text)) = (kind, part.text()) {
            if !text.is_empty() {
                self.visible |= !thought; // R5
                if want_deltas {
                    deltas.push(Delta::Text {
                        candidate: self.index,
                        index: slot,
                        text: text.to_owned(),
                        thought,
                    });
                }
            }
        }
        self.slots.push(Slot::Kept { part, kind });
    }

    pub(super) fn append_text(
        &mut self,
        text: Cow<'_, str>,
        thought: bool,
        want_deltas: bool,
        deltas: &mut Vec<Delta>,
    ) {
        if text.is_empty() {
            return; // P2
        }
        self.visible |= !thought; // R5: answer text, not a thought
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
}
