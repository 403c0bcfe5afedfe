//! Opt-in execution traces: which worker ran what, when, and by which rule.
//!
//! With `Builder::trace(true)` every worker writes one byte when a task
//! starts (with the rule that supplied it) and one when it ends, into a
//! small stream of its own that it reuses (`record.rs`), with the rare
//! name and the clock readings beside; it moves the stream, when full and
//! when it goes idle, to a buffer of its own (a mutex only that worker and
//! `Pool::take_trace` ever take), with one record per time it slept. The
//! positions of a worker's bytes are its *stamps*, its event count, tied
//! to the time-stamp counter (`clock.rs`) by readings spaced to the length
//! of its tasks (`stamp.rs`, which says what that keeps exact). So a task
//! costs two byte stores, a few cell updates and a sampled clock reading:
//! no allocation, no atomic read-modify-write, and no store to a line the
//! worker has not written lately. Tracing can stay on. `collect` decodes
//! the streams (tasks nest, so the bytes are a bracket sequence) into the
//! public `TaskEvent`s. With tracing off, the hot path pays one
//! predictable branch on a flag the worker keeps.
//!
//! `Trace::write_chrome_json` writes the Chrome trace-event format that
//! Perfetto (ui.perfetto.dev) and `chrome://tracing` open: one track per
//! worker, a complete event per task with its rule in `args`, and the
//! sleep intervals. `Trace::summary` is the same as a plain-text table.
//!
//! Invariants: a worker's records are in the order it finished them; times
//! are stamps until `collect` and nanoseconds since the pool was built
//! after; a nested task (run while its parent waits) lies inside its
//! parent's interval; a buffer's decoder keeps the tasks still open at
//! the end of a take (a task running across a take keeps its start).

use crate::observe::clock::TraceClock;
use crate::observe::record::{Decoder, Flushed, TaskEvent};
use crate::observe::stats::Rule;
use parking_lot::{Mutex, MutexGuard};
use std::cell::Cell;
use std::fmt::{self, Write as _};
use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// One time a worker blocked in the sleep protocol.
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(2).trace(true).build().unwrap();
/// // With nothing to do, both workers go to sleep ...
/// while pool.sleeping_workers() < 2 {
///     std::thread::yield_now();
/// }
/// pool.broadcast(|_| ()); // ... and each wakes to run its part.
/// let trace = pool.take_trace();
/// for worker in 0..2 {
///     let sleep = trace.sleeps.iter().find(|s| s.worker == worker).expect("slept");
///     assert!(sleep.start_ns <= sleep.end_ns);
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SleepEvent {
    /// The worker that slept.
    pub worker: usize,
    /// Nanoseconds since the pool was built.
    pub start_ns: u64,
    /// Nanoseconds since the pool was built.
    pub end_ns: u64,
}

/// What `Pool::take_trace` returns: the records since the last take.
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(2).trace(true).build().unwrap();
/// for _ in 0..3 {
///     pool.enqueue(|| {});
/// }
/// pool.wait_idle();
/// let trace = pool.take_trace();
/// assert_eq!(trace.workers, 2);
/// assert_eq!(trace.tasks.len(), 3); // one record per task
/// assert!(trace.tasks.iter().all(|t| t.worker < 2 && t.start_ns <= t.end_ns));
/// // The take emptied the buffers.
/// assert!(pool.take_trace().tasks.is_empty());
/// ```
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// Worker slots of the pool (track count).
    pub workers: usize,
    /// Tasks, grouped by worker, each worker's in the order they ended.
    pub tasks: Vec<TaskEvent>,
    /// Sleep intervals, grouped by worker.
    pub sleeps: Vec<SleepEvent>,
}

/// What a worker has handed to its buffer and `collect` has not taken.
#[derive(Default)]
struct Shelf {
    /// The worker's flushed event codes, appended flush after flush.
    flushed: Flushed,
    /// Sleep intervals, in ticks.
    sleeps: Vec<SleepEvent>,
}

/// A worker's buffer (in the registry, one per slot).
#[derive(Default)]
pub(crate) struct TraceBuffer {
    /// What the worker handed over.
    records: Mutex<Shelf>,
    /// What `collect` keeps of this worker's stream between takes; held
    /// through a take and its decoding, so two takes decode in turn.
    decoder: Mutex<Decoder>,
    /// Traced tasks still open at the worker's last flush, plus one while
    /// its local stream holds task codes not yet flushed (it flushes when
    /// the stream fills and whenever it goes idle). A stream announces
    /// itself at its first task code (`stream_started`), before that task
    /// runs, so a task's completion (the latch its waiter wakes on) comes
    /// after the count covers it and before the flush that hands its
    /// record over: `collect` waits for the count, so a caller that saw the
    /// completion sees the record. Only the buffer's worker writes it, a
    /// load and a store a stream (no write a task).
    in_flight: AtomicUsize,
    /// The stamp the slot's next thread starts from.
    next_stamp: AtomicU64,
}

impl TraceBuffer {
    /// The worker's local stream is about to hold its first task code.
    /// Called by the buffer's own worker only, once a stream.
    pub(crate) fn stream_started(&self) {
        let n = self.in_flight.load(Ordering::Relaxed);
        self.in_flight.store(n + 1, Ordering::Relaxed);
    }

    /// Move a worker's local stream (`codes` from stamp `first_stamp` on;
    /// `announced` if it was, with `stream_started`), its names and its
    /// anchors into the buffer. Called by the buffer's own worker only.
    pub(crate) fn flush(
        &self,
        first_stamp: u64,
        codes: &[Cell<u8>],
        announced: bool,
        names: &mut Vec<(u64, Arc<str>)>,
        anchors: &mut Vec<(u64, u64)>,
    ) {
        let next_stamp = first_stamp + codes.len() as u64;
        self.next_stamp.store(next_stamp, Ordering::Relaxed);
        if codes.is_empty() {
            return;
        }
        let (started, ended) =
            self.records
                .lock()
                .flushed
                .append(first_stamp, codes, names, anchors);
        // The stream's token gives way to the tasks it leaves open.
        let before = self.in_flight.load(Ordering::Relaxed);
        let after = before + started - ended - usize::from(announced);
        self.in_flight.store(after, Ordering::Release);
    }

    /// Where the slot's next thread starts its stamps.
    pub(crate) fn next_stamp(&self) -> u64 {
        self.next_stamp.load(Ordering::Relaxed)
    }

    pub(crate) fn sleep(&self, event: SleepEvent) {
        self.records.lock().sleeps.push(event);
    }

    /// Lock the decoder and take what the worker handed over: its codes
    /// (swapped for the decoder's emptied spare) and its sleeps, in ticks.
    fn take(&self) -> (MutexGuard<'_, Decoder>, Flushed, Vec<SleepEvent>) {
        let mut decoder = self.decoder.lock();
        let mut flushed = std::mem::take(&mut decoder.spare);
        let mut shelf = self.records.lock();
        std::mem::swap(&mut flushed, &mut shelf.flushed);
        let sleeps = std::mem::take(&mut shelf.sleeps);
        (decoder, flushed, sleeps)
    }
}

/// How long `collect` waits for a worker's task in flight to be recorded;
/// a task that runs longer is left for the next take.
const IN_FLIGHT_WAIT: Duration = Duration::from_millis(10);

/// Gather and empty the workers' buffers. From outside the pool, first wait
/// (briefly) for tasks in flight, whose completion the caller may already
/// have seen, to be recorded.
pub(crate) fn collect<'a>(
    buffers: impl Iterator<Item = &'a TraceBuffer> + Clone,
    workers: usize,
    wait_in_flight: bool,
    clock: &TraceClock,
) -> Trace {
    if wait_in_flight {
        let deadline = Instant::now() + IN_FLIGHT_WAIT;
        for buffer in buffers.clone() {
            while buffer.in_flight.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
                std::thread::yield_now();
            }
        }
    }
    // Decoders are locked in buffer order, by every collector alike; each
    // stays locked until its stream is decoded, so takes decode in turn.
    let taken: Vec<_> = buffers.map(TraceBuffer::take).collect();
    // Streams hold stamps until here (the position of a buffer is its
    // worker's index).
    let cal = clock.calibrate();
    let mut trace = Trace {
        workers,
        ..Trace::default()
    };
    trace
        .tasks
        .reserve_exact(taken.iter().map(|(_, flushed, _)| flushed.closes()).sum());
    for (worker, (mut decoder, mut flushed, sleeps)) in taken.into_iter().enumerate() {
        decoder.decode(&mut flushed, worker, &cal, &mut trace.tasks);
        decoder.spare = flushed;
        trace.sleeps.extend(sleeps.into_iter().map(|s| SleepEvent {
            start_ns: cal.ns(s.start_ns),
            end_ns: cal.ns(s.end_ns),
            ..s
        }));
    }
    trace
}

/// A JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Microseconds with nanosecond precision, as the format wants.
fn micros(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

impl Trace {
    /// Write the trace in Chrome's trace-event JSON: open the file in
    /// <https://ui.perfetto.dev> or `chrome://tracing`. One track per
    /// worker (`tid`), a complete event (`"ph": "X"`) per task named after
    /// the task (or `task`) with `rule` and `rule_name` in its `args`, and
    /// one `sleep` event per sleep interval.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).trace(true).build().unwrap();
    /// pool.install(|| sixfold::join(|| 1, || 2));
    /// let trace = pool.take_trace();
    /// let mut json = Vec::new();
    /// trace.write_chrome_json(&mut json).unwrap();
    /// assert!(String::from_utf8(json).unwrap().contains(r#""traceEvents""#));
    /// ```
    pub fn write_chrome_json(&self, mut out: impl Write) -> io::Result<()> {
        writeln!(out, "{{\"displayTimeUnit\": \"ns\", \"traceEvents\": [")?;
        let mut first = true;
        let mut sep = |out: &mut dyn Write| -> io::Result<()> {
            if !std::mem::take(&mut first) {
                writeln!(out, ",")?;
            }
            Ok(())
        };
        for w in 0..self.workers {
            sep(&mut out)?;
            write!(
                out,
                "{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": {w}, \"args\": {{\"name\": \"worker {w}\"}}}}"
            )?;
        }
        for t in &self.tasks {
            sep(&mut out)?;
            let name = t.name.as_deref().unwrap_or("task");
            write!(
                out,
                "{{\"ph\": \"X\", \"name\": {}, \"cat\": \"task\", \"pid\": 1, \"tid\": {}, \"ts\": {}, \"dur\": {}, \"args\": {{\"rule\": {}, \"rule_name\": {}}}}}",
                json_string(name),
                t.worker,
                micros(t.start_ns),
                micros(t.end_ns.saturating_sub(t.start_ns)),
                t.rule.number(),
                json_string(t.rule.short_name())
            )?;
        }
        for s in &self.sleeps {
            sep(&mut out)?;
            write!(
                out,
                "{{\"ph\": \"X\", \"name\": \"sleep\", \"cat\": \"sleep\", \"pid\": 1, \"tid\": {}, \"ts\": {}, \"dur\": {}}}",
                s.worker,
                micros(s.start_ns),
                micros(s.end_ns.saturating_sub(s.start_ns))
            )?;
        }
        writeln!(out, "\n]}}")
    }

    /// Tasks per rule, over all workers (index: `Rule as usize`).
    ///
    /// ```
    /// use sixfold::Rule;
    /// let pool = sixfold::Pool::builder().num_threads(2).trace(true).build().unwrap();
    /// for _ in 0..4 {
    ///     pool.enqueue(|| {});
    /// }
    /// pool.wait_idle();
    /// let by_rule = pool.take_trace().tasks_by_rule();
    /// assert_eq!(by_rule[Rule::SharedQueue as usize], 4);
    /// assert_eq!(by_rule.iter().sum::<u64>(), 4);
    /// ```
    pub fn tasks_by_rule(&self) -> [u64; 6] {
        let mut by = [0; 6];
        for t in &self.tasks {
            by[t.rule as usize] += 1;
        }
        by
    }

    /// A plain-text table: per worker, busy time (in tasks, outermost
    /// only: nested tasks are inside their parents), sleep time, the rest
    /// of the traced span as idle, tasks by rule and steals (rule 6).
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).trace(true).build().unwrap();
    /// pool.install(|| sixfold::join(|| 1, || 2));
    /// let trace = pool.take_trace();
    /// let summary = trace.summary();
    /// // A header, then one row per worker.
    /// assert_eq!(summary.lines().count(), 1 + 2);
    /// assert!(summary.starts_with("worker") && summary.contains("6:steal"));
    /// assert_eq!(trace.to_string(), summary); // what `Display` prints
    /// ```
    pub fn summary(&self) -> String {
        let span_start = self
            .tasks
            .iter()
            .map(|t| t.start_ns)
            .chain(self.sleeps.iter().map(|s| s.start_ns))
            .min()
            .unwrap_or(0);
        let span_end = self
            .tasks
            .iter()
            .map(|t| t.end_ns)
            .chain(self.sleeps.iter().map(|s| s.end_ns))
            .max()
            .unwrap_or(0);
        let span = span_end.saturating_sub(span_start);
        let mut out = String::new();
        let _ = write!(
            out,
            "{:<7} {:>10} {:>10} {:>10}",
            "worker", "busy ms", "sleep ms", "idle ms"
        );
        for rule in Rule::ALL {
            let _ = write!(
                out,
                " {:>12}",
                format!("{}:{}", rule.number(), rule.short_name())
            );
        }
        let _ = writeln!(out, " {:>7}", "steals");
        for w in 0..self.workers {
            let mut tasks: Vec<&TaskEvent> = self.tasks.iter().filter(|t| t.worker == w).collect();
            tasks.sort_by_key(|t| (t.start_ns, std::cmp::Reverse(t.end_ns)));
            // Busy: the union of the intervals (nested ones add nothing).
            let (mut busy, mut covered_to) = (0u64, 0u64);
            for t in &tasks {
                if t.end_ns > covered_to {
                    busy += t.end_ns - t.start_ns.max(covered_to);
                    covered_to = t.end_ns;
                }
            }
            let slept: u64 = self
                .sleeps
                .iter()
                .filter(|s| s.worker == w)
                .map(|s| s.end_ns - s.start_ns)
                .sum();
            let idle = span.saturating_sub(busy + slept);
            let mut by = [0u64; 6];
            for t in &tasks {
                by[t.rule as usize] += 1;
            }
            let ms = |ns: u64| ns as f64 / 1e6;
            let _ = write!(
                out,
                "{w:<7} {:>10.3} {:>10.3} {:>10.3}",
                ms(busy),
                ms(slept),
                ms(idle)
            );
            for n in by {
                let _ = write!(out, " {n:>12}");
            }
            let _ = writeln!(out, " {:>7}", by[Rule::Steal as usize]);
        }
        out
    }
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.summary())
    }
}
