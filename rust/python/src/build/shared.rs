//! What builds share: the string cache, and the buffers kept from one build to
//! the next (a part is small: allocating its buffers anew was 5 % of its
//! build in a profile of the `streamed_args` parts).

use std::sync::{Mutex, MutexGuard};

use pyo3::prelude::*;

use super::strings::StringCache;

/// Buffers that grew beyond these capacities are dropped, not kept.
const KEEP_ITEMS: usize = 4096;
const KEEP_BYTES: usize = 64 * 1024;

pub(super) struct Shared {
    pub(super) strings: StringCache,
    items: Vec<Py<PyAny>>,
    scratch: Vec<u8>,
}

static SHARED: Mutex<Shared> = Mutex::new(Shared {
    strings: StringCache::new(),
    items: Vec::new(),
    scratch: Vec::new(),
});

/// The shared state for one build, unless it is in use. The GIL serialises
/// builds, but one can start inside another (a `__del__` run by the garbage
/// collector during an allocation), or on another thread while that code
/// released the GIL: such a build goes without it instead of waiting.
pub(super) fn lock() -> Option<MutexGuard<'static, Shared>> {
    SHARED.try_lock().ok()
}

impl Shared {
    /// The kept buffers (empty), for a build to use.
    pub(super) fn lend(&mut self) -> (Vec<Py<PyAny>>, Vec<u8>) {
        (
            std::mem::take(&mut self.items),
            std::mem::take(&mut self.scratch),
        )
    }

    /// The buffers back after a build, emptied (dropping the items left by a
    /// failed build releases them).
    pub(super) fn keep(&mut self, mut items: Vec<Py<PyAny>>, mut scratch: Vec<u8>) {
        items.clear();
        scratch.clear();
        if items.capacity() <= KEEP_ITEMS {
            self.items = items;
        }
        if scratch.capacity() <= KEEP_BYTES {
            self.scratch = scratch;
        }
    }
}
