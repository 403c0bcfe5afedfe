//! A worker's trace records (`Builder::trace`, `observe/trace.rs`): the
//! state it keeps for them on its own thread (`TraceLocal`) and the
//! methods that write them.
//!
//! Every traced task gets one record: announced to the registry's buffer
//! as it starts, kept in a local batch when it ends, and moved to the
//! buffer a batch at a time (no lock per task). The untraced hot paths
//! test only the worker's `tracing` flag and never touch this state.
//!
//! Invariants: one clock reading a task: a record's end is the worker's
//! next reading (`trace_read`), shared by every record whose end is still
//! open; the open ends are settled before the worker searches or sleeps
//! and before its batch leaves it (`flush_trace`), so neither a search
//! nor a flush counts as a task's time.

use super::{JobRef, Next, WorkerThread};
use crate::observe::stats::Rule;
use crate::observe::trace::{self, RecordBatch, TraceBuffer};
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
    /// How many records at the end of `batch` still wait for their end
    /// time: the next clock reading on this worker (`trace_read`).
    open_ends: Cell<usize>,
    /// The innermost traced task running on this worker: when it started
    /// and the rule that supplied it (`traced`, `trace_next_task`).
    running: Cell<Option<(u64, Rule)>>,
}

impl TraceLocal {
    /// The trace state of the worker whose buffer is `buffer` (in the
    /// registry the worker keeps alive).
    pub(super) fn new(buffer: &TraceBuffer) -> Self {
        TraceLocal {
            buffer,
            name: Cell::new(None),
            batch: RefCell::new(RecordBatch::default()),
            open_ends: Cell::new(0),
            running: Cell::new(None),
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
    /// announced before it runs, recorded when it ends.
    #[inline]
    pub(crate) fn traced<R>(&self, rule: Rule, task: impl FnOnce() -> R) -> R {
        self.trace_buffer().task_started();
        let outer = self.trace.running.replace(Some((self.trace_read(), rule)));
        let result = task();
        if let Some((start, rule)) = self.trace.running.replace(outer) {
            self.record_task(rule, start);
        }
        result
    }

    /// The traced task running here ends, named `name`, and the next one
    /// (supplied by `rule`) starts in the same job: a graph chain run in
    /// one tight loop (rule 2) still gets a record a node, at one clock
    /// reading a node. The reading ends the task (and any nested task
    /// still open) and starts the next; the record goes in closed.
    #[inline]
    pub(crate) fn trace_next_task(&self, name: Option<Arc<str>>, rule: Rule) {
        let now = self.registry.trace_now();
        let full = {
            let mut batch = self.trace.batch.borrow_mut();
            batch.end_open(self.trace.open_ends.replace(0), now);
            if let Some((start, ended)) = self.trace.running.get() {
                // A name set by a task that ended without a record of its
                // own does not carry over.
                drop(self.trace.name.take());
                batch.push_closed(ended, start, now, name);
            }
            batch.len() >= trace::BATCH
        };
        if full {
            self.flush_trace();
        }
        self.trace_buffer().task_started();
        self.trace.running.set(Some((now, rule)));
    }

    /// This worker's trace buffer.
    #[inline]
    fn trace_buffer(&self) -> &TraceBuffer {
        // SAFETY: points into the registry, which this worker keeps alive.
        unsafe { &*self.trace.buffer }
    }

    /// Read the trace clock, and give the reading to the records whose end
    /// is still open as their end. One reading a task: a task ends where the
    /// worker's next traced event (a start, a sleep, going idle) begins,
    /// and between the two the worker ran only its own bookkeeping (a
    /// join's return, the pop of the next job). The clock's reading is
    /// what a record costs most (about 40 cycles), so this halves it. The
    /// idle path settles open ends before it searches (`flush_trace`), so
    /// a search never counts as the last task's time.
    #[inline]
    pub(super) fn trace_read(&self) -> u64 {
        let now = self.registry.trace_now();
        let open = self.trace.open_ends.replace(0);
        if open > 0 {
            self.trace.batch.borrow_mut().end_open(open, now);
        }
        now
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

    /// Record a task that started at `start` (announced with
    /// `TraceBuffer::task_started`) and ends now: its end is the next
    /// reading (`trace_read`).
    #[inline]
    fn record_task(&self, rule: Rule, start: u64) {
        let name = self.trace.name.take();
        let full = {
            let mut batch = self.trace.batch.borrow_mut();
            batch.push(rule, start, name);
            batch.len() >= trace::BATCH
        };
        self.trace.open_ends.set(self.trace.open_ends.get() + 1);
        if full {
            self.flush_trace();
        }
    }

    /// Settle the open ends and move the local trace records to the
    /// registry's buffer (when idle, and when the batch is full).
    pub(crate) fn flush_trace(&self) {
        if self.tracing {
            self.trace_read();
            let mut batch = self.trace.batch.borrow_mut();
            self.trace_buffer().flush(&mut batch);
        }
    }
}
