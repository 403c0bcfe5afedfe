//! The queues layer: what the scheduler's queues hold ([`job::JobRef`]) and
//! the queues themselves: the per-worker deque, the shared queue, the
//! affinity mailboxes with their proxies, and the per-worker FIFOs of
//! `spawn_fifo`. Nothing here knows the worker that runs a job: a job's
//! entry point gets the worker as an opaque parameter from above.

// Open to `loom_api`: under loom the scheduler uses the facade's stand-in,
// and only the deque's own model (`tests/loom_deque.rs`) runs this one.
pub(crate) mod chase_lev;
pub(crate) mod deque;
pub(crate) mod dispatch;
pub(crate) mod fifo;
pub(crate) mod job;
pub(crate) mod lent;
pub(crate) mod mailbox;
mod pop_mode;
pub(crate) mod proxy;
pub(crate) mod region;
pub(crate) mod region_queue;
pub(crate) mod ring_queue;
pub(crate) mod shared_queue;

pub use dispatch::{Dispatch, Priority};
