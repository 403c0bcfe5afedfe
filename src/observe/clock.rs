//! The trace clock: the cheapest tick count there is.
//!
//! `Instant::now` costs about 33 ns a reading on these virtual machines (a
//! vDSO call and a conversion). The time-stamp counter costs 11.5 ns a
//! reading on the Zen 4 machines here and 23 ns on the Xeons, still as
//! much as a whole fork-join task or more: so a worker reads it only as
//! often as its tasks are long (`stamp.rs`). It needs no conversion on the
//! hot path: anchors keep raw ticks, and `collect` turns them into
//! nanoseconds since the pool was built, with a rate measured over the
//! pool's whole life (`Instant` at build and at collect, against the ticks
//! at the same two moments).
//!
//! Invariants: `ticks` never goes backwards on one thread; `Calibration`
//! maps the pool's build to 0 and is monotonic. Where the counter is not
//! available (other targets, Miri) the ticks are `Instant` nanoseconds and
//! the rate is one.

use std::time::{Duration, Instant};

/// Where a pool's trace times start.
pub(crate) struct TraceClock {
    epoch: Instant,
    epoch_ticks: u64,
}

/// The shortest span a rate is measured over: the reading pairs' own
/// jitter (tens of nanoseconds) stays below a part in 10^4.
const CALIBRATION_SPAN: Duration = Duration::from_millis(2);

impl TraceClock {
    pub(crate) fn new() -> Self {
        let epoch = Instant::now();
        TraceClock {
            epoch,
            epoch_ticks: raw_ticks(epoch),
        }
    }

    /// Now, in ticks: what a trace record keeps.
    #[inline]
    pub(crate) fn ticks(&self) -> u64 {
        raw_ticks(self.epoch)
    }

    /// The conversion from ticks to nanoseconds since the build, measured
    /// now (after at least `CALIBRATION_SPAN` since the build: a young pool
    /// waits out the rest once).
    pub(crate) fn calibrate(&self) -> Calibration {
        let (mut now, mut now_ticks) = (Instant::now(), self.ticks());
        while now.duration_since(self.epoch) < CALIBRATION_SPAN {
            std::thread::yield_now();
            (now, now_ticks) = (Instant::now(), self.ticks());
        }
        let span_ns = now.duration_since(self.epoch).as_nanos() as f64;
        let span_ticks = now_ticks.saturating_sub(self.epoch_ticks).max(1) as f64;
        Calibration {
            epoch_ticks: self.epoch_ticks,
            ns_per_tick: span_ns / span_ticks,
        }
    }
}

/// Ticks to nanoseconds since the pool's build.
#[derive(Clone, Copy)]
pub(crate) struct Calibration {
    epoch_ticks: u64,
    ns_per_tick: f64,
}

impl Calibration {
    pub(crate) fn ns(&self, ticks: u64) -> u64 {
        (ticks.saturating_sub(self.epoch_ticks) as f64 * self.ns_per_tick) as u64
    }
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline]
fn raw_ticks(_epoch: Instant) -> u64 {
    // SAFETY: `rdtsc` has no preconditions; every x86-64 processor has it.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(all(target_arch = "x86_64", not(miri))))]
#[inline]
fn raw_ticks(epoch: Instant) -> u64 {
    epoch.elapsed().as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_convert_to_the_elapsed_time() {
        let clock = TraceClock::new();
        let before = clock.ticks();
        std::thread::sleep(Duration::from_millis(20));
        let after = clock.ticks();
        let cal = clock.calibrate();
        let (a, b) = (cal.ns(before), cal.ns(after));
        assert!(b > a, "{a} {b}");
        // Slept at least 20 ms; a busy machine may add, never take away.
        assert!(b - a >= 19_000_000, "{} ns", b - a);
        assert!(cal.ns(clock.epoch_ticks) == 0);
    }
}
