//! Function calls (C rules): complete calls (C1, C15), streamed calls routed
//! (C2), their partial args applied (C4, C5, C9, C16), closed (C6, C12-C14).

use serde_json::{Map, Value};

use super::candidate::{CandidateState, PartKind, Slot};
use super::merge::shape;
use super::response::{call_dict, call_ref};
use super::{Delta, State};
use crate::diagnostics::Diagnostic;
use crate::json_path::{self, PathError, Segment, Write, WriteError};

/// At most this many streamed calls are open at once per candidate (C14).
pub(super) const MAX_OPEN_CALLS: usize = 64;

#[derive(Debug, Clone)]
pub(super) struct StreamedCall {
    pub(super) id: Option<String>,
    pub(super) name: Option<String>,
    pub(super) args: Map<String, Value>,
    pub(super) signature: Option<Value>,
    /// Closed by `close()` or by the C14 limit, not by the model (C13).
    pub(super) flushed: bool,
    /// Value of the aggregator's clock at the last chunk routed here (C10).
    pub(super) touched: u64,
    pub(super) slot: usize,
}

impl StreamedCall {
    pub(super) fn call_value(&self) -> Value {
        call_dict(
            self.id.clone(),
            self.name.clone(),
            Value::Object(self.args.clone()),
        )
    }

    /// The call's part (C6); None for a call that never got a name.
    pub(super) fn into_part(self) -> Option<Value> {
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

impl State {
    pub(super) fn apply_call_part(
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
                // RULE C15: a call nobody can answer is not replayed.
                self.warn(Diagnostic::NamelessCall {
                    event,
                    path: format!("candidates[{j}].content.parts[{p}]"),
                    call_id: info.id.map(str::to_owned),
                    args: info
                        .args
                        .cloned()
                        .unwrap_or_else(|| Value::Object(Map::new())),
                });
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
                    let mut closing = vec![Diagnostic::OpenCallLimit {
                        candidate,
                        part: cand.calls[lru].slot,
                        limit: MAX_OPEN_CALLS as u64,
                    }];
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
                Some(old) if *old != name => warnings.push(Diagnostic::CallRenamed {
                    candidate,
                    part: slot,
                    name,
                    kept_name: old.clone(),
                }),
                Some(_) => {}
            }
        }
        if let Some(sig) = signature {
            match &call.signature {
                None => call.signature = Some(sig),
                Some(old) if *old != sig => warnings.push(Diagnostic::SignatureChanged {
                    candidate,
                    part: slot,
                }),
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
                Err(reason) => {
                    warnings.push(skipped_arg(candidate, slot, arg.get("jsonPath"), reason))
                }
            }
        }
        let keeps_open = matches!(fc.get("willContinue"), Some(Value::Bool(true)));
        if !keeps_open {
            close_call(candidate, call, want_deltas, deltas, &mut warnings);
            cand.open.retain(|&open| open != k);
        }
        self.warnings.append(&mut warnings);
    }

    pub(super) fn close_open_calls(&mut self, deltas: &mut Vec<Delta>) {
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
}

pub(super) enum Route {
    Existing(usize),
    New,
}

impl CandidateState {
    /// C2 routing; None when the chunk is to be ignored (C2.4).
    pub(super) fn route(
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

pub(super) fn close_call(
    candidate: u32,
    call: &mut StreamedCall,
    want_deltas: bool,
    deltas: &mut Vec<Delta>,
    warnings: &mut Vec<Diagnostic>,
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
        // RULE C6, C12: left out of the parts, reported with its args.
        warnings.push(Diagnostic::NamelessStreamedCall {
            candidate,
            part: call.slot,
            call_id: call.id.clone(),
            args: Value::Object(call.args.clone()),
        });
    }
}

pub(super) fn id_and_name(call: &Value) -> (Option<String>, Option<String>) {
    let get = |key: &str| call.get(key).and_then(Value::as_str).map(str::to_owned);
    (get("id"), get("name"))
}

pub(super) fn string_field(map: &Map<String, Value>, key: &str) -> Option<String> {
    match map.get(key) {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    }
}

/// C4/C9: applies one partial arg; `Ok(None)` when it has no value key.
pub(super) fn apply_partial_arg(
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

/// RULE C5: the diagnostic of a skipped partial arg, by what its jsonPath is.
fn skipped_arg(candidate: u32, part: usize, path: Option<&Value>, reason: String) -> Diagnostic {
    match path {
        Some(Value::String(s)) => Diagnostic::PartialArgSkipped {
            candidate,
            part,
            json_path: s.clone(),
            reason,
        },
        None => Diagnostic::PartialArgPathMissing {
            candidate,
            part,
            reason,
        },
        Some(_) => Diagnostic::PartialArgPathNotString {
            candidate,
            part,
            reason,
        },
    }
}
