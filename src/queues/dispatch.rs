//! Which queue a ready task goes to when it is not run at once: the
//! choice between `spawn` and `enqueue`.

/// Where a ready task or graph node goes when the worker that made it ready
/// does not run it at once (rules 1 and 2).
///
/// ```
/// use sixfold::{Dispatch, Rule};
/// let pool = sixfold::Pool::builder().num_threads(1).trace(true).build().unwrap();
/// let mut g = sixfold::Graph::new();
/// let load = g.add_named("load", || {});
/// let report = g.add_named("report", || {});
/// g.precede(load, report).unwrap();
/// assert_eq!(Dispatch::default(), Dispatch::Spawn);
/// g.set_dispatch(report, Dispatch::Enqueue).unwrap();
/// pool.run_graph(&mut g).unwrap();
/// let trace = pool.take_trace();
/// let report = trace.tasks.iter().find(|t| t.name.as_deref() == Some("report")).unwrap();
/// assert_eq!(report.rule, Rule::SharedQueue); // not rule 2, though `load` made it ready
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Dispatch {
    /// The deque of the worker that made it ready: LIFO, cache-warm, and
    /// stolen by idle workers (rules 3 and 6). The default.
    #[default]
    Spawn,
    /// The shared queue: approximately FIFO, fair, and guaranteed to run
    /// eventually even while every worker has local work (rule 5). A node
    /// with this dispatch is never run by rule 2.
    Enqueue,
}

/// In an affinity kept as a `u32` worker index (task and graph nodes), the
/// bit that makes it *strict*: the task runs on that worker and nowhere
/// else, reached through its mailbox only (no proxy), so no other worker
/// ever takes it. Worker indices stay far below it.
pub(crate) const STRICT_AFFINITY: u32 = 1 << 31;

/// How urgent an enqueued task is (classic TBB's enqueue priorities): rule
/// 5 takes a high-priority task before any normal one, and a low-priority
/// one only when no high or normal task is waiting. Within a priority the
/// order stays approximately FIFO.
///
/// What it does not promise: no preemption (a running task finishes; a
/// high-priority task waits for a free worker like any other), it orders
/// only the shared queue (rule 5 comes after a worker's own deque and
/// mailbox), and a low-priority task may wait as long as higher ones keep
/// coming (no starvation-freedom for low).
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
/// let (tx, rx) = std::sync::mpsc::channel();
/// pool.install(|| {
///     for (name, priority) in [("low", sixfold::Priority::Low), ("normal", sixfold::Priority::Normal), ("high", sixfold::Priority::High)] {
///         let tx = tx.clone();
///         pool.enqueue_with_priority(priority, move || tx.send(name).unwrap());
///     }
/// });
/// pool.wait_idle();
/// drop(tx);
/// assert_eq!(rx.iter().collect::<Vec<_>>(), ["high", "normal", "low"]);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Priority {
    /// Before every normal and low task.
    High,
    /// The default.
    #[default]
    Normal,
    /// Only when no high or normal task waits.
    Low,
}

/// Where a task bound for the shared queue goes: a nested wait's kept-apart
/// lane (`wait_key` not zero), else the lane of its priority.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SharedPlace {
    pub(crate) wait_key: u64,
    pub(crate) priority: Priority,
}

impl SharedPlace {
    /// A normal task of no nested wait.
    pub(crate) const PLAIN: SharedPlace = SharedPlace {
        wait_key: 0,
        priority: Priority::Normal,
    };

    /// The kept-apart lane of `wait_key` (0: the normal lanes).
    pub(crate) fn kept_apart(wait_key: u64) -> SharedPlace {
        SharedPlace {
            wait_key,
            priority: Priority::Normal,
        }
    }
}
