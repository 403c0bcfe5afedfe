//! A graph's storage as a run sees it: the nodes (32 bytes each, with
//! their body inline when it is small), the links beside them (in-degree
//! and successors, 8 bytes each), the placements, the builder's edge
//! lists, the run state every node points at (`RunShared`), and the
//! `Subflow` a body gets.
//!
//! Bodies: a node's body is stored inside the node when it is small.
//!
//! A million-node graph walked at ten nanoseconds a node is bound by memory
//! traffic: a boxed closure per node is one more heap block, on its own
//! cache line, read on every run. Most bodies capture a reference or two,
//! so a body of at most two words (and at most word alignment) lives in the
//! node itself; a bigger one is boxed and its pointer lives there.
//!
//! Invariants: `BodySlot` holds exactly the value its `CallFn`/`DropFn`
//! were made for; it is dropped exactly once, by the graph, through its
//! `DropFn`; calls never overlap (a node runs once per run, runs do not
//! overlap). Every array beside the nodes (links, counts, and while a run
//! uses them last workers) has an entry per node; the
//! placement array has one for every node whose link says `PLACED`; node
//! indices, pair numbers and pool offsets stay below 2^30 - 1, so `LONG`,
//! `PAIR` and `PLACED` never collide with a value.

use crate::cancel::CancelTarget;
use crate::platform::latch::{CountLatch, LockLatch};
use crate::queues::dispatch::{Dispatch, Priority};
use crate::queues::region::Region;
use crate::queues::shared_queue::SharedQueueFlag;
use crate::worker::thread::WorkerThread;
use parking_lot::Mutex;
use std::any::Any;
use std::cell::UnsafeCell;
use std::mem::{self, MaybeUninit};
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};

/// Calls the body in the slot.
pub(super) type CallFn<'a> = for<'s> unsafe fn(*mut u8, &mut Subflow<'s, 'a>);
/// Drops the body in the slot.
pub(super) type DropFn = unsafe fn(*mut u8);

/// Two words of storage for a body or for a pointer to a boxed one.
pub(super) struct BodySlot {
    pub(super) data: UnsafeCell<MaybeUninit<[usize; 2]>>,
}

/// Whether `F` fits in a slot.
pub(super) const fn fits<F>() -> bool {
    mem::size_of::<F>() <= mem::size_of::<[usize; 2]>()
        && mem::align_of::<F>() <= mem::align_of::<[usize; 2]>()
}

impl BodySlot {
    /// Store `f`, returning the slot, the function that calls what it
    /// holds and, if dropping it does anything, the function that drops
    /// it.
    pub(super) fn new<'a, F>(f: F) -> (BodySlot, CallFn<'a>, Option<DropFn>)
    where
        F: FnMut(&mut Subflow<'_, 'a>) + Send + 'a,
    {
        let slot = BodySlot {
            data: UnsafeCell::new(MaybeUninit::uninit()),
        };
        let at = slot.data.get().cast::<u8>();
        if fits::<F>() {
            // SAFETY: the slot is large and aligned enough for `F` (checked
            // by `fits`) and uninitialized.
            unsafe { at.cast::<F>().write(f) };
            let drop_fn = mem::needs_drop::<F>().then_some(drop_inline::<F> as DropFn);
            (slot, call_inline::<F>, drop_fn)
        } else {
            let boxed: *mut F = Box::into_raw(Box::new(f));
            // SAFETY: a pointer fits in the slot.
            unsafe { at.cast::<*mut F>().write(boxed) };
            (slot, call_boxed::<F>, Some(drop_boxed::<F> as DropFn))
        }
    }

    /// Where the body's bytes start, for `CallFn` and `DropFn`.
    pub(super) fn as_ptr(&self) -> *mut u8 {
        self.data.get().cast()
    }
}

pub(super) unsafe fn call_inline<'a, F>(at: *mut u8, subflow: &mut Subflow<'_, 'a>)
where
    F: FnMut(&mut Subflow<'_, 'a>),
{
    // SAFETY: the slot holds an `F` (made by `BodySlot::new` with this
    // function), and the caller has exclusive access to it.
    unsafe { (*at.cast::<F>())(subflow) }
}

pub(super) unsafe fn drop_inline<F>(at: *mut u8) {
    // SAFETY: the slot holds an `F`, dropped once.
    unsafe { at.cast::<F>().drop_in_place() }
}

pub(super) unsafe fn call_boxed<'a, F>(at: *mut u8, subflow: &mut Subflow<'_, 'a>)
where
    F: FnMut(&mut Subflow<'_, 'a>),
{
    // SAFETY: the slot holds a pointer from `Box::into_raw` of an `F`, and
    // the caller has exclusive access to it.
    unsafe { (**at.cast::<*mut F>())(subflow) }
}

pub(super) unsafe fn drop_boxed<F>(at: *mut u8) {
    // SAFETY: the slot holds a pointer from `Box::into_raw`, freed once.
    unsafe { drop(Box::from_raw(*at.cast::<*mut F>())) }
}

/// Marks a node without affinity.
pub(super) const NO_AFFINITY: u32 = u32::MAX;

/// What a run reads of a node to call it: half a cache line each, in the
/// graph's storage. Everything else a run needs of a node lives in arrays
/// of its own, indexed by the node's position: its `Link` (eight bytes,
/// read to hand work on), its count (`pending.rs`), and, only for the
/// nodes that use them, its placement and its last worker.
/// (Names, predecessors and the builder's lists live in `NodeMeta`: a run
/// never reads them.)
///
/// Why so small: a run of a large graph streams through its nodes, and
/// such a walk is bound by the bytes it reads a node. A million-node chain
/// of 64-byte nodes read 72 bytes a node (the node, and the 8 its body
/// writes) and ran at the speed of memory, 7.0 ns a node on a Xeon; with
/// 32-byte nodes and 8-byte links, 3.8.
#[repr(align(32))]
pub(crate) struct Node<'a> {
    /// The graph's run state (in an `Arc`, so stable while nodes move):
    /// the way from a node job to the rest of its graph.
    pub(super) shared: NonNull<RunShared>,
    pub(super) call: CallFn<'a>,
    pub(super) body: BodySlot,
}

// Half a cache line per node: a run streams through them.
const _: () = assert!(std::mem::size_of::<Node<'static>>() == 32);

/// A node's in-degree and successors, as a run reads them, in an array
/// beside the nodes (`Graph::links`).
#[derive(Clone, Copy)]
pub(crate) struct Link {
    /// The number of distinct predecessors (which the node's count in the
    /// pending array equals between runs), plus `PLACED` if the node has a
    /// placement of its own in `Graph::placement`.
    pub(super) degree: u32,
    /// `NO_SUCCESSOR` for a sink; the successor's index for a node with
    /// one; `LONG | PAIR | k` for a node with two, in `Graph::pairs[k]`
    /// (made as the second edge is added); for more, `LONG | offset` of
    /// the list in the successor pool, which holds its length and then the
    /// successors (made before the first run after a change of shape).
    pub(super) next: u32,
}

/// In `Link::degree`: read the node's placement.
pub(super) const PLACED: u32 = 1 << 31;
/// In `Link::next`: the successors are not inline; with `PAIR` they are
/// the pair below, else in the pool at the offset below.
pub(super) const LONG: u32 = 1 << 31;
pub(super) const PAIR: u32 = 1 << 30;
/// `Link::next` of a sink.
pub(super) const NO_SUCCESSOR: u32 = u32::MAX;
/// Node indices, pair numbers and pool offsets stay below this, so none
/// looks like another or like `NO_SUCCESSOR`.
pub(super) const MAX_NODES: usize = PAIR as usize - 1;

impl Link {
    /// A node without edges or placement.
    pub(super) const NEW: Link = Link {
        degree: 0,
        next: NO_SUCCESSOR,
    };

    #[inline(always)]
    pub(super) fn in_degree(self) -> u32 {
        self.degree & !PLACED
    }

    #[inline(always)]
    pub(super) fn placed(self) -> bool {
        self.degree & PLACED != 0
    }
}

/// Where and how a node runs, for the few nodes that say so (their link
/// has `PLACED`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Placement {
    /// `NO_AFFINITY` or a worker index (with `STRICT_AFFINITY`).
    pub(super) affinity: u32,
    pub(super) dispatch: Dispatch,
    /// The shared-queue lane of an enqueue-dispatch node.
    pub(super) priority: Priority,
}

impl Placement {
    /// What a node without a placement gets: spawned, anywhere.
    pub(super) const DEFAULT: Placement = Placement {
        affinity: NO_AFFINITY,
        dispatch: Dispatch::Spawn,
        priority: Priority::Normal,
    };
}

/// Marks a node no worker ran yet.
pub(super) const NO_WORKER: u16 = u16::MAX;

// SAFETY: the body is `Send` (required by every `add`); `shared` points at
// the graph's own run state. A node is touched by other threads only during
// `run_graph`, which holds the graph exclusively.
unsafe impl Send for Node<'_> {}

/// What only the builder needs (names and drop functions live apart,
/// for the few nodes that have them).
pub(super) struct NodeMeta {
    /// The node's successor and predecessor lists in `Graph::edges`,
    /// newest edge first (`NO_EDGE`: empty).
    pub(super) first_succ: u32,
    pub(super) first_pred: u32,
    /// The number of successors.
    pub(super) successors: u32,
}

/// Ends an edge list.
pub(super) const NO_EDGE: u32 = u32::MAX;

/// An edge, threaded into its source's successor list and its target's
/// predecessor list.
pub(super) struct Edge {
    pub(super) from: u32,
    pub(super) to: u32,
    pub(super) next_succ: u32,
    pub(super) next_pred: u32,
}

/// The edges of one list in `edges`, from `first`, following `next`.
pub(super) fn edge_list<'e>(
    edges: &'e [Edge],
    first: u32,
    next: impl Fn(&Edge) -> u32 + 'e,
) -> impl Iterator<Item = &'e Edge> + 'e {
    let mut at = first;
    std::iter::from_fn(move || {
        let edge = edges.get(at as usize)?;
        at = next(edge);
        Some(edge)
    })
}

pub(crate) struct RunShared {
    /// Set by the cancel token or the first panic: nodes that start skip
    /// their bodies.
    /// Inline, not behind its own `Arc`: every node reads it.
    pub(super) cancel: AtomicBool,
    pub(super) panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// The run's latch (on the caller's stack) and the first node; written
    /// before the roots are routed, so every node sees them.
    pub(super) latch: AtomicPtr<CountLatch>,
    pub(super) nodes: AtomicPtr<Node<'static>>,
    /// The arrays beside the nodes, one entry per node (`placement` and
    /// `last_worker` only when used: `Graph::refresh_shape`).
    pub(super) links: AtomicPtr<Link>,
    pub(super) placement: AtomicPtr<Placement>,
    pub(super) last_worker: AtomicPtr<AtomicU16>,
    pub(super) pairs: AtomicPtr<[u32; 2]>,
    pub(super) successor_pool: AtomicPtr<u32>,
    /// The nodes' predecessor counts, one per node (`pending.rs`).
    pub(super) pending: AtomicPtr<AtomicU32>,
    /// The nodes' names as trace records want them, one per node.
    pub(super) names: AtomicPtr<Option<Arc<str>>>,
    pub(super) names_len: AtomicUsize,
    /// Whether the run's nodes went to the shared queue (`WaitAccess`).
    pub(super) used_shared_queue: SharedQueueFlag,
    /// The latch an outside caller blocks on, reused run after run.
    pub(super) blocking: Arc<LockLatch>,
    /// Affinity replay: nodes prefer the worker that ran them last.
    pub(super) replay: AtomicBool,
    /// The run's pool has one worker slot: a single thread runs every
    /// node, so predecessor counts need no read-modify-write.
    pub(super) exclusive: AtomicBool,
    /// The isolation region of the run in progress (`Region::to_bits`):
    /// its caller's, so an isolated caller can run every node.
    pub(super) region: AtomicU64,
}

impl RunShared {
    pub(crate) fn new() -> Self {
        RunShared {
            cancel: AtomicBool::new(false),
            panic: Mutex::new(None),
            latch: AtomicPtr::new(ptr::null_mut()),
            nodes: AtomicPtr::new(ptr::null_mut()),
            links: AtomicPtr::new(ptr::null_mut()),
            placement: AtomicPtr::new(ptr::null_mut()),
            last_worker: AtomicPtr::new(ptr::null_mut()),
            pairs: AtomicPtr::new(ptr::null_mut()),
            successor_pool: AtomicPtr::new(ptr::null_mut()),
            pending: AtomicPtr::new(ptr::null_mut()),
            names: AtomicPtr::new(ptr::null_mut()),
            names_len: AtomicUsize::new(0),
            used_shared_queue: SharedQueueFlag::new(),
            blocking: Arc::new(LockLatch::new()),
            replay: AtomicBool::new(false),
            exclusive: AtomicBool::new(false),
            region: AtomicU64::new(Region::NONE.to_bits()),
        }
    }

    #[inline]
    pub(super) fn region(&self) -> Region {
        Region::from_bits(self.region.load(Ordering::Relaxed))
    }

    #[inline]
    pub(super) fn replay(&self) -> bool {
        self.replay.load(Ordering::Relaxed)
    }

    pub(crate) fn set_replay(&self, replay: bool) {
        self.replay.store(replay, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    pub(super) fn record_panic(&self, payload: Box<dyn Any + Send>) {
        let mut slot = self.panic.lock();
        if slot.is_none() {
            *slot = Some(payload);
        }
        self.cancel.store(true, Ordering::Relaxed);
    }
}

impl CancelTarget for RunShared {
    fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }
    fn is_cancelled(&self) -> bool {
        RunShared::is_cancelled(self)
    }
}

/// What a node's body (or a child it spawned) gets: spawn more work that
/// the node waits for.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
/// # let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let done = &AtomicUsize::new(0);
/// let mut seen = 0;
/// let mut g = sixfold::Graph::new();
/// let tree = g.add_subflow(move |sf| {
///     for _ in 0..3 {
///         // Each child spawns a child of its own.
///         sf.spawn(move |sf| sf.spawn(move |_| { done.fetch_add(1, Relaxed); }));
///     }
/// });
/// let next = g.add(|| seen = done.load(Relaxed));
/// g.precede(tree, next).unwrap();
/// pool.run_graph(&mut g).unwrap();
/// drop(g);
/// assert_eq!(seen, 3); // `next` ran after all the grandchildren
/// ```
pub struct Subflow<'s, 'a> {
    pub(super) node: &'s Node<'a>,
    /// The body plus the children it spawned that have not finished: the
    /// node's predecessor count, unused while the node runs (`pending.rs`).
    pub(super) children: &'s AtomicU32,
    pub(super) worker: &'s WorkerThread,
    /// The node's body (which holds no unit of `children` until it first
    /// spawns) or one of its children (which holds one).
    pub(super) is_body: bool,
    pub(super) spawned: bool,
}

/// Where to find a node: its graph and its index in it.
///
/// ```
/// use sixfold::{Graph, GraphError};
/// let (mut g, mut other) = (Graph::new(), Graph::new());
/// let a = g.add(|| {});
/// let stranger = other.add(|| {});
/// assert_eq!(a.index(), stranger.index()); // both first in their graph,
/// assert_ne!(a, stranger); // yet different nodes
/// let err = g.precede(a, stranger).unwrap_err();
/// assert_eq!(err, GraphError::ForeignNode { node: stranger });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId {
    pub(super) graph: u64,
    pub(super) index: u32,
}

impl NodeId {
    /// The node's position in its graph: 0 for the first `add`, and so on.
    ///
    /// ```
    /// let mut g = sixfold::Graph::new();
    /// let ids: Vec<_> = (0..3).map(|_| g.add(|| {})).collect();
    /// let named = g.add_named("last", || {});
    /// assert_eq!(ids.iter().map(|id| id.index()).collect::<Vec<_>>(), [0, 1, 2]);
    /// assert_eq!(named.index(), 3);
    /// ```
    pub fn index(self) -> usize {
        self.index as usize
    }

    /// The number of the graph that made it (every graph gets its own).
    ///
    /// ```
    /// let (mut g, mut h) = (sixfold::Graph::new(), sixfold::Graph::new());
    /// let (a, b, c) = (g.add(|| {}), g.add(|| {}), h.add(|| {}));
    /// assert_eq!(a.graph_id(), b.graph_id());
    /// assert_ne!(a.graph_id(), c.graph_id());
    /// let err = g.set_name(c, "x").unwrap_err();
    /// let expected = format!("node 0 belongs to another graph (graph #{})", c.graph_id());
    /// assert_eq!(err.to_string(), expected);
    /// ```
    pub fn graph_id(self) -> u64 {
        self.graph
    }
}
