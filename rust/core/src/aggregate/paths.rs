//! The last few `jsonPath`s parsed (C5), kept with their segments: a call's
//! fragments repeat one path (`$.code` a thousand times), and parsing it
//! again made a vector and a string per fragment. Interleaved calls take
//! turns, so a few are kept, not one.

use std::sync::Arc;

use crate::json_path::{self, PathError, Segment};

/// How many paths are kept.
const KEPT: usize = 8;

/// Longer paths are parsed each time (a kept path is a copy of its text).
const LONGEST: usize = 256;

#[derive(Debug, Default)]
pub(super) struct PathCache {
    kept: Vec<(String, Arc<[Segment]>)>,
    /// The entry replaced next once `kept` is full.
    next: usize,
}

impl PathCache {
    /// The segments of `path`, as [`json_path::parse`] gives them (the
    /// limit `max_index` is the aggregator's, the same on every call).
    pub(super) fn parse(
        &mut self,
        path: &str,
        max_index: usize,
    ) -> Result<Arc<[Segment]>, PathError> {
        if let Some((_, segments)) = self.kept.iter().find(|(p, _)| p == path) {
            return Ok(Arc::clone(segments));
        }
        let segments: Arc<[Segment]> = json_path::parse(path, max_index)?.into();
        if path.len() <= LONGEST {
            let entry = (path.to_owned(), Arc::clone(&segments));
            if self.kept.len() < KEPT {
                self.kept.push(entry);
            } else if let Some(slot) = self.kept.get_mut(self.next) {
                *slot = entry;
                self.next = (self.next + 1) % KEPT;
            }
        }
        Ok(segments)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c5_a_kept_path_parses_as_the_path_does() {
        let mut cache = PathCache::default();
        let long = format!("$.{}", "k".repeat(LONGEST));
        // Twelve paths in turn, twice: every answer is the parser's, kept or not.
        for _ in 0..2 {
            for k in 0..12 {
                for path in [format!("$.a{k}[{k}]"), format!("$[{k}]"), long.clone()] {
                    let got = cache.parse(&path, 10).map(|s| s.to_vec());
                    assert_eq!(got, json_path::parse(&path, 10), "{path}");
                }
            }
        }
        assert_eq!(cache.kept.len(), KEPT);
        assert!(cache.kept.iter().all(|(p, _)| p.len() <= LONGEST));
        assert_eq!(
            cache.parse("$.x[11]", 10).err(),
            Some(PathError::IndexAboveMax)
        );
        assert_eq!(cache.parse("x", 10).err(), Some(PathError::Syntax));
    }
}
