//! Keeping a woken worker off a CPU that another worker of its pool is
//! running on, when another allowed CPU is free of them: steered there by
//! its waker before it wakes, or moving itself once it runs; and the
//! opposite for a dropped pool's workers, gathered onto the dropping
//! thread's CPU.
//!
//! Linux places a woken thread by its waker: a worker that wakes the second
//! worker of a two-worker pool while the calling thread still holds the
//! other CPU often gets that worker queued on its own CPU. Once the caller
//! blocks, the other CPU idles, but the kernel's idle balancing does not
//! always pull the second worker over within a run of a few milliseconds:
//! both workers then take turns on one CPU. Measured on a two-vCPU
//! machine: a `join` of two 500 us halves after the pool slept took 1.04
//! to 1.11 ms (the halves one after the other), and of forty runs of a
//! 1024 x 1024 prebuilt wavefront, 1 to 9 had both workers on one CPU
//! throughout (11 ms against 5.7). rayon's workers fare the same (1.02 to
//! 1.05 ms for the join); the library can act on it because it knows
//! which of its threads are working.
//!
//! So each worker notes the CPU it woke up on (`current_cpu`); a worker
//! that wakes up on a CPU another awake worker of its pool noted
//! (`crowded`) narrows its own allowed CPUs to the others and widens them
//! again at once (`move_off`): the kernel migrates it on the first call,
//! and from then on it and the load balancer may place it anywhere it was
//! allowed before. A move costs about 26 us here (the kernel migrates
//! through its stopper thread and an inter-processor interrupt); the join
//! then takes 0.58 to 0.61 ms, and 2 wavefront runs in 360 stayed on one
//! CPU (49 in 480 before). Waiting for the sharing to last before moving,
//! so that short bursts would not pay, kept a third of the wavefront's
//! slow runs: a worker that shares a CPU seldom gets to look again. Beside
//! busy loops of another process the move helps as much (the join: 0.53
//! ms in ten runs out of ten, against 1.02 ms in four of ten without it),
//! so it does not depend on the machine's load.
//!
//! The move comes only once the worker runs, and that can be late: a
//! worker that pushes work and wakes a sleeper goes on running, and the
//! sleeper, queued on the pusher's CPU, waits for the pusher's time slice
//! to end (2 to 4 ms here) while the other CPU idles. Traced on a
//! two-vCPU machine, two pools taking turns at `fib(30)` (about 4.3 ms):
//! the second worker of a woken pool joined 2 to 4 ms late in the runs
//! traced, and a run took 5.0 to 5.8 ms. So a waker that goes on running
//! (a push to its own deque, a searcher that found work) narrows the
//! sleeper's allowed CPUs to those outside its own and the awake
//! workers' before it wakes it (`steer`, from
//! `worker/sleep/placement.rs`), and the sleeper, first thing, allows
//! itself what it had (`restore`). The runs then take 4.2 to 4.3 ms, as a
//! single pool's do. A steer costs the waker about 1.7 us here (reading
//! and setting a blocked thread's CPUs), the restore 1 us: beside a
//! wake-up, which takes tens of microseconds to run the sleeper, and only
//! when a sleeper is woken at all. A waker about to block (a caller
//! outside the pool waiting for its result) leaves the placement to the
//! kernel: its own CPU frees up at once, and waking an idle vCPU is
//! slower (the wake-up latency line went from 0.8 to 2.9 of rayon's when
//! every wake was steered).
//!
//! The one waker that blocks right after, a pool's drop joining its
//! workers, does the opposite (`steer_to`): it narrows each worker to its
//! own CPU, which frees up when it blocks. A pool's build on a busy
//! machine does the same for the threads it starts, by narrowing itself
//! while it starts them (a new thread inherits its creator's CPUs). On
//! two vCPUs beside two busy loops, a drop of two workers took 12 to 26
//! us when both exited there, and 3.9 ms whenever one sat on the other
//! CPU, behind the busy loop's time slice.
//!
//! Invariants: a thread's allowed CPUs are narrowed only between the two
//! calls of `move_off`, or from a waker's `steer` (or a drop's
//! `steer_to`) to the worker's `restore`, which it calls before it looks
//! for work or runs its exit handler, or (a pool's build, `steer_to` on
//! itself) while the builder starts threads, each of which restores them
//! before its start handler; they are always restored to what they were;
//! a thread allowed a single CPU (a pinned worker, or one the user pinned
//! in a start handler) is never narrowed; outside Linux, and under Miri,
//! nothing moves and every CPU is `UNKNOWN`. (A change another thread
//! makes to a worker's allowed CPUs while they are narrowed is undone by
//! the restoring call.)

/// A CPU no worker runs on: asleep, or where the platform cannot tell.
pub(crate) const UNKNOWN: i32 = -1;

/// The CPU the calling thread runs on now, or `UNKNOWN`.
#[inline]
pub(crate) fn current_cpu() -> i32 {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        // SAFETY: no arguments; it returns -1 on failure, which is UNKNOWN.
        unsafe { libc::sched_getcpu() }
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    UNKNOWN
}

/// Whether a worker on CPU `here` shares it with another awake worker,
/// given the CPUs the others last noted (`UNKNOWN` for a sleeper).
pub(crate) fn crowded(here: i32, others: impl IntoIterator<Item = i32>) -> bool {
    here != UNKNOWN && others.into_iter().any(|cpu| cpu == here)
}

/// Move the calling thread to one of its allowed CPUs outside `avoid`,
/// then allow it every CPU it was allowed before. Returns the CPU it moved
/// to (read while only the others were allowed), or `None` when no allowed
/// CPU is left outside `avoid` (a pinned thread, or every CPU taken) or
/// the system refused.
pub(crate) fn move_off(avoid: impl IntoIterator<Item = i32>) -> Option<i32> {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        // 0 is this thread.
        let (allowed, elsewhere) = allowed_outside(0, avoid)?;
        // The first call migrates us into `elsewhere` before it returns;
        // the second gives back what we had.
        if !set_allowed(0, &elsewhere) {
            return None;
        }
        let landed = current_cpu();
        set_allowed(0, &allowed);
        Some(landed)
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    {
        let _ = avoid.into_iter();
        None
    }
}

/// Thread `thread`'s allowed CPUs (0: the caller), and those of them
/// outside `avoid`; `None` if none is left outside or the system refused.
#[cfg(all(target_os = "linux", not(miri)))]
fn allowed_outside(
    thread: i32,
    avoid: impl IntoIterator<Item = i32>,
) -> Option<(libc::cpu_set_t, libc::cpu_set_t)> {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: a zeroed cpu_set_t is an empty set.
    let mut allowed: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `allowed` is a writable set of `size` bytes.
    if unsafe { libc::sched_getaffinity(thread, size, &mut allowed) } != 0 {
        return None;
    }
    let mut elsewhere = allowed;
    for cpu in avoid {
        if let Ok(cpu) = usize::try_from(cpu)
            && cpu < libc::CPU_SETSIZE as usize
        {
            // SAFETY: `cpu` is below CPU_SETSIZE, within the set.
            unsafe { libc::CPU_CLR(cpu, &mut elsewhere) };
        }
    }
    // SAFETY: reads the initialised set only.
    (unsafe { libc::CPU_COUNT(&elsewhere) } > 0).then_some((allowed, elsewhere))
}

/// Allow thread `thread` (0: the caller) the CPUs in `set`; false if the
/// system refused.
#[cfg(all(target_os = "linux", not(miri)))]
fn set_allowed(thread: i32, set: &libc::cpu_set_t) -> bool {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: the set is initialised and `size` bytes long.
    unsafe { libc::sched_setaffinity(thread, size, set) == 0 }
}

/// A thread's allowed CPUs, as `steer` found them, for `restore`.
#[derive(Clone, Copy)]
pub(crate) struct CpuSet {
    #[cfg(all(target_os = "linux", not(miri)))]
    set: libc::cpu_set_t,
}

/// The calling thread's id for `steer`, or `UNKNOWN`.
pub(crate) fn thread_id() -> i32 {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        // SAFETY: no arguments; it cannot fail.
        unsafe { libc::gettid() }
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    UNKNOWN
}

/// Narrow the allowed CPUs of the blocked thread `thread` (a `thread_id`)
/// to those outside `avoid`, before it is woken, so that the kernel places
/// it there; returns what it was allowed, for the thread to `restore` once
/// it runs. `None`, and nothing changed, when no allowed CPU is left
/// outside `avoid` or none of them is in it (a pinned thread, every CPU
/// taken, or nothing to avoid), or the system refused.
pub(crate) fn steer(thread: i32, avoid: impl IntoIterator<Item = i32>) -> Option<CpuSet> {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        if thread == UNKNOWN {
            return None;
        }
        let (allowed, elsewhere) = allowed_outside(thread, avoid)?;
        // SAFETY: both sets are initialised.
        if unsafe { libc::CPU_COUNT(&elsewhere) == libc::CPU_COUNT(&allowed) } {
            // Nothing it may run on is avoided.
            return None;
        }
        set_allowed(thread, &elsewhere).then_some(CpuSet { set: allowed })
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    {
        let _ = (thread, avoid.into_iter());
        None
    }
}

/// Narrow the allowed CPUs of thread `thread` (a `thread_id`) to the
/// single CPU `cpu`: a blocked thread is queued there when woken, a
/// runnable one is migrated there at once. `steered_from` is what an
/// earlier `steer` found, if the thread has not restored it yet: the
/// thread's own CPUs. Returns those CPUs, for the thread to `restore`.
/// `None`, and nothing changed, when `cpu` is `UNKNOWN` or not among the
/// thread's own CPUs, when it may run on one CPU only (a pinned thread),
/// or when the system refused.
pub(crate) fn steer_to(thread: i32, cpu: i32, steered_from: Option<&CpuSet>) -> Option<CpuSet> {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        if thread == UNKNOWN {
            return None;
        }
        let cpu = usize::try_from(cpu).ok()?;
        if cpu >= libc::CPU_SETSIZE as usize {
            return None;
        }
        let own = match steered_from {
            Some(before) => before.set,
            None => {
                let size = std::mem::size_of::<libc::cpu_set_t>();
                // SAFETY: a zeroed cpu_set_t is an empty set.
                let mut allowed: libc::cpu_set_t = unsafe { std::mem::zeroed() };
                // SAFETY: `allowed` is a writable set of `size` bytes.
                if unsafe { libc::sched_getaffinity(thread, size, &mut allowed) } != 0 {
                    return None;
                }
                allowed
            }
        };
        // SAFETY: `cpu` is below CPU_SETSIZE; the set is initialised.
        if !unsafe { libc::CPU_ISSET(cpu, &own) } || unsafe { libc::CPU_COUNT(&own) } < 2 {
            return None;
        }
        // SAFETY: a zeroed cpu_set_t is an empty set.
        let mut only: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `cpu` is below CPU_SETSIZE, within the set.
        unsafe { libc::CPU_SET(cpu, &mut only) };
        set_allowed(thread, &only).then_some(CpuSet { set: own })
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    {
        let _ = (thread, cpu, steered_from);
        None
    }
}

/// Allow the calling thread the CPUs `steer` narrowed it from.
pub(crate) fn restore(cpus: CpuSet) {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        // 0 is this thread. A refusal leaves the narrowed set, which still
        // holds the CPU we run on.
        set_allowed(0, &cpus.set);
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    let _ = cpus;
}

/// The allowed CPUs of thread `thread` (0: the caller), for tests.
#[cfg(all(test, target_os = "linux", not(miri)))]
pub(crate) fn allowed_cpus(thread: i32) -> Vec<usize> {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: a zeroed cpu_set_t is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a writable set of `size` bytes.
    let got = unsafe { libc::sched_getaffinity(thread, size, &mut set) };
    assert_eq!(got, 0, "sched_getaffinity");
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, within the set.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// The calling thread's allowed CPUs, if there are two or more: a test of
/// narrowing has nothing to see on one CPU, and skips.
#[cfg(all(test, target_os = "linux", not(miri)))]
pub(crate) fn narrowable_cpus() -> Option<Vec<usize>> {
    let own = allowed_cpus(0);
    (own.len() >= 2).then_some(own)
}

#[cfg(test)]
mod tests {
    #[cfg(all(target_os = "linux", not(miri)))]
    use super::allowed_cpus;
    use super::{UNKNOWN, crowded};

    #[test]
    fn crowded_only_by_an_awake_worker_on_the_same_cpu() {
        assert!(crowded(1, [UNKNOWN, 1]));
        assert!(!crowded(1, [UNKNOWN, 0, 2]));
        assert!(!crowded(1, []));
        // A worker that cannot tell its CPU is never crowded, not even by
        // others that cannot tell theirs.
        assert!(!crowded(UNKNOWN, [UNKNOWN]));
    }

    /// A thread blocked until `steer_while_blocked` returns, which gets its
    /// thread id: the thread then restores what that returned and answers
    /// with its allowed CPUs.
    #[cfg(all(target_os = "linux", not(miri)))]
    fn blocked_thread(
        steer_while_blocked: impl FnOnce(i32) -> Option<super::CpuSet>,
    ) -> Vec<usize> {
        use super::{restore, thread_id};
        use std::sync::mpsc::channel;
        let (to_main, from_thread) = channel();
        let (to_thread, from_main) = channel::<Option<super::CpuSet>>();
        let sleeper = std::thread::spawn(move || {
            to_main.send(thread_id()).unwrap();
            // Blocked here while the test steers it.
            if let Some(cpus) = from_main.recv().unwrap() {
                restore(cpus);
            }
            allowed_cpus(0)
        });
        let thread = from_thread.recv().unwrap();
        to_thread.send(steer_while_blocked(thread)).unwrap();
        sleeper.join().unwrap()
    }

    /// A blocked thread steered off a CPU is allowed every other CPU it
    /// had, and gets them all back when it restores; a steer with nothing
    /// left, or nothing to avoid, changes nothing.
    #[test]
    #[cfg(all(target_os = "linux", not(miri)))]
    fn steer_narrows_a_blocked_thread_and_restore_gives_its_cpus_back() {
        use super::steer;
        let before = allowed_cpus(0);
        let after = blocked_thread(|thread| {
            assert_eq!(allowed_cpus(thread), before);
            let steered = steer(thread, [before[0] as i32]);
            assert_eq!(steered.is_some(), before.len() > 1);
            if steered.is_some() {
                let narrowed = allowed_cpus(thread);
                assert!(!narrowed.contains(&before[0]));
                assert_eq!(narrowed, before[1..]);
            }
            let all: Vec<i32> = before.iter().map(|&cpu| cpu as i32).collect();
            assert!(steer(thread, all).is_none(), "no CPU left: no steer");
            assert!(steer(thread, [UNKNOWN]).is_none(), "nothing avoided");
            steered
        });
        assert_eq!(after, before, "restored");
    }

    /// A blocked thread steered to one CPU is allowed that CPU only and
    /// gets its own CPUs back when it restores, even when an earlier steer
    /// narrowed them first; a CPU it may not use, or a thread allowed one
    /// CPU, is left alone.
    #[test]
    #[cfg(all(target_os = "linux", not(miri)))]
    fn steer_to_narrows_to_one_cpu_and_restore_gives_its_own_back() {
        use super::{steer, steer_to};
        let own = allowed_cpus(0);
        let last = *own.last().unwrap() as i32;
        let after = blocked_thread(|thread| {
            assert_eq!(allowed_cpus(thread), own);
            assert!(steer_to(thread, UNKNOWN, None).is_none());
            assert!(steer_to(thread, libc::CPU_SETSIZE, None).is_none());
            // Narrowed first off its first CPU, then to its last: what it
            // restores is what it had before either.
            let apart = steer(thread, [own[0] as i32]);
            let gathered = steer_to(thread, last, apart.as_ref());
            assert_eq!(gathered.is_some(), own.len() > 1);
            if gathered.is_some() {
                assert_eq!(allowed_cpus(thread), [last as usize]);
                // Now allowed one CPU: a further steer to it changes nothing.
                assert!(steer_to(thread, last, None).is_none());
            }
            gathered
        });
        assert_eq!(after, own, "restored");
    }

    #[test]
    #[cfg(all(target_os = "linux", not(miri)))]
    fn move_off_lands_outside_the_avoided_cpu_and_restores_the_mask() {
        use super::{current_cpu, move_off};
        let size = std::mem::size_of::<libc::cpu_set_t>();
        let allowed_now = move || {
            // SAFETY: as in `move_off`.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            assert_eq!(unsafe { libc::sched_getaffinity(0, size, &mut set) }, 0);
            (0..libc::CPU_SETSIZE as usize)
                // SAFETY: `cpu` is below CPU_SETSIZE, within the set.
                .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
                .collect::<Vec<_>>()
        };
        std::thread::spawn(move || {
            let before = allowed_now();
            let here = current_cpu();
            assert!(here >= 0, "Linux tells the CPU");
            let landed = move_off([here]);
            // Only a process allowed a single CPU cannot move.
            assert_eq!(landed.is_some(), before.len() > 1);
            if let Some(landed) = landed {
                // Read while `here` was not allowed: the narrowing call
                // migrates before it returns.
                assert_ne!(landed, here);
                assert!(before.contains(&(landed as usize)));
            }
            assert_eq!(allowed_now(), before, "the allowed CPUs come back");
            // Avoiding every allowed CPU moves nothing and changes nothing.
            let all: Vec<i32> = before.iter().map(|&cpu| cpu as i32).collect();
            assert_eq!(move_off(all), None);
            assert_eq!(allowed_now(), before);
        })
        .join()
        .unwrap();
    }
}
