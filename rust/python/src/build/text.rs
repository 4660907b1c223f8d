//! The characters of a JSON string: plain runs of the input, escapes decoded.

use pyo3::prelude::*;
use pyo3::types::PyString;

use super::{invalid_at, scan, strings, Builder};

impl<'a, 'py> Builder<'a, 'py> {
    /// The string from `start` whose plain run the scanner ended at `end`
    /// and not at its closing quote: with escapes, or invalid.
    #[inline(never)]
    pub(super) fn escaped(
        &mut self,
        start: usize,
        end: usize,
        ascii: bool,
    ) -> PyResult<Bound<'py, PyString>> {
        self.pos = end;
        if self.peek() != Some(b'\\') {
            return Err(self.unplain());
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(&self.bytes[start..end]);
        if self.decode(ascii)? {
            // SAFETY: only ASCII went into the scratch (`decode` says so).
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

    /// Why a run stopped at `pos` other than at a quote or a backslash.
    #[cold]
    fn unplain(&self) -> PyErr {
        match self.peek() {
            Some(_) => self.error("a control character in a string (escape it)"),
            None => self.error("a string is not closed"),
        }
    }

    /// The rest of a string from the backslash at `pos`, decoded into
    /// `scratch` after what it holds (the plain run before it); whether all
    /// of it is ASCII (`ascii`: so far).
    fn decode(&mut self, mut ascii: bool) -> PyResult<bool> {
        loop {
            self.pos += 1;
            match self.peek() {
                Some(b'u') => {
                    self.pos += 1;
                    let c = self.unicode_escape()?;
                    ascii &= c.is_ascii();
                    self.scratch
                        .extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
                Some(escape) => {
                    let byte = simple_escape(escape)
                        .ok_or_else(|| self.error("an invalid escape in a string"))?;
                    self.scratch.push(byte);
                    self.pos += 1;
                }
                None => return Err(self.error("a string is not closed")),
            }
            ascii &= self.copy_run();
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(ascii);
                }
                Some(b'\\') => {}
                _ => return Err(self.unplain()),
            }
        }
    }

    /// The plain run from `pos` onto `scratch`, `pos` moved to the byte that
    /// ends it; whether it is ASCII. Each block is appended whole and cut
    /// back to its run: a fixed-size copy, where the run's own length made a
    /// call to `memcpy` per escape (escapes come every few bytes in code).
    fn copy_run(&mut self) -> bool {
        let mut ascii = true;
        loop {
            let block = scan::block_at(self.bytes, self.pos);
            let (n, plain) = scan::first_stop(&block);
            ascii &= plain;
            let kept = self.scratch.len() + n;
            self.scratch.extend_from_slice(&block);
            self.scratch.truncate(kept);
            self.pos += n;
            if n < scan::BLOCK {
                return ascii;
            }
        }
    }

    /// The character of `\uXXXX` (its `u` just read), with the low half of a
    /// surrogate pair; a lone surrogate is an error, as in `serde_json` and orjson.
    fn unicode_escape(&mut self) -> PyResult<char> {
        let high = self.hex4()?;
        let code = match high {
            0xD800..=0xDBFF => {
                if !self.bytes[self.pos..].starts_with(b"\\u") {
                    return Err(self.error("a lone leading surrogate in a \\u escape"));
                }
                self.pos += 2;
                let low = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&low) {
                    return Err(invalid_at(
                        self.pos - 4,
                        "a lone leading surrogate in a \\u escape",
                    ));
                }
                0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
            }
            0xDC00..=0xDFFF => {
                return Err(invalid_at(
                    self.pos - 4,
                    "a lone trailing surrogate in a \\u escape",
                ))
            }
            _ => high,
        };
        char::from_u32(code).ok_or_else(|| self.error("an invalid \\u escape"))
    }

    fn hex4(&mut self) -> PyResult<u32> {
        let mut code = 0;
        for _ in 0..4 {
            let digit = self
                .peek()
                .and_then(|b| char::from(b).to_digit(16))
                .ok_or_else(|| self.error("expected 4 hex digits in a \\u escape"))?;
            code = code * 16 + digit;
            self.pos += 1;
        }
        Ok(code)
    }
}

/// The byte of a one-letter escape (all are ASCII).
fn simple_escape(escape: u8) -> Option<u8> {
    fastagg_core::scan::short_escape(escape).and_then(|c| u8::try_from(c).ok())
}
