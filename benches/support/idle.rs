//! Idleness: what a pool costs and how fast it answers while it mostly
//! sleeps.
//!
//! * `idle_cpu`: fresh 2-thread pools, one tiny task every millisecond for
//!   two seconds from this thread: the process CPU fraction (the ratio)
//!   and the submit-to-start latencies.
//! * `wake_latency`: the first task after 100 ms of sleep, median of nine
//!   a side, with a `#` line counting the wakes in this machine's slow
//!   wake mode.
//! * `burst_after_idle/2x500us`: one `join` of two 500 us halves after
//!   the pool slept: the woken workers must end up on both CPUs.

use super::process_cpu::process_cpu_time;
use super::{compare, ms, side, threads};
use sixfold::Pool;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Submit-to-start latencies of tasks submitted from this thread at a fixed
/// interval, and the process CPU fraction meanwhile.
struct Sporadic {
    cpu_fraction: f64,
    latencies_us: Vec<f64>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// One tiny task every `interval` for `total`, through `submit`.
fn sporadic(
    interval: Duration,
    total: Duration,
    submit: &dyn Fn(Box<dyn FnOnce() + Send>),
) -> Sporadic {
    let count = (total.as_nanos() / interval.as_nanos()) as usize;
    let started: Arc<Vec<AtomicU64>> = Arc::new((0..count).map(|_| AtomicU64::new(0)).collect());
    let origin = Instant::now();
    let mut submitted = Vec::with_capacity(count);
    let cpu_before = process_cpu_time();
    for i in 0..count {
        std::thread::sleep(interval);
        let started = started.clone();
        submitted.push(origin.elapsed());
        submit(Box::new(move || {
            started[i].store(origin.elapsed().as_nanos() as u64, Ordering::Release);
        }));
    }
    // Let the last task run before the clocks stop.
    while started[count - 1].load(Ordering::Acquire) == 0 {
        std::thread::yield_now();
    }
    let wall = origin.elapsed();
    let cpu = process_cpu_time() - cpu_before;
    let mut latencies_us: Vec<f64> = (0..count)
        .map(|i| {
            let start = started[i].load(Ordering::Acquire) as f64;
            (start - submitted[i].as_nanos() as f64).max(0.0) / 1e3
        })
        .collect();
    latencies_us.sort_by(f64::total_cmp);
    Sporadic {
        cpu_fraction: cpu.as_secs_f64() / wall.as_secs_f64(),
        latencies_us,
    }
}

/// `idle_cpu`: fresh 2-thread pools, one tiny task every millisecond for two
/// seconds from this thread.
pub(super) fn bench_idle_cpu(_: &Pool, _: &rayon::ThreadPool) {
    let interval = Duration::from_millis(1);
    let total = Duration::from_secs(2);
    let ours = {
        let pool = Pool::builder().num_threads(threads()).build().unwrap();
        sporadic(interval, total, &|f| pool.spawn(f))
    };
    let theirs = {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads())
            .build()
            .unwrap();
        sporadic(interval, total, &|f| pool.spawn(f))
    };
    println!(
        "idle_cpu {:.4} {:.4} {:.1} {:.1} {:.1} {:.1} {:.3}",
        ours.cpu_fraction,
        theirs.cpu_fraction,
        percentile(&ours.latencies_us, 0.5),
        percentile(&theirs.latencies_us, 0.5),
        percentile(&ours.latencies_us, 0.99),
        percentile(&theirs.latencies_us, 0.99),
        ours.cpu_fraction / theirs.cpu_fraction
    );
}

/// A wake slower than this came in the slow one of this machine's two
/// wake modes (see `bench_wake_latency`).
const SLOW_WAKE_US: f64 = 100.0;

/// `wake_latency`: the first task after the pool slept for 100 ms; median
/// of several, in microseconds. The task starts on the submitter's CPU on
/// both sides (the kernel's choice), queued behind the submitter's yield
/// loop, in about 20 - 60 us or, some of the time, 100 - 400 us; with half
/// of the wakes or so in the slow mode, the median of nine lands in either
/// and the ratio with it. The `#` line counts each side's slow wakes, the
/// figure to compare between builds.
pub(super) fn bench_wake_latency(ours: &Pool, theirs: &rayon::ThreadPool) {
    let gap = Duration::from_millis(100);
    let mut a = Vec::new();
    let mut b = Vec::new();
    for _ in 0..9 {
        a.extend(sporadic(gap, gap, &|f| ours.spawn(f)).latencies_us);
        b.extend(sporadic(gap, gap, &|f| theirs.spawn(f)).latencies_us);
    }
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let slow = |wakes: &[f64]| wakes.iter().filter(|&&us| us > SLOW_WAKE_US).count();
    println!(
        "#   wake_latency: wakes over {SLOW_WAKE_US} us: sixfold {} of {}, rayon {} of {}; p25 sixfold {:.1} us, rayon {:.1} us",
        slow(&a),
        a.len(),
        slow(&b),
        b.len(),
        percentile(&a, 0.25),
        percentile(&b, 0.25),
    );
    let (a, b) = (percentile(&a, 0.5), percentile(&b, 0.5));
    println!("wake_latency {a:.1} {b:.1} {:.3}", a / b);
}

/// Busy-wait `d` (a stand-in for a burst's work that no sleep can skip).
fn spin_for(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// `burst_after_idle/2x500us`: the pool sleeps (2 ms, untimed), then one
/// `join` of two 500 us halves from outside: periodic work, as a frame
/// loop or a request handler gives it. The woken workers must end up on
/// both CPUs: with both on one, the halves run one after the other
/// (about 1 ms instead of 0.5).
pub(super) fn bench_burst_after_idle(ours: &Pool, theirs: &rayon::ThreadPool) {
    let half = Duration::from_micros(500);
    let idle = Duration::from_millis(2);
    let (a, b) = compare(
        "burst_after_idle/2x500us",
        21,
        side(|| {
            std::thread::sleep(idle);
            || {
                ours.install(|| sixfold::join(|| spin_for(half), || spin_for(half)));
            }
        }),
        side(|| {
            std::thread::sleep(idle);
            || {
                theirs.install(|| rayon::join(|| spin_for(half), || spin_for(half)));
            }
        }),
    );
    println!(
        "#   burst_after_idle/2x500us: sixfold {:.3} ms, rayon {:.3} ms; both halves at once take 0.5 ms, one after the other 1.0",
        ms(a),
        ms(b)
    );
}
