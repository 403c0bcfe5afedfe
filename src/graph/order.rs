//! The builder's cycle check: a topological order kept as edges arrive
//! (Pearce and Kelly's dynamic topological sort, JEA 2006).
//!
//! Every node has a position; every edge goes from a lower position to a
//! higher one. An edge that agrees with the order cannot close a cycle
//! (every path climbs), so its check is one comparison: building a graph
//! front to back, back to front, or in any order in which nodes are added
//! before their successors costs O(1) an edge. An edge `from -> to` that
//! disagrees searches only the nodes between the two positions: forward
//! from `to` (finding `from` there is a cycle, and the search's parents
//! name it), backward from `from`; then the two sets swap their positions,
//! predecessors' first, so the order holds again.
//!
//! Invariant: `position` is a permutation of `0..len` and a topological
//! order of the graph's edges.

use super::node::{Edge, NO_EDGE, NodeMeta, edge_list};

#[derive(Default)]
pub(super) struct TopoOrder {
    /// Each node's place in the order; empty while that is the order nodes
    /// were added in (until the first edge that disagrees), so that a
    /// graph built in that order never writes it.
    position: Vec<u32>,
    len: usize,
    /// Search scratch, sized on the first search: a visit stamp and the
    /// node the forward search came from, per node.
    stamp: Vec<u32>,
    parent: Vec<u32>,
    next_stamp: u32,
}

impl TopoOrder {
    /// A new node, last in the order (it has no edges yet).
    #[inline]
    pub(super) fn push(&mut self) {
        if !self.position.is_empty() {
            self.position.push(self.len as u32);
        }
        self.len += 1;
    }

    /// Node `n`'s place.
    #[inline]
    fn place(&self, n: u32) -> u32 {
        if self.position.is_empty() {
            n
        } else {
            self.position[n as usize]
        }
    }

    /// Record the edge `from -> to`, reordering if needed. `Err` holds the
    /// path `to ->* from` the edge would close into a cycle; nothing
    /// changes then.
    ///
    /// Inlined: building a graph in an order that agrees with its edges (the
    /// common case: producers added before consumers) costs the comparison
    /// alone, and the search below stays out of the caller's frame.
    #[inline]
    pub(super) fn add_edge(
        &mut self,
        from: u32,
        to: u32,
        meta: &[NodeMeta],
        edges: &[Edge],
    ) -> Result<(), Vec<u32>> {
        let (lower, upper) = (self.place(to), self.place(from));
        if upper < lower {
            return Ok(());
        }
        self.reorder(from, to, lower, upper, meta, edges)
    }

    /// `add_edge` for an edge against the current order: search the nodes
    /// between the two places and move them (or find the cycle).
    #[cold]
    #[inline(never)]
    fn reorder(
        &mut self,
        from: u32,
        to: u32,
        lower: u32,
        upper: u32,
        meta: &[NodeMeta],
        edges: &[Edge],
    ) -> Result<(), Vec<u32>> {
        if self.position.is_empty() {
            self.position.extend(0..self.len as u32);
        }
        self.prepare_search(meta.len());
        let (forward_mark, backward_mark) = (self.next_stamp, self.next_stamp + 1);

        // Forward from `to`, through nodes placed before `from`: a node
        // placed after `from` cannot reach it.
        let mut forward = vec![to];
        self.stamp[to as usize] = forward_mark;
        let mut stack = vec![to];
        while let Some(n) = stack.pop() {
            for e in edge_list(edges, meta[n as usize].first_succ, |e| e.next_succ) {
                let s = e.to;
                if s == from {
                    return Err(self.path_back(to, n, from));
                }
                let seen = self.stamp[s as usize] == forward_mark;
                if !seen && self.position[s as usize] < upper {
                    self.stamp[s as usize] = forward_mark;
                    self.parent[s as usize] = n;
                    forward.push(s);
                    stack.push(s);
                }
            }
        }

        // Backward from `from`, through nodes placed after `to`.
        let mut backward = vec![from];
        self.stamp[from as usize] = backward_mark;
        stack.push(from);
        while let Some(n) = stack.pop() {
            for e in edge_list(edges, meta[n as usize].first_pred, |e| e.next_pred) {
                let p = e.from;
                if self.stamp[p as usize] != backward_mark && self.position[p as usize] > lower {
                    self.stamp[p as usize] = backward_mark;
                    backward.push(p);
                    stack.push(p);
                }
            }
        }

        // The backward set (ancestors of `from`) takes the lowest of the
        // positions the two sets hold, in their old order; the forward set
        // (descendants of `to`) the rest.
        let by_position = |v: &mut Vec<u32>, position: &[u32]| {
            v.sort_unstable_by_key(|&n| position[n as usize]);
        };
        by_position(&mut backward, &self.position);
        by_position(&mut forward, &self.position);
        let mut slots: Vec<u32> = backward
            .iter()
            .chain(&forward)
            .map(|&n| self.position[n as usize])
            .collect();
        slots.sort_unstable();
        for (&n, slot) in backward.iter().chain(&forward).zip(slots) {
            self.position[n as usize] = slot;
        }
        Ok(())
    }

    /// Size the scratch and take two fresh stamps.
    fn prepare_search(&mut self, len: usize) {
        self.stamp.resize(len, 0);
        self.parent.resize(len, NO_EDGE);
        if self.next_stamp >= u32::MAX - 2 {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.next_stamp = 0;
        }
        self.next_stamp += 2;
    }

    /// The path `start ->* last -> end`, from the forward search's parents.
    fn path_back(&self, start: u32, last: u32, end: u32) -> Vec<u32> {
        let mut path = vec![end, last];
        let mut at = last;
        while at != start {
            at = self.parent[at as usize];
            path.push(at);
        }
        path.reverse();
        path
    }
}
