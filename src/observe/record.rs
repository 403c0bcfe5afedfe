//! A worker's trace records before they leave it: the 16-byte record
//! (`RawTask`) and the batch that holds them (`RecordBatch`), with the
//! names and long spans kept beside, and the drain into the public
//! [`TaskEvent`] that `collect` (`trace.rs`) runs.
//!
//! The worker writes a record for every task it runs, so this is the hot
//! path of a traced pool: a push is a few stores into a batch allocated
//! once, and the batch's lines are asked for ahead of the writes.
//!
//! Invariants: a batch's records are in the order their tasks ended;
//! `names` and `long_ends` are in increasing record position, one entry
//! at most per record; a record's successors are records of its batch,
//! which holds at most `BATCH + 1` (`WorkerThread::flush_trace` moves it
//! on at `BATCH`), so their count fits in 16 bits.

use crate::observe::clock::Calibration;
use crate::observe::stamp::Anchors;
use crate::observe::stats::Rule;
use crate::platform::prefetch::prefetch_for_write;
use std::sync::Arc;

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

/// Records a worker keeps locally before it moves them to its buffer.
pub(crate) const BATCH: usize = 4096;

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
    pub(super) fn with_capacity(tasks: usize) -> Self {
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

    pub(super) fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// The public records of worker `worker`, times in nanoseconds (its
    /// stamps placed by `anchors`); leaves the batch empty (its capacity
    /// kept, for reuse).
    pub(super) fn drain_into(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::clock::TraceClock;

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
