//! What the machine is like right now: the time a cache line takes to go
//! from one CPU to another and back. Run it before and after a set of
//! `compare` runs: `cargo bench --bench core_to_core`.
//!
//! On the shared 2-vCPU VMs the `compare` bench has run on, that round
//! trip is about 60 ns, and then, for stretches of tens of seconds to
//! minutes, about 440 ns (the two vCPUs placed far apart on the host). Every line whose two workers hand
//! data to each other slows down in the second phase, for both libraries
//! and by different amounts: two workers on the near-empty wavefront grid
//! went from 4.1 to 5.9 ms against one worker's 3.9 within the same
//! minute the round trip went from 60 to 440 ns. A set of runs is only
//! comparable with another taken in the same phase.
//!
//! A program of its own, not a line of `compare`: code added to that
//! binary moved how its crate was split for code generation, and with it
//! whether a `Task::execute` of the `fib_cps` workload was inlined
//! (`fib_cps/30` 1.99 - 2.02 -> 2.07 - 2.09 of rayon with the library
//! unchanged, five alternated rounds).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// A counter on a cache line of its own (and the adjacent-line prefetcher's
/// neighbour), bounced between two threads.
#[repr(align(128))]
struct Line(AtomicU64);

/// Wait until `line` holds `value`. Spins, and yields now and then: were
/// both ends on one CPU (pinning refused), a pure spin would wait a time
/// slice a round.
fn wait_for(line: &Line, value: u64) {
    let mut spins = 0u32;
    while line.0.load(Ordering::Acquire) != value {
        spins += 1;
        if spins.is_multiple_of(4096) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Median of five measures of the round trip of a cache line between the
/// first two CPUs this process may use, in ns; `None` with fewer than two.
/// Each end is a thread of its own, pinned to one of the two.
fn round_trip_ns() -> Option<f64> {
    const ROUNDS: u64 = 100_000;
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return None;
    }
    let cores = core_affinity::get_core_ids()?;
    let (&near, &far) = (cores.first()?, cores.get(1)?);
    let mut samples: Vec<f64> = (0..5)
        .map(|_| {
            let line = Arc::new(Line(AtomicU64::new(0)));
            let other = line.clone();
            let echo = std::thread::spawn(move || {
                core_affinity::set_for_current(far);
                for i in 0..ROUNDS {
                    wait_for(&other, 2 * i + 1);
                    other.0.store(2 * i + 2, Ordering::Release);
                }
            });
            let ping = std::thread::spawn(move || {
                core_affinity::set_for_current(near);
                let start = Instant::now();
                for i in 0..ROUNDS {
                    line.0.store(2 * i + 1, Ordering::Release);
                    wait_for(&line, 2 * i + 2);
                }
                start.elapsed().as_nanos() as f64 / ROUNDS as f64
            });
            echo.join().expect("the echo thread");
            ping.join().expect("the measuring thread")
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    Some(samples[2])
}

fn main() {
    match round_trip_ns() {
        Some(ns) => println!(
            "core_to_core {ns:.0} ns: a cache line's round trip between the first two CPUs (about 60 in this VM's fast phase, 440 in its slow one)"
        ),
        None => println!("core_to_core: fewer than two CPUs"),
    }
}
