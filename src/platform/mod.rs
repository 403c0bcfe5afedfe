//! The platform under every layer: the std-or-loom door for atomics and
//! locks (`sync.rs`), the asymmetric fence of the deque's pop
//! (`asymmetric_fence.rs`), latches, panic plumbing, the small-block memory of
//! task nodes and queue entries, cache prefetch hints, and the machine's
//! cores (`topology.rs`), the process's CPU clock (`cpu_clock.rs`), and
//! moving a woken worker off a CPU its pool already runs on
//! (`cpu_spread.rs`).
//! Nothing here imports another layer.

pub(crate) mod asymmetric_fence;
#[cfg(not(loom))]
pub(crate) mod cpu_clock;
#[cfg(not(loom))]
pub(crate) mod cpu_spread;
pub(crate) mod latch;
pub(crate) mod node_alloc;
pub(crate) mod prefetch;
pub(crate) mod sync;
pub(crate) mod topology;
pub(crate) mod unwind;

pub use topology::{CoreInfo, Pinning, Proximity, Topology, TopologySource};
