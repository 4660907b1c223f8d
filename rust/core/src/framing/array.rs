//! JSON-array framing (F1, F12): the elements of a `[...]` body are the payloads.

use memchr::memchr2;

use super::lines::Acc;
use super::{is_ws, Frame};
use crate::diagnostics::Diagnostic;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ArrState {
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
pub(super) enum ElemStop {
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
pub(super) struct ArrayFramer {
    state: ArrState,
    /// Nesting inside the current element (0 = the array's top level).
    depth: u64,
    in_str: bool,
    esc: bool,
    /// The element started with `{` or `[`: it is complete when that closes.
    container: bool,
    pub(super) elem: Acc,
    /// Logical length of the element up to its last non-whitespace byte.
    content_len: u64,
}

impl ArrayFramer {
    pub(super) fn new() -> Self {
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

    pub(super) fn feed(
        &mut self,
        data: &[u8],
        base: u64,
        max: usize,
        sink: &mut dyn FnMut(Frame<'_>),
    ) {
        let mut i = 0;
        while i < data.len() {
            match self.state {
                ArrState::Before | ArrState::AfterElem => {
                    let rest = &data[i..];
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
                        // RULE F12a: an object or array element goes out at its closing bracket.
                        ElemStop::Complete(j) => {
                            self.emit(data, max, sink);
                            self.state = ArrState::AfterElem;
                            i = j;
                        }
                    }
                }
                ArrState::End => {
                    let rest = &data[i..];
                    if let Some(k) = rest.iter().position(|&b| !is_ws(b)) {
                        let o = base + (i + k) as u64;
                        sink(Frame::Warning(Diagnostic::ArrayTrailingData { offset: o }));
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
    pub(super) fn scan(&mut self, data: &[u8], i: &mut usize) -> (ElemStop, Option<usize>) {
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
                let rest = &data[j..];
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
    pub(super) fn emit(&mut self, data: &[u8], max: usize, sink: &mut dyn FnMut(Frame<'_>)) {
        let offset = self.elem.offset;
        if self.content_len > max as u64 {
            sink(Frame::TooLarge { offset });
        } else if self.content_len > 0 {
            let kept = self.elem.bytes(data);
            // content_len <= max here, and every content byte up to max was kept.
            let len = usize::try_from(self.content_len).unwrap_or(usize::MAX);
            debug_assert!(len <= kept.len(), "the element's content bytes were kept");
            let payload = &kept[..len];
            sink(Frame::Payload {
                offset,
                data: payload,
            });
        }
        self.elem.reset(0);
        self.content_len = 0;
    }

    pub(super) fn close(&mut self, max: usize, sink: &mut dyn FnMut(Frame<'_>)) {
        if self.state == ArrState::Elem && self.content_len > 0 {
            let offset = self.elem.offset;
            if self.content_len > max as u64 {
                sink(Frame::Incomplete { offset });
            } else {
                let kept = self.elem.bytes(&[]);
                // content_len <= max here, and every content byte up to max was kept.
                let len = usize::try_from(self.content_len).unwrap_or(usize::MAX);
                debug_assert!(len <= kept.len(), "the element's content bytes were kept");
                let payload = &kept[..len];
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
