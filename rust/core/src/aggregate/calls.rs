//! Function calls (C rules): complete calls (C1, C15), streamed calls routed
//! (C2, C17), their partial args applied (C4, C5, C9, C16), closed (C6, C12-C14).

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::candidate::{CandidateState, Kept, PartKind, Slot};
use super::merge::shape;
use super::paths::PathCache;
use super::response::{call_dict, json_value, Args, EndedCall};
use super::{Delta, State};
use crate::diagnostics::Diagnostic;
use crate::event::{partial_args_from_value, CallPeek, Items, PartialArgIn, Shaped};
use crate::json_path::{self, PathError, Segment, Write, WriteError};

/// The C2.3 path search looks at this many open calls, most recent first (C17).
pub(super) const PATH_SEARCH: usize = 64;

#[derive(Debug, Clone)]
pub(super) struct StreamedCall {
    pub(super) id: Option<String>,
    pub(super) name: Option<String>,
    pub(super) args: Map<String, Value>,
    pub(super) signature: Option<Value>,
    /// Closed by a chunk of the model, not flushed by `close()` (C13).
    pub(super) finished: bool,
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
    /// RULE C7: the id is the model's or absent, never invented.
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

/// Where a call part sits in its event, for E7 paths.
#[derive(Clone, Copy)]
pub(super) struct At {
    pub(super) event: u64,
    /// Position in the event's `candidates` list.
    pub(super) j: usize,
    /// Position in the candidate's `parts` list.
    pub(super) p: usize,
}

/// What applying a chunk needs besides the chunk.
#[derive(Clone, Copy)]
struct Ctx {
    at: At,
    clock: u64,
    max_index: usize,
    /// Call-start and argument deltas (R5: per candidate).
    want_deltas: bool,
    /// `CallEnd` deltas (R5: not with `Deltas::Display`).
    want_ends: bool,
}

/// What one streamed chunk carries, taken out of its part (C3).
pub(super) struct Chunk<'a> {
    id: Option<String>,
    name: Option<String>,
    signature: Option<Value>,
    args: Option<Value>,
    partial_args: Vec<Shaped<PartialArgIn<'a>>>,
    keeps_open: bool,
}

impl State {
    pub(super) fn apply_call_part(
        &mut self,
        at: At,
        pos: usize,
        part: Map<String, Value>,
        deltas: &mut Vec<Delta>,
    ) {
        let Some(Value::Object(fc)) = part.get("functionCall") else {
            return;
        };
        // RULE C3: a streamed chunk, as opposed to a complete call (C1).
        let streamed = match fc.get("partialArgs") {
            None | Some(Value::Null) => false,
            Some(Value::Array(items)) => !items.is_empty(),
            Some(_) => true,
        } || fc.contains_key("willContinue")
            || (!fc.contains_key("name") && !fc.contains_key("args"));
        if streamed {
            if let Some(chunk) = self.take_chunk(at, part) {
                self.apply_streamed_chunk(at, pos, chunk, deltas);
            }
        } else {
            self.apply_complete_call(at, pos, Kept::Tree(part), deltas);
        }
    }

    /// C1, C11: a complete call part is kept as it is; C15 without a name.
    pub(super) fn apply_complete_call(
        &mut self,
        at: At,
        pos: usize,
        part: Kept,
        deltas: &mut Vec<Delta>,
    ) {
        let info = part.call();
        if info.name.is_none() {
            // RULE C15: a call nobody can answer is not replayed.
            self.warn(Diagnostic::NamelessCall {
                event: at.event,
                path: format!("candidates[{}].content.parts[{}]", at.j, at.p),
                call_id: info.id.map(str::to_owned),
                args: info
                    .args
                    .map_or_else(|| Value::Object(Map::new()), Args::to_value),
            });
            return;
        }
        let cand = &mut self.candidates[pos];
        cand.run = None;
        cand.visible = true; // R5
        let slot = cand.slots.len();
        if self.opts.deltas.shows(cand.index) {
            deltas.push(Delta::CallStart {
                candidate: cand.index,
                index: slot,
                id: info.id.map(str::to_owned),
                name: info.name.map(str::to_owned),
            });
        }
        // R5: a `CallEnd` only for a consumer of it; R9: it shares the
        // part's text rather than copying the arguments.
        if self.opts.deltas.all() {
            let call = match &part {
                Kept::Raw { part, .. } => EndedCall::Raw(part.clone()),
                Kept::Tree(_) => EndedCall::Value(info.to_value()),
            };
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
    }

    /// C2-C6, C9: a streamed chunk routed to its call, which it extends or closes.
    pub(super) fn apply_streamed_chunk(
        &mut self,
        at: At,
        pos: usize,
        chunk: Chunk,
        deltas: &mut Vec<Delta>,
    ) {
        self.clock += 1;
        let ctx = Ctx {
            at,
            clock: self.clock,
            max_index: self.opts.max_array_index,
            want_deltas: self.opts.deltas.shows(self.candidates[pos].index),
            want_ends: self.opts.deltas.all(),
        };
        let mut warnings = Vec::new();
        let cand = &mut self.candidates[pos];
        let paths = &mut self.paths;
        let (id, has_name) = (chunk.id.as_deref(), chunk.name.is_some());
        let Some(route) = cand.route(id, has_name, &chunk.partial_args, ctx.max_index, paths)
        else {
            return; // RULE C2.4: an end marker with no open call
        };
        let k = match route {
            Route::Existing(k) => k,
            Route::New => cand.open_call(&chunk, ctx, deltas),
        };
        cand.update_call(k, chunk, ctx, paths, deltas, &mut warnings);
        self.warnings.append(&mut warnings);
    }

    /// The chunk's fields, moved out of the part; E7 when `partialArgs` is not a list.
    fn take_chunk(&mut self, at: At, mut part: Map<String, Value>) -> Option<Chunk<'static>> {
        // RULE P5: the signature stays exactly as received, on its call.
        let signature = part
            .shift_remove("thoughtSignature")
            .filter(|v| !v.is_null());
        let Some(Value::Object(mut fc)) = part.shift_remove("functionCall") else {
            return None;
        };
        let partial_args = fc.shift_remove("partialArgs").map(partial_args_from_value);
        let partial_args = self.partial_args(at, partial_args);
        Some(Chunk {
            id: string_field(&fc, "id"),
            name: string_field(&fc, "name"),
            signature,
            args: fc.shift_remove("args"),
            partial_args,
            keeps_open: matches!(fc.get("willContinue"), Some(Value::Bool(true))),
        })
    }

    /// The chunk of a part kept as text (R7): what the scan read of it,
    /// the signature and `args` made trees from their place in the text.
    pub(super) fn raw_chunk<'a>(
        &mut self,
        at: At,
        json: &str,
        signature: Option<(usize, usize)>,
        call: CallPeek<'a>,
    ) -> Chunk<'a> {
        let tree = |span: Option<(usize, usize)>| {
            span.and_then(|(start, end)| json.get(start..end))
                .map(json_value)
        };
        Chunk {
            id: call.id.map(Cow::into_owned),
            name: call.name.map(Cow::into_owned),
            // RULE P5: the signature stays exactly as received, on its call.
            signature: tree(signature).filter(|v| !v.is_null()),
            args: tree(call.args),
            partial_args: self.partial_args(at, call.partial_args),
            keeps_open: call.keeps_open,
        }
    }

    /// The items of `partialArgs`; E7 when it is not a list.
    fn partial_args<'a>(
        &mut self,
        at: At,
        value: Option<Shaped<Items<PartialArgIn<'a>>>>,
    ) -> Vec<Shaped<PartialArgIn<'a>>> {
        match value {
            None | Some(Shaped::Null) => Vec::new(),
            Some(Shaped::Expected(items)) => items,
            Some(Shaped::Other) => {
                let (j, p) = (at.j, at.p);
                self.warn(shape(
                    at.event,
                    &format!("candidates[{j}].content.parts[{p}].functionCall.partialArgs"),
                    "a list",
                ));
                Vec::new()
            }
        }
    }

    pub(super) fn close_open_calls(&mut self, deltas: &mut Vec<Delta>) {
        let mut warnings = Vec::new();
        for pos in self.in_index_order() {
            let cand = &mut self.candidates[pos];
            let candidate = cand.index;
            cand.open_ids.clear();
            // C12: in slot order, which is the order of `calls`.
            let mut open: Vec<usize> = std::mem::take(&mut cand.recent).into_values().collect();
            open.sort_unstable();
            for k in open {
                // RULE C13: the model never finished it: no `CallEnd` (D5).
                close_call(candidate, &mut cand.calls[k], false, deltas, &mut warnings);
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
    /// A new streamed call for `chunk` (C3). Returns its index in `calls`.
    /// RULE C14: however many calls are open, none is closed for room.
    fn open_call(&mut self, chunk: &Chunk, ctx: Ctx, deltas: &mut Vec<Delta>) -> usize {
        let candidate = self.index;
        self.run = None;
        self.visible = true; // R5: a call start is visible output
        let slot = self.slots.len();
        let k = self.calls.len();
        self.recent.insert(ctx.clock, k);
        if let Some(id) = &chunk.id {
            self.open_ids.insert(id.clone(), k);
        }
        self.slots.push(Slot::Streamed(k));
        self.calls.push(StreamedCall {
            id: chunk.id.clone(),
            name: chunk.name.clone(),
            args: Map::new(),
            signature: None,
            finished: false,
            touched: ctx.clock,
            slot,
        });
        if ctx.want_deltas {
            deltas.push(Delta::CallStart {
                candidate,
                index: slot,
                id: chunk.id.clone(),
                name: chunk.name.clone(),
            });
        }
        k
    }

    /// Applies `chunk` to call `k`: the first name and signature are kept
    /// (C2, C6), args merged and partial args applied (C4, C5, C9); without
    /// `willContinue` the call is closed.
    fn update_call(
        &mut self,
        k: usize,
        chunk: Chunk,
        ctx: Ctx,
        paths: &mut PathCache,
        deltas: &mut Vec<Delta>,
        warnings: &mut Vec<Diagnostic>,
    ) {
        let candidate = self.index;
        let call = &mut self.calls[k];
        if call.touched != ctx.clock {
            // C17: the call moves to the most recent end of the recency index.
            self.recent.remove(&call.touched);
            self.recent.insert(ctx.clock, k);
            call.touched = ctx.clock;
        }
        let slot = call.slot;
        if let Some(name) = chunk.name {
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
        if let Some(sig) = chunk.signature {
            match &call.signature {
                None => call.signature = Some(sig),
                Some(old) if *old != sig => warnings.push(Diagnostic::SignatureChanged {
                    candidate,
                    part: slot,
                }),
                Some(_) => {}
            }
        }
        if let Some(Value::Object(args)) = chunk.args {
            for (key, value) in args {
                call.args.insert(key, value);
            }
        }
        for (m, arg) in chunk.partial_args.into_iter().enumerate() {
            let Shaped::Expected(arg) = arg else {
                let (j, p) = (ctx.at.j, ctx.at.p);
                warnings.push(shape(
                    ctx.at.event,
                    &format!("candidates[{j}].content.parts[{p}].functionCall.partialArgs[{m}]"),
                    "an object",
                ));
                continue;
            };
            match apply_partial_arg(&mut call.args, &arg, ctx.max_index, paths, ctx.want_deltas) {
                Ok(None) => {}
                Ok(Some((json_path, value))) => {
                    if ctx.want_deltas {
                        deltas.push(Delta::Arg {
                            candidate,
                            index: slot,
                            json_path,
                            value,
                        });
                    }
                }
                Err(reason) => {
                    warnings.push(skipped_arg(candidate, slot, arg.json_path.as_ref(), reason));
                }
            }
        }
        if !chunk.keeps_open {
            call.finished = true; // C13: closed by the model
            self.recent.remove(&call.touched);
            if let Some(id) = &call.id {
                self.open_ids.remove(id);
            }
            close_call(candidate, call, ctx.want_ends, deltas, warnings);
        }
    }

    /// C2 routing; None when the chunk is to be ignored (C2.4).
    pub(super) fn route(
        &self,
        id: Option<&str>,
        has_name: bool,
        partial_args: &[Shaped<PartialArgIn<'_>>],
        max_index: usize,
        cache: &mut PathCache,
    ) -> Option<Route> {
        // RULE C17: open calls by id through a map, by recency through an
        // ordered index; the path search looks at the most recent few.
        if let Some(id) = id {
            let found = self.open_ids.get(id).copied();
            return Some(found.map_or(Route::New, Route::Existing));
        }
        if has_name {
            return Some(Route::New);
        }
        let most_recent = self.recent.values().next_back().copied();
        if partial_args.is_empty() {
            return most_recent.map(Route::Existing);
        }
        let paths: Vec<Arc<[Segment]>> = partial_args
            .iter()
            .filter_map(|arg| match arg {
                Shaped::Expected(PartialArgIn {
                    json_path: Some(Shaped::Expected(path)),
                    ..
                }) => Some(path.as_ref()),
                _ => None,
            })
            .filter_map(|path| cache.parse(path, max_index).ok())
            .collect();
        let holding = if paths.is_empty() {
            None
        } else {
            self.recent
                .values()
                .rev()
                .take(PATH_SEARCH)
                .copied()
                .find(|&k| {
                    let args = &self.calls[k].args;
                    paths.iter().any(|p| json_path::holds_value(args, p))
                })
        };
        Some(holding.or(most_recent).map_or(Route::New, Route::Existing))
    }
}

pub(super) fn close_call(
    candidate: u32,
    call: &mut StreamedCall,
    want_ends: bool,
    deltas: &mut Vec<Delta>,
    warnings: &mut Vec<Diagnostic>,
) {
    if call.name.is_some() {
        if want_ends {
            deltas.push(Delta::CallEnd {
                candidate,
                index: call.slot,
                call: EndedCall::Value(call.call_value()),
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

pub(super) fn string_field(map: &Map<String, Value>, key: &str) -> Option<String> {
    match map.get(key) {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    }
}

/// C4/C9: applies one partial arg; `Ok(None)` when it has no value key or
/// no delta is wanted (the fragment is then not copied for one).
pub(super) fn apply_partial_arg(
    args: &mut Map<String, Value>,
    arg: &PartialArgIn<'_>,
    max_index: usize,
    paths: &mut PathCache,
    want_delta: bool,
) -> Result<Option<(String, Value)>, String> {
    // The value keys in this order, whatever order they came in.
    let write = match (&arg.string_value, &arg.number_value, &arg.bool_value) {
        (Some(Shaped::Expected(s)), _, _) => Write::AppendString(s),
        (Some(_), _, _) => return Err("stringValue is not a string".into()),
        (None, Some(Shaped::Expected(n)), _) => Write::Replace(Value::Number(n.clone())),
        (None, Some(_), _) => return Err("numberValue is not a number".into()),
        (None, None, Some(Shaped::Expected(b))) => Write::Replace(Value::Bool(*b)),
        (None, None, Some(_)) => return Err("boolValue is not a boolean".into()),
        (None, None, None) if arg.null_value => Write::Replace(Value::Null),
        (None, None, None) => return Ok(None),
    };
    let Some(Shaped::Expected(path)) = &arg.json_path else {
        return Err("unsupported jsonPath syntax".into());
    };
    let segments = paths.parse(path, max_index).map_err(|e| match e {
        PathError::Syntax => "unsupported jsonPath syntax".to_owned(),
        PathError::IndexAboveMax => format!("array index above max_array_index ({max_index})"),
        PathError::TooDeep => format!("jsonPath deeper than {} segments", json_path::MAX_SEGMENTS),
    })?;
    let delta_value = want_delta.then(|| match &write {
        Write::AppendString(s) => Value::String((*s).to_owned()),
        Write::Replace(v) => v.clone(),
    });
    json_path::write(args, &segments, write).map_err(|e| match e {
        WriteError::TypeConflict => "type conflict with the existing value".to_owned(),
        // C16: the reason names its rule, the warning keeps the C5 form.
        WriteError::TooFar { index, len } => format!(
            "array index {index} is more than {} past the end of an array of {len} (C16)",
            json_path::PAD_SLACK
        ),
    })?;
    Ok(delta_value.map(|value| (path.as_ref().to_owned(), value)))
}

/// RULE C5: the diagnostic of a skipped partial arg, by what its jsonPath is.
fn skipped_arg(
    candidate: u32,
    part: usize,
    path: Option<&Shaped<Cow<'_, str>>>,
    reason: String,
) -> Diagnostic {
    match path {
        Some(Shaped::Expected(s)) => Diagnostic::PartialArgSkipped {
            candidate,
            part,
            json_path: s.clone().into_owned(),
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
