//! Continuation passing: how a running task forks without any thread
//! blocking, as oneTBB's classic `allocate_continuation` /
//! `set_ref_count` / `recycle_as_child_of` did. Through its [`Context`] a
//! task:
//!
//! 1. makes a continuation (`cx.continuation(sum)`): a node that takes
//!    over this task's successors; it runs when this task and every child
//!    made with `cont.child(..)` have completed (its pending count is kept
//!    for you);
//! 2. spawns all children but one, and returns the last (rule 1), or calls
//!    `cx.recycle()` to run this very task again as that child;
//! 3. the last child to finish makes the continuation ready (rule 2).
//!
//! Children pass results to their continuation through
//! [`Context::successor`], a shared reference to the continuation's body.
//!
//! Invariants: a [`Continuation`] handle cannot outlive the `execute` call
//! it was made in (it borrows the context's lifetime, and is not `Send`),
//! and until that call returns the continuation cannot start (the running
//! node is its predecessor); everything done to nodes here goes through
//! `continuation.rs`.

use super::api::{Context, FnTask, Task, TaskRef};
use super::continuation::{self, ContinuationRef};
use std::marker::PhantomData;

/// The continuation-passing part of a running task's context.
impl<'w> Context<'w> {
    /// Make a continuation: a node that inherits this task's successors and
    /// runs after this task and all of the continuation's children.
    ///
    /// ```
    /// # use sixfold::{Context, Task, TaskRef};
    /// # use std::sync::{Arc, Mutex};
    /// type Log = Arc<Mutex<Vec<&'static str>>>;
    /// struct Push(Log, &'static str);
    /// impl Task for Push {
    ///     fn execute(&mut self, _cx: &mut Context<'_>) -> Option<TaskRef> {
    ///         self.0.lock().unwrap().push(self.1);
    ///         None
    ///     }
    /// }
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let log = Log::default();
    /// let l = log.clone();
    /// let mut parent = TaskRef::from_fn(move |cx| {
    ///     l.lock().unwrap().push("parent");
    ///     let cont = cx.continuation(Push(l.clone(), "continuation"));
    ///     cx.spawn(cont.child(Push(l.clone(), "child")));
    /// });
    /// let after = TaskRef::new(Push(log.clone(), "after"));
    /// parent.precede(&after).unwrap(); // the continuation inherits this edge
    /// pool.run([parent, after]);
    /// assert_eq!(*log.lock().unwrap(), ["parent", "child", "continuation", "after"]);
    /// ```
    #[inline(always)]
    pub fn continuation<T: Task>(&mut self, task: T) -> Continuation<'w> {
        Continuation {
            node: continuation::continuation(
                self.run.node,
                self.run.group,
                self.run.worker.node_cache(),
                task,
            ),
            _not_send: PhantomData,
        }
    }

    /// Run this task again right after `execute` returns (rule 1) instead of
    /// completing it. After `continuation`, it runs as one more child of that
    /// continuation (oneTBB's `recycle_as_child_of`), which saves allocating
    /// a child. If `execute` also returns a task, that one runs first and
    /// this one is pushed onto the deque.
    ///
    /// ```
    /// use sixfold::{Context, Task, TaskRef};
    /// use std::sync::mpsc::{channel, Sender};
    ///
    /// struct Countdown(u32, Sender<u32>);
    /// impl Task for Countdown {
    ///     fn execute(&mut self, cx: &mut Context<'_>) -> Option<TaskRef> {
    ///         self.1.send(self.0).unwrap();
    ///         if self.0 > 0 {
    ///             self.0 -= 1; // the same task runs again, with its state
    ///             cx.recycle();
    ///         }
    ///         None
    ///     }
    /// }
    ///
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = channel();
    /// pool.run(TaskRef::new(Countdown(3, tx)));
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), [3, 2, 1, 0]);
    /// ```
    pub fn recycle(&mut self) {
        self.run.recycle = true;
    }

    /// The body of this task's first successor, if it is a `T`: how a child
    /// hands its result to its continuation (use atomics or other `Sync`
    /// cells in `T`). After `continuation`, the first successor is the new
    /// continuation.
    ///
    /// ```
    /// # use sixfold::{Context, Task, TaskRef};
    /// # use std::sync::atomic::{AtomicU64, Ordering};
    /// # use std::sync::mpsc::{channel, Sender};
    /// struct Report(AtomicU64, Sender<u64>);
    /// impl Task for Report {
    ///     fn execute(&mut self, _cx: &mut Context<'_>) -> Option<TaskRef> {
    ///         self.1.send(self.0.load(Ordering::Relaxed)).unwrap();
    ///         None
    ///     }
    /// }
    ///
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = channel();
    /// let mut producer = TaskRef::from_fn(|cx| {
    ///     cx.successor::<Report>().unwrap().0.store(42, Ordering::Relaxed);
    /// });
    /// let report = TaskRef::new(Report(AtomicU64::new(0), tx));
    /// producer.precede(&report).unwrap();
    /// pool.run([producer, report]);
    /// assert_eq!(rx.try_recv(), Ok(42));
    ///
    /// // A task with no successor has no `Report` to hand a result to.
    /// pool.run(TaskRef::from_fn(|cx| assert!(cx.successor::<Report>().is_none())));
    /// ```
    pub fn successor<T: Task + Sync>(&self) -> Option<&T> {
        continuation::successor_body(self.run.node)
    }
}

/// A continuation made by [`Context::continuation`]; make its children with
/// [`Continuation::child`]. It starts once the task that made it and all the
/// children have completed.
///
/// ```
/// # use sixfold::{Context, Task, TaskRef};
/// # use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
/// # use std::sync::mpsc::{channel, Sender};
/// struct Sum(AtomicU64, Sender<u64>);
/// impl Task for Sum {
///     fn execute(&mut self, _cx: &mut Context<'_>) -> Option<TaskRef> {
///         self.1.send(self.0.load(Relaxed)).unwrap(); // every child has added its part
///         None
///     }
/// }
///
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let (tx, rx) = channel();
/// pool.run(TaskRef::from_fn(move |cx| {
///     let sum = cx.continuation(Sum(AtomicU64::new(0), tx));
///     for part in 1..=4 {
///         cx.spawn(sum.child_fn(move |cx| {
///             cx.successor::<Sum>().unwrap().0.fetch_add(part, Relaxed);
///         }));
///     }
/// }));
/// assert_eq!(rx.try_recv(), Ok(10));
/// ```
pub struct Continuation<'w> {
    node: ContinuationRef,
    _not_send: PhantomData<(&'w (), *const ())>,
}

impl Continuation<'_> {
    /// A new node that the continuation waits for. Hand it to the scheduler
    /// (spawn it, or return it from `execute`); dropping it cancels the
    /// continuation.
    ///
    /// ```
    /// # use sixfold::{Context, Task, TaskRef};
    /// # use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    /// # use std::sync::mpsc::{channel, Sender};
    /// # struct Sum(AtomicU64, Sender<u64>);
    /// # impl Task for Sum {
    /// #     fn execute(&mut self, _cx: &mut Context<'_>) -> Option<TaskRef> {
    /// #         self.1.send(self.0.load(Relaxed)).unwrap(); // every child has added its part
    /// #         None
    /// #     }
    /// # }
    /// struct Part(u64);
    /// impl Task for Part {
    ///     fn execute(&mut self, cx: &mut Context<'_>) -> Option<TaskRef> {
    ///         cx.successor::<Sum>().unwrap().0.fetch_add(self.0, Relaxed);
    ///         None
    ///     }
    /// }
    ///
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = channel();
    /// pool.run(TaskRef::from_fn(move |cx| {
    ///     let sum = cx.continuation(Sum(AtomicU64::new(0), tx));
    ///     cx.spawn(sum.child(Part(20)));
    ///     cx.spawn(sum.child(Part(22)));
    /// }));
    /// assert_eq!(rx.try_recv(), Ok(42));
    /// ```
    #[inline(always)]
    pub fn child<T: Task>(&self, task: T) -> TaskRef {
        TaskRef::from_raw(continuation::child_of(&self.node, task))
    }

    /// [`Continuation::child`] with a closure body.
    ///
    /// ```
    /// # use sixfold::{Context, Task, TaskRef};
    /// # use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    /// # use std::sync::mpsc::{channel, Sender};
    /// # struct Sum(AtomicU64, Sender<u64>);
    /// # impl Task for Sum {
    /// #     fn execute(&mut self, _cx: &mut Context<'_>) -> Option<TaskRef> {
    /// #         self.1.send(self.0.load(Relaxed)).unwrap(); // every child has added its part
    /// #         None
    /// #     }
    /// # }
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = channel();
    /// pool.run(TaskRef::from_fn(move |cx| {
    ///     let sum = cx.continuation(Sum(AtomicU64::new(0), tx));
    ///     for x in 1..=3 {
    ///         cx.spawn(sum.child_fn(move |cx| {
    ///             cx.successor::<Sum>().unwrap().0.fetch_add(x * x, Relaxed);
    ///         }));
    ///     }
    /// }));
    /// assert_eq!(rx.try_recv(), Ok(1 + 4 + 9));
    ///
    /// let (tx, rx) = channel();
    /// pool.run(TaskRef::from_fn(move |cx| {
    ///     let sum = cx.continuation(Sum(AtomicU64::new(0), tx));
    ///     drop(sum.child_fn(|_| {})); // never handed over: the continuation is cancelled
    /// }));
    /// assert!(rx.try_recv().is_err());
    /// ```
    pub fn child_fn<F>(&self, f: F) -> TaskRef
    where
        F: FnOnce(&mut Context<'_>) + Send + 'static,
    {
        TaskRef::from_raw(continuation::child_of(&self.node, FnTask::new(f)))
    }
}
