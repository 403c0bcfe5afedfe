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
//! cell updates, 16 bytes (`RawTask`: the public `TaskEvent` is built by
//! `collect`), no allocation but the batch's, and no atomic
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

use crate::observe::clock::{Calibration, TraceClock};
use crate::observe::stamp::Anchors;
use crate::observe::stats::Rule;
use crate::platform::prefetch::prefetch_for_write;
use parking_lot::Mutex;
use std::fmt::{self, Write as _};
use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// One task a worker ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskEvent {
    /// The worker that ran it.
    pub worker: usize,
    /// The rule that supplied it.
    pub rule: Rule,
    /// Nanoseconds since the pool was built, when it started. Exact for a
    /// task that starts after its worker searched or slept, and whenever
    /// the worker's tasks last a microsecond or more; within a run of
    /// shorter tasks, placed evenly between clock readings a few
    /// microseconds apart (see [`Builder::trace`](crate::Builder::trace)).
    pub start_ns: u64,
    /// ... and when it ended (nested tasks included), with the same
    /// precision.
    pub end_ns: u64,
    /// Its name: a graph node's (`Graph::add_named`), or a task's spawned
    /// with `Pool::spawn_named`.
    pub name: Option<Arc<str>>,
}

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

/// A task record as its worker writes it: a stamp, a span and the rule,
/// 16 bytes, and the run of graph successors that followed it, one stamp
/// each. The worker is the buffer's, and the rare name and the rare span
/// too long for 32 bits go beside (`RecordBatch::names`,
/// `RecordBatch::long_ends`). A traced fork-join writes a record every
/// ten nanoseconds or so, and the records of a run outgrow the caches: the
/// bytes written are most of what a record costs beyond its clock
/// reading, so `collect` builds the public `TaskEvent`s, not the worker.
/// A chain of graph nodes run one after the other (rule 2) is the
/// commonest run of such short records: each node starts at the stamp
/// its predecessor ended at and ends one stamp later, so the worker only
/// counts them (`successors`) and `collect` writes them out.
#[derive(Clone, Copy)]
pub(crate) struct RawTask {
    start: u64,
    /// `end - start`, or `LONG_SPAN` when it does not fit below that (the
    /// end is then in `RecordBatch::long_ends`).
    span: u32,
    /// Unnamed rule-2 records after this one: the `i`-th (from 1) ran
    /// from stamp `end + i - 1` to `end + i`. A batch holds at most
    /// `BATCH` records, so the count fits.
    successors: u16,
    /// `Rule as u8`.
    rule: u8,
}

/// Records between a batch line's prefetch and its first write: eight
/// lines, enough to cover a miss to memory at a record every few
/// nanoseconds.
const RECORDS_AHEAD: usize = 32;

/// The span of a record whose end is kept beside it.
const LONG_SPAN: u32 = u32::MAX;

// A record's successors are records of its batch.
const _: () = assert!(BATCH <= u16::MAX as usize);
const _: () = assert!(std::mem::size_of::<RawTask>() == 16);

/// A worker's records, in the order the tasks ended, and its clock
/// readings meanwhile.
#[derive(Default)]
pub(crate) struct RecordBatch {
    pub(crate) tasks: Vec<RawTask>,
    /// Records in `tasks`, each one's successors included.
    records: usize,
    /// The names of the named tasks, each with its record's position in
    /// `tasks`, in increasing position.
    pub(crate) names: Vec<(usize, Arc<str>)>,
    /// The ends of the records whose span does not fit in 32 bits, each
    /// with its record's position in `tasks`, in increasing position.
    long_ends: Vec<(usize, u64)>,
    /// The worker's anchors (stamp, ticks) taken since its last batch.
    pub(crate) anchors: Vec<(u64, u64)>,
}

impl RecordBatch {
    fn with_capacity(tasks: usize) -> Self {
        RecordBatch {
            tasks: Vec::with_capacity(tasks),
            records: 0,
            names: Vec::new(),
            long_ends: Vec::new(),
            anchors: Vec::new(),
        }
    }

    /// Record a task that ran from stamp `start` to stamp `end`.
    #[inline]
    pub(crate) fn push(&mut self, rule: Rule, start: u64, end: u64, name: Option<Arc<str>>) {
        if let Some(name) = name {
            self.names.push((self.tasks.len(), name));
        }
        let span = match u32::try_from(end - start) {
            Ok(span) if span < LONG_SPAN => span,
            _ => {
                self.long_ends.push((self.tasks.len(), end));
                LONG_SPAN
            }
        };
        self.tasks.push(RawTask {
            start,
            span,
            successors: 0,
            rule: rule as u8,
        });
        // The batch was written last a whole trace ago, or never: its
        // lines are far from this core. Ask for one well before the
        // records reach it, so that a full barrier of the task path (a
        // deque pop's fence) does not wait for the store's miss.
        let ahead = self.tasks.len() + RECORDS_AHEAD;
        prefetch_for_write(self.tasks.as_ptr().wrapping_add(ahead));
        self.records += 1;
    }

    /// The last record was followed by `count` more unnamed rule-2
    /// records, one stamp each (see `RawTask::successors`).
    #[inline]
    pub(crate) fn add_successors(&mut self, count: u32) {
        let last = self
            .tasks
            .last_mut()
            .expect("successors follow a record of the batch");
        last.successors = u32::from(last.successors)
            .checked_add(count)
            .and_then(|n| u16::try_from(n).ok())
            .expect("a record's successors are records of its batch");
        self.records += count as usize;
    }

    /// Records in the batch, successors included.
    pub(crate) fn len(&self) -> usize {
        self.records
    }

    fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// The public records of worker `worker`, times in nanoseconds (its
    /// stamps placed by `anchors`); leaves the batch empty (its capacity
    /// kept, for reuse).
    fn drain_into(
        &mut self,
        worker: usize,
        cal: &Calibration,
        anchors: &Anchors<'_>,
        out: &mut Vec<TaskEvent>,
    ) {
        self.anchors.clear();
        self.records = 0;
        let mut names = self.names.drain(..).peekable();
        let mut long_ends = self.long_ends.drain(..).peekable();
        let ns = |stamp: u64| cal.ns(anchors.ticks(stamp));
        for (at, raw) in self.tasks.drain(..).enumerate() {
            let name = names
                .next_if(|(named, _)| *named == at)
                .map(|(_, name)| name);
            let end = match long_ends.next_if(|(long, _)| *long == at) {
                Some((_, end)) => end,
                None => raw.start + u64::from(raw.span),
            };
            out.push(TaskEvent {
                worker,
                rule: Rule::ALL[usize::from(raw.rule)],
                start_ns: ns(raw.start),
                end_ns: ns(end),
                name,
            });
            let mut start_ns = ns(end);
            for stamp in (end + 1)..=(end + u64::from(raw.successors)) {
                let end_ns = ns(stamp);
                out.push(TaskEvent {
                    worker,
                    rule: Rule::Successor,
                    start_ns,
                    end_ns,
                    name: None,
                });
                start_ns = end_ns;
            }
        }
    }
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

/// Records a worker keeps locally before it moves them to its buffer.
pub(crate) const BATCH: usize = 4096;

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

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch's names land on their own records, whatever runs of
    /// unnamed records lie between; times and rules come through.
    #[test]
    fn a_batch_drains_into_events_with_each_name_on_its_record() {
        let clock = TraceClock::new();
        let mut batch = RecordBatch::default();
        let named = |s: &str| Some(Arc::<str>::from(s));
        batch.push(Rule::Steal, 1, 2, None);
        batch.push(Rule::OwnDeque, 2, 3, named("b"));
        batch.push(Rule::Successor, 4, 5, None);
        batch.push(Rule::Successor, 5, 6, None);
        batch.push(Rule::Returned, 6, 7, named("e"));
        // Stamps 0 to 7 at ticks 0, 10, ... 70.
        batch.anchors = vec![(0, 0), (7, 70)];
        let cal = clock.calibrate();
        let mut events = Vec::new();
        let anchors = batch.anchors.clone();
        batch.drain_into(3, &cal, &Anchors::new(&anchors), &mut events);
        let names: Vec<_> = events.iter().map(|e| e.name.as_deref()).collect();
        assert_eq!(names, [None, Some("b"), None, None, Some("e")]);
        let rules: Vec<_> = events.iter().map(|e| e.rule).collect();
        assert_eq!(
            rules,
            [
                Rule::Steal,
                Rule::OwnDeque,
                Rule::Successor,
                Rule::Successor,
                Rule::Returned
            ]
        );
        assert!(events.iter().all(|e| e.worker == 3));
        assert_eq!(events[1].start_ns, cal.ns(20));
        assert_eq!(events[1].end_ns, cal.ns(30));
        assert!(batch.tasks.is_empty() && batch.names.is_empty() && batch.anchors.is_empty());
    }

    /// The events of a batch drained on worker 0 by its own anchors.
    fn drained(batch: &mut RecordBatch, cal: &Calibration) -> Vec<TaskEvent> {
        let mut events = Vec::new();
        let anchors = batch.anchors.clone();
        batch.drain_into(0, cal, &Anchors::new(&anchors), &mut events);
        events
    }

    /// Each event's rule, start, end and name.
    fn shapes(events: &[TaskEvent]) -> Vec<(Rule, u64, u64, Option<&str>)> {
        events
            .iter()
            .map(|e| (e.rule, e.start_ns, e.end_ns, e.name.as_deref()))
            .collect()
    }

    /// A record's counted successors drain into one rule-2 event a stamp
    /// each, right after it and before the next record, unnamed; the
    /// batch counts them as records.
    #[test]
    fn counted_successors_drain_into_an_event_each() {
        let clock = TraceClock::new();
        let mut batch = RecordBatch::default();
        batch.push(Rule::Steal, 1, 2, Some(Arc::from("a")));
        batch.add_successors(2);
        batch.add_successors(1);
        batch.push(Rule::OwnDeque, 0, 7, None);
        assert_eq!(batch.len(), 5);
        // Stamps 0 to 10 at ticks 0, 10, ... 100.
        batch.anchors = vec![(0, 0), (10, 100)];
        let cal = clock.calibrate();
        let events = drained(&mut batch, &cal);
        let got = shapes(&events);
        let at = |stamp: u64| cal.ns(10 * stamp);
        assert_eq!(
            got,
            [
                (Rule::Steal, at(1), at(2), Some("a")),
                (Rule::Successor, at(2), at(3), None),
                (Rule::Successor, at(3), at(4), None),
                (Rule::Successor, at(4), at(5), None),
                (Rule::OwnDeque, at(0), at(7), None),
            ]
        );
        assert_eq!(batch.len(), 0);
    }

    /// A record whose span does not fit in 32 bits keeps its end beside
    /// it, and its successors follow that end; the records around it are
    /// untouched.
    #[test]
    fn a_span_beyond_32_bits_keeps_its_end() {
        let clock = TraceClock::new();
        let far = u64::from(u32::MAX) + 5;
        let mut batch = RecordBatch::default();
        batch.push(Rule::Returned, 1, 2, None);
        batch.push(Rule::Mailbox, 0, far, Some(Arc::from("outer")));
        batch.add_successors(1);
        batch.push(Rule::SharedQueue, 3, 3 + u64::from(LONG_SPAN) - 1, None);
        batch.anchors = vec![(0, 0), (far + 1, far + 1)];
        let cal = clock.calibrate();
        let events = drained(&mut batch, &cal);
        let got = shapes(&events);
        let at = |stamp: u64| cal.ns(stamp);
        assert_eq!(
            got,
            [
                (Rule::Returned, at(1), at(2), None),
                (Rule::Mailbox, at(0), at(far), Some("outer")),
                (Rule::Successor, at(far), at(far + 1), None),
                (
                    Rule::SharedQueue,
                    at(3),
                    at(3 + u64::from(LONG_SPAN) - 1),
                    None
                ),
            ]
        );
    }
}
