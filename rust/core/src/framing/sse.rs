//! SSE framing of a Gemini body (F2-F5, F13, F14): `data:` lines and bare JSON blocks.

use memchr::{memchr2, memchr3, memmem};

use super::lines::{Acc, LineSplitter};
use super::{is_ignorable, Frame, DATA_FIELD};
use crate::diagnostics::Diagnostic;
use crate::event::parse_event;

/// U5: where two data lines ran together.
const JOIN: &[u8] = b"}data:";

/// Brace counter of a bare JSON block (F4, F13). Strings are tracked over the
/// whole block text (lines joined with `\n`).
#[derive(Debug, Default, Clone)]
pub(super) struct Braces {
    depth: i64,
    in_str: bool,
    esc: bool,
    /// The count came back to zero on the current line: the block ends with
    /// that line, whatever follows on it.
    balanced: bool,
}

impl Braces {
    pub(super) fn scan(&mut self, bytes: &[u8]) {
        let mut i = 0;
        if self.esc {
            if bytes.is_empty() {
                return;
            }
            self.esc = false;
            i = 1;
        }
        while let Some(rest) = bytes.get(i..).filter(|r| !r.is_empty()) {
            if self.in_str {
                let Some(k) = memchr2(b'"', b'\\', rest) else {
                    return;
                };
                if rest.get(k) == Some(&b'\\') {
                    if k + 1 < rest.len() {
                        i += k + 2;
                    } else {
                        self.esc = true;
                        return;
                    }
                } else {
                    self.in_str = false;
                    i += k + 1;
                }
            } else {
                let Some(k) = memchr3(b'{', b'}', b'"', rest) else {
                    return;
                };
                match rest.get(k) {
                    Some(b'{') => self.depth += 1,
                    Some(b'}') => {
                        self.depth -= 1;
                        self.balanced |= self.depth <= 0;
                    }
                    _ => self.in_str = true,
                }
                i += k + 1;
            }
        }
    }

    /// At the end of a block line: the `\n` joining it to the next line is
    /// what a pending backslash escapes. Returns whether the block is complete.
    pub(super) fn end_line(&mut self) -> bool {
        self.esc = false;
        self.balanced
    }
}

/// State of the current (partial) line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LineState {
    /// Nothing of the line seen yet.
    Start,
    /// The line starts with the first `n` bytes of `data:`.
    Head(usize),
    /// In the value of a data line; `strip` = the optional space may follow.
    Data { strip: bool },
    /// A line that is ignored (comment, other field, `{` inside an event).
    Skip,
    /// A line of a bare JSON block.
    Block,
}

#[derive(Debug)]
pub(super) struct SseFramer {
    split: LineSplitter,
    line: LineState,
    /// Offset of the current line's first byte.
    line_off: u64,
    /// Pending payload: the data of an event, or a bare block.
    pub(super) ev: Acc,
    /// At least one data line was collected for the current event.
    has_data: bool,
    /// A bare block is being collected.
    block: Option<Braces>,
    /// No line end has been seen yet: the U5 check runs on the first line.
    first_line: bool,
    /// The last bytes (up to 5) of the first line's data, to find a `}data:`
    /// split between two chunks.
    tail: Vec<u8>,
    /// U5: the body's lines came without their line ends; nothing more is framed.
    pub(super) refused: bool,
}

impl SseFramer {
    pub(super) fn new() -> Self {
        SseFramer {
            split: LineSplitter::default(),
            line: LineState::Start,
            line_off: 0,
            ev: Acc {
                exact: true,
                ..Acc::default()
            },
            has_data: false,
            block: None,
            first_line: true,
            tail: Vec::new(),
            refused: false,
        }
    }

    pub(super) fn feed(
        &mut self,
        data: &[u8],
        base: u64,
        max: usize,
        sink: &mut dyn FnMut(Frame<'_>),
    ) {
        let mut i = 0;
        while let Some((s, e, term)) = self.split.next(data, &mut i) {
            self.piece(data, base, s, e, term, max, sink);
            if self.first_line {
                if self.refused {
                    return;
                }
                self.first_line = !term;
            }
        }
        self.ev.detach(data, max);
    }

    /// U5: whether the value `data[p..e]` of the body's first line, with the
    /// value before it, holds a whole JSON object followed directly by
    /// `data:`, as lines fed without their line ends do (`data: {..}data:
    /// {..}`). Only the first `}data:` is tried (a valid stream has none
    /// after a whole object there), so each byte is looked at once, and the
    /// answer does not depend on how the body was split.
    fn joined_lines(&mut self, data: &[u8], p: usize, e: usize, max: usize) -> bool {
        // Past `max_event_bytes` no `}data:` can count any more (see below).
        let before = match usize::try_from(self.ev.len) {
            Ok(n) if !self.ev.given_up => n,
            _ => {
                self.first_line = false;
                return false;
            }
        };
        let value = &data[p..e];
        // A `}data:` that starts in the kept tail and ends in this piece.
        let mut seam = std::mem::take(&mut self.tail);
        let from_tail = seam.len();
        seam.extend_from_slice(&value[..value.len().min(JOIN.len() - 1)]);
        let end = match memmem::find(&seam, JOIN) {
            Some(k) => Some(before - from_tail + k + 1),
            None => memmem::find(value, JOIN).map(|k| before + k + 1),
        };
        let keep = seam.len().min(JOIN.len() - 1);
        let tail_start = if value.len() >= JOIN.len() - 1 {
            seam.clear();
            &value[value.len() - (JOIN.len() - 1)..]
        } else {
            seam.drain(..seam.len() - keep);
            &[][..]
        };
        seam.extend_from_slice(tail_start);
        self.tail = seam;
        let Some(end) = end else {
            return false;
        };
        // Decided at the first `}data:`, whatever it is; only when all of it
        // lies within `max_event_bytes`, so that it was kept however split.
        let joined = end + JOIN.len() - 1 <= max && {
            let mut object = self.ev.bytes(data)[..before.min(end)].to_vec();
            object.extend_from_slice(&value[..end.saturating_sub(before)]);
            object.first() == Some(&b'{') && parse_event(&object).is_ok()
        };
        // Still set when refused: `feed` then stops at once.
        self.first_line = joined;
        joined
    }

    /// Processes `data[s..e]`, a piece of the current line, ended by a line
    /// terminator when `term`.
    // The hot path of the framer: the piece's bounds and state stay in arguments and locals,
    // and one body over the line states measured faster than a helper per state (91 lines).
    #[allow(
        clippy::too_many_arguments,
        clippy::many_single_char_names,
        clippy::too_many_lines
    )]
    #[inline]
    pub(super) fn piece(
        &mut self,
        data: &[u8],
        base: u64,
        s: usize,
        e: usize,
        term: bool,
        max: usize,
        sink: &mut dyn FnMut(Frame<'_>),
    ) {
        let mut p = s;
        loop {
            match self.line {
                LineState::Start => {
                    if self.block.is_some() {
                        // Every line belongs to an unfinished bare block.
                        self.ev.push_newline(data, max);
                        self.line = LineState::Block;
                        continue;
                    }
                    let first = if p < e { data.get(p).copied() } else { None };
                    let Some(b) = first else {
                        if term {
                            self.dispatch(data, max, sink);
                        }
                        return;
                    };
                    self.line_off = base + p as u64;
                    self.line = match b {
                        b'd' => LineState::Head(0),
                        b'{' if !self.has_data => {
                            self.ev.reset(self.line_off);
                            self.block = Some(Braces::default());
                            LineState::Block
                        }
                        _ => LineState::Skip,
                    };
                }
                LineState::Head(k) => {
                    let want = &DATA_FIELD[k..];
                    let avail = &data[p..e];
                    let n = want.len().min(avail.len());
                    if avail.get(..n) != want.get(..n) {
                        self.line = LineState::Skip;
                        continue;
                    }
                    p += n;
                    let k = k + n;
                    if k == DATA_FIELD.len() {
                        self.start_data_line(data, max);
                        self.line = LineState::Data { strip: true };
                        continue;
                    }
                    // The piece is used up inside the field name.
                    if term {
                        if k == 4 {
                            // A line `data` is a data field with an empty value.
                            self.start_data_line(data, max);
                        }
                        self.line = LineState::Start;
                    } else {
                        self.line = LineState::Head(k);
                    }
                    return;
                }
                LineState::Data { mut strip } => {
                    if strip && p < e {
                        if data.get(p) == Some(&b' ') {
                            p += 1;
                        }
                        strip = false;
                    }
                    if self.first_line && self.joined_lines(data, p, e, max) {
                        self.refused = true;
                        sink(Frame::Unreadable(Diagnostic::LinesWithoutEnds {
                            offset: self.ev.offset,
                        }));
                        self.ev.reset(0);
                        self.has_data = false;
                        return;
                    }
                    self.ev.push(data, p, e, max);
                    self.line = if term {
                        LineState::Start
                    } else {
                        LineState::Data { strip }
                    };
                    return;
                }
                LineState::Skip => {
                    if term {
                        self.line = LineState::Start;
                    }
                    return;
                }
                LineState::Block => {
                    let Some(br) = self.block.as_mut() else {
                        self.line = LineState::Skip;
                        continue;
                    };
                    br.scan(&data[p..e]);
                    self.ev.push(data, p, e, max);
                    if term {
                        self.line = LineState::Start;
                        if br.end_line() {
                            self.block = None;
                            self.emit_complete(data, max, sink);
                        }
                    }
                    return;
                }
            }
        }
    }

    #[inline]
    pub(super) fn start_data_line(&mut self, data: &[u8], max: usize) {
        if self.has_data {
            self.ev.push_newline(data, max);
        } else {
            self.ev.reset(self.line_off);
            self.has_data = true;
        }
    }

    /// Blank line (F2).
    #[inline]
    pub(super) fn dispatch(&mut self, data: &[u8], max: usize, sink: &mut dyn FnMut(Frame<'_>)) {
        if self.has_data {
            self.has_data = false;
            self.emit_complete(data, max, sink);
        }
    }

    /// Emits the pending payload as complete and clears it.
    #[inline]
    pub(super) fn emit_complete(
        &mut self,
        data: &[u8],
        max: usize,
        sink: &mut dyn FnMut(Frame<'_>),
    ) {
        let offset = self.ev.offset;
        if self.ev.len > max as u64 {
            sink(Frame::TooLarge { offset });
        } else {
            let payload = self.ev.bytes(data);
            if !is_ignorable(payload) {
                sink(Frame::Payload {
                    offset,
                    data: payload,
                });
            }
        }
        self.ev.reset(0);
    }

    pub(super) fn close(&mut self, max: usize, sink: &mut dyn FnMut(Frame<'_>)) {
        // F14: a final line without a line end is processed as a line. (A
        // trailing lone CR already ended its line: the state is then Start.)
        if self.line != LineState::Start {
            self.piece(&[], 0, 0, 0, true, max, sink);
        }
        let offset = self.ev.offset;
        if self.has_data {
            if self.ev.len > max as u64 {
                sink(Frame::Incomplete { offset });
            } else {
                let payload = self.ev.bytes(&[]);
                if !is_ignorable(payload) {
                    sink(Frame::Unterminated {
                        offset,
                        data: payload,
                    });
                }
            }
        } else if self.block.is_some() {
            sink(Frame::Incomplete { offset });
        }
        self.has_data = false;
        self.block = None;
        self.line = LineState::Start;
        self.ev.reset(0);
    }
}
