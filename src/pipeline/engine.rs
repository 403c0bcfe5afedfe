//! A pipeline run on the six rules: tokens, item memory, and the walk of an
//! item through the stages.
//!
//! A run has `tokens` slots. A slot is a token plus room for one item; its
//! line job (a `JobRef` to the slot) carries the item from stage to stage:
//!
//! 1. at the source (stage 0) the slot's job takes the source gate and
//!    fetches an item, then fetches for every other token parked at the
//!    source meanwhile, and pushes their jobs onto its own deque (rule 3;
//!    the oldest item ends on top, thieves take the newest, rule 6);
//! 2. it carries its own item through the following stages on this worker
//!    (rule 1, item affinity, as oneTBB does). A parallel stage just runs;
//!    a serial stage runs if its gate lets the item in, else the item is
//!    parked in the gate and the job ends (no thread waits);
//! 3. the worker that finishes a serial stage's item takes the next parked
//!    one (`hand_over`): if its own item goes on, the next one's job goes
//!    to its deque; if its own item is done, the next one runs here (rule
//!    2) and its own token's job goes to the deque instead;
//! 4. a pinned stage is reached through its worker's mailbox (rule 4): the
//!    job is routed there with affinity and resumes on that worker;
//! 5. an item that passed the last stage is dropped and its token goes
//!    back to the source: at once on this worker, or through the deque.
//!
//! The run's latch counts tokens: each token releases its unit when it
//! finds the source exhausted (or the run cancelled). That is the last
//! thing it does, since the caller returns, and may drop the pipeline, as
//! soon as the last unit is gone.
//!
//! Cancellation and panics: the source stops (it counts as exhausted), and
//! items in flight are dropped at their next stage, without running it; an
//! item that was dropped still passes the in-order gates after it (without
//! running them), so every gate's turn stays whole.
//!
//! Invariants: a slot's state is touched only by its current owner, the
//! job that runs it; ownership passes through the gates (SeqCst) and the
//! job queues. At most `tokens` items are in flight. Every token ends its
//! run by releasing its unit exactly once.

use super::gate::{AnyOrderGate, Arrival, InOrderGate};
use super::stage::{Mode, SourceStage, Stage};
use crate::job::{JobRef, Next};
use crate::latch::CountLatch;
use crate::region::Region;
use crate::stats::Rule;
use crate::task::Dispatch;
use crate::unwind;
use crate::worker::{SharedQueueFlag, WorkerThread};
use parking_lot::Mutex;
use std::alloc::{self, Layout};
use std::any::Any;
use std::cell::UnsafeCell;
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// A slot index meaning "none".
const NO_SLOT: u32 = u32::MAX;

/// The cancel flag a [`CancelToken`](crate::CancelToken) shares with the
/// pipeline.
#[derive(Default)]
pub(crate) struct CancelFlag(AtomicBool);

impl crate::graph::CancelTarget for CancelFlag {
    fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// One token's state; touched by its current owner only.
struct SlotState {
    sequence: u64,
    /// 0: at the source; 1..=n: the user stage to run next; n + 1: done.
    stage: u32,
    /// False for an item filtered out, dropped on cancel, or consumed by a
    /// panicking stage: it passes the in-order gates without running.
    has_item: bool,
    /// A gate holder handed us the gate of `stage` (rule 2 hand-over).
    holds_gate: bool,
    /// Already routed to the worker `stage` is pinned to: if a proxy sent
    /// it elsewhere, it runs there rather than bouncing.
    routed: bool,
    /// Links the slots fetched in one batch.
    batch_next: u32,
}

/// A token: where its job points.
#[repr(align(64))]
pub(crate) struct Slot {
    engine: *const Engine<'static>,
    index: u32,
    state: UnsafeCell<SlotState>,
}

// SAFETY: a slot's state is owned by one job at a time (see the module
// invariants); `engine` is read-only during a run.
unsafe impl Sync for Slot {}
// SAFETY: as above.
unsafe impl Send for Slot {}

impl Slot {
    /// # Safety
    /// The caller owns the slot right now.
    #[allow(clippy::mut_from_ref)]
    unsafe fn state(&self) -> &mut SlotState {
        // SAFETY: per the contract, nobody else touches it meanwhile.
        unsafe { &mut *self.state.get() }
    }
}

/// The memory items live in: one cell per token, each big and aligned
/// enough for every type a stage reads or writes.
struct ItemMemory {
    base: NonNull<u8>,
    stride: usize,
    layout: Layout,
}

impl ItemMemory {
    fn new(item: Layout, tokens: usize) -> ItemMemory {
        let item = item.pad_to_align();
        let stride = item.size().max(item.align());
        let layout = Layout::from_size_align((stride * tokens).max(1), item.align())
            .expect("item memory fits in the address space");
        // SAFETY: the size is at least 1.
        let base = NonNull::new(unsafe { alloc::alloc(layout) })
            .unwrap_or_else(|| alloc::handle_alloc_error(layout));
        ItemMemory {
            base,
            stride,
            layout,
        }
    }

    fn cell(&self, index: u32) -> *mut u8 {
        // SAFETY: callers pass indices below the token count.
        unsafe { self.base.as_ptr().add(index as usize * self.stride) }
    }
}

impl Drop for ItemMemory {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout; items never outlive a run.
        unsafe { alloc::dealloc(self.base.as_ptr(), self.layout) };
    }
}

/// A serial stage's gate (none for a parallel stage).
enum Gate {
    Parallel,
    InOrder(InOrderGate),
    AnyOrder(Box<AnyOrderGate>),
}

/// The resources of runs with a given number of tokens.
struct Tokens {
    count: usize,
    slots: Box<[Slot]>,
    items: ItemMemory,
    source_gate: AnyOrderGate,
    gates: Box<[Gate]>,
}

/// A built pipeline: its stages, and the state of its runs (reused).
pub(crate) struct Engine<'a> {
    pub(crate) source: SourceStage<'a>,
    pub(crate) stages: Vec<Stage<'a>>,
    /// Room for the largest type any stage reads or writes.
    pub(crate) item_layout: Layout,
    pub(crate) cancel: Arc<CancelFlag>,
    tokens: Option<Tokens>,
    /// Written by the holder of the source gate only.
    next_sequence: UnsafeCell<u64>,
    exhausted: AtomicBool,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// The run's latch, on its caller's stack.
    latch: AtomicPtr<CountLatch>,
    region: AtomicU64,
    pub(crate) used_shared_queue: SharedQueueFlag,
}

// SAFETY: stage bodies are `Sync` (serial ones by their gates), items are
// `Send`, and everything else is atomics or owned by one slot holder at a
// time; `next_sequence` is touched by the source gate's holder only.
unsafe impl Sync for Engine<'_> {}
// SAFETY: as above; every closure and item type is `Send`.
unsafe impl Send for Engine<'_> {}

/// What one step of a slot's job led to.
enum Step<'e> {
    /// The slot went on here (rule 1).
    Same,
    /// Go on with this other slot, whose gate we hold now (rule 2).
    Other(&'e Slot),
    /// This job is done: the slot was parked, routed or retired.
    Stop,
}

impl<'a> Engine<'a> {
    pub(crate) fn new(source: SourceStage<'a>, item_layout: Layout) -> Self {
        Engine {
            source,
            stages: Vec::new(),
            item_layout,
            cancel: Arc::new(CancelFlag::default()),
            tokens: None,
            next_sequence: UnsafeCell::new(0),
            exhausted: AtomicBool::new(false),
            panic: Mutex::new(None),
            latch: AtomicPtr::new(ptr::null_mut()),
            region: AtomicU64::new(Region::NONE.to_bits()),
            used_shared_queue: SharedQueueFlag::new(),
        }
    }

    /// Get ready for a run with `tokens` tokens in isolation region
    /// `region`, its latch at `latch` (counting every token). Tokens other
    /// than slot 0 wait at the source; slot 0's job is returned, to be
    /// submitted by the caller.
    pub(crate) fn prepare(&mut self, tokens: usize, latch: &CountLatch, region: Region) -> JobRef {
        if self.tokens.as_ref().is_none_or(|t| t.count != tokens) {
            self.tokens = Some(self.make_tokens(tokens));
        }
        let engine = ptr::from_ref::<Engine<'a>>(self).cast::<Engine<'static>>();
        let toks = self.tokens.as_mut().expect("tokens made above");
        toks.source_gate.reset();
        for gate in toks.gates.iter() {
            match gate {
                Gate::Parallel => {}
                Gate::InOrder(g) => g.reset(),
                Gate::AnyOrder(g) => g.reset(),
            }
        }
        for slot in toks.slots.iter_mut() {
            slot.engine = engine;
            *slot.state.get_mut() = SlotState {
                sequence: 0,
                stage: 0,
                has_item: false,
                holds_gate: false,
                routed: false,
                batch_next: NO_SLOT,
            };
        }
        for index in 1..tokens as u32 {
            // Parked at the free source gate: the first fetch takes them.
            assert_eq!(toks.source_gate.arrive_parked(index), Arrival::Parked);
        }
        *self.next_sequence.get_mut() = 0;
        *self.exhausted.get_mut() = false;
        *self.panic.get_mut() = None;
        self.latch
            .store(ptr::from_ref(latch).cast_mut(), Ordering::Relaxed);
        self.region.store(region.to_bits(), Ordering::Relaxed);
        self.used_shared_queue.reset();
        self.job(&self.tokens.as_ref().expect("made").slots[0])
    }

    fn make_tokens(&self, count: usize) -> Tokens {
        Tokens {
            count,
            slots: (0..count as u32)
                .map(|index| Slot {
                    engine: ptr::null(),
                    index,
                    state: UnsafeCell::new(SlotState {
                        sequence: 0,
                        stage: 0,
                        has_item: false,
                        holds_gate: false,
                        routed: false,
                        batch_next: NO_SLOT,
                    }),
                })
                .collect(),
            items: ItemMemory::new(self.item_layout, count),
            source_gate: AnyOrderGate::new(count),
            gates: self
                .stages
                .iter()
                .map(|stage| match stage.mode {
                    Mode::Parallel => Gate::Parallel,
                    Mode::SerialInOrder => Gate::InOrder(InOrderGate::new(count)),
                    Mode::SerialOutOfOrder => Gate::AnyOrder(Box::new(AnyOrderGate::new(count))),
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

    fn toks(&self) -> &Tokens {
        self.tokens.as_ref().expect("a run is prepared")
    }

    fn slot(&self, index: u32) -> &Slot {
        &self.toks().slots[index as usize]
    }

    fn item(&self, slot: &Slot) -> *mut u8 {
        self.toks().items.cell(slot.index)
    }

    fn region(&self) -> Region {
        Region::from_bits(self.region.load(Ordering::Relaxed))
    }

    /// The job that carries `slot` on.
    fn job(&self, slot: &Slot) -> JobRef {
        // SAFETY: slots live as long as the engine, which outlives the run
        // (the run waits for every token); the job runs once per push.
        unsafe { JobRef::new(NonNull::from(slot).cast(), run_line, self.region()) }
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

    /// The worker the slot's next stage is pinned to, if any.
    fn pin_of(&self, stage: u32) -> Option<usize> {
        match stage {
            0 => self.source.pin,
            k => self.stages.get(k as usize - 1).and_then(|s| s.pin),
        }
    }

    /// The name of the slot's next stage (for its trace record).
    fn stage_name(&self, stage: u32) -> Arc<str> {
        match stage as usize {
            0 => self.source.name.clone(),
            k if k <= self.stages.len() => self.stages[k - 1].name.clone(),
            _ => self.source.name.clone(),
        }
    }

    /// Hand `slot`'s job on from `worker`: to its next stage's worker if
    /// that is pinned elsewhere (mailbox, rule 4), else to our own deque
    /// (rule 3).
    ///
    /// # Safety
    /// The caller owns `slot` and gives it up here.
    unsafe fn schedule(&self, slot: &Slot, worker: &WorkerThread) {
        // SAFETY: owned per the contract, until the push below.
        let state = unsafe { slot.state() };
        match self.pin_of(state.stage) {
            Some(pin) if pin != worker.index() => {
                state.routed = true;
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

    /// Carry `slot` on as far as it goes on this worker (see the module
    /// documentation). With tracing on, one stage per job, so that each
    /// stage execution gets its own record.
    ///
    /// # Safety
    /// The caller owns `slot` (its job was taken from a queue, once).
    unsafe fn drive<'e>(&'e self, mut slot: &'e Slot, worker: &WorkerThread) -> Option<Next> {
        let tracing = worker.tracing();
        let mut rule = None;
        loop {
            if let Some(rule) = rule {
                // Steps after the first: the first was counted by the
                // worker loop that took this job.
                worker.count_task(rule);
            }
            // SAFETY: owned (we took its job or it was handed to us).
            let name = tracing.then(|| self.stage_name(unsafe { slot.state() }.stage));
            // SAFETY: as above.
            let step = unsafe { self.step(slot, worker) };
            let next = match step {
                Step::Same => Rule::Returned,
                Step::Other(other) => {
                    slot = other;
                    Rule::Successor
                }
                Step::Stop => return None,
            };
            if tracing {
                worker.set_trace_name(name);
                return Some(Next {
                    job: self.job(slot),
                    rule: next,
                });
            }
            rule = Some(next);
        }
    }

    /// Advance `slot` by one stage.
    ///
    /// # Safety
    /// The caller owns `slot`.
    unsafe fn step<'e>(&'e self, slot: &'e Slot, worker: &WorkerThread) -> Step<'e> {
        // SAFETY: owned per the contract.
        let state = unsafe { slot.state() };
        let last = self.stages.len() as u32;
        if state.stage == last + 1 {
            self.complete_item(slot, state);
        }
        if state.stage == 0 {
            // SAFETY: owned.
            return unsafe { self.fetch_step(slot, worker) };
        }
        let index = state.stage as usize - 1;
        let stage = &self.stages[index];
        if let Some(pin) = stage.pin
            && pin != worker.index()
            && !state.routed
        {
            // SAFETY: owned, given up here.
            unsafe { self.schedule(slot, worker) };
            return Step::Stop;
        }
        state.routed = false;
        if state.has_item && self.cancelled() {
            self.drop_input(index, slot);
            state.has_item = false;
        }
        match &self.toks().gates[index] {
            Gate::Parallel => {
                if state.has_item {
                    self.run_body(stage, slot, state);
                }
                state.stage += 1;
                Step::Same
            }
            Gate::AnyOrder(gate) => {
                if !state.has_item && !state.holds_gate {
                    // A dropped item needs no turn here. (One that was
                    // handed the gate before it was dropped must pass the
                    // gate on below.)
                    state.stage += 1;
                    return Step::Same;
                }
                if !state.holds_gate {
                    match gate.arrive(slot.index) {
                        Arrival::Enter => {}
                        Arrival::Parked => return Step::Stop,
                        Arrival::Switch(other) => {
                            let other = self.slot(other);
                            // SAFETY: the gate hand-over made it ours.
                            unsafe { other.state() }.holds_gate = true;
                            return Step::Other(other);
                        }
                    }
                }
                state.holds_gate = false;
                if state.has_item {
                    self.run_body(stage, slot, state);
                }
                state.stage += 1;
                match gate.finish() {
                    // SAFETY: we own `slot`, and now hold the gate for `next`.
                    Some(next) => unsafe { self.hand_over(slot, next, worker) },
                    None => Step::Same,
                }
            }
            Gate::InOrder(gate) => {
                if !state.holds_gate {
                    match gate.arrive(state.sequence, slot.index) {
                        Arrival::Enter => {}
                        Arrival::Parked | Arrival::Switch(_) => return Step::Stop,
                    }
                }
                state.holds_gate = false;
                if state.has_item {
                    self.run_body(stage, slot, state);
                }
                state.stage += 1;
                match gate.finish(state.sequence) {
                    // SAFETY: as above.
                    Some(next) => unsafe { self.hand_over(slot, next, worker) },
                    None => Step::Same,
                }
            }
        }
    }

    /// A serial stage handed us the next parked item, `next`, whose gate we
    /// now hold. Our own item goes on here (rule 1) and `next` to our deque;
    /// but if our item is done, `next` goes on here (rule 2, the serial
    /// stage stays on this core) and our token's job goes to the deque.
    ///
    /// # Safety
    /// The caller owns `slot` and, through the gate, `next`.
    unsafe fn hand_over<'e>(
        &'e self,
        slot: &'e Slot,
        next: u32,
        worker: &WorkerThread,
    ) -> Step<'e> {
        let next = self.slot(next);
        // SAFETY: handed to us by the gate.
        unsafe { next.state() }.holds_gate = true;
        // SAFETY: owned.
        let state = unsafe { slot.state() };
        if state.stage == self.stages.len() as u32 + 1 {
            self.complete_item(slot, state);
            // SAFETY: ours, given up here.
            unsafe { self.schedule(slot, worker) };
            Step::Other(next)
        } else {
            // SAFETY: ours, given up here.
            unsafe { self.schedule(next, worker) };
            Step::Same
        }
    }

    /// The item passed every stage: drop what it holds; its token goes
    /// back to the source.
    fn complete_item(&self, slot: &Slot, state: &mut SlotState) {
        if state.has_item {
            let drop_output = match self.stages.last() {
                Some(stage) => stage.drop_output,
                None => self.source.drop_output,
            };
            // SAFETY: an item that has passed every stage holds the last
            // stage's output, dropped once.
            unsafe { drop_output(self.item(slot)) };
            state.has_item = false;
        }
        state.stage = 0;
    }

    /// Drop the value an item holds before stage `index` runs.
    fn drop_input(&self, index: usize, slot: &Slot) {
        let drop_input = match index {
            0 => self.source.drop_output,
            k => self.stages[k - 1].drop_output,
        };
        // SAFETY: before stage `index` the item holds the previous stage's
        // output, dropped once (the caller clears `has_item`).
        unsafe { drop_input(self.item(slot)) };
    }

    /// Run the stage's closure on the item, catching a panic.
    fn run_body(&self, stage: &Stage<'_>, slot: &Slot, state: &mut SlotState) {
        let item = self.item(slot);
        // SAFETY: the item holds the stage's input; a serial stage's gate is
        // held by this job (checked by the caller).
        match unwind::halt_unwinding(|| unsafe { stage.body.call(item) }) {
            Ok(()) => {
                if let Some(flatten) = stage.flatten {
                    // SAFETY: the body left its `Option<T>` output there.
                    state.has_item = unsafe { flatten(item) };
                }
            }
            Err(payload) => {
                // The input was moved into the closure: nothing is left.
                state.has_item = false;
                self.record_panic(payload);
            }
        }
    }

    /// Stage 0 for a token: take the source gate and fetch, for this token
    /// and every token parked at the source.
    ///
    /// # Safety
    /// The caller owns `slot`.
    unsafe fn fetch_step<'e>(&'e self, slot: &'e Slot, worker: &WorkerThread) -> Step<'e> {
        // SAFETY: owned.
        let state = unsafe { slot.state() };
        if let Some(pin) = self.source.pin
            && pin != worker.index()
            && !state.routed
        {
            // SAFETY: owned, given up here.
            unsafe { self.schedule(slot, worker) };
            return Step::Stop;
        }
        state.routed = false;
        if !state.holds_gate && self.exhausted.load(Ordering::Acquire) {
            // SAFETY: owned; retiring is our last touch of the run.
            unsafe { self.retire(slot) };
            return Step::Stop;
        }
        let gate = &self.toks().source_gate;
        let first = if state.holds_gate {
            // Handed the source gate by the previous fetcher (tracing).
            state.holds_gate = false;
            slot
        } else {
            match gate.arrive(slot.index) {
                Arrival::Enter => slot,
                Arrival::Parked => return Step::Stop,
                // We hold the source for another parked token: fetch for it.
                Arrival::Switch(other) => self.slot(other),
            }
        };
        // SAFETY: we hold the source gate.
        let step = unsafe {
            if worker.tracing() {
                self.fetch_and_pass_on(first, worker)
            } else {
                self.fetch_batch(first, worker)
            }
        };
        match step {
            // We fetched for another token than ours (`Switch`): its item
            // is the one to carry on; ours stays parked at the source.
            Step::Same if !ptr::eq(first, slot) => Step::Other(first),
            step => step,
        }
    }

    /// With tracing on, each fetch is a step of its own, so that each gets
    /// its own trace record: fetch for `first` only, and hand the source
    /// gate to one parked token, whose job fetches next.
    ///
    /// # Safety
    /// As for `fetch_batch`.
    #[cold]
    unsafe fn fetch_and_pass_on<'e>(&'e self, first: &'e Slot, worker: &WorkerThread) -> Step<'e> {
        let gate = &self.toks().source_gate;
        // SAFETY: we hold the source gate.
        let has_item = unsafe { self.fetch_one(first) };
        if let Some(next) = gate.pop_parked().or_else(|| gate.finish()) {
            let next = self.slot(next);
            // SAFETY: the gate made it ours; we pass the gate on with it.
            unsafe { next.state() }.holds_gate = true;
            // SAFETY: ours, given up here.
            unsafe { self.schedule(next, worker) };
        }
        if has_item {
            Step::Same
        } else {
            // SAFETY: ours; the last touch.
            unsafe { self.retire(first) };
            Step::Stop
        }
    }

    /// Holding the source gate: fetch for `first`, then for every token
    /// parked at the source, until none is left; then give up the gate.
    /// The others' jobs go to our deque, the oldest item on top.
    ///
    /// # Safety
    /// The caller holds the source gate on `first`'s behalf, and owns it.
    unsafe fn fetch_batch<'e>(&'e self, first: &'e Slot, worker: &WorkerThread) -> Step<'e> {
        let gate = &self.toks().source_gate;
        // SAFETY: we hold the source gate.
        let first_has_item = unsafe { self.fetch_one(first) };
        // Fetched for others: a stack, so the last fetched is pushed first
        // and the first fetched ends on top of our deque.
        let mut batch = NO_SLOT;
        let mut retired = NO_SLOT;
        loop {
            while let Some(index) = gate.pop_parked() {
                let other = self.slot(index);
                // SAFETY: a parked token popped by the gate's holder is ours;
                // we hold the source gate.
                let fetched = unsafe { self.fetch_one(other) };
                // SAFETY: ours.
                let state = unsafe { other.state() };
                if fetched {
                    state.batch_next = batch;
                    batch = index;
                } else {
                    state.batch_next = retired;
                    retired = index;
                }
            }
            match gate.finish() {
                Some(index) => {
                    // Parked while we held the gate, taken on leaving: the
                    // gate is ours again; fetch for it on the next round.
                    let other = self.slot(index);
                    // SAFETY: handed to us by the gate; we hold it again.
                    let fetched = unsafe { self.fetch_one(other) };
                    // SAFETY: ours.
                    let state = unsafe { other.state() };
                    if fetched {
                        state.batch_next = batch;
                        batch = index;
                    } else {
                        state.batch_next = retired;
                        retired = index;
                    }
                }
                None => break,
            }
        }
        while batch != NO_SLOT {
            let other = self.slot(batch);
            // SAFETY: ours until scheduled.
            batch = unsafe { other.state() }.batch_next;
            // SAFETY: ours, given up here.
            unsafe { self.schedule(other, worker) };
        }
        // Retire the others first: while `first` still holds its unit, none
        // of these releases can be the run's last.
        while retired != NO_SLOT {
            let other = self.slot(retired);
            // SAFETY: ours.
            retired = unsafe { other.state() }.batch_next;
            // SAFETY: ours; `first` keeps the run alive past this.
            unsafe { self.retire(other) };
        }
        if first_has_item {
            Step::Same
        } else {
            // SAFETY: ours; the last touch.
            unsafe { self.retire(first) };
            Step::Stop
        }
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
                let next = unsafe { &mut *self.next_sequence.get() };
                state.sequence = *next;
                *next += 1;
                state.stage = 1;
                state.has_item = true;
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

    /// The token is done for this run: release its unit of the run's latch.
    ///
    /// # Safety
    /// The caller owns `slot`; it (and the whole engine) may be gone the
    /// moment this returns, if this was the last unit.
    unsafe fn retire(&self, _slot: &Slot) {
        let latch = self.latch.load(Ordering::Relaxed);
        // SAFETY: the latch lives on the caller's frame until its count,
        // which includes this token, reaches zero. Last touch.
        unsafe { CountLatch::release(latch) };
    }
}

/// The `JobRef` entry point of a slot's job.
unsafe fn run_line(slot: NonNull<()>, worker: &WorkerThread) -> Option<Next> {
    // SAFETY: a line job points at a slot of a prepared run, whose engine
    // outlives the run; the job runs once per push, so we own the slot.
    unsafe {
        let slot = slot.cast::<Slot>().as_ref();
        (*slot.engine).drive(slot, worker)
    }
}
