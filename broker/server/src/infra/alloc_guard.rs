//! The process's global allocator: the system allocator, except that very
//! large blocks are reserved with an anonymous `MAP_NORESERVE` mapping.
//!
//! Why: the `kafka-protocol` decoders size `Vec::with_capacity` from array
//! lengths read off the wire, so a 100-byte request claiming 2^31 elements asks
//! for tens of GiB. The system allocator refuses that and Rust aborts the whole
//! process. A no-reserve mapping only reserves address space; pages are backed
//! when touched, and the frame-size cap bounds what decoding can touch (each
//! element consumes at least one wire byte). The decode then fails on the
//! missing bytes and the block is unmapped: that connection closes, the broker
//! lives on. Must not: change behaviour for ordinary (< 1 GiB) allocations.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks at least this large are served by `mmap(MAP_NORESERVE)`.
const HUGE_BLOCK: usize = 1 << 30;
const PAGE: usize = 4096;

pub struct ReservingAllocator;

fn is_huge(layout: &Layout) -> bool {
    layout.size() >= HUGE_BLOCK && layout.align() <= PAGE
}

unsafe fn map_huge(size: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping with no fixed address has no
    // preconditions; failure is reported as MAP_FAILED and turned into null.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        ptr.cast()
    }
}

// SAFETY: every block is released by the same mechanism that created it,
// decided by `is_huge(layout)`, which depends only on the layout that Rust
// passes unchanged to both alloc and dealloc. mmap returns page-aligned,
// zero-filled memory, satisfying alignments up to PAGE and alloc_zeroed.
unsafe impl GlobalAlloc for ReservingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_huge(&layout) {
            unsafe { map_huge(layout.size()) }
        } else {
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_huge(&layout) {
            unsafe { map_huge(layout.size()) }
        } else {
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_huge(&layout) {
            unsafe { libc::munmap(ptr.cast(), layout.size()) };
        } else {
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees new_size with layout.align() forms a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if !is_huge(&layout) && !is_huge(&new_layout) {
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        let new_ptr = unsafe { self.alloc(new_layout) };
        if !new_ptr.is_null() {
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new_ptr, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new_ptr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_blocks_are_reserved_not_committed() {
        let alloc = ReservingAllocator;
        // 64 GiB: more than this machine's RAM; the system allocator refuses it.
        let layout = Layout::from_size_align(64 << 30, 8).expect("valid layout");
        // SAFETY: non-zero size; the block is released with the same layout.
        unsafe {
            let p = alloc.alloc(layout);
            assert!(!p.is_null(), "a no-reserve mapping of 64 GiB must succeed");
            *p = 7;
            assert_eq!(*p, 7);
            alloc.dealloc(p, layout);
        }
    }
}
