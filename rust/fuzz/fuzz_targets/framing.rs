//! Framing (F1-F17): any bytes, split anywhere, frame exactly like one piece,
//! and an oversized event never keeps more than `max` bytes.
#![no_main]

use fastagg_core::framing::{BodyFramer, Frame};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, PartialEq, Eq)]
enum Owned {
    Payload(u64, Vec<u8>),
    TooLarge(u64),
    Warning(String),
    Unterminated(u64, Vec<u8>),
    Incomplete(u64),
}

fn own(frame: Frame<'_>) -> Owned {
    match frame {
        Frame::Payload { offset, data } => Owned::Payload(offset, data.to_vec()),
        Frame::TooLarge { offset } => Owned::TooLarge(offset),
        Frame::Warning(diagnostic) | Frame::Unreadable(diagnostic) => {
            Owned::Warning(diagnostic.message())
        }
        Frame::Unterminated { offset, data } => Owned::Unterminated(offset, data.to_vec()),
        Frame::Incomplete { offset } => Owned::Incomplete(offset),
    }
}

fn frames(pieces: &[&[u8]], max: usize) -> Vec<Owned> {
    let mut framer = BodyFramer::new(max);
    let mut out = Vec::new();
    for piece in pieces {
        framer.feed(piece, &mut |f| out.push(own(f)));
    }
    framer.close(&mut |f| out.push(own(f)));
    out
}

fuzz_target!(|input: &[u8]| {
    // First byte: max_event_bytes (small, so the limit is met); next bytes: cut points.
    let Some((&max, rest)) = input.split_first() else {
        return;
    };
    let Some((&cuts, body)) = rest.split_first() else {
        return;
    };
    let max = usize::from(max) * 4;
    let mut pieces = Vec::new();
    let mut pos = 0;
    let step = usize::from(cuts % 13) + 1;
    while pos < body.len() {
        let end = (pos + step + (pos % 5)).min(body.len());
        pieces.push(&body[pos..end]);
        pos = end;
    }
    let whole = frames(&[body], max);
    assert_eq!(frames(&pieces, max), whole, "F7: split {step}");
    for frame in &whole {
        if let Owned::Payload(_, data) | Owned::Unterminated(_, data) = frame {
            assert!(data.len() <= max, "F11: a payload over max_event_bytes");
        }
    }
});
