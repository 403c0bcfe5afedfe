//! Where a worker runs when it wakes: the CPU notes the workers of one
//! pool keep for each other, and the two ways a woken worker is kept off
//! a CPU another awake worker runs on (`platform/cpu_spread.rs`).
//!
//! - A waker that goes on running steers the sleeper before it wakes it
//!   (`steer`): the sleeper may run only outside the waker's CPU and the
//!   CPUs the awake workers noted. Left to the kernel, it was often
//!   queued behind its waker and ran only when the waker's time slice
//!   ended, milliseconds later, while another CPU idled.
//! - A pool's drop, which blocks until the workers have exited, gathers
//!   each onto its own CPU (`gather`), asleep or awake: that CPU frees up
//!   when the drop blocks.
//! - A pool's build on a machine where workers met a busy neighbour
//!   starts the new threads on the building thread's CPU
//!   (`StartingHere`), for the same reason: the builder soon blocks on
//!   the pool's first result, and a new thread placed on the other CPU
//!   waited there for the neighbour's time slice. Each new thread gives
//!   itself the builder's CPUs first thing, and once its start handler
//!   ran, moves off that CPU if a pool-mate noted it (`after_start`).
//! - A worker that wakes up gives itself back what a waker narrowed, then
//!   moves off its CPU if another awake worker noted it, and notes where
//!   it runs (`after_wake`).
//!
//! Invariants: a worker's note is `UNKNOWN` from before it blocks until
//! it runs again; a steered worker restores its allowed CPUs before it
//! looks for work, so no task runs under a narrowed set; a waker steers
//! only a worker it is waking (under that worker's sleep lock, while it
//! is blocked), once per wake; a gathered worker (told to exit: it runs
//! no task again) restores its CPUs when it wakes or, awake, before its
//! exit handler, after which nothing narrows it. All of it is a placement
//! hint, outside the protocol the loom models check.

use crate::platform::cpu_spread::{self, CpuSet};
use crate::platform::sync::Mutex;
use std::sync::atomic::AtomicI32;
use std::sync::atomic::Ordering::Relaxed;

/// One worker's placement state.
pub(super) struct WorkerPlacement {
    /// The CPU the worker woke up on last, `UNKNOWN` while it sleeps.
    /// Written by the worker, read by the others.
    cpu: AtomicI32,
    /// The worker's thread (`cpu_spread::thread_id`), noted before it
    /// blocks, for a waker to steer it.
    thread: AtomicI32,
    /// What a waker narrowed the worker's CPUs from, for the worker to
    /// restore once it runs.
    steered: Mutex<Option<Steered>>,
}

/// How a waker narrowed a worker's CPUs, and what they were before.
enum Steered {
    /// Off the CPUs of the waker and the awake workers (`steer`).
    Apart(CpuSet),
    /// Onto the CPU of a waker that joins the worker (`gather`): the
    /// worker stays there even if another awake worker shares it.
    Gathered(CpuSet),
    /// The worker has left its pool (`before_exit`): nothing narrows it
    /// again. A drop's `gather` of an awake worker races its exit (the
    /// worker may see the exit latch and pass `before_exit` before the
    /// drop gathers it), and a late gather would leave the exit handler
    /// on one CPU (seen under load).
    Exited,
}

impl WorkerPlacement {
    pub(super) fn new() -> Self {
        WorkerPlacement {
            cpu: AtomicI32::new(cpu_spread::UNKNOWN),
            thread: AtomicI32::new(cpu_spread::UNKNOWN),
            steered: Mutex::new(None),
        }
    }

    /// The worker's thread started: a pool's drop may gather it even
    /// while it is awake.
    pub(super) fn note_thread(&self) {
        self.thread.store(cpu_spread::thread_id(), Relaxed);
    }

    /// The worker is about to block: it runs nowhere, and a waker may
    /// steer its thread.
    pub(super) fn before_block(&self) {
        self.cpu.store(cpu_spread::UNKNOWN, Relaxed);
        self.thread.store(cpu_spread::thread_id(), Relaxed);
    }

    /// A waker that goes on running is waking this worker (holding its
    /// sleep lock): keep it off the waker's CPU and the CPUs noted in
    /// `others` (the pool's other workers), when an allowed CPU is left.
    pub(super) fn steer<'a>(&self, others: impl Iterator<Item = &'a WorkerPlacement>) {
        let avoid =
            std::iter::once(cpu_spread::current_cpu()).chain(others.map(WorkerPlacement::noted));
        let mut steered = self.steered.lock();
        if matches!(*steered, Some(Steered::Exited)) {
            return;
        }
        if let Some(cpus) = cpu_spread::steer(self.thread.load(Relaxed), avoid) {
            *steered = Some(Steered::Apart(cpus));
        }
    }

    /// A caller about to block until this worker has exited (a pool's
    /// drop, which joins it) told it to exit: move it to the caller's CPU,
    /// which frees up as soon as the caller blocks. A blocked worker is
    /// queued there when woken; an awake one is migrated there at once.
    /// Left to the kernel, a worker often ran on the other CPU, behind
    /// another process's busy loop, and the join waited for that loop's
    /// time slice to end (about 4 ms here, against 10 to 30 us).
    pub(super) fn gather(&self) {
        let here = cpu_spread::current_cpu();
        let mut steered = self.steered.lock();
        // Woken by a steering waker but not running yet (behind a busy
        // loop, say): its own CPUs are those before that steer.
        let steered_from = match &*steered {
            Some(Steered::Apart(before) | Steered::Gathered(before)) => Some(before),
            Some(Steered::Exited) => return,
            None => None,
        };
        if let Some(own) = cpu_spread::steer_to(self.thread.load(Relaxed), here, steered_from) {
            *steered = Some(Steered::Gathered(own));
        }
    }

    /// The worker woke up: allow it what a waker narrowed; unless it was
    /// gathered, and if one of `others` noted the CPU it runs on, move to
    /// an allowed CPU none of them noted; then note where it runs.
    pub(super) fn after_wake<'a>(&self, others: impl Iterator<Item = &'a WorkerPlacement> + Clone) {
        // Held through the move, so that a drop's `gather` never reads the
        // CPUs `move_off` narrowed for a moment as the worker's own.
        let mut steered = self.steered.lock();
        let gathered = match steered.take() {
            Some(Steered::Apart(cpus)) => {
                cpu_spread::restore(cpus);
                false
            }
            Some(Steered::Gathered(cpus)) => {
                cpu_spread::restore(cpus);
                true
            }
            // Not after an exit; kept, and nothing moved, if it were.
            Some(Steered::Exited) => {
                *steered = Some(Steered::Exited);
                true
            }
            None => false,
        };
        let noted = || others.clone().map(WorkerPlacement::noted);
        let mut here = cpu_spread::current_cpu();
        if !gathered && cpu_spread::crowded(here, noted()) {
            here = cpu_spread::move_off(std::iter::once(here).chain(noted())).unwrap_or(here);
        }
        self.cpu.store(here, Relaxed);
    }

    /// The worker started on its builder's CPU (`StartingHere`), as did
    /// its pool-mates: as after a wake, it moves off if one of `others`
    /// noted that CPU, and notes where it runs. Left there, the pool's
    /// workers shared one CPU until the kernel balanced them (the soak's
    /// loaded rounds: 4.2 - 4.4 s, against 3.5 - 3.8 s moving).
    pub(super) fn after_start<'a>(
        &self,
        others: impl Iterator<Item = &'a WorkerPlacement> + Clone,
    ) {
        self.after_wake(others);
    }

    /// The worker leaves its pool: allow it what a drop's `gather`
    /// narrowed, before its exit handler runs, and let nothing narrow it
    /// from now on.
    pub(super) fn before_exit(&self) {
        let mut steered = self.steered.lock();
        if let Some(Steered::Apart(cpus) | Steered::Gathered(cpus)) = steered.take() {
            cpu_spread::restore(cpus);
        }
        *steered = Some(Steered::Exited);
    }

    /// The CPU the worker noted (`UNKNOWN` while it sleeps).
    fn noted(&self) -> i32 {
        self.cpu.load(Relaxed)
    }
}

/// A pool's threads being started on the calling thread's CPU: the caller
/// is narrowed to it until this is dropped, and each thread it creates
/// meanwhile inherits that one CPU and is queued there, to run as soon as
/// the caller blocks (on the pool's first result, typically), rather than
/// behind a busy neighbour on another CPU for its time slice. Each new
/// thread allows itself `own_cpus` before anything else runs on it.
pub(crate) struct StartingHere {
    own: CpuSet,
}

impl StartingHere {
    /// Start narrowing, on a machine where workers met a busy neighbour
    /// (an idle machine runs a new thread at once wherever the kernel puts
    /// it, and a thread queued behind its creator would wait); `None`, and
    /// nothing changed, otherwise or when the caller may run on one CPU
    /// only.
    pub(crate) fn begin() -> Option<StartingHere> {
        if !super::pause::machine_has_neighbour() {
            return None;
        }
        let own = cpu_spread::steer_to(cpu_spread::thread_id(), cpu_spread::current_cpu(), None)?;
        Some(StartingHere { own })
    }

    /// The CPUs the caller had, for each new thread to restore.
    pub(crate) fn own_cpus(&self) -> ThreadCpus {
        ThreadCpus(self.own)
    }
}

/// The CPUs a thread started by a `StartingHere` allows itself first.
#[derive(Clone, Copy)]
pub(crate) struct ThreadCpus(CpuSet);

impl ThreadCpus {
    /// Allow the calling thread these CPUs.
    pub(crate) fn restore(self) {
        cpu_spread::restore(self.0);
    }
}

impl Drop for StartingHere {
    fn drop(&mut self) {
        cpu_spread::restore(self.own);
    }
}

#[cfg(all(test, target_os = "linux", not(miri)))]
mod tests {
    use super::{StartingHere, WorkerPlacement};
    use crate::platform::cpu_spread::{allowed_cpus, narrowable_cpus};
    use crate::worker::sleep::pause::set_machine_has_neighbour;

    /// With a busy neighbour noted, the builder is narrowed to its CPU
    /// while it starts threads, which inherit that CPU, and has its CPUs
    /// back after. Idle, nothing is narrowed at all. (That the workers
    /// restore theirs: `pool/start_placement_tests.rs`.)
    #[test]
    fn beside_a_neighbour_new_threads_start_on_the_builders_cpu() {
        let Some(own) = narrowable_cpus() else {
            return;
        };
        set_machine_has_neighbour(false);
        assert!(
            StartingHere::begin().is_none(),
            "narrowed on an idle machine"
        );
        assert_eq!(allowed_cpus(0), own);

        set_machine_has_neighbour(true);
        let starting = StartingHere::begin().expect("narrowed beside a neighbour");
        assert_eq!(
            allowed_cpus(0).len(),
            1,
            "the builder is narrowed to one CPU"
        );
        let inherited = std::thread::spawn(|| allowed_cpus(0)).join().unwrap();
        assert_eq!(inherited, allowed_cpus(0), "a new thread inherits it");
        drop(starting);
        assert_eq!(allowed_cpus(0), own, "the builder has its CPUs back");

        set_machine_has_neighbour(false);
    }

    /// A drop's gather that comes after the worker left its pool (it saw
    /// the exit latch before the drop gathered it) narrows nothing: the
    /// exit handler runs with every CPU. Without the exited state the
    /// gather narrowed it (a lifecycle test failed so under load).
    #[test]
    fn a_gather_after_the_exit_narrows_nothing() {
        let Some(own) = narrowable_cpus() else {
            return;
        };
        let seen = std::thread::spawn(|| {
            let placement = WorkerPlacement::new();
            placement.note_thread();
            placement.before_exit();
            placement.gather();
            allowed_cpus(0)
        })
        .join()
        .unwrap();
        assert_eq!(seen, own, "narrowed after its exit");
        // Before the exit, the same gather does narrow (the test's check).
        let narrowed = std::thread::spawn(|| {
            let placement = WorkerPlacement::new();
            placement.note_thread();
            placement.gather();
            let narrowed = allowed_cpus(0);
            placement.before_exit();
            (narrowed, allowed_cpus(0))
        })
        .join()
        .unwrap();
        assert_eq!(narrowed.0.len(), 1, "a gather narrows to one CPU");
        assert_eq!(narrowed.1, own, "before_exit restores");
    }
}
