//! A strict single-pass JSON scanner (R8, F10): the event parser walks the
//! levels it keeps (event, candidate, content, part) with it and skips the
//! rest without building anything.
//!
//! The payload's UTF-8 is checked once, before scanning (F10's order), so
//! every string slice is borrowed from it. The grammar is RFC 8259 exactly as
//! orjson applies it: no trailing commas, no leading zeros, no control
//! characters or lone surrogates in strings, numbers that overflow a double
//! refused, at most `MAX_JSON_DEPTH` levels of nesting. Skipping and
//! building are loops with their own stack, never recursion, so no payload
//! can exhaust the thread's stack.

use std::borrow::Cow;

use serde_json::{Map, Number, Value};

use crate::event::MAX_JSON_DEPTH;

pub mod decode;
pub mod run;

/// The payload is not valid JSON (where exactly does not matter: F8 skips it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invalid;

pub type Scan<T> = Result<T, Invalid>;

pub struct Scanner<'a> {
    text: &'a str,
    pos: usize,
    depth: usize,
    /// Open containers of `skip_value` (true for an object), reused.
    open: Vec<bool>,
}

/// A container being built by `value`.
enum Frame {
    Object(Map<String, Value>, String),
    Array(Vec<Value>),
}

impl<'a> Scanner<'a> {
    #[must_use]
    pub fn new(text: &'a str) -> Self {
        Self {
            text,
            pos: 0,
            depth: 0,
            open: Vec::new(),
        }
    }

    #[must_use]
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The text between `start` and the current position.
    #[must_use]
    pub fn since(&self, start: usize) -> &'a str {
        self.text.get(start..self.pos).unwrap_or_default()
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// The next byte after whitespace, not consumed.
    pub fn peek(&mut self) -> Option<u8> {
        let bytes = self.bytes();
        while let Some(&b) = bytes.get(self.pos) {
            if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                return Some(b);
            }
            self.pos += 1;
        }
        None
    }

    /// Only whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }

    fn eat(&mut self, byte: u8) -> Scan<()> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(Invalid)
        }
    }

    fn enter(&mut self) -> Scan<()> {
        self.depth += 1;
        if self.depth > MAX_JSON_DEPTH {
            return Err(Invalid); // F10: orjson's limit
        }
        Ok(())
    }

    /// Consumes `open` and enters the container; true (and left again) when
    /// `close` follows at once.
    fn opens(&mut self, open: u8, close: u8) -> Scan<bool> {
        self.eat(open)?;
        self.enter()?;
        if self.peek() == Some(close) {
            self.pos += 1;
            self.depth -= 1;
            return Ok(true);
        }
        Ok(false)
    }

    /// Consumes `{`; entries follow through `next_key`.
    pub fn begin_object(&mut self) -> Scan<()> {
        self.eat(b'{')?;
        self.enter()
    }

    /// The next key of an object (its `:` consumed), or None at its `}`.
    /// `first` is true before the first entry.
    pub fn next_key(&mut self, first: &mut bool) -> Scan<Option<Cow<'a, str>>> {
        match self.peek() {
            Some(b'}') => {
                self.pos += 1;
                self.depth -= 1;
                return Ok(None);
            }
            Some(b',') if !*first => self.pos += 1,
            Some(b'"') if *first => {}
            _ => return Err(Invalid),
        }
        *first = false;
        self.key().map(Some)
    }

    fn key(&mut self) -> Scan<Cow<'a, str>> {
        if self.peek() != Some(b'"') {
            return Err(Invalid);
        }
        if let Some(key) = self.plain_key() {
            return Ok(Cow::Borrowed(key));
        }
        let key = self.string()?;
        self.eat(b':')?;
        Ok(key)
    }

    /// The usual key (at its `"`): at most 32 bytes with no escape, `:`
    /// right after its closing quote. Read from one or two 16-byte loads
    /// with one bounds check each, and no copy; None (nothing consumed)
    /// for any other, which `string` then reads. Every event has a dozen
    /// keys, and the general path (the block copied, the slice's character
    /// boundaries checked, `:` found after whitespace) was a sixth of `text`.
    #[inline]
    fn plain_key(&mut self) -> Option<&'a str> {
        let start = self.pos + 1;
        let bytes = self.bytes();
        let first: &[u8; run::BLOCK] = bytes.get(start..start + run::BLOCK)?.try_into().ok()?;
        let (mut n, _) = run::first_stop(first);
        if n == run::BLOCK {
            let second: &[u8; run::BLOCK] = bytes
                .get(start + run::BLOCK..start + 2 * run::BLOCK)?
                .try_into()
                .ok()?;
            n += run::first_stop(second).0;
        }
        let end = start + n;
        if bytes.get(end..end + 2) != Some(b"\":") {
            return None;
        }
        self.pos = end + 2;
        // SAFETY: `text` is a `str`, and `start` and `end` follow and lead
        // an ASCII quote, so both are character boundaries within it.
        Some(unsafe { self.text.get_unchecked(start..end) })
    }

    /// Consumes `[`; items follow through `next_item`.
    pub fn begin_array(&mut self) -> Scan<()> {
        self.eat(b'[')?;
        self.enter()
    }

    /// True when another item follows (positioned at it), false at `]`.
    pub fn next_item(&mut self, first: &mut bool) -> Scan<bool> {
        match self.peek() {
            Some(b']') => {
                self.pos += 1;
                self.depth -= 1;
                Ok(false)
            }
            Some(b',') if !*first => {
                self.pos += 1;
                Ok(true)
            }
            Some(_) if *first => {
                *first = false;
                Ok(true)
            }
            _ => Err(Invalid),
        }
    }

    /// A string value (at its `"`), borrowed unless it has escapes. The
    /// plain case (every key, nearly every value) is inlined into its
    /// callers; escapes go to `escaped`, out of line, whose set-up (the
    /// buffer, the decoding loop) the plain case then does not pay.
    #[inline]
    pub fn string(&mut self) -> Scan<Cow<'a, str>> {
        let start = self.pos + 1; // after the opening quote
        let (end, _) = run::plain_run(self.bytes(), start);
        if self.bytes().get(end) == Some(&b'"') {
            self.pos = end + 1;
            return self.text.get(start..end).map(Cow::Borrowed).ok_or(Invalid);
        }
        self.escaped(start, end)
    }

    /// The string from `start` whose plain run ended at `end`, not at its
    /// closing quote: decoded, or invalid.
    #[inline(never)]
    fn escaped(&mut self, start: usize, end: usize) -> Scan<Cow<'a, str>> {
        // Room for the rest of a short string at once (the decoded text is
        // never longer than the payload left): a text delta with a newline
        // early in it otherwise grew this buffer once more, a realloc and a
        // copy (measured: 1 in 2 events of `text`).
        let left = self.text.len().saturating_sub(start);
        let mut out = Vec::with_capacity(left.min(end - start + ESCAPED_ROOM) + 2 * run::BLOCK);
        out.extend_from_slice(self.bytes().get(start..end).ok_or(Invalid)?);
        self.pos = end;
        self.decode_rest(&mut out)?;
        // RULE R8: not checked again (the check was 7 % of `giant_arg`'s
        // instructions, and half of what `simdutf8` cost on `text`); the
        // tests check it on every string they decode.
        debug_assert!(std::str::from_utf8(&out).is_ok());
        // SAFETY: `out` is valid UTF-8 by construction. The scanned text is a
        // `str`, and `out` holds pieces of it and whole characters: the run
        // `start..end`, then per escape the UTF-8 of the character it stands
        // for, then the plain run after it. A run starts after a quote or an
        // escape and ends at a stop byte (`"`, `\` or a control character),
        // all ASCII, so at character boundaries; a run longer than a block
        // is copied a block at a time, but its blocks are contiguous, so
        // only its ends are cut, and a block's bytes past the run are cut
        // off (`truncate`) before anything follows them.
        Ok(Cow::Owned(unsafe { String::from_utf8_unchecked(out) }))
    }

    /// Skips a string value (at its `"`), validating it as `string` does.
    #[inline]
    fn skip_string(&mut self) -> Scan<()> {
        let (end, _) = run::plain_run(self.bytes(), self.pos + 1);
        self.pos = end;
        if self.bytes().get(end) == Some(&b'"') {
            self.pos += 1;
            return Ok(());
        }
        self.skip_rest()
    }

    /// The rest of a string from the `"` or `\` where its plain run stopped,
    /// decoded onto `out` (`decode::rest`).
    fn decode_rest(&mut self, out: &mut Vec<u8>) -> Scan<()> {
        self.pos = decode::rest(self.bytes(), self.pos, out).map_err(|_| Invalid)?;
        Ok(())
    }

    /// The rest of a string from the `"` or `\` where its plain run stopped,
    /// skipped and validated (`decode::skip`).
    fn skip_rest(&mut self) -> Scan<()> {
        self.pos = decode::skip(self.bytes(), self.pos).map_err(|_| Invalid)?;
        Ok(())
    }

    /// `true`, `false` or `null` at the current position.
    fn literal(&mut self) -> Scan<Value> {
        let rest = self.bytes().get(self.pos..).unwrap_or_default();
        let (value, len) = if rest.starts_with(b"true") {
            (Value::Bool(true), 4)
        } else if rest.starts_with(b"false") {
            (Value::Bool(false), 5)
        } else if rest.starts_with(b"null") {
            (Value::Null, 4)
        } else {
            return Err(Invalid);
        };
        self.pos += len;
        Ok(value)
    }

    /// The text of a number, whether it is an integer (no `.`, `e`, `E`)
    /// and whether it has an exponent.
    fn number_text(&mut self) -> Scan<(&'a str, bool, bool)> {
        let bytes = self.bytes();
        let start = self.pos;
        let mut i = start;
        if bytes.get(i) == Some(&b'-') {
            i += 1;
        }
        match bytes.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i += digits(&bytes[i..]),
            _ => return Err(Invalid),
        }
        let mut integer = true;
        if bytes.get(i) == Some(&b'.') {
            let n = digits(bytes.get(i + 1..).unwrap_or_default());
            if n == 0 {
                return Err(Invalid);
            }
            i += 1 + n;
            integer = false;
        }
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(bytes.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let n = digits(bytes.get(i..).unwrap_or_default());
            if n == 0 {
                return Err(Invalid);
            }
            i += n;
            self.pos = i;
            return Ok((&self.text[start..i], false, true));
        }
        self.pos = i;
        Ok((&self.text[start..i], integer, false))
    }

    /// A number as orjson reads it: an integer that fits 64 bits stays one
    /// (`-0` is 0), anything else is the nearest double, which must be finite.
    pub fn number(&mut self) -> Scan<Number> {
        if let Some(n) = self.short_integer() {
            return Ok(n);
        }
        let (text, integer, _) = self.number_text()?;
        if integer {
            if let Ok(u) = text.parse::<u64>() {
                return Ok(Number::from(u));
            }
            if let Ok(i) = text.parse::<i64>() {
                return Ok(Number::from(i));
            }
        }
        let f: f64 = text.parse().map_err(|_| Invalid)?;
        Number::from_f64(f).ok_or(Invalid)
    }

    /// An integer of 1 to 18 digits (so it fits either sign), its first
    /// eight digits read at once ([`leading_digits`]) and any more summed
    /// one by one; None (nothing consumed) for any other number, which
    /// `number_text` then reads.
    fn short_integer(&mut self) -> Option<Number> {
        let bytes = self.bytes();
        let negative = bytes.get(self.pos) == Some(&b'-');
        let first = self.pos + usize::from(negative);
        let (mut n, mut i) = match bytes.get(first..first + 8) {
            Some(word) => {
                let (len, value) = leading_digits(word);
                (value, first + len)
            }
            None => (0, first),
        };
        if i - first == 8 || bytes.len() < first + 8 {
            while let Some(&d) = bytes.get(i).filter(|d| d.is_ascii_digit()) {
                n = n.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
                i += 1;
            }
        }
        let len = i - first;
        let leading_zero = len > 1 && bytes.get(first) == Some(&b'0');
        if len == 0 || len > 18 || leading_zero || matches!(bytes.get(i), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        self.pos = i;
        Some(if negative {
            Number::from(-i64::try_from(n).ok()?)
        } else {
            Number::from(n)
        })
    }

    fn skip_number(&mut self) -> Scan<()> {
        let (text, _, exponent) = self.number_text()?;
        // Only an exponent or more than 300 digits can overflow a double
        // (whose largest value is below 2 x 10^308).
        if exponent || text.len() > 300 {
            let f: f64 = text.parse().map_err(|_| Invalid)?;
            if !f.is_finite() {
                return Err(Invalid);
            }
        }
        Ok(())
    }

    /// Skips one value of any kind, validating it.
    pub fn skip_value(&mut self) -> Scan<()> {
        let base = self.open.len();
        loop {
            // A value starts here.
            match self.peek() {
                Some(b'{') => {
                    if !self.opens(b'{', b'}')? {
                        self.key()?;
                        self.open.push(true);
                        continue;
                    }
                }
                Some(b'[') => {
                    if !self.opens(b'[', b']')? {
                        self.open.push(false);
                        continue;
                    }
                }
                Some(b'"') => self.skip_string()?,
                Some(b'-' | b'0'..=b'9') => self.skip_number()?,
                _ => {
                    self.literal()?;
                }
            }
            // A value ended: close what ends with it, up to the next value.
            loop {
                let Some(&object) = self.open.get(base..).and_then(<[bool]>::last) else {
                    return Ok(());
                };
                match (self.peek(), object) {
                    (Some(b','), _) => {
                        self.pos += 1;
                        if object {
                            self.key()?;
                        }
                        break;
                    }
                    (Some(b'}'), true) | (Some(b']'), false) => {
                        self.pos += 1;
                        self.depth -= 1;
                        self.open.pop();
                    }
                    _ => return Err(Invalid),
                }
            }
        }
    }

    /// Reads one value of any kind into a tree (the fields the aggregator
    /// keeps as values: usage, metadata, errors, off-shape values).
    pub fn value(&mut self) -> Scan<Value> {
        // Most values read are scalars (usage counts, flags): read at once,
        // without the container loop's set-up.
        match self.peek() {
            Some(b'-' | b'0'..=b'9') => self.number().map(Value::Number),
            Some(b'"') => Ok(Value::String(self.string()?.into_owned())),
            Some(b'{' | b'[') => self.container(),
            _ => self.literal(),
        }
    }

    /// A container value into a tree, in a loop with its own stack.
    fn container(&mut self) -> Scan<Value> {
        let mut stack: Vec<Frame> = Vec::new();
        loop {
            let mut done = match self.peek() {
                Some(b'{') => {
                    if self.opens(b'{', b'}')? {
                        Value::Object(Map::new())
                    } else {
                        let key = self.key()?.into_owned();
                        stack.push(Frame::Object(Map::new(), key));
                        continue;
                    }
                }
                Some(b'[') => {
                    if self.opens(b'[', b']')? {
                        Value::Array(Vec::new())
                    } else {
                        stack.push(Frame::Array(Vec::new()));
                        continue;
                    }
                }
                Some(b'"') => Value::String(self.string()?.into_owned()),
                Some(b'-' | b'0'..=b'9') => Value::Number(self.number()?),
                _ => self.literal()?,
            };
            loop {
                let Some(frame) = stack.last_mut() else {
                    return Ok(done);
                };
                match frame {
                    // A duplicate key keeps its first position, the last value.
                    Frame::Object(map, key) => {
                        map.insert(std::mem::take(key), done);
                    }
                    Frame::Array(items) => items.push(done),
                }
                match (self.peek(), &mut *frame) {
                    (Some(b','), Frame::Object(_, key)) => {
                        self.pos += 1;
                        *key = self.key()?.into_owned();
                        break;
                    }
                    (Some(b','), Frame::Array(_)) => {
                        self.pos += 1;
                        break;
                    }
                    (Some(b'}'), Frame::Object(..)) | (Some(b']'), Frame::Array(_)) => {
                        self.pos += 1;
                        self.depth -= 1;
                        done = match stack.pop() {
                            Some(Frame::Object(map, _)) => Value::Object(map),
                            Some(Frame::Array(items)) => Value::Array(items),
                            None => return Err(Invalid),
                        };
                    }
                    _ => return Err(Invalid),
                }
            }
        }
    }
}

/// Bytes past an escaped string's first escape its buffer has room for at first.
const ESCAPED_ROOM: usize = 256;

/// The character of a one-letter escape (`\n` ...), after its `\`.
#[must_use]
pub const fn short_escape(b: u8) -> Option<char> {
    Some(match b {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        _ => return None,
    })
}

/// How many of the eight bytes of `word` are ASCII digits before any other
/// byte, and the value of those digits, without a branch per digit (usage
/// counts have 1 to 6 digits, and the loop's exit on them was a mispredicted
/// branch per number). Each byte less `'0'` is a digit below 10; a borrow or
/// carry between bytes only reaches the bytes after a non-digit, which are
/// not read. The digits are shifted to the top of the word (zeros before
/// them are leading zeros) and combined pairwise: 2, 4, then 8 digits.
#[must_use]
pub fn leading_digits(word: &[u8]) -> (usize, u64) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let mut eight = [0u8; 8];
    let n = word.len().min(8);
    eight[..n].copy_from_slice(&word[..n]);
    let x = u64::from_le_bytes(eight).wrapping_sub(ONES * u64::from(b'0'));
    let other = (x | x.wrapping_add(ONES * 0x76)) & (ONES * 0x80);
    let len = (other.trailing_zeros() / 8) as usize;
    if len == 0 {
        return (0, 0);
    }
    let v = x << (8 * (8 - len));
    let v = (v & (ONES * 0x0F)).wrapping_mul(2561) >> 8;
    let v = (v & 0x00FF_00FF_00FF_00FF).wrapping_mul(6_553_601) >> 16;
    let v = (v & 0x0000_FFFF_0000_FFFF).wrapping_mul(42_949_672_960_001) >> 32;
    (len, v)
}

/// The number of leading ASCII digits.
fn digits(bytes: &[u8]) -> usize {
    bytes.iter().take_while(|b| b.is_ascii_digit()).count()
}

#[cfg(test)]
mod tests;
