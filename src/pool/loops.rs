//! The parallel loops (and `broadcast`, which runs on the loops' planned
//! parts) as `Pool` methods: each enters the pool once (as
//! `install` does; from one of its workers, at once) and runs the loop
//! there (`loops/`).

use super::thread_pool::Pool;
use crate::loops::{self, BroadcastContext, Partitioner, Range2d, broadcast_on};
use std::ops::Range;

impl Pool {
    /// [`broadcast`](crate::loops::broadcast) to this pool's workers: `op` once on
    /// each, the results in worker order.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// assert_eq!(pool.broadcast(|ctx| ctx.index() * 10), [0, 10]);
    /// ```
    pub fn broadcast<OP, R>(&self, op: OP) -> Vec<R>
    where
        OP: Fn(BroadcastContext) -> R + Sync,
        R: Send,
    {
        let op = &op;
        self.registry().in_worker(|worker| broadcast_on(worker, op))
    }

    /// [`for_range`](crate::loops::for_range) in this pool.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let visited = AtomicUsize::new(0);
    /// pool.for_range(0..1000, |r| { visited.fetch_add(r.len(), Ordering::Relaxed); });
    /// assert_eq!(visited.into_inner(), 1000);
    /// ```
    pub fn for_range<F>(&self, range: Range<usize>, body: F)
    where
        F: Fn(Range<usize>) + Sync + Send,
    {
        self.registry()
            .in_worker_for_loop(|_| loops::for_range(range, body))
    }

    /// [`for_range_with`](crate::loops::for_range_with) in this pool.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut affinity = sixfold::AffinityPartitioner::new();
    /// for _ in 0..3 {
    ///     pool.for_range_with(0..10_000, &mut affinity, |r| { std::hint::black_box(r); });
    /// }
    /// assert!(affinity.pieces() >= 2);
    /// ```
    pub fn for_range_with<'p, F>(
        &self,
        range: Range<usize>,
        partitioner: impl Into<Partitioner<'p>> + Send,
        body: F,
    ) where
        F: Fn(Range<usize>) + Sync + Send,
    {
        self.registry()
            .in_worker_for_loop(|_| loops::for_range_with(range, partitioner, body))
    }

    /// [`for_each_index`](crate::loops::for_each_index) in this pool.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let sum = AtomicUsize::new(0);
    /// pool.for_each_index(0..10, |i| { sum.fetch_add(i, Ordering::Relaxed); });
    /// assert_eq!(sum.into_inner(), 45);
    /// ```
    pub fn for_each_index<F>(&self, range: Range<usize>, body: F)
    where
        F: Fn(usize) + Sync + Send,
    {
        self.registry()
            .in_worker_for_loop(|_| loops::for_each_index(range, body))
    }

    /// [`for_chunks`](crate::loops::for_chunks) in this pool.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let data = vec![2u32; 100];
    /// let sum = AtomicU32::new(0);
    /// pool.for_chunks(&data, |chunk, _| { sum.fetch_add(chunk.iter().sum(), Ordering::Relaxed); });
    /// assert_eq!(sum.into_inner(), 200);
    /// ```
    pub fn for_chunks<T, F>(&self, slice: &[T], body: F)
    where
        T: Sync,
        F: Fn(&[T], usize) + Sync + Send,
    {
        self.registry()
            .in_worker_for_loop(|_| loops::for_chunks(slice, body))
    }

    /// [`for_chunks_with`](crate::loops::for_chunks_with) in this pool.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let data = vec![0u8; 1000];
    /// pool.for_chunks_with(&data, sixfold::Partitioner::Static, |chunk, offset| {
    ///     assert!(offset + chunk.len() <= 1000);
    /// });
    /// ```
    pub fn for_chunks_with<'p, T, F>(
        &self,
        slice: &[T],
        partitioner: impl Into<Partitioner<'p>> + Send,
        body: F,
    ) where
        T: Sync,
        F: Fn(&[T], usize) + Sync + Send,
    {
        self.registry()
            .in_worker_for_loop(|_| loops::for_chunks_with(slice, partitioner, body))
    }

    /// [`for_chunks_mut`](crate::loops::for_chunks_mut) in this pool.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut v = vec![1i64; 1000];
    /// pool.for_chunks_mut(&mut v, |chunk, offset| {
    ///     for (i, x) in chunk.iter_mut().enumerate() { *x = (offset + i) as i64; }
    /// });
    /// assert_eq!(v[500], 500);
    /// ```
    pub fn for_chunks_mut<T, F>(&self, slice: &mut [T], body: F)
    where
        T: Send,
        F: Fn(&mut [T], usize) + Sync + Send,
    {
        self.registry()
            .in_worker_for_loop(|_| loops::for_chunks_mut(slice, body))
    }

    /// [`for_chunks_mut_with`](crate::loops::for_chunks_mut_with) in this pool.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut v = vec![0u8; 256];
    /// pool.for_chunks_mut_with(&mut v, sixfold::Partitioner::Simple { grain: 16 }, |chunk, _| {
    ///     assert!(chunk.len() <= 16);
    ///     chunk.fill(7);
    /// });
    /// assert!(v.iter().all(|&x| x == 7));
    /// ```
    pub fn for_chunks_mut_with<'p, T, F>(
        &self,
        slice: &mut [T],
        partitioner: impl Into<Partitioner<'p>> + Send,
        body: F,
    ) where
        T: Send,
        F: Fn(&mut [T], usize) + Sync + Send,
    {
        self.registry()
            .in_worker_for_loop(|_| loops::for_chunks_mut_with(slice, partitioner, body))
    }

    /// [`for_tiles`](crate::loops::for_tiles) in this pool.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let cells = AtomicUsize::new(0);
    /// pool.for_tiles(sixfold::Range2d::new(0..10, 0..10), |t| { cells.fetch_add(t.cells(), Ordering::Relaxed); });
    /// assert_eq!(cells.into_inner(), 100);
    /// ```
    pub fn for_tiles<F>(&self, range: Range2d, body: F)
    where
        F: Fn(Range2d) + Sync + Send,
    {
        self.registry()
            .in_worker_for_loop(|_| loops::for_tiles(range, body))
    }

    /// [`for_tiles_with`](crate::loops::for_tiles_with) in this pool.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// pool.for_tiles_with(sixfold::Range2d::new(0..32, 0..32), sixfold::Partitioner::Static, |t| {
    ///     assert!(t.cells() > 0);
    /// });
    /// ```
    pub fn for_tiles_with<'p, F>(
        &self,
        range: Range2d,
        partitioner: impl Into<Partitioner<'p>> + Send,
        body: F,
    ) where
        F: Fn(Range2d) + Sync + Send,
    {
        self.registry()
            .in_worker_for_loop(|_| loops::for_tiles_with(range, partitioner, body))
    }

    /// [`reduce`](crate::loops::reduce) in this pool.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let sum = pool.reduce(0..101, 0u64, |r, acc| acc + r.map(|i| i as u64).sum::<u64>(), |a, b| a + b);
    /// assert_eq!(sum, 5050);
    /// ```
    pub fn reduce<T, M, C>(&self, range: Range<usize>, identity: T, map: M, combine: C) -> T
    where
        T: Clone + Send + Sync,
        M: Fn(Range<usize>, T) -> T + Sync + Send,
        C: Fn(T, T) -> T + Sync + Send,
    {
        self.registry()
            .in_worker_for_loop(|_| loops::reduce(range, identity, map, combine))
    }

    /// [`reduce_with`](crate::loops::reduce_with) in this pool.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let n = pool.reduce_with(0..64, sixfold::Partitioner::Simple { grain: 8 }, 0, |r, acc| acc + r.len(), |a, b| a + b);
    /// assert_eq!(n, 64);
    /// ```
    pub fn reduce_with<'p, T, M, C>(
        &self,
        range: Range<usize>,
        partitioner: impl Into<Partitioner<'p>> + Send,
        identity: T,
        map: M,
        combine: C,
    ) -> T
    where
        T: Clone + Send + Sync,
        M: Fn(Range<usize>, T) -> T + Sync + Send,
        C: Fn(T, T) -> T + Sync + Send,
    {
        self.registry()
            .in_worker_for_loop(|_| loops::reduce_with(range, partitioner, identity, map, combine))
    }

    /// [`reduce_deterministic`](crate::loops::reduce_deterministic) in this pool.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let v: Vec<f32> = (0..1000).map(|i| i as f32 * 0.1).collect();
    /// let a = pool.reduce_deterministic(0..v.len(), 64, 0.0f32, |r, s| v[r].iter().fold(s, |s, x| s + x), |a, b| a + b);
    /// let b = pool.reduce_deterministic(0..v.len(), 64, 0.0f32, |r, s| v[r].iter().fold(s, |s, x| s + x), |a, b| a + b);
    /// assert_eq!(a.to_bits(), b.to_bits());
    /// ```
    pub fn reduce_deterministic<T, M, C>(
        &self,
        range: Range<usize>,
        grain: usize,
        identity: T,
        map: M,
        combine: C,
    ) -> T
    where
        T: Clone + Send + Sync,
        M: Fn(Range<usize>, T) -> T + Sync + Send,
        C: Fn(T, T) -> T + Sync + Send,
    {
        self.registry().in_worker_for_loop(|_| {
            loops::reduce_deterministic(range, grain, identity, map, combine)
        })
    }
}
