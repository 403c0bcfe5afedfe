//! The errors of the public API. A bad argument is an error value with a
//! message that says what was wrong, never a panic deep in the pool or a
//! hang.

use std::fmt;

/// Why `Builder::build` failed.
///
/// ```
/// use sixfold::{BuildError, Pool};
/// let too_many = sixfold::max_num_threads() + 1;
/// match Pool::builder().num_threads(too_many).build() {
///     Err(BuildError::TooManyThreads { requested, max }) => {
///         assert_eq!((requested, max), (too_many, sixfold::max_num_threads()));
///     }
///     other => panic!("expected TooManyThreads, got {:?}", other.err()),
/// }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// More threads than the sleep counters can track.
    TooManyThreads {
        /// What was asked for.
        requested: usize,
        /// The most a pool may have.
        max: usize,
    },
    /// The operating system refused to start a worker thread (the threads
    /// already started were stopped and joined).
    ThreadSpawn(std::io::Error),
    /// `Builder::build_global` after the global pool was configured or
    /// used already.
    GlobalPoolAlreadyInitialized,
    /// `Builder::use_current_thread` on a thread that already is a worker
    /// of a pool (a thread can be one pool's worker at a time).
    CurrentThreadIsAWorker,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::TooManyThreads { requested, max } => write!(
                f,
                "a pool can have at most {max} worker threads; {requested} were requested"
            ),
            BuildError::ThreadSpawn(e) => write!(f, "could not start a worker thread: {e}"),
            BuildError::GlobalPoolAlreadyInitialized => write!(
                f,
                "the global pool has already been initialized (configure it before its first use)"
            ),
            BuildError::CurrentThreadIsAWorker => write!(
                f,
                "use_current_thread: this thread already is a worker of a pool"
            ),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::ThreadSpawn(e) => Some(e),
            BuildError::TooManyThreads { .. }
            | BuildError::GlobalPoolAlreadyInitialized
            | BuildError::CurrentThreadIsAWorker => None,
        }
    }
}

/// A worker index that does not name a worker of the pool.
///
/// ```
/// use sixfold::AffinityError;
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let err = pool.spawn_with_affinity(2, || {}).unwrap_err(); // workers are 0 and 1
/// assert!(matches!(err, AffinityError::OutOfRange { index: 2, num_workers: 2 }));
/// assert!(pool.spawn_with_affinity(1, || {}).is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AffinityError {
    /// `index` is not below the pool's number of worker slots.
    OutOfRange {
        /// The index given.
        index: usize,
        /// The pool's worker slots (valid indices are `0..num_workers`).
        num_workers: usize,
    },
}

impl AffinityError {
    /// `Ok` if `index` names one of `num_workers` worker slots.
    pub(crate) fn check(index: usize, num_workers: usize) -> Result<(), AffinityError> {
        if index < num_workers {
            Ok(())
        } else {
            Err(AffinityError::OutOfRange { index, num_workers })
        }
    }
}

impl fmt::Display for AffinityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AffinityError::OutOfRange { index, num_workers } => write!(
                f,
                "affinity for worker {index}, but the pool's workers are 0..{num_workers}"
            ),
        }
    }
}

impl std::error::Error for AffinityError {}

/// A refused edge between task nodes.
///
/// ```
/// use sixfold::{TaskError, TaskRef};
/// use std::sync::{Arc, Mutex};
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let log = Arc::new(Mutex::new(Vec::new()));
/// let step = |name: &'static str| {
///     let log = log.clone();
///     TaskRef::from_fn(move |_| log.lock().unwrap().push(name))
/// };
/// let (mut a, mut b) = (step("a"), step("b"));
/// a.precede(&b).unwrap();
/// assert!(matches!(b.precede(&a), Err(TaskError::Cycle))); // refused, nothing changes
/// pool.run([a, b]);
/// assert_eq!(*log.lock().unwrap(), ["a", "b"]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskError {
    /// The edge would close a cycle: the successor already (transitively)
    /// precedes the predecessor, so neither could ever run.
    Cycle,
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskError::Cycle => write!(
                f,
                "this edge would close a cycle: the successor already precedes the predecessor"
            ),
        }
    }
}

impl std::error::Error for TaskError {}

/// What [`Pool::run_pipeline`](crate::Pool::run_pipeline) refuses before
/// anything runs, or how a run ended early.
///
/// ```
/// use sixfold::{Pipeline, PipelineError};
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let mut n = 0;
/// let mut p = Pipeline::new(|| { n += 1; (n <= 3).then_some(n) }).parallel(|x: u32| x * 2);
/// assert!(matches!(pool.run_pipeline(&mut p, 0), Err(PipelineError::ZeroTokens)));
/// let mut p = p.serial_in_order(|x| x).pin(2); // workers are 0 and 1
/// match pool.run_pipeline(&mut p, 2) {
///     Err(PipelineError::AffinityOutOfRange { worker, num_workers, .. }) => {
///         assert_eq!((worker, num_workers), (2, 2));
///     }
///     other => panic!("expected AffinityOutOfRange, got {other:?}"),
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PipelineError {
    /// A limit of 0 items in flight would never let an item in.
    ZeroTokens,
    /// More tokens than a run can track.
    TooManyTokens {
        /// What was asked for.
        tokens: usize,
    },
    /// A stage is pinned to a worker the pool does not have.
    AffinityOutOfRange {
        /// The stage's name.
        stage: String,
        /// The worker asked for.
        worker: usize,
        /// The pool's worker slots (valid indices are `0..num_workers`).
        num_workers: usize,
    },
    /// The pipeline's [`CancelToken`](crate::CancelToken) fired: the source
    /// stopped and the items in flight were dropped at their next stage.
    Cancelled,
    /// A stage mode's name that is none of `serial_in_order`,
    /// `serial_out_of_order` and `parallel` (`StageMode::from_str`).
    UnknownStageMode {
        /// The name given.
        name: String,
    },
}

impl fmt::Display for PipelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PipelineError::ZeroTokens => write!(
                f,
                "a pipeline run needs at least one token (item in flight); 0 were given"
            ),
            PipelineError::TooManyTokens { tokens } => {
                write!(
                    f,
                    "a pipeline run can have at most 2^31 tokens; {tokens} were given"
                )
            }
            PipelineError::AffinityOutOfRange {
                stage,
                worker,
                num_workers,
            } => write!(
                f,
                "pipeline stage {stage} is pinned to worker {worker}, but the pool's workers are 0..{num_workers}"
            ),
            PipelineError::Cancelled => write!(
                f,
                "the pipeline run was cancelled; the items in flight were dropped"
            ),
            PipelineError::UnknownStageMode { name } => write!(
                f,
                "no stage mode is called {name:?}: serial_in_order, serial_out_of_order or parallel"
            ),
        }
    }
}

impl std::error::Error for PipelineError {}
