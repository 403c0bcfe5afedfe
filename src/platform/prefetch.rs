//! A hint to the CPU to bring a cache line in ahead of its use.
//!
//! Passes over more nodes than the caches hold (submitting a set of a
//! million task nodes) are bound by the latency of one miss per node when
//! each node's address is known only as the loop reaches it; asking for
//! the lines a few nodes ahead overlaps those misses. A hint has no effect
//! on what the program computes: where the target has no stable prefetch
//! instruction (or under Miri), it does nothing.

/// Ask for the line at `address`, about to be written. Any address is
/// allowed: a prefetch never faults.
#[inline(always)]
pub(crate) fn prefetch_for_write<T>(address: *const T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: SSE is part of the x86_64 baseline, and a prefetch reads
        // nothing and cannot fault, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(address.cast::<i8>()) };
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = address;
}
