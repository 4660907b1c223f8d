//! jsonPath (C5, C9, C16): parsing never panics; a refused write changes
//! nothing; an accepted write leaves a value at the path and pads at most 8.
#![no_main]

use fastagg_core::json_path::{self, holds_value, Segment, Write, PAD_SLACK};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

fuzz_target!(|input: (&str, &str, u32, bool)| {
    let (path, existing, max_index, append) = input;
    let max_index = max_index as usize;
    let Ok(segments) = json_path::parse(path, max_index) else {
        return;
    };
    assert!(!segments.is_empty() && segments.len() <= json_path::MAX_SEGMENTS);
    for segment in &segments {
        if let Segment::Index(i) = segment {
            assert!(*i <= max_index, "C5: index above max_array_index");
        }
    }
    let mut args = match serde_json::from_str::<Value>(existing) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let before = args.clone();
    let size_before = serde_json::to_string(&args).map_or(0, |s| s.len());
    let value = if append {
        Write::AppendString("x")
    } else {
        Write::Replace(Value::Bool(true))
    };
    match json_path::write(&mut args, &segments, value) {
        Ok(()) => {
            assert!(
                holds_value(&args, &segments),
                "C4: the value is at its path"
            );
            // Each segment adds at most one container and PAD_SLACK nulls ("null," is 5 bytes);
            // a key byte takes at most 6 bytes of JSON ("\u0000").
            let size = serde_json::to_string(&args).map_or(0, |s| s.len());
            let bound = size_before + path.len() * 6 + segments.len() * (PAD_SLACK * 5 + 16) + 16;
            assert!(size <= bound, "C16: {size} > {bound}");
        }
        Err(_) => assert_eq!(args, before, "C5: a refused write changes nothing"),
    }
});
