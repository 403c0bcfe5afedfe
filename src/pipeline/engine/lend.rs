//! Work conservation: the rest of a chain lent out while one item's stage
//! body runs.
//!
//! Before a body runs, every other slot of the chain (items and free
//! tokens) is offered as a job of its own in the worker's lent slot,
//! quietly (no wake-up); after the body, it is withdrawn (`reclaim`). A
//! body that returns at once gets its chain back for a store and a swap;
//! one that blocks or takes long has the rest taken by an idle worker
//! (rule 6), so no item that could run waits behind it while a worker
//! idles, and a parallel stage holds `min(workers, tokens)` items at once.
//! A worker has one offer slot: a lend inside a body of an outer lend goes
//! to the own deque instead.
//!
//! Invariants: the lent slots are not ours from the offer until the
//! withdrawal succeeds; a taken offer makes them the thief's for good, and
//! our chain is the item's slot alone.

use super::Engine;
use super::chain::Chain;
use super::slot::{NO_SLOT, Owned};
use crate::pipeline::stage::Stage;
use crate::worker::thread::WorkerThread;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

/// The rest of a chain, lent out while one item's stage runs (`lend`):
/// how it went out, and where it was cut from that item.
pub(super) struct Lent {
    /// Whether the lent job went to our deque (a lend inside a body that
    /// runs while an outer lend is out), rather than to the worker's offer.
    on_deque: bool,
    /// The slot that heads the lent chain.
    head: u32,
    /// The slot before the item (its `next` skips the item meanwhile).
    before: Option<u32>,
    /// The slot after the item.
    behind: u32,
    /// The head's `deque_lends` after this lend (when `on_deque`; else 0).
    deque_lend: u32,
}

impl<'a> Engine<'a> {
    /// Run the stage's closure on `slot`'s item with the rest of the chain
    /// lent out meanwhile (see "Work conservation" in the module
    /// documentation): on return, the chain is either as it was, or `slot`
    /// alone with `before` cleared, if an idle worker took the rest (then
    /// it returns true).
    ///
    /// # Safety
    /// `slot` is in the chain right behind `before` (or at its front), and
    /// the caller may run the stage's body on it (see `run_body`).
    #[inline]
    pub(super) unsafe fn run_body_lending<'e>(
        &'e self,
        stage: &Stage<'_>,
        slot: Owned<'e>,
        before: &mut Option<Owned<'e>>,
        chain: &mut Chain,
        worker: &WorkerThread,
    ) -> bool {
        // SAFETY: forwarded.
        let lent = unsafe { self.lend(chain, slot, *before, worker) };
        // SAFETY: forwarded.
        unsafe { self.run_body(stage, slot) };
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
        current: Owned<'_>,
        before: Option<Owned<'_>>,
        worker: &WorkerThread,
    ) -> Option<Lent> {
        if self.workers.load(Ordering::Relaxed) < 2 {
            return None;
        }
        let state = current.state();
        let behind = state.next.get();
        let head = match before {
            None => self.next_of(current)?,
            Some(prev) => {
                // The front part of the chain skips `current`.
                prev.state().next.set(behind);
                self.front(chain).expect("the chain holds `before`")
            }
        };
        state.next.set(NO_SLOT);
        let job = self.job(head);
        let (on_deque, deque_lend) = if worker.has_offer_out() {
            // An outer lend of ours is out (we run inside its body): this
            // one goes to the deque, as plain rule 6 work.
            let head_state = head.state();
            let deque_lend = head_state.deque_lends.get().wrapping_add(1);
            head_state.lent_on_deque.set(true);
            head_state.deque_lends.set(deque_lend);
            worker.push_quiet(job);
            (true, deque_lend)
        } else {
            let lent_job = head.slot().lent_job.get();
            // SAFETY: the chain is ours, `head` in it: nobody else reads
            // the cell until it is offered.
            unsafe { (*lent_job).write(job) };
            // SAFETY: the cell holds the job, unchanged until we withdraw
            // it or a thief took it (then the chain, with the cell, is its
            // own).
            let accepted = unsafe { worker.offer_lent(NonNull::from(&*lent_job).cast()) };
            debug_assert!(accepted, "no offer of ours was out");
            // The offer is taken back by a swap: no count is needed.
            (false, 0)
        };
        Some(Lent {
            on_deque,
            head: head.index(),
            before: before.map(Owned::index),
            behind,
            deque_lend,
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
    #[inline]
    unsafe fn reclaim<'e>(
        &'e self,
        lent: Lent,
        chain: &mut Chain,
        current: Owned<'e>,
        before: &mut Option<Owned<'e>>,
        worker: &WorkerThread,
    ) -> bool {
        let back = if lent.on_deque {
            // SAFETY: forwarded.
            unsafe { self.take_back_from_deque(&lent, worker) }
        } else {
            // SAFETY: after our accepted offer.
            let back = unsafe { worker.withdraw_lent() };
            if back {
                // SAFETY: ours again: nobody took the offer. A job of an
                // isolated region holds memory of its own.
                unsafe { (*self.slot(lent.head).lent_job.get()).assume_init_read() }.discard();
            }
            back
        };
        if back {
            current.state().next.set(lent.behind);
            if let Some(prev) = lent.before {
                // SAFETY: ours again: nobody ran the lent job.
                unsafe { self.claim(prev) }
                    .state()
                    .next
                    .set(current.index());
            }
            false
        } else {
            *chain = Chain::single(current);
            *before = None;
            true
        }
    }

    /// `reclaim` of a lend that went to our deque (nested in an outer
    /// lend's body: rare, so out of line, which keeps the usual withdrawal
    /// a few instructions inside the stage's step): whether the lent job
    /// was still ours to take back.
    ///
    /// # Safety
    /// As `reclaim`.
    #[cold]
    #[inline(never)]
    unsafe fn take_back_from_deque(&self, lent: &Lent, worker: &WorkerThread) -> bool {
        match worker.pop_own() {
            // Our job if the slot's chain has not run since the lend:
            // if it has (a thief, or a wait inside the body, ran it),
            // the same slot may be back on this deque as a new job,
            // scheduled (the flag is clear) or lent again by the chain
            // that ran in the wait (the count moved on).
            // SAFETY: we popped a job of `head`: whichever it is, the
            // slot is ours to read until we push it back or run it.
            Some(popped)
                if popped.is_for(NonNull::from(self.slot(lent.head)).cast()) && {
                    let head = unsafe { self.claim(lent.head) }.state();
                    head.lent_on_deque.get() && head.deque_lends.get() == lent.deque_lend
                } =>
            {
                popped.discard();
                // SAFETY: ours again: nobody ran the lent job.
                unsafe { self.claim(lent.head) }
                    .state()
                    .lent_on_deque
                    .set(false);
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
        }
    }
}
