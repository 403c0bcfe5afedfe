//! A worker's trace as it writes it: one byte an event, in a stream whose
//! positions are the stamps (`stamp.rs`), and the decoder `collect`
//! (`trace.rs`) runs to turn the streams back into [`TaskEvent`]s.
//!
//! A traced fork-join starts and ends a task every few nanoseconds, so
//! what the worker writes per task is what tracing costs. Tasks nest on a
//! worker (a task runs inside the one that waits for it), so a worker's
//! tasks form a bracket sequence: an *open* code (with the rule that
//! supplied the task) when a task starts and a *close* code when it ends
//! are enough, and the start and end stamps are the positions of the two
//! codes. A graph chain run in one loop (rule 2) cuts its record at each
//! node with a single *next* code (close, and open the successor, at one
//! stamp). A *read* code marks a stamp taken only for a clock reading (a
//! flush, a sleep). Names and clock readings go beside, keyed by stamp.
//! The worker writes the codes into a small array it reuses (its lines
//! stay in its cache) and copies them out a flush at a time.
//!
//! Invariants: a worker's codes, over all its flushes, are one bracket
//! sequence in stamp order (a close ends the innermost open task); a
//! flushed stream is contiguous in stamps from `first_stamp`; `names` and
//! `anchors` are in increasing stamp order; every stamp of a flush lies at
//! or before its last anchor (the flush reads the clock first), so the
//! decoder resolves every stamp of what it is given, and keeps only the
//! open tasks (as clock ticks) and the last anchor between takes.

use crate::observe::clock::Calibration;
use crate::observe::stamp::Anchors;
use crate::observe::stats::Rule;
use std::cell::Cell;
use std::sync::Arc;

/// One task a worker ran.
///
/// ```
/// use sixfold::Rule;
/// let pool = sixfold::Pool::builder().num_threads(2).trace(true).build().unwrap();
/// pool.spawn_named("load", || {}); // from outside the pool: the shared queue
/// pool.wait_idle();
/// let trace = pool.take_trace();
/// assert_eq!(trace.tasks.len(), 1);
/// let event = &trace.tasks[0];
/// assert_eq!(event.name.as_deref(), Some("load"));
/// assert_eq!(event.rule, Rule::SharedQueue);
/// assert!(event.worker < 2 && event.start_ns <= event.end_ns);
/// ```
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

/// Codes a worker's local stream holds before it flushes: 4 KiB, half a
/// core's first-level data cache here, reused for the life of the worker.
pub(crate) const STREAM: usize = 4096;

/// A stamp taken only for a clock reading: no task starts or ends.
pub(crate) const READ: u8 = 0;
/// The innermost open task ends here.
pub(crate) const CLOSE: u8 = 0x40;
/// A task starts here; the low bits are its rule.
const OPEN: u8 = 0x80;
/// The low bits of an open code: `Rule as u8`.
const RULE_BITS: u8 = 0x07;

/// The code of a task supplied by `rule` starting.
#[inline]
pub(crate) const fn open(rule: Rule) -> u8 {
    OPEN | rule as u8
}

/// The code of the innermost task ending and one supplied by `rule`
/// starting at the same stamp (a graph chain's next node).
#[inline]
pub(crate) const fn next(rule: Rule) -> u8 {
    CLOSE | OPEN | rule as u8
}

// Every rule fits the open code's low bits.
const _: () = assert!(Rule::ALL.len() <= RULE_BITS as usize + 1);

/// Codes a worker has flushed and `collect` has not decoded yet: a run of
/// its events contiguous in stamps, with the names and clock readings
/// among them.
#[derive(Default)]
pub(crate) struct Flushed {
    /// The stamp of `codes[0]`.
    first_stamp: u64,
    codes: Vec<u8>,
    /// Named task ends: the stamp of the close (or next) code, the name.
    names: Vec<(u64, Arc<str>)>,
    /// Clock readings: (stamp, ticks).
    anchors: Vec<(u64, u64)>,
    /// Tasks that end in `codes` (close and next codes).
    closes: usize,
}

impl Flushed {
    /// Append a worker's local stream, `codes` from stamp `first_stamp`
    /// on, and take its names and anchors; returns how many tasks start
    /// and how many end in it.
    pub(crate) fn append(
        &mut self,
        first_stamp: u64,
        codes: &[Cell<u8>],
        names: &mut Vec<(u64, Arc<str>)>,
        anchors: &mut Vec<(u64, u64)>,
    ) -> (usize, usize) {
        if self.codes.is_empty() {
            self.first_stamp = first_stamp;
        }
        debug_assert_eq!(self.first_stamp + self.codes.len() as u64, first_stamp);
        // SAFETY: `Cell<u8>` has the layout of `u8`; the cells belong to
        // the calling worker's thread, which writes none of them while
        // this view lives (it is in this call). Seen as bytes, the count
        // and the copy are a few vector instructions a line, not a cell
        // access a code.
        let codes: &[u8] = unsafe { &*(std::ptr::from_ref(codes) as *const [u8]) };
        let (opens, closes) = count_opens_and_closes(codes);
        self.codes.extend_from_slice(codes);
        self.names.append(names);
        self.anchors.append(anchors);
        self.closes += closes;
        (opens, closes)
    }

    /// Tasks that end in the stream.
    pub(crate) fn closes(&self) -> usize {
        self.closes
    }

    /// Empty the stream, keeping its capacity.
    fn clear(&mut self) {
        self.codes.clear();
        self.names.clear();
        self.anchors.clear();
        self.closes = 0;
    }
}

/// How many of `codes` start a task (open and next codes) and how many end
/// one (close and next codes). Eight codes a word: each code's OPEN bit is
/// moved to the low bit of its byte, and a multiplication adds the eight
/// bytes into the top one. (Counted a byte at a time into `usize`s, the
/// two counts cost a traced fork-join four instructions a task.)
fn count_opens_and_closes(codes: &[u8]) -> (usize, usize) {
    const LOW_BITS: u64 = 0x0101_0101_0101_0101;
    let bits_set = |word: u64, shift: u32| {
        (((word >> shift) & LOW_BITS).wrapping_mul(LOW_BITS) >> 56) as usize
    };
    let mut words = codes.chunks_exact(8);
    let (mut opens, mut closes) = (0, 0);
    for chunk in words.by_ref() {
        let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        opens += bits_set(word, OPEN.trailing_zeros());
        closes += bits_set(word, CLOSE.trailing_zeros());
    }
    for &code in words.remainder() {
        opens += usize::from(code & OPEN != 0);
        closes += usize::from(code & CLOSE != 0);
    }
    (opens, closes)
}

/// What `collect` keeps of one worker's stream between takes: the tasks
/// still open at the end of the last take, and its last clock reading.
#[derive(Default)]
pub(crate) struct Decoder {
    /// Open tasks, outermost first: start (ticks) and rule.
    open: Vec<(u64, Rule)>,
    /// The last anchor decoded: the lower end of the window of the next
    /// stream's first stamps.
    last_anchor: Option<(u64, u64)>,
    /// An emptied stream, for the worker's next flushes (a traced pool
    /// that is taken from regularly allocates nothing new).
    pub(crate) spare: Flushed,
}

impl Decoder {
    /// The tasks of worker `worker` that end in `flushed`, times in
    /// nanoseconds, in the order they ended; leaves `flushed` empty (its
    /// capacity kept).
    pub(crate) fn decode(
        &mut self,
        flushed: &mut Flushed,
        worker: usize,
        cal: &Calibration,
        out: &mut Vec<TaskEvent>,
    ) {
        let mut anchors = Vec::with_capacity(flushed.anchors.len() + 1);
        anchors.extend(self.last_anchor);
        anchors.extend_from_slice(&flushed.anchors);
        self.last_anchor = anchors.last().copied();
        let anchors = Anchors::new(&anchors);
        let mut names = flushed.names.drain(..).peekable();
        for (stamp, &code) in (flushed.first_stamp..).zip(&flushed.codes) {
            if code & CLOSE != 0 {
                let name = names.next_if(|(at, _)| *at == stamp).map(|(_, n)| n);
                // A close without an open (which the invariants rule out)
                // is dropped rather than misattributed.
                if let Some((start, rule)) = self.open.pop() {
                    out.push(TaskEvent {
                        worker,
                        rule,
                        start_ns: cal.ns(start),
                        end_ns: cal.ns(anchors.ticks(stamp)),
                        name,
                    });
                }
            }
            if code & OPEN != 0 {
                let rule = Rule::ALL[usize::from(code & RULE_BITS)];
                self.open.push((anchors.ticks(stamp), rule));
            }
        }
        drop(names);
        flushed.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::clock::TraceClock;

    /// A worker's local stream holding `codes`.
    fn cells(codes: &[u8]) -> Vec<Cell<u8>> {
        codes.iter().copied().map(Cell::new).collect()
    }

    /// Each event's rule, start, end and name.
    fn shapes(events: &[TaskEvent]) -> Vec<(Rule, u64, u64, Option<&str>)> {
        events
            .iter()
            .map(|e| (e.rule, e.start_ns, e.end_ns, e.name.as_deref()))
            .collect()
    }

    /// Nested tasks, a graph chain's next codes and reads decode into one
    /// event per task, in the order they ended, each name on its task and
    /// each time placed by the anchors.
    #[test]
    fn a_bracket_stream_decodes_into_its_tasks_in_end_order() {
        let clock = TraceClock::new();
        let cal = clock.calibrate();
        let named = |s: &str| Arc::<str>::from(s);
        // Stamp: 0 read, 1 open steal, 2 open own-deque, 3 close ("b"),
        // 4 next successor ("c"), 5 next successor, 6 close ("e"),
        // 7 close, 8 read.
        let codes = cells(&[
            READ,
            open(Rule::Steal),
            open(Rule::OwnDeque),
            CLOSE,
            next(Rule::Successor),
            next(Rule::Successor),
            CLOSE,
            CLOSE,
            READ,
        ]);
        let mut names = vec![(3, named("b")), (4, named("c")), (6, named("e"))];
        // Stamps 0 to 8 at ticks 0, 10, ... 80.
        let mut anchors = vec![(0, 0), (8, 80)];
        let mut flushed = Flushed::default();
        assert_eq!(flushed.append(0, &codes, &mut names, &mut anchors), (4, 5));
        // The word-at-a-time count agrees with a code-at-a-time one on
        // every length and alignment.
        let many: Vec<u8> = (0..100u32)
            .map(|i| [READ, CLOSE, open(Rule::Steal), next(Rule::Successor)][(i * 7 % 4) as usize])
            .collect();
        for start in 0..9 {
            for end in start..many.len() {
                let part = &many[start..end];
                let by_code = (
                    part.iter().filter(|&&c| c & OPEN != 0).count(),
                    part.iter().filter(|&&c| c & CLOSE != 0).count(),
                );
                assert_eq!(count_opens_and_closes(part), by_code);
            }
        }
        assert!(names.is_empty() && anchors.is_empty());
        let mut decoder = Decoder::default();
        let mut events = Vec::new();
        decoder.decode(&mut flushed, 3, &cal, &mut events);
        let at = |stamp: u64| cal.ns(10 * stamp);
        assert_eq!(
            shapes(&events),
            [
                (Rule::OwnDeque, at(2), at(3), Some("b")),
                // The steal's first part, cut by the chain's next code.
                (Rule::Steal, at(1), at(4), Some("c")),
                (Rule::Successor, at(4), at(5), None),
                (Rule::Successor, at(5), at(6), Some("e")),
            ]
        );
        assert!(events.iter().all(|e| e.worker == 3));
        // Stamp 7 closes a task opened before this stream: none here.
        assert!(decoder.open.is_empty());
        assert_eq!(flushed.closes(), 0);
        assert!(flushed.codes.is_empty() && flushed.names.is_empty());
    }

    /// A task open across flushes and takes ends in a later take with the
    /// start it had: the decoder keeps it, and the last anchor places the
    /// next stream's first stamps.
    #[test]
    fn a_task_open_across_takes_keeps_its_start() {
        let clock = TraceClock::new();
        let cal = clock.calibrate();
        let mut decoder = Decoder::default();
        let mut events = Vec::new();
        let mut flushed = Flushed::default();
        // First take: stamps 10 to 12, the outer task opens at 10.
        let first = cells(&[open(Rule::Mailbox), open(Rule::Returned), CLOSE]);
        flushed.append(10, &first, &mut Vec::new(), &mut vec![(10, 100), (12, 120)]);
        decoder.decode(&mut flushed, 0, &cal, &mut events);
        assert_eq!(
            shapes(&events),
            [(Rule::Returned, cal.ns(110), cal.ns(120), None)]
        );
        // Two flushes in the next take: stamps 13 to 14, then 15 to 16.
        let second = cells(&[open(Rule::Steal), CLOSE]);
        flushed.append(13, &second, &mut Vec::new(), &mut vec![(14, 200)]);
        let third = cells(&[CLOSE, READ]);
        let mut names = vec![(15, Arc::from("outer"))];
        flushed.append(15, &third, &mut names, &mut vec![(16, 300)]);
        assert_eq!(flushed.closes(), 2);
        events.clear();
        decoder.decode(&mut flushed, 0, &cal, &mut events);
        assert_eq!(
            shapes(&events),
            [
                // Stamp 13 lies between the first take's last anchor
                // (12, 120) and (14, 200).
                (Rule::Steal, cal.ns(160), cal.ns(200), None),
                (Rule::Mailbox, cal.ns(100), cal.ns(250), Some("outer")),
            ]
        );
        assert!(decoder.open.is_empty());
    }
}
