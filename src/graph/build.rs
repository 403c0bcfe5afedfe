//! The graph builder: [`Graph`] and its nodes' ids.
//! Adding a node or an edge allocates nothing of its own (see the module
//! docs of `graph`); the run's compact successor lists are made from the
//! flat edge array before the first run after a change.

use super::error::GraphError;
use super::node::{
    BodySlot, DropFn, Edge, LONG, Link, MAX_NODES, NO_AFFINITY, NO_EDGE, NO_WORKER, Node, NodeId,
    NodeMeta, PAIR, Placement, RunShared, Subflow, edge_list,
};
use super::order;
use super::spare;
use crate::cancel::CancelToken;
use crate::platform::prefetch::prefetch_for_write;
use crate::queues::dispatch::STRICT_AFFINITY;
use std::collections::HashMap;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};

/// How many nodes past the one it writes `add`, and past an edge's target
/// `precede`, asks for a line: the distance a run prefetches at, for the
/// same reason (`run.rs`).
const BUILD_PREFETCH_AHEAD: usize = 32;

/// A reusable DAG of work; nodes may borrow anything that outlives `'a`.
///
/// What a node costs: a node with one predecessor is handed on without an
/// atomic operation, and a chain runs as one loop on one worker. A node
/// with several predecessors is counted down by each of them; on a pool of
/// two or more workers that is a locked instruction for every predecessor
/// but, as a rule, the last, and the counts of nodes that one worker
/// readies and another runs pass between the cores. A pool of one counts
/// with plain loads and stores. So a grid of near-empty nodes gains
/// nothing from a second worker; give such nodes some work each (a tile of
/// cells rather than a cell) and it pays off.
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
    pub(super) id: u64,
    pub(super) nodes: Vec<Node<'a>>,
    /// Each node's in-degree and run successors (`Link`).
    pub(super) links: Vec<Link>,
    /// Each node's placement, once some node has one (else empty); only
    /// read for nodes whose link says `PLACED`.
    pub(super) placement: Vec<Placement>,
    /// The worker that ran each node last (`NO_WORKER`: none yet), for
    /// affinity replay; sized when a run replays.
    pub(super) last_worker: Vec<AtomicU16>,
    /// Each node's predecessor count for the run (`pending.rs`).
    pub(super) pending: Vec<AtomicU32>,
    pub(super) meta: Vec<NodeMeta>,
    pub(super) edges: Vec<Edge>,
    /// Nodes without predecessors, listed before a run from the counts
    /// (`refresh_shape`). The number of nodes without successors.
    pub(super) roots: Vec<u32>,
    pub(super) sinks: usize,
    /// Nodes with more than two successors: their lists go to
    /// `successor_pool` before the next run.
    pub(super) long_lists: Vec<u32>,
    pub(super) shape_dirty: bool,
    /// The largest affinity of any node, checked against the pool per run
    /// (recomputed when an affinity changed).
    pub(super) max_affinity: Option<(u32, u32)>,
    pub(super) affinity_dirty: bool,
    /// Names, for the nodes that have one.
    pub(super) names: HashMap<u32, String>,
    /// The bodies that need dropping (boxed, or with drop glue).
    pub(super) drops: Vec<(u32, DropFn)>,
    /// In an `Arc`, not a `Box`: nodes keep raw pointers to it, which a
    /// moved `Box` (a unique pointer) would invalidate.
    pub(super) shared: Arc<RunShared>,
    /// The successor lists longer than two, end to end, each its length
    /// and then its successors (`Link::next`).
    pub(super) successor_pool: Vec<u32>,
    /// The successors of nodes with two, made as the second edge is added
    /// (a node that gets a third leaves its pair unused).
    pub(super) pairs: Vec<[u32; 2]>,
    /// Each node's name for trace records (`refresh_shape`), or nothing
    /// if no node has a name.
    pub(super) trace_names: Vec<Option<Arc<str>>>,
    /// A topological order of the nodes, kept as edges are added, which
    /// makes the cycle check of an edge that agrees with it O(1).
    pub(super) order: order::TopoOrder,
}

static NEXT_GRAPH_ID: AtomicU64 = AtomicU64::new(1);

impl Drop for Graph<'_> {
    fn drop(&mut self) {
        for &(i, drop_body) in &self.drops {
            // SAFETY: each body that needs it is dropped once, here, with
            // the function made for it; no run is in progress (we hold the
            // graph). The others need nothing done.
            unsafe { drop_body(self.nodes[i as usize].body.as_ptr()) };
        }
        spare::give(std::mem::take(&mut self.nodes));
        spare::give_array(&spare::LINKS, std::mem::take(&mut self.links));
        spare::give_array(&spare::COUNTS, std::mem::take(&mut self.pending));
        spare::give_array(&spare::PAIRS, std::mem::take(&mut self.pairs));
        spare::give_array(&spare::META, std::mem::take(&mut self.meta));
        spare::give_array(&spare::EDGES, std::mem::take(&mut self.edges));
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
            .field("edges", &self.edges.len())
            .finish_non_exhaustive()
    }
}

impl<'a> Graph<'a> {
    /// An empty graph.
    ///
    /// ```
    /// # let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut g = sixfold::Graph::new();
    /// assert!(g.is_empty());
    /// assert_eq!(g.num_edges(), 0);
    /// assert_eq!(pool.run_graph(&mut g), Ok(())); // nothing to run
    /// g.add(|| {});
    /// assert_eq!(g.len(), 1);
    /// ```
    pub fn new() -> Self {
        Graph {
            id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
            nodes: Vec::new(),
            links: Vec::new(),
            placement: Vec::new(),
            last_worker: Vec::new(),
            pending: Vec::new(),
            meta: Vec::new(),
            edges: Vec::new(),
            roots: Vec::new(),
            sinks: 0,
            long_lists: Vec::new(),
            shape_dirty: false,
            max_affinity: None,
            affinity_dirty: false,
            names: HashMap::new(),
            drops: Vec::new(),
            shared: Arc::new(RunShared::new()),
            successor_pool: Vec::new(),
            pairs: Vec::new(),
            trace_names: Vec::new(),
            order: order::TopoOrder::default(),
        }
    }

    /// An empty graph with room for `nodes` nodes and `edges` edges before
    /// it allocates again (as `Vec::with_capacity`: building a graph of a
    /// known size then copies nothing as it grows).
    ///
    /// ```
    /// use std::sync::Mutex;
    /// # let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let order = Mutex::new(Vec::new());
    /// let mut g = sixfold::Graph::with_capacity(100, 99);
    /// let nodes: Vec<_> = (0..100)
    ///     .map(|i| { let order = &order; g.add(move || order.lock().unwrap().push(i)) })
    ///     .collect();
    /// for pair in nodes.windows(2) {
    ///     g.precede(pair[0], pair[1]).unwrap();
    /// }
    /// assert_eq!((g.len(), g.num_edges()), (100, 99));
    /// pool.run_graph(&mut g).unwrap();
    /// assert!(order.lock().unwrap().iter().copied().eq(0..100));
    /// ```
    pub fn with_capacity(nodes: usize, edges: usize) -> Self {
        let mut g = Self::new();
        match spare::take(nodes) {
            Some(kept) => g.nodes = kept,
            None => g.nodes.reserve_exact(nodes),
        }
        g.links =
            spare::take_array(&spare::LINKS, nodes).unwrap_or_else(|| Vec::with_capacity(nodes));
        g.pending =
            spare::take_array(&spare::COUNTS, nodes).unwrap_or_else(|| Vec::with_capacity(nodes));
        g.meta =
            spare::take_array(&spare::META, nodes).unwrap_or_else(|| Vec::with_capacity(nodes));
        g.edges =
            spare::take_array(&spare::EDGES, edges).unwrap_or_else(|| Vec::with_capacity(edges));
        // Each pair takes two edges. Room not used is never touched.
        let pairs = nodes.min(edges / 2);
        g.pairs =
            spare::take_array(&spare::PAIRS, pairs).unwrap_or_else(|| Vec::with_capacity(pairs));
        g
    }

    /// Add a node that runs `f` once per run of the graph.
    ///
    /// ```
    /// # let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut runs = 0;
    /// let mut g = sixfold::Graph::new();
    /// g.add(|| runs += 1);
    /// pool.run_graph_n(&mut g, 3).unwrap();
    /// drop(g); // ends the node's borrow of `runs`
    /// assert_eq!(runs, 3);
    /// ```
    pub fn add<F>(&mut self, mut f: F) -> NodeId
    where
        F: FnMut() + Send + 'a,
    {
        self.add_subflow(move |_| f())
    }

    /// Add a node with a name, shown in error messages and `to_dot`.
    ///
    /// ```
    /// let mut g = sixfold::Graph::new();
    /// let fetch = g.add_named("fetch", || {});
    /// let err = g.precede(fetch, fetch).unwrap_err();
    /// assert_eq!(err.to_string(), "an edge from node fetch to itself would never let it run");
    /// assert!(g.to_dot().contains(r#"n0 [label="fetch"]"#));
    /// ```
    pub fn add_named<F>(&mut self, name: impl Into<String>, f: F) -> NodeId
    where
        F: FnMut() + Send + 'a,
    {
        let id = self.add(f);
        self.names.insert(id.index, name.into());
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
    #[inline]
    pub fn add_subflow<F>(&mut self, f: F) -> NodeId
    where
        F: FnMut(&mut Subflow<'_, 'a>) + Send + 'a,
    {
        let index = u32::try_from(self.nodes.len())
            .ok()
            .filter(|&i| (i as usize) < MAX_NODES)
            .expect("a graph holds fewer than 2^30 - 1 nodes");
        let (body, call, drop_body) = BodySlot::new(f);
        if let Some(drop_body) = drop_body {
            self.drops.push((index, drop_body));
        }
        if self.nodes.len() == self.nodes.capacity() {
            self.grow_nodes();
        }
        // The other per-node arrays grow the same way: into kept arrays.
        spare::grow_if_full(&mut self.links, &spare::LINKS);
        spare::grow_if_full(&mut self.pending, &spare::COUNTS);
        spare::grow_if_full(&mut self.meta, &spare::META);
        // Nodes are written in order, two to a line: ask for the line of a
        // node a few adds on (its write would otherwise wait for it).
        prefetch_for_write(
            self.nodes
                .as_ptr()
                .wrapping_add(index as usize + BUILD_PREFETCH_AHEAD),
        );
        self.nodes.push(Node {
            shared: NonNull::from(&*self.shared),
            call,
            body,
        });
        self.links.push(Link::NEW);
        self.pending.push(AtomicU32::new(0));
        self.meta.push(NodeMeta {
            first_succ: NO_EDGE,
            first_pred: NO_EDGE,
            successors: 0,
        });
        self.sinks += 1;
        self.order.push();
        self.shape_dirty = true;
        NodeId {
            graph: self.id,
            index,
        }
    }

    /// Name a node (shown in error messages and `to_dot`).
    ///
    /// ```
    /// let mut g = sixfold::Graph::new();
    /// let (a, b) = (g.add(|| {}), g.add(|| {}));
    /// g.precede(a, b).unwrap();
    /// let err = g.precede(b, a).unwrap_err();
    /// assert_eq!(err.to_string(), "this edge would close the cycle #0 -> #1 -> #0");
    /// g.set_name(a, "fetch").unwrap();
    /// g.set_name(b, "parse").unwrap();
    /// let err = g.precede(b, a).unwrap_err();
    /// assert_eq!(err.to_string(), "this edge would close the cycle fetch -> parse -> fetch");
    /// ```
    pub fn set_name(&mut self, node: NodeId, name: impl Into<String>) -> Result<(), GraphError> {
        let i = self.check(node)?;
        self.names.insert(i as u32, name.into());
        self.shape_dirty = true;
        Ok(())
    }

    /// Make `to` wait for `from`: it starts only after `from` (and all its
    /// other predecessors) completed. A duplicate edge is ignored. Refused:
    /// an edge that would close a cycle ([`GraphError::Cycle`], naming the
    /// nodes on it), an edge from a node to itself, a node of another graph.
    ///
    /// ```
    /// use sixfold::GraphError;
    /// # use std::sync::Mutex;
    /// # let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let log = Mutex::new(Vec::new());
    /// let mut g = sixfold::Graph::new();
    /// let [a, b, c] = ["a", "b", "c"].map(|name| {
    ///     let log = &log;
    ///     g.add_named(name, move || log.lock().unwrap().push(name))
    /// });
    /// g.precede(b, c).unwrap();
    /// g.precede(a, b).unwrap();
    /// g.precede(a, b).unwrap(); // a duplicate: ignored
    /// assert_eq!(g.num_edges(), 2);
    /// let err = g.precede(c, a).unwrap_err(); // c -> a would close a cycle
    /// assert!(matches!(&err, GraphError::Cycle { names, .. } if names == "a -> b -> c -> a"));
    /// pool.run_graph(&mut g).unwrap();
    /// assert_eq!(*log.lock().unwrap(), ["a", "b", "c"]);
    /// ```
    // Always inline: the build's hot loop calls this once an edge, and in
    // the caller's loop it sheds the call, the spills and the reloads of
    // the graph's arrays (10^6 chain: 16.6 -> 10.8 ns an edge). Its cold
    // paths (the reorder, the errors) stay out of line.
    #[inline(always)]
    pub fn precede(&mut self, from: NodeId, to: NodeId) -> Result<(), GraphError> {
        let (a, b) = (self.check(from)?, self.check(to)?);
        if a == b {
            return Err(self.self_edge(from));
        }
        // Every per-node array has an entry per node, and `check` bounded
        // `a` and `b` by the node count: cut each array to that count once
        // here, and the compiler drops the bounds checks of every access
        // below (a tenth of an edge's instructions).
        let n = self.nodes.len();
        let links = &mut self.links[..n];
        // Edges mostly come in node order (a chain, a grid's rows), and a
        // large graph's links are out of the near caches by now: ask for
        // the line this loop will want a few edges on.
        prefetch_for_write(links.as_ptr().wrapping_add(b + BUILD_PREFETCH_AHEAD));
        // Duplicate? Scan the shorter of the two lists.
        let duplicate = if self.meta[..n][a].successors <= links[b].in_degree() {
            self.successors_of(a).any(|s| s == b as u32)
        } else {
            self.predecessors_of(b).any(|p| p == a as u32)
        };
        if duplicate {
            return Ok(());
        }
        if let Err(path) = self
            .order
            .add_edge(a as u32, b as u32, &self.meta, &self.edges)
        {
            return Err(self.cycle_error(&path, b));
        }
        // Below 2^30 edges, no in-degree reaches `PLACED`.
        let edge = u32::try_from(self.edges.len())
            .ok()
            .filter(|&e| (e as usize) < MAX_NODES)
            .expect("a graph holds fewer than 2^30 - 1 edges");
        // Through local slices: a store into one array then does not make
        // the compiler reload the others' pointers and lengths.
        let meta = &mut self.meta[..n];
        let (next_succ, next_pred) = (meta[a].first_succ, meta[b].first_pred);
        meta[a].first_succ = edge;
        meta[b].first_pred = edge;
        meta[a].successors += 1;
        let successors = meta[a].successors;
        spare::grow_if_full(&mut self.edges, &spare::EDGES);
        self.edges.push(Edge {
            from: a as u32,
            to: b as u32,
            next_succ,
            next_pred,
        });
        let links = &mut self.links[..n];
        // The run's successors, in the order they were added: a single
        // one in the link, two in a pair, more made from the edge list
        // before the next run.
        match successors {
            1 => {
                self.sinks -= 1;
                links[a].next = b as u32;
            }
            2 => {
                // Below `MAX_NODES`: a pair takes two of the edges, which
                // stay below it.
                spare::grow_if_full(&mut self.pairs, &spare::PAIRS);
                let pair = self.pairs.len() as u32;
                self.pairs.push([links[a].next, b as u32]);
                links[a].next = LONG | PAIR | pair;
            }
            3 => self.long_lists.push(a as u32),
            _ => {}
        }
        links[b].degree += 1;
        *self.pending[..n][b].get_mut() += 1;
        self.shape_dirty = true;
        Ok(())
    }

    /// The error of an edge from `node` to itself. Cold, as the other
    /// error below: `precede` is the build's hot path, and the names it
    /// formats would otherwise widen its frame.
    #[cold]
    #[inline(never)]
    fn self_edge(&self, node: NodeId) -> GraphError {
        GraphError::SelfEdge {
            node,
            name: self.label(node.index()),
        }
    }

    /// The error of an edge that would close `path` (from its target back
    /// to its source) into a cycle through `to`.
    #[cold]
    #[inline(never)]
    fn cycle_error(&self, path: &[u32], to: usize) -> GraphError {
        let cycle: Vec<NodeId> = path
            .iter()
            .map(|&i| NodeId {
                graph: self.id,
                index: i,
            })
            .collect();
        let mut names: Vec<String> = path.iter().map(|&i| self.label(i as usize)).collect();
        names.push(self.label(to));
        GraphError::Cycle {
            cycle,
            names: names.join(" -> "),
        }
    }

    /// Make `node` wait for `predecessor`: `precede(predecessor, node)`.
    ///
    /// ```
    /// use std::sync::Mutex;
    /// # let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let log = Mutex::new(Vec::new());
    /// let mut g = sixfold::Graph::new();
    /// let report = g.add(|| log.lock().unwrap().push("report"));
    /// let load = g.add(|| log.lock().unwrap().push("load"));
    /// g.succeed(report, load).unwrap(); // report waits for load
    /// pool.run_graph(&mut g).unwrap();
    /// assert_eq!(*log.lock().unwrap(), ["load", "report"]);
    /// ```
    pub fn succeed(&mut self, node: NodeId, predecessor: NodeId) -> Result<(), GraphError> {
        self.precede(predecessor, node)
    }

    /// Number of nodes.
    ///
    /// ```
    /// let mut g = sixfold::Graph::new();
    /// let (a, b) = (g.add(|| {}), g.add(|| {}));
    /// g.precede(a, b).unwrap();
    /// assert_eq!(g.len(), 2); // edges do not count
    /// ```
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the graph has no nodes (it then runs and returns at once).
    ///
    /// ```
    /// # let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut g = sixfold::Graph::new();
    /// assert!(g.is_empty());
    /// assert_eq!(pool.run_graph(&mut g), Ok(()));
    /// g.add(|| {});
    /// assert!(!g.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Number of (distinct) edges.
    ///
    /// ```
    /// let mut g = sixfold::Graph::new();
    /// let [top, left, right, bottom] = [(); 4].map(|_| g.add(|| {}));
    /// for (from, to) in [(top, left), (top, right), (left, bottom), (right, bottom), (top, left)] {
    ///     g.precede(from, to).unwrap();
    /// }
    /// assert_eq!(g.num_edges(), 4); // the repeated top -> left counts once
    /// ```
    pub fn num_edges(&self) -> usize {
        self.edges.len()
    }

    /// A token that cancels this graph's runs (see [`CancelToken`]).
    ///
    /// ```
    /// use sixfold::GraphError;
    /// # let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut later_runs = 0;
    /// let mut g = sixfold::Graph::new();
    /// let token = g.cancel_token();
    /// let mut first_run = true;
    /// let check = g.add(move || if std::mem::take(&mut first_run) { token.cancel() });
    /// let later = g.add(|| later_runs += 1);
    /// g.precede(check, later).unwrap();
    /// assert_eq!(pool.run_graph(&mut g), Err(GraphError::Cancelled)); // `later` skipped
    /// assert_eq!(pool.run_graph(&mut g), Ok(())); // the token was cleared
    /// drop(g);
    /// assert_eq!(later_runs, 1);
    /// ```
    pub fn cancel_token(&self) -> CancelToken {
        CancelToken::new(self.shared.clone())
    }

    /// Room for one more node: doubling, as a vector grows, but into the
    /// kept array of a dropped graph when one is large enough.
    #[cold]
    fn grow_nodes(&mut self) {
        let wanted = (self.nodes.capacity() * 2).max(4);
        match spare::take(wanted) {
            Some(mut kept) => {
                kept.append(&mut self.nodes);
                self.nodes = kept;
            }
            None => self.nodes.reserve(1),
        }
    }

    /// `node`'s index, if it belongs to this graph.
    pub(super) fn check(&self, node: NodeId) -> Result<usize, GraphError> {
        if node.graph != self.id || node.index() >= self.nodes.len() {
            return Err(GraphError::ForeignNode { node });
        }
        Ok(node.index())
    }

    /// A node's name, or `#index` if it has none.
    pub(super) fn label(&self, index: usize) -> String {
        match self.names.get(&(index as u32)) {
            Some(name) => name.clone(),
            None => format!("#{index}"),
        }
    }

    /// Node `i`'s successors, newest edge first.
    pub(super) fn successors_of(&self, i: usize) -> impl Iterator<Item = u32> + '_ {
        edge_list(&self.edges, self.meta[i].first_succ, |e| e.next_succ).map(|e| e.to)
    }

    /// Node `i`'s predecessors, newest edge first.
    fn predecessors_of(&self, i: usize) -> impl Iterator<Item = u32> + '_ {
        edge_list(&self.edges, self.meta[i].first_pred, |e| e.next_pred).map(|e| e.from)
    }

    /// Recompute roots, the sink count, the largest affinity and the run's
    /// successor lists after the graph changed (once per change, not per
    /// run).
    pub(super) fn refresh_shape(&mut self) {
        if !self.shape_dirty {
            return;
        }
        // Between runs every count equals its node's in-degree
        // (`pending.rs`): the roots are the zeros. One pass over four bytes
        // a node, once per change of shape, costs less than keeping a root
        // set up to date on every `add` and `precede`.
        self.roots.clear();
        self.roots.extend(
            self.pending
                .iter_mut()
                .map(|count| *count.get_mut())
                .enumerate()
                .filter(|&(_, count)| count == 0)
                .map(|(i, _)| i as u32),
        );
        self.successor_pool.clear();
        for &a in &self.long_lists {
            let meta = &self.meta[a as usize];
            let offset = self.successor_pool.len();
            assert!(
                offset < MAX_NODES,
                "a graph's successor lists hold fewer than 2^30 - 1 entries"
            );
            self.successor_pool.push(meta.successors);
            self.successor_pool
                .extend(edge_list(&self.edges, meta.first_succ, |e| e.next_succ).map(|e| e.to));
            // Oldest edge first, as they were added.
            self.successor_pool[offset + 1..].reverse();
            self.links[a as usize].next = LONG | offset as u32;
        }
        self.trace_names.clear();
        if !self.names.is_empty() {
            self.trace_names.resize(self.nodes.len(), None);
            for (&i, name) in &self.names {
                self.trace_names[i as usize] = Some(Arc::from(name.as_str()));
            }
        }
        if self.affinity_dirty {
            self.max_affinity = self
                .placement
                .iter()
                .enumerate()
                .filter(|(_, p)| p.affinity != NO_AFFINITY)
                .map(|(i, p)| (p.affinity & !STRICT_AFFINITY, i as u32))
                .max();
            self.affinity_dirty = false;
        }
        self.shape_dirty = false;
    }

    /// Size the last workers' array if the run replays. Warm runs find
    /// it sized and allocate nothing.
    pub(super) fn size_run_arrays(&mut self, replay: bool) {
        let n = self.nodes.len();
        if replay && self.last_worker.len() < n {
            self.last_worker
                .resize_with(n, || AtomicU16::new(NO_WORKER));
        }
    }
}
