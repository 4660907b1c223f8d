//! Interactions framing (interactions.md I2-I4): `event:` + `data:` lines,
//! a blank line per event, `[DONE]` at the end. Lines are found by the
//! classic framer's splitter; a line is kept only up to `max_event_bytes`
//! plus its field name, the rest is counted, so memory stays bounded.

use crate::framing::LineSplitter;

const BOM: &[u8] = b"\xEF\xBB\xBF";
/// Room for a field name and its colon beyond `max_event_bytes`.
const FIELD_ROOM: usize = 16;

/// One result of [`IxFramer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IxFrame {
    /// A complete event's data and SSE `event` name.
    Payload {
        offset: u64,
        data: Vec<u8>,
        name: Option<String>,
    },
    /// An event whose data exceeded `max_event_bytes`; its bytes were not kept.
    TooLarge { offset: u64 },
    /// The `[DONE]` sentinel (I3).
    Done,
    /// The first non-blank line after `[DONE]` (I3).
    AfterDone { offset: u64 },
    /// Only from `close()`: an event without its blank line (I4).
    Unterminated {
        offset: u64,
        data: Vec<u8>,
        name: Option<String>,
    },
}

/// Bytes in, [`IxFrame`]s out.
#[derive(Debug)]
pub struct IxFramer {
    max: usize,
    split: LineSplitter,
    /// Bytes fed before the current chunk.
    pos: u64,
    line: Vec<u8>,
    line_len: u64,
    line_start: u64,
    first_line: bool,
    data: Vec<u8>,
    data_len: u64,
    has_data: bool,
    too_large: bool,
    offset: u64,
    name: Option<String>,
    done: bool,
    after_done_reported: bool,
    closed: bool,
}

fn is_blank(data: &[u8]) -> bool {
    data.iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

impl IxFramer {
    #[must_use]
    pub fn new(max_event_bytes: usize) -> Self {
        Self {
            max: max_event_bytes,
            split: LineSplitter::default(),
            pos: 0,
            line: Vec::new(),
            line_len: 0,
            line_start: 0,
            first_line: true,
            data: Vec::new(),
            data_len: 0,
            has_data: false,
            too_large: false,
            offset: 0,
            name: None,
            done: false,
            after_done_reported: false,
            closed: false,
        }
    }

    /// The `[DONE]` sentinel was seen.
    #[must_use]
    pub fn done(&self) -> bool {
        self.done
    }

    fn keep(&mut self, piece: &[u8]) {
        let room = self
            .max
            .saturating_add(FIELD_ROOM)
            .saturating_sub(self.line.len());
        self.line.extend_from_slice(&piece[..piece.len().min(room)]);
        self.line_len = self.line_len.saturating_add(piece.len() as u64);
    }

    /// The connection dropped and a resumed body follows (I20): the partial
    /// line and event are discarded (the server replays that event after
    /// `last_event_id`); byte offsets keep counting.
    pub fn reconnect(&mut self) {
        self.split = LineSplitter::default();
        self.line.clear();
        self.line_len = 0;
        self.first_line = true;
        self.data.clear();
        self.data_len = 0;
        self.has_data = false;
        self.too_large = false;
        self.name = None;
    }

    /// Processes one chunk; frames go to `sink` in order.
    pub fn feed(&mut self, data: &[u8], sink: &mut dyn FnMut(IxFrame)) {
        if self.closed {
            return;
        }
        let base = self.pos;
        self.pos = self.pos.saturating_add(data.len() as u64);
        let mut i = 0;
        while let Some((s, e, terminated)) = self.split.next(data, &mut i) {
            if self.line_len == 0 {
                self.line_start = base + s as u64;
            }
            self.keep(&data[s..e]);
            if terminated {
                self.end_line(sink);
            }
        }
    }

    /// Ends the stream: a final line without its line end is processed and
    /// a pending event is reported as `Unterminated` (or `TooLarge`).
    pub fn close(&mut self, sink: &mut dyn FnMut(IxFrame)) {
        if self.closed {
            return;
        }
        if self.line_len > 0 {
            self.end_line(sink);
        }
        self.closed = true;
        if self.has_data && !self.done {
            let offset = self.offset;
            if self.too_large {
                sink(IxFrame::TooLarge { offset });
            } else if !is_blank(&self.data) {
                sink(IxFrame::Unterminated {
                    offset,
                    data: std::mem::take(&mut self.data),
                    name: self.name.take(),
                });
            }
        }
    }

    fn end_line(&mut self, sink: &mut dyn FnMut(IxFrame)) {
        let mut line = std::mem::take(&mut self.line);
        let mut len = self.line_len;
        self.line_len = 0;
        let mut start = 0usize;
        if self.first_line {
            self.first_line = false;
            if line.starts_with(BOM) {
                start = BOM.len();
                len -= BOM.len() as u64;
                self.line_start += BOM.len() as u64;
            }
        }
        self.line_field(&line[start..], len, sink);
        line.clear();
        self.line = line;
    }

    fn line_field(&mut self, line: &[u8], len: u64, sink: &mut dyn FnMut(IxFrame)) {
        if self.done {
            if !self.after_done_reported && !is_blank(line) {
                self.after_done_reported = true;
                sink(IxFrame::AfterDone {
                    offset: self.line_start,
                });
            }
            return;
        }
        if len == 0 {
            self.dispatch(sink);
            return;
        }
        if line.first() == Some(&b':') {
            return;
        }
        let colon = line.iter().position(|&b| b == b':');
        let (field, value_at) = match colon {
            Some(c) => {
                let skip = usize::from(line.get(c + 1) == Some(&b' '));
                (&line[..c], c + 1 + skip)
            }
            None => (line, line.len()),
        };
        let value = &line[value_at..];
        let value_len = len.saturating_sub(value_at as u64);
        match field {
            b"data" => {
                let first = !self.has_data;
                if first {
                    self.has_data = true;
                    self.offset = self.line_start;
                }
                let total = self
                    .data_len
                    .saturating_add(u64::from(!first))
                    .saturating_add(value_len);
                if total > self.max as u64 {
                    self.too_large = true;
                    self.data.clear();
                } else if !self.too_large {
                    if !first {
                        self.data.push(b'\n');
                    }
                    self.data.extend_from_slice(value);
                }
                self.data_len = total;
            }
            b"event" => self.name = Some(String::from_utf8_lossy(value).into_owned()),
            _ => {}
        }
    }

    fn dispatch(&mut self, sink: &mut dyn FnMut(IxFrame)) {
        let name = self.name.take();
        if !self.has_data {
            return;
        }
        self.has_data = false;
        self.data_len = 0;
        let offset = self.offset;
        if std::mem::take(&mut self.too_large) {
            self.data.clear();
            sink(IxFrame::TooLarge { offset });
            return;
        }
        let data = std::mem::take(&mut self.data);
        if data == b"[DONE]" {
            self.done = true;
            sink(IxFrame::Done);
        } else if !is_blank(&data) {
            sink(IxFrame::Payload { offset, data, name });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(chunks: &[&[u8]], max: usize) -> Vec<IxFrame> {
        let mut f = IxFramer::new(max);
        let mut out = Vec::new();
        for c in chunks {
            f.feed(c, &mut |x| out.push(x));
        }
        f.close(&mut |x| out.push(x));
        out
    }

    fn payload(offset: u64, data: &str, name: Option<&str>) -> IxFrame {
        IxFrame::Payload {
            offset,
            data: data.as_bytes().to_vec(),
            name: name.map(str::to_owned),
        }
    }

    #[test]
    fn i2_event_and_data_lines_any_line_end() {
        let body = b"event: a\r\ndata: {\"x\":1}\r\n\r\nevent: b\rdata:{}\r\revent: done\ndata: [DONE]\n\n";
        let want = vec![
            payload(10, "{\"x\":1}", Some("a")),
            payload(36, "{}", Some("b")),
            IxFrame::Done,
        ];
        assert_eq!(frames(&[body], 1 << 20), want);
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(frames(&bytes, 1 << 20), want);
    }

    #[test]
    fn i2_multi_data_lines_join_with_newline_and_bom_is_skipped() {
        let body = b"\xEF\xBB\xBFdata: {\"a\":\ndata: 1}\n\n";
        assert_eq!(frames(&[body], 100), vec![payload(3, "{\"a\":\n1}", None)]);
    }

    #[test]
    fn i3_data_after_done_is_reported_once() {
        let body = b"data: [DONE]\n\ndata: {}\n\ndata: {}\n\n";
        assert_eq!(
            frames(&[body], 100),
            vec![IxFrame::Done, IxFrame::AfterDone { offset: 14 }]
        );
    }

    #[test]
    fn i4_too_large_event_is_counted_not_kept() {
        let body = b"data: 0123456789\n\ndata: {}\n\n";
        assert_eq!(
            frames(&[body], 9),
            vec![IxFrame::TooLarge { offset: 0 }, payload(18, "{}", None)]
        );
        // Exactly max bytes is fine.
        assert_eq!(
            frames(&[b"data: 01234\n\n"], 5),
            vec![payload(0, "01234", None)]
        );
    }

    #[test]
    fn i4_unterminated_event_is_reported_at_close() {
        assert_eq!(
            frames(&[b"data: {\"a\""], 100),
            vec![IxFrame::Unterminated {
                offset: 0,
                data: b"{\"a\"".to_vec(),
                name: None
            }]
        );
    }
}
