//! When idle workers go to sleep, and who wakes them.
//!
//! This is the protocol of Rayon RFC #5 as rayon-core implements it,
//! extended with a targeted wake for mailboxes. A worker is *active* while
//! it runs tasks, *idle* while it searches, *sleeping* while blocked on its
//! own condvar. The packed word in [`counters`] counts inactive (idle or
//! sleeping) and sleeping workers and carries the jobs event counter (JEC).
//!
//! # Falling asleep
//!
//! A worker that finds nothing searches again, in rounds, yielding between
//! them, or, when its last yield waited for another thread (where a yield
//! costs a time slice), spinning while another worker is active, and
//! napping while none is and another process holds cores (`pause.rs`)
//! (one that just ran a share of a parallel loop, or waits for the
//! other shares of its own, first searches for 200 us, yielding: the next
//! step of an iterated loop comes within microseconds, and a wake from a
//! real sleep costs tens of them; `WorkerThread::search_or_sleep`).
//! After `ROUNDS_UNTIL_SLEEPY` rounds it *gets sleepy*: it makes the
//! JEC even and remembers it. It searches once more. If that also fails it
//! takes its sleep lock, moves its latch SLEEPY -> SLEEPING (failing if the
//! latch was set: then it does not sleep), and in one CAS checks that the
//! JEC is unchanged and adds itself to the sleeping count. Then it executes
//! fence F2 (SeqCst), checks once more for injected work (the shared queue
//! and its own mailbox), and only then blocks.
//!
//! # Posting work
//!
//! Work pushed from outside the pool (the shared queue) or to a mailbox is
//! followed by fence F1 (SeqCst); then the poster makes the JEC odd and reads
//! the counts in the same atomic step. If no thread is idle-searching and
//! some sleep, it wakes one per new task. A push to a worker's own deque
//! wakes only when nobody is idle-searching, or when the deque already held
//! work (a backlog is forming). A mailbox push also wakes the mailbox's
//! owner directly if it sleeps.
//!
//! # Where this differs from rayon-core, and why (measured)
//!
//! * a mailbox push wakes the mailbox's owner (targeted), and the final
//!   pre-sleep check also looks at the worker's own mailbox;
//! * a worker registers as idle only after a search failed, so busy
//!   workers never touch the shared counter word (registering around every
//!   task made both workers fight over it: fib on 2 workers was no faster
//!   than on 1);
//! * a searcher that finds work wakes at most one sleeper, and only if
//!   injected work is still visible (rayon wakes up to two
//!   unconditionally, which woke the whole pool per sporadic task);
//! * 10 search rounds before getting sleepy instead of 32, unless another
//!   worker of the pool runs tasks and yields return at once: then 32, as
//!   in rayon-core (`Sleep::searches_on`). Its hand-off, a pipeline's next
//!   item or a join's other half, usually comes within microseconds, and
//!   a worker that slept by then costs it a wake: two serial pipeline
//!   stages of 10 us each, not pinned, slept 1,200 to 4,200 times in five
//!   runs of 20,000 items and took up to 1.8 times as long in about half
//!   the runs; with the extra rounds 15 to 49 sleeps, and no slow runs;
//! * a waker that goes on running (an own-deque push, a searcher that
//!   found work) steers the sleeper it wakes off its own CPU and the awake
//!   workers' (`placement.rs`, `platform/cpu_spread.rs`): left to the
//!   kernel, the sleeper often queued behind its waker for the rest of a
//!   time slice while another CPU idled; where workers start and exit is
//!   placed too (`start_exit.rs`).
//!
//! Together: 0.03-0.035 of a core for one task a millisecond, where rayon
//! uses 0.13 in the same runs. Under loom the search rounds do not yield
//! (a loom yield parks the thread until all others block, which hid
//! exactly the interleavings that matter).
//!
//! # Why no wake-up is lost
//!
//! The race to rule out: a sleepy worker S finds nothing; a poster P pushes
//! a task and sees no sleeper; S then blocks forever with the task queued.
//!
//! * If P's JEC increment comes before S's sleeping-count CAS, the CAS sees
//!   a changed word and S searches again.
//! * Otherwise S's CAS comes first. Both then run a SeqCst fence (P's F1
//!   after the push and before reading the counters, S's F2 after the CAS
//!   and before reading the queue). SeqCst fences are totally ordered: if
//!   F1 precedes F2, S's final check sees the push; if F2 precedes F1, P's
//!   read sees S counted as sleeping and P wakes it. Either way the task is
//!   seen. This also covers the JEC having wrapped around to the very value
//!   S remembered, which the first bullet alone would miss.
//! * The wake itself cannot slip between S's final check and S blocking: S
//!   holds its sleep lock from before the check until the condvar wait
//!   releases it, and the waker takes that lock to flip `is_blocked`.
//!
//! Work pushed to a worker's own deque needs no fence: if a sleeper misses
//! it, the pushing worker itself is awake and will run it.
//!
//! # Heartbeat: work pushed without a wake-up
//!
//! A pipeline lends the rest of a chain out around each stage body by a
//! *quiet* offer (`queues/lent.rs`, or a quiet deque push): waking a
//! sleeper for every item would cost a system call an item, and take a
//! light pipeline apart. But if the body blocks, an idle worker must still
//! come for that work. So while such a run is in progress
//! (`start_heartbeat` .. `stop_heartbeat`), a sleeper blocks for at most
//! `HEARTBEAT` and then searches again (steals included), once: it goes
//! back to the sleepy state, not to the start of its rounds. A sleeper that
//! read the heartbeat count as zero blocks without a timeout; the first
//! `start_heartbeat` wakes every sleeper, and cannot miss one: the sleeper
//! reads the count after its sleeping-count CAS, the starter reads the
//! sleeping count after raising the count, both SeqCst, so one of the two
//! sees the other.
//!
//! Latches: a worker waiting on a latch sleeps on it. The latch's own
//! SLEEPY/SLEEPING states make `set` report whether the owner committed to
//! sleep; the setter then wakes that owner alone.
//!
//! Invariants: `sleeping <= inactive <= workers`; the sleeping count is
//! decremented by the waker, not the sleeper, so posters see an up-to-date
//! count at once; a worker only blocks while holding no task.

pub(crate) mod counters;
#[cfg(not(loom))]
mod pause;
#[cfg(not(loom))]
mod placement;
mod start_exit;

#[cfg(not(loom))]
pub(crate) use placement::{StartingHere, ThreadCpus};
#[cfg(loom)]
pub(crate) use start_exit::{StartingHere, ThreadCpus};

use crate::platform::latch::CoreLatch;
use crate::platform::sync::{AtomicUsize, Condvar, Mutex, Ordering, fence};
use counters::{AtomicCounters, JobsEventCounter};
use crossbeam_utils::CachePadded;

/// Search rounds (with a yield or a spin between them) before getting
/// sleepy. One under loom, so the models stay small (the protocol does not
/// depend on the number).
const ROUNDS_UNTIL_SLEEPY: u32 = if cfg!(loom) { 1 } else { 10 };
/// One more round after getting sleepy, then sleep.
const ROUNDS_UNTIL_SLEEPING: u32 = ROUNDS_UNTIL_SLEEPY + 1;
/// Rounds a worker searches on before getting sleepy while another worker
/// of the pool runs tasks (`Sleep::searches_on`): with them, as many as
/// rayon-core searches before every sleep.
#[cfg(not(loom))]
const ROUNDS_WHILE_OTHERS_WORK: u32 = 22;

/// How long a sleeper blocks while a run may push work without waking
/// anyone (see "Heartbeat" above): the longest an idle worker leaves a
/// blocked pipeline stage's lent items waiting.
#[cfg(not(loom))]
const HEARTBEAT: std::time::Duration = std::time::Duration::from_millis(1);

/// Set the process's verdict on the machine's load, for tests of what
/// follows from it elsewhere.
#[cfg(all(test, not(loom)))]
pub(crate) fn set_machine_has_neighbour(neighbour: bool) {
    pause::set_machine_has_neighbour(neighbour);
}

/// Have parking_lot set up the calling thread's parking data now, at the
/// start of a pool thread. It does that on a thread's first park (a
/// condvar wait, a contended lock), and may allocate then: its table of
/// waiters grows with the number of threads in the process. A worker
/// whose first sleep fell inside a `join` made `join_allocates_nothing`
/// fail (caught under ThreadSanitizer, in `ThreadData::new`). Sleeps now
/// block on std's condvar, but a worker may still park on one of the
/// parking_lot locks off the wake paths (the registry's, a pipeline's).
/// A wait that has timed out before it starts parks only for that
/// bookkeeping.
pub(crate) fn prepare_thread() {
    #[cfg(not(loom))]
    {
        let lock = parking_lot::Mutex::new(());
        let condvar = parking_lot::Condvar::new();
        let _ = condvar.wait_for(&mut lock.lock(), std::time::Duration::ZERO);
    }
}

/// One worker's sleep lock and condvar, each on its own cache line.
struct WorkerSleepState {
    /// True while the worker is blocked on `condvar`. Written under the lock
    /// by the sleeper (to true) and by the waker (to false).
    is_blocked: Mutex<bool>,
    condvar: Condvar,
    /// How the worker pauses between search rounds (`pause.rs`): only the
    /// worker touches it, and it is a speed hint outside the protocol the
    /// loom models check.
    #[cfg(not(loom))]
    pauses: pause::Pauses,
    /// Where the worker runs, for the others' wakes (`placement.rs`).
    #[cfg(not(loom))]
    placement: placement::WorkerPlacement,
}

/// The sleep state of one pool.
pub(crate) struct Sleep {
    /// Padded: read on every push, written whenever a worker goes idle.
    counters: CachePadded<AtomicCounters>,
    worker_sleep_states: Vec<CachePadded<WorkerSleepState>>,
    /// Runs in progress that may push work quietly: while non-zero,
    /// sleepers wake every `HEARTBEAT`. On a line of its own: read by
    /// every worker that falls asleep.
    heartbeats: CachePadded<AtomicUsize>,
}

/// Where a waker puts the sleeper it wakes (`placement.rs`): off its own
/// CPU if it goes on running, onto it if it blocks until the sleeper has
/// run, and otherwise where the kernel likes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Steer {
    No,
    OffOurCpu,
    ToOurCpu,
}

/// A searching worker's progress towards sleep.
pub(crate) struct IdleState {
    worker_index: usize,
    rounds: u32,
    /// Rounds searched past `ROUNDS_UNTIL_SLEEPY` while another worker
    /// ran tasks.
    extra_rounds: u32,
    /// The JEC as the worker left it when it got sleepy.
    jobs_counter: JobsEventCounter,
}

impl IdleState {
    fn wake_fully(&mut self) {
        self.rounds = 0;
        self.extra_rounds = 0;
        self.jobs_counter = JobsEventCounter::DUMMY;
    }

    /// Back to just before getting sleepy: one more search, then try again.
    fn wake_partly(&mut self) {
        self.rounds = ROUNDS_UNTIL_SLEEPY;
        self.jobs_counter = JobsEventCounter::DUMMY;
    }
}

impl Sleep {
    pub(crate) fn new(num_workers: usize) -> Self {
        assert!(num_workers <= counters::MAX_THREADS);
        Sleep {
            counters: CachePadded::new(AtomicCounters::new()),
            worker_sleep_states: (0..num_workers)
                .map(|_| {
                    CachePadded::new(WorkerSleepState {
                        is_blocked: Mutex::new(false),
                        condvar: Condvar::new(),
                        #[cfg(not(loom))]
                        pauses: pause::Pauses::new(),
                        #[cfg(not(loom))]
                        placement: placement::WorkerPlacement::new(),
                    })
                })
                .collect(),
            heartbeats: CachePadded::new(AtomicUsize::new(0)),
        }
    }

    /// A run that may push work quietly begins: sleepers wake every
    /// `HEARTBEAT` until it ends. The first such run wakes every sleeper,
    /// since those blocked without a timeout.
    pub(crate) fn start_heartbeat(&self) {
        if self.heartbeats.fetch_add(1, Ordering::SeqCst) == 0 {
            self.wake_sleepers();
        }
    }

    /// The run that called `start_heartbeat` is over.
    pub(crate) fn stop_heartbeat(&self) {
        self.heartbeats.fetch_sub(1, Ordering::SeqCst);
    }

    /// A worker starts searching for work.
    #[inline]
    pub(crate) fn start_looking(&self, worker_index: usize) -> IdleState {
        self.counters.add_inactive_thread();
        IdleState {
            worker_index,
            rounds: 0,
            extra_rounds: 0,
            jobs_counter: JobsEventCounter::DUMMY,
        }
    }

    /// A searching worker found work: it is active again. If it was the
    /// last searcher and more injected work is visible (`more_work`), it
    /// hands the search over to one sleeper.
    ///
    /// rayon-core wakes up to two sleepers here unconditionally; with
    /// sporadic work that wakes the whole pool for every task, each waking
    /// worker then searching its rounds before sleeping again, which doubled
    /// the idle-pool CPU. The wake is a throughput measure only: every post
    /// already wakes the sleepers its tasks need (`new_jobs`).
    #[inline]
    pub(crate) fn work_found(&self, more_work: impl FnOnce() -> bool) {
        let sleepers = self.counters.sub_inactive_thread();
        if sleepers > 0 && more_work() {
            // We run what we found: the sleeper had better not queue behind us.
            self.wake_any_threads(1, Steer::OffOurCpu);
        }
    }

    /// A search found nothing: yield, get sleepy, or sleep, by round.
    /// Returns true if the worker actually blocked.
    #[inline]
    pub(crate) fn no_work_found(
        &self,
        idle_state: &mut IdleState,
        latch: &CoreLatch,
        has_injected_work: impl FnOnce() -> bool,
    ) -> bool {
        if idle_state.rounds < ROUNDS_UNTIL_SLEEPY {
            self.pause_between_rounds(idle_state);
            idle_state.rounds += 1;
            false
        } else if idle_state.rounds == ROUNDS_UNTIL_SLEEPY {
            if self.searches_on(idle_state) {
                idle_state.extra_rounds += 1;
                self.pause_between_rounds(idle_state);
                return false;
            }
            idle_state.jobs_counter = self.announce_sleepy();
            idle_state.rounds += 1;
            self.pause_between_rounds(idle_state);
            false
        } else {
            debug_assert_eq!(idle_state.rounds, ROUNDS_UNTIL_SLEEPING);
            self.sleep(idle_state, latch, has_injected_work)
        }
    }

    /// Whether a worker about to get sleepy searches on instead: while
    /// another worker of the pool runs tasks, its hand-off (a pipeline's
    /// next item, a join's other half) usually comes within microseconds,
    /// and a sleeper would cost it a wake. Only where yields return at
    /// once: beside a busy neighbour each yield waits a time slice.
    #[inline]
    fn searches_on(&self, idle_state: &IdleState) -> bool {
        #[cfg(not(loom))]
        {
            idle_state.extra_rounds < ROUNDS_WHILE_OTHERS_WORK
                && self.worker_sleep_states[idle_state.worker_index]
                    .pauses
                    .yields_return_at_once()
                && self.another_worker_active()
        }
        #[cfg(loom)]
        {
            let _ = idle_state;
            false
        }
    }

    /// Whether a worker of the pool is running tasks (is not searching or
    /// asleep).
    #[cfg(not(loom))]
    #[inline]
    fn another_worker_active(&self) -> bool {
        self.counters.load().inactive_threads() < self.worker_sleep_states.len()
    }

    /// Pause between search rounds: yield, spin, or (before sleeping)
    /// nothing, by what the worker's yields meet (`pause.rs`). Under loom
    /// it does nothing: a loom yield parks the thread until every other
    /// thread is blocked, which would hide exactly the interleavings the
    /// models are for (a search racing a post); the rounds are a
    /// performance measure, not part of the protocol.
    #[inline]
    fn pause_between_rounds(&self, idle_state: &IdleState) {
        #[cfg(not(loom))]
        self.worker_sleep_states[idle_state.worker_index]
            .pauses
            .pause(
                idle_state.rounds,
                idle_state.rounds == ROUNDS_UNTIL_SLEEPING,
                || self.another_worker_active(),
            );
        #[cfg(loom)]
        let _ = idle_state;
    }

    /// Whether yields wait for another process's threads (a loaded
    /// machine, as the process last saw it): then a yield costs a time
    /// slice, and a short wait had better spin (`pause.rs`). Always false
    /// under loom.
    #[inline]
    pub(crate) fn yields_meet_neighbours(&self) -> bool {
        #[cfg(not(loom))]
        return pause::machine_has_neighbour();
        #[cfg(loom)]
        false
    }

    /// The placement state of every worker but `index`.
    #[cfg(not(loom))]
    fn other_placements(
        &self,
        index: usize,
    ) -> impl Iterator<Item = &placement::WorkerPlacement> + Clone {
        self.worker_sleep_states
            .iter()
            .enumerate()
            .filter(move |&(other, _)| other != index)
            .map(|(_, state)| &state.placement)
    }

    /// Make the JEC even (if work was posted since the last sleepy thread)
    /// and return it.
    fn announce_sleepy(&self) -> JobsEventCounter {
        self.counters
            .increment_jobs_event_counter_if(JobsEventCounter::is_active)
            .jobs_counter()
    }

    #[cold]
    fn sleep(
        &self,
        idle_state: &mut IdleState,
        latch: &CoreLatch,
        has_injected_work: impl FnOnce() -> bool,
    ) -> bool {
        let worker_index = idle_state.worker_index;
        if !latch.get_sleepy() {
            return false;
        }
        let sleep_state = &self.worker_sleep_states[worker_index];
        let mut is_blocked = sleep_state.is_blocked.lock();
        debug_assert!(!*is_blocked);

        // The latch was set between get_sleepy and here: its setter saw
        // SLEEPY and sends no wake-up, so we must not block.
        if !latch.fall_asleep() {
            idle_state.wake_fully();
            return false;
        }

        loop {
            let counters = self.counters.load();
            if counters.jobs_counter() != idle_state.jobs_counter {
                // Work was posted since we got sleepy; we may have missed
                // it. Search once more before trying to sleep again.
                idle_state.wake_partly();
                latch.wake_up();
                return false;
            }
            if self.counters.try_add_sleeping_thread(counters) {
                break;
            }
        }

        // F2 of the proof sketch: orders our sleeping-count increment before
        // the final check below, against F1 in the posters.
        fence(Ordering::SeqCst);
        let slept = if has_injected_work() {
            // Nobody will wake us for this work, so we undo our own
            // sleeping count (normally the waker does).
            self.counters.sub_sleeping_thread();
            false
        } else {
            *is_blocked = true;
            #[cfg(not(loom))]
            sleep_state.placement.before_block();
            // Read after the sleeping-count CAS (see "Heartbeat").
            #[cfg(not(loom))]
            if self.heartbeats.load(Ordering::SeqCst) > 0 {
                let mut beat = false;
                let deadline = std::time::Instant::now() + HEARTBEAT;
                while *is_blocked {
                    if sleep_state
                        .condvar
                        .wait_until(&mut is_blocked, deadline)
                        .timed_out()
                    {
                        if *is_blocked {
                            // Nobody woke us: we take ourselves off the
                            // count (under the lock, so a waker cannot too).
                            *is_blocked = false;
                            self.counters.sub_sleeping_thread();
                            beat = true;
                        }
                        break;
                    }
                }
                if beat {
                    // A heartbeat, not a wake-up: look once for lent work,
                    // then sleep again, instead of the full rounds of a
                    // woken worker, whose steal attempts would hammer the
                    // lender's deque 30-odd times a beat.
                    drop(is_blocked);
                    idle_state.wake_partly();
                    latch.wake_up();
                    return true;
                }
            }
            while *is_blocked {
                sleep_state.condvar.wait(&mut is_blocked);
            }
            true
        };
        drop(is_blocked);
        #[cfg(not(loom))]
        if slept {
            sleep_state
                .placement
                .after_wake(self.other_placements(worker_index));
        }

        idle_state.wake_fully();
        latch.wake_up();
        slept
    }

    /// `num_jobs` tasks were pushed to the shared queue (from anywhere) or
    /// to a worker's deque from outside: make sure someone will see them.
    #[inline]
    /// Returns how many sleepers it woke.
    pub(crate) fn new_injected_jobs(&self, num_jobs: usize, queue_was_empty: bool) -> usize {
        // F1 of the proof sketch: the push happens before we read the
        // sleeping count.
        fence(Ordering::SeqCst);
        // Often from a thread about to block on the result: a sleeper woken
        // onto its CPU runs at once, sooner than on an idle one (waking an
        // idle vCPU is slow), so the kernel places it.
        self.new_jobs::<false>(num_jobs, queue_was_empty)
    }

    /// `num_jobs` tasks were pushed to the pushing worker's own deque.
    #[inline]
    /// Returns how many sleepers it woke.
    pub(crate) fn new_internal_jobs(&self, num_jobs: usize, queue_was_empty: bool) -> usize {
        // The pusher goes on running (the other half of a fork): a sleeper
        // queued behind it would wait out its time slice.
        self.new_jobs::<true>(num_jobs, queue_was_empty)
    }

    /// A task was put in worker `target`'s mailbox: wake `target` if it
    /// sleeps, and in any case move the JEC so a sleepy `target` searches
    /// again instead of committing to sleep.
    pub(crate) fn new_mailbox_job(&self, target: usize) {
        fence(Ordering::SeqCst);
        let counters = self
            .counters
            .increment_jobs_event_counter_if(JobsEventCounter::is_sleepy);
        // As in `new_jobs`: a worker that registers as sleeping after this
        // load checks its mailbox again before it blocks, and sees the push.
        if counters.sleeping_threads() > 0 {
            self.wake_specific_thread(target);
        }
    }

    /// `STEER`: the poster goes on running, and steers the sleepers it
    /// wakes off its CPU. (A constant, so that the pusher's inlined code
    /// is a call of one wake function or the other, not an argument more.)
    #[inline]
    fn new_jobs<const STEER: bool>(&self, num_jobs: usize, queue_was_empty: bool) -> usize {
        let counters = self
            .counters
            .increment_jobs_event_counter_if(JobsEventCounter::is_sleepy);
        let num_sleepers = counters.sleeping_threads();
        if num_sleepers == 0 {
            return 0;
        }
        let num_awake_but_idle = counters.awake_but_idle_threads();
        let to_wake = if !queue_was_empty {
            // A backlog: the idle searchers are not keeping up.
            num_jobs.min(num_sleepers)
        } else if num_awake_but_idle < num_jobs {
            // The searchers will take some; wake sleepers for the rest.
            (num_jobs - num_awake_but_idle).min(num_sleepers)
        } else {
            return 0;
        };
        if STEER {
            self.wake_any_threads_steered(to_wake)
        } else {
            self.wake_any_threads(to_wake, Steer::No)
        }
    }

    /// `wake_any_threads` for a waker that goes on running.
    #[inline(never)]
    fn wake_any_threads_steered(&self, num_to_wake: usize) -> usize {
        self.wake_any_threads(num_to_wake, Steer::OffOurCpu)
    }

    /// Wake up to `num_to_wake` sleepers; returns how many it woke.
    fn wake_any_threads(&self, num_to_wake: usize, steer: Steer) -> usize {
        let mut woken = 0;
        if num_to_wake == 0 {
            return 0;
        }
        for index in 0..self.worker_sleep_states.len() {
            if self.wake_thread(index, steer) {
                woken += 1;
                if woken == num_to_wake {
                    break;
                }
            }
        }
        woken
    }

    /// Wake worker `index` if it is blocked. True if it was.
    pub(crate) fn wake_specific_thread(&self, index: usize) -> bool {
        self.wake_thread(index, Steer::No)
    }

    /// Wake worker `index` if it is blocked, steered as `steer` says. True
    /// if it was blocked.
    fn wake_thread(&self, index: usize, steer: Steer) -> bool {
        let sleep_state = &self.worker_sleep_states[index];
        let mut is_blocked = sleep_state.is_blocked.lock();
        if *is_blocked {
            *is_blocked = false;
            #[cfg(not(loom))]
            match steer {
                Steer::No => {}
                Steer::OffOurCpu => sleep_state.placement.steer(self.other_placements(index)),
                Steer::ToOurCpu => sleep_state.placement.gather(),
            }
            #[cfg(loom)]
            let _ = steer;
            // The waker, not the sleeper, takes it off the sleeping count,
            // so posters see the new count at once.
            self.counters.sub_sleeping_thread();
            // Notified after the lock is let go: woken while we still held
            // it, the sleeper would block on the lock at once and need a
            // second wake-up (each a wait for a core on a loaded machine).
            // It cannot miss this notify: it waits (and so releases the
            // lock) before we could take the lock and clear the flag.
            drop(is_blocked);
            sleep_state.condvar.notify_one();
            true
        } else {
            false
        }
    }

    /// The jobs event counter now: it moves when work is posted while a
    /// thread is sleepy, or when a thread gets sleepy after work was
    /// posted, and not when sleepers are woken to hand work on.
    pub(crate) fn jobs_event_counter(&self) -> JobsEventCounter {
        self.counters.load().jobs_counter()
    }

    /// Wake every sleeper: a nested wait saw enqueued work it may not take
    /// (see `worker::WaitAccess`) and hands it on. Rare, and bounded: a
    /// wait does it at most once for each value of the jobs event counter,
    /// so waits that cannot take the work stop waking each other.
    #[cold]
    pub(crate) fn wake_sleepers(&self) {
        if self.counters.load().sleeping_threads() > 0 {
            self.wake_any_threads(self.worker_sleep_states.len(), Steer::No);
        }
    }

    /// A latch owned by worker `index` was set while it slept on it.
    pub(crate) fn notify_worker_latch_is_set(&self, index: usize) {
        self.wake_specific_thread(index);
    }

    /// Is some worker searching for work or asleep (a racy snapshot: a
    /// hint for offering work, never part of the protocol)?
    #[inline]
    pub(crate) fn has_inactive_threads(&self) -> bool {
        self.counters.load().inactive_threads() > 0
    }

    /// Workers blocked right now (a racy snapshot, for observation).
    pub(crate) fn sleeping_threads(&self) -> usize {
        self.counters.load().sleeping_threads()
    }
}
