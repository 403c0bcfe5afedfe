//! The process's CPU clock: the CPU time all of its threads have used.
//!
//! std has no such clock, so this reads `CLOCK_PROCESS_CPUTIME_ID`
//! through libc, on Unix and outside Miri (which does not model it). It is
//! a system call, not a vDSO read: about a microsecond, so callers read it
//! only where a microsecond is small (around a yield that already waited
//! for a time slice).

use std::time::Duration;

/// The CPU time the process's threads have used so far, or `None` where
/// the clock is not available (not Unix, Miri, or the call failed).
pub(crate) fn process_cpu_time() -> Option<Duration> {
    #[cfg(all(unix, not(miri)))]
    {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid, writable timespec for the call's
        // duration; the clock id is a constant the C library defines.
        let failed = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) } != 0;
        if failed {
            return None;
        }
        Some(Duration::new(now.tv_sec as u64, now.tv_nsec as u32))
    }
    #[cfg(not(all(unix, not(miri))))]
    None
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(all(unix, not(miri)))]
    fn the_clock_advances_while_a_thread_works() {
        use super::process_cpu_time;
        let start = process_cpu_time().expect("a process clock on Unix");
        // Other tests' threads count too, so this only asserts that the
        // clock moves, by a millisecond, within a generous deadline.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut x = 1u64;
        let mut now = start;
        while now - start < std::time::Duration::from_millis(1) {
            assert!(
                std::time::Instant::now() < deadline,
                "the clock did not move"
            );
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            let read = process_cpu_time().unwrap();
            assert!(read >= now, "the clock went back: {now:?} -> {read:?}");
            now = read;
        }
    }
}
