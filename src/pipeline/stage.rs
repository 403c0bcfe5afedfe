//! A pipeline's stages with their types erased, so that the engine can
//! hold stages of different item types in one list.
//!
//! An item lives in its token's slot of item memory (`engine/slot.rs`), sized
//! and aligned for the largest type any stage reads or writes. A stage's
//! body reads its input from there by value, runs the user's closure, and
//! writes the output back in its place; the source writes the first one.
//!
//! Invariants: a body is called with memory that holds a value of its
//! input type, and leaves a value of its output type there (or nothing, if
//! the closure panicked: the input was moved into it, so nothing is left
//! to drop twice); a serial body is only called by the holder of its
//! stage's gate, so its `FnMut` is never entered twice at once.

use std::alloc::Layout;
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::sync::Arc;

/// How a pipeline stage lets items through (oneTBB's `filter_mode`), for
/// [`Pipeline::stage`](crate::Pipeline::stage), which picks the kind at run
/// time (read from a configuration, say).
///
/// ```
/// let mode: sixfold::StageMode = "parallel".parse().unwrap();
/// assert_eq!(mode, sixfold::StageMode::Parallel);
/// assert!("sideways".parse::<sixfold::StageMode>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StageMode {
    /// One item at a time, in source order.
    SerialInOrder,
    /// One item at a time, in any order.
    SerialOutOfOrder,
    /// Any number of items at once.
    Parallel,
}

impl StageMode {
    /// Its name as the builder method's: `serial_in_order`,
    /// `serial_out_of_order` or `parallel`.
    ///
    /// ```
    /// assert_eq!(sixfold::StageMode::SerialInOrder.name(), "serial_in_order");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            StageMode::SerialInOrder => "serial_in_order",
            StageMode::SerialOutOfOrder => "serial_out_of_order",
            StageMode::Parallel => "parallel",
        }
    }
}

impl std::str::FromStr for StageMode {
    type Err = crate::error::PipelineError;

    /// The mode named as by [`name`](StageMode::name).
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        [
            StageMode::SerialInOrder,
            StageMode::SerialOutOfOrder,
            StageMode::Parallel,
        ]
        .into_iter()
        .find(|mode| mode.name() == name)
        .ok_or_else(|| crate::error::PipelineError::UnknownStageMode {
            name: name.to_string(),
        })
    }
}

impl std::fmt::Display for StageMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A stage's closure, called on the item in place.
pub(crate) trait Body: Sync {
    /// # Safety
    /// `item` holds a value of the stage's input type; serial stages: the
    /// caller holds the stage's gate.
    unsafe fn call(&self, item: *mut u8);
}

/// A serial stage's `FnMut(T) -> U`.
struct SerialBody<F, T, U> {
    f: UnsafeCell<F>,
    _types: PhantomData<fn(T) -> U>,
}

// SAFETY: the closure is only called by the holder of its stage's gate
// (one thread at a time, handed over through the gate's SeqCst accesses),
// and it is `Send`, so moving its use between threads is sound.
unsafe impl<F: Send, T, U> Sync for SerialBody<F, T, U> {}

impl<F, T, U> Body for SerialBody<F, T, U>
where
    F: FnMut(T) -> U + Send,
{
    unsafe fn call(&self, item: *mut u8) {
        // SAFETY: per the contract: `item` holds a `T`, and we hold the
        // gate, so nobody else is inside `f`.
        unsafe {
            let input = item.cast::<T>().read();
            let output = (*self.f.get())(input);
            item.cast::<U>().write(output);
        }
    }
}

/// A parallel stage's `Fn(T) -> U + Sync`.
struct ParallelBody<F, T, U> {
    f: F,
    _types: PhantomData<fn(T) -> U>,
}

impl<F, T, U> Body for ParallelBody<F, T, U>
where
    F: Fn(T) -> U + Sync,
{
    unsafe fn call(&self, item: *mut u8) {
        // SAFETY: `item` holds a `T` per the contract.
        unsafe {
            let input = item.cast::<T>().read();
            let output = (self.f)(input);
            item.cast::<U>().write(output);
        }
    }
}

/// The source: `FnMut() -> Option<T>`, called by the holder of the source
/// gate only.
pub(crate) trait SourceBody: Sync {
    /// Write the next item to `item`; false when the source is exhausted.
    ///
    /// # Safety
    /// `item` has room for the first stage's input; the caller holds the
    /// source gate.
    unsafe fn fetch(&self, item: *mut u8) -> bool;
}

struct Source<F, T> {
    f: UnsafeCell<F>,
    _types: PhantomData<fn() -> T>,
}

// SAFETY: as for `SerialBody`: the source gate admits one caller at a time.
unsafe impl<F: Send, T> Sync for Source<F, T> {}

impl<F, T> SourceBody for Source<F, T>
where
    F: FnMut() -> Option<T> + Send,
{
    unsafe fn fetch(&self, item: *mut u8) -> bool {
        // SAFETY: we hold the source gate, so nobody else is inside `f`.
        match unsafe { (*self.f.get())() } {
            Some(value) => {
                // SAFETY: `item` has room for a `T`.
                unsafe { item.cast::<T>().write(value) };
                true
            }
            None => false,
        }
    }
}

/// `flatten`: turn the `Option<T>` a stage left into its `T`, or report
/// that the item was filtered out.
pub(crate) type FlattenFn = unsafe fn(*mut u8) -> bool;

unsafe fn flatten<T>(item: *mut u8) -> bool {
    // SAFETY: the caller's item holds an `Option<T>`, read once.
    match unsafe { item.cast::<Option<T>>().read() } {
        Some(value) => {
            // SAFETY: the memory fits an `Option<T>`, so a `T` too.
            unsafe { item.cast::<T>().write(value) };
            true
        }
        None => false,
    }
}

/// Drops the value of some type in item memory.
pub(crate) type DropFn = unsafe fn(*mut u8);

unsafe fn drop_value<T>(item: *mut u8) {
    // SAFETY: the caller's item holds a `T`, dropped once.
    unsafe { item.cast::<T>().drop_in_place() }
}

/// How to drop a `T` in item memory: nothing to call for a type without
/// drop glue.
fn dropper<T>() -> Option<DropFn> {
    std::mem::needs_drop::<T>().then_some(drop_value::<T> as DropFn)
}

/// One stage after the source, erased.
pub(crate) struct Stage<'a> {
    pub(crate) mode: StageMode,
    pub(crate) body: Box<dyn Body + 'a>,
    /// Set by `flatten` after this stage.
    pub(crate) flatten: Option<FlattenFn>,
    /// Drops this stage's output (after `flatten`, the flattened type):
    /// what an item holds between this stage and the next.
    pub(crate) drop_output: Option<DropFn>,
    pub(crate) name: Arc<str>,
    /// Whether `name` was given by the user (for `Debug`).
    pub(crate) named: bool,
    pub(crate) pin: Option<usize>,
    /// The pin is strict: the stage runs on its worker and nowhere else.
    pub(crate) strict: bool,
}

/// The source, erased.
pub(crate) struct SourceStage<'a> {
    pub(crate) body: Box<dyn SourceBody + 'a>,
    pub(crate) drop_output: Option<DropFn>,
    pub(crate) name: Arc<str>,
    pub(crate) named: bool,
    pub(crate) pin: Option<usize>,
    /// As `Stage::strict`.
    pub(crate) strict: bool,
}

impl<'a> SourceStage<'a> {
    pub(crate) fn new<F, T>(f: F) -> Self
    where
        F: FnMut() -> Option<T> + Send + 'a,
        T: Send + 'a,
    {
        SourceStage {
            body: Box::new(Source {
                f: UnsafeCell::new(f),
                _types: PhantomData,
            }),
            drop_output: dropper::<T>(),
            name: Arc::from("source"),
            named: false,
            pin: None,
            strict: false,
        }
    }
}

impl<'a> Stage<'a> {
    pub(crate) fn serial<F, T, U>(mode: StageMode, f: F, index: usize) -> Self
    where
        F: FnMut(T) -> U + Send + 'a,
        T: Send + 'a,
        U: Send + 'a,
    {
        Self::erased(
            mode,
            Box::new(SerialBody {
                f: UnsafeCell::new(f),
                _types: PhantomData::<fn(T) -> U>,
            }),
            dropper::<U>(),
            index,
        )
    }

    pub(crate) fn parallel<F, T, U>(f: F, index: usize) -> Self
    where
        F: Fn(T) -> U + Send + Sync + 'a,
        T: Send + 'a,
        U: Send + 'a,
    {
        Self::erased(
            StageMode::Parallel,
            Box::new(ParallelBody {
                f,
                _types: PhantomData::<fn(T) -> U>,
            }),
            dropper::<U>(),
            index,
        )
    }

    fn erased(
        mode: StageMode,
        body: Box<dyn Body + 'a>,
        drop_output: Option<DropFn>,
        index: usize,
    ) -> Self {
        Stage {
            mode,
            body,
            flatten: None,
            drop_output,
            name: Arc::from(format!("stage {index} ({})", mode.name())),
            named: false,
            pin: None,
            strict: false,
        }
    }

    /// `flatten` after this stage: its `Option<T>` output becomes a `T` or
    /// a filtered item.
    pub(crate) fn flatten_to<T: Send + 'a>(&mut self) {
        self.flatten = Some(flatten::<T>);
        self.drop_output = dropper::<T>();
    }
}

/// The item memory a value of `T` needs.
pub(crate) fn layout_of<T>() -> Layout {
    Layout::new::<T>()
}
