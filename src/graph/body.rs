//! A node's body, stored inside the node when it is small.
//!
//! A million-node graph walked at ten nanoseconds a node is bound by memory
//! traffic: a boxed closure per node is one more heap block, on its own
//! cache line, read on every run. Most bodies capture a reference or two,
//! so a body of at most two words (and at most word alignment) lives in the
//! node itself; a bigger one is boxed and its pointer lives there.
//!
//! Invariants: `BodySlot` holds exactly the value its `CallFn`/`DropFn`
//! were made for; it is dropped exactly once, by the graph, through its
//! `DropFn`; calls never overlap (a node runs once per run, runs do not
//! overlap).

use super::Subflow;
use std::cell::UnsafeCell;
use std::mem::{self, MaybeUninit};

/// Calls the body in the slot.
pub(super) type CallFn<'a> = for<'s> unsafe fn(*mut u8, &mut Subflow<'s, 'a>);
/// Drops the body in the slot.
pub(super) type DropFn = unsafe fn(*mut u8);

/// Two words of storage for a body or for a pointer to a boxed one.
pub(super) struct BodySlot {
    data: UnsafeCell<MaybeUninit<[usize; 2]>>,
}

/// Whether `F` fits in a slot.
const fn fits<F>() -> bool {
    mem::size_of::<F>() <= mem::size_of::<[usize; 2]>()
        && mem::align_of::<F>() <= mem::align_of::<[usize; 2]>()
}

impl BodySlot {
    /// Store `f`, returning the slot, the function that calls what it
    /// holds and, if dropping it does anything, the function that drops
    /// it.
    pub(super) fn new<'a, F>(f: F) -> (BodySlot, CallFn<'a>, Option<DropFn>)
    where
        F: FnMut(&mut Subflow<'_, 'a>) + Send + 'a,
    {
        let slot = BodySlot {
            data: UnsafeCell::new(MaybeUninit::uninit()),
        };
        let at = slot.data.get().cast::<u8>();
        if fits::<F>() {
            // SAFETY: the slot is large and aligned enough for `F` (checked
            // by `fits`) and uninitialized.
            unsafe { at.cast::<F>().write(f) };
            let drop_fn = mem::needs_drop::<F>().then_some(drop_inline::<F> as DropFn);
            (slot, call_inline::<F>, drop_fn)
        } else {
            let boxed: *mut F = Box::into_raw(Box::new(f));
            // SAFETY: a pointer fits in the slot.
            unsafe { at.cast::<*mut F>().write(boxed) };
            (slot, call_boxed::<F>, Some(drop_boxed::<F> as DropFn))
        }
    }

    /// Where the body's bytes start, for `CallFn` and `DropFn`.
    pub(super) fn as_ptr(&self) -> *mut u8 {
        self.data.get().cast()
    }
}

unsafe fn call_inline<'a, F>(at: *mut u8, subflow: &mut Subflow<'_, 'a>)
where
    F: FnMut(&mut Subflow<'_, 'a>),
{
    // SAFETY: the slot holds an `F` (made by `BodySlot::new` with this
    // function), and the caller has exclusive access to it.
    unsafe { (*at.cast::<F>())(subflow) }
}

unsafe fn drop_inline<F>(at: *mut u8) {
    // SAFETY: the slot holds an `F`, dropped once.
    unsafe { at.cast::<F>().drop_in_place() }
}

unsafe fn call_boxed<'a, F>(at: *mut u8, subflow: &mut Subflow<'_, 'a>)
where
    F: FnMut(&mut Subflow<'_, 'a>),
{
    // SAFETY: the slot holds a pointer from `Box::into_raw` of an `F`, and
    // the caller has exclusive access to it.
    unsafe { (**at.cast::<*mut F>())(subflow) }
}

unsafe fn drop_boxed<F>(at: *mut u8) {
    // SAFETY: the slot holds a pointer from `Box::into_raw`, freed once.
    unsafe { drop(Box::from_raw(*at.cast::<*mut F>())) }
}
