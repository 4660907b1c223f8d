//! UTF-8 text written into the code units of Python's string kinds (R7,
//! binding): the width and length of a short non-ASCII `str` read in one
//! pass, and its characters written at that width. On x86-64 the passes go
//! sixteen bytes at a time with SSE2 (part of the architecture's baseline,
//! so nothing is detected at run time); elsewhere the same passes are
//! written for the compiler to vectorize.

use std::mem::MaybeUninit;

use super::scan::BLOCK;

/// A code unit of one of Python's string kinds.
pub(super) trait Unit: Copy {
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

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// The largest byte of `bytes` and how many characters they hold. The
/// largest byte is the lead byte of the widest character: 0xC2-0xC3 lead
/// U+0080-U+00FF, up to 0xEF U+FFFF, beyond that 4 bytes; every byte but a
/// continuation byte (0x80-0xBF) starts a character. Byte by byte,
/// `bytes().max()` and `chars().count()` were most of a short `str`'s cost.
pub(super) fn widest_and_count(bytes: &[u8]) -> (u8, usize) {
    let mut blocks = bytes.chunks_exact(BLOCK);
    let (mut widest, mut continuations) = blocks_widest_and_continuations(&mut blocks);
    for &b in blocks.remainder() {
        widest = widest.max(b);
        continuations += usize::from(is_continuation(b));
    }
    (widest, bytes.len() - continuations)
}

#[cfg(target_arch = "x86_64")]
fn blocks_widest_and_continuations(blocks: &mut std::slice::ChunksExact<'_, u8>) -> (u8, usize) {
    use std::arch::x86_64::{
        __m128i, _mm_cmplt_epi8, _mm_cvtsi128_si32, _mm_extract_epi16, _mm_loadu_si128,
        _mm_max_epu8, _mm_sad_epu8, _mm_set1_epi8, _mm_setzero_si128, _mm_srli_si128, _mm_sub_epi8,
    };
    // Continuation bytes, 0x80-0xBF, are -128..=-65 as signed bytes.
    // SAFETY: SSE2 is baseline on x86-64; each load reads one whole chunk.
    unsafe {
        let below = _mm_set1_epi8(-64);
        let (mut max, mut lanes) = (_mm_setzero_si128(), _mm_setzero_si128());
        let mut continuations = 0;
        let sum = |lanes: __m128i| {
            let sums = _mm_sad_epu8(lanes, _mm_setzero_si128());
            usize::try_from(_mm_cvtsi128_si32(sums) + _mm_extract_epi16(sums, 4)).unwrap_or(0)
        };
        for (n, block) in blocks.enumerate() {
            let v = _mm_loadu_si128(block.as_ptr().cast());
            max = _mm_max_epu8(max, v);
            lanes = _mm_sub_epi8(lanes, _mm_cmplt_epi8(v, below)); // a true lane is -1
            if n % 255 == 254 {
                continuations += sum(lanes); // before a lane's count can wrap
                lanes = _mm_setzero_si128();
            }
        }
        continuations += sum(lanes);
        max = _mm_max_epu8(max, _mm_srli_si128(max, 8));
        max = _mm_max_epu8(max, _mm_srli_si128(max, 4));
        max = _mm_max_epu8(max, _mm_srli_si128(max, 2));
        max = _mm_max_epu8(max, _mm_srli_si128(max, 1));
        let widest = u8::try_from(_mm_cvtsi128_si32(max) & 0xFF).unwrap_or(u8::MAX);
        (widest, continuations)
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn blocks_widest_and_continuations(blocks: &mut std::slice::ChunksExact<'_, u8>) -> (u8, usize) {
    let mut widest = [0u8; BLOCK];
    let mut continuations = 0;
    for block in blocks {
        let mut n = 0u8;
        for (lane, &b) in widest.iter_mut().zip(block) {
            *lane = (*lane).max(b);
            n += u8::from(is_continuation(b));
        }
        continuations += usize::from(n);
    }
    (widest.iter().copied().max().unwrap_or(0), continuations)
}

/// The characters of `text`, none above U+00FF, into `units` (as many as it
/// has): ASCII sixteen bytes at a time up to the block's first other byte,
/// which leads a two-byte sequence (0xC2 or 0xC3). Text deltas are mostly
/// ASCII with a few accented letters (measured on them: 7 % fewer
/// instructions than one character at a time through `chars()`).
pub(super) fn fill_latin1(units: &mut [u8], text: &str) {
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

/// The characters of `text` into `units` (as many as it has), for the 2-
/// and 4-byte kinds: one at a time through `chars()` when continuation bytes
/// are a quarter of the bytes or more (`sparse` false: CJK, Cyrillic, dense
/// emoji), else ASCII runs a block at a time ([`Wide::fill_sparse`]). Text
/// deltas of these kinds are mostly ASCII around a few CJK characters, math
/// signs or emoji.
pub(super) fn fill<U: Wide>(units: &mut [U], text: &str, sparse: bool) {
    if sparse {
        U::fill_sparse(units, text.as_bytes());
    } else {
        for (unit, c) in units.iter_mut().zip(text.chars()) {
            *unit = U::of(c.into());
        }
    }
}

/// The character whose UTF-8 sequence starts at `bytes[i]`, and its length
/// (`bytes` is valid UTF-8; a byte past the end reads as zero bits).
fn decode(bytes: &[u8], i: usize) -> (u32, usize) {
    let byte = |k: usize| u32::from(bytes.get(i + k).copied().unwrap_or(0));
    let lead = byte(0);
    match lead {
        0..=0x7F => (lead, 1),
        0x80..=0xDF => (((lead & 0x1F) << 6) | (byte(1) & 0x3F), 2),
        0xE0..=0xEF => (
            ((lead & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F),
            3,
        ),
        _ => (
            ((lead & 0x07) << 18)
                | ((byte(1) & 0x3F) << 12)
                | ((byte(2) & 0x3F) << 6)
                | (byte(3) & 0x3F),
            4,
        ),
    }
}

/// The 2- and 4-byte kinds, whose mostly-ASCII text is widened a block at
/// a time.
pub(super) trait Wide: Unit {
    /// The characters of mostly-ASCII UTF-8 `bytes` into `units` (as many as
    /// they hold): sixteen bytes at a time, each block widened whole and the
    /// units after its ASCII run written again from its first other
    /// character on, which is decoded on its own (measured with cachegrind
    /// per JSON string of about 80 characters, built by `_json_to_py`, against
    /// the `chars()` fill and byte-by-byte counting: mixed ASCII, CJK and math
    /// signs -14 %, ASCII with emoji -10 %, Latin-1 -4 %, dense CJK -7.5 %,
    /// Cyrillic -5 %).
    fn fill_sparse(units: &mut [Self], bytes: &[u8]);
}

impl Wide for u16 {
    fn fill_sparse(units: &mut [Self], bytes: &[u8]) {
        sparse_blocks(units, bytes, block::u16_block);
    }
}

impl Wide for u32 {
    fn fill_sparse(units: &mut [Self], bytes: &[u8]) {
        sparse_blocks(units, bytes, block::u32_block);
    }
}

/// Blocks of sixteen bytes while sixteen units fit, `block` widening each
/// into the units (returning how many leading bytes were ASCII); one
/// character at a time for the rest.
fn sparse_blocks<U: Unit>(units: &mut [U], bytes: &[u8], block: impl Fn(&[u8], &mut [U]) -> usize) {
    let (mut i, mut o) = (0, 0);
    while let (Some(input), Some(out)) = (bytes.get(i..i + BLOCK), units.get_mut(o..o + BLOCK)) {
        let n = block(input, out);
        i += n;
        o += n;
        if n < BLOCK {
            let (c, len) = decode(bytes, i);
            if let Some(slot) = units.get_mut(o) {
                *slot = U::of(c);
            }
            i += len;
            o += 1;
        }
    }
    while i < bytes.len() {
        let (c, len) = decode(bytes, i);
        if let Some(slot) = units.get_mut(o) {
            *slot = U::of(c);
        }
        i += len;
        o += 1;
    }
}

/// One block: its sixteen bytes widened into `out` (sixteen units), and the
/// length of its leading ASCII run.
#[cfg(target_arch = "x86_64")]
mod block {
    use std::arch::x86_64::{
        _mm_loadu_si128, _mm_movemask_epi8, _mm_setzero_si128, _mm_storeu_si128,
        _mm_unpackhi_epi16, _mm_unpackhi_epi8, _mm_unpacklo_epi16, _mm_unpacklo_epi8,
    };

    use super::BLOCK;

    fn ascii_run(mask: i32) -> usize {
        // The sign bits of the sixteen bytes: bit k set for a byte above 0x7F.
        (mask | 1 << BLOCK).trailing_zeros() as usize
    }

    pub(super) fn u16_block(input: &[u8], out: &mut [u16]) -> usize {
        if input.len() < BLOCK || out.len() < BLOCK {
            return 0; // never, as called: a character is then decoded on its own
        }
        // SAFETY: SSE2 is baseline on x86-64; the load reads 16 bytes of
        // `input` and the stores write 16 units of `out` (both checked).
        unsafe {
            let v = _mm_loadu_si128(input.as_ptr().cast());
            let zero = _mm_setzero_si128();
            let dst = out.as_mut_ptr();
            _mm_storeu_si128(dst.cast(), _mm_unpacklo_epi8(v, zero));
            _mm_storeu_si128(dst.add(8).cast(), _mm_unpackhi_epi8(v, zero));
            ascii_run(_mm_movemask_epi8(v))
        }
    }

    pub(super) fn u32_block(input: &[u8], out: &mut [u32]) -> usize {
        if input.len() < BLOCK || out.len() < BLOCK {
            return 0; // as in `u16_block`
        }
        // SAFETY: as in `u16_block`, four stores of four units each.
        unsafe {
            let v = _mm_loadu_si128(input.as_ptr().cast());
            let zero = _mm_setzero_si128();
            let (low, high) = (_mm_unpacklo_epi8(v, zero), _mm_unpackhi_epi8(v, zero));
            let dst = out.as_mut_ptr();
            _mm_storeu_si128(dst.cast(), _mm_unpacklo_epi16(low, zero));
            _mm_storeu_si128(dst.add(4).cast(), _mm_unpackhi_epi16(low, zero));
            _mm_storeu_si128(dst.add(8).cast(), _mm_unpacklo_epi16(high, zero));
            _mm_storeu_si128(dst.add(12).cast(), _mm_unpackhi_epi16(high, zero));
            ascii_run(_mm_movemask_epi8(v))
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod block {
    use super::{Unit, BLOCK};

    fn block<U: Unit>(input: &[u8], out: &mut [U]) -> usize {
        let input = input.get(..BLOCK).unwrap_or_default();
        for (unit, &b) in out.iter_mut().zip(input) {
            *unit = U::of(u32::from(b));
        }
        input.iter().take_while(|b| b.is_ascii()).count()
    }

    pub(super) fn u16_block(input: &[u8], out: &mut [u16]) -> usize {
        block(input, out)
    }

    pub(super) fn u32_block(input: &[u8], out: &mut [u32]) -> usize {
        block(input, out)
    }
}

/// A unit [`short_units`] writes: UTF-16 (`u16`, no character above
/// U+FFFF) or UCS-4 (`u32`).
#[cfg(target_arch = "x86_64")]
pub(super) trait ShortUnit: Unit {
    /// Whether a character above U+FFFF fits.
    const ASTRAL: bool;

    /// Widens the sixteen bytes at `src` into the sixteen units at `dst`
    /// and returns the length of their leading ASCII run.
    ///
    /// # Safety
    /// `src` has sixteen readable bytes and `dst` sixteen writable units.
    unsafe fn block(src: *const u8, dst: *mut Self) -> usize;
}

#[cfg(target_arch = "x86_64")]
impl ShortUnit for u16 {
    const ASTRAL: bool = false;

    unsafe fn block(src: *const u8, dst: *mut Self) -> usize {
        use std::arch::x86_64::{
            _mm_loadu_si128, _mm_movemask_epi8, _mm_setzero_si128, _mm_storeu_si128,
            _mm_unpackhi_epi8, _mm_unpacklo_epi8,
        };
        // SAFETY: SSE2 is baseline on x86-64; the caller vouches for the
        // sixteen bytes read and the sixteen units written.
        unsafe {
            let v = _mm_loadu_si128(src.cast());
            let zero = _mm_setzero_si128();
            _mm_storeu_si128(dst.cast(), _mm_unpacklo_epi8(v, zero));
            _mm_storeu_si128(dst.add(8).cast(), _mm_unpackhi_epi8(v, zero));
            (_mm_movemask_epi8(v) | 1 << BLOCK).trailing_zeros() as usize
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl ShortUnit for u32 {
    const ASTRAL: bool = true;

    unsafe fn block(src: *const u8, dst: *mut Self) -> usize {
        use std::arch::x86_64::{
            _mm_loadu_si128, _mm_movemask_epi8, _mm_setzero_si128, _mm_storeu_si128,
            _mm_unpackhi_epi16, _mm_unpackhi_epi8, _mm_unpacklo_epi16, _mm_unpacklo_epi8,
        };
        // SAFETY: as for `u16`, four stores of four units each.
        unsafe {
            let v = _mm_loadu_si128(src.cast());
            let zero = _mm_setzero_si128();
            let (low, high) = (_mm_unpacklo_epi8(v, zero), _mm_unpackhi_epi8(v, zero));
            _mm_storeu_si128(dst.cast(), _mm_unpacklo_epi16(low, zero));
            _mm_storeu_si128(dst.add(4).cast(), _mm_unpackhi_epi16(low, zero));
            _mm_storeu_si128(dst.add(8).cast(), _mm_unpacklo_epi16(high, zero));
            _mm_storeu_si128(dst.add(12).cast(), _mm_unpackhi_epi16(high, zero));
            (_mm_movemask_epi8(v) | 1 << BLOCK).trailing_zeros() as usize
        }
    }
}

/// RULE R7 (binding): the characters of a short `text` (at most
/// [`SHORT_UNITS`] bytes) written in one pass as units of `U` into `out`,
/// with the bitwise OR of its non-ASCII characters; `None` if it has a
/// character above U+FFFF and `U` is `u16` (the caller then tries `u32`).
/// The OR tells the kind (below 0x100: Latin-1, below 0x10000: UCS-2, else
/// UCS-4), so the width need not be read in a pass of its own: the units are
/// copied (or narrowed) into the `str` once it is made. ASCII goes sixteen
/// bytes at a time while the next byte is ASCII, a non-ASCII character on its
/// own; the text is first copied with sixteen zero bytes after it, so its
/// tail goes by blocks too. Measured with cachegrind on the corpus's text
/// deltas (88 bytes on average): 1,588 instructions a string through the
/// builder before (a pass for the width, then the fill), 1,249 after.
#[cfg(target_arch = "x86_64")]
pub(super) fn short_units<U: ShortUnit>(
    text: &str,
    out: &mut [MaybeUninit<U>; SHORT_UNITS + BLOCK],
) -> Option<(usize, u32)> {
    let len = text.len();
    if len > SHORT_UNITS {
        return None;
    }
    let mut copy = [MaybeUninit::<u8>::uninit(); SHORT_UNITS + BLOCK];
    // SAFETY: `len + 16` bytes of `copy` are written (text, then zeros) before
    // they are read as `padded`.
    let padded = unsafe {
        let p = copy.as_mut_ptr().cast::<u8>();
        std::ptr::copy_nonoverlapping(text.as_ptr(), p, len);
        std::ptr::write_bytes(p.add(len), 0, BLOCK);
        std::slice::from_raw_parts(p, len + BLOCK)
    };
    let (mut i, mut o, mut or) = (0usize, 0usize, 0u32);
    // `o <= i` throughout: a character has at least one byte.
    while i < len {
        let lead = padded[i];
        if lead < 0x80 {
            // SAFETY: bytes i..i+16 of `padded` are readable (i < len), and
            // units o..o+16 of `out` writable, as o <= i < len <= SHORT_UNITS.
            let run = unsafe { U::block(padded.as_ptr().add(i), out.as_mut_ptr().add(o).cast()) };
            i += run;
            o += run;
            continue;
        }
        // A lead byte of valid UTF-8: its continuation bytes follow.
        let next = |k: usize| u32::from(padded.get(i + k).copied().unwrap_or(0) & 0x3F);
        let (c, width) = match lead {
            0x80..=0xDF => ((u32::from(lead & 0x1F) << 6) | next(1), 2),
            0xE0..=0xEF => ((u32::from(lead & 0x0F) << 12) | (next(1) << 6) | next(2), 3),
            _ if U::ASTRAL => (
                (u32::from(lead & 0x07) << 18) | (next(1) << 12) | (next(2) << 6) | next(3),
                4,
            ),
            _ => return None,
        };
        or |= c;
        out[o].write(U::of(c));
        i += width;
        o += 1;
    }
    // A block's run went on into the zeros after the text: as many units
    // too many.
    Some((o - (i - len), or))
}

/// The most bytes [`short_units`] takes (the units it can write).
pub(super) const SHORT_UNITS: usize = 512;

/// `units` (each below 0x100) into `bytes`, as many as `units` has.
#[cfg(target_arch = "x86_64")]
pub(super) fn narrow(units: &[u16], bytes: &mut [u8]) {
    for (b, &u) in bytes.iter_mut().zip(units) {
        *b = u8::try_from(u).unwrap_or(0);
    }
}

#[cfg(test)]
mod tests {
    use super::{fill, fill_latin1, widest_and_count};

    /// Strings of every kind around the 16-byte blocks: runs of ASCII cut by
    /// wider characters at every offset.
    fn samples() -> Vec<String> {
        let wide = ["é", "ÿ", "Ā", "∑", "日", "\u{FFFF}", "😀", "\u{10FFFF}"];
        let mut out = vec![String::new()];
        for len in [1, 7, 15, 16, 17, 31, 32, 33, 47, 100] {
            for w in wide {
                for every in [1, 2, 5, 16, 40] {
                    let s: String = (0..len)
                        .map(|k| if k % every == every - 1 { w } else { "a" })
                        .collect();
                    out.push(s);
                }
            }
        }
        out
    }

    #[test]
    fn r7_width_and_length_are_the_largest_byte_and_the_character_count() {
        for s in samples() {
            let expected = (s.bytes().max().unwrap_or(0), s.chars().count());
            assert_eq!(widest_and_count(s.as_bytes()), expected, "{s:?}");
        }
    }

    /// Whether `units` hold exactly `chars`.
    fn holds<U: Copy + Into<u32>>(units: &[U], chars: &[u32]) -> bool {
        units.iter().map(|&u| u.into()).eq(chars.iter().copied())
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn r7_one_pass_writes_the_characters_and_ors_the_non_ascii_ones() {
        use super::{short_units, SHORT_UNITS};
        use crate::build::scan::BLOCK;
        use std::mem::MaybeUninit;
        let mut samples = samples();
        // The longest text taken, ending in a wide character and in ASCII.
        samples.push("a".repeat(SHORT_UNITS - 3) + "日");
        samples.push("é".repeat(SHORT_UNITS / 2 - 1) + "ab");
        for s in samples {
            let chars: Vec<u32> = s.chars().map(u32::from).collect();
            let or = chars.iter().filter(|&&c| c > 0x7F).fold(0, |a, &c| a | c);
            let mut wide = [MaybeUninit::<u32>::uninit(); SHORT_UNITS + BLOCK];
            let (n, got) = short_units(&s, &mut wide).expect("every text fits u32");
            // SAFETY: `short_units` wrote the first `n` units.
            let units = unsafe { std::slice::from_raw_parts(wide.as_ptr().cast::<u32>(), n) };
            assert_eq!((units, got), (&chars[..], or), "{s:?}");
            let mut narrow = [MaybeUninit::<u16>::uninit(); SHORT_UNITS + BLOCK];
            match short_units(&s, &mut narrow) {
                Some((n, got)) => {
                    // SAFETY: as above.
                    let units =
                        unsafe { std::slice::from_raw_parts(narrow.as_ptr().cast::<u16>(), n) };
                    assert!(holds(units, &chars) && got == or, "{s:?}");
                }
                None => assert!(chars.iter().any(|&c| c > 0xFFFF), "{s:?}"),
            }
        }
        let mut out = [MaybeUninit::<u16>::uninit(); SHORT_UNITS + BLOCK];
        assert_eq!(short_units(&"a".repeat(SHORT_UNITS + 1), &mut out), None);
    }

    #[test]
    fn r7_every_kind_is_filled_with_the_characters_in_order() {
        for s in samples() {
            let chars: Vec<u32> = s.chars().map(u32::from).collect();
            let n = chars.len();
            for sparse in [true, false] {
                let mut wide = vec![0u32; n];
                fill(&mut wide, &s, sparse);
                assert!(holds(&wide, &chars), "{s:?}");
                if chars.iter().all(|&c| c <= 0xFFFF) {
                    let mut units = vec![0u16; n];
                    fill(&mut units, &s, sparse);
                    assert!(holds(&units, &chars), "{s:?}");
                }
            }
            if chars.iter().all(|&c| c <= 0xFF) {
                let mut units = vec![0u8; n];
                fill_latin1(&mut units, &s);
                assert!(holds(&units, &chars), "{s:?}");
            }
        }
    }
}
