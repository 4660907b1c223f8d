//! The characters of a JSON string: plain runs of the input, escapes decoded.

use pyo3::prelude::*;
use pyo3::types::PyString;

use fastagg_core::scan::decode;

use super::{invalid_at, strings, Builder};

impl<'a, 'py> Builder<'a, 'py> {
    /// The string from `start` whose plain run the scanner ended at `end`
    /// and not at its closing quote: with escapes (decoded by the core's
    /// decoder, `scan::decode`, the payload scan's own), or invalid.
    #[inline(never)]
    pub(super) fn escaped(
        &mut self,
        start: usize,
        end: usize,
        ascii: bool,
    ) -> PyResult<Bound<'py, PyString>> {
        self.scratch.clear();
        self.scratch.extend_from_slice(&self.bytes[start..end]);
        let decoded = decode::rest_and_width(self.bytes, end, &mut self.scratch, ascii)
            .map_err(|bad| invalid_at(bad.at, bad.what.what()))?;
        self.pos = decoded.end;
        if decoded.ascii {
            // SAFETY: only ASCII went into the scratch (the decoder says so).
            unsafe { strings::ascii(self.py, &self.scratch) }
        } else {
            strings::utf8_bytes(self.py, &self.scratch)
        }
    }

    /// The input between two stops of the scanner (ASCII bytes, so the
    /// bounds are character boundaries).
    pub(super) fn plain(&self, start: usize, end: usize) -> PyResult<&'a str> {
        self.text
            .get(start..end)
            .ok_or_else(|| invalid_at(start, "a string is not UTF-8"))
    }
}
