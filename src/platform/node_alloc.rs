//! Task-node memory: per-thread caches over a shared depot, as oneTBB's
//! small-object pool.
//!
//! Continuation passing allocates two nodes per fork and frees them soon
//! after, and with work stealing a node is often allocated on one worker
//! and freed on another. Through the system allocator that pattern is
//! slow: glibc's per-thread cache holds seven blocks per size, and a block
//! freed by another thread takes the owning arena's lock (a flat spawn loop
//! on two workers ran 3.4 times slower than on one). Here:
//!
//! * each thread keeps a stack of free blocks per size class;
//! * a thread whose stack reaches `2 * BATCH` blocks moves `BATCH` of them,
//!   as one unit, to the class's depot, a lock-free queue shared by all
//!   threads;
//! * a thread whose stack is empty takes a whole batch from the depot
//!   before it asks the system allocator.
//!
//! So blocks freed on the thief flow back to the spawner a batch at a time.
//! Invariants: a cached block has exactly its class's layout; the depot
//! holds at most `DEPOT_BATCHES` batches per class (the rest go back to the
//! system); a thread's cache moves to the depot (or the system) when the
//! thread exits, and frees arriving after that go to the system allocator.

use crossbeam_queue::SegQueue;
use std::alloc::{self, Layout};
use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Block sizes of the classes; all blocks are aligned to `CLASS_ALIGN`.
const CLASS_SIZES: [usize; 5] = [32, 64, 128, 256, 512];
const CLASSES: usize = CLASS_SIZES.len();
const CLASS_ALIGN: usize = 16;
/// Blocks moved between a thread and the depot at once.
const BATCH: usize = 64;
/// Batches the depot keeps per class.
const DEPOT_BATCHES: usize = 256;

/// Free blocks of one class, moved as a unit.
struct Batch(Vec<NonNull<u8>>);

// SAFETY: a batch holds free memory blocks that nobody else references;
// moving them to another thread moves their ownership.
unsafe impl Send for Batch {}

struct Depot {
    batches: SegQueue<Batch>,
    len: AtomicUsize,
}

static DEPOTS: [Depot; CLASSES] = [const {
    Depot {
        batches: SegQueue::new(),
        len: AtomicUsize::new(0),
    }
}; CLASSES];

impl Depot {
    fn take(&self) -> Option<Batch> {
        let batch = self.batches.pop()?;
        self.len.fetch_sub(1, Ordering::Relaxed);
        Some(batch)
    }

    /// Keep `batch`, or give its blocks back to the system if full.
    fn give(&self, batch: Batch, class: usize) {
        if self.len.fetch_add(1, Ordering::Relaxed) < DEPOT_BATCHES {
            self.batches.push(batch);
        } else {
            self.len.fetch_sub(1, Ordering::Relaxed);
            for block in batch.0 {
                // SAFETY: every cached block was allocated with this layout.
                unsafe { alloc::dealloc(block.as_ptr(), class_layout(class)) };
            }
        }
    }
}

struct Caches {
    free: [Vec<NonNull<u8>>; CLASSES],
}

impl Drop for Caches {
    fn drop(&mut self) {
        for (class, blocks) in self.free.iter_mut().enumerate() {
            let blocks = std::mem::take(blocks);
            if !blocks.is_empty() {
                DEPOTS[class].give(Batch(blocks), class);
            }
        }
    }
}

thread_local! {
    static CACHES: UnsafeCell<Caches> = const {
        UnsafeCell::new(Caches { free: [const { Vec::new() }; CLASSES] })
    };
}

fn class_layout(class: usize) -> Layout {
    // The sizes are multiples of the alignment, which is a power of two.
    Layout::from_size_align(CLASS_SIZES[class], CLASS_ALIGN).expect("valid class layout")
}

/// The class that serves `layout`, if any.
#[inline(always)]
fn class_of(layout: Layout) -> Option<usize> {
    if layout.align() > CLASS_ALIGN {
        return None;
    }
    CLASS_SIZES.iter().position(|&size| layout.size() <= size)
}

fn system_alloc(layout: Layout) -> NonNull<u8> {
    // SAFETY: callers pass layouts of non-zero size.
    NonNull::new(unsafe { alloc::alloc(layout) })
        .unwrap_or_else(|| alloc::handle_alloc_error(layout))
}

/// Memory for one node of `layout` (non-zero size).
#[inline(always)]
pub(crate) fn allocate(layout: Layout) -> NonNull<u8> {
    debug_assert!(layout.size() > 0);
    let Some(class) = class_of(layout) else {
        return system_alloc(layout);
    };
    let cached = CACHES
        .try_with(|caches| {
            // SAFETY: the cache is only touched by its own thread, and
            // neither this function nor `release` re-enters it.
            let free = unsafe { &mut (*caches.get()).free[class] };
            if free.is_empty()
                && let Some(batch) = DEPOTS[class].take()
            {
                *free = batch.0;
            }
            free.pop()
        })
        .ok()
        .flatten();
    cached.unwrap_or_else(|| system_alloc(class_layout(class)))
}

/// Give back memory from [`allocate`] with the same `layout`.
///
/// # Safety
/// `block` came from `allocate(layout)` and is not used afterwards.
#[inline(always)]
pub(crate) unsafe fn release(block: NonNull<u8>, layout: Layout) {
    let Some(class) = class_of(layout) else {
        // SAFETY: allocated by the system allocator with this very layout.
        unsafe { alloc::dealloc(block.as_ptr(), layout) };
        return;
    };
    let kept = CACHES
        .try_with(|caches| {
            // SAFETY: as in `allocate`.
            let free = unsafe { &mut (*caches.get()).free[class] };
            free.push(block);
            if free.len() >= 2 * BATCH {
                let batch = free.split_off(free.len() - BATCH);
                DEPOTS[class].give(Batch(batch), class);
            }
        })
        .is_ok();
    if !kept {
        // SAFETY: allocated with the class layout.
        unsafe { alloc::dealloc(block.as_ptr(), class_layout(class)) };
    }
}
