//! JSON text -> Python objects in one pass, with no tree in between (R7 (binding)).
//!
//! The core keeps a complete part as its JSON text, validated already; this
//! builds the part's dict straight from that text. Invalid text is still an
//! error here (a `ValueError` naming the byte), never a panic.

mod number;
mod shared;
mod strings;
mod text;
mod widen;

pub(crate) use strings::{handed_over, new_str};

use std::sync::MutexGuard;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString};

use crate::convert::{STACK_GROWTH, STACK_RED_ZONE};
// The string-run search the core's payload scan uses too.
use fastagg_core::scan::run as scan;
use shared::Shared;

/// orjson's limit (F10): a deeper value is an error, as it is there.
const MAX_DEPTH: usize = 1024;

/// R7 (binding): the Python value of the JSON text `json`, as `orjson.loads`
/// gives it: dicts in first-arrival key order (a repeated key keeps its first
/// place and its last value), `int` for integers in `-2**63..2**64-1` (`-0`
/// is `0`), `float` for other numbers (correctly rounded; beyond the float
/// range is an error), `str` with every escape decoded (a lone surrogate
/// escape is an error), at most 1024 levels of nesting.
pub(crate) fn json_to_py<'py>(py: Python<'py>, json: &str) -> PyResult<Bound<'py, PyAny>> {
    let mut shared = shared::lock();
    let (items, scratch) = shared.as_mut().map(|s| s.lend()).unwrap_or_default();
    let mut builder = Builder {
        py,
        text: json,
        bytes: json.as_bytes(),
        pos: 0,
        depth: 0,
        items,
        scratch,
        shared,
    };
    let value = builder.value()?;
    builder.skip_whitespace();
    if builder.pos < builder.bytes.len() {
        return Err(builder.error("unexpected text after the value"));
    }
    Ok(value)
}

fn invalid_at(pos: usize, what: &str) -> PyErr {
    PyValueError::new_err(format!("invalid JSON at byte {pos}: {what}"))
}

struct Builder<'a, 'py> {
    py: Python<'py>,
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
    /// The items of the lists being read, innermost last: each list is made
    /// once at its `]`, at its final size.
    items: Vec<Py<PyAny>>,
    /// The decoded characters (UTF-8) of the string with escapes being read.
    scratch: Vec<u8>,
    /// None when another build holds it.
    shared: Option<MutexGuard<'static, Shared>>,
}

impl Drop for Builder<'_, '_> {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.as_mut() {
            shared.keep(
                std::mem::take(&mut self.items),
                std::mem::take(&mut self.scratch),
            );
        }
    }
}

impl<'py> Builder<'_, 'py> {
    fn error(&self, what: &str) -> PyErr {
        invalid_at(self.pos, what)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let hit = self.peek() == Some(byte);
        self.pos += usize::from(hit);
        hit
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    fn value(&mut self) -> PyResult<Bound<'py, PyAny>> {
        self.skip_whitespace();
        let py = self.py;
        match self.peek() {
            Some(b'{') => self.nested(Self::object),
            Some(b'[') => self.nested(Self::array),
            Some(b'"') => {
                self.pos += 1;
                Ok(self.string()?.into_any())
            }
            Some(b't') => self.literal("true", || PyBool::new(py, true).to_owned().into_any()),
            Some(b'f') => self.literal("false", || PyBool::new(py, false).to_owned().into_any()),
            Some(b'n') => self.literal("null", || py.None().into_bound(py)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.error("expected a value")),
            None => Err(self.error("expected a value, found the end of the text")),
        }
    }

    fn literal(
        &mut self,
        word: &str,
        make: impl FnOnce() -> Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if !self.bytes[self.pos..].starts_with(word.as_bytes()) {
            return Err(self.error(&format!("expected `{word}`")));
        }
        self.pos += word.len();
        Ok(make())
    }

    /// A container (its opening bracket at `pos`), with the stack grown first
    /// where little is left (D6: a thread with a small stack reads 1024 levels).
    fn nested(
        &mut self,
        read: fn(&mut Self) -> PyResult<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if self.depth == MAX_DEPTH {
            return Err(self.error("nested deeper than 1024 levels"));
        }
        self.depth += 1;
        self.pos += 1;
        let value = stacker::maybe_grow(STACK_RED_ZONE, STACK_GROWTH, || read(self));
        self.depth -= 1;
        value
    }

    /// After an item of a container: `,` (another item follows) or `close`.
    /// Inlined into its two callers: left to itself, LLVM's choice flipped
    /// with unrelated changes elsewhere in the crate (an out-of-line call
    /// here cost 2 % of `tool_parallel`'s instructions).
    #[allow(clippy::inline_always)] // measured, see above
    #[inline(always)]
    fn after_item(&mut self, close: u8, what: &str) -> PyResult<bool> {
        self.skip_whitespace();
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(byte) if byte == close => {
                self.pos += 1;
                Ok(false)
            }
            _ => Err(self.error(what)),
        }
    }

    fn object(&mut self) -> PyResult<Bound<'py, PyAny>> {
        let dict = PyDict::new(self.py);
        self.skip_whitespace();
        if self.eat(b'}') {
            return Ok(dict.into_any());
        }
        loop {
            self.skip_whitespace();
            if !self.eat(b'"') {
                return Err(self.error("expected a key (a string)"));
            }
            let key = self.string()?;
            self.skip_whitespace();
            if !self.eat(b':') {
                return Err(self.error("expected `:` after a key"));
            }
            let value = self.value()?;
            // PyDict_SetItem keeps a repeated key's first place with its last value.
            // Called directly: PyO3's `set_item` (its conversions and owned
            // arguments) cost 592 instructions an event of `tool_parallel`
            // (0.8 %, callgrind).
            // SAFETY: the three are live objects (the dict a dict); the call takes
            // its own references to key and value, or fails with an exception set.
            if unsafe { pyo3::ffi::PyDict_SetItem(dict.as_ptr(), key.as_ptr(), value.as_ptr()) }
                != 0
            {
                return Err(PyErr::fetch(self.py));
            }
            if !self.after_item(b'}', "expected `,` or `}` after an object member")? {
                return Ok(dict.into_any());
            }
        }
    }

    fn array(&mut self) -> PyResult<Bound<'py, PyAny>> {
        self.skip_whitespace();
        if self.eat(b']') {
            return Ok(PyList::empty(self.py).into_any());
        }
        let first = self.items.len();
        loop {
            let item = self.value()?;
            self.items.push(item.unbind());
            if !self.after_item(b']', "expected `,` or `]` after an array item")? {
                break;
            }
        }
        Ok(PyList::new(self.py, self.items.drain(first..))?.into_any())
    }

    /// The string (a key or a value) whose opening quote was just read; a
    /// short ASCII one comes from the string cache. The hot path of every
    /// build: the plain case is handled here, with the scanner's result in
    /// registers (returned through memory, a small result type cost a stalled
    /// reload in every caller, a tenth of a part's build, measured), escapes
    /// in text.rs.
    #[inline]
    fn string(&mut self) -> PyResult<Bound<'py, PyString>> {
        let start = self.pos;
        let (end, ascii) = scan::plain_run(self.bytes, start);
        if self.bytes.get(end) != Some(&b'"') {
            return self.escaped(start, end, ascii);
        }
        self.pos = end + 1;
        if let (true, Some(shared)) = (ascii, &mut self.shared) {
            // SAFETY: the scanner saw only ASCII bytes in the run.
            return unsafe { shared.strings.ascii_short(self.py, self.bytes, start, end) };
        }
        self.plain_str(start, end, ascii)
    }

    /// The string of `bytes[start..end]`, a run without escapes.
    fn plain_str(&self, start: usize, end: usize, ascii: bool) -> PyResult<Bound<'py, PyString>> {
        if ascii {
            // SAFETY: the scanner saw only ASCII bytes in the run.
            unsafe { strings::ascii(self.py, &self.bytes[start..end]) }
        } else {
            strings::utf8(self.py, self.plain(start, end)?)
        }
    }
}
