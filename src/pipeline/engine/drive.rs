//! A chain's job: the loop over its front item, and handing a chain on.
//!
//! The job takes the front slot: a free token refills the chain from the
//! source (`source.rs`); an item is carried stage after stage on this
//! worker (rule 1, `step.rs`) until it leaves the chain (parked at a gate,
//! routed to a pinned worker), waits for its turn behind an item that can
//! run, or completes, and its token goes to the back. With tracing on, a
//! job does one step and returns the job of the rest of its chain, so that
//! each stage execution gets a record of its own (`end_traced_job`).
//!
//! Invariants: the job owns its chain from the moment its `JobRef` was
//! taken from a queue; retired tokens release their units as its very last
//! act; every thread inside the engine's code is marked busy inside it
//! (`run_chain`), so the run's caller frees nothing under it.

use super::Engine;
use super::chain::{Chain, Retired};
use super::slot::{Owned, Slot};
use super::step::Step;
use crate::observe::stats::Rule;
use crate::queues::dispatch::Dispatch;
use crate::worker::thread::{Next, WorkerThread};
use std::ptr::NonNull;

impl<'a> Engine<'a> {
    /// Hand the chain that starts at `slot` to another job, from `worker`:
    /// to its first stage's worker if that is pinned elsewhere (mailbox,
    /// rule 4), else onto our own deque (rule 3).
    ///
    /// # Safety
    /// The caller owns the chain and gives it up here: it reads none of
    /// its slots afterwards.
    pub(super) unsafe fn schedule(&self, slot: Owned<'_>, worker: &WorkerThread) {
        let state = slot.state();
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
    ///
    /// # Safety
    /// The engine may be gone when this returns, if its last tokens
    /// retired here: the caller touches nothing of the run afterwards.
    unsafe fn drive(&self, head: Owned<'_>, worker: &WorkerThread) -> Option<Next> {
        let tracing = worker.tracing();
        let mut chain = self.chain_from(head);
        // Tokens that found the source exhausted: released as our very
        // last act (the run may end with the last one).
        let mut retired = Retired::NONE;
        // The first step was counted by the worker loop that took the job.
        let mut counted = true;
        // How the front item came to us, for the count of its first step.
        let mut came_by = Rule::OwnDeque;
        // Steps in a row that found a gate closed: each marks a different
        // item waiting (a waiting item is only tried again as the front,
        // which is forced), so there are never more than the chain's items
        // before something moves. The loop cannot spin.
        #[cfg(debug_assertions)]
        let mut closed_in_a_row = 0usize;
        // Where the last walk behind a waiting front ended: (the front, the
        // item that ran behind it and then waited at a gate). Every item
        // from the front to that one is passed over, and stays so until the
        // front itself steps (nothing else moves them), so the next walk
        // starts there (`runnable_behind`). Taken at every walk, set again
        // only when a walk's item ended waiting in place.
        let mut resume: Option<(u32, u32)> = None;
        while let Some(front) = self.front(&chain) {
            let state = front.state();
            if state.stage.get() == 0 {
                // Only tokens left: fetch a batch.
                if !counted {
                    worker.count_task(Rule::OwnDeque);
                }
                counted = false;
                let fetched = self.refill(&mut chain, &mut retired, worker);
                if tracing {
                    worker.set_trace_name(Some(if fetched {
                        self.source.name.clone()
                    } else {
                        self.waits_name(0)
                    }));
                    if !chain.is_empty() {
                        // SAFETY: not our last units: the chain holds some.
                        return Some(unsafe {
                            self.end_traced_job(&chain, retired, Rule::Returned)
                        });
                    }
                }
                continue;
            }
            // The item to carry on: the front, unless it waits for its turn
            // at an in-order gate and an item behind it has a stage to run
            // first; then that one, and the front keeps its place.
            let resume_after = resume
                .take()
                .filter(|&(waiting_front, _)| waiting_front == front.index())
                .map(|(_, after)| after);
            let (current, mut before) = self
                .runnable_behind(front, resume_after)
                .unwrap_or((front, None));
            // Nothing else to do: the front must go in, or park.
            let force = state.waiting.get() && before.is_none();
            // An item behind the waiting front rarely has its turn at the
            // front's gate before the front (only one an any-order gate
            // handed in out of order can): it waits there without reading
            // the turn word (a cache miss whenever another worker took or
            // left the gate), and enters once it is the front.
            let blocked_at = if before.is_some() {
                state.stage.get()
            } else {
                0
            };
            let cur_state = current.state();
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
                #[cfg(debug_assertions)]
                {
                    closed_in_a_row = if matches!(step, Step::Wait) {
                        closed_in_a_row + 1
                    } else {
                        0
                    };
                    debug_assert!(
                        closed_in_a_row <= self.view.count,
                        "a chain's loop tried closed gates {closed_in_a_row} times in a row"
                    );
                }
                match step {
                    Step::Same | Step::Wait => {}
                    Step::Gone => self.unlink(&mut chain, before, current.index(), behind, None),
                    Step::Completed => {
                        // Still ours: a free token now, to the back. (A
                        // hand-over may have put an item right behind it.)
                        let behind = cur_state.next.get();
                        self.unlink(&mut chain, before, current.index(), behind, None);
                        self.push_back(&mut chain, current);
                    }
                    Step::Replaced(other) => {
                        self.unlink(&mut chain, before, current.index(), behind, Some(other));
                    }
                }
                if tracing {
                    worker.set_trace_name(match step {
                        // It waits: no stage ran.
                        Step::Gone | Step::Wait => Some(self.waits_name(stage_number)),
                        _ => name,
                    });
                    if chain.is_empty() {
                        break;
                    }
                    let rule = match step {
                        Step::Replaced(_) => Rule::Successor,
                        Step::Same => Rule::Returned,
                        _ => Rule::OwnDeque,
                    };
                    // SAFETY: not our last units: the chain holds some.
                    return Some(unsafe { self.end_traced_job(&chain, retired, rule) });
                }
                match step {
                    Step::Same => rule = Rule::Returned,
                    Step::Replaced(_) => {
                        came_by = Rule::Successor;
                        break;
                    }
                    Step::Wait => {
                        // Still linked behind `before` (a taken lend clears
                        // it), so behind the same front: the next walk
                        // starts after it.
                        if before.is_some() {
                            resume = Some((front.index(), current.index()));
                        }
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

    /// With tracing on, a job ends after one step: release what retired
    /// and return the job that carries on with `chain`, which `rule` made
    /// the worker's next.
    ///
    /// # Safety
    /// `chain` is ours and not empty, so these are not the run's last
    /// units.
    unsafe fn end_traced_job(&self, chain: &Chain, retired: Retired, rule: Rule) -> Next {
        // SAFETY: the chain keeps the run alive (its tokens' units).
        unsafe { self.release(retired) };
        let front = self
            .front(chain)
            .expect("a traced job's chain is not empty");
        Next {
            job: self.job(front),
            rule,
        }
    }
}

/// The `JobRef` entry point of a chain's job.
///
/// # Safety
/// `slot` is the head slot of a chain whose job was taken from a queue
/// (each push is taken once).
pub(super) unsafe fn run_chain(slot: NonNull<()>, worker: &WorkerThread) -> Option<Next> {
    // SAFETY: a chain job points at a slot of a prepared run; the engine
    // and its slots live until the run's caller saw every token retire and
    // no worker busy inside the engine (`Registry::wait_until_none_inside`),
    // which the mark below holds off until `drive` (and every reference it
    // was given) is gone.
    let slot = unsafe { slot.cast::<Slot>().as_ref() };
    let engine = slot.engine;
    let _inside = worker.registry().busy_inside(worker.index(), engine.cast());
    // SAFETY: as above; the job runs once per push, so we own the chain
    // from its head on.
    let head = unsafe { Owned::claim(slot) };
    head.state().lent_on_deque.set(false);
    // SAFETY: as above.
    unsafe { (*engine).drive(head, worker) }
}
