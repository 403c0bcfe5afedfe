//! Rules 3 to 6: where a worker whose run chain ended looks for its next
//! job (`find_work`, the table in `mod.rs`), and where a wait may look
//! (`find_work_with`, as far as the wait's `WaitAccess` from `wait.rs`
//! allows).
//!
//! Two kinds of taken work need more than running. A proxy entry
//! (`proxy.rs`) is one of two entries for one job: `resolve` claims its
//! job, finds it gone, or leaves it to its target. Lent work (`lent.rs`)
//! is a job a worker offers while it runs a body that may take long:
//! others take it only as the last resort of rule 6 (`take_lent`), and
//! only an offer that was already out at their last look. A wait in an
//! isolated region takes only its region's jobs and never steals
//! (`find_work_isolated`).
//!
//! Invariants: a job taken from any queue runs exactly once, on the
//! worker that resolved it to `Resolved::Run`; a taken job this search
//! may not run (another region's lent work) goes to the shared queue,
//! never lost; a deferred proxy goes back to the shared queue and ends
//! that pass over it, so a search does not spin on it.

use super::access::WaitAccess;
use super::{JobRef, WorkerThread};
use crate::observe::stats::Rule;
use crate::queues::deque::Steal;
use crate::queues::proxy::{Proxy, Taken};
use crate::queues::region::Region;
use std::ptr::NonNull;

/// What taking a job from a queue gave (see `WorkerThread::resolve`).
pub(crate) enum Resolved {
    Run(JobRef),
    Gone,
    Deferred,
}

impl WorkerThread {
    /// Rules 3 to 6, in order.
    #[inline]
    pub(crate) fn find_work(&self) -> Option<(JobRef, Rule)> {
        self.find_work_with(&WaitAccess::OUTERMOST)
    }

    /// Rules 3 to 6, in order, as far as `access` allows.
    #[inline]
    pub(super) fn find_work_with(&self, access: &WaitAccess<'_>) -> Option<(JobRef, Rule)> {
        if access.region.is_isolated() {
            return self.find_work_isolated(access.region);
        }
        while let Some(job) = self.deque.pop() {
            if let Resolved::Run(job) = self.resolve(job) {
                return Some((job, Rule::OwnDeque));
            }
        }
        let mailbox = self.registry.mailbox(self.index);
        while let Some(job) = mailbox.pop() {
            if let Resolved::Run(job) = self.resolve(job) {
                return Some((job, Rule::Mailbox));
            }
        }
        // Entries (threads outside the pool block on them, and deferred
        // proxies) at any depth; the enqueue lanes as far as `access`
        // allows. A deferred job went back to the shared queue: do not go
        // round for it again in this search, but do look past it.
        let shared = &self.registry.shared;
        while let Some(job) = shared.pop_entry() {
            match self.resolve(job) {
                Resolved::Run(job) => return Some((job, Rule::SharedQueue)),
                Resolved::Gone => {}
                Resolved::Deferred => break,
            }
        }
        let lanes = access.may_take_shared();
        let kept_apart = access.kept_apart_key();
        while let Some(job) = if lanes {
            shared.pop_lanes(self.next_lane_turn())
        } else if kept_apart != 0 {
            shared.pop_kept_apart(kept_apart)
        } else {
            None
        } {
            match self.resolve(job) {
                Resolved::Run(job) => return Some((job, Rule::SharedQueue)),
                Resolved::Gone => {}
                Resolved::Deferred => break,
            }
        }
        if !access.steal {
            return None;
        }
        loop {
            let Some(job) = self.steal() else {
                return self.take_lent().map(|job| (job, Rule::Steal));
            };
            if let Resolved::Run(job) = self.resolve(job) {
                return Some((job, Rule::Steal));
            }
        }
    }

    /// Rule 6's last resort: work another worker lent out around a body
    /// that has run since our last look (`lent.rs`).
    fn take_lent(&self) -> Option<JobRef> {
        for (victim, seen) in self.lent_seen.iter().enumerate() {
            if victim == self.index {
                continue;
            }
            if let Some(job) = self.registry.lent(victim).take_if_stale(seen) {
                // SAFETY: the offer points at a job its owner wrote before
                // offering, left unchanged until taken; taking it made it
                // ours to read and run.
                return Some(unsafe { job.as_ptr().read() });
            }
        }
        None
    }

    /// Offer `job` to the other workers while we run something that may
    /// take long (`lent.rs`); false if an offer of ours is still out.
    ///
    /// # Safety
    /// `job` stays valid and unchanged until `withdraw_lent` returns, or,
    /// if that returns false, until the thief that took it has read it.
    #[inline]
    pub(crate) unsafe fn offer_lent(&self, job: NonNull<JobRef>) -> bool {
        // SAFETY: `lent` points into the registry, which this worker keeps
        // alive; we are the slot's owner; the rest is forwarded.
        unsafe { (*self.lent).offer(job) }
    }

    /// Is an offer of ours out? (Then another is refused.)
    #[inline]
    pub(crate) fn has_offer_out(&self) -> bool {
        // SAFETY: as in `offer_lent`.
        unsafe { (*self.lent).is_offered() }
    }

    /// Take our offer back: true if nobody took it.
    ///
    /// # Safety
    /// After an `offer_lent` that returned true.
    #[inline]
    pub(crate) unsafe fn withdraw_lent(&self) -> bool {
        // SAFETY: as in `offer_lent`, after an accepted offer.
        unsafe { (*self.lent).withdraw() }
    }

    /// Rules 3 to 5 for a wait in isolated region `region`: only that
    /// region's jobs, and no stealing (`region.rs`).
    #[cold]
    fn find_work_isolated(&self, region: Region) -> Option<(JobRef, Rule)> {
        while let Some(job) = self.pop_own_in(region) {
            if let Resolved::Run(job) = self.resolve(job) {
                return Some((job, Rule::OwnDeque));
            }
        }
        let mailbox = self.registry.mailbox(self.index);
        // Strict affinity for us, of any region: nobody else may run it.
        while let Some(job) = mailbox.pop_region(region).or_else(|| mailbox.pop_strict()) {
            if let Resolved::Run(job) = self.resolve(job) {
                return Some((job, Rule::Mailbox));
            }
        }
        while let Some(job) = self.registry.shared.pop_region(region) {
            match self.resolve(job) {
                Resolved::Run(job) => return Some((job, Rule::SharedQueue)),
                Resolved::Gone => {}
                Resolved::Deferred => break,
            }
        }
        // Work lent out around a pipeline stage body (`lent.rs`): a run
        // started in this region lends its chain from whichever worker
        // runs its items, and when that worker is blocked in a body, this
        // wait may be the only one left to take it (the other items of the
        // run could wait for it forever).
        let job = self.take_lent()?;
        if job.region() == region {
            return Some((job, Rule::Steal));
        }
        // Not this region's: taken, so it must run, but not in this wait.
        // The shared queue hands it to a worker outside the region.
        self.registry.inject(job, Some(self.index));
        None
    }

    /// A job as taken from a queue, or for a proxy entry (`proxy.rs`): its
    /// task if we claim it; `Gone` if it was claimed already or we leave it
    /// to its target, who will come for it soon; `Deferred` if the target
    /// is busy and we look again later (the entry is back on the shared
    /// queue).
    #[inline]
    pub(crate) fn resolve(&self, job: JobRef) -> Resolved {
        if !job.is_proxy() {
            return Resolved::Run(job);
        }
        self.resolve_proxy(job)
    }

    #[cold]
    fn resolve_proxy(&self, entry: JobRef) -> Resolved {
        // SAFETY: we hold this entry until `take` or we pass it on.
        let target = unsafe { Proxy::target(&entry) };
        // SAFETY: a non-target holds the proxy's non-mailbox entry.
        if target != self.index
            && !unsafe { Proxy::should_claim(&entry, self.registry.mailbox(target).state()) }
        {
            // The target will come for it, or may: look again later. (An
            // idle worker yields between its search rounds, so a target
            // that waits for a core gets it.) Into the entry lane, which
            // every wait takes from: the worker that put the proxy on its
            // deque is often waiting for its task (a placed loop part, a
            // run's node), in a nested wait that takes no plain lane, and
            // must be able to claim it once the target is stuck. In a
            // lane, only a worker at its outermost loop would, and with
            // two workers that was the stuck target itself.
            self.registry.inject_entry(entry);
            return Resolved::Deferred;
        }
        // SAFETY: our entry, consumed here.
        match unsafe { Proxy::take(entry) } {
            Taken::Run(job) => {
                if target != self.index {
                    // `should_claim` judged the target stuck.
                    self.counters().proxy_claimed_from_stuck();
                }
                Resolved::Run(job)
            }
            Taken::Nothing => Resolved::Gone,
        }
    }

    /// Rule 6: try the other workers' deques from a random start. `Retry`
    /// means a race, not emptiness: go round again until a pass is clean.
    fn steal(&self) -> Option<JobRef> {
        let victims = self.registry.victims(self.index);
        for (tier, candidates) in victims.tiers.iter().enumerate() {
            if let Some(job) = self.steal_from(candidates) {
                self.counters().steal_success(tier);
                return Some(job);
            }
        }
        None
    }

    /// One tier of rule 6: its workers from a random start, again while a
    /// pass met a race (`Retry` means contention, not emptiness).
    #[inline]
    fn steal_from(&self, candidates: &[usize]) -> Option<JobRef> {
        let n = candidates.len();
        if n == 0 {
            return None;
        }
        let start = self.next_random(n);
        loop {
            let mut retry = false;
            for k in 0..n {
                let victim = candidates[(start + k) % n];
                match self.registry.stealer(victim).steal() {
                    Steal::Success(job) => {
                        self.counters().steal_attempts(k as u64 + 1);
                        return Some(job);
                    }
                    Steal::Empty => {}
                    Steal::Retry => retry = true,
                }
            }
            self.counters().steal_attempts(n as u64);
            if !retry {
                return None;
            }
        }
    }

    /// xorshift64*: a cheap per-worker generator for victim selection.
    fn next_random(&self, bound: usize) -> usize {
        let mut x = self.rng.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.set(x);
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as usize % bound
    }

    /// Rule 3 alone: the newest job of the own deque that is ours to run
    /// (proxies for others are resolved as usual).
    pub(super) fn pop_own_task(&self) -> Option<(JobRef, Rule)> {
        while let Some(job) = self.deque.pop() {
            if let Resolved::Run(job) = self.resolve(job) {
                return Some((job, Rule::OwnDeque));
            }
        }
        None
    }
}
