//! Event-level merging (E rules): last non-null wins (E3), usage merged field by
//! field, citations deduplicated (E9), responseId changes (E10), shape warnings (E7).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::q;
use super::render::write_cj;
use crate::diagnostics::Diagnostic;
use crate::event::TextOrValue;

/// Objects with at most this many keys are merged without a hash map.
pub(super) const SMALL_OBJECT: usize = 16;

/// E9: citation lists concatenated without exact duplicates; other keys last non-null.
/// `seen` holds the identities of the entries kept in each list, so that a
/// duplicate is found in O(1) (E9a).
pub(super) fn merge_citations(
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
                let list = if let Some(Value::Array(old)) = kept.get_mut(&key) {
                    old
                } else {
                    known.clear();
                    kept.insert(key.clone(), Value::Array(Vec::new()));
                    match kept.get_mut(&key) {
                        Some(Value::Array(old)) => old,
                        _ => continue,
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

/// E16: the `logprobsResult` of one chunk describes that chunk's decoding
/// steps: the step lists are concatenated, `logProbabilitySum` summed, other
/// keys last non-null. A value that is not an object (or a kept one that is
/// not) replaces the kept one, as E5 does.
pub(super) fn merge_logprobs(meta: &mut Map<String, Value>, incoming: Value) {
    let Value::Object(incoming) = incoming else {
        meta.insert("logprobsResult".into(), incoming);
        return;
    };
    let Some(Value::Object(kept)) = meta.get_mut("logprobsResult") else {
        meta.insert("logprobsResult".into(), Value::Object(incoming));
        return;
    };
    for (key, value) in incoming {
        if value.is_null() {
            continue;
        }
        match (key.as_str(), kept.get_mut(&key), value) {
            ("chosenCandidates" | "topCandidates", Some(Value::Array(old)), Value::Array(new)) => {
                old.extend(new);
            }
            ("logProbabilitySum", Some(Value::Number(old)), Value::Number(new)) => {
                *old = add_numbers(old, &new);
            }
            (_, _, value) => {
                kept.insert(key, value);
            }
        }
    }
}

/// E16: two JSON numbers added: as integers when both are 64-bit signed
/// integers and so is the sum, otherwise as floats.
fn add_numbers(a: &serde_json::Number, b: &serde_json::Number) -> serde_json::Number {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        if let Some(sum) = x.checked_add(y) {
            return sum.into();
        }
    }
    let sum = a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0);
    serde_json::Number::from_f64(sum).unwrap_or_else(|| a.clone())
}

/// E10: the diagnostic for a `responseId` that differs from the one kept, if it does.
pub(super) fn response_id_change(
    event: u64,
    kept: Option<&Value>,
    new: Option<&TextOrValue<'_>>,
) -> Option<Diagnostic> {
    let kept = kept?;
    let changed = match new? {
        TextOrValue::Text(text) => !matches!(kept, Value::String(s) if s == text),
        TextOrValue::Value(value) => !value.is_null() && kept != value.as_ref(),
    };
    changed.then(|| Diagnostic::ResponseIdChanged {
        event,
        kept_id: kept.clone(),
        new_id: match new {
            Some(TextOrValue::Text(text)) => Value::String(text.to_string()),
            Some(TextOrValue::Value(value)) => value.as_ref().clone(),
            None => Value::Null,
        },
    })
}

/// The E9a identity of a JSON value: compact JSON with object keys sorted,
/// so that key order does not matter while `1`, `1.0` and `true` differ.
pub(super) fn write_identity(v: &Value, out: &mut String) {
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
pub(super) fn set_last(field: &mut Option<Value>, value: Option<TextOrValue<'_>>) {
    match value {
        Some(TextOrValue::Text(text)) if !matches!(field, Some(Value::String(kept)) if *kept == text) =>
        {
            *field = Some(Value::String(text.into_owned()));
        }
        Some(TextOrValue::Value(value)) if !value.is_null() => *field = Some(*value),
        _ => {}
    }
}

/// E3 for one object: each key's last value in the object (JSON objects keep
/// the last of duplicate keys) replaces the kept one unless it is null; new
/// keys are added in order of first appearance.
pub(super) fn merge_fields(kept: &mut Map<String, Value>, mut entries: Vec<(Cow<'_, str>, Value)>) {
    if entries.len() > SMALL_OBJECT {
        merge_many(kept, entries);
        return;
    }
    if !has_repeats(&entries) {
        // The usual object (usage: about five keys, each once): each entry
        // moved into place, none dropped.
        for (key, value) in entries {
            if !value.is_null() {
                set_field(kept, key, value);
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
        let key = std::mem::take(&mut entries[i].0);
        set_field(kept, key, value);
    }
}

/// `merge_fields` for an object of many keys, linear in its size: each key's
/// last position found through a map of borrowed keys (no copy of a key, so
/// the temporary map stays small), then each key merged once, at its first
/// appearance; only a key new to `kept` is copied.
fn merge_many(kept: &mut Map<String, Value>, mut entries: Vec<(Cow<'_, str>, Value)>) {
    // The keys move out (no copy of their text) so that the map can borrow
    // them while the values are taken from `entries` in place.
    let keys: Vec<Cow<'_, str>> = entries
        .iter_mut()
        .map(|(key, _)| std::mem::take(key))
        .collect();
    // foldhash's seeded hasher: a few times cheaper than SipHash on short
    // keys, and its per-map random seed keeps crafted keys from colliding.
    let mut last: foldhash::HashMap<&str, usize> = foldhash::HashMap::with_capacity_and_hasher(
        keys.len(),
        foldhash::fast::RandomState::default(),
    );
    for (i, key) in keys.iter().enumerate() {
        last.insert(key, i);
    }
    for key in &keys {
        let Some(at) = last.get_mut(key.as_ref()) else {
            continue;
        };
        if *at == usize::MAX {
            continue; // a duplicate, merged at its first appearance
        }
        let value = std::mem::take(&mut entries[*at].1);
        *at = usize::MAX;
        if value.is_null() {
            continue;
        }
        // An existing key keeps its position; only a new one is copied.
        set_field(kept, Cow::Borrowed(key.as_ref()), value);
    }
}

fn has_repeats(entries: &[(Cow<'_, str>, Value)]) -> bool {
    entries
        .iter()
        .enumerate()
        .any(|(i, (key, _))| entries[..i].iter().any(|(k, _)| k == key))
}

/// `kept[key] = value`, a new key last. A few kept keys (usage has about
/// five) are found faster by comparing than by hashing; a number replacing a
/// number is written in place, with no call to drop either.
fn set_field(kept: &mut Map<String, Value>, key: Cow<'_, str>, value: Value) {
    let slot = if kept.len() <= SMALL_OBJECT {
        kept.iter_mut().find(|(k, _)| **k == key).map(|(_, v)| v)
    } else {
        kept.get_mut(key.as_ref())
    };
    match (slot, value) {
        (Some(Value::Number(number)), Value::Number(new)) => *number = new,
        (Some(slot), value) => *slot = value,
        (None, value) => {
            kept.insert(key.into_owned(), value);
        }
    }
}

pub(super) fn shape(event: u64, place: &str, expected: &str) -> Diagnostic {
    Diagnostic::WrongShape {
        event,
        path: place.to_owned(),
        expected: expected.to_owned(),
    }
}
