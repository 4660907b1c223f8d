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
//!     /// A framing warning, already formatted (F12 trailing data).
//!     Warning(String),
//!     /// Only from `close()`: a pending, unterminated event (F14); the
//!     /// aggregator parses it and decides processed / dropped.
//!     Unterminated { offset: u64, data: &'a [u8] },
//!     /// Only from `close()`: a pending event that was too large or cannot be
//!     /// complete (F14 drop).
//!     Incomplete { offset: u64 },
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
