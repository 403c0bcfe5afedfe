//! A run's memory: its tokens (`Slot`), the item cells they carry, the
//! serial stages' gates, and `Owned`, the proof that the running job owns
//! a slot.
//!
//! Invariants: a slot's state is read and written only by the job that
//! owns it, through an `Owned` made at one of the hand-over points (see
//! `Owned::claim`); a slot's `next` link leads to a slot of the same
//! chain, owned by the same job. Items of different tokens never share a
//! cache line. Everything here lives from `Engine::prepare` until the
//! engine changes its token count or is dropped, which a run's caller does
//! only after every token retired and no thread is inside the engine.

use super::super::gate::{AnyOrderGate, InOrderGate};
use super::Engine;
use crate::worker::thread::JobRef;
use crossbeam_utils::CachePadded;
use std::alloc::{self, Layout};
use std::cell::{Cell, UnsafeCell};
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};

/// A slot index meaning "none".
pub(super) const NO_SLOT: u32 = u32::MAX;

/// `SlotState::held_gate` values besides stage numbers.
pub(super) const NO_GATE: u32 = 0;

/// One token's state; touched by its current owner only. Cells, so that
/// the owner may hold several references to it at once (the front of a
/// chain and the item being carried are often the same slot).
pub(super) struct SlotState {
    pub(super) sequence: Cell<u64>,
    /// 0: a free token (at the source); 1..=n: the user stage to run next.
    pub(super) stage: Cell<u32>,
    /// False for an item filtered out, dropped on cancel, or consumed by a
    /// panicking stage: it passes the in-order gates without running.
    pub(super) has_item: Cell<bool>,
    /// We hold the gate of this stage (its number): handed over by its
    /// holder (rule 2). The source gate is never handed over with a job.
    pub(super) held_gate: Cell<u32>,
    /// We hold this later in-order stage's gate in advance: the item before
    /// us in our chain passed it on to us (`InOrderGate::pass_on`).
    pub(super) reserved_gate: Cell<u32>,
    /// Already routed to the worker `stage` is pinned to: if a proxy sent
    /// it elsewhere, it runs there rather than bouncing.
    pub(super) routed: Cell<bool>,
    /// The next slot of the chain that owns this one.
    pub(super) next: Cell<u32>,
    /// Stage work timed for this item so far (sampled items only).
    pub(super) work_ns: Cell<u64>,
    /// It reached an in-order gate before its turn and waits in its chain
    /// (`Step::Wait`).
    pub(super) waiting: Cell<bool>,
    /// This item's stage work is timed (one in `SAMPLE_EVERY`).
    pub(super) sampled: Cell<bool>,
    /// The chain this slot heads went to the lender's deque (`lend`) and
    /// its job has not run since: set by the lender, cleared by every run
    /// of a chain job that this slot heads. `reclaim` tells by it its own
    /// job from a later job of the same slot (the lent chain ran, and the
    /// slot came back to this deque as a new job).
    pub(super) lent_on_deque: Cell<bool>,
    /// How many times a chain this slot heads was lent to a deque. The
    /// flag above alone cannot tell our lend from a later one of the same
    /// slot to the same deque (the lent chain ran inside the body, in a
    /// wait, and lent itself again from the same front); the count can.
    pub(super) deque_lends: Cell<u32>,
}

impl SlotState {
    pub(super) const fn new() -> Self {
        SlotState {
            sequence: Cell::new(0),
            stage: Cell::new(0),
            has_item: Cell::new(false),
            held_gate: Cell::new(NO_GATE),
            reserved_gate: Cell::new(NO_GATE),
            routed: Cell::new(false),
            next: Cell::new(NO_SLOT),
            work_ns: Cell::new(0),
            waiting: Cell::new(false),
            sampled: Cell::new(false),
            lent_on_deque: Cell::new(false),
            deque_lends: Cell::new(0),
        }
    }
}

/// A token: where its job points.
#[repr(align(64))]
pub(super) struct Slot {
    pub(super) engine: *const Engine<'static>,
    pub(super) index: u32,
    /// Reached only through `Owned`.
    state: SlotState,
    /// The job of the chain this slot heads while that chain is lent out
    /// (`lend`): what the worker's offer points at, read by the thief that
    /// takes it. Written by the slot's owner before each offer.
    pub(super) lent_job: UnsafeCell<MaybeUninit<JobRef>>,
}

// SAFETY: a slot's state is owned by one job at a time (see the module
// invariants); `engine` is read-only during a run.
unsafe impl Sync for Slot {}
// SAFETY: as above.
unsafe impl Send for Slot {}

impl Slot {
    /// A slot of a run not yet prepared: no engine, a fresh state.
    pub(super) fn new(index: u32) -> Slot {
        Slot {
            engine: ptr::null(),
            index,
            state: SlotState::new(),
            lent_job: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// Reset for a new run of `engine`, linked to `next` (all tokens start
    /// in one chain). `&mut`: no job of the run exists yet.
    pub(super) fn prepare(&mut self, engine: *const Engine<'static>, next: u32) {
        self.engine = engine;
        self.state = SlotState {
            next: Cell::new(next),
            ..SlotState::new()
        };
    }
}

/// A slot the running job owns: the proof that reading and writing its
/// state is ours to do, so that code holding one needs no `unsafe` to
/// touch it. Made only where ownership passes to a job (`claim`): a
/// chain's job taken from a queue, a gate handing a parked item or token
/// over, a lent chain withdrawn; and the link of an owned slot leads to a
/// slot of the same chain, owned by the same job (`Engine::next_of`).
///
/// Handing a slot on (parking it at a gate, pushing or routing its job,
/// lending it, releasing its unit) ends the ownership: those are `unsafe`
/// and their callers must not read the state through a copy afterwards.
/// The index stays readable: it names the slot and reads nothing of it.
#[derive(Clone, Copy)]
pub(super) struct Owned<'e>(&'e Slot);

impl<'e> Owned<'e> {
    /// # Safety
    /// The calling job owns `slot` from now on: it took the slot's job
    /// from a queue, a gate handed the slot to it, or it withdrew the lent
    /// chain the slot is in. No other `Owned` of the slot is used after
    /// its holder handed it on.
    #[inline]
    pub(super) unsafe fn claim(slot: &'e Slot) -> Self {
        Owned(slot)
    }

    #[inline]
    pub(super) fn state(self) -> &'e SlotState {
        &self.0.state
    }

    #[inline]
    pub(super) fn index(self) -> u32 {
        self.0.index
    }

    #[inline]
    pub(super) fn slot(self) -> &'e Slot {
        self.0
    }
}

/// The memory items live in: one cell per token, each big and aligned
/// enough for every type a stage reads or writes, on its own cache lines.
pub(super) struct ItemMemory {
    pub(super) base: NonNull<u8>,
    pub(super) stride: usize,
    layout: Layout,
}

impl ItemMemory {
    pub(super) fn new(item: Layout, tokens: usize) -> ItemMemory {
        // A cell per cache line at least: items of different workers must
        // not share one.
        let align = item.align().max(64);
        let stride = item.size().next_multiple_of(align).max(align);
        let layout = Layout::from_size_align(stride * tokens, align)
            .expect("item memory fits in the address space");
        // SAFETY: the size is at least one cache line.
        let base = NonNull::new(unsafe { alloc::alloc(layout) })
            .unwrap_or_else(|| alloc::handle_alloc_error(layout));
        ItemMemory {
            base,
            stride,
            layout,
        }
    }
}

impl Drop for ItemMemory {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout; items never outlive a run.
        unsafe { alloc::dealloc(self.base.as_ptr(), self.layout) };
    }
}

/// A serial stage's gate (none for a parallel stage). The array of these
/// is read by every step, so it holds only pointers: each gate's words,
/// written by whoever holds it, live on lines of their own (inline, the
/// sink's turn word shared a line with every stage's tag: a cache miss
/// per step after each hand-over of the sink, 2% of a heavy pipeline).
pub(super) enum Gate {
    Parallel,
    InOrder(Box<CachePadded<InOrderGate>>),
    AnyOrder(Box<CachePadded<AnyOrderGate>>),
}

/// The resources of runs with a given number of tokens.
pub(super) struct Tokens {
    pub(super) count: usize,
    pub(super) slots: Box<[Slot]>,
    pub(super) items: ItemMemory,
    /// On lines of its own: its state word and the next sequence number
    /// move with the holder.
    pub(super) source_gate: CachePadded<AnyOrderGate>,
    pub(super) gates: Box<[Gate]>,
}

/// Where a prepared run's resources are: plain pointers into `Tokens`, so
/// that the hot path does not unwrap an `Option` and check bounds each
/// time it looks at a slot (it did: 50 instructions of an item's 480).
pub(super) struct RunView {
    pub(super) slots: *mut Slot,
    pub(super) gates: *const Gate,
    pub(super) source_gate: *const AnyOrderGate,
    pub(super) items: *mut u8,
    pub(super) stride: usize,
    pub(super) count: usize,
}

impl RunView {
    pub(super) const EMPTY: RunView = RunView {
        slots: ptr::null_mut(),
        gates: ptr::null(),
        source_gate: ptr::null(),
        items: ptr::null_mut(),
        stride: 0,
        count: 0,
    };
}
