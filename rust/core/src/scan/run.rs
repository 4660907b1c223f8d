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
/// bytes, or `bytes.len()`; and whether the run is all ASCII. The first two
/// blocks are looked at here (keys and most values end in them; going on
/// in a call after one block cost the 16-48 byte strings of `streamed_args`
/// 1.4 %); a longer run goes on in [`long_run`].
#[inline]
#[must_use]
pub fn plain_run(bytes: &[u8], from: usize) -> (usize, bool) {
    let (n, plain) = first_stop(&block_at(bytes, from));
    if n < BLOCK {
        return ((from + n).min(bytes.len()), plain);
    }
    let (m, rest) = first_stop(&block_at(bytes, from + BLOCK));
    if m < BLOCK {
        return ((from + BLOCK + m).min(bytes.len()), plain & rest);
    }
    long_run(bytes, from + 2 * BLOCK, plain & rest)
}

/// [`plain_run`] from `pos` on, the bytes before it plain (`ascii` if all
/// ASCII): on x86-64 with AVX2, 64 bytes a step (signatures are 300-1,500
/// bytes of base64, read once by the scan and once by the builder: with
/// one 16-byte block a step they were a tenth of `agentic`); 16 otherwise.
#[inline(never)]
fn long_run(bytes: &[u8], pos: usize, ascii: bool) -> (usize, bool) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was just detected.
        return unsafe { avx2::long_run(bytes, pos, ascii) };
    }
    blocks(bytes, pos, ascii)
}

/// [`plain_run`] one block at a time from `pos`.
fn blocks(bytes: &[u8], mut pos: usize, mut ascii: bool) -> (usize, bool) {
    loop {
        let (n, plain) = first_stop(&block_at(bytes, pos));
        ascii &= plain;
        if n < BLOCK {
            return ((pos + n).min(bytes.len()), ascii);
        }
        pos += BLOCK;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8, _mm256_movemask_epi8,
        _mm256_or_si256, _mm256_set1_epi8, _mm256_testz_si256,
    };

    /// The bytes of `v` that end a plain run: `"`, `\\` or below 0x20.
    #[target_feature(enable = "avx2")]
    fn stops(v: __m256i) -> __m256i {
        let quote = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(0x22));
        let backslash = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(0x5C));
        let control = _mm256_cmpeq_epi8(_mm256_min_epu8(v, _mm256_set1_epi8(0x1F)), v);
        _mm256_or_si256(_mm256_or_si256(quote, backslash), control)
    }

    /// The sign bits of the 32 bytes of `v`, as the low half of a word.
    #[target_feature(enable = "avx2")]
    fn mask(v: __m256i) -> u64 {
        u64::from(_mm256_movemask_epi8(v).cast_unsigned())
    }

    /// Sixty-four bytes a step while they are there, then one block at a time.
    #[target_feature(enable = "avx2")]
    pub(super) fn long_run(bytes: &[u8], mut pos: usize, mut ascii: bool) -> (usize, bool) {
        while let Some(chunk) = bytes.get(pos..pos + 64) {
            // SAFETY: the two loads read the 64 bytes of `chunk`, unaligned.
            #[allow(clippy::cast_ptr_alignment)] // unaligned loads
            let (a, b) = unsafe {
                let p = chunk.as_ptr();
                (
                    _mm256_loadu_si256(p.cast::<__m256i>()),
                    _mm256_loadu_si256(p.add(32).cast::<__m256i>()),
                )
            };
            let (sa, sb) = (stops(a), stops(b));
            let any = _mm256_or_si256(sa, sb);
            if _mm256_testz_si256(any, any) == 0 {
                let n = (mask(sa) | mask(sb) << 32).trailing_zeros();
                let wide = mask(a) | mask(b) << 32;
                ascii &= wide & ((1u64 << n) - 1) == 0;
                return (pos + n as usize, ascii);
            }
            ascii &= mask(_mm256_or_si256(a, b)) == 0;
            pos += 64;
        }
        super::blocks(bytes, pos, ascii)
    }
}
