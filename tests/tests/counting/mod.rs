//! The system allocator, counting the bytes live at any time: the memory tests'
//! `#[global_allocator]` (each test binary that uses it declares `mod counting;` and
//! `#![allow(unsafe_code)]`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// See the module documentation.
pub(crate) struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

/// The heap bytes live now.
pub(crate) fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

// SAFETY: every method forwards to `System` unchanged and only adds bookkeeping.
#[allow(clippy::cast_possible_wrap)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
