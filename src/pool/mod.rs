//! Pools: the [`Builder`], the [`Pool`] handle with its entry points, and
//! the global pool behind the free functions.

pub(crate) mod global;
mod loops;
pub(crate) mod thread_pool;

pub use global::{
    current_num_threads, enqueue, enqueue_with_priority, spawn, spawn_broadcast, spawn_fifo,
};
pub use thread_pool::{Builder, Pool, current_worker};
