//! Helpers shared by the integration tests: bounded waits and a watchdog,
//! so that a scheduler bug fails a test instead of hanging it.
//!
//! Each test file that uses them says `mod common;`; not every file uses
//! every helper.

#![allow(dead_code)]

use sixfold::Pool;
use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Spin (yielding) until `cond` holds or `limit` passed; whether it held.
pub fn wait_for(limit: Duration, cond: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::yield_now();
    }
    true
}

/// Like `wait_for`, but a timeout fails the test, naming `what`.
pub fn poll_until(what: &str, limit: Duration, cond: impl Fn() -> bool) {
    assert!(
        wait_for(limit, cond),
        "timed out after {limit:?} waiting for {what}"
    );
}

/// Run `f` on a thread of its own and return its result, or `Err(())` if it
/// did not finish within `limit` (the thread is left behind: a hang). A
/// panic in `f` is resumed here.
pub fn finishes_within<R, F>(limit: Duration, f: F) -> Result<R, ()>
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("watched".into())
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ = tx.send(result);
        })
        .expect("spawn the watched thread");
    match rx.recv_timeout(limit) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(payload)) => std::panic::resume_unwind(payload),
        Err(_) => Err(()),
    }
}

/// Run `f` under a watchdog: a hang past `limit` fails the test with a
/// message naming `what`, instead of hanging the test run.
pub fn within<R, F>(what: &str, limit: Duration, f: F) -> R
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    finishes_within(limit, f).unwrap_or_else(|()| {
        print_all_backtraces();
        panic!("{what} did not finish within {limit:?}: a hang")
    })
}

/// On a hang, print every thread's stack (through `gdb`, when it is
/// installed and may attach) to stderr: where each worker waits or spins
/// is what a hang that recurs once in thousands of runs needs to be
/// understood. Set `SIXFOLD_HANG_BACKTRACE=0` to skip it.
pub fn print_all_backtraces() {
    if std::env::var("SIXFOLD_HANG_BACKTRACE").as_deref() == Ok("0") {
        return;
    }
    let pid = std::process::id().to_string();
    let dumped = std::process::Command::new("gdb")
        .args(["-p", &pid, "-batch", "-nx", "-ex", "thread apply all bt 40"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::inherit())
        .stderr(std::process::Stdio::inherit())
        .status();
    if let Err(e) = dumped {
        eprintln!("no stacks of the hung threads: gdb did not run ({e})");
    }
}

/// Install (once per process) a panic hook that stays quiet for panics
/// whose message contains `marker`: the ones a test provokes on purpose.
pub fn quiet_intentional_panics(marker: &'static str) {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            if !message.contains(marker) {
                default(info);
            }
        }));
    });
}

/// A pool of `threads` workers (0: the caller is the guest worker).
pub fn pool(threads: usize) -> Pool {
    Pool::builder()
        .num_threads(threads)
        .build()
        .expect("build a pool")
}

/// The text of a panic payload (`panic!` with a literal or a format).
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string payload>".to_owned()
    }
}

/// splitmix64's output function: a seed's well-mixed hash, so that a
/// randomized test's shapes are a function of its seed alone.
pub fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fibonacci by `sixfold::join`: the fork-join the tests run most.
pub fn fib_join(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = sixfold::join(|| fib_join(n - 1), || fib_join(n - 2));
    a + b
}

/// Keep worker 1 busy (a task that spins until released): the stuck
/// worker that soft affinity and proxies must route around. Set the flag
/// returned to release it.
pub fn occupy_worker_1(pool: &Pool) -> Arc<AtomicBool> {
    let release = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let (r, s) = (release.clone(), started.clone());
    pool.spawn_on(1, move || {
        s.store(true, Ordering::SeqCst);
        while !r.load(Ordering::SeqCst) {
            std::hint::spin_loop();
        }
    })
    .unwrap();
    poll_until("worker 1 busy", Duration::from_secs(60), || {
        started.load(Ordering::SeqCst)
    });
    release
}
