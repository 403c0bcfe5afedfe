//! The successor list of a task node, in one word.
//!
//! Most nodes have at most one successor, and the header has to stay small:
//! with a one-word list it is 48 bytes, so a node with a body of up to 16
//! bytes (a continuation-passing child, a one-shot closure with two
//! captures) fits one 64-byte line: one line to write, submit, run and
//! free. The word holds
//! * null: no successor;
//! * a node's address (nodes are aligned to 8, so its low bit is clear):
//!   that one successor;
//! * the address of a boxed vector of every successor, in the order they
//!   were added, with the low bit set.
//!
//! Invariants: the low bit is set exactly when the list owns a boxed vector,
//! and that vector holds at least two successors; the list frees the vector
//! when it is dropped. The list does not own the nodes it points at (their
//! pending counts keep them alive, see `node/run.rs`).

use std::marker::PhantomData;
use std::ptr::{self, NonNull};

/// The tag of a word that points at a boxed vector.
const MANY: usize = 1;

/// Successors of type `N` (the task node header; generic so that this
/// file needs nothing from `node/`, whose nodes hold it). `N` must be
/// aligned to at least 2, which the constant below checks where it is used.
pub(crate) struct Successors<N> {
    word: *mut (),
    _nodes: PhantomData<NonNull<N>>,
}

impl<N> Default for Successors<N> {
    fn default() -> Self {
        Successors::NONE
    }
}

impl<N> Successors<N> {
    /// An untagged node address has its low bit clear.
    const NODES_ALIGNED: () = assert!(std::mem::align_of::<N>() > MANY);

    pub(crate) const NONE: Successors<N> = Successors {
        word: ptr::null_mut(),
        _nodes: PhantomData,
    };

    /// The list of the single successor `node`.
    #[inline(always)]
    pub(crate) fn one(node: NonNull<N>) -> Successors<N> {
        let () = Self::NODES_ALIGNED;
        Successors {
            word: node.as_ptr().cast(),
            _nodes: PhantomData,
        }
    }

    /// The address of the boxed vector of a tagged word.
    #[inline(always)]
    fn vector(&self) -> *mut Vec<NonNull<N>> {
        self.word.map_addr(|a| a & !MANY).cast()
    }

    /// The boxed vector, if the list has one.
    #[inline(always)]
    fn many(&self) -> Option<&Vec<NonNull<N>>> {
        if self.word.addr() & MANY == 0 {
            return None;
        }
        // SAFETY: a tagged word is the address of a vector the list owns
        // (from `Box::into_raw` in `push`), borrowed here with `self`.
        Some(unsafe { &*self.vector() })
    }

    /// The first successor added, if any.
    #[inline(always)]
    pub(crate) fn first(&self) -> Option<NonNull<N>> {
        match self.many() {
            Some(all) => all.first().copied(),
            None => NonNull::new(self.word.cast()),
        }
    }

    /// Is `node` the one and only successor? (A single successor is the
    /// untagged word itself.)
    #[inline(always)]
    pub(crate) fn is_only(&self, node: NonNull<N>) -> bool {
        self.word == node.as_ptr().cast::<()>()
    }

    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.word.is_null()
    }

    /// Add `node` after the successors there are.
    pub(crate) fn push(&mut self, node: NonNull<N>) {
        let () = Self::NODES_ALIGNED;
        if self.word.is_null() {
            self.word = node.as_ptr().cast();
            return;
        }
        if self.word.addr() & MANY != 0 {
            // SAFETY: as in `many`, and `&mut self` makes the access unique.
            let all = unsafe { &mut *self.vector() };
            all.push(node);
            return;
        }
        // SAFETY: an untagged non-null word is the one successor's address.
        let only = unsafe { NonNull::new_unchecked(self.word.cast::<N>()) };
        let all = Box::into_raw(Box::new(vec![only, node]));
        // The box is aligned to 8, so the tag bit is free.
        self.word = all.cast::<()>().map_addr(|a| a | MANY);
    }

    /// Every successor, in the order they were added.
    pub(crate) fn iter(&self) -> impl Iterator<Item = NonNull<N>> + '_ {
        let (one, all) = match self.many() {
            Some(all) => (None, all.as_slice()),
            None => (NonNull::new(self.word.cast::<N>()), &[][..]),
        };
        one.into_iter().chain(all.iter().copied())
    }

    /// The list, leaving an empty one behind.
    #[inline(always)]
    pub(crate) fn take(&mut self) -> Successors<N> {
        std::mem::take(self)
    }

    /// The list as an enum, decided by one test of the word: a node's
    /// completion branches once on it, and the one-or-none cases carry
    /// nothing left to drop.
    #[inline(always)]
    pub(crate) fn split(self) -> Split<N> {
        let (word, vector) = (self.word, self.vector());
        std::mem::forget(self);
        if word.addr() & MANY != 0 {
            // SAFETY: a tagged word holds the (non-null) vector from
            // `Box::into_raw` in `push`; `forget` above hands it over.
            return Split::Many(Many {
                vector: unsafe { NonNull::new_unchecked(vector) },
            });
        }
        match NonNull::new(word.cast::<N>()) {
            Some(only) => Split::One(only),
            None => Split::None,
        }
    }
}

/// A successor list taken apart by [`Successors::split`].
pub(crate) enum Split<N> {
    None,
    One(NonNull<N>),
    Many(Many<N>),
}

/// At least two successors, in the order they were added: the list's
/// boxed vector, still boxed, so that the hot path that splits a list only
/// moves a pointer and freeing it is one out-of-line call on the cold path
/// (a `Vec` moved out inline grew the node completion path by a kilobyte
/// and slowed `fib_cps` 3%).
pub(crate) struct Many<N> {
    vector: NonNull<Vec<NonNull<N>>>,
}

impl<N> Many<N> {
    pub(crate) fn as_slice(&self) -> &[NonNull<N>] {
        // SAFETY: `Many` owns the vector until it is dropped.
        unsafe { self.vector.as_ref() }
    }
}

impl<N> Drop for Many<N> {
    #[inline(never)]
    fn drop(&mut self) {
        // SAFETY: the vector came from `Box::into_raw` in `push`, and
        // `Many` is its only owner.
        drop(unsafe { Box::from_raw(self.vector.as_ptr()) });
    }
}

impl<N> Drop for Successors<N> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.word.addr() & MANY != 0 {
            // SAFETY: a tagged word owns the vector from `Box::into_raw` in
            // `push`; this is its only release.
            drop(unsafe { Box::from_raw(self.vector()) });
        }
    }
}
