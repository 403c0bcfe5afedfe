//! A worker's trace (`Builder::trace`, `observe/trace.rs`): the state it
//! keeps for it on its own thread (`TraceLocal`) and the methods that
//! write it.
//!
//! A traced task costs two one-byte codes in a stream the worker reuses
//! (`observe/record.rs`): an open code with its rule as it starts, a close
//! code as it ends; its stamps are the codes' positions. The worker also
//! announces each stream with task codes to its buffer, at its first
//! (`TraceBuffer::stream_started`, so that `collect` waits for it), reads
//! the clock when its stamps say so
//! (`observe/stamp.rs`), and moves the stream to its buffer when it fills
//! and whenever it goes idle (no lock per task). The untraced hot paths
//! test only the worker's `tracing` flag and never touch this state.
//!
//! Invariants: every open code gets its close (a guard writes it, on
//! unwinding too), so the worker's codes form one bracket sequence; the
//! worker reads the clock (a read code) before it searches or sleeps and
//! before its stream leaves it, so every stamp in a flushed stream lies
//! at or before its last anchor, and neither a search nor a flush counts
//! as a task's time; the event after such a reading reads the clock too,
//! so an idle spell never counts as a task's time either; the local
//! stream keeps one slot past `STREAM` for the flush's read code.

use super::{JobRef, Next, WorkerThread};
use crate::observe::record::{self, CLOSE, READ, STREAM};
use crate::observe::stamp::Stamps;
use crate::observe::stats::Rule;
use crate::observe::trace::TraceBuffer;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

/// A worker's own trace state (`observe/trace.rs`).
///
/// Cells, not `RefCell`s, on the per-task path: a task is a few stores,
/// and borrow flags would double them.
pub(super) struct TraceLocal {
    /// This worker's buffer in the registry (looked up once: every traced
    /// task announces itself there).
    buffer: *const TraceBuffer,
    /// The name the task that is ending gave itself, for its trace record.
    name: Cell<Option<Arc<str>>>,
    /// Whether `name` holds one: a task's end tests this flag instead of
    /// taking the name out and putting `None` back.
    named: Cell<bool>,
    /// Codes in `codes` not yet flushed.
    len: Cell<usize>,
    /// The index in `codes` of the next event that reads the clock.
    read_at: Cell<usize>,
    /// `read_at` or `STREAM`, whichever comes first: the one index an
    /// event compares with (below it, an event is a store and a count).
    /// Zero after a flush, so a stream's first event takes the slow path.
    stop: Cell<usize>,
    /// Whether this stream announced itself to the buffer
    /// (`TraceBuffer::stream_started`): done at its first task code, on
    /// the slow path.
    announced: Cell<bool>,
    /// The stamp of `codes[0]`.
    first_stamp: Cell<u64>,
    /// When the worker reads the clock.
    stamps: Stamps,
    /// The local stream: `STREAM` codes and the flush's read code; empty
    /// (never allocated) on a pool that does not trace.
    codes: Box<[Cell<u8>]>,
    /// Named task ends in the local stream: (stamp, name).
    names: RefCell<Vec<(u64, Arc<str>)>>,
    /// Clock readings in the local stream: (stamp, ticks).
    anchors: RefCell<Vec<(u64, u64)>>,
}

impl TraceLocal {
    /// The trace state of the worker whose buffer is `buffer` (in the
    /// registry the worker keeps alive): a slot's next thread goes on from
    /// the stamp where its last one stopped. Without `tracing`, nothing is
    /// allocated (a guest of a zero-thread pool makes one per entry).
    pub(super) fn new(buffer: &TraceBuffer, tracing: bool) -> Self {
        let stream = if tracing { STREAM + 1 } else { 0 };
        TraceLocal {
            buffer,
            name: Cell::new(None),
            named: Cell::new(false),
            len: Cell::new(0),
            // The first event reads the clock.
            read_at: Cell::new(0),
            stop: Cell::new(0),
            announced: Cell::new(false),
            first_stamp: Cell::new(buffer.next_stamp()),
            stamps: Stamps::new(),
            codes: (0..stream).map(|_| Cell::new(READ)).collect(),
            names: RefCell::new(Vec::new()),
            anchors: RefCell::new(Vec::new()),
        }
    }
}

/// Closes the record of a running traced task when it drops, on unwinding
/// too.
struct CloseRecord<'w> {
    worker: &'w WorkerThread,
}

impl Drop for CloseRecord<'_> {
    #[inline]
    fn drop(&mut self) {
        self.worker.end_traced();
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

    /// Run `task` (supplied by `rule`) with a trace record around it: an
    /// open code before it runs, a close code when it ends, by a guard, so
    /// a panic that leaves it is recorded too (no `catch_unwind` on the
    /// way).
    /// Always inline: its callers are the traced paths themselves (cold,
    /// out of line), and as a call of its own in a traced `join` it was a
    /// second frame a task.
    #[inline(always)]
    pub(crate) fn traced<R>(&self, rule: Rule, task: impl FnOnce() -> R) -> R {
        self.trace_event(record::open(rule));
        let _close = CloseRecord { worker: self };
        task()
    }

    /// The traced task running here ends, named `name`, and the next one
    /// (supplied by `rule`) starts in the same job, at the same stamp: a
    /// graph chain run in one tight loop (rule 2) still gets a record a
    /// node, at one code a node.
    #[inline]
    pub(crate) fn trace_next_task(&self, name: Option<Arc<str>>, rule: Rule) {
        // The node's own name is the one its record gets.
        if self.trace.named.replace(false) {
            drop(self.trace.name.take());
        }
        self.trace_event(record::next(rule));
        if let Some(name) = name {
            self.name_last_event(name);
        }
    }

    /// The innermost traced task ends, with the name it gave itself, if
    /// any.
    #[inline]
    fn end_traced(&self) {
        self.trace_event(CLOSE);
        if self.trace.named.get() {
            self.name_ended_task();
        }
    }

    /// The task whose end is the last code written takes the name it gave
    /// itself.
    #[cold]
    fn name_ended_task(&self) {
        self.trace.named.set(false);
        if let Some(name) = self.trace.name.take() {
            self.name_last_event(name);
        }
    }

    /// The task whose end is the last code written is named `name`.
    #[cold]
    fn name_last_event(&self, name: Arc<str>) {
        let stamp = self.trace.first_stamp.get() + self.trace.len.get() as u64 - 1;
        self.trace.names.borrow_mut().push((stamp, name));
    }

    /// Write `code` at the next stamp: the hot path, a compare, a store
    /// and a count, until the stream is full or the clock is due
    /// (`stop`).
    #[inline]
    fn trace_event(&self, code: u8) {
        let t = &self.trace;
        let len = t.len.get();
        if len < t.stop.get() {
            debug_assert!(len < t.codes.len());
            // SAFETY: `stop` is at most `STREAM` (`read_at`), and it is
            // above zero only in a tracing worker's stream, which holds
            // `STREAM + 1` codes: `len` is in bounds. (Unchecked: the
            // bound's test was a fifth of an event's instructions.)
            unsafe { t.codes.get_unchecked(len) }.set(code);
            t.len.set(len + 1);
            return;
        }
        self.trace_event_at_stop(code);
    }

    /// `trace_event` at `stop`: flush a full stream, then write `code` and
    /// read the clock if it is due.
    #[cold]
    #[inline(never)]
    fn trace_event_at_stop(&self, code: u8) {
        let t = &self.trace;
        if t.len.get() >= STREAM {
            self.flush_trace();
        }
        if !t.announced.replace(true) {
            self.trace_buffer().stream_started();
        }
        let len = t.len.get();
        t.codes[len].set(code);
        t.len.set(len + 1);
        if len >= t.read_at.get() {
            self.anchor(len);
        }
    }

    /// This worker's trace buffer.
    #[inline]
    fn trace_buffer(&self) -> &TraceBuffer {
        // SAFETY: points into the registry, which this worker keeps alive.
        unsafe { &*self.trace.buffer }
    }

    /// Read the clock for the event at `index` in the stream and keep the
    /// reading as an anchor; returns the reading.
    #[inline(never)]
    fn anchor(&self, index: usize) -> u64 {
        let t = &self.trace;
        let now = self.registry.trace_now();
        let stamp = t.first_stamp.get() + index as u64;
        let (anchor, gap) = t.stamps.anchor(stamp, now);
        t.anchors.borrow_mut().push(anchor);
        self.read_at(index + gap as usize);
        now
    }

    /// The event at `index` reads the clock.
    #[inline]
    fn read_at(&self, index: usize) {
        self.trace.read_at.set(index);
        self.trace.stop.set(index.min(STREAM));
    }

    /// Read the trace clock now, at a read code of its own: the time of a
    /// sleep's start. The next event reads the clock too.
    #[inline]
    pub(super) fn trace_read(&self) -> u64 {
        if self.trace.len.get() >= STREAM {
            self.flush_trace();
        }
        self.read_event()
    }

    /// A read code and its clock reading; the stream has room for it (one
    /// slot past `STREAM` is kept for it).
    fn read_event(&self) -> u64 {
        let t = &self.trace;
        let len = t.len.get();
        t.codes[len].set(READ);
        t.len.set(len + 1);
        let now = self.anchor(len);
        // The next event reads the clock too.
        self.read_at(len + 1);
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
        self.trace.named.set(name.is_some());
        drop(self.trace.name.replace(name));
    }

    /// Read the clock (the last anchor of the stream) and move the local
    /// stream to the registry's buffer (when idle, and when it is full);
    /// the next event reads the clock too.
    pub(crate) fn flush_trace(&self) {
        if self.tracing {
            self.read_event();
            let t = &self.trace;
            let len = t.len.replace(0);
            let first = t.first_stamp.get();
            t.first_stamp.set(first + len as u64);
            // The read code just written was the stream's last event: the
            // new stream's first reads the clock.
            self.read_at(0);
            self.trace_buffer().flush(
                first,
                &t.codes[..len],
                t.announced.replace(false),
                &mut t.names.borrow_mut(),
                &mut t.anchors.borrow_mut(),
            );
        }
    }
}
