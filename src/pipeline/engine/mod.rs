//! A pipeline run on the six rules: tokens, item memory, and the walk of
//! items through the stages.
//!
//! A run has `tokens` slots. A slot is a token plus room for one item. A
//! *job* (a `JobRef` to its first slot) owns a *chain* of slots, linked
//! through the slots: items it carries (in source order, but for items an
//! any-order gate handed over), then free tokens. It works on the front
//! slot:
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
//!    (`tokens / workers`, at most `MAX_SHARED_BATCH`); the fetcher leaves
//!    the gate free and puts the remaining tokens on its deque as a job
//!    (rule 3), for another worker to fetch the next batch (rule 6). A
//!    pipeline started from outside the pool enters by the shared queue
//!    (rule 5).
//!
//! The run's latch counts tokens: each token releases its unit when it
//! finds the source exhausted (or the run cancelled), as the last thing
//! its job does. The thread that released the last unit, or gave away its
//! last token, may still be on its way out of the engine's code, holding
//! references into it: each slot of the pool notes the engine it is inside
//! (`Registry::busy_inside`), and the caller frees nothing until no
//! slot names this one (`Registry::wait_until_none_inside`). Miri's borrow models
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
//! Where each part lives: `slot.rs` (tokens, item memory, gates, and
//! `Owned`, the proof of owning a slot), `chain.rs` (a job's chain and its
//! retired tokens), `drive.rs` (a chain's job: the loop over its front
//! item), `step.rs` (one item through one stage), `lend.rs` (the rest of a
//! chain lent out around a stage body), `source.rs` (the source gate and
//! its batches), `alone.rs` (the whole pipeline as a loop on one worker).
//!
//! Invariants: a slot's state is touched only by its current owner, the
//! job whose chain holds it, and never after the owner handed it on (to a
//! gate or a job queue, which is how ownership passes): code reaches a
//! slot's state only through `Owned`, made at those hand-over points. The
//! state is made of cells, as the owner often holds two references to one
//! slot. In a chain, items come before free tokens. At most `tokens`
//! items are in flight. Every token ends its run by releasing its unit
//! exactly once. A job makes progress on every pass of its loop: an item
//! behind a waiting front is tried at a closed in-order gate once, then
//! passed over until it is the front, and the front, with nothing left to
//! run behind it, enters its gate or parks there.

mod alone;
mod chain;
mod drive;
mod lend;
mod slot;
mod source;
mod step;

use super::gate::{AnyOrderGate, InOrderGate};
use super::stage::{SourceStage, Stage, StageMode};
use crate::cancel::CancelFlag;
use crate::platform::latch::CountLatch;
use crate::queues::dispatch::Priority;
use crate::queues::region::Region;
use crate::queues::shared_queue::SharedQueueFlag;
use crate::worker::thread::{JobRef, WorkerThread};
use crossbeam_utils::CachePadded;
use drive::run_chain;
use parking_lot::Mutex;
use slot::{Gate, ItemMemory, Owned, RunView, Slot, Tokens};
use std::alloc::Layout;
use std::any::Any;
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// Items whose stages take less than this (nanoseconds, summed over the
/// stages) are cheaper to run than to move to another core: one worker
/// runs the pipeline. Above it, batches are shared between workers.
const SHARE_WORK_NS: u32 = 250;

/// The most items one fetch takes when items are shared between workers.
/// The items of a batch queue behind the first at the in-order gates, and
/// the walk that finds the next runnable one among them
/// (`runnable_behind`) is as long as the batch: with a batch of
/// `tokens / workers` alone, 4,096 tokens ran ten times slower than eight.
/// Sixteen items keep the walk short and still make a fetch worth the
/// hand-over of the source gate.
const MAX_SHARED_BATCH: usize = 16;

/// One item in this many has its stage work timed (two clock reads per
/// stage), to keep the estimate cheap.
const SAMPLE_EVERY: u64 = 64;

/// No measurement yet: treated as light (the first batch runs on one
/// worker and is measured), so a light pipeline is never split at all.
const UNMEASURED: u32 = 0;

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
            let next = if slot.index == last {
                slot::NO_SLOT
            } else {
                slot.index + 1
            };
            slot.prepare(engine, next);
        }
        // SAFETY: no job of the run exists yet: the caller's job is the
        // first owner of the one chain of every token.
        self.job(unsafe { self.claim(0) })
    }

    fn make_tokens(&self, count: usize) -> Tokens {
        Tokens {
            count,
            slots: (0..count as u32).map(Slot::new).collect(),
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
        let cancelled = self.cancel.take();
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

    /// The slot at `index`, claimed by the calling job.
    ///
    /// # Safety
    /// The calling job owns the slot (see `Owned::claim`).
    #[inline]
    unsafe fn claim(&self, index: u32) -> Owned<'_> {
        // SAFETY: forwarded.
        unsafe { Owned::claim(self.slot(index)) }
    }

    /// The cell of `slot`'s item.
    #[inline]
    fn item(&self, slot: Owned<'_>) -> *mut u8 {
        // SAFETY: one cell per token, within the item memory.
        unsafe {
            self.view
                .items
                .add(slot.index() as usize * self.view.stride)
        }
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

    /// The job of the chain that starts at `slot`. Pushing it hands the
    /// chain on.
    fn job(&self, slot: Owned<'_>) -> JobRef {
        // SAFETY: slots live as long as the engine, which outlives the run
        // (the run waits for every token); the job runs once per push.
        unsafe { JobRef::new(NonNull::from(slot.slot()).cast(), run_chain, self.region()) }
    }

    #[inline]
    fn cancelled(&self) -> bool {
        self.cancel.is_set()
    }

    fn record_panic(&self, payload: Box<dyn Any + Send>) {
        let mut first = self.panic.lock();
        if first.is_none() {
            *first = Some(payload);
        }
        self.cancel.set();
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
            tokens
                .div_ceil(self.workers.load(Ordering::Relaxed) as usize)
                .min(MAX_SHARED_BATCH)
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
}
