//! The rest of a JSON string from where its plain run stopped: decoded onto a
//! buffer, or skipped (R8; and the binding's builder, R7: one decoder for both).
//!
//! Code carries an escape every few bytes (`giant_arg` has one every 8), so
//! the loop is per escape and keeps its state in registers: the position,
//! and the buffer's length (each `push` and `extend` of a `Vec` loaded,
//! checked and stored it: a third of the loop). Room for one escape and one
//! block is made before each is written; a one-letter escape is a table
//! load; a plain run is copied a block at a time, each block whole, the
//! length then moved only past the run: a fixed-size copy, where the run's
//! own length cost a call to `memcpy` per escape.

use super::run::{self, BLOCK};

/// A string read to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded {
    /// The position after its closing quote.
    pub end: usize,
    /// Whether everything decoded onto the buffer is ASCII.
    pub ascii: bool,
}

/// What is wrong with a string, and at which byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bad {
    pub at: usize,
    pub what: Wrong,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wrong {
    NotClosed,
    Control,
    Escape,
    Hex,
    LoneLeading,
    LoneTrailing,
    Unicode,
}

impl Wrong {
    /// The builder's words for it (`invalid JSON at byte {at}: {what}`).
    #[must_use]
    pub fn what(self) -> &'static str {
        match self {
            Self::NotClosed => "a string is not closed",
            Self::Control => "a control character in a string (escape it)",
            Self::Escape => "an invalid escape in a string",
            Self::Hex => "expected 4 hex digits in a \\u escape",
            Self::LoneLeading => "a lone leading surrogate in a \\u escape",
            Self::LoneTrailing => "a lone trailing surrogate in a \\u escape",
            Self::Unicode => "an invalid \\u escape",
        }
    }
}

const fn bad(at: usize, what: Wrong) -> Bad {
    Bad { at, what }
}

/// Why a string's plain run stopped at `pos` other than at a quote or a backslash.
fn unplain(bytes: &[u8], pos: usize) -> Bad {
    if pos < bytes.len() {
        bad(pos, Wrong::Control)
    } else {
        bad(pos, Wrong::NotClosed)
    }
}

/// RULE R8: the rest of a string, from the `"` or `\` at `pos` where its plain
/// run stopped, decoded onto `out` (after what `out` holds) up to its closing
/// quote: the position after that quote.
///
/// # Errors
/// The first byte that makes the string invalid, and why.
#[inline]
pub fn rest(bytes: &[u8], pos: usize, out: &mut Vec<u8>) -> Result<usize, Bad> {
    decode::<false>(bytes, pos, out, true).map(|d| d.end)
}

/// [`rest`], and whether the string is ASCII (`ascii`: whether what `out`
/// holds of it is), for the builder, which makes an ASCII `str` without
/// looking at its bytes again. (The payload scan does not ask: the test is
/// a few instructions a block.)
///
/// # Errors
/// As [`rest`].
#[inline]
pub fn rest_and_width(
    bytes: &[u8],
    pos: usize,
    out: &mut Vec<u8>,
    ascii: bool,
) -> Result<Decoded, Bad> {
    decode::<true>(bytes, pos, out, ascii)
}

fn decode<const WIDTH: bool>(
    bytes: &[u8],
    mut pos: usize,
    out: &mut Vec<u8>,
    ascii: bool,
) -> Result<Decoded, Bad> {
    let mut len = out.len();
    let mut wide = !ascii;
    // The loop leaves with the position of what ended it: the closing quote,
    // or the stop or escape that is wrong, diagnosed after it (out of the
    // loop, so that its exits keep nothing more in registers).
    let (at, closed) = loop {
        match bytes.get(pos) {
            Some(b'"') => break (pos, true),
            Some(b'\\') => {}
            _ => break (pos, false),
        }
        let Some(&letter) = bytes.get(pos + 1) else {
            break (pos, false);
        };
        room(out, len);
        let byte = ESCAPED[usize::from(letter)];
        if byte != 0 {
            // SAFETY: `room` made `ROOM` bytes of capacity from `len`.
            unsafe { out.as_mut_ptr().add(len).write(byte) };
            len += 1;
            pos += 2;
        } else if letter == b'u' {
            let Ok((c, next)) = unicode(bytes, pos + 2) else {
                break (pos, false);
            };
            let mut utf8 = [0; 4];
            let units = c.encode_utf8(&mut utf8).len();
            wide |= WIDTH && units > 1;
            // SAFETY: as above; a character is at most 4 bytes.
            unsafe { copy(&utf8, out, len) };
            len += units;
            pos = next;
        } else {
            break (pos, false);
        }
        loop {
            room(out, len);
            let block = run::block_at(bytes, pos);
            let (n, plain) = run::first_stop(&block);
            wide |= WIDTH && !plain;
            // SAFETY: `room` made `ROOM` (at least `BLOCK`) bytes of capacity
            // from `len`; only the run's `n` bytes are kept.
            unsafe { copy(&block, out, len) };
            len += n;
            pos += n;
            if n < BLOCK {
                break;
            }
        }
    };
    // SAFETY: the bytes up to `len` were written above (or were there).
    unsafe { out.set_len(len) };
    if closed {
        Ok(Decoded {
            end: at + 1,
            ascii: !wide,
        })
    } else {
        Err(diagnose(bytes, at))
    }
}

/// What is wrong with the string at `at`: a stop that is neither a quote
/// nor a backslash, or a backslash whose escape is wrong.
#[cold]
fn diagnose(bytes: &[u8], at: usize) -> Bad {
    if bytes.get(at) != Some(&b'\\') {
        return unplain(bytes, at);
    }
    match bytes.get(at + 1) {
        None => bad(at + 1, Wrong::NotClosed),
        Some(b'u') => match unicode(bytes, at + 2) {
            Err(bad) => bad,
            Ok(_) => bad(at, Wrong::Escape), // not reached: it was read
        },
        Some(_) => bad(at + 1, Wrong::Escape),
    }
}

/// The rest of a string from the `"` or `\` at `pos`, skipped and validated
/// as [`rest`] validates it: the position after its closing quote.
///
/// # Errors
/// As [`rest`].
pub fn skip(bytes: &[u8], mut pos: usize) -> Result<usize, Bad> {
    loop {
        match bytes.get(pos) {
            Some(b'"') => return Ok(pos + 1),
            Some(b'\\') => {}
            _ => return Err(unplain(bytes, pos)),
        }
        let Some(&letter) = bytes.get(pos + 1) else {
            return Err(bad(pos + 1, Wrong::NotClosed));
        };
        if ESCAPED[usize::from(letter)] != 0 {
            pos += 2;
        } else if letter == b'u' {
            pos = unicode(bytes, pos + 2)?.1;
        } else {
            return Err(bad(pos + 1, Wrong::Escape));
        }
        pos = run::plain_run(bytes, pos).0;
    }
}

/// Bytes of capacity [`rest`] makes before it writes an escape (at most 4
/// bytes) or a block.
const ROOM: usize = BLOCK;

/// At least [`ROOM`] bytes of capacity in `out` past its first `len` bytes,
/// which are initialised (`out`'s own length may lag behind `len`).
#[inline]
fn room(out: &mut Vec<u8>, len: usize) {
    if out.capacity() - len < ROOM {
        grow(out, len);
    }
}

#[cold]
#[inline(never)]
fn grow(out: &mut Vec<u8>, len: usize) {
    // SAFETY: the caller wrote the bytes up to `len` (within capacity).
    unsafe { out.set_len(len) };
    out.reserve(ROOM.max(len));
}

/// `bytes` written into `out`'s capacity at `at`.
///
/// # Safety
/// `out` has capacity for `at + bytes.len()` bytes.
#[inline]
unsafe fn copy(bytes: &[u8], out: &mut Vec<u8>, at: usize) {
    debug_assert!(at + bytes.len() <= out.capacity());
    // SAFETY: the destination is within `out`'s capacity (the caller's
    // promise) and cannot overlap `bytes`, which `out` does not own.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().add(at), bytes.len());
    }
}

/// The byte each one-letter escape stands for (`\n` is 10), by the letter;
/// 0 for a letter that is not one (`u` is read by [`unicode`]).
const ESCAPED: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        // `b` < 256: the cast is exact.
        #[allow(clippy::cast_possible_truncation)]
        if let Some(c) = super::short_escape(b as u8) {
            #[allow(clippy::cast_possible_truncation)]
            let byte = c as u8;
            table[b] = byte;
        }
        b += 1;
    }
    table
};

/// `\uXXXX` from its first hex digit at `pos`: the character, and the
/// position after it. A high surrogate must be followed by a low one, and a
/// lone surrogate is an error, as in `serde_json` and orjson.
#[inline]
fn unicode(bytes: &[u8], pos: usize) -> Result<(char, usize), Bad> {
    let first = hex4(bytes, pos)?;
    let (code, next) = match first {
        0xD800..=0xDBFF => {
            if bytes.get(pos + 4..pos + 6) != Some(b"\\u") {
                return Err(bad(pos + 4, Wrong::LoneLeading));
            }
            let low = hex4(bytes, pos + 6)?;
            if !(0xDC00..=0xDFFF).contains(&low) {
                return Err(bad(pos + 6, Wrong::LoneLeading));
            }
            (
                0x10000 + ((first - 0xD800) << 10) + (low - 0xDC00),
                pos + 10,
            )
        }
        0xDC00..=0xDFFF => return Err(bad(pos, Wrong::LoneTrailing)),
        _ => (first, pos + 4),
    };
    char::from_u32(code)
        .map(|c| (c, next))
        .ok_or(bad(pos, Wrong::Unicode))
}

/// The four hex digits at `pos`.
#[inline]
fn hex4(bytes: &[u8], pos: usize) -> Result<u32, Bad> {
    let Some(digits) = bytes.get(pos..pos + 4) else {
        return Err(bad(first_not_hex(bytes, pos), Wrong::Hex));
    };
    let mut n = 0;
    for &d in digits {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return Err(bad(first_not_hex(bytes, pos), Wrong::Hex)),
        };
        n = n * 16 + u32::from(v);
    }
    Ok(n)
}

/// Where the hex digits from `pos` stop (a byte that is none, or the end).
#[cold]
fn first_not_hex(bytes: &[u8], pos: usize) -> usize {
    pos + bytes
        .get(pos..)
        .unwrap_or_default()
        .iter()
        .take(4)
        .take_while(|b| b.is_ascii_hexdigit())
        .count()
}
