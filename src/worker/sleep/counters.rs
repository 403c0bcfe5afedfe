//! The packed counter word of the sleep protocol.
//!
//! One `AtomicU64` holds three numbers so that each transition is a single
//! atomic operation:
//!
//! ```text
//!   bits 63..32  jobs event counter (JEC)
//!   bits 31..16  inactive threads (idle + sleeping)
//!   bits 15..0   sleeping threads
//! ```
//!
//! Idle-but-awake threads are `inactive - sleeping`. The JEC's low bit says
//! whether new work was posted since the last thread got sleepy: even means
//! "sleepy" (nothing new), odd means "active" (something new). Posting work
//! makes it odd; getting sleepy makes it even and remembers the value. A
//! thread about to sleep compares the JEC with what it remembered: any change
//! means it may have missed work. The counter may wrap; the sleep module's
//! final injected-work check covers that case (see `sleep/mod.rs`).

use crate::platform::sync::{AtomicU64, Ordering};

const THREAD_BITS: u32 = 16;
const SLEEPING_SHIFT: u32 = 0;
const INACTIVE_SHIFT: u32 = THREAD_BITS;
const JEC_SHIFT: u32 = 2 * THREAD_BITS;
const THREAD_MASK: u64 = (1 << THREAD_BITS) - 1;
const ONE_SLEEPING: u64 = 1 << SLEEPING_SHIFT;
const ONE_INACTIVE: u64 = 1 << INACTIVE_SHIFT;
const ONE_JEC: u64 = 1 << JEC_SHIFT;

/// The most worker threads the packed word can count.
pub(crate) const MAX_THREADS: usize = THREAD_MASK as usize;

/// A value of the jobs event counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct JobsEventCounter(u64);

impl JobsEventCounter {
    /// A value no real counter compares equal to while a thread is awake.
    pub(crate) const DUMMY: JobsEventCounter = JobsEventCounter(u64::MAX);

    /// Even: no work posted since the last thread got sleepy.
    #[inline]
    pub(crate) fn is_sleepy(self) -> bool {
        self.0 & 1 == 0
    }

    /// Odd: work was posted since the last thread got sleepy.
    #[inline]
    pub(crate) fn is_active(self) -> bool {
        !self.is_sleepy()
    }
}

/// A snapshot of the counter word.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counters(u64);

impl Counters {
    #[inline]
    pub(crate) fn jobs_counter(self) -> JobsEventCounter {
        JobsEventCounter(self.0 >> JEC_SHIFT)
    }

    #[inline]
    pub(crate) fn inactive_threads(self) -> usize {
        ((self.0 >> INACTIVE_SHIFT) & THREAD_MASK) as usize
    }

    #[inline]
    pub(crate) fn sleeping_threads(self) -> usize {
        ((self.0 >> SLEEPING_SHIFT) & THREAD_MASK) as usize
    }

    #[inline]
    pub(crate) fn awake_but_idle_threads(self) -> usize {
        debug_assert!(self.sleeping_threads() <= self.inactive_threads());
        self.inactive_threads() - self.sleeping_threads()
    }
}

/// The shared counter word.
pub(crate) struct AtomicCounters {
    word: AtomicU64,
}

impl AtomicCounters {
    pub(crate) fn new() -> Self {
        AtomicCounters {
            word: AtomicU64::new(0),
        }
    }

    /// SeqCst: this load takes part in the fence argument of the sleep
    /// protocol (a sleeper's increment must be visible to a poster's read).
    #[inline]
    pub(crate) fn load(&self) -> Counters {
        Counters(self.word.load(Ordering::SeqCst))
    }

    /// A thread starts searching for work.
    pub(crate) fn add_inactive_thread(&self) {
        self.word.fetch_add(ONE_INACTIVE, Ordering::SeqCst);
    }

    /// A thread found work and stops being inactive. Returns how many
    /// sleepers it should wake to replace it as a searcher: while threads are
    /// sleeping, the one that leaves the idle state wakes up to two of them,
    /// so work that keeps arriving spreads over the pool.
    pub(crate) fn sub_inactive_thread(&self) -> usize {
        let old = Counters(self.word.fetch_sub(ONE_INACTIVE, Ordering::SeqCst));
        debug_assert!(old.inactive_threads() > 0);
        debug_assert!(old.sleeping_threads() <= old.inactive_threads());
        old.sleeping_threads().min(2)
    }

    /// A woken thread is no longer sleeping (called by the waker).
    pub(crate) fn sub_sleeping_thread(&self) {
        let old = Counters(self.word.fetch_sub(ONE_SLEEPING, Ordering::SeqCst));
        debug_assert!(old.sleeping_threads() > 0);
    }

    /// Register as sleeping, but only if the word is still `seen` (so the
    /// JEC has not moved since the caller compared it).
    pub(crate) fn try_add_sleeping_thread(&self, seen: Counters) -> bool {
        debug_assert!(seen.inactive_threads() > 0);
        debug_assert!(seen.sleeping_threads() < MAX_THREADS);
        self.word
            .compare_exchange(
                seen.0,
                seen.0 + ONE_SLEEPING,
                Ordering::SeqCst,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// Add one to the JEC if `condition` holds for its current value;
    /// return the word as it is afterwards.
    #[inline]
    pub(crate) fn increment_jobs_event_counter_if(
        &self,
        condition: fn(JobsEventCounter) -> bool,
    ) -> Counters {
        loop {
            let old = self.load();
            if !condition(old.jobs_counter()) {
                return old;
            }
            // Wrapping: the JEC is the top 32 bits, so overflow drops off
            // the end of the word and the counter rolls over to zero.
            let new = Counters(old.0.wrapping_add(ONE_JEC));
            if self
                .word
                .compare_exchange(old.0, new.0, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
            {
                return new;
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn fields_do_not_bleed_into_each_other() {
        let c = AtomicCounters::new();
        c.add_inactive_thread();
        c.add_inactive_thread();
        assert!(c.try_add_sleeping_thread(c.load()));
        let now = c.load();
        assert_eq!(now.inactive_threads(), 2);
        assert_eq!(now.sleeping_threads(), 1);
        assert_eq!(now.awake_but_idle_threads(), 1);
        let after = c.increment_jobs_event_counter_if(JobsEventCounter::is_sleepy);
        assert!(after.jobs_counter().is_active());
        assert_eq!(after.sleeping_threads(), 1);
        // A second post while already active leaves the JEC alone.
        let again = c.increment_jobs_event_counter_if(JobsEventCounter::is_sleepy);
        assert_eq!(again.jobs_counter(), after.jobs_counter());
        assert_eq!(c.sub_inactive_thread(), 1);
        c.sub_sleeping_thread();
        assert_eq!(c.load().sleeping_threads(), 0);
        assert_eq!(c.load().inactive_threads(), 1);
    }

    #[test]
    fn try_add_sleeping_fails_when_the_word_moved() {
        let c = AtomicCounters::new();
        c.add_inactive_thread();
        let seen = c.load();
        c.increment_jobs_event_counter_if(JobsEventCounter::is_sleepy);
        assert!(!c.try_add_sleeping_thread(seen));
    }
}
