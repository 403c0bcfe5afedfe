//! Task nodes: the unit the six rules schedule.
//!
//! A node is a [`Header`] followed by a body that implements [`Task`]. The
//! header holds the count of predecessors that have not
//! completed (`pending`), the successors, the dispatch (spawn or enqueue),
//! an optional affinity, plus the group the node was submitted to.
//!
//! # Ownership
//!
//! A node is owned, in turn, by:
//! 1. its [`TaskRef`] handle, while unsubmitted. The handle is itself one
//!    unit of `pending` (the *hold*), so a node with predecessors cannot
//!    start before its handle was handed to the scheduler;
//! 2. nobody, while `pending > 0` after submission (it waits; its
//!    predecessors hold raw pointers to it);
//! 3. the thread whose decrement took `pending` to zero: it routes the node
//!    by its placement, and whichever worker takes it runs it, completes its
//!    successors and frees it.
//!
//! # One file per protocol (each imports only those listed after it)

//! - `fork.rs`: [`Continuation`] and the continuation-passing part of
//!   [`Context`]: making a continuation, its children, recycling.
//! - `api.rs`: [`Task`], [`TaskRef`] and [`Context`]: the task layer's
//!   public face, submission (stage 1, and the hand-over to stage 2 or 3),
//!   and what a running task may do.
//! - `run.rs`: the `pending` count and how ownership moves through it;
//!   routing a ready node; running it and completing it (rules 1 and 2);
//!   cancelled chains.
//! - `release.rs`: releasing one unit of a count: a plain store when the
//!   units left are ours, else a read-modify-write.
//! - `continuation.rs`: continuations, their children, the successor's
//!   body: the context's only way into node internals.
//! - `cycle.rs`: the check that refuses an edge closing a cycle.
//! - `layout.rs`: the node in memory: header, body (`Body`), vtable;
//!   allocation and drop.
//!
//! The only `unsafe` of the task layer is in this module: raw node pointers,
//! their allocation and freeing, and the type-erased call of a body.

mod api;
mod continuation;
mod cycle;
mod fork;
mod layout;
mod release;
mod run;

pub(crate) use api::submit_all;
pub use api::{Context, Task, TaskRef};
pub use fork::Continuation;
#[cfg(loom)]
pub(crate) use release::{Release, TakeSibling, release_count, release_or_sibling};
