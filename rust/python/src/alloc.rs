//! The allocator of the Rust side, and returning its freed pages (F17).

// Events allocate many small maps and strings (parts, args, keys); mimalloc
// serves them several times faster than the system allocator (measured on
// the tool_parallel stream). Only Rust-side allocations use it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use fastagg_core::aggregate::Aggregator;

extern "C" {
    /// mimalloc's public API (linked in through the `mimalloc` crate).
    fn mi_collect(force: bool);
}

/// F17: mimalloc keeps freed pages mapped for reuse and returns them to the
/// OS only after a delay, on a later allocation. After framing dropped an
/// oversized event's buffer, ask for them now, so that process RSS comes back.
/// Only then: returning pages after every large event (or as an argument
/// grows, R4) is paid again in page faults by the next one (measured: 1.8x
/// the time of a stream of 4 MiB images).
pub(crate) fn return_freed_pages(core: &mut Aggregator) {
    if core.take_released() {
        // SAFETY: mi_collect takes no pointers and may be called at any time.
        unsafe { mi_collect(true) };
    }
}
