//! Reusable task graphs: build once, run many times.
//!
//! A [`Graph`] is a set of nodes with stored in-degrees and successor lists,
//! in the graph's own storage. Running it (`Pool::run_graph`, in `run.rs`)
//! hands the roots to the scheduler; each finished node decrements its
//! successors' pending counts, and the successor it made ready becomes
//! rule 2 of the six-rule loop, so a chain runs node after node on one
//! worker with no queue in between. Nothing is allocated per run.
//!
//! Invariants kept here (the builder): `in_degree` is the number of
//! distinct predecessors and, between runs, every node's count in the
//! pending array equals it (a node resets its own count when it starts,
//! or its last child does, and every node starts once per run, skipped or
//! not); edges never close
//! a cycle (checked when added, see `order.rs`); duplicate edges are
//! dropped; a node's run
//! successor list keeps the order its edges were added in. The builder keeps
//! its edges in one flat array, threaded into per-node successor and
//! predecessor lists, so adding a node or an edge allocates nothing of its
//! own; the run's compact successor lists (a pair as its second edge is
//! added, longer lists in the pool) are made before the first run after a
//! change. Where things live: `build.rs` and `placement.rs` (the builder),
//! `node.rs` (the storage), `run.rs` (the walk), `subflow.rs` (children),
//! `access.rs` (a node's parts by index), `pending.rs` (the counts).

mod access;
mod build;
mod dot;
mod error;
mod node;
mod order;
pub(crate) mod pending;
mod placement;
mod run;
mod spare;
mod subflow;

pub use build::Graph;
pub use error::GraphError;
pub use node::{NodeId, Subflow};
pub(crate) use run::run_graph;
