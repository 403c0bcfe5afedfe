//! A worker's trace records (`Builder::trace`, `observe/trace.rs`): the
//! state it keeps for them on its own thread (`TraceLocal`) and the
//! methods that write them.
//!
//! Every traced task gets one record: announced to the registry's buffer
//! as it starts, kept in a local batch when it ends, and moved to the
//! buffer a batch at a time (no lock per task). The untraced hot paths
//! test only the worker's `tracing` flag and never touch this state.
//!
//! A record's start and end are stamps (`observe/stamp.rs`), which read
//! the clock only as often as the worker's tasks are long; the first task
//! after the worker searched or slept reads it at its start, so an idle
//! spell never counts as a task's time.
//!
//! Invariants: the worker reads the clock before it searches or sleeps
//! and before its batch leaves it (`flush_trace`), so every stamp in a
//! flushed batch lies at or before the batch's last anchor, and neither a
//! search nor a flush counts as a task's time; the buffer learns at each
//! flush the oldest stamp a record yet to come may carry (the outermost
//! running task's start); when `run_end` is a stamp, the batch's last
//! record followed by `run_len` one-stamp successors ends there, and every
//! push and flush first writes those successors into that record
//! (`close_run`), so records stay in the order their tasks ended.

use super::{JobRef, Next, WorkerThread};
use crate::observe::record::{self, RecordBatch};
use crate::observe::stamp::Stamps;
use crate::observe::stats::Rule;
use crate::observe::trace::TraceBuffer;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

/// A worker's own trace state (`observe/trace.rs`).
///
/// Cells, not `RefCell`s, where a value is only swapped: a record is a
/// few stores, and borrow flags would double them.
pub(super) struct TraceLocal {
    /// This worker's buffer in the registry (looked up once: every traced
    /// task announces itself there).
    buffer: *const TraceBuffer,
    /// The name the task that just ran gave itself, for its trace record.
    name: Cell<Option<Arc<str>>>,
    /// Trace records not yet in the registry's buffer (no lock per task).
    batch: RefCell<RecordBatch>,
    /// The worker's event stamps and their clock readings.
    stamps: Stamps,
    /// The innermost traced task running on this worker: its start stamp
    /// and the rule that supplied it (`traced`, `trace_next_task`).
    running: Cell<Option<(u64, Rule)>>,
    /// The start stamp of the outermost traced task running here, if any:
    /// what `flush_trace` tells the buffer its next records may need.
    outermost_start: Cell<Option<u64>>,
    /// The worker read the clock before it searched or slept: the next
    /// task's start reads it too, so the idle spell stays out of the task.
    read_next: Cell<bool>,
    /// Where the batch's last record ends, with the `run_len` successors
    /// counted after it (`u64::MAX`: the batch has no record to extend):
    /// a graph successor that starts there and ends one stamp later is
    /// only counted (`trace_next_task`).
    run_end: Cell<u64>,
    /// Successors of the batch's last record not yet written into it
    /// (`RawTask::successors`; `close_run` writes them).
    run_len: Cell<u32>,
    /// How many records the batch takes before it is full, counted when
    /// its last record was pushed: a run fills the batch to `BATCH`
    /// records at most, and the next record (at most one more) flushes
    /// it, so a batch stays about as long as one of single records.
    run_room: Cell<u32>,
}

impl TraceLocal {
    /// The trace state of the worker whose buffer is `buffer` (in the
    /// registry the worker keeps alive).
    pub(super) fn new(buffer: &TraceBuffer) -> Self {
        TraceLocal {
            buffer,
            name: Cell::new(None),
            batch: RefCell::new(RecordBatch::default()),
            stamps: Stamps::starting_at(buffer.next_stamp()),
            running: Cell::new(None),
            outermost_start: Cell::new(None),
            read_next: Cell::new(true),
            run_end: Cell::new(u64::MAX),
            run_len: Cell::new(0),
            run_room: Cell::new(0),
        }
    }
}

/// The record of a running traced task, closed when it drops: the task's
/// end, and the worker's trace state back as the task found it.
struct OpenRecord<'w> {
    worker: &'w WorkerThread,
    /// The record running around this one, if any.
    outer: Option<(u64, Rule)>,
    /// This is the worker's outermost traced task.
    outermost: bool,
}

impl Drop for OpenRecord<'_> {
    #[inline]
    fn drop(&mut self) {
        let worker = self.worker;
        if let Some((start, rule)) = worker.trace.running.replace(self.outer) {
            let end = worker.stamp();
            worker.record_task(rule, start, end);
        }
        if self.outermost {
            worker.trace.outermost_start.set(None);
        }
    }
}

impl WorkerThread {
    /// `job.execute`, with a trace record around it.
    #[cold]
    #[inline(never)]
    pub(super) fn run_traced(&self, job: JobRef, rule: Rule) -> Option<Next> {
        // SAFETY: as in `run_chain`, which hands us the job to run once.
        self.traced(rule, || unsafe { job.execute(self) })
    }

    /// Run `task` (supplied by `rule`) with a trace record around it:
    /// announced before it runs, recorded when it ends, by a guard, so a
    /// panic that leaves it is recorded too and leaves the worker's trace
    /// state as it found it (no `catch_unwind` on the way).
    #[inline]
    pub(crate) fn traced<R>(&self, rule: Rule, task: impl FnOnce() -> R) -> R {
        self.trace_buffer().task_started();
        let start = if self.trace.read_next.replace(false) {
            self.stamp_read()
        } else {
            self.stamp()
        };
        let outermost = self.trace.outermost_start.get().is_none();
        if outermost {
            self.trace.outermost_start.set(Some(start));
        }
        let _open = OpenRecord {
            worker: self,
            outer: self.trace.running.replace(Some((start, rule))),
            outermost,
        };
        task()
    }

    /// The traced task running here ends, named `name`, and the next one
    /// (supplied by `rule`) starts in the same job: a graph chain run in
    /// one tight loop (rule 2) still gets a record a node, at one sampled
    /// stamp a node, which ends the task and starts the next. An unnamed
    /// rule-2 task that started where the batch's last record ended and
    /// ran for one stamp (nothing nested in it) is only counted: the
    /// record it would write is implied (`RawTask::successors`).
    #[inline]
    pub(crate) fn trace_next_task(&self, name: Option<Arc<str>>, rule: Rule) {
        let now = self.stamp();
        if let Some((start, Rule::Successor)) = self.trace.running.get()
            && name.is_none()
            && start == self.trace.run_end.get()
            && now == start + 1
            && self.trace.run_len.get() < self.trace.run_room.get()
        {
            // No name carries over (as below).
            drop(self.trace.name.take());
            self.trace.run_len.set(self.trace.run_len.get() + 1);
            self.trace.run_end.set(now);
        } else {
            let full = {
                let mut batch = self.trace.batch.borrow_mut();
                if let Some((start, ended)) = self.trace.running.get() {
                    // A name set by a task that ended without a record of
                    // its own does not carry over.
                    drop(self.trace.name.take());
                    self.push_record(&mut batch, ended, start, now, name);
                }
                batch.len() >= record::BATCH
            };
            if full {
                self.flush_trace();
            }
        }
        self.trace_buffer().task_started();
        self.trace.running.set(Some((now, rule)));
    }

    /// Push a record behind the batch's run of successors, which it ends
    /// (`close_run`); the next successor may extend this one.
    #[inline]
    fn push_record(
        &self,
        batch: &mut RecordBatch,
        rule: Rule,
        start: u64,
        end: u64,
        name: Option<Arc<str>>,
    ) {
        self.close_run(batch);
        batch.push(rule, start, end, name);
        self.trace.run_end.set(end);
        let room = record::BATCH.saturating_sub(batch.len());
        self.trace.run_room.set(room.min(u32::MAX as usize) as u32);
    }

    /// Write the successors counted since the batch's last record into it.
    #[inline]
    fn close_run(&self, batch: &mut RecordBatch) {
        let run = self.trace.run_len.replace(0);
        if run > 0 {
            batch.add_successors(run);
        }
    }

    /// This worker's trace buffer.
    #[inline]
    fn trace_buffer(&self) -> &TraceBuffer {
        // SAFETY: points into the registry, which this worker keeps alive.
        unsafe { &*self.trace.buffer }
    }

    /// A sampled stamp for the next event: a few cell updates, and a
    /// clock reading only when the stamps' spacing says so.
    #[inline]
    fn stamp(&self) -> u64 {
        let (stamp, read) = self.trace.stamps.next();
        if read {
            self.anchor(stamp);
        }
        stamp
    }

    /// A stamp for the next event, with its clock reading.
    #[cold]
    fn stamp_read(&self) -> u64 {
        let stamp = self.trace.stamps.upcoming();
        self.trace_read();
        stamp
    }

    /// Read the clock for `stamp` and keep the reading as an anchor;
    /// returns the reading.
    #[inline(never)]
    fn anchor(&self, stamp: u64) -> u64 {
        let now = self.registry.trace_now();
        let anchor = self.trace.stamps.anchor(stamp, now);
        self.trace.batch.borrow_mut().anchors.push(anchor);
        now
    }

    /// Read the trace clock now (an anchor of its own): the time of a
    /// sleep's start, and the reading before a flush, which makes every
    /// stamp in the batch lie at or before its last anchor.
    #[inline]
    pub(super) fn trace_read(&self) -> u64 {
        let stamp = self.trace.stamps.next_read();
        self.anchor(stamp)
    }

    /// Is the pool recording a trace?
    #[inline]
    pub(crate) fn tracing(&self) -> bool {
        self.tracing
    }

    /// The task that is ending names itself for its trace record.
    #[inline]
    pub(crate) fn set_trace_name(&self, name: Option<Arc<str>>) {
        drop(self.trace.name.replace(name));
    }

    /// Record a task (announced with `TraceBuffer::task_started`) that
    /// ran from stamp `start` to stamp `end`.
    #[inline]
    fn record_task(&self, rule: Rule, start: u64, end: u64) {
        let name = self.trace.name.take();
        let full = {
            let mut batch = self.trace.batch.borrow_mut();
            self.push_record(&mut batch, rule, start, end, name);
            batch.len() >= record::BATCH
        };
        if full {
            self.flush_trace();
        }
    }

    /// Read the clock (the last anchor of the batch) and move the local
    /// trace records to the registry's buffer (when idle, and when the
    /// batch is full); the next task's start reads the clock too.
    pub(crate) fn flush_trace(&self) {
        if self.tracing {
            self.trace_read();
            self.trace.read_next.set(true);
            let needed_from = self.trace.outermost_start.get().unwrap_or(u64::MAX);
            let mut batch = self.trace.batch.borrow_mut();
            // The batch leaves whole: its run ends with it.
            self.close_run(&mut batch);
            self.trace.run_end.set(u64::MAX);
            let next_stamp = self.trace.stamps.upcoming();
            self.trace_buffer()
                .flush(&mut batch, needed_from, next_stamp);
        }
    }
}
