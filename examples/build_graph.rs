//! A small build system as a task graph: compile every source, link the
//! objects, then run the tests, and generate the docs on the side.
//!
//! It shows the two dispatches. Compile and link nodes use the default,
//! `Dispatch::Spawn`: the worker that finishes a node runs the successor it
//! made ready at once (rule 2) or pushes it onto its own deque (rule 3), where
//! an idle worker may steal it (rule 6), so the data a step just produced
//! stays in that worker's cache. The test and docs steps are
//! `Dispatch::Enqueue`: they go to the shared queue (rule 5), which is
//! fair, so a long step is not starved behind a deep local backlog, and in
//! a real build it would not push the next compile off the critical path.
//!
//! The graph is built once and run three times (an incremental build would
//! run it again and again); each run checks that every object was linked.
//! Then it prints the graph in GraphViz DOT (`dot -Tsvg`) and the per-rule
//! table of the last run.
//!
//! Run: `cargo run --release --example build_graph`

use sixfold::{Dispatch, Graph, Pool, Rule};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Stand-in for compiling: hash the "source" many times over.
fn compile(source: &str) -> u64 {
    let mut h = DefaultHasher::new();
    for round in 0..200_000u32 {
        (source, round).hash(&mut h);
    }
    h.finish()
}

fn main() {
    let pool = Pool::new().expect("a pool");
    let sources = [
        "main.c",
        "lexer.c",
        "parser.c",
        "types.c",
        "codegen.c",
        "opt.c",
        "util.c",
        "io.c",
    ];
    // The objects, written by the compile nodes and read by the link node.
    let objects: Vec<AtomicU64> = sources.iter().map(|_| AtomicU64::new(0)).collect();
    let binary = AtomicU64::new(0);
    let log = Mutex::new(Vec::new());

    let mut g = Graph::new();
    let compiles: Vec<_> = sources
        .iter()
        .zip(&objects)
        .map(|(source, object)| {
            g.add_named(format!("compile {source}"), || {
                object.store(compile(source), Ordering::Relaxed);
            })
        })
        .collect();
    let link = g.add_named("link app", || {
        // Every compile precedes the link: all objects are there.
        let image = objects.iter().fold(0u64, |acc, o| {
            acc.rotate_left(5) ^ o.load(Ordering::Relaxed)
        });
        assert!(objects.iter().all(|o| o.load(Ordering::Relaxed) != 0));
        binary.store(image, Ordering::Relaxed);
    });
    let test = g.add_named("run tests", || {
        let ok = binary.load(Ordering::Relaxed) != 0;
        log.lock()
            .unwrap()
            .push(format!("tests: {}", if ok { "passed" } else { "FAILED" }));
    });
    let docs = g.add_named("generate docs", || {
        let pages = sources.len();
        log.lock().unwrap().push(format!("docs: {pages} pages"));
    });
    for &c in &compiles {
        g.precede(c, link).expect("acyclic");
    }
    g.precede(link, test).expect("acyclic");
    g.precede(compiles[0], docs).expect("acyclic");
    g.set_dispatch(test, Dispatch::Enqueue).expect("our node");
    g.set_dispatch(docs, Dispatch::Enqueue).expect("our node");
    // A mistake a build file could make: the link depending on the tests.
    match g.precede(test, link) {
        Err(e) => println!("refused: {e}\n"),
        Ok(()) => unreachable!("a cycle must be refused"),
    }

    let mut last = None;
    for run in 1..=3 {
        log.lock().unwrap().clear();
        let before = pool.stats();
        let start = Instant::now();
        // From a worker, the roots go onto its deque (from outside the pool
        // they would go to the shared queue, as any spawn from outside).
        pool.install(|| pool.run_graph(&mut g))
            .expect("the build runs");
        let took = start.elapsed();
        let mut lines = log.lock().unwrap().clone();
        lines.sort();
        println!(
            "build {run}: {:.1} ms, binary {:016x}, {}",
            took.as_secs_f64() * 1e3,
            binary.load(Ordering::Relaxed),
            lines.join(", ")
        );
        last = Some(pool.stats().since(&before));
    }

    println!("\nThe graph (render with `dot -Tsvg`):\n\n{}", g.to_dot());
    let stats = last.expect("three runs");
    println!("Which rule supplied each task in the last build:\n\n{stats}");
    let local =
        stats.by_rule(Rule::Successor) + stats.by_rule(Rule::OwnDeque) + stats.by_rule(Rule::Steal);
    println!(
        "Rule 5 (the shared queue) supplied {} tasks: the install job that started the\n\
         build, and the enqueued test and docs steps. Rules 2, 3 and 6 supplied the {} spawned\n\
         ones: the compiles, pushed by the starting worker and stolen by the other, and the link.",
        stats.by_rule(Rule::SharedQueue),
        local
    );
}
