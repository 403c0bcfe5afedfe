//! The per-worker deque, behind a facade so the loom models can see it.
//!
//! Normally this is crossbeam-deque's Chase-Lev deque: the owner pushes and
//! pops at the tail (LIFO), thieves steal from the head. crossbeam has no
//! loom mode, so under `cfg(loom)` the same API is a `Mutex<VecDeque>`
//! stand-in built on loom's mutex (tokio does the same with its own run
//! queue): the scheduler's protocols (sleep, wake-ups, latches) are then
//! model-checked against a queue loom can interleave, and the real deque is
//! covered by ThreadSanitizer instead.
//!
//! Miri uses the stand-in too. crossbeam's steal reads a slot that the
//! owner may be overwriting at that moment (after the ring wrapped) and
//! throws the value away when its CAS fails: a race crossbeam documents as
//! a deliberate volatile-access hack (`Buffer::read`/`write`), which Miri
//! reports as undefined behaviour. It is crossbeam's, not ours, and rayon
//! lives with the same; the stand-in lets Miri check sixfold's own unsafe
//! code without it.
//!
//! Invariant kept by both: only the owner calls `push` and `pop`; `steal`
//! may report `Retry`, which callers treat as "try again", never "empty".

#[cfg(not(any(loom, miri)))]
pub(crate) use crossbeam_deque::{Steal, Stealer, Worker};

#[cfg(any(loom, miri))]
pub(crate) use crossbeam_deque::Steal;
#[cfg(any(loom, miri))]
pub(crate) use stand_in::{Stealer, Worker};

#[cfg(any(loom, miri))]
mod stand_in {
    use crate::platform::sync::{Arc, Mutex};
    use crossbeam_deque::Steal;
    use std::collections::VecDeque;

    /// The owner's end: push at the back, pop at the back (LIFO) or the
    /// front (FIFO).
    pub(crate) struct Worker<T> {
        items: Arc<Mutex<VecDeque<T>>>,
        fifo: bool,
    }

    /// A thief's end: steal from the front.
    pub(crate) struct Stealer<T> {
        items: Arc<Mutex<VecDeque<T>>>,
    }

    impl<T> Clone for Stealer<T> {
        fn clone(&self) -> Self {
            Stealer {
                items: self.items.clone(),
            }
        }
    }

    impl<T> Worker<T> {
        pub(crate) fn new_lifo() -> Self {
            Worker {
                items: Arc::new(Mutex::new(VecDeque::new())),
                fifo: false,
            }
        }
        pub(crate) fn new_fifo() -> Self {
            Worker {
                items: Arc::new(Mutex::new(VecDeque::new())),
                fifo: true,
            }
        }
        pub(crate) fn push(&self, item: T) {
            self.items.lock().push_back(item);
        }
        pub(crate) fn pop(&self) -> Option<T> {
            let mut items = self.items.lock();
            if self.fifo {
                items.pop_front()
            } else {
                items.pop_back()
            }
        }
        pub(crate) fn is_empty(&self) -> bool {
            self.items.lock().is_empty()
        }
        pub(crate) fn stealer(&self) -> Stealer<T> {
            Stealer {
                items: self.items.clone(),
            }
        }
    }

    impl<T> Stealer<T> {
        pub(crate) fn steal(&self) -> Steal<T> {
            match self.items.lock().pop_front() {
                Some(item) => Steal::Success(item),
                None => Steal::Empty,
            }
        }
        pub(crate) fn is_empty(&self) -> bool {
            self.items.lock().is_empty()
        }
    }
}
