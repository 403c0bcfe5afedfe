//! Opt-in execution traces: which worker ran what, when, and by which rule.
//!
//! With `Builder::trace(true)` every worker appends one record per task it
//! runs (start, end, the rule that supplied it, the task's name if it has
//! one) and one per time it slept, to a batch of its own, moved every
//! `BATCH` records (and when it goes idle) to a buffer of its own (a mutex
//! only that worker and `Pool::take_trace` ever take). A record holds two
//! stamps, not times: a worker's event counts, tied to the time-stamp
//! counter (`clock.rs`) by readings spaced to the length of its tasks
//! (`stamp.rs`, which says what that keeps exact), so a record costs a few
//! cell updates, 16 bytes (`RawTask` in `record.rs`: the public `TaskEvent`
//! is built by `collect`), no allocation but the batch's, and no atomic
//! read-modify-write: tracing can stay on. An unnamed graph node run right
//! after the one before it (rule 2, one stamp long) costs only a count on
//! the record before it (`RawTask::successors`). With tracing off, the hot
//! path pays one predictable branch on a flag the worker keeps.
//!
//! `Trace::write_chrome_json` writes the Chrome trace-event format that
//! Perfetto (ui.perfetto.dev) and `chrome://tracing` open: one track per
//! worker, a complete event per task with its rule in `args`, and the
//! sleep intervals. `Trace::summary` is the same as a plain-text table.
//!
//! Invariants: a worker's records are in the order it finished them; times
//! are stamps until `collect` and nanoseconds since the pool was built
//! after; a nested task (run while its parent waits) lies inside its
//! parent's interval; a buffer keeps the anchors its worker's records yet
//! to come may need (`TraceBuffer::flush`'s `needed_from`).

use crate::observe::clock::TraceClock;
use crate::observe::record::{BATCH, RecordBatch, TaskEvent};
use crate::observe::stamp::Anchors;
use crate::observe::stats::Rule;
use parking_lot::Mutex;
use std::fmt::{self, Write as _};
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// One time a worker blocked in the sleep protocol.
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
struct Shelf {
    /// Whole batches, as the worker filled them (no copying on flush).
    batches: Vec<RecordBatch>,
    /// Sleep intervals, in ticks.
    sleeps: Vec<SleepEvent>,
    /// Anchors of batches already taken that the worker's records yet to
    /// come may still need (a task running across a take).
    kept_anchors: Vec<(u64, u64)>,
    /// No stamp of a record yet to come lies below this (the start of the
    /// task running outermost at the last flush; `u64::MAX`: none ran).
    needed_from: u64,
}

impl Default for Shelf {
    fn default() -> Self {
        Shelf {
            batches: Vec::new(),
            sleeps: Vec::new(),
            kept_anchors: Vec::new(),
            needed_from: u64::MAX,
        }
    }
}

/// A worker's buffer (in the registry, one per slot).
#[derive(Default)]
pub(crate) struct TraceBuffer {
    /// What the worker handed over.
    records: Mutex<Shelf>,
    /// Emptied batches `collect` gives back, for the worker's next flush:
    /// a traced pool that is taken from regularly allocates no new batch
    /// (a fresh one is 96 KiB of page faults, which cost a traced task as
    /// much as its record).
    spare: Mutex<Vec<RecordBatch>>,
    /// Traced tasks this worker has started and whose records are not in
    /// `records` yet (running, or in the worker's local batch, which it
    /// flushes every `BATCH` records and whenever it goes idle). A task's
    /// completion (the latch its waiter wakes on) comes after the increment
    /// and before the flush: `collect` waits for the count, so a caller that
    /// saw the completion sees the record. Only the buffer's worker writes
    /// it, so a load and a store do (no locked instruction a task).
    in_flight: AtomicUsize,
    /// The stamp the slot's next thread starts from (`Stamps::starting_at`).
    next_stamp: AtomicU64,
}

impl TraceBuffer {
    /// Called by the buffer's own worker only.
    #[inline]
    pub(crate) fn task_started(&self) {
        let n = self.in_flight.load(Ordering::Relaxed);
        self.in_flight.store(n + 1, Ordering::Relaxed);
    }

    /// Move a worker's local batch of records (each announced with
    /// `task_started`) into the buffer; `needed_from`: no stamp of the
    /// worker's records yet to come lies below it. Called by the buffer's
    /// own worker only, which also says where its stamps stand.
    pub(crate) fn flush(&self, batch: &mut RecordBatch, needed_from: u64, next_stamp: u64) {
        self.next_stamp.store(next_stamp, Ordering::Relaxed);
        if batch.is_empty() {
            return;
        }
        let n = batch.len();
        let next = self
            .spare
            .lock()
            .pop()
            .unwrap_or_else(|| RecordBatch::with_capacity(BATCH));
        let full = std::mem::replace(batch, next);
        {
            let mut shelf = self.records.lock();
            shelf.batches.push(full);
            shelf.needed_from = needed_from;
        }
        let left = self.in_flight.load(Ordering::Relaxed);
        self.in_flight.store(left - n, Ordering::Release);
    }

    /// Where the slot's next thread starts its stamps.
    pub(crate) fn next_stamp(&self) -> u64 {
        self.next_stamp.load(Ordering::Relaxed)
    }

    pub(crate) fn sleep(&self, event: SleepEvent) {
        self.records.lock().sleeps.push(event);
    }

    /// Take the batches and sleeps, with every anchor their stamps need;
    /// keep the anchors the records yet to come may need.
    fn take(&self) -> (Vec<RecordBatch>, Vec<SleepEvent>, Vec<(u64, u64)>) {
        let mut shelf = self.records.lock();
        let batches = std::mem::take(&mut shelf.batches);
        let mut anchors = std::mem::take(&mut shelf.kept_anchors);
        for batch in &batches {
            anchors.extend_from_slice(&batch.anchors);
        }
        let from = Anchors::new(&anchors).needed_from(shelf.needed_from);
        shelf.kept_anchors = anchors[from..].to_vec();
        (batches, std::mem::take(&mut shelf.sleeps), anchors)
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
    let taken: Vec<_> = buffers.clone().map(TraceBuffer::take).collect();
    // Records hold stamps until here (the buffer's position is the
    // worker's index).
    let cal = clock.calibrate();
    let mut trace = Trace {
        workers,
        ..Trace::default()
    };
    let recorded = taken
        .iter()
        .flat_map(|(batches, _, _)| batches)
        .map(RecordBatch::len)
        .sum();
    trace.tasks.reserve_exact(recorded);
    for (worker, ((batches, sleeps, anchors), buffer)) in taken.into_iter().zip(buffers).enumerate()
    {
        let anchors = Anchors::new(&anchors);
        let mut emptied = Vec::with_capacity(batches.len());
        for mut batch in batches {
            batch.drain_into(worker, &cal, &anchors, &mut trace.tasks);
            if batch.tasks.capacity() == BATCH {
                emptied.push(batch);
            }
        }
        buffer.spare.lock().append(&mut emptied);
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
