//! `str` objects for the builder: an ASCII fast path and a cache of keys.

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;

use super::scan::{block_at, BLOCK};

/// A `str` of ASCII `bytes`, made the way Python makes one internally: an
/// ASCII object of the right length, the bytes copied in. (Through
/// `PyUnicode_FromStringAndSize`, Python's UTF-8 decoder would scan them
/// again, which the builder's scanner has just done.)
///
/// # Safety
/// Every byte of `bytes` is ASCII: a byte above 0x7F would make a `str` whose
/// data is not what Python's ASCII kind promises.
pub(super) unsafe fn ascii<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyString>> {
    debug_assert!(bytes.is_ascii());
    let len = ffi::Py_ssize_t::try_from(bytes.len())?;
    // SAFETY: PyUnicode_New(len, 127) returns a new ASCII str of `len`
    // characters (one byte each, terminated) or NULL with an exception set;
    // its data is then `len` writable bytes that nothing else references yet.
    unsafe {
        let s = Bound::from_owned_ptr_or_err(py, ffi::PyUnicode_New(len, 127))?;
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            ffi::PyUnicode_DATA(s.as_ptr()).cast::<u8>(),
            bytes.len(),
        );
        Ok(s.cast_into_unchecked())
    }
}

/// A `str` of any `text`, made the cheapest way for what it holds (text
/// deltas, text runs and the joined text use it too).
pub(crate) fn new_str<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyString>> {
    if text.is_ascii() {
        // SAFETY: every byte was just checked to be ASCII.
        unsafe { ascii(py, text.as_bytes()) }
    } else {
        utf8(py, text)
    }
}

/// A `str` of the UTF-8 `bytes` of a decoded string (not all ASCII).
pub(super) fn utf8_bytes<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyString>> {
    if bytes.len() >= SHORT {
        return decoded(py, bytes);
    }
    // Valid by construction (runs of the input cut at ASCII bytes, and
    // whole characters); checked all the same, at the cost of one pass.
    let text = std::str::from_utf8(bytes)
        .map_err(|e| PyValueError::new_err(format!("invalid JSON: {e}")))?;
    utf8(py, text)
}

/// A `str` of `bytes` by Python's UTF-8 decoder (which checks them).
fn decoded<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyString>> {
    let len = ffi::Py_ssize_t::try_from(bytes.len())?;
    // SAFETY: the pointer and length describe `bytes`, which outlives the
    // call; the result is a new reference or NULL with an exception set.
    unsafe {
        Ok(Bound::from_owned_ptr_or_err(
            py,
            ffi::PyUnicode_FromStringAndSize(bytes.as_ptr().cast(), len),
        )?
        .cast_into_unchecked())
    }
}

/// Below this many bytes, [`utf8`] writes a `str` itself.
const SHORT: usize = 512;

/// A `str` of `text` (not all ASCII). A short one is written once, its kind
/// (1, 2 or 4 bytes per character) read off its largest byte and its
/// characters counted first: Python's UTF-8 decoder starts at 1 byte per
/// character and copies what it wrote each time a wider one comes. Measured
/// below 512 bytes, writing it once took 0.5-0.9x the decoder's time in every
/// script tried (Latin, Cyrillic, CJK, emoji, code with CJK comments). A
/// longer one goes to the decoder, whose word-at-a-time ASCII loop wins on
/// mostly-ASCII, Latin and Cyrillic text (up to 1.6x faster at 8 KiB; it stays
/// slower on CJK and emoji, 0.6-0.8x).
pub(super) fn utf8<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyString>> {
    if text.len() >= SHORT {
        return decoded(py, text.as_bytes());
    }
    let (widest, count) = widest_and_count(text.as_bytes());
    // Continuation bytes: few in mostly-ASCII text, most of the bytes in CJK.
    let sparse = text.len() - count < text.len() / 4;
    let len = ffi::Py_ssize_t::try_from(count)?;
    let maxchar = match widest {
        0..=0x7F => 0x7F,
        0x80..=0xC3 => 0xFF,
        0xC4..=0xEF => 0xFFFF,
        _ => 0x10_FFFF,
    };
    // SAFETY: PyUnicode_New(len, maxchar) returns a new str of `len`
    // characters of the kind that `maxchar` selects, or NULL with an
    // exception set; its data is `len` writable units of that kind, and
    // `text` has exactly `len` characters, none above `maxchar`, one above
    // the kind below it (Python's canonical form: equal strings have equal
    // kinds).
    unsafe {
        let s = Bound::from_owned_ptr_or_err(py, ffi::PyUnicode_New(len, maxchar))?;
        let data = ffi::PyUnicode_DATA(s.as_ptr());
        match maxchar {
            0x7F | 0xFF => fill_latin1(
                std::slice::from_raw_parts_mut(data.cast::<u8>(), count),
                text,
            ),
            0xFFFF => fill(
                std::slice::from_raw_parts_mut(data.cast::<u16>(), count),
                text,
                sparse,
            ),
            _ => fill(
                std::slice::from_raw_parts_mut(data.cast::<u32>(), count),
                text,
                sparse,
            ),
        }
        Ok(s.cast_into_unchecked())
    }
}

/// The largest byte of `bytes` and how many characters they hold, in one
/// pass a block at a time (byte by byte, `bytes().max()` and
/// `chars().count()` were most of a short `str`'s cost). The largest byte is
/// the lead byte of the widest character: 0xC2-0xC3 lead U+0080-U+00FF, up
/// to 0xEF U+FFFF, beyond that 4 bytes; every byte but a continuation byte
/// (0x80-0xBF) starts a character.
fn widest_and_count(bytes: &[u8]) -> (u8, usize) {
    let mut widest = [0u8; BLOCK];
    let mut count = 0;
    let mut blocks = bytes.chunks_exact(BLOCK);
    for block in &mut blocks {
        let mut starts = 0u8;
        for (lane, &b) in widest.iter_mut().zip(block) {
            *lane = (*lane).max(b);
            starts += u8::from(!is_continuation(b));
        }
        count += usize::from(starts);
    }
    let rest = blocks.remainder();
    let last = rest.iter().copied().max().unwrap_or(0);
    count += rest.iter().filter(|&&b| !is_continuation(b)).count();
    (widest.iter().copied().max().unwrap_or(0).max(last), count)
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// A code unit of one of Python's string kinds.
trait Unit: Copy {
    fn of(c: u32) -> Self;
}

// The casts keep the low bits of characters that `utf8` checked fit.
#[allow(clippy::cast_possible_truncation)]
impl Unit for u8 {
    fn of(c: u32) -> Self {
        c as u8
    }
}

#[allow(clippy::cast_possible_truncation)]
impl Unit for u16 {
    fn of(c: u32) -> Self {
        c as u16
    }
}

impl Unit for u32 {
    fn of(c: u32) -> Self {
        c
    }
}

/// The characters of `text`, none above U+00FF, into `units` (as many as it
/// has): ASCII sixteen bytes at a time up to the block's first other byte,
/// which leads a two-byte sequence (0xC2 or 0xC3). Text deltas are mostly
/// ASCII with a few accented letters (measured on them: 7 % fewer
/// instructions than one character at a time through `chars()`).
fn fill_latin1(units: &mut [u8], text: &str) {
    const HIGH: u128 = u128::from_le_bytes([0x80; BLOCK]);
    let bytes = text.as_bytes();
    let (mut i, mut o) = (0, 0);
    while i < bytes.len() {
        if let (Some(block), Some(out)) = (bytes.get(i..i + BLOCK), units.get_mut(o..o + BLOCK)) {
            // All sixteen are copied; those after the ASCII run are
            // written again below.
            out.copy_from_slice(block);
            let mut word = [0u8; BLOCK];
            word.copy_from_slice(block);
            let n = ((u128::from_le_bytes(word) & HIGH).trailing_zeros() / 8) as usize;
            i += n;
            o += n;
            if n == BLOCK {
                continue;
            }
        }
        let Some(&b) = bytes.get(i) else { return };
        let (unit, len) = if b.is_ascii() {
            (b, 1)
        } else {
            let low = bytes.get(i + 1).map_or(0, |&c| c & 0x3F);
            (((b & 0x03) << 6) | low, 2)
        };
        if let Some(slot) = units.get_mut(o) {
            *slot = unit;
        }
        i += len;
        o += 1;
    }
}

/// The characters of `text` into `units` (as many as it has), for the
/// 2- and 4-byte kinds: one at a time through `chars()` when most of `text`
/// is not ASCII (`sparse` false), else [`fill_sparse`].
fn fill<U: Unit>(units: &mut [U], text: &str, sparse: bool) {
    if sparse {
        fill_sparse(units, text);
    } else {
        for (unit, c) in units.iter_mut().zip(text.chars()) {
            *unit = U::of(c.into());
        }
    }
}

/// The characters of mostly-ASCII `text` into `units`: ASCII runs sixteen bytes at a time (widened in one
/// go), and from a block's first other byte one character at a time until
/// two ASCII bytes come in a row, where the blocks take over again. Text
/// deltas of these kinds are mostly ASCII around a few CJK characters, math
/// signs or emoji (measured on such strings: 14-22 % fewer instructions than
/// `chars()`; where continuation bytes are a quarter of the bytes or more,
/// `chars()` stays the cheaper, and [`utf8`] picks it).
fn fill_sparse<U: Unit>(units: &mut [U], text: &str) {
    const HIGH: u128 = u128::from_le_bytes([0x80; BLOCK]);
    let mut rest = text;
    let mut o = 0;
    loop {
        while let (Some(block), Some(out)) =
            (rest.as_bytes().get(..BLOCK), units.get_mut(o..o + BLOCK))
        {
            // All sixteen are written; those after the ASCII run are
            // written again below.
            for (unit, &b) in out.iter_mut().zip(block) {
                *unit = U::of(u32::from(b));
            }
            let mut word = [0u8; BLOCK];
            word.copy_from_slice(block);
            let n = ((u128::from_le_bytes(word) & HIGH).trailing_zeros() / 8) as usize;
            // An ASCII run ends at a character boundary.
            rest = rest.get(n..).unwrap_or_default();
            o += n;
            if n < BLOCK {
                break;
            }
        }
        let mut chars = rest.chars();
        while let Some(c) = chars.next() {
            if let Some(slot) = units.get_mut(o) {
                *slot = U::of(c.into());
            }
            o += 1;
            if c.is_ascii() && chars.as_str().as_bytes().first().is_some_and(u8::is_ascii) {
                break;
            }
        }
        rest = chars.as_str();
        if rest.is_empty() {
            return;
        }
    }
}

/// 2^9 slots of 32 bytes: 16 KiB, which stays in the processor's first
/// cache level where 48 KiB missed it (a tenth of a part's build was the
/// lookup's load, measured on `tool_parallel`).
const SLOTS: usize = 512;
/// Keys up to 16 bytes (nearly all: `thoughtSignature` is 16) are kept,
/// their bytes in the slot's words; a longer one is made fresh.
const MAX_KEY: usize = BLOCK;

struct Slot {
    words: Words,
    key: Py<PyString>,
}

/// R7 (binding): the `str` of every short ASCII key seen, by a hash of its
/// bytes (direct mapped: a new key evicts the one in its slot). Keys repeat
/// across parts (`functionCall`, `name`, `args`, `id`, `thoughtSignature`) and
/// across the calls of a tool, so most keys cost a lookup instead of a new
/// `str`, and a cached `str` keeps its hash, which Python's dict insertion
/// then reads instead of computing.
pub(super) struct KeyCache {
    slots: [Option<Slot>; SLOTS],
}

/// A key of up to 16 bytes as three words: its length and its bytes
/// (zeros after them), so a hit compares three words.
#[derive(Clone, Copy)]
struct Words {
    len: u64,
    low: u64,
    high: u64,
}

impl Words {
    /// `input[start..end]`, at most `BLOCK` bytes.
    fn of(input: &[u8], start: usize, end: usize) -> Self {
        let len = end - start;
        let bytes = u128::from_le_bytes(block_at(input, start));
        let shift = u32::try_from(128usize.saturating_sub(8 * len)).unwrap_or(128);
        let bytes = bytes & u128::MAX.checked_shr(shift).unwrap_or(0);
        // The two halves of the 16 bytes.
        #[allow(clippy::cast_possible_truncation)]
        Self {
            len: len as u64,
            low: bytes as u64,
            high: (bytes >> 64) as u64,
        }
    }

    /// Word by word: compared as one array, the words were stored to the
    /// stack and reloaded wider, a stall that cost more than the compare.
    fn same(self, other: Self) -> bool {
        self.len == other.len && self.low == other.low && self.high == other.high
    }

    fn slot(self) -> usize {
        // A multiplicative hash: its top bits are the best mixed (SLOTS is
        // 2^9); a collision only costs a fresh `str`.
        let hash =
            (self.low ^ self.high.rotate_left(29) ^ self.len).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        usize::try_from(hash >> 55).unwrap_or(0)
    }
}

impl KeyCache {
    pub(super) const fn new() -> Self {
        Self {
            slots: [const { None }; SLOTS],
        }
    }

    /// The key `str` of ASCII `input[start..end]`, from the cache or made
    /// (and kept if it is short).
    ///
    /// # Safety
    /// Every byte of `input[start..end]` is ASCII (see [`ascii`]).
    pub(super) unsafe fn ascii_key<'py>(
        &mut self,
        py: Python<'py>,
        input: &[u8],
        start: usize,
        end: usize,
    ) -> PyResult<Bound<'py, PyString>> {
        let bytes = &input[start..end];
        if bytes.len() > MAX_KEY {
            // SAFETY: forwarded from the caller.
            return unsafe { ascii(py, bytes) };
        }
        let words = Words::of(input, start, end);
        let slot = &mut self.slots[words.slot()];
        if let Some(hit) = slot {
            if hit.words.same(words) {
                return Ok(hit.key.bind(py).clone());
            }
        }
        // SAFETY: forwarded from the caller.
        let key = unsafe { ascii(py, bytes)? };
        *slot = Some(Slot {
            words,
            key: key.clone().unbind(),
        });
        Ok(key)
    }
}
