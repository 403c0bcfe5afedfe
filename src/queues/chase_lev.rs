//! The per-worker deque itself: a Chase-Lev deque (crossbeam-deque's
//! algorithm) that keeps every buffer it outgrew until it is dropped.
//!
//! Why not crossbeam-deque: its thieves pin crossbeam's epoch collector on
//! every `steal`, and a thread's every 128th pin runs `Global::collect`,
//! which can allocate: a queue node when the garbage it unlinks (the
//! records of exited threads, queue nodes) overflows the thread's bag,
//! and under ThreadSanitizer a `Vec` in every `try_advance`. So any steal,
//! by an idle worker or inside a `join`, could allocate, and
//! `tests/join.rs`'s `join_allocates_nothing` failed now and then (caught
//! under TSan: `Stealer::steal` -> `epoch::pin` -> `Global::collect` ->
//! `try_advance` -> `Vec::push`). The epoch protects one thing there: a
//! buffer the owner replaced while a thief may still read it. Here a
//! replaced buffer is never freed before the deque, so nothing needs
//! protecting and no operation pins, defers or collects; only a push that
//! grows the buffer allocates. The price is memory: the buffers outgrown,
//! which add up to less than the current one (each is twice the last), and
//! the buffer does not shrink.
//!
//! A slot is two atomic words, not a `T` behind an `UnsafeCell`: a thief
//! may read a slot that the owner is rewriting (after the ring wrapped),
//! then lose its claim and drop what it read. With atomic words that read
//! is a race the memory model allows, so neither ThreadSanitizer nor Miri
//! has anything to report, where crossbeam needs a volatile read.
//!
//! A deque nobody steals from (the one deque of a pool with one worker
//! slot: rule 6 has no other worker to visit) is made `unshared`: its pop
//! is the LIFO pop without the SeqCst fence and the claim of the last
//! item, which exist only to arbitrate with thieves. The fence is most
//! of a fork-join's cost on one worker (half of `join`'s samples fall on
//! the load after it).
//!
//! A shared LIFO deque has two modes, so that the owner's pop pays its
//! fence only while thieves are about. In the *fast* mode the pop's
//! StoreLoad fence is the light half of an asymmetric fence
//! (`platform/asymmetric_fence.rs`): a compiler barrier, with each thief
//! paying a `membarrier` system call (about 9 us) instead. In the *fenced*
//! mode the pop has its SeqCst fence and thieves have theirs, as in
//! crossbeam. The owner leaves the fast mode at the first pop that finds
//! `front` moved (a thief stole), and goes back after a few thousand
//! fenced pops without a steal (`pop_mode.rs`). A fork-join whose steals are rare (fib(30) on two
//! workers: a handful of steals against a million pops) runs fast; a
//! deque thieves drain all the time stays fenced, and its thieves pay a
//! system call once a mode change, not once a steal. Where the kernel
//! has no such barrier, every shared deque stays fenced.
//!
//! The mode changes race with thieves too. A thief reads `front`, then
//! fences, then reads the mode, then `back`. Going fenced, the owner
//! publishes the mode with Release after its last fast pop, so a thief
//! that reads "fenced" also sees that pop's `back`. Going fast, the owner
//! publishes the mode and fences before its first fast pop; a thief that
//! still reads "fenced" fenced before that, so the `front` it read is one
//! the owner's fast pops see too, and the owner claims that index with a
//! CAS like any thief (the last-item path) rather than taking it. Neither
//! change needs a handshake with the thieves. `tests/loom_deque.rs` checks
//! both modes and the changes between them.
//!
//! Invariants: only the owner (the one `Worker`) pushes, pops, grows the
//! buffer and changes the mode; `front` never decreases, so a thief's
//! claim (a CAS of `front` from the index it read) fails if anyone took
//! that index first; every buffer ever installed lives until the last
//! handle is dropped; nobody calls `steal` on an unshared deque, so its
//! `front` never moves; while `fenced` is false, every thief runs the
//! heavy barrier between its loads of `front` and `back`.

#![cfg_attr(loom, allow(dead_code))]

use super::deque::{Steal, Words};
use super::pop_mode::{PopMode, SharedMode};
use crate::platform::asymmetric_fence::AsymmetricFence;
use crate::platform::sync::{Arc, AtomicIsize, AtomicPtr, Ordering, fence};
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

/// The smallest buffer, as crossbeam's. (Four in the loom model, whose
/// every slot is a modelled atomic, and which should see the buffer grow.)
const MIN_CAP: usize = if cfg!(loom) { 4 } else { 64 };

type Slot = [AtomicPtr<()>; 2];

/// A ring of slots, and the buffer it replaced (freed with it).
struct Buffer {
    slots: Box<[Slot]>,
    /// The buffer this one replaced, or null.
    outgrown: *mut Buffer,
}

impl Buffer {
    fn alloc(cap: usize, outgrown: *mut Buffer) -> *mut Buffer {
        debug_assert!(cap.is_power_of_two());
        let slots = (0..cap)
            .map(|_| [AtomicPtr::default(), AtomicPtr::default()])
            .collect();
        Box::into_raw(Box::new(Buffer { slots, outgrown }))
    }

    #[inline]
    fn slot(&self, index: isize) -> &Slot {
        // The capacity is a power of two: the mask wraps the index.
        &self.slots[index as usize & (self.slots.len() - 1)]
    }

    #[inline]
    fn read(&self, index: isize) -> [*mut (); 2] {
        let slot = self.slot(index);
        [
            slot[0].load(Ordering::Relaxed),
            slot[1].load(Ordering::Relaxed),
        ]
    }

    #[inline]
    fn write(&self, index: isize, words: [*mut (); 2]) {
        let slot = self.slot(index);
        slot[0].store(words[0], Ordering::Relaxed);
        slot[1].store(words[1], Ordering::Relaxed);
    }
}

struct Inner<T> {
    /// The index of the oldest item; only ever incremented, by a CAS.
    front: AtomicIsize,
    /// One past the newest item; written only by the owner.
    back: AtomicIsize,
    /// The pop's mode as thieves see it (`pop_mode.rs`).
    mode: SharedMode,
    /// The asymmetric fence, for a shared LIFO deque whose owner may pop in
    /// the fast mode (module docs); `None` keeps it fenced.
    asymmetric: Option<AsymmetricFence>,
    /// The current buffer; replaced only by the owner.
    buffer: CachePadded<AtomicPtr<Buffer>>,
    /// The slots hold `T`s.
    _items: PhantomData<T>,
}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        // Relaxed: `&mut self` is the last handle; no one else loads it.
        let mut buffer = self.buffer.load(Ordering::Relaxed);
        while !buffer.is_null() {
            // SAFETY: every buffer was made by `Box::into_raw` in
            // `Buffer::alloc` and is reachable once, from the current one
            // through `outgrown`; this is the last handle, so no one reads
            // it any more. The items are `Copy`: nothing else to drop.
            let boxed = unsafe { Box::from_raw(buffer) };
            buffer = boxed.outgrown;
        }
    }
}

#[derive(Clone, Copy)]
enum Flavor {
    Lifo,
    /// LIFO, and no thief ever steals (see the module documentation).
    LifoUnshared,
    Fifo,
}

/// The owner's end: push at the back, pop at the back (LIFO) or the front
/// (FIFO). Send, not Sync: one thread at a time is the owner. (Both ends
/// are as Send and Sync as their items: the rest is atomics.)
pub(crate) struct Worker<T> {
    inner: Arc<CachePadded<Inner<T>>>,
    /// The current buffer's slots, as the owner installed them: only the
    /// owner replaces the buffer, so its own copy is always current, and a
    /// push or pop reaches its slot without the chain of loads through
    /// `inner` (the pop back of a fork-join waits on that chain).
    ring: Cell<Ring>,
    flavor: Flavor,
    /// The pop's mode (module docs), as the owner keeps it.
    mode: PopMode,
}

/// Where the current buffer's slots are (`Worker::ring`).
#[derive(Clone, Copy)]
struct Ring {
    slots: NonNull<Slot>,
    /// The capacity minus one (a power of two minus one).
    mask: usize,
}

impl Ring {
    fn of(buffer: &Buffer) -> Ring {
        Ring {
            // From the whole slice, so the pointer may reach every slot.
            slots: NonNull::from(&*buffer.slots).cast::<Slot>(),
            mask: buffer.slots.len() - 1,
        }
    }

    #[inline(always)]
    fn slot(&self, index: isize) -> &Slot {
        // SAFETY: the mask keeps the index within the buffer's slots, and
        // the buffer lives as long as the deque (buffers are freed only in
        // `Inner`'s `Drop`).
        unsafe { &*self.slots.as_ptr().add(index as usize & self.mask) }
    }

    #[inline(always)]
    fn read(&self, index: isize) -> [*mut (); 2] {
        let slot = self.slot(index);
        [
            slot[0].load(Ordering::Relaxed),
            slot[1].load(Ordering::Relaxed),
        ]
    }

    #[inline(always)]
    fn write(&self, index: isize, words: [*mut (); 2]) {
        let slot = self.slot(index);
        slot[0].store(words[0], Ordering::Relaxed);
        slot[1].store(words[1], Ordering::Relaxed);
    }

    fn capacity(&self) -> usize {
        self.mask + 1
    }
}

// SAFETY: `ring` points into a buffer owned by `inner`, which moves with
// the worker end, and only that end reads it (one thread at a time: the
// `Cell` keeps it from being `Sync`). The bound is the one the `Arc` of
// `inner` asked for before `ring` existed.
unsafe impl<T: Send + Sync> Send for Worker<T> {}

/// A thief's end: steal from the front.
pub(crate) struct Stealer<T> {
    inner: Arc<CachePadded<Inner<T>>>,
}

impl<T> Clone for Stealer<T> {
    fn clone(&self) -> Self {
        Stealer {
            inner: self.inner.clone(),
        }
    }
}

impl<T: Words> Worker<T> {
    pub(crate) fn new_lifo() -> Self {
        Self::new(Flavor::Lifo)
    }

    /// `new_lifo` in the fenced mode, as after a steal: for the loom model
    /// of leaving it.
    #[cfg(loom)]
    pub(crate) fn new_lifo_fenced() -> Self {
        let deque = Self::new(Flavor::Lifo);
        deque.mode.go_fenced(0, &deque.inner.mode);
        deque
    }

    /// A LIFO deque whose stealer is never asked to steal (only whether it
    /// is empty): the owner's pop needs no fence.
    pub(crate) fn new_lifo_unshared() -> Self {
        Self::new(Flavor::LifoUnshared)
    }

    pub(crate) fn new_fifo() -> Self {
        Self::new(Flavor::Fifo)
    }

    fn new(flavor: Flavor) -> Self {
        let buffer = Buffer::alloc(MIN_CAP, ptr::null_mut());
        // Only a shared LIFO pop has a fence to save.
        let asymmetric = match flavor {
            Flavor::Lifo => AsymmetricFence::new(),
            Flavor::LifoUnshared | Flavor::Fifo => None,
        };
        let (mode, shared_mode) = PopMode::new(asymmetric.is_some());
        Worker {
            inner: Arc::new(CachePadded::new(Inner {
                front: AtomicIsize::new(0),
                back: AtomicIsize::new(0),
                mode: shared_mode,
                asymmetric,
                buffer: CachePadded::new(AtomicPtr::new(buffer)),
                _items: PhantomData,
            })),
            // SAFETY: just made, and it lives as long as `inner`.
            ring: Cell::new(Ring::of(unsafe { &*buffer })),
            flavor,
            mode,
        }
    }

    pub(crate) fn stealer(&self) -> Stealer<T> {
        Stealer {
            inner: self.inner.clone(),
        }
    }

    /// The current buffer's slots, as the owner sees them.
    #[inline(always)]
    fn buffer(&self) -> Ring {
        self.ring.get()
    }

    pub(crate) fn is_empty(&self) -> bool {
        let b = self.inner.back.load(Ordering::Relaxed);
        let f = self.inner.front.load(Ordering::SeqCst);
        b.wrapping_sub(f) <= 0
    }

    pub(crate) fn push(&self, item: T) {
        let b = self.inner.back.load(Ordering::Relaxed);
        // Acquire: a thief's read of a slot happens before we reuse it.
        let f = self.inner.front.load(Ordering::Acquire);
        self.mode.push_saw_front(f, &self.inner.mode);
        let mut buffer = self.buffer();
        if b.wrapping_sub(f) >= buffer.capacity() as isize {
            buffer = self.grow(f, b);
        }
        buffer.write(b, item.into_words());
        // A fence, not just a Release store: a thief may read `back` as a
        // later relaxed store of `pop_back` left it, and must still see
        // this slot (a fence covers every later store of ours; a Release
        // store only itself). Miri caught thieves reading stale slots
        // without it.
        fence(Ordering::Release);
        self.inner.back.store(b.wrapping_add(1), Ordering::Release);
    }

    /// Replace the full buffer by one twice its size holding items `f..b`;
    /// the old one is kept (thieves may be reading it).
    #[cold]
    fn grow(&self, f: isize, b: isize) -> Ring {
        // The owner is the only one to replace the buffer: a relaxed load
        // gives its own last store.
        let old = self.inner.buffer.load(Ordering::Relaxed);
        // SAFETY: buffers live as long as `inner` (they are freed only in
        // its `Drop`).
        let old_ref = unsafe { &*old };
        let new = Buffer::alloc(old_ref.slots.len() * 2, old);
        // SAFETY: just made, not yet shared.
        let new_ref = unsafe { &*new };
        let mut i = f;
        while i != b {
            new_ref.write(i, old_ref.read(i));
            i = i.wrapping_add(1);
        }
        // Release: a thief that loads the new buffer sees the copies.
        self.inner.buffer.store(new, Ordering::Release);
        let ring = Ring::of(new_ref);
        self.ring.set(ring);
        ring
    }

    /// Pop at the owner's end: the back (LIFO) or the front (FIFO).
    #[inline]
    pub(crate) fn pop(&self) -> Option<T> {
        match self.flavor {
            Flavor::Lifo => self.pop_back(),
            Flavor::LifoUnshared => self.pop_back_unshared(),
            Flavor::Fifo => self.pop_front(),
        }
    }

    /// The front is contended with thieves: claim it as they do.
    #[cold]
    fn pop_front(&self) -> Option<T> {
        loop {
            match steal_front(&self.inner) {
                Steal::Success(item) => return Some(item),
                Steal::Empty => return None,
                Steal::Retry => std::hint::spin_loop(),
            }
        }
    }

    /// The usual pop, inline in `join`'s path: at least two items, so the
    /// one taken is no thief's to race for. The last item and an empty
    /// deque go out of line (`pop_last`, `pop_lost_race`). Always inline:
    /// left to the compiler, it became a call in a task node's own loop
    /// (`pop_own_task_in_main_loop`) as soon as that loop grew shorter.
    #[inline(always)]
    fn pop_back(&self) -> Option<T> {
        let b = self.inner.back.load(Ordering::Relaxed);
        let f = self.inner.front.load(Ordering::Relaxed);
        if b.wrapping_sub(f) <= 1 {
            return self.pop_last(b, f);
        }
        // Take the back slot first, then look at the front: the StoreLoad
        // fence pairs with a thief's between its front and back loads, so
        // of the two racing for the last item at least one sees the other.
        // In the fast mode our half is the light one (module docs).
        let b = b.wrapping_sub(1);
        let f = if self.mode.is_fast() {
            let Some(asymmetric) = &self.inner.asymmetric else {
                unreachable!("the fast mode needs the asymmetric fence")
            };
            asymmetric.light(
                || self.inner.back.store(b, Ordering::Relaxed),
                || self.inner.front.load(Ordering::Relaxed),
            )
        } else {
            self.inner.back.store(b, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            self.inner.front.load(Ordering::Relaxed)
        };
        let len = b.wrapping_sub(f);
        if len <= 0 {
            return self.pop_lost_race(b, f, len);
        }
        self.mode.pop_saw_front(f, &self.inner.mode);
        // SAFETY: slot `b` holds the words of an item we pushed, and it is
        // ours: thieves take only indices below `back`, and `f < b`.
        Some(unsafe { T::from_words(self.buffer().read(b)) })
    }

    /// `pop_back` of a deque nobody steals from: `front` never moves, so
    /// the back item is ours without a fence or a claim.
    #[inline(always)]
    fn pop_back_unshared(&self) -> Option<T> {
        let b = self.inner.back.load(Ordering::Relaxed);
        let f = self.inner.front.load(Ordering::Relaxed);
        if b.wrapping_sub(f) <= 0 {
            return None;
        }
        let b = b.wrapping_sub(1);
        self.inner.back.store(b, Ordering::Relaxed);
        // SAFETY: slot `b` holds the words of an item we pushed, and no
        // thief takes any item of an unshared deque.
        Some(unsafe { T::from_words(self.buffer().read(b)) })
    }

    /// `pop_back` with at most one item as far as a possibly stale `front`
    /// tells (`b - f <= 1`).
    #[cold]
    fn pop_last(&self, b: isize, f: isize) -> Option<T> {
        if b.wrapping_sub(f) <= 0 {
            return None;
        }
        // One item: claim it at the front, as a thief would, with one CAS
        // and no fence; the general path costs a SeqCst fence and the same
        // CAS for the last item. (A job pushed and popped back around every
        // light pipeline item pays this once an item.) If the CAS fails, a
        // thief took index `f`, which was the last one: only we push, and
        // `front` never passes `back`.
        let words = self.buffer().read(f);
        match self.inner.front.compare_exchange(
            f,
            f.wrapping_add(1),
            Ordering::SeqCst,
            Ordering::Relaxed,
        ) {
            Ok(_) => {
                self.mode.pop_saw_front(f, &self.inner.mode);
                self.mode.claimed_front(f.wrapping_add(1), &self.inner.mode);
                // SAFETY: slot `f` holds the words of an item we pushed,
                // and the CAS made that item ours, as in `steal_front`.
                Some(unsafe { T::from_words(words) })
            }
            Err(_) => None,
        }
    }

    /// `pop_back` took slot `b` and then saw thieves at `f >= b`: either
    /// they took everything (`len < 0`) or slot `b` is the last item and
    /// both sides may want it (`len == 0`).
    #[cold]
    fn pop_lost_race(&self, b: isize, f: isize, len: isize) -> Option<T> {
        self.mode.pop_saw_front(f, &self.inner.mode);
        if len < 0 {
            // A thief took the last one.
            self.inner.back.store(b.wrapping_add(1), Ordering::Relaxed);
            return None;
        }
        let words = self.buffer().read(b);
        // The last item: claim it as thieves do.
        let won = self
            .inner
            .front
            .compare_exchange(f, f.wrapping_add(1), Ordering::SeqCst, Ordering::Relaxed)
            .is_ok();
        if won {
            self.mode.claimed_front(f.wrapping_add(1), &self.inner.mode);
        }
        self.inner.back.store(b.wrapping_add(1), Ordering::Relaxed);
        // SAFETY: slot `b` holds the words of an item we pushed, and the
        // CAS we won made it ours.
        won.then(|| unsafe { T::from_words(words) })
    }
}

impl<T: Words> Stealer<T> {
    pub(crate) fn steal(&self) -> Steal<T> {
        match &self.inner.asymmetric {
            Some(asymmetric) => steal_asymmetric(&self.inner, asymmetric),
            None => steal_front(&self.inner),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        let f = self.inner.front.load(Ordering::Acquire);
        fence(Ordering::SeqCst);
        let b = self.inner.back.load(Ordering::Acquire);
        b.wrapping_sub(f) <= 0
    }
}

/// Claim the front item, for a thief (or a FIFO's owner), against an
/// owner whose pops are always fenced.
fn steal_front<T: Words>(inner: &Inner<T>) -> Steal<T> {
    let f = inner.front.load(Ordering::Acquire);
    // Pairs with the owner's fence in `pop_back` (see there).
    fence(Ordering::SeqCst);
    // Acquire (with the push's fence): the item at `f` was written before
    // `back` passed it.
    let b = inner.back.load(Ordering::Acquire);
    claim(inner, f, b)
}

/// Claim the front item of a deque whose owner may pop in the fast mode
/// (module docs).
///
/// The one SeqCst fence serves two pairings: with the owner's fence in
/// `pop_back` (our loads of `front` and `back` on either side, as in
/// `steal_front`), and with the one in `PopMode::go_fast` (our loads of
/// `front` and `fenced` on either side). If we read `fenced` true, every
/// pop of the owner's is older than its `go_fenced` (whose Release brings
/// its `back`), or fenced, or after a `go_fast` whose fence came after
/// ours and so sees our `front`. If we read false, the heavy barrier
/// stands between our loads of `front` and `back`.
fn steal_asymmetric<T: Words>(inner: &Inner<T>, asymmetric: &AsymmetricFence) -> Steal<T> {
    let f = inner.front.load(Ordering::Acquire);
    fence(Ordering::SeqCst);
    let fenced = inner.mode.is_fenced();
    // Acquire (with the push's fence): item `f` was written before `back`
    // passed it.
    let mut b = inner.back.load(Ordering::Acquire);
    // An idle worker's search visits empty deques again and again: it must
    // not pay the barrier for nothing.
    if !fenced && b.wrapping_sub(f) > 0 {
        // Pairs with the owner's light section in `pop_back`.
        asymmetric.heavy();
        // Whether or not we get the item, one barrier a visit is enough:
        // the owner fences from its next pop on.
        inner.mode.request_fence();
        b = inner.back.load(Ordering::Acquire);
    }
    claim(inner, f, b)
}

/// Claim item `f`, given `back` as `b`, read after a StoreLoad fence that
/// pairs with the owner's (`steal_front`, `steal_asymmetric`).
fn claim<T: Words>(inner: &Inner<T>, f: isize, b: isize) -> Steal<T> {
    if b.wrapping_sub(f) <= 0 {
        return Steal::Empty;
    }
    // Acquire: a buffer installed before that push holds its items
    // (`grow` copied them).
    let buffer = inner.buffer.load(Ordering::Acquire);
    // SAFETY: no buffer is freed before `inner`, which we hold. Whichever
    // buffer we got holds item `f` in its slot unless the owner has since
    // reused that slot, which it does only after `front` moved past `f`,
    // and then the CAS below fails: a buffer is written only while it is
    // the current one, and the one we load is at least as new as the
    // one current when item `f` was pushed (that push's release fence,
    // which our Acquire load of `back` synchronizes with, came after any
    // earlier installation).
    let words = unsafe { (*buffer).read(f) };
    if inner
        .front
        .compare_exchange(f, f.wrapping_add(1), Ordering::SeqCst, Ordering::Relaxed)
        .is_err()
    {
        // Someone took item `f`: what we read may be anything.
        return Steal::Retry;
    }
    // SAFETY: the CAS made item `f` ours, and its slot still held it when
    // we read it (see above).
    Steal::Success(unsafe { T::from_words(words) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Pair(usize, usize);

    impl Words for Pair {
        fn into_words(self) -> [*mut (); 2] {
            [
                ptr::without_provenance_mut(self.0),
                ptr::without_provenance_mut(self.1),
            ]
        }
        unsafe fn from_words(words: [*mut (); 2]) -> Self {
            Pair(words[0].addr(), words[1].addr())
        }
    }

    #[test]
    fn lifo_pops_newest_and_thieves_take_oldest_across_growth() {
        let w = Worker::new_lifo();
        let s = w.stealer();
        for i in 0..1000 {
            w.push(Pair(i, !i));
        }
        assert_eq!(s.steal(), Steal::Success(Pair(0, !0)));
        assert_eq!(w.pop(), Some(Pair(999, !999)));
        for i in (1..999).rev() {
            assert_eq!(w.pop(), Some(Pair(i, !i)));
        }
        assert_eq!(w.pop(), None);
        assert!(w.is_empty() && s.is_empty());
        assert_eq!(s.steal(), Steal::Empty);
    }

    #[test]
    fn unshared_pops_newest_across_growth_and_after_a_move() {
        let w = Worker::new_lifo_unshared();
        assert_eq!(w.pop(), None);
        for i in 0..1000 {
            w.push(Pair(i, !i));
        }
        for i in (500..1000).rev() {
            assert_eq!(w.pop(), Some(Pair(i, !i)));
        }
        // Another thread takes the owner's end (a pool without threads
        // hands its guest slot on): the cached ring goes with it.
        let w = std::thread::spawn(move || {
            for i in 1000..1200 {
                w.push(Pair(i, !i));
            }
            for i in (1000..1200).rev() {
                assert_eq!(w.pop(), Some(Pair(i, !i)));
            }
            w
        })
        .join()
        .unwrap();
        for i in (0..500).rev() {
            assert_eq!(w.pop(), Some(Pair(i, !i)));
        }
        assert_eq!(w.pop(), None);
        assert!(w.is_empty() && w.stealer().is_empty());
    }

    #[test]
    fn fifo_pops_oldest() {
        let w = Worker::new_fifo();
        for i in 0..100 {
            w.push(Pair(i, i));
        }
        for i in 0..100 {
            assert_eq!(w.pop(), Some(Pair(i, i)));
        }
        assert_eq!(w.pop(), None);
    }

    /// Every item is taken exactly once while thieves race the owner
    /// (and the buffer grows under them).
    #[test]
    fn every_item_once_under_thieves() {
        use std::sync::atomic::{AtomicBool, AtomicUsize};
        let items: usize = if cfg!(miri) { 300 } else { 100_000 };
        let w = Worker::new_lifo();
        let taken: Vec<AtomicUsize> = (0..items).map(|_| AtomicUsize::new(0)).collect();
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..2 {
                let s = w.stealer();
                let (taken, done) = (&taken, &done);
                scope.spawn(move || {
                    while !done.load(Ordering::Acquire) || !s.is_empty() {
                        if let Steal::Success(Pair(i, j)) = s.steal() {
                            assert_eq!(j, !i);
                            taken[i].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
            for i in 0..items {
                w.push(Pair(i, !i));
                if i % 3 == 0
                    && let Some(Pair(k, j)) = w.pop()
                {
                    assert_eq!(j, !k);
                    taken[k].fetch_add(1, Ordering::Relaxed);
                }
            }
            while let Some(Pair(k, _)) = w.pop() {
                taken[k].fetch_add(1, Ordering::Relaxed);
            }
            done.store(true, Ordering::Release);
        });
        for (i, t) in taken.iter().enumerate() {
            assert_eq!(t.load(Ordering::Relaxed), 1, "item {i}");
        }
    }
}
