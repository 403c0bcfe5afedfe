//! rayon's fork-join on the six rules: [`join`], [`scope`] and
//! [`scope_fifo`], and [`isolate`] for waits that must not pick up
//! unrelated work.

pub(crate) mod isolate;
pub(crate) mod join;
pub(crate) mod scope;

pub use isolate::isolate;
pub use join::join;
pub use scope::{Scope, ScopeFifo, scope, scope_fifo};
