//! Pipelines: a source, then serial and parallel stages, a limit of items
//! in flight, and stages pinned to workers. oneTBB's `parallel_pipeline`
//! and Taskflow's `Pipeline`, on the six rules, with stage affinity.
//!
//! [`Pipeline`] is the builder users see; `stage.rs` erases the stages'
//! types, `gate.rs` lets serial stages through without a lock or a blocked
//! thread, `engine/` walks items through the stages. How a run maps onto
//! the six rules is in `engine/mod.rs` and ARCHITECTURE.md.

mod engine;
pub(crate) mod gate;
mod stage;

pub use stage::StageMode;

use crate::cancel::CancelToken;
use crate::error::PipelineError;
use crate::platform::latch::CountLatch;
use crate::platform::unwind;
use crate::queues::dispatch::{Priority, SharedPlace};
use crate::queues::region;
use crate::worker::entry::Entry;
use crate::worker::thread::Registry;
use crate::worker::thread::WorkerThread;
use engine::Engine;
use stage::{SourceStage, Stage, layout_of};
use std::alloc::Layout;
use std::fmt;
use std::marker::PhantomData;
use std::ptr;
use std::sync::Arc;

/// A pipeline: a source that yields items until it is exhausted, then
/// stages that map (or, with [`flatten`](Pipeline::flatten), filter) each
/// item, run with [`Pool::run_pipeline`](crate::Pool::run_pipeline) and a
/// limit of items in flight (tokens). Built once, it runs again and again.
///
/// Stages are `serial_in_order` (one item at a time, in source order),
/// `serial_out_of_order` (one at a time, any order) or `parallel` (any
/// number at once). Serial stages own `FnMut` state without a lock;
/// parallel ones are `Fn + Sync`; all may borrow from the caller's frame.
/// `T` is the type the last stage produces (dropped after it).
///
/// ```
/// use std::sync::Mutex;
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let lines = ["3", "x", "4", "5"];
/// let mut next = 0;
/// let mut total = 0;
/// let mut pipeline = sixfold::Pipeline::new(|| {
///     let line = lines.get(next)?;
///     next += 1;
///     Some(*line)
/// })
/// .parallel(|line: &str| line.parse::<u64>().ok())
/// .flatten()                                   // drop the lines that did not parse
/// .parallel(|n| n * n)
/// .serial_in_order(|square| total += square)   // in source order
/// .name("sum");
/// pool.run_pipeline(&mut pipeline, 4).unwrap(); // at most 4 items in flight
/// drop(pipeline);
/// assert_eq!(total, 9 + 16 + 25);
/// ```
pub struct Pipeline<'a, T> {
    engine: Box<Engine<'a>>,
    _output: PhantomData<fn() -> T>,
}

impl<'a, T: Send + 'a> Pipeline<'a, T> {
    /// A pipeline whose items come from `source`, called (serially, in
    /// order) until it returns `None`.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut words = "one two three".split(' ');
    /// let mut seen = Vec::new();
    /// let mut p = sixfold::Pipeline::new(|| words.next())
    ///     .serial_in_order(|word: &str| seen.push(word));
    /// pool.run_pipeline(&mut p, 2).unwrap();
    /// drop(p);
    /// assert_eq!(seen, ["one", "two", "three"]);
    /// ```
    pub fn new<S>(source: S) -> Self
    where
        S: FnMut() -> Option<T> + Send + 'a,
    {
        Pipeline {
            engine: Box::new(Engine::new(SourceStage::new(source), layout_of::<T>())),
            _output: PhantomData,
        }
    }

    fn then<U: Send + 'a>(mut self, stage: Stage<'a>) -> Pipeline<'a, U> {
        self.engine.stages.push(stage);
        self.engine.item_layout = max_layout(self.engine.item_layout, layout_of::<U>());
        Pipeline {
            engine: self.engine,
            _output: PhantomData,
        }
    }

    /// A serial stage that sees the items one at a time, in source order.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut next = 0;
    /// let mut seen = Vec::new();
    /// let mut p = sixfold::Pipeline::new(|| { next += 1; (next <= 100).then_some(next) })
    ///     .parallel(|x: u32| x * 2)            // items may leave this stage in any order
    ///     .serial_in_order(|x| seen.push(x));  // and still arrive here in source order
    /// pool.run_pipeline(&mut p, 8).unwrap();
    /// drop(p);
    /// assert_eq!(seen, (1..=100).map(|x| x * 2).collect::<Vec<_>>());
    /// ```
    pub fn serial_in_order<U, F>(self, f: F) -> Pipeline<'a, U>
    where
        U: Send + 'a,
        F: FnMut(T) -> U + Send + 'a,
    {
        let index = self.engine.stages.len() + 1;
        self.then(Stage::serial(StageMode::SerialInOrder, f, index))
    }

    /// A serial stage that sees the items one at a time, in any order
    /// (whichever arrives first).
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut next = 0;
    /// let mut seen = Vec::new();
    /// let mut p = sixfold::Pipeline::new(|| { next += 1; (next <= 100).then_some(next) })
    ///     .parallel(|x: u32| x * 2)
    ///     .serial_out_of_order(|x| seen.push(x)); // `FnMut`: one item at a time, no lock
    /// pool.run_pipeline(&mut p, 8).unwrap();
    /// drop(p);
    /// seen.sort_unstable();                       // every item once, in some order
    /// assert_eq!(seen, (1..=100).map(|x| x * 2).collect::<Vec<_>>());
    /// ```
    pub fn serial_out_of_order<U, F>(self, f: F) -> Pipeline<'a, U>
    where
        U: Send + 'a,
        F: FnMut(T) -> U + Send + 'a,
    {
        let index = self.engine.stages.len() + 1;
        self.then(Stage::serial(StageMode::SerialOutOfOrder, f, index))
    }

    /// A parallel stage: any number of items at once.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let calls = AtomicUsize::new(0);
    /// let (mut next, mut total) = (0, 0);
    /// let mut p = sixfold::Pipeline::new(|| { next += 1; (next <= 10).then_some(next) })
    ///     .parallel(|x: u64| { calls.fetch_add(1, Ordering::Relaxed); x * x }) // `Fn + Sync`
    ///     .serial_in_order(|square| total += square);
    /// pool.run_pipeline(&mut p, 4).unwrap();
    /// drop(p);
    /// assert_eq!((calls.into_inner(), total), (10, 385));
    /// ```
    pub fn parallel<U, F>(self, f: F) -> Pipeline<'a, U>
    where
        U: Send + 'a,
        F: Fn(T) -> U + Send + Sync + 'a,
    {
        let index = self.engine.stages.len() + 1;
        self.then(Stage::parallel(f, index))
    }

    /// A stage of the kind `mode` names, chosen at run time: the same as
    /// [`serial_in_order`](Self::serial_in_order),
    /// [`serial_out_of_order`](Self::serial_out_of_order) or
    /// [`parallel`](Self::parallel), with the closure bounds of the
    /// strictest (`Fn + Sync`, as a parallel stage needs).
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mode: sixfold::StageMode = "serial_in_order".parse().unwrap();
    /// let mut next = 0;
    /// let mut seen = Vec::new();
    /// let mut p = sixfold::Pipeline::new(|| { next += 1; (next <= 5).then_some(next) })
    ///     .stage(mode, |x: i32| x * 10)
    ///     .serial_in_order(|x| seen.push(x));
    /// pool.run_pipeline(&mut p, 4).unwrap();
    /// drop(p);
    /// assert_eq!(seen, [10, 20, 30, 40, 50]);
    /// ```
    pub fn stage<U, F>(self, mode: StageMode, f: F) -> Pipeline<'a, U>
    where
        U: Send + 'a,
        F: Fn(T) -> U + Send + Sync + 'a,
    {
        match mode {
            StageMode::Parallel => self.parallel(f),
            StageMode::SerialInOrder => self.serial_in_order(f),
            StageMode::SerialOutOfOrder => self.serial_out_of_order(f),
        }
    }

    /// Name the last stage added (or the source): the name shows in trace
    /// records, error messages and `Debug`.
    ///
    /// ```
    /// use sixfold::{Pipeline, PipelineError};
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut p = Pipeline::new(|| None::<u32>)
    ///     .name("reader")                  // no stage yet: names the source
    ///     .serial_in_order(|x| x + 1)
    ///     .name("tally")
    ///     .pin(7);                         // a worker the pool does not have
    /// assert!(format!("{p:?}").contains("\"reader\""));
    /// match pool.run_pipeline(&mut p, 1) {
    ///     Err(PipelineError::AffinityOutOfRange { stage, .. }) => assert_eq!(stage, "tally"),
    ///     other => panic!("expected AffinityOutOfRange, got {other:?}"),
    /// }
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        let name: Arc<str> = Arc::from(name.into());
        match self.engine.stages.last_mut() {
            Some(stage) => {
                stage.name = name;
                stage.named = true;
            }
            None => {
                self.engine.source.name = name;
                self.engine.source.named = true;
            }
        }
        self
    }

    /// Pin the last stage added (or the source) to worker `worker`: its
    /// items reach that worker through its mailbox (rule 4), so the stage's
    /// state stays in one core's cache (with [`Pinning::Cores`](crate::Pinning),
    /// one fixed core). Like any task with affinity it runs elsewhere only
    /// if that worker stays stuck on other work for about a millisecond.
    /// A worker the pool does not have is an error of `run_pipeline`.
    ///
    /// ```
    /// use sixfold::{Pipeline, PipelineError};
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (mut next, mut total) = (0, 0);
    /// let mut p = Pipeline::new(|| { next += 1; (next <= 10).then_some(next) })
    ///     .serial_in_order(|x: u32| total += x)
    ///     .pin(1);                         // on worker 1, unless it stays stuck
    /// pool.run_pipeline(&mut p, 4).unwrap();
    /// drop(p);
    /// assert_eq!(total, 55);
    /// let mut bad = Pipeline::new(|| None::<u32>).pin(2); // the pool has workers 0 and 1
    /// let err = pool.run_pipeline(&mut bad, 4).unwrap_err();
    /// assert!(matches!(err, PipelineError::AffinityOutOfRange { worker: 2, num_workers: 2, .. }));
    /// ```
    pub fn pin(mut self, worker: usize) -> Self {
        match self.engine.stages.last_mut() {
            Some(stage) => {
                stage.pin = Some(worker);
                stage.strict = false;
            }
            None => {
                self.engine.source.pin = Some(worker);
                self.engine.source.strict = false;
            }
        }
        self
    }

    /// Pin the last stage added (or the source) to worker `worker`
    /// strictly: its items run it on that worker and nowhere else, however
    /// long the worker stays busy (they reach it through its mailbox with
    /// no proxy). For a stage bound to a thread-bound resource: a GPU
    /// context, a library that must always be called from one thread. A
    /// worker the pool does not have is an error of `run_pipeline`.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut next = 0;
    /// let mut workers = Vec::new();
    /// let mut p = sixfold::Pipeline::new(|| { next += 1; (next <= 50).then_some(next) })
    ///     .serial_in_order(|x: i32| { workers.push(sixfold::current_worker()); x })
    ///     .pin_strict(1);
    /// pool.run_pipeline(&mut p, 4).unwrap();
    /// drop(p);
    /// assert!(workers.iter().all(|&w| w == Some(1)));
    /// ```
    pub fn pin_strict(mut self, worker: usize) -> Self {
        match self.engine.stages.last_mut() {
            Some(stage) => {
                stage.pin = Some(worker);
                stage.strict = true;
            }
            None => {
                self.engine.source.pin = Some(worker);
                self.engine.source.strict = true;
            }
        }
        self
    }

    /// The [`Priority`](crate::Priority) of a run started from outside the
    /// pool, which enters by the shared queue (rule 5): a high-priority
    /// pipeline starts before normal enqueued work. (A run started from a
    /// worker starts on that worker's deque at once.)
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut next = 0;
    /// let mut p = sixfold::Pipeline::new(|| { next += 1; (next <= 3).then_some(next) })
    ///     .parallel(|x: i32| x)
    ///     .priority(sixfold::Priority::High);
    /// pool.run_pipeline(&mut p, 2).unwrap();
    /// ```
    pub fn priority(mut self, priority: Priority) -> Self {
        self.engine.priority = priority;
        self
    }

    /// A token that cancels this pipeline's runs (see [`CancelToken`]).
    ///
    /// ```
    /// use sixfold::{Pipeline, PipelineError};
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut next = 0;
    /// let mut p = Pipeline::new(|| { next += 1; (next <= 3).then_some(next) })
    ///     .parallel(|x: u32| x);
    /// let token = p.cancel_token();
    /// token.cancel();                      // no run in progress: cancels the next one
    /// assert_eq!(pool.run_pipeline(&mut p, 2), Err(PipelineError::Cancelled));
    /// assert!(!token.is_cancelled());      // the run cleared it
    /// assert_eq!(pool.run_pipeline(&mut p, 2), Ok(()));
    /// ```
    pub fn cancel_token(&self) -> CancelToken {
        CancelToken::new(self.engine.cancel.clone())
    }

    /// The number of stages after the source.
    ///
    /// ```
    /// let p = sixfold::Pipeline::new(|| None::<u32>);
    /// assert_eq!(p.num_stages(), 0);
    /// let p = p.parallel(|x| x * 2).name("double").serial_in_order(|x| x + 1);
    /// assert_eq!(p.num_stages(), 2);
    /// ```
    pub fn num_stages(&self) -> usize {
        self.engine.stages.len()
    }
}

impl<'a, T: Send + 'a> Pipeline<'a, Option<T>> {
    /// Filter: items for which the last stage returned `None` end there;
    /// the next stage gets the `T` of the others (as `Iterator::flatten`).
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut next = 0;
    /// let mut evens = Vec::new();
    /// let mut p = sixfold::Pipeline::new(|| { next += 1; (next <= 10).then_some(next) })
    ///     .parallel(|x: u32| (x % 2 == 0).then_some(x))
    ///     .flatten()                       // the odd ones end here
    ///     .serial_in_order(|x| evens.push(x));
    /// pool.run_pipeline(&mut p, 4).unwrap();
    /// drop(p);
    /// assert_eq!(evens, [2, 4, 6, 8, 10]);
    /// ```
    pub fn flatten(mut self) -> Pipeline<'a, T> {
        match self.engine.stages.last_mut() {
            Some(stage) => stage.flatten_to::<T>(),
            // Filtering right after the source: an identity stage that
            // flattens (the source's `None` already means "exhausted").
            None => {
                return self.parallel(|item: Option<T>| item).flatten();
            }
        }
        Pipeline {
            engine: self.engine,
            _output: PhantomData,
        }
    }
}

fn max_layout(a: Layout, b: Layout) -> Layout {
    Layout::from_size_align(a.size().max(b.size()), a.align().max(b.align()))
        .expect("an item layout")
}

impl<T> fmt::Debug for Pipeline<'_, T> {
    /// The stages, in order: mode, name, pinned worker.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct StageView<'s>(&'static str, &'s str, Option<usize>, bool);
        impl fmt::Debug for StageView<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut s = f.debug_struct(self.0);
                s.field("name", &self.1);
                if let Some(pin) = self.2 {
                    s.field("pinned_to", &pin);
                }
                if self.3 {
                    s.field("flatten", &true);
                }
                s.finish()
            }
        }
        let engine = &self.engine;
        f.write_str("Pipeline ")?;
        let mut list = f.debug_list();
        list.entry(&StageView(
            "source",
            &engine.source.name,
            engine.source.pin,
            false,
        ));
        for stage in &engine.stages {
            list.entry(&StageView(
                stage.mode.name(),
                &stage.name,
                stage.pin,
                stage.flatten.is_some(),
            ));
        }
        list.finish()
    }
}

/// `Pool::run_pipeline`.
pub(crate) fn run_pipeline<T>(
    registry: &Arc<Registry>,
    pipeline: &mut Pipeline<'_, T>,
    tokens: usize,
) -> Result<(), PipelineError> {
    if tokens == 0 {
        return Err(PipelineError::ZeroTokens);
    }
    if tokens > u32::MAX as usize / 2 {
        return Err(PipelineError::TooManyTokens { tokens });
    }
    let num_workers = registry.num_slots();
    let engine = &mut *pipeline.engine;
    let pins = std::iter::once((&engine.source.name, engine.source.pin))
        .chain(engine.stages.iter().map(|s| (&s.name, s.pin)));
    for (name, pin) in pins {
        if let Some(worker) = pin
            && worker >= num_workers
        {
            return Err(PipelineError::AffinityOutOfRange {
                stage: name.to_string(),
                worker,
                num_workers,
            });
        }
    }
    // Chains are lent out quietly around stage bodies: sleepers must look
    // for them now and then while the run lasts (`Sleep`'s heartbeat).
    let _heartbeat = (num_workers > 1).then(|| Heartbeat::start(registry));
    registry.enter(StartTokens {
        engine: &mut *engine,
        tokens,
    });
    // The last token retired; the thread that retired it may still be on
    // its way out of the engine's code.
    registry.wait_until_none_inside(ptr::from_mut(engine).cast_const().cast());
    let (panic, cancelled) = engine.finish_run();
    if let Some(payload) = panic {
        unwind::resume_unwinding(payload);
    }
    if cancelled {
        return Err(PipelineError::Cancelled);
    }
    Ok(())
}

/// Sleepers of the pool wake now and then while this lives.
struct Heartbeat<'r>(&'r Registry);

impl<'r> Heartbeat<'r> {
    fn start(registry: &'r Registry) -> Self {
        registry.sleep.start_heartbeat();
        Heartbeat(registry)
    }
}

impl Drop for Heartbeat<'_> {
    fn drop(&mut self) {
        self.0.sleep.stop_heartbeat();
    }
}

/// What a pipeline run starts: one job holding every token, which fetches
/// the first batch.
struct StartTokens<'e, 'a> {
    engine: &'e mut Engine<'a>,
    tokens: usize,
}

impl Entry for StartTokens<'_, '_> {
    type Output = ();

    /// The job goes to our own deque, and we work until every token
    /// retired.
    fn on_worker(self, worker: &WorkerThread) {
        let StartTokens { engine, tokens } = self;
        let latch = CountLatch::for_worker(worker.registry().wake_owner(worker.index()));
        latch.add(tokens - 1);
        let job = engine.prepare(
            tokens,
            worker.registry().num_slots(),
            &latch,
            worker.region(),
        );
        // After `prepare`, which starts the flag over; before any push.
        worker.prepare_wait(&engine.used_shared_queue);
        worker.push(job);
        worker.wait_until(
            latch.as_core().expect("a worker's latch"),
            Some(&engine.used_shared_queue),
        );
    }

    /// The job enters by the shared queue (rule 5); the caller blocks.
    fn blocking_outside(self, registry: &Arc<Registry>) {
        let StartTokens { engine, tokens } = self;
        let latch = CountLatch::for_thread();
        latch.add(tokens - 1);
        let job = engine.prepare(
            tokens,
            registry.num_slots(),
            &latch,
            region::outside_current(),
        );
        let place = engine.used_shared_queue.note();
        let priority = engine.priority;
        registry.inject_at(job, None, SharedPlace { priority, ..place });
        latch.wait_blocking();
    }
}
