//! rayon's fork-join on the six rules: [`join`], [`scope`] and
//! [`scope_fifo`], [`isolate`] for waits that must not pick up unrelated
//! work, and the rest of rayon-core's calls (`rayon_api.rs`).

pub(crate) mod isolate;
pub(crate) mod join;
mod rayon_api;
pub(crate) mod scope;
mod scope_cancellable;
pub(crate) mod scope_fifo;

pub(crate) use scope::in_place_scope_in;
pub(crate) use scope_fifo::in_place_scope_fifo_in;

pub use isolate::isolate;
pub use join::join;
pub use rayon_api::{
    FnContext, Yield, current_thread_has_pending_tasks, current_thread_index, join_context,
    max_num_threads, yield_local, yield_now,
};
pub use scope::{Scope, in_place_scope, scope};
pub use scope_cancellable::{scope_cancellable, scope_fifo_cancellable};
pub use scope_fifo::{ScopeFifo, in_place_scope_fifo, scope_fifo};
