//! The global pool: built on first use, sized by `SIXFOLD_NUM_THREADS` or
//! the process's CPU mask; the free functions use it outside every pool and
//! the calling worker's pool inside one. (Configuring it with
//! `build_global` has its own test binary, tests/global_pool_configured.rs,
//! since the global pool is per process.)

mod common;

use common::within;
use sixfold::{Pool, current_worker};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn join_from_main_runs_its_halves_on_two_different_workers() {
    if cores() < 2 {
        eprintln!("skipped: this machine has one core");
        return;
    }
    within("join on the global pool", LIMIT, || {
        // Each half waits until the other has started: they can only both
        // finish if they run at the same time, on two workers.
        let (a_started, b_started) = (AtomicBool::new(false), AtomicBool::new(false));
        let meet = |me: &AtomicBool, other: &AtomicBool| {
            me.store(true, Ordering::SeqCst);
            assert!(
                common::wait_for(Duration::from_secs(10), || other.load(Ordering::SeqCst)),
                "the other half never ran alongside"
            );
            (current_worker(), std::thread::current().id())
        };
        let (a, b) = sixfold::join(
            || meet(&a_started, &b_started),
            || meet(&b_started, &a_started),
        );
        assert!(
            a.0.is_some() && b.0.is_some(),
            "{a:?} {b:?}: both on workers"
        );
        assert_ne!(a.0, b.0, "two different workers");
        assert_ne!(a.1, b.1, "two different threads");
        assert_ne!(a.1, std::thread::current().id(), "not the caller");
    });
}

#[test]
fn free_functions_use_the_global_pool_outside_and_the_own_pool_inside() {
    within("free functions", LIMIT, || {
        let global_threads = Pool::global().num_threads();
        assert_eq!(sixfold::current_num_threads(), global_threads);

        let name = || std::thread::current().name().unwrap_or("").to_owned();
        let (tx, rx) = mpsc::channel();
        for kind in 0..3 {
            let tx = tx.clone();
            let job = move || tx.send((kind, name())).unwrap();
            match kind {
                0 => sixfold::spawn(job),
                1 => sixfold::spawn_fifo(job),
                _ => sixfold::enqueue(job),
            }
        }
        let mut got: Vec<_> = (0..3).map(|_| rx.recv().unwrap()).collect();
        got.sort();
        for (kind, thread) in got {
            assert!(
                thread.starts_with("sixfold-"),
                "kind {kind} ran on {thread:?}"
            );
        }

        // Inside a pool, the same calls stay in that pool.
        let pool = Arc::new(
            Pool::builder()
                .num_threads(3)
                .thread_name(|i| format!("own-{i}"))
                .build()
                .unwrap(),
        );
        let (tx, rx) = mpsc::channel();
        let threads = pool.install(move || {
            for kind in 0..3 {
                let tx = tx.clone();
                let job = move || tx.send(name()).unwrap();
                match kind {
                    0 => sixfold::spawn(job),
                    1 => sixfold::spawn_fifo(job),
                    _ => sixfold::enqueue(job),
                }
            }
            sixfold::current_num_threads()
        });
        assert_eq!(threads, 3);
        for _ in 0..3 {
            let thread = rx.recv().unwrap();
            assert!(thread.starts_with("own-"), "ran on {thread:?}");
        }
        pool.wait_idle();
    });
}

#[test]
fn scope_and_scope_fifo_from_main_run_on_global_workers() {
    within("scopes on the global pool", LIMIT, || {
        let on_workers = AtomicUsize::new(0);
        sixfold::scope(|s| {
            for _ in 0..8 {
                s.spawn(|_| {
                    if current_worker().is_some() {
                        on_workers.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        sixfold::scope_fifo(|s| {
            for _ in 0..8 {
                s.spawn_fifo(|_| {
                    if current_worker().is_some() {
                        on_workers.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        assert_eq!(on_workers.load(Ordering::SeqCst), 16);
    });
}

#[test]
fn build_global_after_first_use_is_an_error() {
    Pool::global();
    let err = Pool::builder().num_threads(2).build_global().unwrap_err();
    assert!(matches!(
        err,
        sixfold::BuildError::GlobalPoolAlreadyInitialized
    ));
    assert!(
        err.to_string().contains("already been initialized"),
        "{err}"
    );
}

#[test]
fn a_zero_thread_pool_built_explicitly_still_runs_on_its_caller() {
    let pool = Pool::builder().num_threads(0).build().unwrap();
    let me = std::thread::current().id();
    let ran_here = AtomicUsize::new(0);
    pool.scope(|s| {
        for _ in 0..10 {
            s.spawn(|_| {
                if std::thread::current().id() == me {
                    ran_here.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    assert_eq!(ran_here.load(Ordering::SeqCst), 10);
}

/// The child half of `sixfold_num_threads_sizes_the_global_pool`: only
/// does something in the child process the parent starts.
#[test]
fn child_reports_the_global_pool_size() {
    if std::env::var_os("SIXFOLD_GLOBAL_POOL_CHILD").is_none() {
        return;
    }
    println!("global-threads={}", sixfold::current_num_threads());
}

#[test]
fn sixfold_num_threads_sizes_the_global_pool() {
    let run_child = |value: &str| {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "child_reports_the_global_pool_size",
                "--nocapture",
            ])
            .env("SIXFOLD_GLOBAL_POOL_CHILD", "1")
            .env("SIXFOLD_NUM_THREADS", value)
            .output()
            .expect("run the test binary again");
        assert!(out.status.success(), "child failed: {out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("global-threads="))
            .unwrap_or_else(|| panic!("no report in {stdout}"))
            .trim()
            .parse::<usize>()
            .unwrap()
    };
    assert_eq!(run_child("3"), 3);
    assert_eq!(run_child("7"), 7);
    // Not a positive number: the default (the CPU mask), as rayon does.
    let default = core_affinity_count();
    assert_eq!(run_child("0"), default);
    assert_eq!(run_child("many"), default);
}

/// The cores this process may run on, as the default size counts them.
fn core_affinity_count() -> usize {
    // SAFETY: a zeroed cpu_set_t is a valid empty set for the call to fill.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is this process; the size matches the set.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    assert_eq!(rc, 0);
    // SAFETY: the set was filled by the kernel.
    unsafe { libc::CPU_COUNT(&set) as usize }
}
