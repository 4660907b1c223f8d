//! Framing: raw body bytes -> event payloads (aggregation.md F1-F7, F9-F15).
//!
//! INTERFACE (fixed; the aggregator depends on it):
//!
//! ```ignore
//! pub enum Frame<'a> {
//!     /// A complete payload, not yet checked for UTF-8 or JSON.
//!     Payload { offset: u64, data: &'a [u8] },
//!     /// An event that exceeded max_event_bytes (F11); its bytes were not kept.
//!     TooLarge { offset: u64 },
//!     /// A framing diagnostic (F12 trailing data).
//!     Warning(Diagnostic),
//!     /// Only from `close()`: a pending, unterminated event (F14); the
//!     /// aggregator parses it and decides processed / dropped.
//!     Unterminated { offset: u64, data: &'a [u8] },
//!     /// Only from `close()`: a pending event that was too large or cannot be
//!     /// complete (F14 drop).
//!     Incomplete { offset: u64 },
//!     /// U4, U5: the body as fed cannot be read; the rest is ignored.
//!     Unreadable(Diagnostic),
//! }
//! pub struct BodyFramer { .. }
//! impl BodyFramer {
//!     pub fn new(max_event_bytes: usize) -> Self;
//!     pub fn feed(&mut self, data: &[u8], sink: &mut dyn FnMut(Frame<'_>));
//!     pub fn close(&mut self, sink: &mut dyn FnMut(Frame<'_>));
//! }
//! pub struct SseEvent { pub event: String, pub data: String, pub id: Option<String>, pub retry: Option<u64> }
//! pub struct SseDecoder { .. }   // generic WHATWG decoder (F15)
//! impl SseDecoder {
//!     pub fn new() -> Self;
//!     pub fn feed(&mut self, data: &[u8], out: &mut Vec<SseEvent>);
//!     pub fn close(&mut self, out: &mut Vec<SseEvent>);
//! }
//! ```
//!
//! Design notes:
//!
//! * Both decoders share [`LineSplitter`], which only finds line ends
//!   (CRLF, LF, lone CR; a CR ending one chunk and an LF starting the next are
//!   one line end) and hands out pieces of the current chunk.
//! * The framer never buffers whole lines. Each line is classified from its
//!   first bytes (`data:` prefix, `{`, anything else) and its bytes go straight
//!   to the pending event's accumulator, which keeps at most `max_event_bytes`
//!   bytes and otherwise only counts. Ignored lines keep nothing. A payload
//!   whose bytes all lie in the current chunk is handed out as a slice of the
//!   chunk (no copy); bytes are copied only when an event spans chunks or has
//!   several data lines.
//! * Bare-block and array scanners keep their string/escape/depth state
//!   between chunks, so no byte is scanned twice.

mod array;
mod decoder;
mod lines;
mod sse;
#[cfg(test)]
mod tests;

use crate::diagnostics::Diagnostic;
use array::ArrayFramer;
pub use decoder::{SseDecoder, SseEvent};
pub(crate) use lines::LineSplitter;
use sse::SseFramer;

/// One result of [`BodyFramer`]. Borrowed data is valid only during the
/// sink call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A complete payload, not yet checked for UTF-8 or JSON.
    Payload { offset: u64, data: &'a [u8] },
    /// An event that exceeded `max_event_bytes` (F11); its bytes were not kept.
    TooLarge { offset: u64 },
    /// A framing diagnostic (F12 trailing data).
    Warning(Diagnostic),
    /// Only from `close()`: a pending, unterminated event (F14); the
    /// aggregator parses it and decides processed / dropped.
    Unterminated { offset: u64, data: &'a [u8] },
    /// Only from `close()`: a pending event that was too large or cannot be
    /// complete (F14 drop).
    Incomplete { offset: u64 },
    /// The body as fed cannot be read (U4 compressed, U5 lines without their
    /// line ends); nothing more of it is framed.
    Unreadable(Diagnostic),
}

const BOM: &[u8; 3] = b"\xEF\xBB\xBF";
const DATA_FIELD: &[u8; 5] = b"data:";

#[inline]
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// F5 / F9: `[DONE]` and empty or whitespace-only payloads are not events.
#[inline]
fn is_ignorable(payload: &[u8]) -> bool {
    payload == b"[DONE]" || payload.iter().all(|&b| is_ws(b))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// At the very start: this many bytes of a UTF-8 BOM seen (0..=2).
    Bom(usize),
    /// Only whitespace so far (after an optional BOM): framing undecided.
    /// The whitespace was given to the SSE framer, where it cannot produce
    /// frames; if the framing turns out to be an array that state is dropped.
    Lead,
    Sse,
    Array,
    /// U4: the first byte may start a gzip or zlib header; the second decides.
    Magic(u8),
    /// U4, U5: the body cannot be read; later bytes are ignored.
    Refused,
    Closed,
}

/// U4: the compression whose header starts with `first` and `second`.
fn compression(first: u8, second: u8) -> Option<&'static str> {
    match (first, second) {
        (0x1f, 0x8b) => Some("gzip"),
        (0x78, 0x01 | 0x9c | 0xda) => Some("zlib"),
        _ => None,
    }
}

/// The aggregator's framing: raw body bytes in, [`Frame`]s out.
#[derive(Debug)]
pub struct BodyFramer {
    max: usize,
    /// Bytes fed so far (BOM included).
    pos: u64,
    mode: Mode,
    sse: SseFramer,
    array: ArrayFramer,
}

impl BodyFramer {
    /// A framer that refuses payloads longer than `max_event_bytes` (F11).
    #[must_use]
    pub fn new(max_event_bytes: usize) -> Self {
        BodyFramer {
            max: max_event_bytes,
            pos: 0,
            mode: Mode::Bom(0),
            sse: SseFramer::new(),
            array: ArrayFramer::new(),
        }
    }

    /// Processes one chunk of the body; frames are given to `sink` in order.
    /// Must not be called after [`close`](Self::close) (ignored if it is).
    pub fn feed(&mut self, data: &[u8], sink: &mut dyn FnMut(Frame<'_>)) {
        if self.mode == Mode::Closed {
            return;
        }
        let base = self.pos;
        self.pos = self.pos.saturating_add(data.len() as u64);
        let max = self.max;
        let mut i = 0;
        loop {
            match self.mode {
                Mode::Bom(0) if matches!(data.get(i), Some(&(0x1f | 0x78))) => {
                    self.mode = Mode::Magic(data[i]);
                    i += 1;
                }
                Mode::Magic(first) => {
                    let Some(&second) = data.get(i) else {
                        return;
                    };
                    if let Some(encoding) = compression(first, second) {
                        self.mode = Mode::Refused;
                        sink(Frame::Unreadable(Diagnostic::CompressedBody { encoding }));
                        return;
                    }
                    // Not a header: the held byte is content (not whitespace).
                    self.mode = Mode::Sse;
                    self.sse.feed(&[first], 0, max, sink);
                }
                Mode::Bom(mut k) => {
                    while k < BOM.len() && i < data.len() && data.get(i) == BOM.get(k) {
                        k += 1;
                        i += 1;
                    }
                    if k == BOM.len() {
                        self.mode = Mode::Lead;
                    } else if i == data.len() {
                        self.mode = Mode::Bom(k);
                        return;
                    } else if k == 0 {
                        self.mode = Mode::Lead;
                    } else {
                        // Not a BOM: its first bytes (at the very start of the
                        // stream) are content, and not whitespace.
                        self.mode = Mode::Sse;
                        self.sse.feed(&BOM[..k], 0, max, sink);
                    }
                }
                Mode::Lead => {
                    let rest = &data[i..];
                    match rest.iter().position(|&b| !is_ws(b)) {
                        None => {
                            self.sse.feed(rest, base + i as u64, max, sink);
                            return;
                        }
                        Some(k) => {
                            self.sse.feed(&rest[..k], base + i as u64, max, sink);
                            i += k;
                            if rest.get(k) == Some(&b'[') {
                                self.mode = Mode::Array;
                                self.sse = SseFramer::new();
                                i += 1;
                            } else {
                                self.mode = Mode::Sse;
                            }
                        }
                    }
                }
                Mode::Sse => {
                    let rest = &data[i..];
                    self.sse.feed(rest, base + i as u64, max, sink);
                    if self.sse.refused {
                        self.mode = Mode::Refused;
                    }
                    return;
                }
                Mode::Array => {
                    let rest = &data[i..];
                    self.array.feed(rest, base + i as u64, max, sink);
                    return;
                }
                Mode::Refused | Mode::Closed => return,
            }
        }
    }

    /// Whether the buffer of an oversized event was dropped since the last
    /// call (F17): the caller may then ask its allocator to return freed
    /// pages to the OS, which allocators that keep pages for reuse do not do
    /// at once.
    pub fn take_released(&mut self) -> bool {
        std::mem::take(&mut self.sse.ev.released) | std::mem::take(&mut self.array.elem.released)
    }

    /// Ends the stream (F14): processes a final unterminated line and reports
    /// a pending event as `Unterminated` or `Incomplete`. Later calls of
    /// `feed` and `close` do nothing.
    pub fn close(&mut self, sink: &mut dyn FnMut(Frame<'_>)) {
        let max = self.max;
        match self.mode {
            Mode::Bom(k) if k > 0 => {
                self.sse.feed(&BOM[..k], 0, max, sink);
                self.sse.close(max, sink);
            }
            Mode::Magic(first) => {
                self.sse.feed(&[first], 0, max, sink);
                self.sse.close(max, sink);
            }
            Mode::Sse => self.sse.close(max, sink),
            Mode::Array => self.array.close(max, sink),
            Mode::Bom(_) | Mode::Lead | Mode::Refused | Mode::Closed => {}
        }
        self.mode = Mode::Closed;
    }
}
