//! Per-thread caches of task-node memory, as oneTBB's small-object pool.
//!
//! Continuation passing allocates two nodes per fork and frees them a few
//! hundred nanoseconds later, often in bursts; the system allocator's
//! per-thread cache is small (seven blocks per size in glibc), so most
//! frees took its slow path. Here each thread keeps a bounded stack of free
//! blocks for a few size classes. A block freed on another thread simply
//! joins that thread's cache: every block of a class has the same layout,
//! so any thread may reuse or release it.
//!
//! Invariants: a cached block has exactly its class's layout; a cache never
//! holds more than `CACHE_CAP` blocks per class (the rest go back to the
//! system allocator); a thread's cache is released when the thread exits,
//! and frees that arrive after that go straight to the system allocator.

use std::alloc::{self, Layout};
use std::cell::UnsafeCell;
use std::ptr::NonNull;

/// Block sizes of the classes; all blocks are aligned to `CLASS_ALIGN`.
const CLASS_SIZES: [usize; 4] = [64, 128, 256, 512];
const CLASS_ALIGN: usize = 16;
/// Free blocks a thread keeps per class.
const CACHE_CAP: usize = 1024;

struct Caches {
    free: [Vec<NonNull<u8>>; CLASS_SIZES.len()],
}

impl Drop for Caches {
    fn drop(&mut self) {
        for (class, blocks) in self.free.iter_mut().enumerate() {
            for block in blocks.drain(..) {
                // SAFETY: every cached block was allocated with this layout.
                unsafe { alloc::dealloc(block.as_ptr(), class_layout(class)) };
            }
        }
    }
}

thread_local! {
    static CACHES: UnsafeCell<Caches> = const {
        UnsafeCell::new(Caches { free: [const { Vec::new() }; CLASS_SIZES.len()] })
    };
}

fn class_layout(class: usize) -> Layout {
    // The sizes are multiples of the alignment, which is a power of two.
    Layout::from_size_align(CLASS_SIZES[class], CLASS_ALIGN).expect("valid class layout")
}

/// The class that serves `layout`, if any.
#[inline]
fn class_of(layout: Layout) -> Option<usize> {
    if layout.align() > CLASS_ALIGN {
        return None;
    }
    CLASS_SIZES.iter().position(|&size| layout.size() <= size)
}

/// Memory for one node of `layout` (non-zero size).
#[inline]
pub(crate) fn allocate(layout: Layout) -> NonNull<u8> {
    debug_assert!(layout.size() > 0);
    let Some(class) = class_of(layout) else {
        // SAFETY: non-zero size, checked by the caller's type.
        return NonNull::new(unsafe { alloc::alloc(layout) })
            .unwrap_or_else(|| alloc::handle_alloc_error(layout));
    };
    let cached = CACHES
        .try_with(|caches| {
            // SAFETY: the cache is only touched by its own thread, and
            // neither this function nor `release` re-enters it.
            unsafe { (*caches.get()).free[class].pop() }
        })
        .ok()
        .flatten();
    cached.unwrap_or_else(|| {
        let layout = class_layout(class);
        // SAFETY: the class layout has a non-zero size.
        NonNull::new(unsafe { alloc::alloc(layout) })
            .unwrap_or_else(|| alloc::handle_alloc_error(layout))
    })
}

/// Give back memory from [`allocate`] with the same `layout`.
///
/// # Safety
/// `block` came from `allocate(layout)` and is not used afterwards.
#[inline]
pub(crate) unsafe fn release(block: NonNull<u8>, layout: Layout) {
    let Some(class) = class_of(layout) else {
        // SAFETY: allocated by `alloc` with this very layout.
        unsafe { alloc::dealloc(block.as_ptr(), layout) };
        return;
    };
    let kept = CACHES
        .try_with(|caches| {
            // SAFETY: as in `allocate`.
            let free = unsafe { &mut (*caches.get()).free[class] };
            if free.len() < CACHE_CAP {
                free.push(block);
                true
            } else {
                false
            }
        })
        .unwrap_or(false);
    if !kept {
        // SAFETY: allocated with the class layout.
        unsafe { alloc::dealloc(block.as_ptr(), class_layout(class)) };
    }
}
