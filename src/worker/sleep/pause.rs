//! How a searching worker pauses between two search rounds: a yield, a
//! short spin, a short timed sleep (a nap), or (right before sleeping, on
//! a machine loaded by other processes) nothing.
//!
//! A yield is cheap on an idle machine (0.6 us here). On a loaded one it
//! hands the core to whatever else is runnable, and what the yield then
//! waits for decides what it was worth:
//!
//! * **Another process's thread** (a busy neighbour): the worker waits a
//!   whole time slice (about 4 ms here), while the task it was looking
//!   for (the next batch of a pipeline, the other half of a join, the next
//!   round of a caller) usually turns up within microseconds. Under two
//!   busy loops on two cores, a pipeline of 0.6 us items whose second
//!   worker yielded after every batch got a tenth of its CPU share.
//! * **A thread of this process** (more runnable threads than cores: many
//!   pools, a test harness, a sanitizer's slowdown): the yield is what lets
//!   that thread run, and is often how the work the worker looks for gets
//!   made. Replacing these yields with spins made a sleep stress test with
//!   more threads than cores 1.5 to 2 times slower under ThreadSanitizer.
//!
//! So a worker remembers whether its last yield waited, and the process
//! remembers whether the last yield before a sleep met a neighbour (a
//! verdict about the machine, shared by every worker of every pool: a pool
//! built a moment ago inherits it instead of paying a slice to learn it).
//! While yields wait, the first `SPINNING_ROUNDS` rounds of a search do
//! not yield:
//!
//! * while another worker of the pool runs tasks, they spin: that worker
//!   holds a core and may hand work on within microseconds (a pipeline's
//!   next batch, a join's other half);
//! * on a machine with a neighbour and no other worker active, they nap
//!   (`NAP`, a timed sleep). The next work then comes from a thread outside
//!   the pool, or from a worker that lost its core, and either may be
//!   waiting for the very core a spin would hold; a nap frees it and, unlike
//!   a yield, comes back without queueing behind the busy loops. Spinning
//!   there, soak rounds (`tests/soak.rs`) on kept pools of four workers and
//!   one, beside two busy loops on two cores, took five times as long as
//!   napping;
//! * otherwise (yields that wait for our own threads: more threads than
//!   cores on an idle machine) they spin too: there the next post comes
//!   from a thread that is running, and napping (a nap takes 85 to 95 us
//!   here, with the kernel's timer slack) made such soak rounds 1.5 to 1.7
//!   times slower.
//!
//! After a neighbour, a search also skips the yield before sleeping,
//! sleeping at once (a wake then costs a wake, not a slice), and a worker
//! yields before sleeping again only `PROBE_EVERY_MS` later, which is how
//! the process notices that the load has gone. After our own threads, or
//! on an idle machine, the yield before sleeping stays; it is measured once
//! yields wait (two system calls beside a sleep; an idle machine's yields
//! return at once and pay none).
//!
//! Which threads ran is read off the process's CPU clock, while the
//! worker was off its core: more CPU time than all the other cores could
//! have given means some of it was on this core (our own threads); next
//! to none means something else held this core (a neighbour); anything
//! between could be either, and keeps the last verdict. So a process
//! with more threads than cores on an idle machine, whose yields always
//! wait for its own threads, never reads as loaded. Without the clock a
//! waited yield tells nothing, and the worker keeps yielding (the
//! cautious choice).
//!
//! Invariant: none of this is part of the sleep protocol (the pause only
//! spaces out search rounds, and a nap is bounded); `Pauses` is its
//! worker's own, and the machine verdict (`MACHINE`) is a hint any worker
//! may overwrite (relaxed: a stale read costs a pause of the wrong kind,
//! nothing else).

use crate::platform::cpu_clock::process_cpu_time;
use crate::platform::sync::thread;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Rounds that spin instead of yielding once yields wait.
const SPINNING_ROUNDS: u32 = 10;
/// One spinning pause.
const SPIN_PAUSE: Duration = Duration::from_micros(5);
/// One pause of those rounds while no other worker of the pool is active:
/// a timed sleep (with the kernel's timer slack, 85 to 95 us here).
const NAP: Duration = Duration::from_micros(20);
/// What the process knows about the machine's load (see the module
/// documentation).
struct MachineVerdict {
    /// The last classified yield before a sleep met a neighbour.
    neighbour: AtomicBool,
    /// When (`now_ms`) a search skipping its yield before sleeping next
    /// yields anyway (`probe_due`).
    next_probe: AtomicU64,
}

static MACHINE: MachineVerdict = MachineVerdict {
    neighbour: AtomicBool::new(false),
    next_probe: AtomicU64::new(0),
};

/// A yield that took longer than this ran someone else first.
const YIELD_WAITED: Duration = Duration::from_micros(50);
/// After the yield before sleeping met a neighbour, the worker yields
/// before sleeping again only this long after, to see whether the
/// neighbour is still there: under load each such yield costs a time
/// slice, a few per cent of a core at this spacing.
const PROBE_EVERY_MS: u64 = 100;

/// Whom a yield that waited met.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Met {
    /// The process ran on this core meanwhile: our own threads.
    OwnThreads,
    /// The process hardly ran at all meanwhile, so something else held
    /// this core: a neighbour.
    Neighbour,
    /// Either could explain it (our threads ran on the other cores about
    /// as long as the wait), or the clock is missing: keep the last
    /// verdict.
    Unknown,
}

/// One worker's pause state: only that worker reads or writes it (plain
/// std atomics for `Sync`, not for ordering).
pub(super) struct Pauses {
    /// The last yield waited for another thread.
    last_waited: AtomicBool,
    /// The cores the process may run on besides the worker's, read when
    /// the pool is built: `available_parallelism` may read cgroup files
    /// and allocate, which a worker's wait must not.
    other_cores: u32,
}

impl Pauses {
    pub(super) fn new() -> Self {
        Pauses {
            last_waited: AtomicBool::new(false),
            other_cores: other_cores(),
        }
    }

    /// Pause after the search round `round` found nothing; `before_sleep`
    /// for the last pause before the worker blocks. `others_active` says
    /// whether another worker of the pool is running tasks now; it is read
    /// only on a loaded machine.
    pub(super) fn pause(
        &self,
        round: u32,
        before_sleep: bool,
        others_active: impl FnOnce() -> bool,
    ) {
        let neighbour = MACHINE.neighbour.load(Relaxed);
        if (neighbour || self.last_waited.load(Relaxed)) && round < SPINNING_ROUNDS {
            match unyielding_pause(neighbour, others_active) {
                Unyielding::Spin => spin(SPIN_PAUSE),
                Unyielding::Nap => thread::sleep(NAP),
            }
            return;
        }
        if !before_sleep {
            let waited = timed_yield(None).is_some();
            self.last_waited.store(waited, Relaxed);
            return;
        }
        if neighbour && !self.probe_due() {
            return;
        }
        // The process clock is a system call a reading: read it only once
        // yields are known to wait, so an idle machine's sleeps cost what
        // they did. The first yield that waits tells nothing (`Unknown`);
        // the next one before a sleep is measured.
        let classify = neighbour || self.last_waited.load(Relaxed);
        let met = timed_yield(classify.then_some(self.other_cores));
        self.last_waited.store(met.is_some(), Relaxed);
        let neighbour = match met {
            // A yield that returned at once: nobody else wanted the core.
            None => false,
            Some(Met::OwnThreads) => false,
            Some(Met::Neighbour) => true,
            Some(Met::Unknown) => neighbour,
        };
        MACHINE.neighbour.store(neighbour, Relaxed);
        if neighbour {
            MACHINE.next_probe.store(now_ms() + PROBE_EVERY_MS, Relaxed);
        }
    }

    /// Whether this worker's yields return at once: its last one did not
    /// wait, and the process has met no busy neighbour.
    pub(super) fn yields_return_at_once(&self) -> bool {
        !self.last_waited.load(Relaxed) && !MACHINE.neighbour.load(Relaxed)
    }

    /// Whether to yield before this sleep after all, to see whether the
    /// neighbour is still there: once every `PROBE_EVERY_MS`.
    fn probe_due(&self) -> bool {
        now_ms() >= MACHINE.next_probe.load(Relaxed)
    }
}

/// A pause of the first search rounds once yields wait.
#[derive(Debug, PartialEq, Eq)]
enum Unyielding {
    Spin,
    Nap,
}

/// Spin while another worker of the pool is active (its hand-off comes
/// within microseconds) or while no neighbour holds the cores (the yields
/// waited for our own threads, whose next post comes soon); nap beside a
/// neighbour with no worker active. `others_active` is read only then.
fn unyielding_pause(neighbour: bool, others_active: impl FnOnce() -> bool) -> Unyielding {
    if !neighbour || others_active() {
        Unyielding::Spin
    } else {
        Unyielding::Nap
    }
}

/// Whether the process's last classified yield before a sleep met a
/// neighbour: a worker's other yields had better spin too
/// (`WorkerThread::search_or_sleep` lingering after a loop share).
pub(super) fn machine_has_neighbour() -> bool {
    MACHINE.neighbour.load(Relaxed)
}

/// Set the process's verdict, for tests of what depends on it.
#[cfg(test)]
pub(super) fn set_machine_has_neighbour(neighbour: bool) {
    MACHINE.neighbour.store(neighbour, Relaxed);
}

/// Milliseconds since the first call in the process (a clock that fits an
/// atomic).
fn now_ms() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Spin in place for `pause`: by the clock, not by a count of pause
/// instructions (one takes 25 ns on some cores and 1 ns on others).
fn spin(pause: Duration) {
    let until = Instant::now() + pause;
    while Instant::now() < until {
        for _ in 0..16 {
            std::hint::spin_loop();
        }
    }
}

/// Yield, and say whom the yield met if it waited (`None`: it returned
/// at once). The process clock is read only to classify the wait (given
/// the other cores), so that a search round's yield on an idle machine
/// costs no more than the yield; unclassified, a yield that waited met
/// `Unknown`.
fn timed_yield(classify_with_other_cores: Option<u32>) -> Option<Met> {
    let cpu_before = classify_with_other_cores.and_then(|cores| Some((process_cpu_time()?, cores)));
    let start = Instant::now();
    thread::yield_now();
    let waited = start.elapsed();
    if waited <= YIELD_WAITED {
        return None;
    }
    let used = cpu_before
        .and_then(|(before, cores)| Some((process_cpu_time()?.saturating_sub(before), cores)));
    Some(match used {
        Some((used, other_cores)) => classify_wait(used, waited, other_cores),
        None => Met::Unknown,
    })
}

/// Whom a yield that waited `waited` met, given that the process used
/// `used` of CPU meanwhile and has `other_cores` cores besides this one.
/// A quarter of the wait is left to spare either way, for the clocks'
/// skew and our own thread's time around the yield:
///
/// * more than the other cores could give means the process also ran on
///   this core: our own threads;
/// * less than a quarter of the wait means no thread of ours held this
///   core for the wait: a neighbour did;
/// * in between, our threads may have run on the other cores while a
///   neighbour held this one, or on this core while the others idled:
///   the wait does not tell.
fn classify_wait(used: Duration, waited: Duration, other_cores: u32) -> Met {
    if used > waited * other_cores + waited / 4 {
        Met::OwnThreads
    } else if used < waited / 4 {
        Met::Neighbour
    } else {
        Met::Unknown
    }
}

/// The cores the process may run on besides the calling thread's.
fn other_cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
        - 1
}

#[cfg(test)]
mod tests {
    use super::{Met, Unyielding, classify_wait, unyielding_pause};
    use std::time::Duration;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_wait_the_other_cores_cannot_explain_met_our_own_threads() {
        // Two cores, both running our threads for the 4 ms wait.
        assert_eq!(classify_wait(8 * MS, 4 * MS, 1), Met::OwnThreads);
        // One core ours for the whole wait, this one for half of it.
        assert_eq!(classify_wait(6 * MS, 4 * MS, 1), Met::OwnThreads);
    }

    #[test]
    fn a_wait_the_other_cores_explain_met_a_neighbour() {
        // Nothing of ours ran at all.
        assert_eq!(classify_wait(Duration::ZERO, 4 * MS, 1), Met::Neighbour);
        // One core: any CPU time of ours during the wait was on this core.
        assert_eq!(classify_wait(2 * MS, 4 * MS, 0), Met::OwnThreads);
        assert_eq!(classify_wait(Duration::ZERO, 4 * MS, 0), Met::Neighbour);
    }

    #[test]
    fn a_wait_either_could_explain_is_unknown() {
        // Our other worker ran on the other core while a busy loop held
        // this one, or ours ran here while the other core idled.
        assert_eq!(classify_wait(4 * MS, 4 * MS, 1), Met::Unknown);
        assert_eq!(classify_wait(2 * MS, 4 * MS, 1), Met::Unknown);
    }

    #[test]
    fn a_loaded_machine_naps_only_while_no_other_worker_is_active() {
        assert_eq!(unyielding_pause(true, || true), Unyielding::Spin);
        assert_eq!(unyielding_pause(true, || false), Unyielding::Nap);
    }

    #[test]
    fn yields_that_wait_for_our_own_threads_keep_spinning() {
        // The counters are not even read: no neighbour, no nap.
        assert_eq!(
            unyielding_pause(false, || unreachable!("read only beside a neighbour")),
            Unyielding::Spin
        );
    }
}
