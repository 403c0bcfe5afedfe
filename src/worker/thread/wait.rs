//! Waiting: a worker's loop until a latch is set (`wait_until`: a pool
//! thread's main loop, `serve_until`, and the waits of join, scope and
//! run), the waits without a latch (`help_until`, `run_one`), and the
//! idle path into the sleep protocol (`search_or_sleep`).
//!
//! A wait inside a task (a `join`, a scope, a `run` from a worker) is
//! *nested*: it sits on the stack of the task that waits, and whatever it
//! runs meanwhile sits on top. Two guards keep that bounded (`WaitAccess`):
//!
//! - **Stack guard.** Beyond half of its stack, a nested wait does not
//!   steal (rule 6) any more; it runs only what is its own (rules 3 and 4)
//!   and otherwise sleeps until its latch is set. Without this, a worker
//!   whose joins keep getting stolen nests unrelated stolen tasks without
//!   limit (rayon #854).
//! - **Rule 5 only at the outermost level.** A nested wait leaves enqueued
//!   tasks to workers at their outermost loop, so it is not held up by
//!   unrelated long work. Exceptions, for liveness: a wait whose own group
//!   put work into the shared queue (`SharedQueueFlag`) takes rule 5, at
//!   any depth, since no one else may be free to; and every wait takes the
//!   shared queue's *entries*, the jobs threads outside the pool block on,
//!   since the blocked thread may be a worker of another pool that this
//!   very wait is waiting for (`a.install(|| b.install(|| a.install(..)))`).
//!
//! A wait inside an isolated region (`region.rs`) is narrower still: it
//! takes only its region's jobs (from its own deque, its mailbox and the
//! shared queue's isolated lane) and does not steal.
//!
//! Invariants: what a wait may take is decided once, where it starts
//! (`wait_access`: its stack does not move while it lasts); `wait_depth`
//! counts the waits on the thread's stack and is restored as each
//! returns; a worker registers as idle with the sleep protocol only after
//! a search came back empty, and is busy again (its mailbox too) before
//! it runs what it found or returns.

use super::access::{SharedAccess, WaitAccess};
use super::search::Resolved;
use super::{WorkerThread, approximate_stack_pointer};
use crate::observe::stats::Rule;
use crate::observe::trace::SleepEvent;
use crate::platform::latch::CoreLatch;
use crate::queues::region::Region;
use crate::queues::shared_queue::SharedQueueFlag;

/// How long a worker that ran a loop share searches before its sleep
/// rounds start (`search_or_sleep`).
const LOOP_LINGER: std::time::Duration = std::time::Duration::from_micros(200);

/// While lingering, searches between two `yield_now`s: a yield is a system
/// call of about a microsecond, which used to be most of the delay before
/// a lingering worker saw the next share; yielding now and then still
/// gives the core away on a busy machine.
const LINGER_SPINS_PER_YIELD: u32 = 8;

impl WorkerThread {
    /// A pool thread's main loop: work until `terminate` is set.
    pub(crate) fn serve_until(&self, terminate: &CoreLatch) {
        self.serving.set(true);
        self.wait_until(terminate, None);
        self.serving.set(false);
    }

    /// Work by the six rules until `latch` is set, sleeping on it when there
    /// is nothing to do. `group_flag`: the flag of the waited-for work, if
    /// its tasks may go to the shared queue.
    ///
    /// The outermost wait of a thread uses all six rules; a nested one is
    /// limited as the module documentation says.
    ///
    /// While work keeps coming, the sleep counters are not touched: only a
    /// worker whose search came back empty registers as idle. (Registering
    /// around every task would make all workers hammer the one shared
    /// counter word.)
    pub(crate) fn wait_until(&self, latch: &CoreLatch, group_flag: Option<&SharedQueueFlag>) {
        let access = self.wait_access(group_flag);
        let depth = self.wait_depth.get();
        self.wait_depth.set(depth + 1);
        // Busy from here on, until a search finds nothing (a worker starts
        // out idle, so that proxies wait for a thread that is starting).
        self.registry.mailbox(self.index).set_busy();
        while !latch.probe() {
            if let Some((job, rule)) = self.find_work_with(&access) {
                self.run_chain(job, rule);
                continue;
            }
            self.search_or_sleep(latch, &access);
        }
        self.wait_depth.set(depth);
    }

    /// What a wait starting here may take (see the module documentation).
    fn wait_access<'a>(&self, group_flag: Option<&'a SharedQueueFlag>) -> WaitAccess<'a> {
        let region = self.region.get();
        if region.is_isolated() {
            return WaitAccess::isolated(region);
        }
        if self.wait_depth.get() == 0 {
            return WaitAccess::OUTERMOST;
        }
        // The stack does not move during the wait: one check suffices.
        let steal = cfg!(miri) || approximate_stack_pointer() > self.steal_floor;
        if !steal {
            self.counters().stack_guarded_wait();
        }
        let shared = match group_flag {
            None => SharedAccess::Never,
            Some(flag) => match flag.wait_key() {
                0 => SharedAccess::IfSet(flag),
                key => SharedAccess::KeptApart(key),
            },
        };
        WaitAccess {
            shared,
            steal,
            region: Region::NONE,
        }
    }

    /// `yield_now` (`local`: `yield_local`): run one task this worker may
    /// take (`local`: only from its own deque, rule 3), as a nested wait
    /// would but with the shared queue's lanes allowed (the caller asked
    /// for any pending task). Whether it ran one.
    pub(crate) fn run_one(&self, local: bool) -> bool {
        let found = if local {
            self.pop_own_task()
        } else {
            let mut access = self.wait_access(None);
            if !access.region.is_isolated() {
                access.shared = SharedAccess::Always;
            }
            self.find_work_with(&access)
        };
        let Some((job, rule)) = found else {
            return false;
        };
        let depth = self.wait_depth.get();
        self.wait_depth.set(depth + 1);
        self.run_chain(job, rule);
        self.wait_depth.set(depth);
        true
    }

    /// Is a wait open on this thread (a join, scope or run waiting, or the
    /// main loop)?
    pub(crate) fn in_a_wait(&self) -> bool {
        self.wait_depth.get() > 0
    }

    /// This worker just ran a share of a parallel loop (`search_or_sleep`
    /// lingers before sleeping).
    #[inline]
    pub(crate) fn note_loop_share(&self) {
        self.ran_loop_share.set(true);
    }

    /// Wait for a condition that no latch signals (`Pool::wait_idle` on
    /// another pool): run this pool's tasks, as a nested wait may, while
    /// `done` is false, and call `block` (a short timed sleep) when there
    /// are none.
    pub(crate) fn help_until(&self, done: impl Fn() -> bool, block: impl Fn()) {
        let access = self.wait_access(None);
        let depth = self.wait_depth.get();
        self.wait_depth.set(depth + 1);
        while !done() {
            match self.find_work_with(&access) {
                Some((job, rule)) => self.run_chain(job, rule),
                None => block(),
            }
        }
        self.wait_depth.set(depth);
    }

    /// The idle path: search in rounds, get sleepy, sleep, until a task
    /// turns up (run it and return) or the latch is set.
    #[cold]
    fn search_or_sleep(&self, latch: &CoreLatch, access: &WaitAccess<'_>) {
        let sleep = &self.registry.sleep;
        let mailbox = self.registry.mailbox(self.index);
        self.flush_trace();
        let mut idle = sleep.start_looking(self.index);
        // Proxies for us are left to us while we look (`proxy.rs`); an
        // isolated wait does not take them all, so it stays "busy".
        let isolated = access.region.is_isolated();
        if !isolated {
            mailbox.set_idle();
        }
        // The jobs event counter when this wait last handed work on.
        let mut passed_on_at = None;
        // After a loop share: search on, mostly spinning (a yield every
        // `LINGER_SPINS_PER_YIELD` searches), for `LOOP_LINGER` before
        // the sleep rounds start (the next step of an iterated loop sends
        // the next share within microseconds; waking from a real sleep
        // costs tens of them, a step's whole work in a 100 us stencil).
        let linger_until = self
            .ran_loop_share
            .replace(false)
            .then(|| std::time::Instant::now() + LOOP_LINGER);
        let mut lingered = 0u32;
        // On a machine loaded by other processes a yield waits a time
        // slice: linger spinning only.
        let linger_yields = !sleep.yields_meet_neighbours();
        while !latch.probe() {
            if let Some((job, rule)) = self.find_work_with(access) {
                mailbox.set_busy();
                sleep.work_found(|| !self.registry.shared.is_empty());
                self.run_chain(job, rule);
                return;
            }
            // Work this wait may not take: the wake that announced it may
            // have come here. Hand it on to every sleeper: one of them may
            // be the worker that can take it. Again after each new post (a
            // wake goes to the first sleeper, which may be this wait every
            // time; handing on once per search left later work with
            // everyone asleep), but not again for the same posts, or two
            // waits that may not take it would wake each other forever.
            if self.sees_work_it_may_not_take(access) {
                let now = sleep.jobs_event_counter();
                if passed_on_at != Some(now) {
                    passed_on_at = Some(now);
                    sleep.wake_sleepers();
                }
            }
            if linger_until.is_some_and(|until| std::time::Instant::now() < until) {
                lingered += 1;
                if linger_yields && lingered.is_multiple_of(LINGER_SPINS_PER_YIELD) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
            let before = if self.tracing { self.trace_read() } else { 0 };
            if sleep.no_work_found(&mut idle, latch, || self.has_injected_work(access)) {
                self.counters().slept();
                if self.tracing {
                    self.registry.trace_buffer(self.index).sleep(SleepEvent {
                        worker: self.index,
                        start_ns: before,
                        end_ns: self.registry.trace_now(),
                    });
                }
            }
        }
        mailbox.set_busy();
        sleep.work_found(|| false);
    }

    /// The sleep protocol's final check (after fence F2): work pushed to a
    /// place that no poster wakes this worker for, and that it may take.
    fn has_injected_work(&self, access: &WaitAccess<'_>) -> bool {
        let shared = &self.registry.shared;
        let mailbox = self.registry.mailbox(self.index);
        if access.region.is_isolated() {
            return shared.has_region(access.region)
                || mailbox.has_region(access.region)
                || mailbox.has_strict();
        }
        let kept_apart = access.kept_apart_key();
        (access.may_take_shared() && !shared.is_empty())
            || shared.has_entries()
            || !mailbox.is_empty()
            || (kept_apart != 0 && shared.has_kept_apart(kept_apart))
    }

    /// Does a wait limited by `access` see work that others could run?
    fn sees_work_it_may_not_take(&self, access: &WaitAccess<'_>) -> bool {
        let shared = &self.registry.shared;
        if access.region.is_isolated() {
            // Our own deque holds only other regions' jobs now (the search
            // took ours): thieves may take them.
            return shared.has_work_outside(access.region) || !self.deque.is_empty();
        }
        match access.kept_apart_key() {
            0 => !access.may_take_shared() && shared.has_lane_work(),
            key => shared.has_lane_work_outside(key),
        }
    }

    /// Before the work a wait of this thread will wait for is submitted:
    /// if that wait is nested, the work's enqueued tasks are kept apart
    /// for it (`SharedQueueFlag`), so that it takes those and no task
    /// enqueued by others. Decided as `wait_access` decides that the wait
    /// is nested (an isolated wait finds its tasks by region instead).
    pub(crate) fn prepare_wait(&self, flag: &SharedQueueFlag) {
        flag.keep_apart(self.wait_depth.get() > 0 && !self.region.get().is_isolated());
    }

    /// Before the worker exits: its deque and mailbox can still hold proxy
    /// entries whose task ran elsewhere; give them back (and run anything
    /// real, though the pool only stops once its tasks are done).
    pub(crate) fn release_leftovers(&self) {
        let mailbox = self.registry.mailbox(self.index);
        while let Some(job) = self.deque.pop().or_else(|| mailbox.pop()) {
            if let Resolved::Run(job) = self.resolve(job) {
                self.run_chain(job, Rule::OwnDeque);
            }
        }
    }

    /// Run by the six rules until no rule yields a task (no sleeping): the
    /// drain loop of a temporary worker.
    pub(crate) fn drain(&self) {
        while let Some((job, rule)) = self.find_work() {
            self.run_chain(job, rule);
        }
    }
}
