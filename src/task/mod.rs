//! The task layer: task nodes with predecessor counts, their handles, and
//! what a running task may do ([`Context`]). Below the API, above the
//! scheduler: a node becomes a job when it is ready, and the worker that
//! runs it completes its successors here.

pub(crate) mod node;
pub(crate) mod submit;
pub(crate) mod successors;

pub use node::{Context, Continuation, Task, TaskRef};
