//! Running a built graph on the six-rule loop.
//!
//! A run resets nothing up front: every node's `pending` already equals its
//! in-degree. The roots are routed like any ready node; a worker runs a
//! node, then decrements its successors. A successor with in-degree one is
//! ready without an atomic operation (its only predecessor just finished);
//! the ready successor that may run here and lies nearest to the node in
//! the graph's storage is handed back as rule 2,
//! the others are routed by their dispatch and affinity. A node restores
//! its own `pending` when it starts. Nodes without successors (sinks)
//! release the run's latch; the caller waits on it, working if it is a
//! worker.
//!
//! Cancellation and panics do not stop the walk: a node that starts after
//! the token fired skips its body but still completes, so every node starts
//! exactly once per run and the counts are whole again when the run ends.
//!
//! Invariants: nothing here touches graph memory after its last decrement
//! of a successor's count, or after releasing the latch (the run may be
//! over and the graph freed at once). Children spawned through a
//! `Subflow` (`subflow.rs`) complete their node when the last one ends.

use super::access::{count_at, index_of, last_worker_at, link_at, node_at, placement_at};
use super::build::Graph;
use super::error::GraphError;
use super::node::{
    LONG, Link, NO_AFFINITY, NO_SUCCESSOR, NO_WORKER, Node, PAIR, Placement, RunShared, Subflow,
};
use super::pending;
use crate::observe::stats::Rule;
use crate::platform::latch::CountLatch;
use crate::platform::prefetch::prefetch_for_write;
use crate::platform::unwind;
use crate::queues::dispatch::{Dispatch, STRICT_AFFINITY, SharedPlace};
use crate::queues::region::{self, Region};
use crate::worker::entry::Entry;
use crate::worker::thread::Registry;
use crate::worker::thread::WorkerThread;
use crate::worker::thread::{JobRef, Next};
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Where node `index` should run: its own affinity, else with replay on
/// the worker that ran it last, else anywhere.
///
/// # Safety
/// `index` is a node of the graph whose run `shared` describes.
#[inline]
unsafe fn preferred_worker(
    shared: &RunShared,
    index: usize,
    placement: Placement,
    replay: bool,
) -> Option<usize> {
    if placement.affinity != NO_AFFINITY {
        return Some((placement.affinity & !STRICT_AFFINITY) as usize);
    }
    if replay {
        // SAFETY: the caller's; a replaying run sized the array.
        let last = unsafe { last_worker_at(shared, index) }.load(Ordering::Relaxed);
        if last != NO_WORKER {
            return Some(last as usize);
        }
    }
    None
}

/// Send ready node `index` where its placement says: its worker alone for
/// a strict affinity, else by `Registry::route`.
///
/// # Safety
/// `index` is a ready node of the graph whose run `run` describes. The
/// run may end as soon as the node is routed: `run` is a pointer.
#[inline]
unsafe fn route_node(
    registry: &Arc<Registry>,
    run: NonNull<RunShared>,
    index: usize,
    placement: Placement,
    affinity: Option<usize>,
    here: Option<&WorkerThread>,
) {
    // SAFETY: the caller's: the unrouted node keeps the run alive.
    let shared = unsafe { run.as_ref() };
    // SAFETY: the caller's.
    let job = node_job(unsafe { node_at(shared, index) }, shared.region());
    if placement.affinity != NO_AFFINITY
        && placement.affinity & STRICT_AFFINITY != 0
        && let Some(worker) = affinity
        && registry.route_strict_if_possible(job, worker)
    {
        return;
    }
    // The pointer, not `shared`, goes into the closure: `route` pushes the
    // node (and the run may end) before it returns. The closure runs
    // before the push, except from outside the pool (`start`, whose hold
    // on the latch keeps the run alive until it has routed every root).
    registry.route(job, placement.dispatch, affinity, here, || SharedPlace {
        priority: placement.priority,
        // SAFETY: called before the node is pushed, which keeps the run.
        ..unsafe { run.as_ref() }.used_shared_queue.note()
    });
}

/// The job of a ready node of a run in isolation region `region`.
#[inline]
pub(super) fn node_job(node: &Node<'_>, region: Region) -> JobRef {
    // SAFETY: the node lives until the run ends; it is ready, so exactly
    // one job for it exists in this run.
    unsafe { JobRef::new(NonNull::from(node).cast(), execute_node, region) }
}

/// Run a ready node and, while each node makes a successor ready that may
/// run here, that successor (rule 2), without going back through the
/// worker loop: a chain runs as one tight loop.
unsafe fn execute_node(this: NonNull<()>, worker: &WorkerThread) -> Option<Next> {
    // SAFETY: a node job points at a node of a graph that is running. Its
    // borrow `'a` is erased to `'static`: the run ends before `'a` does.
    let node = unsafe { this.cast::<Node<'static>>().as_ref() };
    if worker.tracing() {
        // SAFETY: as above.
        return unsafe { execute_traced(this.cast(), worker) };
    }
    // Read once per job, not per node: a chain is a hot loop, and every
    // node of a run points at the same run state. Copied out of the node
    // now, while the node keeps the run alive: once a chain hands its last
    // node elsewhere, the run may end and the graph be freed, and only this
    // pointer, no reference, may be left in hand (`release_sinks`).
    let run = node.shared;
    // SAFETY: the run state outlives the graph's nodes.
    let shared = unsafe { run.as_ref() };
    // SAFETY: `node` is a node of the running graph.
    let mut index = unsafe { index_of(shared, node) };
    let mut sinks = 0;
    loop {
        if shared.replay() {
            // SAFETY: as below.
            unsafe { run_chain::<true>(index, run, worker, &mut sinks) }
        } else {
            // SAFETY: node `index` is ready (its job was taken, or popped
            // below); `shared` is its graph's run state.
            unsafe { run_chain::<false>(index, run, worker, &mut sinks) }
        }
        if sinks == 0 {
            break;
        }
        // The chain ended at a sink, whose unit of the run's latch we hold
        // (a tree has a sink per leaf, and every release is a locked write
        // to one line, which two workers would pass back and forth leaf
        // after leaf: two workers ran a binary tree slower than one). Rule
        // 3 here, as the worker's loop would take it next: while the
        // newest job of our deque is a node of this run, run it and keep
        // counting. The run cannot end before those nodes ran, so holding
        // the units meanwhile delays nobody; anything else, or an empty
        // deque, and they are released first.
        let Some(job) = worker.pop_own_task_in_main_loop(|job| {
            // SAFETY: tested first: a plain `execute_node` job, popped.
            job.is_plain_run_by(execute_node)
                && unsafe { node_of(job) }.shared == NonNull::from(shared)
        }) else {
            break;
        };
        worker.count_task(Rule::OwnDeque);
        // SAFETY: as in the test above; the job is ours to run, once.
        index = unsafe { index_of(shared, node_of(&job)) };
    }
    // SAFETY: the units of the sinks run above, and the last touch of the
    // run (it may end at once).
    unsafe { release_sinks(run, sinks) };
    None
}

/// The node of a graph-node job.
///
/// # Safety
/// `job` is a plain `execute_node` job (`JobRef::is_plain_run_by`) that
/// the caller holds (popped, not run): it points at a node of a running
/// graph.
#[inline(always)]
unsafe fn node_of(job: &JobRef) -> &'static Node<'static> {
    // SAFETY: the caller's.
    unsafe { job.pointer().cast::<Node<'static>>().as_ref() }
}

/// Release the run's latch for `sinks` sinks that finished.
///
/// `run` is a pointer, not a reference, and the caller must not make it
/// from one it still holds: with no sink held, the run may have ended on
/// another thread already and its state be freed, and a reference
/// asserts the state live where it is passed or converted (Miri saw both
/// races). It is read only while a sink's unit still holds the run open.
///
/// # Safety
/// The caller ran those sinks and released none of them, and touches
/// nothing of the run after: the last release ends it.
#[inline]
pub(super) unsafe fn release_sinks(run: NonNull<RunShared>, sinks: usize) {
    if sinks > 0 {
        // SAFETY: our sinks' units keep the run, and so its state, alive
        // until the release below.
        let latch = unsafe { run.as_ref() }.latch.load(Ordering::Relaxed);
        // SAFETY: the latch lives on the caller's frame until its count,
        // which includes these sinks, reaches zero.
        unsafe { CountLatch::release_many(latch, sinks) };
    }
}

/// Run node `index` and each successor it hands back (rule 2). One copy
/// per `REPLAY` (whether the run records and follows the workers of the
/// last run): the flag is fixed for a run, and a chain pays no test for it.
///
/// This and the functions it calls take the run state as a pointer: a
/// reference argument would assert it live until they return, and the run
/// may end on another worker as soon as they route the last node they hold.
///
/// # Safety
/// Node `index` is ready, and this is its only execution in this run;
/// `run` is the run state of its graph.
#[inline(always)]
unsafe fn run_chain<const REPLAY: bool>(
    mut index: usize,
    run: NonNull<RunShared>,
    worker: &WorkerThread,
    sinks: &mut usize,
) {
    loop {
        // SAFETY: the caller's, then `complete`'s: it hands back a ready
        // node that nobody else will run.
        match unsafe { run_node::<REPLAY>(index, run, worker, sinks) } {
            Some(next) => {
                worker.count_task(Rule::Successor);
                index = next;
            }
            None => return,
        }
    }
}

/// With tracing on: the same tight loop, with a record a node, named after
/// the node (the job's record, opened by the worker loop, is cut at each
/// successor: `WorkerThread::trace_next_task`).
///
/// The node comes as a pointer, as the run state does (`run_chain`): a
/// reference argument would assert the graph's node array live until
/// this returns, past the run's end.
///
/// # Safety
/// `node` points at a ready node of a running graph, run once.
#[cold]
unsafe fn execute_traced(node: NonNull<Node<'static>>, worker: &WorkerThread) -> Option<Next> {
    // SAFETY: the caller's; a local reference, used only while the node
    // keeps the run alive.
    let node = unsafe { node.as_ref() };
    // Copied now, as in `execute_node`.
    let run = node.shared;
    // SAFETY: the run state outlives the graph's nodes.
    let shared = unsafe { run.as_ref() };
    let replay = shared.replay();
    // SAFETY: `node` is an element of the running graph's node array.
    let mut index = unsafe { index_of(shared, node) };
    loop {
        let names = shared.names.load(Ordering::Relaxed).cast_const();
        // SAFETY: `names` has an entry per node while the graph runs, or is
        // empty (no node has a name).
        let name = (index < shared.names_len.load(Ordering::Relaxed))
            .then(|| unsafe { (*names.add(index)).clone() })
            .flatten();
        let mut sinks = 0;
        let next = if replay {
            // SAFETY: node `index` is ready; this is its only execution in
            // this run.
            unsafe { run_node::<true>(index, run, worker, &mut sinks) }
        } else {
            // SAFETY: as above.
            unsafe { run_node::<false>(index, run, worker, &mut sinks) }
        };
        match next {
            Some(succ) => {
                worker.count_task(Rule::Successor);
                worker.trace_next_task(name, Rule::Successor);
                index = succ;
            }
            None => {
                // The job's record, closed by the worker loop, is this
                // node's.
                worker.set_trace_name(name);
                // SAFETY: the sink this node was, if it was one; the run is
                // not touched after.
                unsafe { release_sinks(run, sinks) };
                return None;
            }
        }
    }
}

/// Reset ready node `index`'s count, run its body unless the run is
/// cancelled, and complete it unless children still run. Returns the
/// successor to run next here, if any; a sink is counted in `sinks`
/// (`complete`).
///
/// # Safety
/// Node `index` is ready, and this is its only execution in this run;
/// `run` is the run state of its graph.
#[inline(always)]
unsafe fn run_node<const REPLAY: bool>(
    index: usize,
    run: NonNull<RunShared>,
    worker: &WorkerThread,
    sinks: &mut usize,
) -> Option<usize> {
    // SAFETY: the node keeps the run alive until it completes; not used
    // past the last decrement below.
    let shared = unsafe { run.as_ref() };
    // SAFETY: the caller's: `index` is a node of the running graph, whose
    // arrays all have an entry for it.
    let (node, link) = unsafe { (node_at(shared, index), link_at(shared, index)) };
    if pending::needs_reset(link.in_degree()) {
        // Ready for the next run: nobody decrements it again in this one.
        // SAFETY: as above.
        unsafe { count_at(shared, index) }.store(link.in_degree(), Ordering::Relaxed);
    }
    if REPLAY {
        // SAFETY: as above; a replaying run sized the array.
        unsafe { last_worker_at(shared, index) }.store(worker.index() as u16, Ordering::Relaxed);
    }
    let mut spawned = false;
    if !shared.is_cancelled() {
        let mut subflow = Subflow {
            node,
            // SAFETY: as above.
            children: unsafe { count_at(shared, index) },
            worker,
            is_body: true,
            spawned: false,
        };
        let call = node.call;
        let body = node.body.as_ptr();
        // SAFETY: only the worker running the node touches its body, and a
        // node runs once per run; `call` was made for what `body` holds.
        if let Err(payload) = unwind::halt_unwinding(|| unsafe { call(body, &mut subflow) }) {
            shared.record_panic(payload);
        }
        spawned = subflow.spawned;
    }
    if spawned {
        // SAFETY: as above.
        let children = unsafe { count_at(shared, index) };
        if children.fetch_sub(1, Ordering::AcqRel) != 1 {
            // The last child completes the node.
            return None;
        }
        // Ready for the next run (`pending.rs`).
        children.store(link.in_degree(), Ordering::Relaxed);
    }
    // SAFETY: the node's body and children are done: it completes once.
    unsafe { complete::<REPLAY>(index, link, run, worker, sinks) }
}

/// How many nodes past itself, in the graph's storage, a finishing node
/// asks for a line. A graph larger than the caches is walked along its
/// storage (rule 2 keeps the nearest successor), and with the counts and
/// links kept apart a node's line is first touched when it runs: in a
/// chain or along a grid's row, a few nodes ahead is where the walk goes
/// next. The distance must cover a miss to the far cache or memory at a
/// few nanoseconds a node: 8 lines ahead was enough on Zen 4 machines,
/// but on a Xeon with a large, slow shared cache a chain still stalled on
/// its successor's line, and 2 KiB ahead (64 nodes of 32 bytes) keeps it
/// fed. A useless prefetch (a tree, whose successors lie elsewhere) costs
/// one instruction.
const PREFETCH_AHEAD: usize = 64;

/// Node `index` finished: decrement its successors, hand back the one it
/// made ready that may run here and lies nearest to it in storage (rule
/// 2), route the rest; or, for a sink, count it in `sinks`, for the caller
/// to release the run's latch.
///
/// # Safety
/// Called once per node and run, when its body and children are done;
/// `link` is its link; `run` is the run state of its graph, a pointer
/// (`run_chain`).
#[inline(always)]
pub(super) unsafe fn complete<const REPLAY: bool>(
    index: usize,
    link: Link,
    run: NonNull<RunShared>,
    worker: &WorkerThread,
    sinks: &mut usize,
) -> Option<usize> {
    // SAFETY: the node keeps the run alive until its last successor is
    // decremented; not used past that.
    let shared = unsafe { run.as_ref() };
    let next = link.next;
    if next == NO_SUCCESSOR {
        // The caller releases the run's latch for it (`release_sinks`).
        *sinks += 1;
        return None;
    }
    let nodes = shared.nodes.load(Ordering::Relaxed).cast_const();
    // A hint only: the address may lie past the array (never read).
    prefetch_for_write(nodes.wrapping_add(index + PREFETCH_AHEAD));
    if !REPLAY && next & LONG == 0 {
        // SAFETY: successor indices are in bounds of the running graph.
        let succ_link = unsafe { link_at(shared, next as usize) };
        // A chain link: our one successor waits for us alone (in-degree
        // one) and goes nowhere in particular (no placement). Its count
        // was never written (`pending.rs`) and it runs next, here (rule 2).
        if succ_link.degree == 1 {
            return Some(next as usize);
        }
    }
    let pair;
    let successors: &[u32] = if next & LONG == 0 {
        std::slice::from_ref(&next)
    } else if next & PAIR != 0 {
        // SAFETY: the pairs array holds this node's pair at that index.
        pair = unsafe {
            *shared
                .pairs
                .load(Ordering::Relaxed)
                .add((next & !(LONG | PAIR)) as usize)
        };
        &pair
    } else {
        let offset = (next & !LONG) as usize;
        // SAFETY: the pool holds this node's list at that offset: its
        // length, then its successors. Safe to read between decrements:
        // while one is left to decrement, some sink cannot finish, so the
        // run cannot end.
        unsafe {
            let pool = shared.successor_pool.load(Ordering::Relaxed).cast_const();
            std::slice::from_raw_parts(pool.add(offset + 1), *pool.add(offset) as usize)
        }
    };
    let here = worker.index();
    let exclusive = shared.exclusive.load(Ordering::Relaxed);
    let mut kept: Option<(usize, Placement, Option<usize>)> = None;
    for &succ in successors {
        let succ = succ as usize;
        // SAFETY: successor indices are in bounds of the running graph.
        if !pending::arrive(unsafe { count_at(shared, succ) }, exclusive) {
            continue;
        }
        // Ready: the first touch of its node in this run.
        // SAFETY: as above.
        let placement = unsafe { placement_at(shared, succ) };
        // SAFETY: as above.
        let affinity = unsafe { preferred_worker(shared, succ, placement, REPLAY) };
        let local = placement.dispatch == Dispatch::Spawn && affinity.is_none_or(|a| a == here);
        // Rule 2 keeps the local successor nearest to this node in the
        // graph's storage, the rest go to the deque: the walk follows the
        // memory layout (a grid runs along its rows, a tree down its
        // first children) whatever order the edges were added in.
        let route = match kept {
            _ if !local => (succ, placement, affinity),
            None => {
                kept = Some((succ, placement, affinity));
                continue;
            }
            // The one not kept goes where its placement says: a local
            // node may still have affinity for this worker (its mailbox).
            Some(old) if succ.abs_diff(index) < old.0.abs_diff(index) => {
                kept = Some((succ, placement, affinity));
                old
            }
            Some(_) => (succ, placement, affinity),
        };
        // SAFETY: `route.0` is ready, and routed once.
        unsafe {
            route_node(
                worker.registry(),
                run,
                route.0,
                route.1,
                route.2,
                Some(worker),
            )
        };
    }
    kept.map(|(succ, _, _)| succ)
}

/// `Pool::run_graph`: run every node of `graph` once, in dependency order.
pub(crate) fn run_graph(registry: &Arc<Registry>, graph: &mut Graph<'_>) -> Result<(), GraphError> {
    graph.refresh_shape();
    if graph.nodes.is_empty() {
        return Ok(());
    }
    if let Some((worker, node)) = graph.max_affinity
        && worker as usize >= registry.num_slots()
    {
        return Err(GraphError::AffinityOutOfRange {
            node: graph.label(node as usize),
            worker: worker as usize,
            num_workers: registry.num_slots(),
        });
    }
    graph.size_run_arrays(graph.shared.replay());
    let shared = &*graph.shared;
    // One slot: a 1-thread pool's worker, or a 0-thread pool's guest (one
    // caller at a time); outside callers of a 1-thread pool only wait.
    shared
        .exclusive
        .store(registry.num_slots() == 1, Ordering::Relaxed);
    shared
        .nodes
        .store(graph.nodes.as_ptr().cast_mut().cast(), Ordering::Relaxed);
    shared
        .links
        .store(graph.links.as_ptr().cast_mut(), Ordering::Relaxed);
    shared
        .placement
        .store(graph.placement.as_ptr().cast_mut(), Ordering::Relaxed);
    shared
        .last_worker
        .store(graph.last_worker.as_ptr().cast_mut(), Ordering::Relaxed);
    shared
        .pairs
        .store(graph.pairs.as_ptr().cast_mut(), Ordering::Relaxed);
    shared
        .successor_pool
        .store(graph.successor_pool.as_ptr().cast_mut(), Ordering::Relaxed);
    shared
        .pending
        .store(graph.pending.as_ptr().cast_mut(), Ordering::Relaxed);
    shared
        .names
        .store(graph.trace_names.as_ptr().cast_mut(), Ordering::Relaxed);
    shared
        .names_len
        .store(graph.trace_names.len(), Ordering::Relaxed);
    shared.used_shared_queue.reset();
    registry.enter(StartRoots {
        shared,
        roots: &graph.roots,
        sinks: graph.sinks,
    });
    // Every node ran (or was skipped): take the outcome, and clear the
    // token so the graph can run again.
    let panic = shared.panic.lock().take();
    let cancelled = shared.cancel.swap(false, Ordering::Relaxed);
    if let Some(payload) = panic {
        unwind::resume_unwinding(payload);
    }
    if cancelled {
        Err(GraphError::Cancelled)
    } else {
        Ok(())
    }
}

/// What a graph run starts: its roots, with the caller's hold on the
/// latch for every sink.
struct StartRoots<'g> {
    shared: &'g RunShared,
    roots: &'g [u32],
    sinks: usize,
}

impl Entry for StartRoots<'_> {
    type Output = ();

    fn on_worker(self, worker: &WorkerThread) {
        let StartRoots {
            shared,
            roots,
            sinks,
        } = self;
        let registry = worker.registry();
        shared
            .region
            .store(worker.region().to_bits(), Ordering::Relaxed);
        let latch = CountLatch::for_worker(registry.wake_owner(worker.index()));
        worker.prepare_wait(&shared.used_shared_queue);
        start(registry, shared, &latch, roots, sinks, Some(worker));
        worker.wait_until(
            latch.as_core().expect("a worker's latch"),
            Some(&shared.used_shared_queue),
        );
    }

    /// The roots go straight to the pool's queues; the caller blocks.
    fn blocking_outside(self, registry: &Arc<Registry>) {
        let shared = self.shared;
        shared
            .region
            .store(region::outside_current().to_bits(), Ordering::Relaxed);
        shared.blocking.reset();
        let latch = CountLatch::for_thread_with(shared.blocking.clone());
        start(registry, shared, &latch, self.roots, self.sinks, None);
        latch.wait_blocking();
    }
}

/// Publish the latch, route the roots, drop the caller's hold.
fn start(
    registry: &Arc<Registry>,
    shared: &RunShared,
    latch: &CountLatch,
    roots: &[u32],
    sinks: usize,
    here: Option<&WorkerThread>,
) {
    latch.add(sinks);
    shared
        .latch
        .store(ptr::from_ref(latch).cast_mut(), Ordering::Relaxed);
    for &r in roots {
        let r = r as usize;
        // SAFETY: root indices are in bounds of the running graph, and a
        // root is ready, routed once.
        unsafe {
            let placement = placement_at(shared, r);
            let affinity = preferred_worker(shared, r, placement, shared.replay());
            route_node(
                registry,
                NonNull::from(shared),
                r,
                placement,
                affinity,
                here,
            );
        }
    }
    // SAFETY: the latch lives on the caller's frame until after its wait.
    unsafe { CountLatch::release(latch) };
}
