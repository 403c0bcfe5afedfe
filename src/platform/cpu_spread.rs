//! Moving a woken worker off a CPU that another worker of its pool is
//! running on, when another allowed CPU is free of them.
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
//! Invariants: a thread's allowed CPUs are narrowed only between the two
//! calls of `move_off` and always restored to what they were; a thread
//! allowed a single CPU (a pinned worker, or one the user pinned in a start
//! handler) is never moved; outside Linux, and under Miri, nothing moves
//! and every CPU is `UNKNOWN`. (A change another thread makes to a
//! worker's allowed CPUs between the two calls is undone by the second.)

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
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: a zeroed cpu_set_t is an empty set.
        let mut allowed: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `allowed` is a writable set of `size` bytes; 0 is this thread.
        if unsafe { libc::sched_getaffinity(0, size, &mut allowed) } != 0 {
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
        if unsafe { libc::CPU_COUNT(&elsewhere) } == 0 {
            return None;
        }
        // SAFETY: both sets are initialised and `size` bytes long. The
        // first call migrates us into `elsewhere` before it returns; the
        // second gives back what we had.
        unsafe {
            if libc::sched_setaffinity(0, size, &elsewhere) != 0 {
                return None;
            }
            let landed = current_cpu();
            libc::sched_setaffinity(0, size, &allowed);
            Some(landed)
        }
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    {
        let _ = avoid.into_iter();
        None
    }
}

#[cfg(test)]
mod tests {
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
