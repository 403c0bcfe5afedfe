//! Pools: the [`Builder`], the [`Pool`] handle with every one of its
//! methods, and the free functions of the global pool. The top of the
//! house: each method here is a thin door into a layer below (`fork_join`,
//! `loops`, `graph`, `pipeline`, `task`), entering the pool through the
//! worker layer's one way into a wait (`worker/entry.rs`).
//!
//! - `thread_pool.rs`: the handle, `install`, `wait_idle`, what a pool
//!   tells about itself, and its drop;
//! - `builder.rs`: configuration and start, for a pool or the global one;
//! - `submit.rs`: `'static` work without waiting (spawn, enqueue, with
//!   affinity or priority, broadcast);
//! - `run.rs`: blocking runs of task nodes, graphs and pipelines;
//! - `fork_join.rs`, `loops.rs`: rayon's calls and the parallel loops as
//!   methods;
//! - `global.rs`: `Pool::global` and the free functions for `'static`
//!   work.

mod builder;
mod fork_join;
pub(crate) mod global;
mod loops;
mod run;
#[cfg(all(test, target_os = "linux", not(miri), not(loom)))]
mod start_placement_tests;
mod submit;
pub(crate) mod thread_pool;

pub use builder::Builder;
pub use global::{
    current_num_threads, enqueue, enqueue_with_priority, spawn, spawn_broadcast, spawn_fifo,
};
pub use thread_pool::{Pool, current_worker};
