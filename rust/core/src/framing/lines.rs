//! Line splitting (shared by the framer and `SseDecoder`) and the payload
//! accumulator that keeps at most `max_event_bytes` bytes of an event (F11, F17).

use memchr::memchr2;

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
        if let Some(k) = memchr2(b'\n', b'\r', rest) {
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
        } else {
            *i = data.len();
            Some((start, data.len(), false))
        }
    }
}

/// The bytes of one pending payload. Keeps at most `max` bytes (the rest is
/// only counted in `len`). While all kept bytes are one range of the current
/// input chunk they are not copied (`borrowed`); `detach` copies them before
/// the chunk goes away.
#[derive(Debug, Default)]
pub(super) struct Acc {
    pub(super) buf: Vec<u8>,
    /// Range of the current chunk holding all kept bytes (then `buf` is empty).
    pub(super) borrowed: Option<(usize, usize)>,
    /// Logical payload length so far (kept or not).
    pub(super) len: u64,
    /// F9 offset of the event.
    pub(super) offset: u64,
    /// `len` is the payload's length (SSE), so once it passes `max` the event
    /// is too large whatever follows: nothing more is kept and what was kept
    /// is freed (F8, F17). Array elements count trailing whitespace in `len`
    /// and give up through `content_len` instead.
    pub(super) exact: bool,
    /// The event was found too large: its bytes are only counted.
    pub(super) given_up: bool,
    /// The buffer of an event found too large (more than `RETAIN` of it)
    /// went back to the allocator since the last
    /// [`BodyFramer::take_released`](super::BodyFramer::take_released) (F17).
    pub(super) released: bool,
}

/// Buffers with more capacity than this are freed when their event ends, so a
/// large event does not keep its memory for the rest of the stream (F17).
pub(super) const RETAIN: usize = 1 << 20;

impl Acc {
    #[inline]
    pub(super) fn reset(&mut self, offset: u64) {
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
    pub(super) fn give_up(&mut self) {
        self.released |= self.buf.capacity() > RETAIN;
        self.buf = Vec::new();
        self.borrowed = None;
        self.given_up = true;
    }

    #[inline]
    pub(super) fn kept(&self) -> usize {
        match self.borrowed {
            Some((s, e)) => e - s,
            None => self.buf.len(),
        }
    }

    /// Appends `data[s..e]` (logically), keeping bytes while fewer than `max`
    /// are kept.
    #[inline]
    pub(super) fn push(&mut self, data: &[u8], s: usize, e: usize, max: usize) {
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
                    self.extend(&data[s..t_end], max);
                }
                None if kept == 0 => self.borrowed = Some((s, t_end)),
                None => self.extend(&data[s..t_end], max),
            }
        }
    }

    /// Appends one `\n` (the join of two lines).
    #[inline]
    pub(super) fn push_newline(&mut self, data: &[u8], max: usize) {
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
    pub(super) fn detach(&mut self, data: &[u8], max: usize) {
        if let Some((s, e)) = self.borrowed.take() {
            self.extend(&data[s..e], max);
        }
    }

    /// Appends to `buf` (callers keep `buf.len() <= max`), growing its
    /// capacity geometrically but never past `max`, so that an event never
    /// holds more than `max` bytes of memory.
    #[inline]
    pub(super) fn extend(&mut self, bytes: &[u8], max: usize) {
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
    pub(super) fn bytes<'a>(&'a self, data: &'a [u8]) -> &'a [u8] {
        match self.borrowed {
            Some((s, e)) => &data[s..e],
            None => &self.buf,
        }
    }
}
