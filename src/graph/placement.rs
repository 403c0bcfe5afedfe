//! Where and how a graph's nodes run: dispatch (spawn or enqueue),
//! affinity (a preferred worker, or strictly one), priority, and affinity
//! replay. Each setter checks the node belongs to the graph; a change of
//! affinity marks the graph for the per-run check against the pool's
//! workers (`max_affinity`), which is where an out-of-range worker is
//! refused, before anything runs. A placement lives in `Graph::placement`
//! (made at the first setter), and a run reads it only for the nodes whose
//! link is marked `PLACED`: the others pay nothing for it.

use super::build::Graph;
use super::error::GraphError;
use super::node::{NO_AFFINITY, NodeId, PLACED, Placement};
use crate::queues::dispatch::{Dispatch, Priority, STRICT_AFFINITY};

impl<'a> Graph<'a> {
    /// Where `node` goes when it becomes ready and its worker does not run
    /// it at once: [`Dispatch::Spawn`] (the default) or
    /// [`Dispatch::Enqueue`] (the shared queue: fair, for work that must
    /// not wait behind a long local backlog).
    ///
    /// ```
    /// use sixfold::{Dispatch, Rule};
    /// # let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut g = sixfold::Graph::new();
    /// let (a, b) = (g.add(|| {}), g.add(|| {}));
    /// g.precede(a, b).unwrap();
    /// let before = pool.stats();
    /// pool.run_graph(&mut g).unwrap();
    /// // Spawn: `b` runs right after `a`, on a's worker (rule 2).
    /// assert_eq!(pool.stats().since(&before).by_rule(Rule::Successor), 1);
    /// g.set_dispatch(b, Dispatch::Enqueue).unwrap();
    /// let before = pool.stats();
    /// pool.run_graph(&mut g).unwrap();
    /// // Enqueue: `b` goes through the shared queue, never by rule 2.
    /// assert_eq!(pool.stats().since(&before).by_rule(Rule::Successor), 0);
    /// ```
    pub fn set_dispatch(&mut self, node: NodeId, dispatch: Dispatch) -> Result<(), GraphError> {
        let i = self.check(node)?;
        self.placement_mut(i).dispatch = dispatch;
        Ok(())
    }

    /// Prefer worker `worker` for `node` (`None`: anywhere). Like any task
    /// with affinity it goes to that worker's mailbox (rule 4) and, as a
    /// proxy, where other workers can reach it: it runs on its worker when
    /// that worker is free or working through its mailbox, and elsewhere
    /// only if the worker stays stuck on other work (see `Pool::
    /// spawn_with_affinity`). An index the pool does not have is reported
    /// by `run_graph` as [`GraphError::AffinityOutOfRange`].
    ///
    /// ```
    /// use sixfold::GraphError;
    /// # let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut runs = 0;
    /// let mut g = sixfold::Graph::new();
    /// let upload = g.add_named("upload", || runs += 1);
    /// g.set_affinity(upload, Some(1)).unwrap(); // worker 1 if it is free
    /// pool.run_graph(&mut g).unwrap();
    /// g.set_affinity(upload, Some(2)).unwrap(); // the pool has workers 0 and 1
    /// let err = pool.run_graph(&mut g).unwrap_err();
    /// assert!(matches!(err, GraphError::AffinityOutOfRange { worker: 2, num_workers: 2, .. }));
    /// g.set_affinity(upload, None).unwrap();
    /// pool.run_graph(&mut g).unwrap();
    /// drop(g);
    /// assert_eq!(runs, 2); // the refused run ran nothing
    /// ```
    pub fn set_affinity(&mut self, node: NodeId, worker: Option<usize>) -> Result<(), GraphError> {
        let i = self.check(node)?;
        self.placement_mut(i).affinity = match worker {
            // Beyond u32 is out of range for every pool; keep it visible.
            Some(w) => u32::try_from(w).unwrap_or(u32::MAX - 1).min(u32::MAX - 1),
            None => NO_AFFINITY,
        };
        self.affinity_dirty = true;
        self.shape_dirty = true;
        Ok(())
    }

    /// The [`Priority`] of a node dispatched to the shared queue
    /// ([`Dispatch::Enqueue`]): rule 5 takes high-priority tasks first.
    ///
    /// ```
    /// use sixfold::{Dispatch, Priority};
    /// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
    /// let mut g = sixfold::Graph::new();
    /// let urgent = g.add(|| ());
    /// g.set_dispatch(urgent, Dispatch::Enqueue).unwrap();
    /// g.set_priority(urgent, Priority::High).unwrap();
    /// pool.run_graph(&mut g).unwrap();
    /// ```
    pub fn set_priority(&mut self, node: NodeId, priority: Priority) -> Result<(), GraphError> {
        let i = self.check(node)?;
        self.placement_mut(i).priority = priority;
        Ok(())
    }

    /// Strict affinity: the node runs on worker `worker` and nowhere else.
    /// It reaches that worker through its mailbox only (rule 4), with no
    /// proxy, so no other worker ever takes it, however long that worker
    /// stays busy; a worker waiting inside a task still takes its mailbox,
    /// so a strict node for a waiting worker runs inside that wait. For
    /// thread-bound resources (a GPU context, a handle kept per worker).
    /// `set_affinity(node, None)` removes it; an index the pool does not
    /// have is reported by `run_graph` as
    /// [`GraphError::AffinityOutOfRange`]. (In a pool of zero threads, whose
    /// only worker is whoever calls into it, it is an ordinary affinity.)
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut ran_on = None;
    /// let mut g = sixfold::Graph::new();
    /// let node = g.add(|| ran_on = sixfold::current_worker());
    /// g.set_strict_affinity(node, 1).unwrap();
    /// pool.run_graph(&mut g).unwrap();
    /// drop(g);
    /// assert_eq!(ran_on, Some(1));
    /// ```
    pub fn set_strict_affinity(&mut self, node: NodeId, worker: usize) -> Result<(), GraphError> {
        self.set_affinity(node, Some(worker))?;
        let i = self.check(node)?;
        let index = &mut self.placement_mut(i).affinity;
        *index = (*index).min(STRICT_AFFINITY - 1) | STRICT_AFFINITY;
        Ok(())
    }

    /// Affinity replay (oneTBB's `affinity_partitioner` idea, which its flow
    /// graph lacks): with `true`, each node without an affinity of its own
    /// prefers, on the next run, the worker that ran it last time, so data
    /// a node left in that core's cache is still there. The preference
    /// works like [`set_affinity`](Self::set_affinity): a busy worker's
    /// nodes are taken by others.
    ///
    /// Replay pays when a node's data outweighs a hand-over through a
    /// mailbox: on a 1024 x 1024 wavefront whose nodes each touch one
    /// 64-byte cell, runs took 1.4 to 2 times as long with replay as without
    /// (`graph_wavefront_replay` in BENCHMARKS.md).
    ///
    /// ```
    /// use std::sync::Mutex;
    /// # let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let workers = Mutex::new(Vec::new());
    /// let mut g = sixfold::Graph::new();
    /// g.set_affinity_replay(true);
    /// let first = g.add(|| {});
    /// let pinned = g.add(|| workers.lock().unwrap().push(sixfold::current_worker()));
    /// g.precede(first, pinned).unwrap();
    /// g.set_strict_affinity(pinned, 1).unwrap(); // its own affinity wins over replay
    /// pool.run_graph_n(&mut g, 5).unwrap();
    /// assert_eq!(*workers.lock().unwrap(), [Some(1); 5]);
    /// ```
    pub fn set_affinity_replay(&mut self, replay: bool) {
        self.shared.set_replay(replay);
    }
}

impl Graph<'_> {
    /// Node `i`'s placement (the default if it has none).
    pub(super) fn placement_of(&self, i: usize) -> Placement {
        if self.links[i].placed() {
            self.placement[i]
        } else {
            Placement::DEFAULT
        }
    }

    /// Node `i`'s placement, to change it: from now on runs read it.
    pub(super) fn placement_mut(&mut self, i: usize) -> &mut Placement {
        if self.placement.len() < self.nodes.len() {
            self.placement.resize(self.nodes.len(), Placement::DEFAULT);
        }
        self.links[i].degree |= PLACED;
        &mut self.placement[i]
    }
}
