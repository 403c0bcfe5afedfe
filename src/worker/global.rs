//! The global pool's registry: started on first use with the default
//! configuration, or set once by `Builder::build_global`.
//!
//! It lives in the worker layer, not beside `Pool`, so that the free
//! functions of the layers above (`join`, `scope`, the parallel loops)
//! reach a pool without importing the pool layer, which imports them.
//!
//! Invariant: once set, the global registry lives for the rest of the
//! process (its threads are never joined, as rayon's are not), so handing
//! out `&'static` references to it is sound.

use crate::platform::topology::{Pinning, Topology};
use crate::worker::registry::RegistryConfig;
use crate::worker::thread::{Registry, WorkerThread};
use std::sync::{Arc, OnceLock};

static GLOBAL: OnceLock<Arc<Registry>> = OnceLock::new();

/// The global registry, started now if this is its first use.
///
/// # Panics
/// If it has to be started and the operating system refuses to start its
/// threads.
pub(crate) fn global_registry() -> &'static Arc<Registry> {
    GLOBAL.get_or_init(|| {
        let started = Registry::start(RegistryConfig::defaults())
            .unwrap_or_else(|e| panic!("sixfold: the global pool could not be built: {e}"));
        // The threads are never joined: dropping the handles detaches them.
        started.registry
    })
}

/// Make `registry` the global one; gives it back if there is one already.
pub(crate) fn set_global_registry(registry: Arc<Registry>) -> Result<(), Arc<Registry>> {
    GLOBAL.set(registry)
}

/// Is there a global registry yet?
pub(crate) fn has_global_registry() -> bool {
    GLOBAL.get().is_some()
}

/// The registry a free function uses: the calling worker's, else the
/// global one.
pub(crate) fn current_registry() -> &'static Arc<Registry> {
    match WorkerThread::current() {
        // A worker's registry outlives everything the worker runs.
        Some(worker) => worker.registry(),
        None => global_registry(),
    }
}

impl RegistryConfig {
    /// The default configuration: `default_num_threads` threads, named
    /// `sixfold-N`, the platform's stack size, the detected topology, no
    /// pinning, no trace.
    pub(crate) fn defaults() -> RegistryConfig {
        RegistryConfig {
            num_threads: default_num_threads(),
            thread_name: None,
            stack_size: None,
            panic_handler: None,
            start_handler: None,
            exit_handler: None,
            topology: Topology::detect(),
            pinning: Pinning::default(),
            trace: false,
            adopt_current_thread: false,
        }
    }
}

/// `SIXFOLD_NUM_THREADS` if it is a positive number, else the cores this
/// process may run on (its CPU mask), else what the OS reports as
/// available parallelism.
pub(crate) fn default_num_threads() -> usize {
    if let Some(n) = std::env::var("SIXFOLD_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
    {
        return n;
    }
    core_affinity::get_core_ids()
        .map(|ids| ids.len())
        .filter(|&n| n > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1)
}
