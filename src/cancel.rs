//! Cancellation: the token a user fires ([`CancelToken`]), what it fires
//! (`CancelTarget`: a graph run's state, a pipeline's flag, a standalone
//! flag), what a cancellable call returns ([`Cancelled`]) and what a
//! running task asks ([`is_cancelled`]).
//!
//! Below the API layers (graphs, pipelines, scopes and pool runs all
//! take or hand out tokens), above the worker layer (a task asks its
//! worker for the group it runs in).
//!
//! A scope or a run is cancelled (oneTBB's `task_group::cancel`) by
//! `Scope::cancel`, `Context::cancel_run` or a token it was given: that
//! marks its group; its tasks that have not started are dropped unrun
//! when a worker takes them (`fork_join/scope.rs`, `task/node/run.rs`);
//! running ones ask [`is_cancelled`]; the `*_cancellable` calls return
//! [`Cancelled`]. A scope or run made by a task (or scope body) of another
//! is its child (`Group::set_parent`, from the worker's
//! `cancel_context`), and a group counts as cancelled when it or any
//! ancestor is; the ancestor outlives the child, whose waiter runs inside
//! the ancestor's task.
//!
//! Invariant: every task of a cancelled group still releases its unit
//! (dropped or run), so every wait returns as always: a cancel never loses
//! a unit and never runs a task twice. A graph's or a pipeline's token is
//! cleared when its run returns.

use crate::worker::thread::WorkerThread;
use crossbeam_utils::CachePadded;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a [`CancelToken`] fires.
pub(crate) trait CancelTarget: Send + Sync {
    fn cancel(&self);
    fn is_cancelled(&self) -> bool;
}

/// Cancels a run of a graph or a pipeline from inside it or from another
/// thread; get it with [`Graph::cancel_token`](crate::Graph::cancel_token) or
/// [`Pipeline::cancel_token`](crate::Pipeline::cancel_token).
///
/// Graph nodes that have not started when it fires are skipped (their
/// successors still see them complete, so the run ends promptly), and
/// `run_graph` returns [`GraphError::Cancelled`](crate::GraphError::Cancelled). A pipeline's source
/// stops and its items in flight are dropped at their next stage;
/// `run_pipeline` returns
/// [`PipelineError::Cancelled`](crate::PipelineError::Cancelled). The run
/// clears the token when it returns, so the graph or pipeline can run
/// again; a token fired while no run is in progress cancels the next one.
///
/// ```
/// use sixfold::{Graph, GraphError};
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let mut later_ran = false;
/// let mut g = Graph::new();
/// let token = g.cancel_token();
/// let first = g.add(move || token.cancel());
/// let later = g.add(|| later_ran = true);
/// g.precede(first, later).unwrap();
/// assert_eq!(pool.run_graph(&mut g), Err(GraphError::Cancelled));
/// assert!(!g.cancel_token().is_cancelled()); // cleared: the graph can run again
/// drop(g);
/// assert!(!later_ran); // skipped: it had not started when the token fired
/// ```
#[derive(Clone)]
pub struct CancelToken {
    target: Arc<dyn CancelTarget>,
}

impl CancelToken {
    pub(crate) fn new(target: Arc<dyn CancelTarget>) -> Self {
        CancelToken { target }
    }

    /// A token of its own, for [`Pool::run_cancellable_with`](crate::Pool::run_cancellable_with):
    /// fired by any thread that holds a clone, it cancels the run (or runs)
    /// it was given to. Unlike a graph's or a pipeline's token it stays
    /// fired: a run given a fired token drops all its tasks.
    ///
    /// ```
    /// let token = sixfold::CancelToken::standalone();
    /// assert!(!token.is_cancelled());
    /// token.clone().cancel();
    /// assert!(token.is_cancelled());
    /// ```
    pub fn standalone() -> Self {
        CancelToken::new(Arc::new(StandaloneFlag::default()))
    }
}

/// The flag of a standalone token.
#[derive(Default)]
struct StandaloneFlag(AtomicBool);

impl CancelTarget for StandaloneFlag {
    fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
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
    ///
    /// ```
    /// use sixfold::{Pipeline, PipelineError};
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut p = Pipeline::new(|| Some(1u32)); // an endless source
    /// let token = p.cancel_token();
    /// let mut seen = 0;
    /// let mut p = p.serial_in_order(|x| {
    ///     seen += x;
    ///     if seen == 3 {
    ///         token.cancel(); // stops the source
    ///     }
    /// });
    /// assert_eq!(pool.run_pipeline(&mut p, 2), Err(PipelineError::Cancelled));
    /// drop(p);
    /// assert_eq!(seen, 3); // the items in flight were dropped before the stage
    /// ```
    pub fn cancel(&self) {
        self.target.cancel();
    }

    /// Whether the token has fired (and the run not yet returned).
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut g = sixfold::Graph::new();
    /// g.add(|| {});
    /// let token = g.cancel_token();
    /// token.cancel(); // no run in progress: it cancels the next one
    /// assert!(token.is_cancelled());
    /// assert_eq!(pool.run_graph(&mut g), Err(sixfold::GraphError::Cancelled));
    /// assert!(!token.is_cancelled()); // the run cleared it
    /// assert_eq!(pool.run_graph(&mut g), Ok(()));
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.target.is_cancelled()
    }
}

/// What a cancellable scope or run returns when it was cancelled, itself
/// or through a scope or run it is nested in.
///
/// ```
/// let err = sixfold::scope_cancellable(|s| s.cancel()).unwrap_err();
/// assert_eq!(err, sixfold::Cancelled);
/// assert_eq!(err.to_string(), "the scope or run was cancelled");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cancelled;

impl fmt::Display for Cancelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the scope or run was cancelled")
    }
}

impl std::error::Error for Cancelled {}

/// Was the scope or run the calling task belongs to cancelled (or one it
/// is nested in, on this pool or, through `install`, a scope or a run
/// entered from a worker, another one)? False outside every scope and
/// run, in a scope body that runs on a thread outside the pool, in the
/// second closure of a `join` that another worker stole (it runs as work
/// of no scope there), and in graph nodes and pipeline stages (a graph or
/// a pipeline is cancelled through its [`CancelToken`]): ask the scope in
/// the first places ([`Scope::is_cancelled`](crate::Scope::is_cancelled)).
///
/// A long task checks it now and then to stop early once its answer is no
/// longer wanted:
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let steps = AtomicUsize::new(0);
/// let outcome = pool.scope_cancellable(|s| {
///     s.spawn(|s| s.cancel());
///     s.spawn(|_| {
///         while !sixfold::is_cancelled() {
///             steps.fetch_add(1, Ordering::Relaxed);
///             std::thread::yield_now();
///         }
///     });
/// });
/// assert_eq!(outcome, Err(sixfold::Cancelled));
/// ```
pub fn is_cancelled() -> bool {
    WorkerThread::current().is_some_and(|worker| {
        // SAFETY: the context is the group of the task or body running on
        // this thread now, alive while it runs.
        unsafe { worker.cancel_context().as_ref() }.is_some_and(|group| group.is_cancelled())
    })
}

/// A cancel flag of its own (a pipeline's, read at every stage): kept on a cache line of its own (a small
/// allocation next to a busy one cost a tenth of a heavy pipeline's time).
#[derive(Default)]
pub(crate) struct CancelFlag(CachePadded<AtomicBool>);

impl CancelTarget for CancelFlag {
    fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

impl CancelFlag {
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Was it set? Clears it for the next run.
    pub(crate) fn take(&self) -> bool {
        self.0.swap(false, Ordering::Relaxed)
    }
}
