//! The generic WHATWG `text/event-stream` decoder (F15), `fastagg.SseDecoder`.

use memchr::memchr;

use super::lines::LineSplitter;
use super::BOM;

/// One event of the generic SSE decoder.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The event type (`"message"` unless an `event` field set it).
    pub event: String,
    /// The data lines' values joined with `\n`.
    pub data: String,
    /// The last event id seen so far in the stream (None before any).
    pub id: Option<String>,
    /// The value of a valid `retry` field of this event.
    pub retry: Option<u64>,
}

/// Generic WHATWG `text/event-stream` decoder (F15). No size limit.
#[derive(Debug)]
pub struct SseDecoder {
    split: LineSplitter,
    /// Bytes of the current partial line.
    line: Vec<u8>,
    /// The next line is the first of the stream (a BOM is dropped from it).
    first_line: bool,
    data: String,
    event: String,
    last_id: Option<String>,
    retry: Option<u64>,
    closed: bool,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    #[must_use]
    pub fn new() -> Self {
        SseDecoder {
            split: LineSplitter::default(),
            line: Vec::new(),
            first_line: true,
            data: String::new(),
            event: String::new(),
            last_id: None,
            retry: None,
            closed: false,
        }
    }

    /// Decodes one chunk; complete events are appended to `out`.
    pub fn feed(&mut self, data: &[u8], out: &mut Vec<SseEvent>) {
        if self.closed {
            return;
        }
        let mut i = 0;
        while let Some((s, e, term)) = self.split.next(data, &mut i) {
            let piece = &data[s..e];
            if !term {
                self.line.extend_from_slice(piece);
            } else if self.line.is_empty() {
                self.process_line(piece, out);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(piece);
                self.process_line(&line, out);
                line.clear();
                self.line = line;
            }
        }
    }

    /// Ends the stream: a final unterminated line is processed and a pending
    /// event with data is dispatched (an extension of WHATWG, which drops it).
    pub fn close(&mut self, out: &mut Vec<SseEvent>) {
        if self.closed {
            return;
        }
        self.closed = true;
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, out);
        }
        self.dispatch(out);
    }

    fn process_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        let mut line = line;
        if self.first_line {
            self.first_line = false;
            if let Some(rest) = line.strip_prefix(BOM.as_slice()) {
                line = rest;
            }
        }
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.first() == Some(&b':') {
            return;
        }
        // ':' is ASCII, so splitting the bytes here and decoding the value
        // alone gives the same text as decoding the whole line.
        let (name, value) = match memchr(b':', line) {
            Some(c) => {
                let v = &line[c + 1..];
                (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &[][..]),
        };
        match name {
            b"data" => {
                self.data.push_str(&String::from_utf8_lossy(value));
                self.data.push('\n');
            }
            b"event" => self.event = String::from_utf8_lossy(value).into_owned(),
            b"id" if !value.contains(&0) => {
                self.last_id = Some(String::from_utf8_lossy(value).into_owned());
            }
            // Digits only, so the text is ASCII; a value too large for u64 is
            // ignored like any other invalid retry field.
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                if let Some(n) = std::str::from_utf8(value)
                    .ok()
                    .and_then(|t| t.parse::<u64>().ok())
                {
                    self.retry = Some(n);
                }
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let retry = self.retry.take();
        if self.data.is_empty() {
            self.event.clear();
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        if data.ends_with('\n') {
            data.pop();
        }
        let event = if self.event.is_empty() {
            String::from("message")
        } else {
            std::mem::take(&mut self.event)
        };
        out.push(SseEvent {
            event,
            data,
            id: self.last_id.clone(),
            retry,
        });
    }
}
