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
//! # One file per protocol
//!
//! - `handle.rs`: [`Task`], [`TaskRef`] and submission (stage 1, and the
//!   hand-over to stage 2 or 3).
//! - `layout.rs`: the node in memory: header, body, vtable; allocation and
//!   drop.
//! - `cycle.rs`: the check that refuses an edge closing a cycle.
//! - `ready.rs`: the `pending` count and how ownership moves through it;
//!   routing a ready node; releasing units; cancelled chains.
//! - `execute.rs`: running a ready node and completing it (rules 1 and 2).
//! - `continuation.rs`: what a running task's `Context` may do to its
//!   node: continuations, their children, the successor's body.
//!
//! The only `unsafe` of the task layer is in this module: raw node pointers,
//! their allocation and freeing, and the type-erased call of a body.

pub(crate) mod continuation;
mod cycle;
mod execute;
mod handle;
mod layout;
mod ready;

pub(crate) use handle::{FnTask, submit_all};
pub use handle::{Task, TaskRef};
pub(crate) use layout::Header;
