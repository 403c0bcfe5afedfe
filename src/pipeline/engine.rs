//! A pipeline run on the six rules: tokens, item memory, and the walk of
//! items through the stages.
//!
//! A run has `tokens` slots. A slot is a token plus room for one item. A
//! *job* (a `JobRef` to its first slot) owns a *chain* of slots, linked
//! through the slots: items it carries, in source order, then free tokens.
//! It works on the front slot:
//!
//! 1. an item goes on to its next stage on this worker (rule 1, item
//!    affinity, as oneTBB does). A parallel stage just runs; a serial stage
//!    runs if its gate lets the item in, else the item is parked in the
//!    gate and leaves the chain (no thread waits);
//! 2. the worker that finishes a serial stage's item takes the next parked
//!    one (rule 2): it joins this chain right behind the current item, or,
//!    when items carry enough work to share, becomes a job of its own on
//!    the worker's deque, where idle workers can take it (rules 3 and 6);
//! 3. a pinned stage is reached through its worker's mailbox (rule 4): the
//!    item leaves the chain as a job routed there with affinity;
//! 4. an item that passed the last stage is dropped, and its token goes to
//!    the back of the chain;
//! 5. when only tokens are left, the job takes the source gate and fetches
//!    a batch: for its own tokens and for tokens other jobs parked at the
//!    source. With light items (measured) the batch is every token: one
//!    worker runs the pipeline and the gates' cache lines stay on its
//!    core, since moving an item to another core would cost more than
//!    running it. With items that carry enough work, the batch is a share
//!    (`tokens / workers`), and the source gate is passed on to a job of
//!    the remaining tokens on the deque (rule 3), for another worker to
//!    fetch the next batch (rule 6). A pipeline started from outside the
//!    pool enters by the shared queue (rule 5).
//!
//! The run's latch counts tokens: each token releases its unit when it
//! finds the source exhausted (or the run cancelled), as the last thing
//! its job does. The thread that released the last unit, or gave away its
//! last token, may still be on its way out of the engine's code, holding
//! references into it: each slot of the pool notes the engine it is inside
//! (`Registry::entered_engine`), and the caller frees nothing until no
//! slot names this one (`Registry::wait_until_left`). Miri's borrow models
//! check this in `tests/miri_pipeline.rs`.
//!
//! Work conservation: while an item's stage body runs, the rest of its
//! chain (items and free tokens) is *lent out*: offered as a job of its own
//! in the worker's lent slot (`queues/lent.rs`), quietly (no wake-up), and
//! withdrawn after the body (`lend`, `reclaim`). A body that returns at
//! once gets its chain back for the price of a store and a swap; one that
//! blocks or takes long has the rest taken by an idle worker (rule 6),
//! which takes an offer only when it saw the same one at its previous
//! look: a searching worker within a round or two, a sleeping one within
//! the sleep heartbeat (`Sleep`), so no item
//! that could run waits behind it while a worker idles, and a parallel
//! stage can hold `min(workers, tokens)` items at once, on the first run
//! as on later ones. `run_alone` lends its free tokens around parallel
//! stages only (it runs serial stages without their gates), keeping the
//! in-order gates' turns and the source's sequence exact for a taker; its
//! offer (the free tokens) is written once per loop (`prepare_alone_lend`).
//! A worker has one offer slot: a run inside a stage body of another run
//! on the same worker lends through the own deque instead.
//!
//! Cancellation and panics: the source stops (it counts as exhausted), and
//! items in flight are dropped at their next stage, without running it; an
//! item that was dropped still passes the in-order gates after it (without
//! running them), so every gate's turn stays whole.
//!
//! Invariants: a slot's state is touched only by its current owner, the
//! job whose chain holds it, and never after the owner handed it on (to a
//! gate or a job queue, which is how ownership passes); the state is made
//! of cells, as the owner often holds two references to one slot. In a chain, items come before free tokens, and items are in
//! source order. At most `tokens` items are in flight. Every token ends its
//! run by releasing its unit exactly once.

use super::gate::{AnyOrderGate, Arrival, InOrderGate};
use super::stage::{SourceStage, Stage, StageMode};
use crate::observe::stats::Rule;
use crate::platform::latch::CountLatch;
use crate::platform::unwind;
use crate::queues::dispatch::{Dispatch, Priority};
use crate::queues::region::Region;
use crate::queues::shared_queue::SharedQueueFlag;
use crate::worker::thread::Registry;
use crate::worker::thread::WorkerThread;
use crate::worker::thread::{JobRef, Next};
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::alloc::{self, Layout};
use std::any::Any;
use std::cell::{Cell, UnsafeCell};
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

/// A slot index meaning "none".
const NO_SLOT: u32 = u32::MAX;

/// `SlotState::held_gate` values besides stage numbers.
const NO_GATE: u32 = 0;
const SOURCE_GATE: u32 = u32::MAX;

/// Items whose stages take less than this (nanoseconds, summed over the
/// stages) are cheaper to run than to move to another core: one worker
/// runs the pipeline. Above it, batches are shared between workers.
const SHARE_WORK_NS: u32 = 250;

/// One item in this many has its stage work timed (two clock reads per
/// stage), to keep the estimate cheap.
const SAMPLE_EVERY: u64 = 64;

/// No measurement yet: treated as light (the first batch runs on one
/// worker and is measured), so a light pipeline is never split at all.
const UNMEASURED: u32 = 0;

/// The cancel flag a [`CancelToken`](crate::CancelToken) shares with the
/// pipeline. Read at every stage: on a cache line of its own (a small
/// allocation next to a busy one cost a tenth of a heavy pipeline's time).
#[derive(Default)]
pub(crate) struct CancelFlag(CachePadded<AtomicBool>);

impl crate::graph::CancelTarget for CancelFlag {
    fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// One token's state; touched by its current owner only. Cells, so that
/// the owner may hold several references to it at once (the front of a
/// chain and the item being carried are often the same slot).
struct SlotState {
    sequence: Cell<u64>,
    /// 0: a free token (at the source); 1..=n: the user stage to run next.
    stage: Cell<u32>,
    /// False for an item filtered out, dropped on cancel, or consumed by a
    /// panicking stage: it passes the in-order gates without running.
    has_item: Cell<bool>,
    /// We hold the gate of this stage (its number; `SOURCE` for the source
    /// gate): handed over by its holder (rule 2), or the source passed on.
    held_gate: Cell<u32>,
    /// We hold this later in-order stage's gate in advance: the item before
    /// us in our chain passed it on to us (`InOrderGate::pass_on`).
    reserved_gate: Cell<u32>,
    /// Already routed to the worker `stage` is pinned to: if a proxy sent
    /// it elsewhere, it runs there rather than bouncing.
    routed: Cell<bool>,
    /// The next slot of the chain that owns this one.
    next: Cell<u32>,
    /// Stage work timed for this item so far (sampled items only).
    work_ns: Cell<u64>,
    /// It reached an in-order gate before its turn and waits in its chain
    /// (`Step::Wait`).
    waiting: Cell<bool>,
    /// This item's stage work is timed (one in `SAMPLE_EVERY`).
    sampled: Cell<bool>,
}

impl SlotState {
    const fn new() -> Self {
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
        }
    }
}

/// A token: where its job points.
#[repr(align(64))]
pub(crate) struct Slot {
    engine: *const Engine<'static>,
    index: u32,
    state: SlotState,
    /// The job of the chain this slot heads while that chain is lent out
    /// (`lend`): what the worker's offer points at, read by the thief that
    /// takes it. Written by the slot's owner before each offer.
    lent_job: UnsafeCell<MaybeUninit<JobRef>>,
}

// SAFETY: a slot's state is owned by one job at a time (see the module
// invariants); `engine` is read-only during a run.
unsafe impl Sync for Slot {}
// SAFETY: as above.
unsafe impl Send for Slot {}

impl Slot {
    /// # Safety
    /// The caller owns the slot right now.
    unsafe fn state(&self) -> &SlotState {
        &self.state
    }
}

/// The memory items live in: one cell per token, each big and aligned
/// enough for every type a stage reads or writes, on its own cache lines.
struct ItemMemory {
    base: NonNull<u8>,
    stride: usize,
    layout: Layout,
}

impl ItemMemory {
    fn new(item: Layout, tokens: usize) -> ItemMemory {
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
enum Gate {
    Parallel,
    InOrder(Box<CachePadded<InOrderGate>>),
    AnyOrder(Box<CachePadded<AnyOrderGate>>),
}

/// The resources of runs with a given number of tokens.
struct Tokens {
    count: usize,
    slots: Box<[Slot]>,
    items: ItemMemory,
    /// On lines of its own: its state word and the next sequence number
    /// move with the holder.
    source_gate: CachePadded<AnyOrderGate>,
    gates: Box<[Gate]>,
}

/// Where a prepared run's resources are: plain pointers into `Tokens`, so
/// that the hot path does not unwrap an `Option` and check bounds each
/// time it looks at a slot (it did: 50 instructions of an item's 480).
struct RunView {
    slots: *mut Slot,
    gates: *const Gate,
    source_gate: *const AnyOrderGate,
    items: *mut u8,
    stride: usize,
    count: usize,
}

impl RunView {
    const EMPTY: RunView = RunView {
        slots: ptr::null_mut(),
        gates: ptr::null(),
        source_gate: ptr::null(),
        items: ptr::null_mut(),
        stride: 0,
        count: 0,
    };
}

/// A built pipeline: its stages, and the state of its runs (reused).
pub(crate) struct Engine<'a> {
    pub(crate) source: SourceStage<'a>,
    pub(crate) stages: Vec<Stage<'a>>,
    /// Room for the largest type any stage reads or writes.
    pub(crate) item_layout: Layout,
    pub(crate) cancel: Arc<CancelFlag>,
    tokens: Option<Tokens>,
    /// Points into `tokens` while a run is prepared.
    view: RunView,
    exhausted: AtomicBool,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// The run's latch, on its caller's stack.
    latch: AtomicPtr<CountLatch>,
    region: AtomicU64,
    /// The pool's workers, for the batch size when items are shared.
    workers: AtomicU32,
    /// Measured stage work per item (nanoseconds, a moving average over
    /// the sampled items; kept from run to run). Written per sampled item:
    /// on a line of its own.
    work_per_item: CachePadded<AtomicU32>,
    pub(crate) used_shared_queue: SharedQueueFlag,
    /// The shared-queue lane of a run started from outside the pool.
    pub(crate) priority: Priority,
}

// SAFETY: stage bodies are `Sync` (serial ones by their gates), items are
// `Send`, and everything else is atomics or owned by one slot holder at a
// time (the source's sequence counter by the source gate's holder); the
// view's pointers point into the engine's own tokens.
unsafe impl Sync for Engine<'_> {}
// SAFETY: as above; every closure and item type is `Send`.
unsafe impl Send for Engine<'_> {}

/// The slots a job owns, front to back, linked through the slots.
struct Chain {
    head: u32,
    tail: u32,
}

/// How `run_alone` ended.
enum Alone {
    /// The source is exhausted or the run cancelled: every token retired.
    Over,
    /// Items turned heavy and should be shared: the chain holds every
    /// token, free, and the gates are as a normal run leaves them.
    Heavy,
    /// An idle worker took the free tokens while a parallel stage ran: the
    /// chain is the one slot, its item at its next stage (or completed).
    Split,
}

/// The rest of a chain, lent out while one item's stage runs (`lend`):
/// the job it went out as, and where it was cut from that item.
struct Lent {
    /// The lent job, if it went to our deque (a lend inside a body that
    /// runs while an outer lend is out); None if the worker offers it.
    on_deque: Option<JobRef>,
    /// The slot that heads the lent chain.
    head: u32,
    /// The slot before the item (its `next` skips the item meanwhile).
    before: Option<u32>,
    /// The slot after the item.
    behind: u32,
}

/// What one step of the front slot (taken off the chain for the step) led
/// to.
enum Step<'e> {
    /// The item went on: it is the front again.
    Same,
    /// It left the chain (parked in a gate, routed to a pinned worker).
    Gone,
    /// It passed the last stage: its token goes to the back.
    Completed,
    /// It stays parked, and this other item, whose gate we now hold, takes
    /// its place at the front.
    Replaced(&'e Slot),
    /// Not its turn at an in-order gate yet: it keeps its place (and its
    /// token stays with this worker) while items behind it with stages to
    /// run go first; it parks only when nothing else is left to do.
    Wait,
}

impl<'a> Engine<'a> {
    pub(crate) fn new(source: SourceStage<'a>, item_layout: Layout) -> Self {
        Engine {
            source,
            stages: Vec::new(),
            item_layout,
            cancel: Arc::new(CancelFlag::default()),
            tokens: None,
            view: RunView::EMPTY,
            exhausted: AtomicBool::new(false),
            panic: Mutex::new(None),
            latch: AtomicPtr::new(ptr::null_mut()),
            region: AtomicU64::new(Region::NONE.to_bits()),
            workers: AtomicU32::new(1),
            work_per_item: CachePadded::new(AtomicU32::new(UNMEASURED)),
            used_shared_queue: SharedQueueFlag::new(),
            priority: Priority::Normal,
        }
    }

    /// Get ready for a run with `tokens` tokens on a pool of `workers`, in
    /// isolation region `region`, its latch at `latch` (counting every
    /// token). All tokens start in one chain, whose job is returned for the
    /// caller to submit: it fetches the first batch.
    pub(crate) fn prepare(
        &mut self,
        tokens: usize,
        workers: usize,
        latch: &CountLatch,
        region: Region,
    ) -> JobRef {
        if self.tokens.as_ref().is_none_or(|t| t.count != tokens) {
            self.tokens = Some(self.make_tokens(tokens));
        }
        let toks = self.tokens.as_mut().expect("tokens made above");
        toks.source_gate.reset();
        for gate in toks.gates.iter() {
            match gate {
                Gate::Parallel => {}
                Gate::InOrder(g) => g.reset(),
                Gate::AnyOrder(g) => g.reset(),
            }
        }
        // Pointer discipline (checked by Miri's borrow models): during the
        // run, the slots are reached only through this one raw pointer, and
        // the engine only through `engine` below, taken after the last
        // write to the engine through `self`.
        let slots = toks.slots.as_mut_ptr();
        self.view = RunView {
            slots,
            gates: toks.gates.as_ptr(),
            source_gate: &*toks.source_gate,
            items: toks.items.base.as_ptr(),
            stride: toks.items.stride,
            count: toks.count,
        };
        *self.exhausted.get_mut() = false;
        *self.panic.get_mut() = None;
        self.latch
            .store(ptr::from_ref(latch).cast_mut(), Ordering::Relaxed);
        self.region.store(region.to_bits(), Ordering::Relaxed);
        self.workers.store(workers as u32, Ordering::Relaxed);
        self.used_shared_queue.reset();
        let engine = ptr::from_ref::<Engine<'a>>(self).cast::<Engine<'static>>();
        let last = tokens as u32 - 1;
        for index in 0..tokens {
            // SAFETY: `index` is below the slot count; no job of this run
            // exists yet, so nobody else looks at the slots.
            let slot = unsafe { &mut *slots.add(index) };
            slot.engine = engine;
            slot.state = SlotState {
                next: Cell::new(if slot.index == last {
                    NO_SLOT
                } else {
                    slot.index + 1
                }),
                ..SlotState::new()
            };
        }
        self.job(self.slot(0))
    }

    fn make_tokens(&self, count: usize) -> Tokens {
        Tokens {
            count,
            slots: (0..count as u32)
                .map(|index| Slot {
                    engine: ptr::null(),
                    index,
                    state: SlotState::new(),
                    lent_job: UnsafeCell::new(MaybeUninit::uninit()),
                })
                .collect(),
            items: ItemMemory::new(self.item_layout, count),
            source_gate: CachePadded::new(AnyOrderGate::new(count)),
            gates: self
                .stages
                .iter()
                .map(|stage| match stage.mode {
                    StageMode::Parallel => Gate::Parallel,
                    StageMode::SerialInOrder => {
                        Gate::InOrder(Box::new(CachePadded::new(InOrderGate::new(count))))
                    }
                    StageMode::SerialOutOfOrder => {
                        Gate::AnyOrder(Box::new(CachePadded::new(AnyOrderGate::new(count))))
                    }
                })
                .collect(),
        }
    }

    /// The outcome of the run that just ended: its first panic, and whether
    /// it was cancelled (clearing the token for the next run).
    pub(crate) fn finish_run(&mut self) -> (Option<Box<dyn Any + Send>>, bool) {
        let panic = self.panic.get_mut().take();
        let cancelled = self.cancel.0.swap(false, Ordering::Relaxed);
        let cancelled = cancelled && panic.is_none();
        (panic, cancelled)
    }

    #[inline]
    fn slot(&self, index: u32) -> &Slot {
        debug_assert!((index as usize) < self.view.count);
        // SAFETY: slot indices of a prepared run are below its token count,
        // and the slots live as long as the engine's tokens.
        unsafe { &*self.view.slots.add(index as usize) }
    }

    #[inline]
    fn item(&self, slot: &Slot) -> *mut u8 {
        // SAFETY: one cell per token, within the item memory.
        unsafe { self.view.items.add(slot.index as usize * self.view.stride) }
    }

    #[inline]
    fn gate(&self, stage_index: usize) -> &Gate {
        debug_assert!(stage_index < self.stages.len());
        // SAFETY: one gate per stage, living with the tokens.
        unsafe { &*self.view.gates.add(stage_index) }
    }

    #[inline]
    fn source_gate(&self) -> &AnyOrderGate {
        // SAFETY: lives with the tokens of the prepared run.
        unsafe { &*self.view.source_gate }
    }

    fn region(&self) -> Region {
        Region::from_bits(self.region.load(Ordering::Relaxed))
    }

    /// The job of the chain that starts at `slot`.
    fn job(&self, slot: &Slot) -> JobRef {
        // SAFETY: slots live as long as the engine, which outlives the run
        // (the run waits for every token); the job runs once per push.
        unsafe { JobRef::new(NonNull::from(slot).cast(), run_chain, self.region()) }
    }

    #[inline]
    fn cancelled(&self) -> bool {
        self.cancel.0.load(Ordering::Relaxed)
    }

    fn record_panic(&self, payload: Box<dyn Any + Send>) {
        let mut first = self.panic.lock();
        if first.is_none() {
            *first = Some(payload);
        }
        self.cancel.0.store(true, Ordering::Relaxed);
    }

    /// Do items carry enough work to share them between workers?
    fn share_items(&self) -> bool {
        self.workers.load(Ordering::Relaxed) > 1
            && self.work_per_item.load(Ordering::Relaxed) >= SHARE_WORK_NS
    }

    /// How many items one fetch takes, `shared` saying whether items are
    /// shared between workers (read once by the caller: the measurement
    /// moves under other workers' feet).
    fn batch_limit(&self, worker: &WorkerThread, shared: bool) -> usize {
        let tokens = self.view.count;
        if worker.tracing() {
            // One fetch per step, so that each gets its trace record.
            1
        } else if shared {
            tokens.div_ceil(self.workers.load(Ordering::Relaxed) as usize)
        } else {
            tokens
        }
    }

    /// Is there a parallel stage after stage number `stage`?
    fn parallel_after(&self, stage: u32) -> bool {
        self.stages
            .iter()
            .skip(stage as usize)
            .any(|s| s.mode == StageMode::Parallel)
    }

    /// The worker the slot's next stage is pinned to, if any.
    fn pin_of(&self, stage: u32) -> Option<usize> {
        match stage {
            0 => self.source.pin,
            k => self.stages.get(k as usize - 1).and_then(|s| s.pin),
        }
    }

    /// Is stage number `stage` pinned strictly (runs on its worker only)?
    fn strict_pin(&self, stage: u32) -> bool {
        match stage {
            0 => self.source.strict,
            k => self.stages.get(k as usize - 1).is_some_and(|s| s.strict),
        }
    }

    /// The trace name of a step that found stage number `stage` not ready
    /// (parked, deferred or routed: no stage ran).
    #[cold]
    fn waits_name(&self, stage: u32) -> Arc<str> {
        Arc::from(format!("{} (waits)", self.stage_name(stage)))
    }

    /// The name of the slot's next stage (for its trace record).
    fn stage_name(&self, stage: u32) -> Arc<str> {
        match stage as usize {
            0 => self.source.name.clone(),
            k => self.stages[k - 1].name.clone(),
        }
    }

    /// Hand the chain that starts at `slot` to another job, from `worker`:
    /// to its first stage's worker if that is pinned elsewhere (mailbox,
    /// rule 4), else onto our own deque (rule 3).
    ///
    /// # Safety
    /// The caller owns the chain and gives it up here.
    unsafe fn schedule(&self, slot: &Slot, worker: &WorkerThread) {
        // SAFETY: owned per the contract, until the push below.
        let state = unsafe { slot.state() };
        match self.pin_of(state.stage.get()) {
            Some(pin) if pin != worker.index() => {
                state.routed.set(true);
                if self.strict_pin(state.stage.get())
                    && worker
                        .registry()
                        .route_strict_if_possible(self.job(slot), pin)
                {
                    return;
                }
                worker.registry().route(
                    self.job(slot),
                    Dispatch::Spawn,
                    Some(pin),
                    Some(worker),
                    || self.used_shared_queue.note(),
                );
            }
            _ => worker.push(self.job(slot)),
        }
    }

    /// Run the chain that starts at `head` (see the module documentation).
    /// With tracing on, one step per job, so that each stage execution
    /// gets its own record.
    ///
    /// # Safety
    /// The caller owns the chain (its job was taken from a queue, once).
    unsafe fn drive(&self, head: &Slot, worker: &WorkerThread) -> Option<Next> {
        let tracing = worker.tracing();
        // SAFETY: we own the chain.
        let mut chain = unsafe { self.chain_from(head.index) };
        // Tokens that found the source exhausted: released as our very
        // last act (the run may end with the last one).
        let mut retired = NO_SLOT;
        // The first step was counted by the worker loop that took the job.
        let mut counted = true;
        // How the front item came to us, for the count of its first step.
        let mut came_by = Rule::OwnDeque;
        while chain.head != NO_SLOT {
            let front = self.slot(chain.head);
            // SAFETY: the chain is ours.
            let state = unsafe { front.state() };
            if state.stage.get() == 0 {
                // Only tokens left: fetch a batch.
                if !counted {
                    worker.count_task(Rule::OwnDeque);
                }
                counted = false;
                // SAFETY: the chain is ours.
                let fetched = unsafe { self.refill(&mut chain, &mut retired, worker) };
                if tracing {
                    worker.set_trace_name(Some(if fetched {
                        self.source.name.clone()
                    } else {
                        self.waits_name(0)
                    }));
                    if chain.head != NO_SLOT {
                        // SAFETY: not our last units: the chain holds some.
                        unsafe { self.release(retired) };
                        return Some(self.next_job(&chain, Rule::Returned));
                    }
                }
                continue;
            }
            // The item to carry on: the front, unless it waits for its turn
            // at an in-order gate and an item behind it has a stage to run
            // first; then that one, and the front keeps its place.
            // SAFETY: the chain is ours.
            let (current, mut before) = match unsafe { self.runnable_behind(front, state) } {
                Some(pair) => pair,
                None => (front, None),
            };
            // Nothing else to do: the front must go in, or park.
            let force = state.waiting.get() && before.is_none();
            // An item behind the waiting front cannot have its turn at the
            // front's gate before the front: no need to read the turn word
            // (a cache miss whenever another worker took or left the gate).
            let blocked_at = if before.is_some() {
                state.stage.get()
            } else {
                0
            };
            // SAFETY: ours.
            let cur_state = unsafe { current.state() };
            // Carry it as far as it goes (rule 1).
            let mut rule = came_by;
            came_by = Rule::OwnDeque;
            loop {
                if !counted {
                    worker.count_task(rule);
                }
                counted = false;
                let stage_number = cur_state.stage.get();
                let name = tracing.then(|| self.stage_name(stage_number));
                // Read before the step: the item may be given away in it.
                let behind = cur_state.next.get();
                // SAFETY: the chain is ours, and `current` is in it.
                let step = unsafe {
                    self.step(current, &mut before, &mut chain, worker, force, blocked_at)
                };
                let unlink = |chain: &mut Chain, replacement: u32| {
                    let next = if replacement == NO_SLOT {
                        behind
                    } else {
                        replacement
                    };
                    match before {
                        // SAFETY: ours.
                        Some(prev) => unsafe { prev.state() }.next.set(next),
                        None => chain.head = next,
                    }
                    if chain.tail == current.index {
                        chain.tail = match (replacement, before) {
                            (NO_SLOT, Some(prev)) => prev.index,
                            (NO_SLOT, None) => NO_SLOT,
                            (r, _) => r,
                        };
                    }
                };
                match step {
                    Step::Same | Step::Wait => {}
                    Step::Gone => unlink(&mut chain, NO_SLOT),
                    Step::Completed => {
                        // Still ours: a free token now, to the back. (A
                        // hand-over may have put an item right behind it.)
                        let behind = cur_state.next.get();
                        match before {
                            // SAFETY: ours.
                            Some(prev) => unsafe { prev.state() }.next.set(behind),
                            None => chain.head = behind,
                        }
                        if chain.tail == current.index {
                            chain.tail = before.map_or(NO_SLOT, |p| p.index);
                        }
                        // SAFETY: ours.
                        unsafe { self.push_back(&mut chain, current) };
                    }
                    Step::Replaced(other) => {
                        // SAFETY: the gate made it ours; `current` is parked.
                        unsafe { other.state() }.next.set(behind);
                        unlink(&mut chain, other.index);
                    }
                }
                if tracing {
                    if matches!(step, Step::Gone | Step::Wait) {
                        // It waits: no stage ran.
                        worker.set_trace_name(Some(self.waits_name(stage_number)));
                    } else {
                        worker.set_trace_name(name);
                    }
                    if chain.head == NO_SLOT {
                        break;
                    }
                    // SAFETY: not our last units: the chain holds some.
                    unsafe { self.release(retired) };
                    let rule = match step {
                        Step::Replaced(_) => Rule::Successor,
                        Step::Same => Rule::Returned,
                        _ => Rule::OwnDeque,
                    };
                    return Some(self.next_job(&chain, rule));
                }
                match step {
                    Step::Same => rule = Rule::Returned,
                    Step::Replaced(_) => {
                        came_by = Rule::Successor;
                        break;
                    }
                    _ => break,
                }
            }
        }
        // SAFETY: our last touch of the run.
        unsafe { self.release(retired) };
        None
    }

    /// The job that carries on with `chain` (tracing: one step per job).
    fn next_job(&self, chain: &Chain, rule: Rule) -> Next {
        Next {
            job: self.job(self.slot(chain.head)),
            rule,
        }
    }

    /// The chain that starts at `head`, with its tail found.
    ///
    /// # Safety
    /// The caller owns the chain.
    unsafe fn chain_from(&self, head: u32) -> Chain {
        let mut tail = head;
        loop {
            // SAFETY: owned.
            let next = unsafe { self.slot(tail).state() }.next.get();
            if next == NO_SLOT {
                return Chain { head, tail };
            }
            tail = next;
        }
    }

    fn pop_front(&self, chain: &mut Chain) {
        // SAFETY: the chain is ours; its head was just stepped.
        let next = unsafe { self.slot(chain.head).state() }.next.get();
        chain.head = next;
        if next == NO_SLOT {
            chain.tail = NO_SLOT;
        }
    }

    /// # Safety
    /// The caller owns the chain and `slot`, which is in no chain.
    unsafe fn push_back(&self, chain: &mut Chain, slot: &Slot) {
        // SAFETY: owned.
        unsafe { slot.state() }.next.set(NO_SLOT);
        if chain.tail == NO_SLOT {
            chain.head = slot.index;
        } else {
            // SAFETY: owned.
            unsafe { self.slot(chain.tail).state() }
                .next
                .set(slot.index);
        }
        chain.tail = slot.index;
    }

    /// # Safety
    /// The caller owns the chain and `slot`, which is in no chain.
    unsafe fn push_front(&self, chain: &mut Chain, slot: &Slot) {
        // SAFETY: owned.
        unsafe { slot.state() }.next.set(chain.head);
        chain.head = slot.index;
        if chain.tail == NO_SLOT {
            chain.tail = slot.index;
        }
    }

    /// Advance the item in `slot` (in the chain, right behind `before`) by
    /// one stage. With `force`, an item that is not yet its turn at an
    /// in-order gate parks there; without, it just waits in the chain. An
    /// item at stage `blocked_at` waits without a look at the turn: an item
    /// ahead of it in the chain waits there. If the rest of the chain was
    /// taken while the stage ran (`lend`), the chain is `slot` alone (and
    /// what a gate handed over behind it), and `before` is `None`.
    ///
    /// # Safety
    /// The caller owns the chain.
    unsafe fn step<'e>(
        &'e self,
        slot: &'e Slot,
        before: &mut Option<&'e Slot>,
        chain: &mut Chain,
        worker: &WorkerThread,
        force: bool,
        blocked_at: u32,
    ) -> Step<'e> {
        // SAFETY: owned per the contract.
        let state = unsafe { slot.state() };
        let index = state.stage.get() as usize - 1;
        debug_assert!(index < self.stages.len());
        // SAFETY: a slot's stage number is 1..=n between fetch and
        // completion (0 means a free token, handled by the caller).
        let stage = unsafe { self.stages.get_unchecked(index) };
        if let Some(pin) = stage.pin
            && pin != worker.index()
            && !state.routed.get()
        {
            // Off to the pinned worker, as a chain of its own.
            state.next.set(NO_SLOT);
            // SAFETY: ours, given up here.
            unsafe { self.schedule(slot, worker) };
            return Step::Gone;
        }
        state.routed.set(false);
        if state.has_item.get() && self.cancelled() {
            self.drop_input(index, slot);
            state.has_item.set(false);
        }
        let last = index + 1 == self.stages.len();
        match self.gate(index) {
            Gate::Parallel => {
                if state.has_item.get() {
                    // SAFETY: the chain is ours, `slot` in it behind `before`.
                    unsafe { self.run_body_lending(stage, slot, before, chain, worker) };
                }
            }
            Gate::AnyOrder(gate) => {
                let held = state.held_gate.get() == state.stage.get();
                if !state.has_item.get() && !held {
                    // A dropped item needs no turn here. (One that was
                    // handed the gate before it was dropped must pass the
                    // gate on below.)
                } else {
                    if !held {
                        match gate.arrive(slot.index) {
                            Arrival::Enter => {}
                            Arrival::Parked => return Step::Gone,
                            Arrival::Switch(other) => {
                                // We hold the gate for another parked item:
                                // it takes our place in the chain.
                                let other = self.slot(other);
                                // SAFETY: the gate made it ours.
                                let other_state = unsafe { other.state() };
                                other_state.held_gate.set(other_state.stage.get());
                                return Step::Replaced(other);
                            }
                        }
                    }
                    state.held_gate.set(NO_GATE);
                    if state.has_item.get() {
                        // SAFETY: as above.
                        unsafe { self.run_body_lending(stage, slot, before, chain, worker) };
                    }
                    if let Some(next) = gate.finish() {
                        // SAFETY: the gate handed `next` to us.
                        unsafe { self.hand_over(chain, slot, next, worker) };
                    }
                }
            }
            Gate::InOrder(gate) => {
                if state.held_gate.get() == state.stage.get() {
                    state.held_gate.set(NO_GATE);
                } else if state.reserved_gate.get() == state.stage.get() {
                    state.reserved_gate.set(NO_GATE);
                } else {
                    if !force {
                        // Not forced: enter only if it is our turn now, with
                        // one read-modify-write (a read first, then the
                        // write, moved the gate's line between the cores
                        // twice).
                        if state.stage.get() == blocked_at || !gate.try_enter(state.sequence.get())
                        {
                            state.waiting.set(true);
                            return Step::Wait;
                        }
                        state.waiting.set(false);
                    } else {
                        // Before arriving: once parked, the slot is the gate
                        // holder's (Miri caught this write made after).
                        state.waiting.set(false);
                        match gate.arrive(state.sequence.get(), slot.index) {
                            Arrival::Enter => {}
                            Arrival::Parked | Arrival::Switch(_) => return Step::Gone,
                        }
                    }
                }
                if state.has_item.get() {
                    // SAFETY: as above.
                    unsafe { self.run_body_lending(stage, slot, before, chain, worker) };
                }
                // SAFETY: the chain is ours.
                if unsafe { self.next_in_chain_is(state, state.sequence.get() + 1) } {
                    // The next item is ours, right behind: keep the gate
                    // for it (one read-modify-write instead of two, and
                    // none when it arrives).
                    gate.pass_on(state.sequence.get());
                    // SAFETY: ours.
                    unsafe { self.slot(state.next.get()).state() }
                        .reserved_gate
                        .set(state.stage.get());
                } else if let Some(next) = gate.finish(state.sequence.get()) {
                    // SAFETY: the gate handed `next` to us.
                    unsafe { self.hand_over(chain, slot, next, worker) };
                }
            }
        }
        state.stage.set(state.stage.get() + 1);
        if last {
            self.complete_item(slot, state);
            return Step::Completed;
        }
        Step::Same
    }

    /// If the front waits for its turn at an in-order gate: the first item
    /// behind it with a stage to run before that gate, and the slot before
    /// that item in the chain. (None if the front does not wait or nothing
    /// behind it can run.) The turn is not looked at: the items behind run
    /// up to the gate first, and the front tries it when nothing else is
    /// left, so the gate's word is tried once a batch rather than once an
    /// item (each read of it, written by another worker, is a cache miss).
    ///
    /// # Safety
    /// The caller owns the chain.
    unsafe fn runnable_behind<'e>(
        &'e self,
        front: &'e Slot,
        state: &SlotState,
    ) -> Option<(&'e Slot, Option<&'e Slot>)> {
        if !state.waiting.get() {
            return None;
        }
        let mut prev = front;
        // SAFETY: ours.
        let mut at = unsafe { prev.state() }.next.get();
        while at != NO_SLOT {
            let slot = self.slot(at);
            // SAFETY: ours.
            let s = unsafe { slot.state() };
            if s.stage.get() == 0 {
                return None;
            }
            if s.stage.get() < state.stage.get() {
                return Some((slot, Some(prev)));
            }
            prev = slot;
            at = s.next.get();
        }
        None
    }

    /// Is the item behind `front` in its chain the one with sequence
    /// `sequence`, not holding a reservation already? (Used right after
    /// `front` passed an in-order gate, so that one cannot have passed it.)
    ///
    /// # Safety
    /// The caller owns the chain.
    unsafe fn next_in_chain_is(&self, front: &SlotState, sequence: u64) -> bool {
        if front.next.get() == NO_SLOT {
            return false;
        }
        // SAFETY: ours.
        let next = unsafe { self.slot(front.next.get()).state() };
        next.stage.get() != 0
            && next.sequence.get() == sequence
            && next.reserved_gate.get() == NO_GATE
    }

    /// A serial stage handed us the next parked item (rule 2): it joins our
    /// chain right behind the current item, or, when
    /// items are shared between workers, becomes a job of its own on our
    /// deque.
    ///
    /// # Safety
    /// The caller owns the chain; the gate made `next` ours.
    unsafe fn hand_over(
        &self,
        chain: &mut Chain,
        current: &Slot,
        next: u32,
        worker: &WorkerThread,
    ) {
        let next = self.slot(next);
        // SAFETY: handed to us by the gate.
        let state = unsafe { next.state() };
        state.held_gate.set(state.stage.get());
        // Shared only if a parallel stage is still ahead of it, where
        // another worker could help; a serial tail (the usual sink) stays
        // here, next to the gate's state.
        if self.share_items() && self.parallel_after(state.stage.get()) {
            state.next.set(NO_SLOT);
            // SAFETY: ours, given up here.
            unsafe { self.schedule(next, worker) };
        } else {
            // SAFETY: the chain is ours, `current` in it.
            let current_state = unsafe { current.state() };
            state.next.set(current_state.next.get());
            current_state.next.set(next.index);
            if chain.tail == current.index {
                chain.tail = next.index;
            }
        }
    }

    /// The item passed every stage: drop what it holds and note its work.
    fn complete_item(&self, slot: &Slot, state: &SlotState) {
        if state.has_item.get() {
            let drop_output = match self.stages.last() {
                Some(stage) => stage.drop_output,
                None => self.source.drop_output,
            };
            if let Some(drop_output) = drop_output {
                // SAFETY: an item that has passed every stage holds the
                // last stage's output, dropped once.
                unsafe { drop_output(self.item(slot)) };
            }
            state.has_item.set(false);
        }
        if state.sampled.get() {
            let sample = u32::try_from(state.work_ns.get()).unwrap_or(u32::MAX - 1);
            let old = self.work_per_item.load(Ordering::Relaxed);
            let new = if old == UNMEASURED {
                sample.max(1)
            } else {
                ((u64::from(old) * 3 + u64::from(sample)) / 4) as u32
            };
            self.work_per_item.store(new, Ordering::Relaxed);
        }
        state.stage.set(0);
    }

    /// Drop the value an item holds before stage `index` runs.
    fn drop_input(&self, index: usize, slot: &Slot) {
        let drop_input = match index {
            0 => self.source.drop_output,
            k => self.stages[k - 1].drop_output,
        };
        if let Some(drop_input) = drop_input {
            // SAFETY: before stage `index` the item holds the previous
            // stage's output, dropped once (the caller clears `has_item`).
            unsafe { drop_input(self.item(slot)) };
        }
    }

    /// Run the stage's closure on `slot`'s item with the rest of the chain
    /// lent out meanwhile (see "Work conservation" in the module
    /// documentation): on return, the chain is either as it was, or `slot`
    /// alone with `before` cleared, if an idle worker took the rest (then
    /// it returns true).
    ///
    /// # Safety
    /// The caller owns the chain, and `slot` is in it right behind `before`
    /// (or at its front).
    #[inline]
    unsafe fn run_body_lending<'e>(
        &'e self,
        stage: &Stage<'_>,
        slot: &'e Slot,
        before: &mut Option<&'e Slot>,
        chain: &mut Chain,
        worker: &WorkerThread,
    ) -> bool {
        // SAFETY: forwarded.
        let lent = unsafe { self.lend(chain, slot, *before, worker) };
        // SAFETY: ours.
        self.run_body(stage, slot, unsafe { slot.state() });
        // SAFETY: forwarded; `lent` came from `lend` above.
        lent.is_some_and(|lent| unsafe { self.reclaim(lent, chain, slot, before, worker) })
    }

    /// Put every slot of the chain but `current` on our deque as a job of
    /// its own, quietly (no wake-up: `Sleep`'s heartbeat brings sleepers),
    /// while `current`'s stage runs. None if there is nothing to lend or
    /// nobody to lend it to.
    ///
    /// # Safety
    /// As `run_body_lending`. The lent slots are not ours until `reclaim`
    /// gets them back.
    unsafe fn lend(
        &self,
        chain: &Chain,
        current: &Slot,
        before: Option<&Slot>,
        worker: &WorkerThread,
    ) -> Option<Lent> {
        if self.workers.load(Ordering::Relaxed) < 2 {
            return None;
        }
        // SAFETY: ours.
        let state = unsafe { current.state() };
        let behind = state.next.get();
        let head = match before {
            None if behind == NO_SLOT => return None,
            None => behind,
            Some(prev) => {
                // SAFETY: ours. The front part of the chain skips `current`.
                unsafe { prev.state() }.next.set(behind);
                chain.head
            }
        };
        state.next.set(NO_SLOT);
        let head_slot = self.slot(head);
        let job = self.job(head_slot);
        let on_deque = if worker.has_offer_out() {
            // An outer lend of ours is out (we run inside its body): this
            // one goes to the deque, as plain rule 6 work.
            worker.push_quiet(job);
            Some(job)
        } else {
            let lent_job = head_slot.lent_job.get();
            // SAFETY: the chain is ours, `head` in it: nobody else reads
            // the cell until it is offered.
            unsafe { (*lent_job).write(job) };
            // SAFETY: the cell holds the job, unchanged until we withdraw
            // it or a thief took it (then the chain, with the cell, is its
            // own).
            let accepted = unsafe { worker.offer_lent(NonNull::from(&*lent_job).cast()) };
            debug_assert!(accepted, "no offer of ours was out");
            None
        };
        Some(Lent {
            on_deque,
            head,
            before: before.map(|prev| prev.index),
            behind,
        })
    }

    /// After the stage ran: take the lent slots back if nobody took them
    /// (they are still at the tail of our deque), and relink the chain as
    /// it was. Otherwise they are another job's now (a thief's, or still
    /// on our deque under work the stage pushed): our chain is `current`,
    /// and it returns true.
    ///
    /// # Safety
    /// As `run_body_lending`, with `lent` from `lend` for this `current`.
    unsafe fn reclaim<'e>(
        &'e self,
        lent: Lent,
        chain: &mut Chain,
        current: &'e Slot,
        before: &mut Option<&'e Slot>,
        worker: &WorkerThread,
    ) -> bool {
        let back = match lent.on_deque {
            None => {
                // SAFETY: after our accepted offer.
                let back = unsafe { worker.withdraw_lent() };
                if back {
                    // SAFETY: ours again: nobody took the offer. A job of
                    // an isolated region holds memory of its own.
                    unsafe { (*self.slot(lent.head).lent_job.get()).assume_init_read() }.discard();
                }
                back
            }
            Some(job) => match worker.pop_own() {
                Some(popped) if popped.same_job(&job) => {
                    popped.discard();
                    true
                }
                other => {
                    if let Some(popped) = other {
                        // The stage's own work (a spawn it left behind): back
                        // on top; the lent job below it runs on its own later.
                        worker.push_quiet(popped);
                    }
                    false
                }
            },
        };
        if back {
            // SAFETY: ours again: nobody ran the job.
            unsafe { current.state() }.next.set(lent.behind);
            if let Some(prev) = lent.before {
                // SAFETY: as above.
                unsafe { self.slot(prev).state() }.next.set(current.index);
            }
            false
        } else {
            *chain = Chain {
                head: current.index,
                tail: current.index,
            };
            *before = None;
            true
        }
    }

    /// Run the stage's closure on the item, catching a panic; time it for
    /// a sampled item.
    #[inline]
    fn run_body(&self, stage: &Stage<'_>, slot: &Slot, state: &SlotState) {
        let item = self.item(slot);
        let timer = if state.sampled.get() {
            Some(Instant::now())
        } else {
            None
        };
        // SAFETY: the item holds the stage's input; a serial stage's gate is
        // held by this job (checked by the caller).
        match unwind::halt_unwinding(|| unsafe { stage.body.call(item) }) {
            Ok(()) => {
                if let Some(flatten) = stage.flatten {
                    // SAFETY: the body left its `Option<T>` output there.
                    state.has_item.set(unsafe { flatten(item) });
                }
            }
            Err(payload) => {
                // The input was moved into the closure: nothing is left.
                state.has_item.set(false);
                self.record_panic(payload);
            }
        }
        if let Some(start) = timer {
            state
                .work_ns
                .set(state.work_ns.get() + start.elapsed().as_nanos() as u64);
        }
    }

    /// The chain holds only free tokens: take the source gate and fetch a
    /// batch (see the module documentation). Tokens that find the source
    /// exhausted move to `retired`. Returns whether it fetched anything.
    ///
    /// # Safety
    /// The caller owns the chain.
    unsafe fn refill(&self, chain: &mut Chain, retired: &mut u32, worker: &WorkerThread) -> bool {
        let gate = self.source_gate();
        // SAFETY: the chain is ours.
        if unsafe { self.alone(chain, worker) } {
            // SAFETY: the chain is ours and holds every token.
            match unsafe { self.run_alone(chain, retired, worker) } {
                Alone::Over | Alone::Split => return true,
                Alone::Heavy => {}
            }
        }
        // Take the gate (or park our tokens at it).
        loop {
            if chain.head == NO_SLOT {
                return false;
            }
            let front = self.slot(chain.head);
            // SAFETY: ours.
            let state = unsafe { front.state() };
            if let Some(pin) = self.source.pin
                && pin != worker.index()
                && !state.routed.get()
            {
                // The source runs on its worker: send the tokens there.
                let head = chain.head;
                *chain = Chain {
                    head: NO_SLOT,
                    tail: NO_SLOT,
                };
                // SAFETY: ours, given up here.
                unsafe { self.schedule(self.slot(head), worker) };
                return false;
            }
            state.routed.set(false);
            if state.held_gate.get() == SOURCE_GATE {
                // Passed the source gate by the previous fetcher.
                state.held_gate.set(NO_GATE);
                break;
            }
            if self.exhausted.load(Ordering::Acquire) {
                // SAFETY: ours.
                unsafe { self.retire_chain(chain, retired) };
                return false;
            }
            // Off the chain before arriving: a parked token may be taken
            // by the gate's holder at once.
            self.pop_front(chain);
            match gate.arrive(front.index) {
                Arrival::Enter => {
                    // SAFETY: still ours.
                    unsafe { self.push_front(chain, front) };
                    break;
                }
                Arrival::Switch(other) => {
                    // Our token is parked now; we fetch for `other`.
                    // SAFETY: the gate made `other` ours.
                    unsafe { self.push_front(chain, self.slot(other)) };
                    break;
                }
                Arrival::Parked => {}
            }
        }
        // We hold the source gate. Fetch, in chain order, then for tokens
        // parked at the gate, up to the batch limit.
        // Decided once for the whole batch: a light batch takes every token
        // it holds, and only then may it keep them all (below); another
        // worker's sampled item can flip `share_items` in between.
        let shared = self.share_items();
        let limit = self.batch_limit(worker, shared);
        let mut items = Chain {
            head: NO_SLOT,
            tail: NO_SLOT,
        };
        let mut fetched = 0;
        let mut exhausted = false;
        while fetched < limit && !exhausted {
            let token = if chain.head != NO_SLOT {
                let t = self.slot(chain.head);
                self.pop_front(chain);
                t
            } else if let Some(parked) = gate.pop_parked() {
                self.slot(parked)
            } else {
                break;
            };
            // SAFETY: we hold the source gate and own the token.
            if unsafe { self.fetch_one(token) } {
                // SAFETY: ours.
                unsafe { self.push_back(&mut items, token) };
                fetched += 1;
            } else {
                exhausted = true;
                // SAFETY: ours.
                unsafe { self.push_retired(retired, token) };
            }
        }
        if exhausted {
            // Every other token we own or find parked is done too.
            // SAFETY: ours.
            unsafe { self.retire_chain(chain, retired) };
            while let Some(parked) = gate.pop_parked().or_else(|| gate.finish()) {
                // SAFETY: the gate made it ours.
                unsafe { self.push_retired(retired, self.slot(parked)) };
            }
        } else if shared || worker.tracing() {
            // Tokens left over (ours, or parked meanwhile): pass the gate
            // on to a job of them, for another worker to fetch the next
            // batch; with nothing left, just leave.
            let next = if chain.head != NO_SLOT {
                Some(self.slot(chain.head))
            } else {
                gate.pop_parked().or_else(|| gate.finish()).map(|t| {
                    let t = self.slot(t);
                    // SAFETY: the gate made it ours.
                    unsafe { t.state() }.next.set(NO_SLOT);
                    t
                })
            };
            if let Some(next) = next {
                // SAFETY: ours; the gate goes with it.
                unsafe { next.state() }.held_gate.set(SOURCE_GATE);
                *chain = Chain {
                    head: NO_SLOT,
                    tail: NO_SLOT,
                };
                // SAFETY: ours (with the rest of the old chain behind it),
                // given up here.
                unsafe { self.schedule(next, worker) };
            }
        } else {
            // Light items: we fetch for every token, also those parked
            // while we fetched, and keep them all on this worker. (The
            // limit was every token, so none is left in `chain`.)
            debug_assert!(chain.head == NO_SLOT, "a light batch left a token behind");
            while let Some(parked) = gate.finish() {
                let token = self.slot(parked);
                // SAFETY: the gate made it ours; we hold the gate again.
                if unsafe { self.fetch_one(token) } {
                    // SAFETY: ours.
                    unsafe { self.push_back(&mut items, token) };
                } else {
                    // SAFETY: ours.
                    unsafe { self.push_retired(retired, token) };
                    while let Some(parked) = gate.pop_parked().or_else(|| gate.finish()) {
                        // SAFETY: the gate made it ours.
                        unsafe { self.push_retired(retired, self.slot(parked)) };
                    }
                    break;
                }
            }
        }
        *chain = items;
        fetched > 0
    }

    /// Do we hold every token of the run, free, with light items and no
    /// stage pinned elsewhere? Then nobody else is inside the pipeline, and
    /// it can run as a plain loop on this worker (`run_alone`).
    ///
    /// # Safety
    /// The caller owns the chain, which holds only free tokens.
    unsafe fn alone(&self, chain: &Chain, worker: &WorkerThread) -> bool {
        if worker.tracing() || self.share_items() {
            return false;
        }
        let here = Some(worker.index());
        let pinned_elsewhere = |pin: Option<usize>| pin.is_some() && pin != here;
        if pinned_elsewhere(self.source.pin) || self.stages.iter().any(|s| pinned_elsewhere(s.pin))
        {
            return false;
        }
        let mut count = 0;
        let mut held = None;
        let mut at = chain.head;
        while at != NO_SLOT {
            // SAFETY: ours.
            let state = unsafe { self.slot(at).state() };
            if state.held_gate.get() == SOURCE_GATE {
                held = Some(at);
            }
            count += 1;
            at = state.next.get();
        }
        if count != self.view.count {
            return false;
        }
        if let Some(at) = held {
            // The source gate was passed to us: nobody else can be parked
            // at it (we hold every token), so just let it go.
            // SAFETY: ours.
            unsafe { self.slot(at).state() }.held_gate.set(NO_GATE);
            let nobody = self.source_gate().finish();
            debug_assert!(nobody.is_none(), "a token parked while we hold all");
        }
        true
    }

    /// The whole pipeline on this worker, one item at a time through every
    /// stage, with no gate and no atomic operation: we hold every token,
    /// so no other job is inside it, and light items are cheaper run here
    /// than moved.
    ///
    /// Each in-order gate's turn is kept exact as items pass (one plain
    /// store), and the source's next sequence number too, so that around a
    /// parallel stage the free tokens can be lent out (`lend`): if an idle
    /// worker takes them while the stage runs, it finds the gates as a
    /// normal run would have left them, and we go on with our item through
    /// the gates like any chain. (Serial stages run without their gates
    /// here, so nothing is lent around them.)
    ///
    /// # Safety
    /// The caller owns the chain, which holds every token of the run, free.
    unsafe fn run_alone(
        &self,
        chain: &mut Chain,
        retired: &mut u32,
        worker: &WorkerThread,
    ) -> Alone {
        let slot = self.slot(chain.head);
        // SAFETY: ours.
        let state = unsafe { slot.state() };
        let item = self.item(slot);
        // SAFETY: the chain is ours, `slot` at its front.
        let mut lent = unsafe { self.prepare_alone_lend(slot) };
        let ended = loop {
            if self.cancelled() {
                break Alone::Over;
            }
            // SAFETY: the source is ours alone; the cell fits its item.
            match unwind::halt_unwinding(|| unsafe { self.source.body.fetch(item) }) {
                Ok(true) => {}
                Ok(false) => break Alone::Over,
                Err(payload) => {
                    self.record_panic(payload);
                    break Alone::Over;
                }
            }
            // SAFETY: nobody else fetches while we hold every token (the
            // tokens are lent only after this).
            let sequence = {
                let next = unsafe { self.source_gate().holder_word() };
                *next += 1;
                *next - 1
            };
            state.sequence.set(sequence);
            state.has_item.set(true);
            state.work_ns.set(0);
            state.sampled.set(sequence % SAMPLE_EVERY == 0);
            for (index, stage) in self.stages.iter().enumerate() {
                worker.count_task(Rule::Returned);
                if state.has_item.get() && self.cancelled() {
                    self.drop_input(index, slot);
                    state.has_item.set(false);
                }
                match self.gate(index) {
                    Gate::Parallel if state.has_item.get() => {
                        // SAFETY: the chain is ours, `slot` at its front,
                        // `lent` from `prepare_alone_lend` for it.
                        if unsafe { self.run_body_alone(stage, slot, &mut lent, chain, worker) } {
                            // The free tokens were taken: from here on
                            // the item goes through the gates.
                            state.stage.set(index as u32 + 2);
                            if index + 1 == self.stages.len() {
                                self.complete_item(slot, state);
                            }
                            return Alone::Split;
                        }
                    }
                    Gate::Parallel => {}
                    Gate::InOrder(gate) => {
                        if state.has_item.get() {
                            self.run_body(stage, slot, state);
                        }
                        // Passed (or skipped, as a dropped item does).
                        gate.skip_to(sequence + 1);
                    }
                    Gate::AnyOrder(_) => {
                        if state.has_item.get() {
                            self.run_body(stage, slot, state);
                        }
                    }
                }
            }
            state.stage.set(self.stages.len() as u32 + 1);
            self.complete_item(slot, state);
            if self.share_items() {
                break Alone::Heavy;
            }
            worker.count_task(Rule::Returned);
        };
        if let Some(job) = lent {
            // SAFETY: never taken (a split returned above): still ours.
            unsafe { job.as_ptr().read() }.discard();
        }
        if let Alone::Heavy = ended {
            return ended;
        }
        // The source is exhausted or the run cancelled.
        self.exhausted.store(true, Ordering::Release);
        // SAFETY: ours.
        unsafe { self.retire_chain(chain, retired) };
        Alone::Over
    }

    /// For `run_alone`: the job of the free tokens behind `slot`, written
    /// once into the slot that heads them, to offer around each parallel
    /// body (the chain behind `slot` does not change while we run alone).
    /// None if there is nothing to lend or nobody to lend it to.
    ///
    /// # Safety
    /// The caller owns the chain, `slot` at its front.
    unsafe fn prepare_alone_lend(&self, slot: &Slot) -> Option<NonNull<JobRef>> {
        // SAFETY: ours.
        let behind = unsafe { slot.state() }.next.get();
        if self.workers.load(Ordering::Relaxed) < 2 || behind == NO_SLOT {
            return None;
        }
        let head = self.slot(behind);
        let cell = head.lent_job.get();
        // SAFETY: ours; nobody reads the cell before it is offered.
        unsafe { (*cell).write(self.job(head)) };
        Some(NonNull::from(unsafe { &*cell }).cast())
    }

    /// `run_body` for `run_alone`: with the free tokens behind `slot`
    /// offered to idle workers meanwhile. True if one took them: then the
    /// chain is `slot` alone, and `lent` is None.
    ///
    /// # Safety
    /// The caller owns the chain, `slot` at its front; `lent` came from
    /// `prepare_alone_lend` for this chain.
    #[inline]
    unsafe fn run_body_alone(
        &self,
        stage: &Stage<'_>,
        slot: &Slot,
        lent: &mut Option<NonNull<JobRef>>,
        chain: &mut Chain,
        worker: &WorkerThread,
    ) -> bool {
        let Some(job) = *lent else {
            self.run_body(stage, slot, unsafe { slot.state() });
            return false;
        };
        if worker.has_offer_out() {
            // An outer offer of ours is out (this run is inside a body of
            // another): `lend` goes through the deque instead, and leaves
            // the cell alone.
            // The cell's job is ours: out of it while a thief could get
            // the chain (and the cell) by the deque.
            // SAFETY: written by `prepare_alone_lend`, never given away.
            let prepared = unsafe { job.as_ptr().read() };
            let mut before = None;
            // SAFETY: forwarded.
            let split = unsafe { self.run_body_lending(stage, slot, &mut before, chain, worker) };
            if split {
                prepared.discard();
                *lent = None;
            } else {
                // SAFETY: the chain, with the cell, came back to us.
                unsafe { job.as_ptr().write(prepared) };
            }
            return split;
        }
        // SAFETY: the job in the cell is the chain behind `slot`, ours and
        // unchanged until withdrawn or taken; no offer of ours is out.
        let accepted = unsafe { worker.offer_lent(job) };
        debug_assert!(accepted);
        // SAFETY: ours.
        self.run_body(stage, slot, unsafe { slot.state() });
        // SAFETY: after the accepted offer above.
        if unsafe { worker.withdraw_lent() } {
            return false;
        }
        // Taken: the tokens behind are the thief's, with the job's cell.
        *lent = None;
        // SAFETY: ours.
        unsafe { slot.state() }.next.set(NO_SLOT);
        *chain = Chain {
            head: slot.index,
            tail: slot.index,
        };
        true
    }

    /// Move every token of `chain` to `retired`.
    ///
    /// # Safety
    /// The caller owns the chain.
    unsafe fn retire_chain(&self, chain: &mut Chain, retired: &mut u32) {
        while chain.head != NO_SLOT {
            let t = self.slot(chain.head);
            self.pop_front(chain);
            // SAFETY: ours.
            unsafe { self.push_retired(retired, t) };
        }
    }

    /// # Safety
    /// The caller owns `slot`, which is in no chain.
    unsafe fn push_retired(&self, retired: &mut u32, slot: &Slot) {
        // SAFETY: owned.
        unsafe { slot.state() }.next.set(*retired);
        *retired = slot.index;
    }

    /// Fetch one item into `slot`: true if it got one. The source counts as
    /// exhausted once it returned `None`, panicked, or the run is cancelled.
    ///
    /// # Safety
    /// The caller holds the source gate and owns `slot`.
    unsafe fn fetch_one(&self, slot: &Slot) -> bool {
        // SAFETY: owned.
        let state = unsafe { slot.state() };
        if self.exhausted.load(Ordering::Relaxed) || self.cancelled() {
            self.exhausted.store(true, Ordering::Release);
            return false;
        }
        let item = self.item(slot);
        // SAFETY: we hold the source gate; the cell has room for the
        // source's item.
        match unwind::halt_unwinding(|| unsafe { self.source.body.fetch(item) }) {
            Ok(true) => {
                // SAFETY: the source gate's holder owns the counter.
                let next = unsafe { self.source_gate().holder_word() };
                state.sequence.set(*next);
                *next += 1;
                state.stage.set(1);
                state.has_item.set(true);
                state.work_ns.set(0);
                state.sampled.set(state.sequence.get() % SAMPLE_EVERY == 0);
                if self.stages.is_empty() {
                    // Nothing after the source: done at once.
                    self.complete_item(slot, state);
                }
                true
            }
            Ok(false) => {
                self.exhausted.store(true, Ordering::Release);
                false
            }
            Err(payload) => {
                self.record_panic(payload);
                self.exhausted.store(true, Ordering::Release);
                false
            }
        }
    }

    /// Release the latch units of the retired tokens listed from `retired`.
    ///
    /// # Safety
    /// The caller owns them; the engine may be gone the moment this returns
    /// (if these were the run's last units), so this is the caller's last
    /// touch unless it still owns other tokens.
    unsafe fn release(&self, mut retired: u32) {
        let latch = self.latch.load(Ordering::Relaxed);
        while retired != NO_SLOT {
            // SAFETY: owned; read before the release that may end the run.
            let next = unsafe { self.slot(retired).state() }.next.get();
            let last_of_ours = next == NO_SLOT;
            // SAFETY: the latch lives until its count, which includes this
            // token, reaches zero; after the last of ours nothing is read.
            unsafe { CountLatch::release(latch) };
            if last_of_ours {
                return;
            }
            retired = next;
        }
    }
}

/// The `JobRef` entry point of a chain's job.
unsafe fn run_chain(slot: NonNull<()>, worker: &WorkerThread) -> Option<Next> {
    // SAFETY: a chain job points at a slot of a prepared run; the engine
    // and its slots live until the run's caller saw every token retire and
    // no thread inside the engine (`Registry::wait_until_left`), which the
    // guard below holds off until `drive` (and every reference it was
    // given) is gone.
    let engine = unsafe { slot.cast::<Slot>().as_ref() }.engine;
    let registry = worker.registry();
    let outer = registry.entered_engine(worker.index(), engine.cast_mut().cast());
    struct Leave<'r> {
        registry: &'r Registry,
        index: usize,
        outer: *mut (),
    }
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            self.registry.left_engine(self.index, self.outer);
        }
    }
    let _leave = Leave {
        registry,
        index: worker.index(),
        outer,
    };
    // SAFETY: as above; the job runs once per push, so we own the chain.
    unsafe { (*engine).drive(slot.cast::<Slot>().as_ref(), worker) }
}
