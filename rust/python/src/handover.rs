//! RULE R13 (binding): the long strings a closed result's core handed over,
//! each turned into its `str` once and put back wherever a value is read.
//! Kept for R4's memory bound (R20: a 32 MiB argument peaked at 70.0 MiB
//! after `.function_calls` without it, 38.0 MiB with it).

use std::sync::{Mutex, PoisonError};

use fastagg_core::aggregate::{Step, TakenString};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;
use serde_json::Value;

use crate::build::handed_over;

/// Strings of at least this many bytes in a streamed call's arguments are
/// handed over at `close()` (where R12 makes them mappings of their own).
pub(crate) const MIN: usize = 1 << 20;

/// When the strings handed over come to this many bytes, `close()` first
/// returns the pages freed during the feed (`alloc::return_freed_pages_now`):
/// about 1-2 MiB whatever the size, and the next stream pays a page fault for
/// every page of the heap it purged, so it pays only where the stream itself
/// cost far more. At 1 MiB it did not: `feed_chunk()` of `giant_arg` (a
/// 1 MiB argument) took 1.4x the time with a collection at every `close()`.
pub(crate) const COLLECT: usize = 8 << 20;

/// One handed-over string: where it was, the core's bytes until its `str`
/// is made, then the `str`.
struct Slot {
    candidate: usize,
    part: usize,
    path: Vec<Step>,
    text: Mutex<Option<String>>,
    built: PyOnceLock<Py<PyString>>,
}

/// The handed-over strings of one result (none for almost every result).
pub(crate) struct Handed {
    slots: Vec<Slot>,
}

impl Handed {
    pub(crate) fn new(taken: Vec<TakenString>) -> Self {
        let slots = taken
            .into_iter()
            .map(|t| Slot {
                candidate: t.candidate,
                part: t.part,
                path: t.path,
                text: Mutex::new(Some(t.text)),
                built: PyOnceLock::new(),
            })
            .collect();
        Self { slots }
    }

    fn str_of<'py>(py: Python<'py>, slot: &Slot) -> PyResult<Bound<'py, PyString>> {
        let built = slot.built.get_or_try_init(py, || {
            // The lock is only ever held here, under the GIL. The text is
            // consumed only once its `str` exists (a failed read leaves it
            // for the next one).
            let mut guard = slot.text.lock().unwrap_or_else(PoisonError::into_inner);
            handed_over(py, guard.get_or_insert_with(String::new)).map(Bound::unbind)
        })?;
        Ok(built.bind(py).clone())
    }

    /// Puts this part's strings into `value`, the part just built.
    pub(crate) fn fill_part(
        &self,
        py: Python<'_>,
        candidate: usize,
        part: usize,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        for slot in self
            .slots
            .iter()
            .filter(|s| s.candidate == candidate && s.part == part)
        {
            put(value, &slot.path, Self::str_of(py, slot)?.into_any())?;
        }
        Ok(())
    }

    /// Puts every string into `response`, a `to_dict()` value.
    pub(crate) fn fill_response(
        &self,
        py: Python<'_>,
        response: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        for slot in &self.slots {
            let part = response
                .get_item("candidates")?
                .get_item(slot.candidate)?
                .get_item("content")?
                .get_item("parts")?
                .get_item(slot.part)?;
            put(&part, &slot.path, Self::str_of(py, slot)?.into_any())?;
        }
        Ok(())
    }

    /// Puts every string into `response`, the core's `to_value()` (for
    /// `to_json()`): the `str` encoded again, for as long as it is written.
    pub(crate) fn fill_value(&self, py: Python<'_>, response: &mut Value) -> PyResult<()> {
        for slot in &self.slots {
            let text = Self::str_of(py, slot)?.encode_utf8()?;
            let text = String::from_utf8_lossy(text.as_bytes()).into_owned();
            let part = response
                .get_mut("candidates")
                .and_then(|c| c.get_mut(slot.candidate))
                .and_then(|c| c.get_mut("content"))
                .and_then(|c| c.get_mut("parts"))
                .and_then(|p| p.get_mut(slot.part));
            let mut at = part;
            for step in &slot.path {
                at = at.and_then(|v| match step {
                    Step::Key(k) => v.get_mut(k.as_str()),
                    Step::Index(i) => v.get_mut(*i),
                });
            }
            if let Some(target) = at {
                *target = Value::String(text);
            }
        }
        Ok(())
    }
}

/// `value[path[0]]...[path[-1]] = item`.
fn put(value: &Bound<'_, PyAny>, path: &[Step], item: Bound<'_, PyAny>) -> PyResult<()> {
    let Some((last, steps)) = path.split_last() else {
        return Ok(());
    };
    let mut at = value.clone();
    for step in steps {
        at = match step {
            Step::Key(k) => at.get_item(k.as_str())?,
            Step::Index(i) => at.get_item(*i)?,
        };
    }
    match last {
        Step::Key(k) => at.set_item(k.as_str(), item),
        Step::Index(i) => at.set_item(*i, item),
    }
}
