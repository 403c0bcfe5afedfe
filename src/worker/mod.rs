//! The scheduler layer: the worker threads and their six-rule loop
//! (`thread/`), the registry that owns a pool's queues and routes ready
//! work (`registry.rs`), the threads' start and end (`lifecycle.rs`), the
//! groups that structured waits wait for (`group.rs`) and the unit credit
//! of scope jobs (`credit.rs`), and the sleep protocol (`sleep/`).

pub(crate) mod credit;
pub(crate) mod entry;
pub(crate) mod global;
pub(crate) mod group;
pub(crate) mod lifecycle;
pub(crate) mod registry;
pub(crate) mod sleep;
pub(crate) mod thread;
