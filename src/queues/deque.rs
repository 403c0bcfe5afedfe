//! The per-worker deque, behind a facade so the loom models can see it.
//!
//! Normally this is our Chase-Lev deque (`chase_lev.rs`): the owner pushes
//! and pops at the tail (LIFO), thieves steal from the head, and nothing
//! allocates but a push that grows the buffer. Its atomics are std's, not
//! loom's, so under `cfg(loom)` the same API is a `Mutex<VecDeque>`
//! stand-in built on loom's mutex (tokio does the same with its own run
//! queue): the scheduler's protocols (sleep, wake-ups, latches) are then
//! model-checked against a queue loom can interleave, and the real deque is
//! covered by ThreadSanitizer and Miri instead.
//!
//! Invariant kept by both: only the owner calls `push` and `pop`; `steal`
//! may report `Retry`, which callers treat as "try again", never "empty".

#[cfg(not(loom))]
pub(crate) use super::chase_lev::{Stealer, Worker};
#[cfg(loom)]
pub(crate) use stand_in::{Stealer, Worker};

/// A value the deque can hold: two pointers' worth of words, so that a
/// slot can be two atomics (`chase_lev.rs` says why). Unused by the
/// stand-in, which holds the values themselves.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) trait Words: Copy {
    /// The value as two words.
    fn into_words(self) -> [*mut (); 2];
    /// # Safety
    /// `words` came from `into_words` of a value of this type.
    unsafe fn from_words(words: [*mut (); 2]) -> Self;
}

/// The result of a steal (crossbeam's shape).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Steal<T> {
    Empty,
    Success(T),
    /// Lost a race: try again. (The stand-in's lock never loses one.)
    #[cfg_attr(loom, allow(dead_code))]
    Retry,
}

#[cfg(loom)]
mod stand_in {
    use super::Steal;
    use crate::platform::sync::{Arc, Mutex};
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
        pub(crate) fn new_lifo_unshared() -> Self {
            Self::new_lifo()
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
