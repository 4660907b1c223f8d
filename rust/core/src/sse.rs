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

use memchr::{memchr, memchr2, memchr3};

/// One result of [`BodyFramer`]. Borrowed data is valid only during the
/// sink call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A complete payload, not yet checked for UTF-8 or JSON.
    Payload { offset: u64, data: &'a [u8] },
    /// An event that exceeded max_event_bytes (F11); its bytes were not kept.
    TooLarge { offset: u64 },
    /// A framing warning, already formatted (F12 trailing data).
    Warning(String),
    /// Only from `close()`: a pending, unterminated event (F14); the
    /// aggregator parses it and decides processed / dropped.
    Unterminated { offset: u64, data: &'a [u8] },
    /// Only from `close()`: a pending event that was too large or cannot be
    /// complete (F14 drop).
    Incomplete { offset: u64 },
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

// ---------------------------------------------------------------------------
// Line splitting (shared by BodyFramer and SseDecoder)
// ---------------------------------------------------------------------------

/// WHATWG line splitter state. It owns no buffer: callers assemble lines that
/// span chunks in whatever way suits them.
#[derive(Debug, Default, Clone)]
pub(crate) struct LineSplitter {
    /// The previous chunk ended with CR: an LF at the start of the next chunk
    /// belongs to that line end.
    skip_lf: bool,
}

impl LineSplitter {
    /// Returns the next piece of `data` starting at `*i`: `(start, end,
    /// terminated)`. `terminated` means a line end follows `end` (it has been
    /// consumed); otherwise the piece runs to the end of the chunk and the
    /// line continues in the next chunk. Returns `None` when `data` is used up.
    #[inline]
    pub(crate) fn next(&mut self, data: &[u8], i: &mut usize) -> Option<(usize, usize, bool)> {
        if self.skip_lf && *i < data.len() {
            self.skip_lf = false;
            if data.get(*i) == Some(&b'\n') {
                *i += 1;
            }
        }
        let start = *i;
        let rest = data.get(start..).filter(|r| !r.is_empty())?;
        match memchr2(b'\n', b'\r', rest) {
            Some(k) => {
                let end = start + k;
                *i = end + 1;
                if rest.get(k) == Some(&b'\r') {
                    match rest.get(k + 1) {
                        Some(b'\n') => *i = end + 2,
                        Some(_) => {}
                        None => self.skip_lf = true,
                    }
                }
                Some((start, end, true))
            }
            None => {
                *i = data.len();
                Some((start, data.len(), false))
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Payload accumulator
// ---------------------------------------------------------------------------

/// The bytes of one pending payload. Keeps at most `max` bytes (the rest is
/// only counted in `len`). While all kept bytes are one range of the current
/// input chunk they are not copied (`borrowed`); `detach` copies them before
/// the chunk goes away.
#[derive(Debug, Default)]
struct Acc {
    buf: Vec<u8>,
    /// Range of the current chunk holding all kept bytes (then `buf` is empty).
    borrowed: Option<(usize, usize)>,
    /// Logical payload length so far (kept or not).
    len: u64,
    /// F9 offset of the event.
    offset: u64,
    /// `len` is the payload's length (SSE), so once it passes `max` the event
    /// is too large whatever follows: nothing more is kept and what was kept
    /// is freed (F8, F17). Array elements count trailing whitespace in `len`
    /// and give up through `content_len` instead.
    exact: bool,
    /// The event was found too large: its bytes are only counted.
    given_up: bool,
    /// The buffer of an event found too large (more than `RETAIN` of it)
    /// went back to the allocator since the last
    /// [`BodyFramer::take_released`] (F17).
    released: bool,
}

/// Buffers with more capacity than this are freed when their event ends, so a
/// large event does not keep its memory for the rest of the stream (F17).
const RETAIN: usize = 1 << 20;

impl Acc {
    #[inline]
    fn reset(&mut self, offset: u64) {
        if self.buf.capacity() > RETAIN {
            self.buf = Vec::new();
        } else {
            self.buf.clear();
        }
        self.borrowed = None;
        self.len = 0;
        self.offset = offset;
        self.given_up = false;
    }

    /// Keeps nothing more of this event and frees what was kept (F17).
    fn give_up(&mut self) {
        self.released |= self.buf.capacity() > RETAIN;
        self.buf = Vec::new();
        self.borrowed = None;
        self.given_up = true;
    }

    #[inline]
    fn kept(&self) -> usize {
        match self.borrowed {
            Some((s, e)) => e - s,
            None => self.buf.len(),
        }
    }

    /// Appends `data[s..e]` (logically), keeping bytes while fewer than `max`
    /// are kept.
    #[inline]
    fn push(&mut self, data: &[u8], s: usize, e: usize, max: usize) {
        let n = e.saturating_sub(s);
        if n == 0 {
            return;
        }
        self.len = self.len.saturating_add(n as u64);
        if self.given_up {
            return;
        }
        if self.exact && self.len > max as u64 {
            self.give_up();
            return;
        }
        let kept = self.kept();
        let take = n.min(max.saturating_sub(kept));
        if take > 0 {
            let t_end = s + take;
            match self.borrowed {
                Some((bs, be)) if be == s => self.borrowed = Some((bs, t_end)),
                Some(_) => {
                    self.detach(data, max);
                    self.extend(data.get(s..t_end).unwrap_or(&[]), max);
                }
                None if kept == 0 => self.borrowed = Some((s, t_end)),
                None => self.extend(data.get(s..t_end).unwrap_or(&[]), max),
            }
        }
    }

    /// Appends one `\n` (the join of two lines).
    #[inline]
    fn push_newline(&mut self, data: &[u8], max: usize) {
        self.len = self.len.saturating_add(1);
        if self.given_up {
            return;
        }
        if self.exact && self.len > max as u64 {
            self.give_up();
            return;
        }
        if self.kept() < max {
            self.detach(data, max);
            self.extend(b"\n", max);
        }
    }

    /// Copies borrowed bytes of the current chunk into the buffer.
    #[inline]
    fn detach(&mut self, data: &[u8], max: usize) {
        if let Some((s, e)) = self.borrowed.take() {
            self.extend(data.get(s..e).unwrap_or(&[]), max);
        }
    }

    /// Appends to `buf` (callers keep `buf.len() <= max`), growing its
    /// capacity geometrically but never past `max`, so that an event never
    /// holds more than `max` bytes of memory.
    #[inline]
    fn extend(&mut self, bytes: &[u8], max: usize) {
        let need = self.buf.len() + bytes.len();
        if need > self.buf.capacity() {
            // F17: past RETAIN, reserve the whole limit once. Untouched pages
            // cost no memory, and the doubling copies (whose freed blocks the
            // allocator keeps) stop, so the memory of one event stays within
            // the limit. A limit too large to reserve falls back to doubling.
            let eager = need > RETAIN && self.buf.try_reserve_exact(max - self.buf.len()).is_ok();
            if !eager {
                let want = need.max(self.buf.capacity().saturating_mul(2)).max(64);
                let want = want.min(max).max(need);
                self.buf.reserve_exact(want - self.buf.len());
            }
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The kept bytes; `data` must be the chunk `borrowed` refers to.
    #[inline]
    fn bytes<'a>(&'a self, data: &'a [u8]) -> &'a [u8] {
        match self.borrowed {
            Some((s, e)) => data.get(s..e).unwrap_or(&[]),
            None => &self.buf,
        }
    }
}

// ---------------------------------------------------------------------------
// SSE framing (F2-F5, F13, F14)
// ---------------------------------------------------------------------------

/// Brace counter of a bare JSON block (F4, F13). Strings are tracked over the
/// whole block text (lines joined with `\n`).
#[derive(Debug, Default, Clone)]
struct Braces {
    depth: i64,
    in_str: bool,
    esc: bool,
    /// The count came back to zero on the current line: the block ends with
    /// that line, whatever follows on it.
    balanced: bool,
}

impl Braces {
    fn scan(&mut self, bytes: &[u8]) {
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
    fn end_line(&mut self) -> bool {
        self.esc = false;
        self.balanced
    }
}

/// State of the current (partial) line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineState {
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
struct SseFramer {
    split: LineSplitter,
    line: LineState,
    /// Offset of the current line's first byte.
    line_off: u64,
    /// Pending payload: the data of an event, or a bare block.
    ev: Acc,
    /// At least one data line was collected for the current event.
    has_data: bool,
    /// A bare block is being collected.
    block: Option<Braces>,
}

impl SseFramer {
    fn new() -> Self {
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
        }
    }

    fn feed(&mut self, data: &[u8], base: u64, max: usize, sink: &mut dyn FnMut(Frame<'_>)) {
        let mut i = 0;
        while let Some((s, e, term)) = self.split.next(data, &mut i) {
            self.piece(data, base, s, e, term, max, sink);
        }
        self.ev.detach(data, max);
    }

    /// Processes `data[s..e]`, a piece of the current line, ended by a line
    /// terminator when `term`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn piece(
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
                    let want = DATA_FIELD.get(k..).unwrap_or(&[]);
                    let avail = data.get(p..e).unwrap_or(&[]);
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
                    br.scan(data.get(p..e).unwrap_or(&[]));
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
    fn start_data_line(&mut self, data: &[u8], max: usize) {
        if self.has_data {
            self.ev.push_newline(data, max);
        } else {
            self.ev.reset(self.line_off);
            self.has_data = true;
        }
    }

    /// Blank line (F2).
    #[inline]
    fn dispatch(&mut self, data: &[u8], max: usize, sink: &mut dyn FnMut(Frame<'_>)) {
        if self.has_data {
            self.has_data = false;
            self.emit_complete(data, max, sink);
        }
    }

    /// Emits the pending payload as complete and clears it.
    #[inline]
    fn emit_complete(&mut self, data: &[u8], max: usize, sink: &mut dyn FnMut(Frame<'_>)) {
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

    fn close(&mut self, max: usize, sink: &mut dyn FnMut(Frame<'_>)) {
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

// ---------------------------------------------------------------------------
// JSON-array framing (F1, F12)
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ArrState {
    /// After `[` or a top-level `,`: an element may start.
    Before,
    /// Inside an element.
    Elem,
    /// After an object/array element closed, before its `,` or `]`.
    AfterElem,
    /// After the closing `]`: only whitespace expected.
    End,
    /// Trailing data was reported; everything is ignored.
    Done,
}

/// How an element scan stopped.
enum ElemStop {
    /// The chunk was used up.
    More,
    /// Top-level `,` at this index.
    Comma(usize),
    /// The array's closing bracket at this index.
    Close(usize),
    /// The element (an object or array) closed; this index is just after it.
    Complete(usize),
}

#[derive(Debug)]
struct ArrayFramer {
    state: ArrState,
    /// Nesting inside the current element (0 = the array's top level).
    depth: u64,
    in_str: bool,
    esc: bool,
    /// The element started with `{` or `[`: it is complete when that closes.
    container: bool,
    elem: Acc,
    /// Logical length of the element up to its last non-whitespace byte.
    content_len: u64,
}

impl ArrayFramer {
    fn new() -> Self {
        ArrayFramer {
            state: ArrState::Before,
            depth: 0,
            in_str: false,
            esc: false,
            container: false,
            elem: Acc::default(),
            content_len: 0,
        }
    }

    fn feed(&mut self, data: &[u8], base: u64, max: usize, sink: &mut dyn FnMut(Frame<'_>)) {
        let mut i = 0;
        while i < data.len() {
            match self.state {
                ArrState::Before | ArrState::AfterElem => {
                    let rest = data.get(i..).unwrap_or(&[]);
                    let Some(k) = rest.iter().position(|&b| !is_ws(b)) else {
                        break;
                    };
                    let j = i + k;
                    match rest.get(k).copied().unwrap_or(b' ') {
                        b',' => {
                            self.state = ArrState::Before;
                            i = j + 1;
                        }
                        b']' | b'}' => {
                            self.state = ArrState::End;
                            i = j + 1;
                        }
                        b => {
                            self.elem.reset(base + j as u64);
                            self.container = b == b'{' || b == b'[';
                            self.depth = 0;
                            self.in_str = false;
                            self.esc = false;
                            self.content_len = 0;
                            self.state = ArrState::Elem;
                            i = j;
                        }
                    }
                }
                ArrState::Elem => {
                    let seg = i;
                    let len_before = self.elem.len;
                    let (stop, last) = self.scan(data, &mut i);
                    let end = match stop {
                        ElemStop::More => data.len(),
                        ElemStop::Comma(j) | ElemStop::Close(j) | ElemStop::Complete(j) => j,
                    };
                    self.elem.push(data, seg, end, max);
                    if let Some(l) = last {
                        self.content_len = len_before + (l - seg) as u64;
                        if self.content_len > max as u64 {
                            self.elem.give_up();
                        }
                    }
                    match stop {
                        ElemStop::More => {}
                        ElemStop::Comma(j) => {
                            self.emit(data, max, sink);
                            self.state = ArrState::Before;
                            i = j + 1;
                        }
                        ElemStop::Close(j) => {
                            self.emit(data, max, sink);
                            self.state = ArrState::End;
                            i = j + 1;
                        }
                        ElemStop::Complete(j) => {
                            self.emit(data, max, sink);
                            self.state = ArrState::AfterElem;
                            i = j;
                        }
                    }
                }
                ArrState::End => {
                    let rest = data.get(i..).unwrap_or(&[]);
                    if let Some(k) = rest.iter().position(|&b| !is_ws(b)) {
                        let o = base + (i + k) as u64;
                        sink(Frame::Warning(format!(
                            "F1: data after the end of the JSON array at byte {o} was ignored"
                        )));
                        self.state = ArrState::Done;
                    }
                    break;
                }
                ArrState::Done => break,
            }
        }
        self.elem.detach(data, max);
    }

    /// Scans element bytes from `*i`. Returns how it stopped and the index
    /// just after the last content (non-whitespace or string) byte seen.
    fn scan(&mut self, data: &[u8], i: &mut usize) -> (ElemStop, Option<usize>) {
        let len = data.len();
        let mut j = *i;
        let mut last = None;
        if self.esc && j < len {
            self.esc = false;
            j += 1;
            last = Some(j);
        }
        while j < len {
            if self.in_str {
                let rest = data.get(j..).unwrap_or(&[]);
                match memchr2(b'"', b'\\', rest) {
                    None => {
                        j = len;
                        last = Some(len);
                    }
                    Some(k) => {
                        let p = j + k;
                        if rest.get(k) == Some(&b'\\') {
                            if p + 1 < len {
                                j = p + 2;
                            } else {
                                self.esc = true;
                                j = len;
                            }
                        } else {
                            self.in_str = false;
                            j = p + 1;
                        }
                        last = Some(j);
                    }
                }
                continue;
            }
            let b = data.get(j).copied().unwrap_or(b' ');
            match b {
                b' ' | b'\t' | b'\r' | b'\n' => j += 1,
                b'"' => {
                    self.in_str = true;
                    j += 1;
                    last = Some(j);
                }
                b'{' | b'[' => {
                    self.depth += 1;
                    j += 1;
                    last = Some(j);
                }
                b'}' | b']' => {
                    if self.depth == 0 {
                        *i = j;
                        return (ElemStop::Close(j), last);
                    }
                    self.depth -= 1;
                    j += 1;
                    last = Some(j);
                    if self.depth == 0 && self.container {
                        *i = j;
                        return (ElemStop::Complete(j), last);
                    }
                }
                b',' if self.depth == 0 => {
                    *i = j;
                    return (ElemStop::Comma(j), last);
                }
                _ => {
                    j += 1;
                    last = Some(j);
                }
            }
        }
        *i = len;
        (ElemStop::More, last)
    }

    /// Emits the finished element.
    fn emit(&mut self, data: &[u8], max: usize, sink: &mut dyn FnMut(Frame<'_>)) {
        let offset = self.elem.offset;
        if self.content_len > max as u64 {
            sink(Frame::TooLarge { offset });
        } else if self.content_len > 0 {
            let kept = self.elem.bytes(data);
            let payload = kept.get(..self.content_len as usize).unwrap_or(kept);
            sink(Frame::Payload {
                offset,
                data: payload,
            });
        }
        self.elem.reset(0);
        self.content_len = 0;
    }

    fn close(&mut self, max: usize, sink: &mut dyn FnMut(Frame<'_>)) {
        if self.state == ArrState::Elem && self.content_len > 0 {
            let offset = self.elem.offset;
            if self.content_len > max as u64 {
                sink(Frame::Incomplete { offset });
            } else {
                let kept = self.elem.bytes(&[]);
                let payload = kept.get(..self.content_len as usize).unwrap_or(kept);
                sink(Frame::Unterminated {
                    offset,
                    data: payload,
                });
            }
        }
        if self.state == ArrState::Elem {
            self.state = ArrState::Before;
        }
        self.elem.reset(0);
        self.content_len = 0;
    }
}

// ---------------------------------------------------------------------------
// BodyFramer
// ---------------------------------------------------------------------------

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
    Closed,
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
                        self.sse.feed(BOM.get(..k).unwrap_or(&[]), 0, max, sink);
                    }
                }
                Mode::Lead => {
                    let rest = data.get(i..).unwrap_or(&[]);
                    match rest.iter().position(|&b| !is_ws(b)) {
                        None => {
                            self.sse.feed(rest, base + i as u64, max, sink);
                            return;
                        }
                        Some(k) => {
                            self.sse
                                .feed(rest.get(..k).unwrap_or(&[]), base + i as u64, max, sink);
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
                    let rest = data.get(i..).unwrap_or(&[]);
                    self.sse.feed(rest, base + i as u64, max, sink);
                    return;
                }
                Mode::Array => {
                    let rest = data.get(i..).unwrap_or(&[]);
                    self.array.feed(rest, base + i as u64, max, sink);
                    return;
                }
                Mode::Closed => return,
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
                self.sse.feed(BOM.get(..k).unwrap_or(&[]), 0, max, sink);
                self.sse.close(max, sink);
            }
            Mode::Sse => self.sse.close(max, sink),
            Mode::Array => self.array.close(max, sink),
            Mode::Bom(_) | Mode::Lead | Mode::Closed => {}
        }
        self.mode = Mode::Closed;
    }
}

// ---------------------------------------------------------------------------
// Generic WHATWG decoder (F15)
// ---------------------------------------------------------------------------

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
            let piece = data.get(s..e).unwrap_or(&[]);
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
                let v = line.get(c + 1..).unwrap_or(&[]);
                (
                    line.get(..c).unwrap_or(&[]),
                    v.strip_prefix(b" ").unwrap_or(v),
                )
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Owned copy of a [`Frame`], for comparisons.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum F {
        P(u64, Vec<u8>),
        Big(u64),
        W(String),
        U(u64, Vec<u8>),
        I(u64),
    }

    #[test]
    fn f17_an_oversized_event_frees_its_buffer_and_a_large_one_is_not_kept() {
        let max = 4 << 20;
        let mut framer = BodyFramer::new(max);
        let mut frames = Vec::new();
        framer.feed(b"data: {\"a\":\"", &mut |f| frames.push(own(f)));
        let piece = vec![b'x'; 64 * 1024];
        let mut peak = 0;
        for _ in 0..(2 * max / piece.len()) {
            framer.feed(&piece, &mut |f| frames.push(own(f)));
            peak = peak.max(framer.sse.ev.buf.capacity());
        }
        assert!(peak <= max, "{peak}");
        assert_eq!(framer.sse.ev.buf.capacity(), 0);
        framer.feed(b"\"}\n\n", &mut |f| frames.push(own(f)));
        assert_eq!(frames, vec![F::Big(0)]);
        // A large event that fits is delivered; its buffer is freed afterwards.
        let mut big = b"data: {\"a\":\"".to_vec();
        big.extend(vec![b'y'; 2 << 20]);
        for part in big.chunks(64 * 1024) {
            framer.feed(part, &mut |f| frames.push(own(f)));
        }
        framer.feed(b"\"}\n\n", &mut |f| frames.push(own(f)));
        assert_eq!(frames.len(), 2);
        assert_eq!(framer.sse.ev.buf.capacity(), 0);
    }

    #[test]
    fn f17_take_released_reports_each_dropped_oversized_buffer_once() {
        let mut framer = BodyFramer::new(4 << 20);
        let mut sink = |_: Frame<'_>| {};
        // A large event that fits: its buffer is freed at its end, not reported
        // (returning its pages would be paid again by the next large event).
        let piece = vec![b'x'; 64 * 1024];
        framer.feed(b"data: {\"a\":\"", &mut sink);
        for _ in 0..32 {
            framer.feed(&piece, &mut sink);
        }
        framer.feed(b"\"}\n\n", &mut sink);
        assert!(!framer.take_released());
        // An oversized one: its buffer is dropped once it passes the limit.
        framer.feed(b"data: {\"a\":\"", &mut sink);
        for _ in 0..80 {
            framer.feed(&piece, &mut sink);
        }
        assert!(framer.take_released());
        assert!(!framer.take_released());
        framer.feed(b"\"}\n\ndata: {}\n\n", &mut sink);
        assert!(!framer.take_released());
    }

    fn own(f: Frame<'_>) -> F {
        match f {
            Frame::Payload { offset, data } => F::P(offset, data.to_vec()),
            Frame::TooLarge { offset } => F::Big(offset),
            Frame::Warning(w) => F::W(w),
            Frame::Unterminated { offset, data } => F::U(offset, data.to_vec()),
            Frame::Incomplete { offset } => F::I(offset),
        }
    }

    fn p(o: u64, s: &str) -> F {
        F::P(o, s.as_bytes().to_vec())
    }

    fn u(o: u64, s: &str) -> F {
        F::U(o, s.as_bytes().to_vec())
    }

    fn frames_chunks(max: usize, chunks: &[&[u8]]) -> Vec<F> {
        let mut fr = BodyFramer::new(max);
        let mut v = Vec::new();
        for c in chunks {
            fr.feed(c, &mut |f| v.push(own(f)));
        }
        fr.close(&mut |f| v.push(own(f)));
        v
    }

    fn frames(body: &[u8]) -> Vec<F> {
        frames_chunks(1 << 20, &[body])
    }

    /// Whole, byte by byte, and in two pieces at every position: all equal.
    fn frames_all_splits(max: usize, body: &[u8]) -> Vec<F> {
        let whole = frames_chunks(max, &[body]);
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(frames_chunks(max, &bytes), whole, "1-byte chunks");
        for k in 0..=body.len() {
            let (a, b) = body.split_at(k);
            assert_eq!(frames_chunks(max, &[a, b]), whole, "split at {k}");
        }
        whole
    }

    fn decode_chunks(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c, &mut out);
        }
        d.close(&mut out);
        out
    }

    fn decode_all_splits(body: &[u8]) -> Vec<SseEvent> {
        let whole = decode_chunks(&[body]);
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(decode_chunks(&bytes), whole, "1-byte chunks");
        for k in 0..=body.len() {
            let (a, b) = body.split_at(k);
            assert_eq!(decode_chunks(&[a, b]), whole, "split at {k}");
        }
        whole
    }

    fn ev(event: &str, data: &str, id: Option<&str>, retry: Option<u64>) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
            id: id.map(Into::into),
            retry,
        }
    }

    // ----- F1 framing detection -------------------------------------------

    #[test]
    fn f1_bom_is_dropped_and_counted_in_offsets() {
        let body = b"\xEF\xBB\xBFdata: {\"a\":1}\n\n";
        assert_eq!(frames_all_splits(1000, body), vec![p(3, "{\"a\":1}")]);
    }

    #[test]
    fn f1_partial_bom_is_content_of_an_ignored_line() {
        let body = b"\xEF\xBBdata: {}\n\ndata: {\"b\":2}\n\n";
        assert_eq!(frames_all_splits(1000, body), vec![p(12, "{\"b\":2}")]);
    }

    #[test]
    fn f1_array_detected_after_bom_and_whitespace() {
        let body = b"\xEF\xBB\xBF \r\n\t[{\"a\":1}]";
        assert_eq!(frames_all_splits(1000, body), vec![p(8, "{\"a\":1}")]);
    }

    #[test]
    fn f1_decision_waits_for_first_non_whitespace_byte() {
        let got = frames_chunks(1000, &[b"  ", b"\n", b"", b"[", b"{}", b"]"]);
        assert_eq!(got, vec![p(4, "{}")]);
        let got = frames_chunks(1000, &[b"\n\n", b"data: {}", b"\n\n"]);
        assert_eq!(got, vec![p(2, "{}")]);
    }

    #[test]
    fn f1_leading_spaces_make_first_sse_line_an_unknown_field() {
        let body = b"  data: {\"x\":1}\n\ndata: {}\n\n";
        assert_eq!(frames_all_splits(1000, body), vec![p(17, "{}")]);
    }

    #[test]
    fn f1_empty_and_whitespace_bodies_give_nothing() {
        assert_eq!(frames(b""), vec![]);
        assert_eq!(frames(b" \r\n "), vec![]);
        assert_eq!(frames(b"\xEF\xBB\xBF"), vec![]);
        assert_eq!(frames(b"\xEF\xBB"), vec![]);
    }

    // ----- F2 / F3 SSE lines -----------------------------------------------

    #[test]
    fn f2_crlf_lf_and_lone_cr_end_lines() {
        let body =
            b"data: {\"a\":1}\r\n\r\ndata: {\"b\":2}\n\ndata: {\"c\":3}\r\rdata: {\"d\":4}\r\n\n";
        assert_eq!(
            frames_all_splits(1000, body),
            vec![
                p(0, "{\"a\":1}"),
                p(17, "{\"b\":2}"),
                p(32, "{\"c\":3}"),
                p(47, "{\"d\":4}"),
            ]
        );
    }

    #[test]
    fn f2_cr_lf_split_across_chunks_is_one_line_end() {
        // CR|LF split: one line end, so the event is still pending after the
        // LF and dispatched by the following blank line only.
        let got = frames_chunks(
            1000,
            &[b"data: {\"a\":1}\r", b"\ndata: {\"b\":2}\r", b"\n\r", b"\n"],
        );
        assert_eq!(got, vec![p(0, "{\"a\":1}\n{\"b\":2}")]);
        let got = frames_chunks(1000, &[b"data: {}\r", b"\n", b"\r", b"\n"]);
        assert_eq!(got, vec![p(0, "{}")]);
    }

    #[test]
    fn f2_cr_at_chunk_end_dispatches_without_waiting() {
        let mut fr = BodyFramer::new(100);
        let mut v = Vec::new();
        fr.feed(b"data: {}\r\r", &mut |f| v.push(own(f)));
        assert_eq!(v, vec![p(0, "{}")]);
        fr.feed(b"\ndata: {\"z\":0}\n\n", &mut |f| v.push(own(f)));
        fr.close(&mut |f| v.push(own(f)));
        assert_eq!(v, vec![p(0, "{}"), p(11, "{\"z\":0}")]);
    }

    #[test]
    fn f2_data_without_space_and_only_one_space_removed() {
        let body = b"data:{\"a\":1}\n\ndata:  {\"b\":2}\n\n";
        assert_eq!(
            frames_all_splits(1000, body),
            vec![p(0, "{\"a\":1}"), p(14, " {\"b\":2}")]
        );
    }

    #[test]
    fn f2_multi_line_data_joined_with_newline() {
        let body = b"data: {\"a\":\ndata:1}\r\ndata\n\n";
        assert_eq!(frames_all_splits(1000, body), vec![p(0, "{\"a\":\n1}\n")]);
    }

    #[test]
    fn f2_comments_and_other_fields_are_ignored() {
        let body = b": keep-alive\nevent: update\nid: 7\nretry: 100\ndata: {\"a\":1}\nfoo: bar\ndatax: 1\nDATA: 2\n\n: bye\n\n";
        assert_eq!(frames_all_splits(1000, body), vec![p(44, "{\"a\":1}")]);
    }

    #[test]
    fn f2_field_lines_without_data_dispatch_nothing() {
        let body = b"event: x\nid: 1\n\n\n\ndata: {}\n\n";
        assert_eq!(frames_all_splits(1000, body), vec![p(18, "{}")]);
    }

    #[test]
    fn f3_unicode_line_separators_are_content() {
        let body = "data: {\"t\":\"a\u{2028}b\u{2029}c\u{85}d\"}\r\n\r\n".as_bytes();
        assert_eq!(
            frames_all_splits(1000, body),
            vec![p(0, "{\"t\":\"a\u{2028}b\u{2029}c\u{85}d\"}")]
        );
    }

    #[test]
    fn f7_payload_is_borrowed_from_the_input_chunk() {
        let body = b"data: {\"a\":1}\r\n\r\n";
        let mut fr = BodyFramer::new(100);
        let mut seen = 0;
        fr.feed(body, &mut |f| {
            if let Frame::Payload { data, .. } = f {
                let range = body.as_ptr_range();
                assert!(range.contains(&data.as_ptr()));
                seen += 1;
            }
        });
        assert_eq!(seen, 1);
        assert!(fr.sse.ev.buf.capacity() == 0, "no copy was made");
    }

    // ----- F4 / F13 bare JSON blocks ---------------------------------------

    #[test]
    fn f4_single_line_bare_block() {
        let body = b"{\"error\": {\"code\": 429}}\n";
        assert_eq!(
            frames_all_splits(1000, body),
            vec![p(0, "{\"error\": {\"code\": 429}}")]
        );
    }

    #[test]
    fn f4_pretty_printed_block_over_several_lines() {
        let body = b"data: {\"a\":1}\r\n\r\n{\r\n  \"error\": {\r\n    \"code\": 503\r\n  }\r\n}\r\ndata: {\"b\":2}\r\n\r\n";
        assert_eq!(
            frames_all_splits(1000, body),
            vec![
                p(0, "{\"a\":1}"),
                p(17, "{\n  \"error\": {\n    \"code\": 503\n  }\n}"),
                p(59, "{\"b\":2}"),
            ]
        );
    }

    #[test]
    fn f4_braces_inside_strings_and_escapes_do_not_count() {
        let body = b"{\"m\": \"}}} \\\" {{\",\n\"n\": \"\\\\\"}\n";
        assert_eq!(
            frames_all_splits(1000, body),
            vec![p(0, "{\"m\": \"}}} \\\" {{\",\n\"n\": \"\\\\\"}")]
        );
    }

    #[test]
    fn f4_block_ends_only_at_end_of_line() {
        let body = b"{\"a\":1} trailing\nnext\n";
        assert_eq!(
            frames_all_splits(1000, body),
            vec![p(0, "{\"a\":1} trailing")]
        );
    }

    #[test]
    fn f13_block_ends_with_the_line_on_which_braces_balance() {
        let body = b"{\"error\":{}} {\ndata: {}\n\n";
        assert_eq!(
            frames_all_splits(1000, body),
            vec![p(0, "{\"error\":{}} {"), p(15, "{}")]
        );
    }

    #[test]
    fn f4_blank_and_data_lines_inside_an_open_block_belong_to_it() {
        let body = b"{\n\ndata: x\n}\n";
        assert_eq!(frames_all_splits(1000, body), vec![p(0, "{\n\ndata: x\n}")]);
    }

    #[test]
    fn f13_brace_line_inside_an_event_is_ignored() {
        let body = b"data: {\"a\":\n{\"b\":2}\ndata: 1}\n\n";
        assert_eq!(frames_all_splits(1000, body), vec![p(0, "{\"a\":\n1}")]);
    }

    // ----- F5 / F9 ignored payloads ----------------------------------------

    #[test]
    fn f5_done_is_ignored() {
        let body = b"data: {}\n\ndata: [DONE]\n\ndata:[DONE]\n\ndata: [DONE] \n\n";
        assert_eq!(
            frames_all_splits(1000, body),
            vec![p(0, "{}"), p(37, "[DONE] ")]
        );
    }

    #[test]
    fn f9_empty_and_whitespace_payloads_are_ignored() {
        let body = b"data:\n\ndata: \t \n\ndata\ndata\n\ndata: {}\n\n";
        assert_eq!(frames_all_splits(1000, body), vec![p(28, "{}")]);
    }

    // ----- F9 offsets ------------------------------------------------------

    #[test]
    fn f9_offset_is_first_data_line_of_event() {
        let body = b"event: a\r\n: c\r\ndata: 1\r\ndata: 2\r\n\r\n";
        assert_eq!(frames_all_splits(1000, body), vec![p(15, "1\n2")]);
    }

    #[test]
    fn f9_offsets_across_chunks_count_everything_fed() {
        let got = frames_chunks(1000, &[b"data: {}\n", b"\n", b"\n: x\n", b"{\n}\n"]);
        assert_eq!(got, vec![p(0, "{}"), p(15, "{\n}")]);
    }

    // ----- F12 array framing -----------------------------------------------

    #[test]
    fn f12_pretty_printed_array() {
        let body = b"[{\n  \"a\": 1\n}\n,\r\n{\n  \"b\": [1, {\"c\": \"],}\"}]\n}\n]";
        assert_eq!(
            frames_all_splits(1000, body),
            vec![
                p(1, "{\n  \"a\": 1\n}"),
                p(17, "{\n  \"b\": [1, {\"c\": \"],}\"}]\n}"),
            ]
        );
    }

    #[test]
    fn f12_element_dispatched_as_soon_as_it_is_complete() {
        let mut fr = BodyFramer::new(1000);
        let mut v = Vec::new();
        fr.feed(b"[{\"a\":1}\n", &mut |f| v.push(own(f)));
        assert_eq!(v, vec![p(1, "{\"a\":1}")]);
        fr.feed(b",\r\n{\"b\":2}", &mut |f| v.push(own(f)));
        assert_eq!(v.len(), 2);
        fr.feed(b"\n]\n", &mut |f| v.push(own(f)));
        fr.close(&mut |f| v.push(own(f)));
        assert_eq!(v, vec![p(1, "{\"a\":1}"), p(12, "{\"b\":2}")]);
    }

    #[test]
    fn f12_empty_elements_ignored_and_scalars_trimmed() {
        assert_eq!(frames_all_splits(1000, b"[]"), vec![]);
        assert_eq!(frames_all_splits(1000, b"[ , ,]"), vec![]);
        assert_eq!(
            frames_all_splits(1000, b"[ 1 , \"a,]\" ,{},]"),
            vec![p(2, "1"), p(6, "\"a,]\""), p(13, "{}")]
        );
    }

    #[test]
    fn f12_junk_after_a_complete_element_starts_a_new_element() {
        assert_eq!(
            frames_all_splits(1000, b"[{\"a\":1} x {\"b\":2}]"),
            vec![p(1, "{\"a\":1}"), p(9, "x {\"b\":2}")]
        );
    }

    #[test]
    fn f12_data_after_the_array_warns_once() {
        let body = b"[{}]\n  x\ny]\n";
        assert_eq!(
            frames_all_splits(1000, body),
            vec![
                p(1, "{}"),
                F::W("F1: data after the end of the JSON array at byte 7 was ignored".into()),
            ]
        );
        assert_eq!(frames_all_splits(1000, b"[{}] \r\n\t "), vec![p(1, "{}")]);
    }

    // ----- F11 size limit --------------------------------------------------

    #[test]
    fn f11_too_large_event_then_next_event_is_fine() {
        let body = b"data: 0123456789\n\ndata: 012345678\n\n";
        assert_eq!(
            frames_all_splits(9, body),
            vec![F::Big(0), p(18, "012345678")]
        );
    }

    #[test]
    fn f11_size_counts_joined_data_lines() {
        // "01234\n567" is 9 bytes; "01234\n5678" is 10.
        assert_eq!(
            frames_all_splits(9, b"data: 01234\ndata: 567\n\n"),
            vec![p(0, "01234\n567")]
        );
        assert_eq!(
            frames_all_splits(9, b"data: 01234\ndata: 5678\n\n"),
            vec![F::Big(0)]
        );
    }

    #[test]
    fn f11_oversize_data_line_in_tiny_chunks_is_not_buffered() {
        let max = 1000;
        let mut fr = BodyFramer::new(max);
        let mut v = Vec::new();
        fr.feed(b"data: ", &mut |f| v.push(own(f)));
        let chunk = [b'x'; 7];
        for _ in 0..20_000 {
            fr.feed(&chunk, &mut |f| v.push(own(f)));
            assert!(fr.sse.ev.buf.len() <= max);
        }
        assert!(fr.sse.ev.buf.capacity() <= max);
        for b in b"\r\n\r\ndata: {}\r\n\r\n" {
            fr.feed(std::slice::from_ref(b), &mut |f| v.push(own(f)));
        }
        fr.close(&mut |f| v.push(own(f)));
        assert_eq!(v, vec![F::Big(0), p(140_010, "{}")]);
    }

    #[test]
    fn f11_long_ignored_lines_are_not_buffered() {
        let mut body = b": ".to_vec();
        body.extend_from_slice(&[b'c'; 5000]);
        body.extend_from_slice(b"\nevent: ");
        body.extend_from_slice(&[b'e'; 5000]);
        body.extend_from_slice(b"\ndata: {}\n\n");
        let chunks: Vec<&[u8]> = body.chunks(3).collect();
        let got = frames_chunks(10, &chunks);
        assert_eq!(got, vec![p(10_011, "{}")]);
    }

    #[test]
    fn f11_block_and_array_element_too_large() {
        assert_eq!(
            frames_all_splits(10, b"{\n\"a\": 12345\n}\ndata: {}\n\n"),
            vec![F::Big(0), p(15, "{}")]
        );
        assert_eq!(
            frames_all_splits(10, b"[{\"a\":123456}, {\"b\":1}   ,\"12345678\"   ]"),
            vec![F::Big(1), p(15, "{\"b\":1}"), p(26, "\"12345678\"")]
        );
    }

    #[test]
    fn f11_trailing_whitespace_of_an_element_does_not_count() {
        let mut body = b"[1".to_vec();
        body.extend_from_slice(&[b' '; 100]);
        body.extend_from_slice(b",2]");
        let chunks: Vec<&[u8]> = body.chunks(7).collect();
        assert_eq!(frames_chunks(5, &chunks), vec![p(1, "1"), p(103, "2")]);
    }

    // ----- F14 close -------------------------------------------------------

    #[test]
    fn f14_close_with_unterminated_data_event() {
        assert_eq!(
            frames_all_splits(100, b"data: {\"a\":1}\n"),
            vec![u(0, "{\"a\":1}")]
        );
        assert_eq!(
            frames_all_splits(100, b"data: {\"a\":1}\r\ndata: 2"),
            vec![u(0, "{\"a\":1}\n2")]
        );
    }

    #[test]
    fn f14_final_line_without_line_end_is_processed() {
        assert_eq!(
            frames_all_splits(100, b"data: {}\n\ndata"),
            vec![p(0, "{}")]
        );
        assert_eq!(frames_all_splits(100, b"data: {}\n\ndat"), vec![p(0, "{}")]);
        assert_eq!(
            frames_all_splits(100, b"{\"a\": {}}"),
            vec![p(0, "{\"a\": {}}")]
        );
        assert_eq!(
            frames_all_splits(100, b"{\n\"a\": 1\n}"),
            vec![p(0, "{\n\"a\": 1\n}")]
        );
    }

    #[test]
    fn f14_pending_cr_was_already_a_line_end() {
        assert_eq!(frames_all_splits(100, b"data: {}\r\r"), vec![p(0, "{}")]);
        assert_eq!(frames_all_splits(100, b"data: {}\r"), vec![u(0, "{}")]);
    }

    #[test]
    fn f14_close_with_unbalanced_block_is_incomplete() {
        assert_eq!(
            frames_all_splits(100, b"data: {}\n\n{\n  \"error\": {\n"),
            vec![p(0, "{}"), F::I(10)]
        );
        assert_eq!(frames_all_splits(100, b"{\"a\": \"}"), vec![F::I(0)]);
    }

    #[test]
    fn f14_close_with_oversized_pending_event_is_incomplete() {
        assert_eq!(frames_all_splits(4, b"data: 12345"), vec![F::I(0)]);
        assert_eq!(frames_all_splits(4, b"[{\"a\":1"), vec![F::I(1)]);
    }

    #[test]
    fn f14_close_ignores_pending_done_and_whitespace() {
        assert_eq!(frames_all_splits(100, b"data: [DONE]"), vec![]);
        assert_eq!(frames_all_splits(100, b"data: \n"), vec![]);
    }

    #[test]
    fn f14_close_with_pending_array_element() {
        assert_eq!(
            frames_all_splits(100, b"[{\"a\":1},\n {\"b\":"),
            vec![p(1, "{\"a\":1}"), u(11, "{\"b\":")]
        );
        assert_eq!(
            frames_all_splits(100, b"[{\"a\":1},\n 12  "),
            vec![p(1, "{\"a\":1}"), u(11, "12")]
        );
        assert_eq!(
            frames_all_splits(100, b"[{\"a\":1}\n"),
            vec![p(1, "{\"a\":1}")]
        );
        assert_eq!(
            frames_all_splits(100, b"[{\"a\":\"x  "),
            vec![u(1, "{\"a\":\"x  ")]
        );
    }

    #[test]
    fn f14_feed_and_close_after_close_do_nothing() {
        let mut fr = BodyFramer::new(100);
        let mut v = Vec::new();
        fr.feed(b"data: {}", &mut |f| v.push(own(f)));
        fr.close(&mut |f| v.push(own(f)));
        fr.feed(b"\n\ndata: {}\n\n", &mut |f| v.push(own(f)));
        fr.close(&mut |f| v.push(own(f)));
        assert_eq!(v, vec![u(0, "{}")]);
    }

    // ----- F15 SseDecoder --------------------------------------------------

    #[test]
    fn f15_decoder_basic_fields() {
        let body = b"\xEF\xBB\xBFevent: add\r\nid: 1\r\nretry: 250\r\ndata: a\r\ndata:b\r\n\r\n: c\rdata: x\r\rid\nretry: 1x\ndata:  y\n\n";
        assert_eq!(
            decode_all_splits(body),
            vec![
                ev("add", "a\nb", Some("1"), Some(250)),
                ev("message", "x", Some("1"), None),
                ev("message", " y", Some(""), None),
            ]
        );
    }

    #[test]
    fn f15_decoder_empty_data_events() {
        let body = b"data\n\ndata\ndata\n\ndata:\n\n";
        assert_eq!(
            decode_all_splits(body),
            vec![
                ev("message", "", None, None),
                ev("message", "\n", None, None),
                ev("message", "", None, None),
            ]
        );
    }

    #[test]
    fn f15_decoder_event_type_and_retry_reset_without_data() {
        let body = b"event: x\nretry: 5\n\ndata: 1\n\n";
        assert_eq!(
            decode_all_splits(body),
            vec![ev("message", "1", None, None)]
        );
    }

    #[test]
    fn f15_decoder_id_with_nul_is_ignored_and_id_persists() {
        let body = b"id: a\ndata: 1\n\nid: b\x00c\ndata: 2\n\ndata: 3\n\n";
        assert_eq!(
            decode_all_splits(body),
            vec![
                ev("message", "1", Some("a"), None),
                ev("message", "2", Some("a"), None),
                ev("message", "3", Some("a"), None),
            ]
        );
    }

    #[test]
    fn f15_decoder_retry_must_be_digits() {
        let body = b"retry: 10\nretry: -1\nretry:\nretry: 99999999999999999999999\ndata: a\n\nretry: 007\ndata: b\n\n";
        assert_eq!(
            decode_all_splits(body),
            vec![
                ev("message", "a", None, Some(10)),
                ev("message", "b", None, Some(7))
            ]
        );
    }

    #[test]
    fn f15_decoder_invalid_utf8_is_replaced() {
        let body = "data: \u{e9}t\u{e9} \u{1F600}\n\n".as_bytes().to_vec();
        assert_eq!(
            decode_all_splits(&body),
            vec![ev("message", "\u{e9}t\u{e9} \u{1F600}", None, None)]
        );
        let body = b"data: a\xFFb\xE2\x82\n\n";
        assert_eq!(
            decode_all_splits(body),
            vec![ev("message", "a\u{FFFD}b\u{FFFD}", None, None)]
        );
    }

    #[test]
    fn f15_decoder_bom_only_at_start() {
        let body = b"\xEF\xBB\xBFdata: 1\n\n\xEF\xBB\xBFdata: 2\n\n";
        assert_eq!(
            decode_all_splits(body),
            vec![ev("message", "1", None, None)]
        );
    }

    #[test]
    fn f15_decoder_close_dispatches_pending_event() {
        assert_eq!(
            decode_all_splits(b"data: 1\ndata: 2"),
            vec![ev("message", "1\n2", None, None)]
        );
        assert_eq!(
            decode_all_splits(b"event: e\ndata"),
            vec![ev("e", "", None, None)]
        );
        assert_eq!(decode_all_splits(b"event: e\n"), vec![]);
        assert_eq!(
            decode_all_splits(b"data: 1\r"),
            vec![ev("message", "1", None, None)]
        );
    }

    #[test]
    fn f15_decoder_does_not_know_blocks_or_done() {
        let body = b"{\"a\":\n1}\n\ndata: [DONE]\n\n";
        assert_eq!(
            decode_all_splits(body),
            vec![ev("message", "[DONE]", None, None)]
        );
    }

    // ----- Properties (F7) -------------------------------------------------

    fn piece_strategy() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(b"data: ".to_vec()),
            Just(b"data:".to_vec()),
            Just(b"data".to_vec()),
            Just(b"da".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"\n".to_vec()),
            Just(b"\r".to_vec()),
            Just(b"\r\n\r\n".to_vec()),
            Just(b": comment".to_vec()),
            Just(b"event: e".to_vec()),
            Just(b"id: 1".to_vec()),
            Just(b"[DONE]".to_vec()),
            Just(b"{".to_vec()),
            Just(b"}".to_vec()),
            Just(b"[".to_vec()),
            Just(b"]".to_vec()),
            Just(b",".to_vec()),
            Just(b"\"".to_vec()),
            Just(b"\\".to_vec()),
            Just(b" ".to_vec()),
            Just(b"\xEF\xBB\xBF".to_vec()),
            Just("\u{e9}\u{2028}".as_bytes().to_vec()),
            Just(b"{\"a\": \"x}\"}".to_vec()),
            "[a-z0-9]{1,12}".prop_map(String::into_bytes),
        ]
    }

    fn body_strategy() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(piece_strategy(), 0..40).prop_map(|v| v.concat())
    }

    fn chunked(body: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
        cuts.sort_unstable();
        let mut out = Vec::new();
        let mut prev = 0;
        for c in cuts {
            out.push(body[prev..c].to_vec());
            prev = c;
        }
        out.push(body[prev..].to_vec());
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn f7_framer_any_split_gives_same_frames(
            body in body_strategy(),
            cuts in prop::collection::vec(any::<usize>(), 0..8),
            max in prop_oneof![Just(1usize << 20), 0usize..40],
        ) {
            let whole = frames_chunks(max, &[&body]);
            let chunks = chunked(&body, &cuts);
            let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
            prop_assert_eq!(&frames_chunks(max, &refs), &whole);
            let bytes: Vec<&[u8]> = body.chunks(1).collect();
            prop_assert_eq!(&frames_chunks(max, &bytes), &whole);
        }

        #[test]
        fn f7_array_framer_any_split_gives_same_frames(
            body in prop::collection::vec(piece_strategy(), 0..40)
                .prop_map(|v| { let mut b = b"[".to_vec(); b.extend(v.concat()); b }),
            cuts in prop::collection::vec(any::<usize>(), 0..8),
            max in prop_oneof![Just(1usize << 20), 0usize..40],
        ) {
            let whole = frames_chunks(max, &[&body]);
            let chunks = chunked(&body, &cuts);
            let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
            prop_assert_eq!(&frames_chunks(max, &refs), &whole);
            let bytes: Vec<&[u8]> = body.chunks(1).collect();
            prop_assert_eq!(&frames_chunks(max, &bytes), &whole);
        }

        #[test]
        fn f7_decoder_any_split_gives_same_events(
            body in body_strategy(),
            cuts in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            let whole = decode_chunks(&[&body]);
            let chunks = chunked(&body, &cuts);
            let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
            prop_assert_eq!(&decode_chunks(&refs), &whole);
            let bytes: Vec<&[u8]> = body.chunks(1).collect();
            prop_assert_eq!(&decode_chunks(&bytes), &whole);
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            body in prop::collection::vec(any::<u8>(), 0..512),
            cuts in prop::collection::vec(any::<usize>(), 0..8),
            max in 0usize..64,
        ) {
            let chunks = chunked(&body, &cuts);
            let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
            let whole = frames_chunks(max, &[&body]);
            prop_assert_eq!(&frames_chunks(max, &refs), &whole);
            let _ = decode_chunks(&refs);
            let mut with_bracket = b"[".to_vec();
            with_bracket.extend_from_slice(&body);
            let _ = frames_chunks(max, &[&with_bracket]);
        }
    }
}
