//! A pool built beside a busy neighbour starts its workers on the
//! building thread's CPU (`worker/sleep/placement.rs`, `StartingHere`);
//! nothing of the user's may run with that narrowed set. Unit tests, as
//! only they can set the process's verdict on the machine's load.

use crate::Pool;
use crate::platform::cpu_spread::{allowed_cpus, narrowable_cpus};
use crate::worker::sleep::set_machine_has_neighbour;
use std::sync::{Arc, Mutex};

/// Beside a (declared) busy neighbour, every start handler sees every CPU
/// its worker may run on, and so does the builder once `build` returns.
/// Fails if a worker skips its restore (tried: the handlers saw one CPU).
#[test]
fn start_handlers_beside_a_neighbour_see_every_cpu() {
    let Some(own) = narrowable_cpus() else {
        return;
    };
    set_machine_has_neighbour(true);
    let seen: Arc<Mutex<Vec<Vec<usize>>>> = Arc::default();
    let log = seen.clone();
    let pool = Pool::builder()
        .num_threads(3)
        .start_handler(move |_| log.lock().unwrap().push(allowed_cpus(0)))
        .build()
        .unwrap();
    let after_build = allowed_cpus(0);
    // The drop joins the workers: every start handler has run by then.
    drop(pool);
    set_machine_has_neighbour(false);
    assert_eq!(after_build, own, "the builder has its CPUs back");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    for cpus in seen.iter() {
        assert_eq!(cpus, &own, "a start handler ran with narrowed CPUs");
    }
}
