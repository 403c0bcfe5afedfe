//! [`Builder`]: a pool's configuration, and starting its threads (for a
//! [`Pool`] of its own, or as the global pool).
//!
//! Invariant: a build that fails has stopped and joined every thread it
//! started; `build_global` sets the global pool at most once, and a build
//! that lost the race to set it is dropped (its threads joined).

use super::thread_pool::Pool;
use crate::error::BuildError;
use crate::platform::topology::{Pinning, Topology};
use crate::worker::global::{default_num_threads, has_global_registry, set_global_registry};
use crate::worker::registry::{PanicHandler, RegistryConfig, ThreadHandler};
use crate::worker::thread::Registry;
use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::thread::JoinHandle;

impl Pool {
    /// A builder; see [`Builder`].
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// assert_eq!(pool.num_threads(), 2);
    /// assert_eq!(pool.install(sixfold::current_num_threads), 2);
    /// ```
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// A pool with the default configuration.
    ///
    /// ```
    /// let pool = sixfold::Pool::new().unwrap();
    /// assert!(pool.num_threads() >= 1);
    /// let name = pool.install(|| std::thread::current().name().map(String::from));
    /// assert!(name.unwrap().starts_with("sixfold-")); // the default thread names
    /// ```
    pub fn new() -> Result<Pool, BuildError> {
        Builder::new().build()
    }
}

/// Configures and builds a [`Pool`].
///
/// ```
/// let pool = sixfold::Pool::builder()
///     .num_threads(2)
///     .thread_name(|i| format!("worker-{i}"))
///     .stack_size(4 << 20)
///     .build()
///     .expect("pool");
/// assert_eq!(pool.num_threads(), 2);
/// ```
#[derive(Default)]
#[must_use]
pub struct Builder {
    num_threads: Option<usize>,
    thread_name: Option<Box<dyn FnMut(usize) -> String>>,
    stack_size: Option<usize>,
    panic_handler: Option<PanicHandler>,
    start_handler: Option<ThreadHandler>,
    exit_handler: Option<ThreadHandler>,
    pinning: Pinning,
    topology: Option<Topology>,
    trace: bool,
    use_current_thread: bool,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("num_threads", &self.num_threads)
            .field("stack_size", &self.stack_size)
            .field("pinning", &self.pinning)
            .finish_non_exhaustive()
    }
}

impl Builder {
    /// A builder with the defaults: one worker per core this process may
    /// run on, threads named `sixfold-N`, the platform's stack size.
    ///
    /// ```
    /// let pool = sixfold::Builder::new().num_threads(2).build().unwrap();
    /// let names = pool.broadcast(|_| std::thread::current().name().map(String::from));
    /// assert_eq!(names, [Some("sixfold-0".into()), Some("sixfold-1".into())]);
    /// ```
    pub fn new() -> Self {
        Builder::default()
    }

    /// The number of worker threads. Without it: `SIXFOLD_NUM_THREADS` if
    /// that is a positive number, else one per core this process may run
    /// on. `0` means none of its own: the thread that calls `install`,
    /// `run` or `wait_idle` runs the tasks (handy for deterministic
    /// debugging), and work submitted from outside, or from a worker of
    /// another pool, starts a temporary thread that drains it.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(3).build().unwrap();
    /// assert_eq!(pool.num_threads(), 3);
    /// // None of its own: the caller of `install` runs the work.
    /// let borrowed = sixfold::Pool::builder().num_threads(0).build().unwrap();
    /// let caller = std::thread::current().id();
    /// assert_eq!(borrowed.install(|| std::thread::current().id()), caller);
    /// ```
    pub fn num_threads(mut self, n: usize) -> Self {
        self.num_threads = Some(n);
        self
    }

    /// Make the building thread the pool's worker 0 (rayon's
    /// `use_current_thread`): the pool starts `num_threads - 1` threads,
    /// and this thread's own `join`, `scope`, loops and calls into the pool
    /// run as worker 0 of it, with the others stealing from it. It runs no
    /// main loop: it takes part in the pool's work while it waits in such
    /// a call, so work placed on worker 0 alone (a strict task, its share
    /// of a `broadcast` from another thread) waits until it does. Drop the
    /// pool on this thread: the drop first runs, as worker 0, what is left
    /// for the pool, then makes the thread an outside thread again (a pool
    /// dropped on another thread leaves this one worker 0 of a pool with
    /// no other threads). No start or exit handler and no pinning apply to
    /// it. `build` fails with [`BuildError::CurrentThreadIsAWorker`] on a
    /// thread that already is a worker.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).use_current_thread().build().unwrap();
    /// assert_eq!(sixfold::current_thread_index(), Some(0));
    /// let (a, b) = sixfold::join(|| sixfold::current_thread_index(), || 2 + 2);
    /// assert_eq!((a, b), (Some(0), 4));
    /// assert_eq!(pool.install(|| sixfold::current_num_threads()), 2);
    /// drop(pool);
    /// assert_eq!(sixfold::current_thread_index(), None);
    /// ```
    pub fn use_current_thread(mut self) -> Self {
        self.use_current_thread = true;
        self
    }

    /// Name worker thread `i` with `name(i)`. If `name` panics, `build`
    /// stops and joins the threads it had started (their exit handlers
    /// run), then resumes the panic; if a name holds a NUL byte, which no
    /// thread name may, it does the same and returns
    /// [`BuildError::ThreadSpawn`](crate::BuildError::ThreadSpawn).
    ///
    /// ```
    /// let pool = sixfold::Pool::builder()
    ///     .num_threads(2)
    ///     .thread_name(|i| format!("io-{i}"))
    ///     .build()
    ///     .unwrap();
    /// let names = pool.broadcast(|_| std::thread::current().name().map(String::from));
    /// assert_eq!(names, [Some("io-0".into()), Some("io-1".into())]);
    /// ```
    pub fn thread_name<F>(mut self, name: F) -> Self
    where
        F: FnMut(usize) -> String + 'static,
    {
        self.thread_name = Some(Box::new(name));
        self
    }

    /// Stack size of each worker thread, in bytes.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).stack_size(16 << 20).build().unwrap();
    /// // 4 MiB of locals: more than a thread stack of Rust's default 2 MiB holds.
    /// let sum = pool.install(|| {
    ///     let big = [1u8; 4 << 20];
    ///     std::hint::black_box(&big).iter().map(|&b| u64::from(b)).sum::<u64>()
    /// });
    /// assert_eq!(sum, 4 << 20);
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Called with the payload when a `'static` task (`spawn`, `enqueue`,
    /// `spawn_with_affinity`) panics. Without one, the panic is printed and
    /// counted in `Stats::unhandled_panics`. The pool keeps working.
    ///
    /// ```
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let pool = sixfold::Pool::builder()
    ///     .num_threads(2)
    ///     .panic_handler(move |payload| tx.send(payload.downcast_ref::<&str>().copied()).unwrap())
    ///     .build()
    ///     .unwrap();
    /// pool.spawn(|| panic!("boom"));
    /// assert_eq!(rx.recv().unwrap(), Some("boom"));
    /// assert_eq!(pool.install(|| 6 * 7), 42);         // the pool keeps working
    /// assert_eq!(pool.stats().unhandled_panics, 0);   // the handler took it
    /// ```
    pub fn panic_handler<H>(mut self, handler: H) -> Self
    where
        H: Fn(Box<dyn Any + Send>) + Send + Sync + 'static,
    {
        self.panic_handler = Some(Box::new(handler));
        self
    }

    /// Called on each worker thread, with its index, before it takes work.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let started = Arc::new(Mutex::new(Vec::new()));
    /// let log = started.clone();
    /// let pool = sixfold::Pool::builder()
    ///     .num_threads(2)
    ///     .start_handler(move |i| log.lock().unwrap().push(i))
    ///     .build()
    ///     .unwrap();
    /// pool.broadcast(|_| ());                          // every worker took work
    /// let mut started = started.lock().unwrap().clone();
    /// started.sort_unstable();
    /// assert_eq!(started, [0, 1]);                     // once per worker
    /// ```
    pub fn start_handler<H>(mut self, handler: H) -> Self
    where
        H: Fn(usize) + Send + Sync + 'static,
    {
        self.start_handler = Some(Box::new(handler));
        self
    }

    /// Called on each worker thread, with its index, as it exits.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let exited = Arc::new(Mutex::new(Vec::new()));
    /// let log = exited.clone();
    /// let pool = sixfold::Pool::builder()
    ///     .num_threads(2)
    ///     .exit_handler(move |i| log.lock().unwrap().push(i))
    ///     .build()
    ///     .unwrap();
    /// drop(pool);                                      // stops and joins the workers
    /// let mut exited = exited.lock().unwrap().clone();
    /// exited.sort_unstable();
    /// assert_eq!(exited, [0, 1]);
    /// ```
    pub fn exit_handler<H>(mut self, handler: H) -> Self
    where
        H: Fn(usize) + Send + Sync + 'static,
    {
        self.exit_handler = Some(Box::new(handler));
        self
    }

    /// Bind workers to cores ([`Pinning::Cores`]: worker i to the i-th core
    /// of the topology, wrapping around) or not (the default).
    ///
    /// ```
    /// use sixfold::{Pinning, Pool};
    /// let pool = Pool::builder().num_threads(2).pinning(Pinning::Cores).build().unwrap();
    /// let core = pool.worker_core(0).expect("pinned");
    /// assert_eq!(core, pool.topology().core_for_worker(0));
    /// ```
    pub fn pinning(mut self, pinning: Pinning) -> Self {
        self.pinning = pinning;
        self
    }

    /// Use `topology` instead of [`Topology::detect`] (for example one
    /// built with [`Topology::from_cores`]): it decides where pinned workers
    /// go and in which order workers look for victims.
    ///
    /// ```
    /// use sixfold::{CoreInfo, Pool, Proximity, Topology};
    /// let core = |os_index, l2| CoreInfo {
    ///     os_index, pus: vec![os_index], l2: Some(l2), l3: Some(0), numa: Some(0),
    /// };
    /// let topology = Topology::from_cores(vec![core(0, 0), core(1, 0), core(2, 1), core(3, 1)]);
    /// let pool = Pool::builder().num_threads(2).topology(topology).build().unwrap();
    /// assert_eq!(pool.topology().num_cores(), 4);
    /// assert_eq!(pool.topology().proximity(0, 1), Proximity::SameL2);
    /// assert_eq!(pool.topology().proximity(1, 2), Proximity::SameL3);
    /// ```
    pub fn topology(mut self, topology: Topology) -> Self {
        self.topology = Some(topology);
        self
    }

    /// Record an execution trace: one record per task (worker, rule, start
    /// and end, name) and per sleep, taken with [`Pool::take_trace`]. Off
    /// by default; off, it costs the hot path one predictable branch.
    ///
    /// Every task gets its record, whatever its length, with its nesting
    /// and order kept. To stay cheap on fork-join tasks of a few
    /// nanoseconds (a clock reading costs 10 to 25 ns), a worker reads the
    /// clock at every task boundary only while its tasks are long (a
    /// microsecond or more) and after it searched or slept; through a run
    /// of shorter tasks it reads it every few boundaries (at most 32) and
    /// places the ones between evenly. So such a run's span is exact and
    /// its tasks show their average length; a long task that follows a
    /// run of short ones without a break shares its window's time with
    /// them (tasks on either side of a search or a sleep never do).
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).trace(true).build().unwrap();
    /// pool.spawn_named("hello", || println!("hello"));
    /// pool.wait_idle();
    /// let trace = pool.take_trace();
    /// assert_eq!(trace.tasks.len(), 1);
    /// assert_eq!(trace.tasks[0].name.as_deref(), Some("hello"));
    /// println!("{}", trace.summary());
    /// ```
    pub fn trace(mut self, on: bool) -> Self {
        self.trace = on;
        self
    }

    /// Start the pool's threads. On an error, the threads already started
    /// have been stopped and joined.
    ///
    /// ```
    /// use sixfold::{BuildError, Pool};
    /// let pool = Pool::builder().num_threads(2).build().unwrap();
    /// assert_eq!(pool.install(|| 1 + 1), 2);
    /// // A worker cannot become worker 0 of another pool: an error, no pool.
    /// let nested = pool.install(|| Pool::builder().use_current_thread().build().map(drop));
    /// assert!(matches!(nested, Err(BuildError::CurrentThreadIsAWorker)));
    /// ```
    pub fn build(self) -> Result<Pool, BuildError> {
        let (registry, threads) = self.start()?;
        Ok(Pool::from_parts(registry, threads))
    }

    /// Build the global pool with this configuration (see
    /// [`Pool::global`]). An error if the global pool exists already,
    /// because it was configured before or used: call this first thing in
    /// `main`.
    ///
    /// ```
    /// // In `main`, before anything uses the global pool:
    /// sixfold::Pool::builder().num_threads(2).build_global().unwrap();
    /// assert_eq!(sixfold::current_num_threads(), 2);
    /// assert!(sixfold::Pool::builder().build_global().is_err());
    /// ```
    pub fn build_global(self) -> Result<(), BuildError> {
        if has_global_registry() {
            return Err(BuildError::GlobalPoolAlreadyInitialized);
        }
        let (registry, threads) = self.start()?;
        match set_global_registry(registry) {
            // The global pool's threads are never joined.
            Ok(()) => Ok(()),
            Err(registry) => {
                // Lost a race with another initialization: stop and join
                // ours, and tell the caller.
                drop(Pool::from_parts(registry, threads));
                Err(BuildError::GlobalPoolAlreadyInitialized)
            }
        }
    }

    /// Start the threads of this configuration.
    fn start(self) -> Result<(Arc<Registry>, Vec<JoinHandle<()>>), BuildError> {
        let num_threads = self.num_threads.unwrap_or_else(default_num_threads);
        // The building thread is one of them: at least one.
        let num_threads = if self.use_current_thread {
            num_threads.max(1)
        } else {
            num_threads
        };
        let topology = self.topology.unwrap_or_else(Topology::detect);
        let started = Registry::start(RegistryConfig {
            num_threads,
            thread_name: self.thread_name,
            stack_size: self.stack_size,
            panic_handler: self.panic_handler,
            start_handler: self.start_handler,
            exit_handler: self.exit_handler,
            topology,
            pinning: self.pinning,
            trace: self.trace,
            adopt_current_thread: self.use_current_thread,
        })?;
        if let Some(deque) = started.adopted {
            crate::worker::lifecycle::adopt_current_thread(&started.registry, deque);
        }
        Ok((started.registry, started.handles))
    }
}
