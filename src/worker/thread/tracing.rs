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
use crate::observe::trace::{self, TaskEvent};
use std::cell::{Cell, RefCell};
use std::sync::Arc;

/// A worker's own trace state (`observe/trace.rs`).
#[derive(Default)]
pub(super) struct TraceLocal {
    /// The name the task that just ran gave itself, for its trace record.
    name: RefCell<Option<Arc<str>>>,
    /// Trace records not yet in the registry's buffer (no lock per task).
    batch: RefCell<Vec<TaskEvent>>,
    /// How many records at the end of `batch` still wait for their end
    /// time: the next clock reading on this worker (`trace_read`).
    open_ends: Cell<usize>,
    /// The innermost traced task running on this worker: when it started
    /// and the rule that supplied it (`traced`, `trace_next_task`).
    running: Cell<Option<(u64, Rule)>>,
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
    pub(crate) fn traced<R>(&self, rule: Rule, task: impl FnOnce() -> R) -> R {
        self.registry.trace_buffer(self.index).task_started();
        let outer = self.trace.running.replace(Some((self.trace_read(), rule)));
        let result = task();
        if let Some((start, rule)) = self.trace.running.replace(outer) {
            self.record_task(rule, start);
        }
        result
    }

    /// The traced task running here ends, and the next one (supplied by
    /// `rule`) starts in the same job: a graph chain run in one tight loop
    /// (rule 2) still gets a record a node, at one clock reading a node.
    #[inline]
    pub(crate) fn trace_next_task(&self, rule: Rule) {
        if let Some((start, ended)) = self.trace.running.get() {
            self.record_task(ended, start);
        }
        self.registry.trace_buffer(self.index).task_started();
        self.trace.running.set(Some((self.trace_read(), rule)));
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
            let mut batch = self.trace.batch.borrow_mut();
            let len = batch.len();
            for record in &mut batch[len - open..] {
                record.end_ns = now;
            }
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
        let mut slot = self.trace.name.borrow_mut();
        if name.is_some() || slot.is_some() {
            *slot = name;
        }
    }

    /// Record a task that started at `start` (announced with
    /// `TraceBuffer::task_started`) and ends now: its end is the next
    /// reading (`trace_read`).
    #[inline]
    fn record_task(&self, rule: Rule, start: u64) {
        let name = self.trace.name.borrow_mut().take();
        let full = {
            let mut batch = self.trace.batch.borrow_mut();
            batch.push(TaskEvent {
                worker: self.index,
                rule,
                start_ns: start,
                end_ns: start,
                name,
            });
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
            self.registry.trace_buffer(self.index).flush(&mut batch);
        }
    }
}
