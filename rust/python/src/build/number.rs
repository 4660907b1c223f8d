//! JSON numbers as Python reads them (orjson, and the twin through it).

use pyo3::prelude::*;
use pyo3::types::PyFloat;
use pyo3::IntoPyObjectExt;

use super::{invalid_at, Builder};

impl<'py> Builder<'_, 'py> {
    /// The number at `pos` (RFC 8259's grammar, checked here: Rust's float
    /// parser alone would take `1.` and `.5`).
    pub(super) fn number(&mut self) -> PyResult<Bound<'py, PyAny>> {
        let start = self.pos;
        let negative = self.eat(b'-');
        // The integer part, while it fits a u64; None once it does not.
        let mut integer = Some(0u64);
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if self.peek().is_some_and(|b| b.is_ascii_digit()) {
                    return Err(self.error("a number has a leading zero"));
                }
            }
            Some(b'1'..=b'9') => {
                while let Some(digit @ b'0'..=b'9') = self.peek() {
                    integer = integer
                        .and_then(|n| n.checked_mul(10))
                        .and_then(|n| n.checked_add(u64::from(digit - b'0')));
                    self.pos += 1;
                }
            }
            _ => return Err(self.error("expected a digit")),
        }
        let mut float = false;
        if self.eat(b'.') {
            self.digits("expected a digit after `.`")?;
            float = true;
        }
        if self.eat(b'e') || self.eat(b'E') {
            let _sign = self.eat(b'+') || self.eat(b'-');
            self.digits("expected a digit in the exponent")?;
            float = true;
        }
        match integer {
            Some(n) if !float && !negative => n.into_bound_py_any(self.py),
            // R7 (binding): `-0` is the int 0, as orjson and the twin read it
            // (`serde_json` makes it -0.0); below -2**63 it is a float.
            Some(n) if !float && n <= 1 << 63 => {
                0i64.wrapping_sub_unsigned(n).into_bound_py_any(self.py)
            }
            _ => self.float(start),
        }
    }

    fn digits(&mut self, what: &str) -> PyResult<()> {
        if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
            return Err(self.error(what));
        }
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        Ok(())
    }

    /// `text[start..pos]` (a valid JSON number) as the nearest float; one
    /// beyond the float range is an error, as in `serde_json` and orjson.
    fn float(&self, start: usize) -> PyResult<Bound<'py, PyAny>> {
        let value = self
            .text
            .get(start..self.pos)
            .and_then(|number| number.parse::<f64>().ok())
            .filter(|f| f.is_finite())
            .ok_or_else(|| invalid_at(start, "a number beyond the float range"))?;
        Ok(PyFloat::new(self.py, value).into_any())
    }
}
