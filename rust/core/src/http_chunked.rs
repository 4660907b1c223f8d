//! HTTP/1.1 chunked transfer coding (RFC 9112 section 7.1), decoded as bytes
//! arrive in any split (turn-loop.md H8).
//!
//! The asyncio transport's protocol hands each socket read to
//! [`ChunkedDecoder::decode`], which appends the payload bytes it holds to
//! `out` in one pass (memchr for the line ends, one copy of each payload
//! span). Chunk extensions and trailer fields are read and dropped.

use memchr::memchr;

/// The longest chunk-size or trailer line kept while its end is awaited.
pub const MAX_LINE: usize = 4096;
/// At most this many hex digits in a chunk size (2^60 bytes): no overflow.
const MAX_DIGITS: usize = 15;

/// What is wrong with the framing; the decoder stops at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkedError {
    /// A chunk-size line that is not hexadecimal (its bytes, without CRLF).
    NotHex(Vec<u8>),
    /// A chunk-size or trailer line longer than [`MAX_LINE`].
    LineTooLong,
    /// A chunk's data not followed by CRLF.
    NoCrlf,
    /// A chunk size of more than 15 hex digits (its bytes).
    TooLarge(Vec<u8>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Size,
    Data,
    Crlf,
    Trailer,
    Done,
}

/// The decoder of one chunked body.
#[derive(Debug)]
pub struct ChunkedDecoder {
    phase: Phase,
    left: u64,
    line: Vec<u8>,
    decoded: u64,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkedDecoder {
    #[must_use]
    pub fn new() -> Self {
        Self {
            phase: Phase::Size,
            left: 0,
            line: Vec::new(),
            decoded: 0,
        }
    }

    /// The last chunk and the trailer section ended.
    #[must_use]
    pub fn done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Payload bytes decoded so far.
    #[must_use]
    pub fn decoded(&self) -> u64 {
        self.decoded
    }

    /// Append the payload in `input` to `out`; returns how many bytes of
    /// `input` belong to the body (fewer than `input.len()` only once
    /// [`done`](Self::done)). On an error the payload before it is in `out`.
    pub fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, ChunkedError> {
        let mut pos = 0;
        while pos < input.len() {
            match self.phase {
                Phase::Data => {
                    let rest = &input[pos..];
                    let take = usize::try_from(self.left).map_or(rest.len(), |l| l.min(rest.len()));
                    out.extend_from_slice(&rest[..take]);
                    pos += take;
                    self.left -= take as u64;
                    self.decoded += take as u64;
                    if self.left == 0 {
                        self.phase = Phase::Crlf;
                    }
                }
                Phase::Crlf => {
                    let take = (2 - self.line.len()).min(input.len() - pos);
                    self.line.extend_from_slice(&input[pos..pos + take]);
                    pos += take;
                    if self.line.len() == 2 {
                        if self.line != b"\r\n" {
                            return Err(ChunkedError::NoCrlf);
                        }
                        self.line.clear();
                        self.phase = Phase::Size;
                    }
                }
                Phase::Size | Phase::Trailer => {
                    let rest = &input[pos..];
                    let Some(nl) = memchr(b'\n', rest) else {
                        self.line.extend_from_slice(rest);
                        if self.line.len() > MAX_LINE {
                            return Err(ChunkedError::LineTooLong);
                        }
                        return Ok(input.len());
                    };
                    self.line.extend_from_slice(&rest[..=nl]);
                    pos += nl + 1;
                    if self.line.len() > MAX_LINE + 2 {
                        return Err(ChunkedError::LineTooLong);
                    }
                    self.end_of_line()?;
                    if self.phase == Phase::Done {
                        return Ok(pos);
                    }
                }
                Phase::Done => return Ok(pos),
            }
        }
        Ok(pos)
    }

    /// A whole line (its LF included) is in `self.line`.
    fn end_of_line(&mut self) -> Result<(), ChunkedError> {
        let line = std::mem::take(&mut self.line);
        let content = line
            .strip_suffix(b"\r\n")
            .ok_or_else(|| ChunkedError::NotHex(line[..line.len() - 1].to_vec()))?;
        if self.phase == Phase::Trailer {
            if content.is_empty() {
                self.phase = Phase::Done;
            }
            return Ok(()); // a trailer field: read and dropped
        }
        let size = content
            .split(|&b| b == b';')
            .next()
            .unwrap_or_default()
            .trim_ascii_end();
        if size.is_empty() || !size.iter().all(u8::is_ascii_hexdigit) {
            return Err(ChunkedError::NotHex(content.to_vec()));
        }
        if size.len() > MAX_DIGITS {
            return Err(ChunkedError::TooLarge(size.to_vec()));
        }
        // Only hex digits, at most 15 of them: the parse cannot fail.
        let text = std::str::from_utf8(size).unwrap_or("0");
        self.left = u64::from_str_radix(text, 16).unwrap_or(0);
        self.phase = if self.left == 0 {
            Phase::Trailer
        } else {
            Phase::Data
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Decode `input` cut at `cuts`; the payload, the bytes used, and the error if any.
    fn decode_cut(input: &[u8], cuts: &[usize]) -> (Vec<u8>, usize, Option<ChunkedError>) {
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        points.sort_unstable();
        let mut d = ChunkedDecoder::new();
        let mut out = Vec::new();
        let (mut prev, mut used) = (0, 0);
        for end in points.into_iter().chain([input.len()]) {
            match d.decode(&input[prev..end], &mut out) {
                Ok(n) => used += n,
                Err(e) => return (out, used, Some(e)),
            }
            prev = end;
        }
        (out, used, None)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn h8_valid_bodies_decode_the_same_in_any_split(
            body in prop::collection::vec(any::<u8>(), 0..600),
            size in 1usize..80,
            cuts in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            let framed = wire(&body, size);
            let (out, used, error) = decode_cut(&framed, &cuts);
            prop_assert_eq!(error, None);
            prop_assert_eq!(out, body);
            prop_assert_eq!(used, framed.len() - 4);
        }

        #[test]
        fn h8_arbitrary_bytes_never_panic_and_split_alike(
            input in prop::collection::vec(
                prop_oneof![Just(b'\r'), Just(b'\n'), Just(b';'), Just(b'0'), Just(b'a'), any::<u8>()],
                0..300,
            ),
            cuts in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            let whole = decode_cut(&input, &[]);
            let (out, _, error) = decode_cut(&input, &cuts);
            prop_assert!(out.len() <= input.len());
            // Where a split decodes to the end, so does the whole; an error is the same error.
            prop_assert_eq!(error, whole.2);
            prop_assert_eq!(out, whole.0);
        }
    }

    fn wire(body: &[u8], size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in body.chunks(size) {
            out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            out.extend_from_slice(piece);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\nX-T: 1\r\n\r\nNEXT");
        out
    }

    #[test]
    fn h8_any_split_decodes_the_same_payload_and_stops_at_the_end() {
        let body: Vec<u8> = (0..2000u32).map(|i| (i % 251) as u8).collect();
        let framed = wire(&body, 37);
        for step in [1, 2, 3, 7, 64, framed.len()] {
            let mut d = ChunkedDecoder::new();
            let mut out = Vec::new();
            let mut used = 0;
            for piece in framed.chunks(step) {
                used += d.decode(piece, &mut out).unwrap();
            }
            assert_eq!(out, body, "step {step}");
            assert!(d.done());
            assert_eq!(used, framed.len() - 4, "NEXT is beyond the body");
            assert_eq!(d.decoded(), 2000);
        }
    }

    #[test]
    fn h8_extensions_are_dropped() {
        let mut d = ChunkedDecoder::new();
        let mut out = Vec::new();
        d.decode(b"5;a=b \r\nhello\r\n0\r\n\r\n", &mut out).unwrap();
        assert_eq!((out.as_slice(), d.done()), (&b"hello"[..], true));
    }

    #[test]
    fn h8_errors_keep_the_payload_before_them() {
        let cases: [(&[u8], ChunkedError); 5] = [
            (b"2\r\nhiXX", ChunkedError::NoCrlf),
            (b"2\r\nhi\r\nzz\r\n", ChunkedError::NotHex(b"zz".to_vec())),
            (b"2\r\nhi\r\n0x5\r\n", ChunkedError::NotHex(b"0x5".to_vec())),
            (b"2\r\nhi\r\n5\n", ChunkedError::NotHex(b"5".to_vec())),
            (
                b"2\r\nhi\r\n1000000000000000\r\n",
                ChunkedError::TooLarge(b"1000000000000000".to_vec()),
            ),
        ];
        for (input, error) in cases {
            let mut d = ChunkedDecoder::new();
            let mut out = Vec::new();
            assert_eq!(d.decode(input, &mut out), Err(error));
            assert_eq!(out, b"hi");
        }
        let mut d = ChunkedDecoder::new();
        assert_eq!(
            d.decode(&[b'1'; MAX_LINE + 1], &mut Vec::new()),
            Err(ChunkedError::LineTooLong)
        );
    }
}
