//! Where a run of plain string bytes ends, for the payload scan (R8) and the
//! binding's builder (R7, binding): sixteen bytes at a time (SSE2, which every
//! x86-64 has; two words elsewhere). Part texts carry kilobytes of base64 signatures and
//! argument text, and arguments written as code have an escape every few
//! bytes, so both long runs and short ones must be cheap.

/// Bytes of input the scanner looks at at once.
pub const BLOCK: usize = 16;

/// The `BLOCK` bytes from `pos`; past the end, zeros (control characters:
/// the end stops a run as they do).
#[must_use]
pub fn block_at(bytes: &[u8], pos: usize) -> [u8; BLOCK] {
    let mut block = [0u8; BLOCK];
    if let Some(whole) = bytes.get(pos..pos + BLOCK) {
        block.copy_from_slice(whole);
    } else {
        let tail = bytes.get(pos..).unwrap_or_default();
        block[..tail.len()].copy_from_slice(tail);
    }
    block
}

/// In `block`, the index of the first byte that ends a plain run (`"`, `\`
/// or a control character, which JSON requires escaped), `BLOCK` if none;
/// and whether the bytes before it are all ASCII.
#[cfg(target_arch = "x86_64")]
#[inline]
#[must_use]
pub fn first_stop(block: &[u8; BLOCK]) -> (usize, bool) {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    // SAFETY: SSE2 is in every x86-64 target; the load reads the 16 bytes of
    // `block`, and needs no alignment (loadu).
    let (stops, wide) = unsafe {
        #[allow(clippy::cast_ptr_alignment)] // an unaligned load
        let v = _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x22));
        let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x5C));
        // b < 0x20 exactly when min(b, 0x1F) == b (unsigned).
        let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1F)), v);
        let stops = _mm_or_si128(_mm_or_si128(quote, backslash), control);
        (_mm_movemask_epi8(stops), _mm_movemask_epi8(v))
    };
    // The stop bit of a 17th byte ends a block without stops.
    let n = (stops | 1 << BLOCK).trailing_zeros();
    (n as usize, wide & ((1 << n) - 1) == 0)
}

#[cfg(not(target_arch = "x86_64"))]
#[must_use]
pub fn first_stop(block: &[u8; BLOCK]) -> (usize, bool) {
    let mut before = [0u8; 8];
    before.copy_from_slice(&block[..8]);
    let mut after = [0u8; 8];
    after.copy_from_slice(&block[8..]);
    let (low, high) = (u64::from_le_bytes(before), u64::from_le_bytes(after));
    let (n, ascii) = word_stop(low);
    if n < 8 {
        return (n, ascii);
    }
    let (m, rest) = word_stop(high);
    (8 + m, ascii && rest)
}

/// [`first_stop`] in one little-endian word (8 if none).
#[cfg(not(target_arch = "x86_64"))]
fn word_stop(word: u64) -> (usize, bool) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte below `n`: a byte above such a byte may be
    // flagged too (the borrow), so the lowest flag is exact.
    let below = |w: u64, n: u64| w.wrapping_sub(ONES * n) & !w & HIGHS;
    let stops = below(word ^ (ONES * 0x22), 1) | below(word ^ (ONES * 0x5C), 1) | below(word, 0x20);
    let n = stops.trailing_zeros() / 8;
    let mask = if n == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * n)) - 1
    };
    (n as usize, word & HIGHS & mask == 0)
}

/// From `from`, the index of the first byte that ends a run of plain string
/// bytes, or `bytes.len()`; and whether the run is all ASCII.
#[inline]
#[must_use]
pub fn plain_run(bytes: &[u8], from: usize) -> (usize, bool) {
    let mut pos = from;
    let mut ascii = true;
    loop {
        let (n, plain) = first_stop(&block_at(bytes, pos));
        ascii &= plain;
        if n < BLOCK {
            return ((pos + n).min(bytes.len()), ascii);
        }
        pos += BLOCK;
    }
}
