//! What graph building and runs refuse, naming the nodes involved.

use super::node::NodeId;
use std::fmt;

/// What [`Graph`](crate::Graph) building and [`Pool::run_graph`](crate::Pool::run_graph)
/// refuse, or how a run ended early.
///
/// ```
/// use sixfold::{Graph, GraphError};
/// let mut g = Graph::new();
/// let a = g.add_named("a", || {});
/// let b = g.add_named("b", || {});
/// g.precede(a, b).unwrap();
/// match g.precede(b, a) {
///     Err(GraphError::Cycle { cycle, names }) => {
///         assert_eq!(cycle, [a, b]);
///         assert_eq!(names, "a -> b -> a");
///     }
///     other => panic!("expected a cycle, got {other:?}"),
/// }
/// assert!(matches!(g.precede(a, a), Err(GraphError::SelfEdge { .. })));
/// assert_eq!(g.num_edges(), 1); // neither refused edge was added
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GraphError {
    /// The edge `from -> to` would close a cycle, so no node on it could
    /// ever run. `cycle` lists the nodes on it, starting with `to` and
    /// ending with `from` (the edge asked for closes it); `names` is the
    /// same path as text, for the message.
    Cycle {
        /// The nodes on the cycle, from `to` round to `from`.
        cycle: Vec<NodeId>,
        /// The cycle as `"a -> b -> c -> a"`, with node names where set.
        names: String,
    },
    /// An edge from a node to itself.
    SelfEdge {
        /// The node.
        node: NodeId,
        /// Its name or number, for the message.
        name: String,
    },
    /// A `NodeId` made by another graph.
    ForeignNode {
        /// The id given.
        node: NodeId,
    },
    /// A node has affinity for a worker the pool does not have.
    AffinityOutOfRange {
        /// The node's name or number.
        node: String,
        /// The worker asked for.
        worker: usize,
        /// The pool's worker slots (valid indices are `0..num_workers`).
        num_workers: usize,
    },
    /// The graph's [`CancelToken`](crate::CancelToken) was triggered during
    /// the run: the nodes that had not started were skipped.
    Cancelled,
}

impl fmt::Display for GraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GraphError::Cycle { names, .. } => {
                write!(f, "this edge would close the cycle {names}")
            }
            GraphError::SelfEdge { name, .. } => {
                write!(
                    f,
                    "an edge from node {name} to itself would never let it run"
                )
            }
            GraphError::ForeignNode { node } => write!(
                f,
                "node {} belongs to another graph (graph #{})",
                node.index(),
                node.graph_id()
            ),
            GraphError::AffinityOutOfRange {
                node,
                worker,
                num_workers,
            } => write!(
                f,
                "node {node} has affinity for worker {worker}, but the pool's workers are 0..{num_workers}"
            ),
            GraphError::Cancelled => {
                write!(
                    f,
                    "the graph run was cancelled; nodes not yet started were skipped"
                )
            }
        }
    }
}

impl std::error::Error for GraphError {}
