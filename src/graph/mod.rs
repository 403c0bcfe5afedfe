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
//! distinct predecessors and, between runs, every node's `pending` equals
//! it (a node resets its own count when it starts, and every node starts
//! once per run, skipped or not); edges never close a cycle (checked when
//! added); duplicate edges are dropped.

mod body;
mod dot;
mod run;

pub use run::Subflow;

use crate::error::GraphError;
use crate::task::Dispatch;
use body::{BodySlot, CallFn, DropFn};
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};

pub(crate) use run::{RunShared, run_graph};

/// Marks a node without affinity.
const NO_AFFINITY: u32 = u32::MAX;

/// Where to find a node: its graph and its index in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId {
    graph: u64,
    index: u32,
}

impl NodeId {
    /// The node's position in its graph: 0 for the first `add`, and so on.
    pub fn index(self) -> usize {
        self.index as usize
    }

    /// The number of the graph that made it (every graph gets its own).
    pub fn graph_id(self) -> u64 {
        self.graph
    }
}

/// Cancels a run of a graph or a pipeline from inside it or from another
/// thread; get it with [`Graph::cancel_token`] or
/// [`Pipeline::cancel_token`](crate::Pipeline::cancel_token).
///
/// Graph nodes that have not started when it fires are skipped (their
/// successors still see them complete, so the run ends promptly), and
/// `run_graph` returns [`GraphError::Cancelled`]. A pipeline's source
/// stops and its items in flight are dropped at their next stage;
/// `run_pipeline` returns
/// [`PipelineError::Cancelled`](crate::PipelineError::Cancelled). The run
/// clears the token when it returns, so the graph or pipeline can run
/// again; a token fired while no run is in progress cancels the next one.
#[derive(Clone)]
pub struct CancelToken {
    target: Arc<dyn CancelTarget>,
}

/// What a [`CancelToken`] fires.
pub(crate) trait CancelTarget: Send + Sync {
    fn cancel(&self);
    fn is_cancelled(&self) -> bool;
}

impl CancelToken {
    pub(crate) fn new(target: Arc<dyn CancelTarget>) -> Self {
        CancelToken { target }
    }
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl CancelToken {
    /// Cancel the current run: skip what has not started yet.
    pub fn cancel(&self) {
        self.target.cancel();
    }

    /// Whether the token has fired (and the run not yet returned).
    pub fn is_cancelled(&self) -> bool {
        self.target.is_cancelled()
    }
}

/// What the scheduler touches while a graph runs: one per node, one cache
/// line each, in the graph's storage. (Names, predecessors and the
/// builder's successor lists live apart, in `NodeMeta`: a run never reads
/// them.)
#[repr(align(64))]
pub(crate) struct Node<'a> {
    /// Predecessors not yet completed in this run; equal to `in_degree`
    /// between runs.
    pending: AtomicU32,
    in_degree: u32,
    /// The body plus the children it spawned that have not finished; only
    /// used once the body spawns.
    children: AtomicU32,
    /// `NO_AFFINITY` or a worker index.
    affinity: u32,
    dispatch: Dispatch,
    /// The worker that ran the node last (`NO_WORKER`: none yet), for
    /// affinity replay.
    last_worker: AtomicU16,
    successors: SuccessorList,
    /// The graph's run state (in an `Arc`, so stable while nodes move).
    shared: NonNull<RunShared>,
    call: CallFn<'a>,
    body: BodySlot,
}

/// A node's successors for the run: up to two inline (chains, trees and
/// grids need no more), else a range of the graph's successor pool.
#[derive(Clone, Copy, Default)]
struct SuccessorList {
    len: u32,
    /// The successors if `len <= 2`, else `[offset into the pool, _]`.
    inline: [u32; 2],
}

// One cache line per node: a run streams through them.
const _: () = assert!(std::mem::size_of::<Node<'static>>() == 64);

/// Marks a node no worker ran yet.
const NO_WORKER: u16 = u16::MAX;

// SAFETY: the body is `Send` (required by every `add`); `shared` points at
// the graph's own run state. A node is touched by other threads only during
// `run_graph`, which holds the graph exclusively.
unsafe impl Send for Node<'_> {}

/// What only the builder, error messages and `to_dot` need.
struct NodeMeta {
    name: Option<String>,
    predecessors: Vec<u32>,
    successors: Vec<u32>,
    drop_body: DropFn,
}

/// A reusable DAG of work; nodes may borrow anything that outlives `'a`.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let done = AtomicUsize::new(0);
/// let mut g = sixfold::Graph::new();
/// let load = g.add_named("load", || { done.fetch_add(1, Ordering::Relaxed); });
/// let parse = g.add_named("parse", || { done.fetch_add(1, Ordering::Relaxed); });
/// let check = g.add_named("check", || { done.fetch_add(1, Ordering::Relaxed); });
/// g.precede(load, parse).unwrap();
/// g.precede(load, check).unwrap();
/// // A cycle is refused, with the nodes on it.
/// let err = g.precede(parse, load).unwrap_err();
/// assert_eq!(err.to_string(), "this edge would close the cycle load -> parse -> load");
/// pool.run_graph(&mut g).unwrap();
/// pool.run_graph_n(&mut g, 10).unwrap(); // built once, run again and again
/// assert_eq!(done.load(Ordering::Relaxed), 33);
/// println!("{}", g.to_dot());
/// ```
pub struct Graph<'a> {
    id: u64,
    nodes: Vec<Node<'a>>,
    meta: Vec<NodeMeta>,
    edges: usize,
    /// Nodes without predecessors and nodes without successors, recomputed
    /// before a run when the graph changed.
    roots: Vec<u32>,
    sinks: usize,
    shape_dirty: bool,
    /// The largest affinity of any node, checked against the pool per run.
    max_affinity: Option<(u32, u32)>,
    /// In an `Arc`, not a `Box`: nodes keep raw pointers to it, which a
    /// moved `Box` (a unique pointer) would invalidate.
    shared: Arc<RunShared>,
    /// The successor lists longer than two, end to end (`SuccessorList`).
    successor_pool: Vec<u32>,
    /// Each node's name for trace records (`refresh_shape`).
    trace_names: Vec<Option<Arc<str>>>,
    /// Scratch for the cycle check: a visit stamp and a parent per node.
    visit_stamp: Vec<u32>,
    visit_parent: Vec<u32>,
    stamp: u32,
}

static NEXT_GRAPH_ID: AtomicU64 = AtomicU64::new(1);

impl Drop for Graph<'_> {
    fn drop(&mut self) {
        for (node, meta) in self.nodes.iter().zip(&self.meta) {
            // SAFETY: each body is dropped once, here, with the function
            // made for it; no run is in progress (we hold the graph).
            unsafe { (meta.drop_body)(node.body.as_ptr()) };
        }
    }
}

impl Default for Graph<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Graph<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph")
            .field("id", &self.id)
            .field("nodes", &self.nodes.len())
            .field("edges", &self.edges)
            .finish_non_exhaustive()
    }
}

impl<'a> Graph<'a> {
    /// An empty graph.
    pub fn new() -> Self {
        Graph {
            id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
            nodes: Vec::new(),
            meta: Vec::new(),
            edges: 0,
            roots: Vec::new(),
            sinks: 0,
            shape_dirty: false,
            max_affinity: None,
            shared: Arc::new(RunShared::new()),
            successor_pool: Vec::new(),
            trace_names: Vec::new(),
            visit_stamp: Vec::new(),
            visit_parent: Vec::new(),
            stamp: 0,
        }
    }

    /// Add a node that runs `f` once per run of the graph.
    pub fn add<F>(&mut self, mut f: F) -> NodeId
    where
        F: FnMut() + Send + 'a,
    {
        self.add_subflow(move |_| f())
    }

    /// Add a node with a name, shown in error messages and `to_dot`.
    pub fn add_named<F>(&mut self, name: impl Into<String>, f: F) -> NodeId
    where
        F: FnMut() + Send + 'a,
    {
        let id = self.add(f);
        self.meta[id.index()].name = Some(name.into());
        id
    }

    /// Add a node whose body gets a [`Subflow`]: it may spawn child tasks
    /// (and they theirs), and the node counts as done, for its successors,
    /// only when all of them finished (Taskflow's subflow join). It may
    /// also use [`join`](crate::join) and [`scope`](crate::scope).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let parts = AtomicUsize::new(0);
    /// let seen = AtomicUsize::new(0);
    /// let mut g = sixfold::Graph::new();
    /// let split = g.add_subflow(|sf| {
    ///     for _ in 0..8 {
    ///         sf.spawn(|_| { parts.fetch_add(1, Ordering::Relaxed); });
    ///     }
    /// });
    /// let merge = g.add(|| seen.store(parts.load(Ordering::Relaxed), Ordering::Relaxed));
    /// g.precede(split, merge).unwrap();
    /// pool.run_graph(&mut g).unwrap();
    /// assert_eq!(seen.load(Ordering::Relaxed), 8);
    /// ```
    pub fn add_subflow<F>(&mut self, f: F) -> NodeId
    where
        F: FnMut(&mut Subflow<'_, 'a>) + Send + 'a,
    {
        let index = u32::try_from(self.nodes.len())
            .ok()
            .filter(|&i| i < u32::MAX)
            .expect("a graph holds fewer than 2^32 - 1 nodes");
        let (body, call, drop_body) = BodySlot::new(f);
        self.nodes.push(Node {
            pending: AtomicU32::new(0),
            in_degree: 0,
            children: AtomicU32::new(0),
            affinity: NO_AFFINITY,
            dispatch: Dispatch::Spawn,
            last_worker: AtomicU16::new(NO_WORKER),
            successors: SuccessorList::default(),
            shared: NonNull::from(&*self.shared),
            call,
            body,
        });
        self.meta.push(NodeMeta {
            name: None,
            predecessors: Vec::new(),
            successors: Vec::new(),
            drop_body,
        });
        self.visit_stamp.push(0);
        self.visit_parent.push(0);
        self.shape_dirty = true;
        NodeId {
            graph: self.id,
            index,
        }
    }

    /// Name a node (shown in error messages and `to_dot`).
    pub fn set_name(&mut self, node: NodeId, name: impl Into<String>) -> Result<(), GraphError> {
        let i = self.check(node)?;
        self.meta[i].name = Some(name.into());
        self.shape_dirty = true;
        Ok(())
    }

    /// Where `node` goes when it becomes ready and its worker does not run
    /// it at once: [`Dispatch::Spawn`] (the default) or
    /// [`Dispatch::Enqueue`] (the shared queue: fair, for work that must
    /// not wait behind a long local backlog).
    pub fn set_dispatch(&mut self, node: NodeId, dispatch: Dispatch) -> Result<(), GraphError> {
        let i = self.check(node)?;
        self.nodes[i].dispatch = dispatch;
        Ok(())
    }

    /// Prefer worker `worker` for `node` (`None`: anywhere). Like any task
    /// with affinity it goes to that worker's mailbox (rule 4) and, as a
    /// proxy, where other workers can reach it: it runs on its worker when
    /// that worker is free or working through its mailbox, and elsewhere
    /// only if the worker stays stuck on other work (see `Pool::
    /// spawn_with_affinity`). An index the pool does not have is reported
    /// by `run_graph` as [`GraphError::AffinityOutOfRange`].
    pub fn set_affinity(&mut self, node: NodeId, worker: Option<usize>) -> Result<(), GraphError> {
        let i = self.check(node)?;
        self.nodes[i].affinity = match worker {
            // Beyond u32 is out of range for every pool; keep it visible.
            Some(w) => u32::try_from(w).unwrap_or(u32::MAX - 1).min(u32::MAX - 1),
            None => NO_AFFINITY,
        };
        self.shape_dirty = true;
        Ok(())
    }

    /// Affinity replay (oneTBB's `affinity_partitioner` idea, which its flow
    /// graph lacks): with `true`, each node without an affinity of its own
    /// prefers, on the next run, the worker that ran it last time, so data
    /// a node left in that core's cache is still there. The preference
    /// works like [`set_affinity`](Self::set_affinity): a busy worker's
    /// nodes are taken by others.
    pub fn set_affinity_replay(&mut self, replay: bool) {
        self.shared.set_replay(replay);
    }

    /// Make `to` wait for `from`: it starts only after `from` (and all its
    /// other predecessors) completed. A duplicate edge is ignored. Refused:
    /// an edge that would close a cycle ([`GraphError::Cycle`], naming the
    /// nodes on it), an edge from a node to itself, a node of another graph.
    pub fn precede(&mut self, from: NodeId, to: NodeId) -> Result<(), GraphError> {
        let (a, b) = (self.check(from)?, self.check(to)?);
        if a == b {
            return Err(GraphError::SelfEdge {
                node: from,
                name: self.label(a),
            });
        }
        // Duplicate? Scan the shorter of the two lists.
        let duplicate = if self.meta[a].successors.len() <= self.meta[b].predecessors.len() {
            self.meta[a].successors.contains(&(b as u32))
        } else {
            self.meta[b].predecessors.contains(&(a as u32))
        };
        if duplicate {
            return Ok(());
        }
        if let Some(path) = self.path(b, a) {
            let cycle: Vec<NodeId> = path
                .iter()
                .map(|&i| NodeId {
                    graph: self.id,
                    index: i,
                })
                .collect();
            let mut names: Vec<String> = path.iter().map(|&i| self.label(i as usize)).collect();
            names.push(self.label(b));
            return Err(GraphError::Cycle {
                cycle,
                names: names.join(" -> "),
            });
        }
        self.meta[a].successors.push(b as u32);
        self.meta[b].predecessors.push(a as u32);
        let node = &mut self.nodes[b];
        node.in_degree += 1;
        *node.pending.get_mut() += 1;
        self.edges += 1;
        self.shape_dirty = true;
        Ok(())
    }

    /// Make `node` wait for `predecessor`: `precede(predecessor, node)`.
    pub fn succeed(&mut self, node: NodeId, predecessor: NodeId) -> Result<(), GraphError> {
        self.precede(predecessor, node)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the graph has no nodes (it then runs and returns at once).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Number of (distinct) edges.
    pub fn num_edges(&self) -> usize {
        self.edges
    }

    /// A token that cancels this graph's runs (see [`CancelToken`]).
    pub fn cancel_token(&self) -> CancelToken {
        CancelToken::new(self.shared.clone())
    }

    /// `node`'s index, if it belongs to this graph.
    fn check(&self, node: NodeId) -> Result<usize, GraphError> {
        if node.graph != self.id || node.index() >= self.nodes.len() {
            return Err(GraphError::ForeignNode { node });
        }
        Ok(node.index())
    }

    /// A node's name, or `#index` if it has none.
    fn label(&self, index: usize) -> String {
        match &self.meta[index].name {
            Some(name) => name.clone(),
            None => format!("#{index}"),
        }
    }

    /// A path `from ->* to` along successor edges, if there is one (the
    /// nodes in order, both ends included). Iterative depth-first search
    /// with visit stamps, so no allocation beyond the path itself.
    fn path(&mut self, from: usize, to: usize) -> Option<Vec<u32>> {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.visit_stamp.iter_mut().for_each(|s| *s = 0);
            self.stamp = 1;
        }
        let stamp = self.stamp;
        let mut stack = vec![from as u32];
        self.visit_stamp[from] = stamp;
        while let Some(n) = stack.pop() {
            if n as usize == to {
                let mut path = vec![n];
                let mut at = n as usize;
                while at != from {
                    at = self.visit_parent[at] as usize;
                    path.push(at as u32);
                }
                path.reverse();
                return Some(path);
            }
            for &s in &self.meta[n as usize].successors {
                if self.visit_stamp[s as usize] != stamp {
                    self.visit_stamp[s as usize] = stamp;
                    self.visit_parent[s as usize] = n;
                    stack.push(s);
                }
            }
        }
        None
    }

    /// Recompute roots, the sink count, the largest affinity and the run's
    /// successor lists after the graph changed (once per change, not per
    /// run).
    fn refresh_shape(&mut self) {
        if !self.shape_dirty {
            return;
        }
        self.successor_pool.clear();
        for (node, meta) in self.nodes.iter_mut().zip(&self.meta) {
            let list = &meta.successors;
            node.successors = SuccessorList {
                len: list.len() as u32,
                inline: match list.len() {
                    0 => [0, 0],
                    1 => [list[0], 0],
                    2 => [list[0], list[1]],
                    _ => [self.successor_pool.len() as u32, 0],
                },
            };
            if list.len() > 2 {
                self.successor_pool.extend_from_slice(list);
            }
        }
        self.roots.clear();
        self.roots.extend(
            self.nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| n.in_degree == 0)
                .map(|(i, _)| i as u32),
        );
        self.sinks = self.meta.iter().filter(|m| m.successors.is_empty()).count();
        self.trace_names.clear();
        self.trace_names
            .extend(self.meta.iter().map(|m| m.name.as_deref().map(Arc::from)));
        self.max_affinity = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.affinity != NO_AFFINITY)
            .map(|(i, n)| (n.affinity, i as u32))
            .max();
        self.shape_dirty = false;
    }
}
