//! rayon's fork-join calls as `Pool` methods: each enters the pool once
//! (as `install` does; from one of its workers, at once) and runs the call
//! there (`fork_join/`).

use super::thread_pool::Pool;
use crate::cancel::Cancelled;
use crate::fork_join::{
    Scope, ScopeFifo, in_place_scope_fifo_in, in_place_scope_in, join, scope, scope_cancellable,
    scope_fifo, scope_fifo_cancellable,
};

impl Pool {
    /// [`join`](crate::fork_join::join) inside this pool: run `a` and `b`, potentially
    /// in parallel, and return both results. From outside the pool the
    /// caller blocks until both finished.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let data = vec![1, 2, 3, 4];
    /// let (left, right) = pool.join(|| data[..2].iter().sum::<i32>(), || data[2..].iter().sum::<i32>());
    /// assert_eq!((left, right), (3, 7));
    /// ```
    pub fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        self.install(|| join(a, b))
    }

    /// [`in_place_scope`](crate::fork_join::in_place_scope) with the spawned tasks in this pool: `op` runs on
    /// the calling thread. From a thread that is not one of this pool's
    /// workers, the caller blocks until the tasks finished.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let caller = std::thread::current().id();
    /// let mut ran_on = None;
    /// pool.in_place_scope(|s| {
    ///     ran_on = Some(std::thread::current().id());
    ///     s.spawn(|_| assert!(sixfold::current_worker().is_some()));
    /// });
    /// assert_eq!(ran_on, Some(caller));
    /// ```
    pub fn in_place_scope<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&Scope<'scope>) -> R,
    {
        in_place_scope_in(self.registry(), op)
    }

    /// [`in_place_scope_fifo`](crate::fork_join::in_place_scope_fifo) with the spawned tasks in this pool.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
    /// let log = std::sync::Mutex::new(Vec::new());
    /// pool.in_place_scope_fifo(|s| {
    ///     for i in 0..3 {
    ///         let log = &log;
    ///         s.spawn_fifo(move |_| log.lock().unwrap().push(i));
    ///     }
    /// });
    /// assert_eq!(*log.lock().unwrap(), [0, 1, 2]);
    /// ```
    pub fn in_place_scope_fifo<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&ScopeFifo<'scope>) -> R,
    {
        in_place_scope_fifo_in(self.registry(), op)
    }

    /// [`scope`](crate::fork_join::scope) inside this pool: spawned tasks may borrow
    /// from the caller's frame; returns when all of them finished.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut halves = [0u64; 2];
    /// let (a, b) = halves.split_at_mut(1);
    /// pool.scope(|s| {
    ///     s.spawn(|_| a[0] = (1..=50).sum());
    ///     s.spawn(|_| b[0] = (51..=100).sum());
    /// });
    /// assert_eq!(halves[0] + halves[1], 5050);
    /// ```
    pub fn scope<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&Scope<'scope>) -> R + Send,
        R: Send,
    {
        self.install(|| scope(op))
    }

    /// [`scope_fifo`](crate::fork_join::scope_fifo) inside this pool: each worker
    /// starts the tasks it spawned oldest first.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
    /// let order = std::sync::Mutex::new(Vec::new());
    /// pool.scope_fifo(|s| {
    ///     for i in 0..3 {
    ///         let order = &order;
    ///         s.spawn_fifo(move |_| order.lock().unwrap().push(i));
    ///     }
    /// });
    /// assert_eq!(*order.lock().unwrap(), [0, 1, 2]);
    /// ```
    pub fn scope_fifo<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&ScopeFifo<'scope>) -> R + Send,
        R: Send,
    {
        self.install(|| scope_fifo(op))
    }

    /// [`scope_cancellable`](crate::fork_join::scope_cancellable) inside this pool.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// assert_eq!(pool.scope_cancellable(|s| s.spawn(|_| {})), Ok(()));
    /// assert_eq!(pool.scope_cancellable(|s| s.cancel()), Err(sixfold::Cancelled));
    /// ```
    pub fn scope_cancellable<'scope, OP, R>(&self, op: OP) -> Result<R, Cancelled>
    where
        OP: FnOnce(&Scope<'scope>) -> R + Send,
        R: Send,
    {
        self.install(|| scope_cancellable(op))
    }

    /// [`scope_fifo_cancellable`](crate::fork_join::scope_fifo_cancellable) inside this pool.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// assert_eq!(pool.scope_fifo_cancellable(|s| s.cancel()), Err(sixfold::Cancelled));
    /// ```
    pub fn scope_fifo_cancellable<'scope, OP, R>(&self, op: OP) -> Result<R, Cancelled>
    where
        OP: FnOnce(&ScopeFifo<'scope>) -> R + Send,
        R: Send,
    {
        self.install(|| scope_fifo_cancellable(op))
    }
}
