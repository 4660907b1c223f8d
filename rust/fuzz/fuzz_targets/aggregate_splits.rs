//! The whole aggregator (F7): any bytes fed in any split give the same deltas
//! and result as one piece, in strict and lenient mode, and never panic.
#![no_main]

use fastagg_core::aggregate::{Aggregator, Options};
use libfuzzer_sys::fuzz_target;

fn run(pieces: &[&[u8]], opts: Options) -> (Vec<String>, String) {
    let mut agg = Aggregator::new(opts);
    let mut deltas = Vec::new();
    let mut errors = Vec::new();
    for piece in pieces {
        if let Ok(errs) = agg.feed(piece, &mut deltas) {
            errors.extend(errs.into_iter().map(|e| format!("{e:?}")));
        }
    }
    agg.finish(&mut deltas);
    let result = agg.close();
    let shown = format!("{deltas:?} {result:?}");
    (errors, shown)
}

fuzz_target!(|input: (u8, bool, &[u8])| {
    let (cut, strict, body) = input;
    let opts = Options {
        strict,
        max_event_bytes: 4096,
        max_array_index: 64,
        ..Options::default()
    };
    let step = usize::from(cut % 31) + 1;
    let pieces: Vec<&[u8]> = body.chunks(step).collect();
    assert_eq!(run(&pieces, opts), run(&[body], opts), "F7: split {step}");
});
