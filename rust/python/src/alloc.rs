//! The allocator of the Rust side, and returning its freed pages (F17, R12).

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

// RULE R20: events allocate many small maps and strings (parts, args, keys);
// with glibc's allocator instead, `interleaved` took 11 % more instructions
// and 1.16x the time per event (spec/performance.md). Only Rust-side
// allocations use it.
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
// null; `dealloc` and `realloc` get blocks these methods returned. Frees
// and growth of blocks of `huge::SIZE` bytes or more go to the `huge`
// module (R12), which tells its mappings from mimalloc's blocks, so a block
// always goes back to the side it came from. The common case pays one
// compare.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe { small_alloc(layout) }
    }

    #[inline]
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

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() >= huge::SIZE {
            // SAFETY: the same contract, forwarded.
            return unsafe { huge::dealloc(ptr, layout) };
        }
        // SAFETY: see the impl.
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.size().max(new_size) >= huge::SIZE {
            // SAFETY: the same contract, forwarded.
            return unsafe { huge::realloc(ptr, layout, new_size) };
        }
        // SAFETY: see the impl.
        unsafe { small_realloc(ptr, layout, new_size) }
    }
}

/// # Safety
/// As for `GlobalAlloc::alloc`, for a block mimalloc serves.
#[inline]
unsafe fn small_alloc(layout: Layout) -> *mut u8 {
    // SAFETY: forwarded.
    unsafe {
        if layout.align() <= WORD {
            mi_malloc(layout.size()).cast()
        } else {
            mi_malloc_aligned(layout.size(), layout.align()).cast()
        }
    }
}

/// # Safety
/// As for `GlobalAlloc::realloc`, for a block mimalloc serves before and after.
#[inline]
unsafe fn small_realloc(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    // SAFETY: forwarded.
    unsafe {
        if layout.align() <= WORD {
            mi_realloc(ptr.cast::<c_void>(), new_size).cast()
        } else {
            mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
        }
    }
}

/// RULE R12: a block that grows to 1 MiB or more becomes a mapping of its
/// own (Linux). A giant streamed argument's `String` doubles as it grows;
/// mimalloc copies each doubling into a new block and keeps the old one
/// resident for reuse, so an argument peaked at 2.3-3.7x its size (R4). A
/// mapping grows by `mremap`, which moves page-table entries instead of
/// copying bytes and leaves no freed block behind, and `munmap` returns its
/// pages at once. A block allocated at its size (an event buffer, F17; a
/// copy, a conversion) stays with mimalloc at any size: a fresh mapping
/// costs a page fault per 4 KiB when first written, where mimalloc reuses
/// resident memory (mappings for every huge block made `feed_chunk()` of a
/// 1 MB streamed argument 1.7-2.7x slower per chunk). Which side a block is
/// on: a mapped layout (by size and alignment) that mimalloc's page map does
/// not hold is a mapping. Elsewhere than Linux every block stays with
/// mimalloc (`SIZE` is then never reached).
mod huge {
    use std::alloc::Layout;
    use std::ffi::c_void;

    use libmimalloc_sys::mi_free;

    extern "C" {
        /// mimalloc's public API (in `libmimalloc-sys` behind its `extended` feature).
        fn mi_is_in_heap_region(p: *const c_void) -> bool;
    }

    /// Blocks of at least this many bytes are this module's.
    #[cfg(target_os = "linux")]
    pub(super) const SIZE: usize = 1 << 20;
    #[cfg(not(target_os = "linux"))]
    pub(super) const SIZE: usize = usize::MAX;

    /// A mapping's alignment: the smallest page size of the supported
    /// targets. A block that needs more stays with mimalloc.
    pub(super) const PAGE: usize = 4096;

    /// Whether a block of this layout is a mapping.
    pub(super) fn mapped(size: usize, align: usize) -> bool {
        size >= SIZE && align <= PAGE
    }

    /// A mapping holds whole pages.
    pub(super) fn pages(size: usize) -> usize {
        size.div_ceil(PAGE) * PAGE
    }

    /// # Safety
    /// As for `GlobalAlloc::dealloc`, with `layout.size() >= SIZE`.
    #[cold]
    #[inline(never)]
    pub(super) unsafe fn dealloc(ptr: *mut u8, layout: Layout) {
        if is_ours(ptr, layout.size(), layout.align()) {
            // SAFETY: a block of this layout that mimalloc does not own is a
            // whole mapping made by `realloc`; unmapping it cannot fail.
            unsafe { unmap(ptr, layout.size()) };
        } else {
            // SAFETY: forwarded: the block is mimalloc's.
            unsafe { mi_free(ptr.cast::<c_void>()) };
        }
    }

    /// Whether the block at `ptr` is a mapping of ours: of a mapped layout
    /// and not in mimalloc's memory (a block allocated fresh at any size is
    /// mimalloc's; only growth makes mappings).
    pub(super) fn is_ours(ptr: *mut u8, size: usize, align: usize) -> bool {
        // SAFETY: mimalloc's page map lookup takes any pointer.
        mapped(size, align) && !unsafe { mi_is_in_heap_region(ptr.cast::<c_void>()) }
    }

    /// # Safety
    /// As for `GlobalAlloc::realloc`, with the old or the new size `>= SIZE`.
    #[cold]
    #[inline(never)]
    pub(super) unsafe fn realloc(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        match (is_ours(ptr, layout.size(), align), mapped(new_size, align)) {
            // SAFETY: the block is a whole mapping of `layout.size()` bytes.
            (true, true) => unsafe { remap(ptr, layout.size(), new_size) },
            // SAFETY: the block is mimalloc's and stays so.
            (false, false) => unsafe { super::small_realloc(ptr, layout, new_size) },
            // SAFETY: `ptr` holds `layout.size()` bytes on the side `is_ours`
            // names; the new block holds `new_size`, and only the bytes both
            // hold are copied before the old block goes back to its side.
            (ours, _) => unsafe {
                let new_layout = Layout::from_size_align_unchecked(new_size, align);
                let new = if ours {
                    super::small_alloc(new_layout)
                } else {
                    map(new_size)
                };
                if !new.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    if ours {
                        unmap(ptr, layout.size());
                    } else {
                        mi_free(ptr.cast::<c_void>());
                    }
                }
                new
            },
        }
    }

    #[cfg(target_os = "linux")]
    fn map(size: usize) -> *mut u8 {
        // SAFETY: an anonymous private mapping at an address the kernel picks
        // touches no existing memory.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                pages(size),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            std::ptr::null_mut()
        } else {
            p.cast()
        }
    }

    /// # Safety
    /// `ptr` is a whole mapping made for a block of `size` bytes.
    #[cfg(target_os = "linux")]
    unsafe fn unmap(ptr: *mut u8, size: usize) {
        // SAFETY: the caller's contract.
        unsafe { libc::munmap(ptr.cast(), pages(size)) };
    }

    /// # Safety
    /// As for [`unmap`]; on success the old address is no longer valid.
    #[cfg(target_os = "linux")]
    unsafe fn remap(ptr: *mut u8, size: usize, new_size: usize) -> *mut u8 {
        let (old, new) = (pages(size), pages(new_size));
        if old == new {
            return ptr;
        }
        // SAFETY: the caller's contract; MAYMOVE lets the kernel move the
        // pages (never copying them) when the range cannot grow in place.
        let p = unsafe { libc::mremap(ptr.cast(), old, new, libc::MREMAP_MAYMOVE) };
        if p == libc::MAP_FAILED {
            std::ptr::null_mut() // the old mapping is untouched, as realloc asks
        } else {
            p.cast()
        }
    }

    // Off Linux `SIZE` is never reached, so these are never called.
    #[cfg(not(target_os = "linux"))]
    fn map(_size: usize) -> *mut u8 {
        std::ptr::null_mut()
    }

    #[cfg(not(target_os = "linux"))]
    unsafe fn unmap(_ptr: *mut u8, _size: usize) {}

    #[cfg(not(target_os = "linux"))]
    unsafe fn remap(_ptr: *mut u8, _size: usize, _new_size: usize) -> *mut u8 {
        std::ptr::null_mut()
    }
}

/// RULE R13 (binding): whether the block of `bytes` is a mapping of its own
/// (R12), whose pages [`release_front`] can return while it is read.
pub(crate) fn is_mapping(bytes: &[u8], capacity: usize) -> bool {
    // A block made at 1 MiB or more is mimalloc's (R12): only a mapping's
    // pages are given back.
    huge::is_ours(bytes.as_ptr().cast_mut(), capacity, 1)
}

/// RULE R13 (binding): returns to the OS the whole pages of `bytes` from
/// `*done` up to `upto` (rounded down to a page), and moves `*done` there:
/// a string being handed over gives back what has been read of it. Those
/// bytes read as zeros afterwards; the caller owns `bytes` and reads only
/// what lies after `upto`. Nothing happens unless [`is_mapping`] holds.
pub(crate) fn release_front(bytes: &mut Vec<u8>, done: &mut usize, upto: usize) {
    if !is_mapping(bytes, bytes.capacity()) {
        return;
    }
    let end = upto.min(bytes.len()) / huge::PAGE * huge::PAGE;
    if end > *done {
        #[cfg(target_os = "linux")]
        // SAFETY: `[done, end)` lies inside the mapping that is `bytes`'s
        // block (page aligned, `is_mapping`), which `&mut` makes ours alone;
        // MADV_DONTNEED leaves the range mapped and reading as zeros, valid
        // bytes of a `Vec<u8>`.
        unsafe {
            libc::madvise(
                bytes.as_mut_ptr().add(*done).cast(),
                end - *done,
                libc::MADV_DONTNEED,
            );
        }
        *done = end;
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
        return_freed_pages_now();
    }
}

/// F17, R13: freed pages back to the OS now. Also after a `close()` that
/// handed long strings of 8 MiB or more over (R13, `handover::COLLECT`): the
/// blocks a string grew through below 1 MiB (about 1 MiB in all) and the
/// events' buffers were freed during the feed and are still resident, just
/// before its `str` is made.
pub(crate) fn return_freed_pages_now() {
    // SAFETY: mi_collect takes no pointers and may be called at any time.
    unsafe { mi_collect(true) };
}
