//! What a node's body may do besides its own work: spawn children
//! (`Subflow::spawn`), which its successors wait for. Children are jobs on
//! the worker's deque (idle workers may steal them); the node's
//! predecessor count, unused while it runs, counts its body and its
//! unfinished children (`pending.rs`), and the child that ends last
//! restores it and completes the node.
//!
//! Invariant: a child job runs once, before its graph's run ends; the
//! count of a node with children reaches zero exactly once per run.

use super::access::{count_at, index_of, link_at, node_at};
use super::node::{Node, Subflow};
use super::run::{complete, node_job, release_sinks};
use crate::observe::stats::Rule;
use crate::platform::unwind;
use crate::worker::thread::WorkerThread;
use crate::worker::thread::{JobRef, Next};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

impl<'a> Subflow<'_, 'a> {
    /// Run `f` as a child of this node, on this worker's deque (so idle
    /// workers may steal it). The node's successors start only after every
    /// child, and every child's children, finished. A panic in a child
    /// cancels the rest of the run and is resumed by `run_graph`.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    /// # let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let data: &[u64] = &(1..=1000).collect::<Vec<_>>();
    /// let total = &AtomicU64::new(0);
    /// let mut reported = 0;
    /// let mut g = sixfold::Graph::new();
    /// let sum = g.add_subflow(move |sf| {
    ///     for chunk in data.chunks(100) {
    ///         sf.spawn(move |_| { total.fetch_add(chunk.iter().sum(), Relaxed); });
    ///     }
    /// });
    /// let report = g.add(|| reported = total.load(Relaxed));
    /// g.precede(sum, report).unwrap();
    /// pool.run_graph(&mut g).unwrap();
    /// drop(g);
    /// assert_eq!(reported, 500_500); // every child finished before `report`
    /// ```
    pub fn spawn<F>(&mut self, f: F)
    where
        F: FnOnce(&mut Subflow<'_, 'a>) + Send + 'a,
    {
        if self.is_body && !self.spawned {
            // The body's own unit plus this child's. Nothing else touches
            // the count until the child is pushed below.
            self.children.store(2, Ordering::Relaxed);
        } else {
            // We hold a unit, so the count cannot reach zero meanwhile.
            self.children.fetch_add(1, Ordering::Relaxed);
        }
        self.spawned = true;
        let job = Box::new(ChildJob {
            node: NonNull::from(self.node),
            f,
        });
        // SAFETY: the box is leaked into the job, which frees it when it
        // runs (once); the node outlives the job because `run_graph` waits
        // for the node, which waits for this child.
        let job_ref = unsafe {
            JobRef::new(
                NonNull::from(Box::leak(job)).cast(),
                ChildJob::<'a, F>::execute,
                self.worker.region(),
            )
        };
        self.worker.push(job_ref);
    }

    /// The index of the worker running this body.
    ///
    /// ```
    /// # let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut seen = None;
    /// let mut g = sixfold::Graph::new();
    /// let node = g.add_subflow(|sf| seen = Some((sf.worker_index(), sixfold::current_worker())));
    /// g.set_strict_affinity(node, 1).unwrap(); // on worker 1 and nowhere else
    /// pool.run_graph(&mut g).unwrap();
    /// drop(g);
    /// assert_eq!(seen, Some((1, Some(1))));
    /// ```
    pub fn worker_index(&self) -> usize {
        self.worker.index()
    }
}

/// A child spawned through a `Subflow`.
struct ChildJob<'a, F> {
    node: NonNull<Node<'a>>,
    f: F,
}

impl<'a, F> ChildJob<'a, F>
where
    F: FnOnce(&mut Subflow<'_, 'a>) + Send + 'a,
{
    unsafe fn execute(this: NonNull<()>, worker: &WorkerThread) -> Option<Next> {
        // SAFETY: made by `Subflow::spawn` from a leaked box; run once,
        // before `run_graph` returns, so while `'a` is alive.
        let ChildJob { node, f } = *unsafe { Box::from_raw(this.cast::<Self>().as_ptr()) };
        // SAFETY: the node lives until the run ends, which waits for us.
        let node = unsafe { node.as_ref() };
        // Copied now: once this completes the node the run may end, and
        // only this pointer may be left in hand (`run::release_sinks`).
        let run = node.shared;
        // SAFETY: the run state outlives the graph's nodes.
        let shared = unsafe { run.as_ref() };
        // SAFETY: `node` is a node of the running graph.
        let index = unsafe { index_of(shared, node) };
        // The node's count holds its children while it runs.
        // SAFETY: as above.
        let children = unsafe { count_at(shared, index) };
        if shared.is_cancelled() {
            drop(f);
        } else {
            let mut subflow = Subflow {
                node,
                children,
                worker,
                is_body: false,
                spawned: false,
            };
            if let Err(payload) = unwind::halt_unwinding(|| f(&mut subflow)) {
                shared.record_panic(payload);
            }
        }
        if children.fetch_sub(1, Ordering::AcqRel) == 1 {
            let mut sinks = 0;
            // SAFETY: as above.
            let link = unsafe { link_at(shared, index) };
            // Ready for the next run (`pending.rs`).
            children.store(link.in_degree(), Ordering::Relaxed);
            let succ = if shared.replay() {
                // SAFETY: the last unit of the node: it completes now, once.
                unsafe { complete::<true>(index, link, run, worker, &mut sinks) }
            } else {
                // SAFETY: as above.
                unsafe { complete::<false>(index, link, run, worker, &mut sinks) }
            };
            // Made before the release below: the run may end at once.
            // SAFETY: the successor is a node of the running graph.
            let next = succ.map(|succ| Next {
                job: node_job(unsafe { node_at(shared, succ) }, shared.region()),
                rule: Rule::Successor,
            });
            // SAFETY: `sinks` counts the sink this was, if it was one, and
            // nothing of the run is touched after.
            unsafe { release_sinks(run, sinks) };
            next
        } else {
            None
        }
    }
}
