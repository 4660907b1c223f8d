//! `str` objects for the builder: an ASCII fast path and a cache of short strings.

use std::mem::MaybeUninit;

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;

use super::scan::{block_at, BLOCK};
use super::widen::{fill, fill_latin1, widest_and_count};
#[cfg(target_arch = "x86_64")]
use super::widen::{narrow, short_units, SHORT_UNITS};

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
    if (SHORT..HUGE).contains(&bytes.len()) {
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
/// RULE R4 (binding): from this many bytes on, [`utf8`] writes the `str`
/// itself again, for its memory. Python's decoder writes one byte per
/// character until the first wider one, then copies all it wrote into a
/// wider buffer: a 32 MiB ASCII text ending in one CJK character peaked at
/// 96 MiB for its 64 MiB `str`. Made at its final width from the start, the
/// `str` is all a giant argument adds when it is read.
const HUGE: usize = 1 << 20;

/// A `str` of `text` (not all ASCII). A short one is written once, its kind
/// (1, 2 or 4 bytes per character) read off its largest byte and its
/// characters counted first: Python's UTF-8 decoder starts at 1 byte per
/// character and copies what it wrote each time a wider one comes. Measured
/// below 512 bytes, writing it once took 0.5-0.9x the decoder's time in every
/// script tried (Latin, Cyrillic, CJK, emoji, code with CJK comments). A
/// longer one goes to the decoder, whose word-at-a-time ASCII loop wins on
/// mostly-ASCII, Latin and Cyrillic text (up to 1.6x faster at 8 KiB; it stays
/// slower on CJK and emoji, 0.6-0.8x). A text of [`HUGE`] bytes or more is
/// written once again, for memory.
pub(super) fn utf8<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyString>> {
    if (SHORT..HUGE).contains(&text.len()) {
        return decoded(py, text.as_bytes());
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(s) = short(py, text) {
        return s;
    }
    let (widest, count) = widest_and_count(text.as_bytes());
    // Continuation bytes: few in mostly-ASCII text, most of the bytes in CJK.
    let sparse = text.len() - count < text.len() / 4;
    let len = ffi::Py_ssize_t::try_from(count)?;
    let maxchar = maxchar_of(widest);
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

/// R7: the `str` of a short `text` in one pass ([`short_units`]): as
/// UTF-16 units, or as UCS-4 if it has a character above U+FFFF; `None` if
/// it is longer than [`SHORT_UNITS`].
#[cfg(target_arch = "x86_64")]
fn short<'py>(py: Python<'py>, text: &str) -> Option<PyResult<Bound<'py, PyString>>> {
    if text.len() > SHORT_UNITS {
        return None;
    }
    let mut units = [MaybeUninit::<u16>::uninit(); SHORT_UNITS + BLOCK];
    if let Some((count, or)) = short_units(text, &mut units) {
        // SAFETY: `short_units` wrote the first `count` units.
        let units = unsafe { std::slice::from_raw_parts(units.as_ptr().cast::<u16>(), count) };
        return Some(from_units(py, units, or));
    }
    // A character above U+FFFF: the kind is UCS-4.
    let mut units = [MaybeUninit::<u32>::uninit(); SHORT_UNITS + BLOCK];
    let (count, _) = short_units(text, &mut units)?;
    // SAFETY: as above.
    let units = unsafe { std::slice::from_raw_parts(units.as_ptr().cast::<u32>(), count) };
    Some(of_kind(py, units, 0x10_FFFF))
}

/// R7: the `str` of `units`, the UTF-16 units of a text with one character
/// above U+007F and none above U+FFFF, whose non-ASCII characters OR to
/// `or`: Latin-1 if that is below 0x100, else UCS-2 (Python's canonical
/// form: the narrowest kind that holds them all).
#[cfg(target_arch = "x86_64")]
fn from_units<'py>(py: Python<'py>, units: &[u16], or: u32) -> PyResult<Bound<'py, PyString>> {
    if or >= 0x100 {
        return of_kind(py, units, 0xFFFF);
    }
    let count = units.len();
    // SAFETY: PyUnicode_New(count, 0xFF) returns a new Latin-1 str of
    // `count` characters, or NULL with an exception set; its data is `count`
    // writable bytes, filled here with the characters of `units`, each below
    // 0x100 (`or` is).
    unsafe {
        let s = Bound::from_owned_ptr_or_err(
            py,
            ffi::PyUnicode_New(ffi::Py_ssize_t::try_from(count)?, 0xFF),
        )?;
        let data = ffi::PyUnicode_DATA(s.as_ptr()).cast::<u8>();
        narrow(units, std::slice::from_raw_parts_mut(data, count));
        Ok(s.cast_into_unchecked())
    }
}

/// R7: the `str` of the kind `maxchar` selects whose code units are `units`
/// (`U` is that kind's unit: `u16` for 0xFFFF, `u32` for 0x10FFFF).
#[cfg(target_arch = "x86_64")]
fn of_kind<'py, U: Copy>(
    py: Python<'py>,
    units: &[U],
    maxchar: u32,
) -> PyResult<Bound<'py, PyString>> {
    debug_assert_eq!(
        std::mem::size_of::<U>(),
        if maxchar == 0xFFFF { 2 } else { 4 }
    );
    let count = units.len();
    // SAFETY: PyUnicode_New(count, maxchar) returns a new str of `count`
    // units of that kind (the size of `U`, as the callers pass), or NULL with
    // an exception set; they are written once, with `units`.
    unsafe {
        let s = Bound::from_owned_ptr_or_err(
            py,
            ffi::PyUnicode_New(ffi::Py_ssize_t::try_from(count)?, maxchar),
        )?;
        std::ptr::copy_nonoverlapping(
            units.as_ptr(),
            ffi::PyUnicode_DATA(s.as_ptr()).cast::<U>(),
            count,
        );
        Ok(s.cast_into_unchecked())
    }
}

/// The `maxchar` of `PyUnicode_New` for text whose largest byte is `widest`.
fn maxchar_of(widest: u8) -> u32 {
    match widest {
        0..=0x7F => 0x7F,
        0x80..=0xC3 => 0xFF,
        0xC4..=0xEF => 0xFFFF,
        _ => 0x10_FFFF,
    }
}

/// R13: the text is read and written this many bytes at a time.
const PIECE: usize = 1 << 20;

/// RULE R13 (binding): the `str` of a string handed over by the core. It is
/// made at its final width (as [`utf8`] makes a huge one), then written one
/// piece of about 1 MiB at a time, and the pages of each piece written are
/// returned to the OS (`alloc::release_front`: the string is a mapping of
/// its own, R12). So the string and its `str` are never both whole in
/// memory: the peak is the larger of the two, plus a piece.
///
/// `text` is emptied (and freed) only once its `str` exists: if the `str`
/// cannot be made (a `MemoryError`), `text` is left whole, so a later read
/// can try again and nothing received is lost.
pub(crate) fn handed_over<'py>(
    py: Python<'py>,
    text: &mut String,
) -> PyResult<Bound<'py, PyString>> {
    if !crate::alloc::is_mapping(text.as_bytes(), text.capacity()) {
        let s = new_str(py, text)?;
        drop(std::mem::take(text));
        return Ok(s);
    }
    let (pieces, widest, count) = pieces_of(text.as_bytes());
    let maxchar = maxchar_of(widest);
    // SAFETY: a new str of `count` characters of the kind `maxchar` selects.
    let s = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            ffi::PyUnicode_New(ffi::Py_ssize_t::try_from(count)?, maxchar),
        )?
    };
    // The `str` exists: from here nothing fails, and the text is ours to
    // consume.
    let mut bytes = std::mem::take(text).into_bytes();
    // SAFETY: as in `utf8`: `s` has `count` writable units, filled piece by
    // piece with exactly the characters of `bytes` (each piece whole
    // characters of a `String`, not yet released: only bytes before a
    // piece's end are).
    unsafe {
        let data = ffi::PyUnicode_DATA(s.as_ptr());
        let (mut start, mut o, mut released) = (0, 0, 0);
        for (end, c) in pieces {
            let text = std::str::from_utf8_unchecked(&bytes[start..end]);
            let sparse = (end - start) - c < (end - start) / 4;
            match maxchar {
                0x7F | 0xFF => fill_latin1(
                    std::slice::from_raw_parts_mut(data.cast::<u8>().add(o), c),
                    text,
                ),
                0xFFFF => fill(
                    std::slice::from_raw_parts_mut(data.cast::<u16>().add(o), c),
                    text,
                    sparse,
                ),
                _ => fill(
                    std::slice::from_raw_parts_mut(data.cast::<u32>().add(o), c),
                    text,
                    sparse,
                ),
            }
            o += c;
            start = end;
            crate::alloc::release_front(&mut bytes, &mut released, end);
        }
        Ok(s.cast_into_unchecked())
    }
}

/// R13: `bytes` cut into pieces of about [`PIECE`] bytes that end at
/// character boundaries, each as (end, characters); with the largest byte
/// and the number of characters of the whole.
fn pieces_of(bytes: &[u8]) -> (Vec<(usize, usize)>, u8, usize) {
    let (mut pieces, mut widest, mut count, mut start) = (Vec::new(), 0u8, 0usize, 0usize);
    while start < bytes.len() {
        let mut end = (start + PIECE).min(bytes.len());
        while bytes.get(end).is_some_and(|&b| b & 0xC0 == 0x80) {
            end += 1;
        }
        let (w, c) = widest_and_count(&bytes[start..end]);
        widest = widest.max(w);
        count += c;
        pieces.push((end, c));
        start = end;
    }
    (pieces, widest, count)
}

/// 2^9 slots of 32 bytes: 16 KiB, which stays in the processor's first
/// cache level where 48 KiB missed it (a tenth of a part's build was the
/// lookup's load, measured on `tool_parallel`).
const SLOTS: usize = 512;
/// Strings up to 16 bytes (nearly all keys: `thoughtSignature` is 16) are
/// kept, their bytes in the slot's words; a longer one is made fresh.
const MAX_SHORT: usize = BLOCK;

struct Slot {
    words: Words,
    string: Py<PyString>,
}

/// R7 (binding): the `str` of every short ASCII string seen, key or value,
/// by a hash of its bytes (direct mapped: a new string evicts the one in its
/// slot). Keys repeat across parts (`functionCall`, `name`, `args`, `id`,
/// `thoughtSignature`) and across the calls of a tool, and so do many values
/// (a function's name, an enum-like argument: `"eq"`, `"lang"`), so most of
/// them cost a lookup instead of a new `str` (and its free); a cached key
/// keeps its hash, which Python's dict insertion then reads instead of
/// computing. One cache for both: a value that never repeats evicts a key
/// only when it lands in its slot, and two caches of 16 KiB counted more
/// instructions than one (`tool_parallel`, measured).
pub(super) struct StringCache {
    slots: [Option<Slot>; SLOTS],
}

/// A string of up to 16 bytes as three words: its length and its bytes
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

impl StringCache {
    pub(super) const fn new() -> Self {
        Self {
            slots: [const { None }; SLOTS],
        }
    }

    /// The `str` of ASCII `input[start..end]`, from the cache or made (and
    /// kept if it is short).
    ///
    /// # Safety
    /// Every byte of `input[start..end]` is ASCII (see [`ascii`]).
    pub(super) unsafe fn ascii_short<'py>(
        &mut self,
        py: Python<'py>,
        input: &[u8],
        start: usize,
        end: usize,
    ) -> PyResult<Bound<'py, PyString>> {
        let bytes = &input[start..end];
        if bytes.len() > MAX_SHORT {
            // SAFETY: forwarded from the caller.
            return unsafe { ascii(py, bytes) };
        }
        let words = Words::of(input, start, end);
        let slot = &mut self.slots[words.slot()];
        if let Some(hit) = slot {
            if hit.words.same(words) {
                return Ok(hit.string.bind(py).clone());
            }
        }
        // SAFETY: forwarded from the caller.
        let string = unsafe { ascii(py, bytes)? };
        let evicted = slot.replace(Slot {
            words,
            string: string.clone().unbind(),
        });
        if let Some(evicted) = evicted {
            // Released with the GIL known held: `Py`'s own drop asks the
            // thread (a thread-local read), which a miss paid every time.
            evicted.string.drop_ref(py);
        }
        Ok(string)
    }
}
