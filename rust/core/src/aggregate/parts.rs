//! Parts (P rules): plain text runs merged (P1, P2), other parts kept (P3, P4, P6).

use std::borrow::Cow;

use serde_json::Value;

use super::calls::At;
use super::candidate::{CandidateState, PartKind, Slot};
use super::merge::shape;
use super::{Delta, State};
use crate::event::{PartIn, Shaped};

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
        let cand = &mut self.candidates[pos];
        cand.run = None;
        let slot = cand.slots.len();
        if let (PartKind::Text { thought }, Some(Value::String(text))) = (kind, part.get("text")) {
            if !text.is_empty() {
                cand.visible |= !thought; // R5
                if want_deltas {
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
}

impl CandidateState {
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
