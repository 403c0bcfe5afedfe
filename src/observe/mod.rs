//! What a pool tells about itself: counters per rule (`stats.rs`) and the
//! optional trace of task and sleep events (`trace.rs`, its workers'
//! records in `record.rs`, timed through `stamp.rs` and `clock.rs`). Every layer writes
//! here; this layer imports none of them.

pub(crate) mod clock;
pub(crate) mod record;
pub(crate) mod stamp;
pub(crate) mod stats;
pub(crate) mod trace;

pub use record::TaskEvent;
pub use stats::{Rule, Stats, WorkerStats};
pub use trace::{SleepEvent, Trace};
