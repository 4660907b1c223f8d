//! The allocator of the Rust side, and returning its freed pages (F17).

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use fastagg_core::aggregate::Aggregator;
use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc,
    mi_zalloc_aligned,
};

extern "C" {
    /// mimalloc's public API (in `libmimalloc-sys` behind a feature that
    /// needs one more crate).
    fn mi_collect(force: bool);
}

// Events allocate many small maps and strings (parts, args, keys); mimalloc
// serves them several times faster than the system allocator (measured on
// the tool_parallel stream). Only Rust-side allocations use it.
#[global_allocator]
static GLOBAL: Mimalloc = Mimalloc;

/// mimalloc, asked for alignment only when a type needs more than a word.
/// Every mimalloc block is word aligned, so the plain calls serve nearly all
/// of Rust's allocations; the `mimalloc` crate's allocator always called the
/// aligned ones, which leave their fast path for any block over 1 KiB or a
/// page with no free block yet (on `text`, 58 % of the allocations of one
/// event's skeleton took that slow path, about 140 instructions each).
struct Mimalloc;

/// Alignment every mimalloc block has (its blocks are whole words).
const WORD: usize = std::mem::size_of::<usize>();

// SAFETY: each method forwards to the mimalloc call with the contract the
// trait asks for: a block of at least `layout.size()` bytes aligned to
// `layout.align()` (plain calls only where a word's alignment suffices), or
// null; `dealloc` and `realloc` get blocks these methods returned.
unsafe impl GlobalAlloc for Mimalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= WORD {
                mi_malloc(layout.size()).cast()
            } else {
                mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= WORD {
                mi_zalloc(layout.size()).cast()
            } else {
                mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: see the impl.
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= WORD {
                mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
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
