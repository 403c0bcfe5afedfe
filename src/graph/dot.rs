//! GraphViz export of a graph: names, dispatch and affinity on each node.

use super::build::Graph;
use super::node::NO_AFFINITY;
use crate::queues::dispatch::{Dispatch, STRICT_AFFINITY};
use std::fmt::Write;

impl Graph<'_> {
    /// The graph in GraphViz DOT: one box per node, labelled with its name
    /// (or `#index`), plus `enqueue` for enqueue dispatch (drawn dashed) and
    /// `@worker k` for affinity; one arrow per edge.
    ///
    /// ```
    /// let mut g = sixfold::Graph::new();
    /// let a = g.add_named("compile a.c", || {});
    /// let link = g.add_named("link", || {});
    /// g.precede(a, link).unwrap();
    /// g.set_dispatch(link, sixfold::Dispatch::Enqueue).unwrap();
    /// g.set_affinity(a, Some(1)).unwrap();
    /// let dot = g.to_dot();
    /// assert!(dot.contains(r#"n0 [label="compile a.c\n@worker 1"]"#));
    /// assert!(dot.contains(r#"n1 [label="link\nenqueue", style=dashed]"#));
    /// assert!(dot.contains("n0 -> n1;"));
    /// ```
    pub fn to_dot(&self) -> String {
        let mut out = String::from("digraph sixfold {\n  node [shape=box];\n");
        for i in 0..self.nodes.len() {
            let node = self.placement_of(i);
            let mut label = escape(&self.label(i));
            if node.dispatch == Dispatch::Enqueue {
                label.push_str("\\nenqueue");
            }
            if node.affinity != NO_AFFINITY {
                let strict = if node.affinity & STRICT_AFFINITY != 0 {
                    " only"
                } else {
                    ""
                };
                let worker = node.affinity & !STRICT_AFFINITY;
                let _ = write!(label, "\\n@worker {worker}{strict}");
            }
            let style = if node.dispatch == Dispatch::Enqueue {
                ", style=dashed"
            } else {
                ""
            };
            let _ = writeln!(out, "  n{i} [label=\"{label}\"{style}];");
        }
        for i in 0..self.meta.len() {
            let mut successors: Vec<u32> = self.successors_of(i).collect();
            successors.reverse();
            for s in successors {
                let _ = writeln!(out, "  n{i} -> n{s};");
            }
        }
        out.push_str("}\n");
        out
    }
}

/// Escape a name for a DOT double-quoted string.
fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}
