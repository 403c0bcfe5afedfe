//! Trace stamps: a worker's ordered event counter (the positions of its
//! event codes, `record.rs`), tied to the clock by readings taken as often
//! as the tasks are long.
//!
//! A trace wants a start and an end for every task, and a fork-join task
//! can be shorter than one reading of the time-stamp counter (about 23 ns
//! on the Xeon machines here, 11.5 on Zen 4, against about 7 ns for an
//! untraced fork-join task): reading the clock at every task made a traced
//! `join` three to four times slower than an untraced one. So a trace
//! keeps *stamps*: a worker counts its trace events (every start and every
//! end), and reads the clock only at some of them, its *anchors*. Each
//! reading adapts the spacing: while the window since the last reading is
//! shorter than `SHORT_WINDOW_TICKS`, the next reading comes twice as many
//! events later (at most `MAX_GAP`); a longer window brings it back to
//! every event. `collect` turns a stamp into a time by placing it evenly
//! between the two anchors around it (`Anchors::ticks`).
//!
//! What that keeps: every task, its worker, rule and name, and the order
//! and nesting of its events (the map from stamps to times is monotonic);
//! exact times at every reading, and the worker reads at every event while
//! its tasks are long, before it searches or sleeps, and at the first
//! event after (`Stamps::read_next`). What it gives:
//! within a run of sub-microsecond tasks, a task's own start and end are
//! placed evenly between readings at most a few microseconds apart, and
//! the first long task after such a run shares its window's time with the
//! short ones in it (at most `MAX_GAP` events).
//!
//! Invariants: stamps only grow on a worker; an anchor is a stamp with its
//! clock reading, and a worker's anchors grow in both; every stamp in a
//! stream that leaves the worker lies at or before the stream's last
//! anchor (`WorkerThread::flush_trace` reads before it flushes).

use std::cell::Cell;

/// A window shorter than this (in clock ticks: about a microsecond at the
/// time-stamp counter's rate here) doubles the gap to the next reading.
const SHORT_WINDOW_TICKS: u64 = 2_048;
/// The most events between two readings: a long task after a run of short
/// ones shares its window with at most this many events.
const MAX_GAP: u32 = 32;

/// How far apart a worker reads the clock (its own thread only: cells).
/// The stamps themselves are the positions of its events in its event
/// stream (`record.rs`), and the worker keeps the index of its next
/// reading, so this keeps only the spacing of readings.
pub(crate) struct Stamps {
    /// The current spacing of readings, in events.
    gap: Cell<u32>,
    /// The last anchor: (stamp, ticks).
    last: Cell<(u64, u64)>,
}

impl Stamps {
    /// Readings for a thread whose first event reads the clock.
    pub(crate) fn new() -> Self {
        Stamps {
            gap: Cell::new(1),
            last: Cell::new((0, 0)),
        }
    }

    /// `stamp` was read at `ticks`: adapt the gap to the window just ended;
    /// returns the anchor to record and how many events later the next
    /// reading comes.
    pub(crate) fn anchor(&self, stamp: u64, ticks: u64) -> ((u64, u64), u32) {
        let (_, last_ticks) = self.last.replace((stamp, ticks));
        let gap = if ticks.saturating_sub(last_ticks) < SHORT_WINDOW_TICKS {
            (self.gap.get() * 2).min(MAX_GAP)
        } else {
            1
        };
        self.gap.set(gap);
        ((stamp, ticks), gap)
    }
}

/// A worker's anchors, oldest first, as `collect` resolves stamps with
/// them.
pub(crate) struct Anchors<'a> {
    anchors: &'a [(u64, u64)],
    /// The window of the last stamp resolved: records come in stamp order
    /// but for their starts, so most stamps fall in it or the next.
    window: Cell<usize>,
}

impl<'a> Anchors<'a> {
    pub(crate) fn new(anchors: &'a [(u64, u64)]) -> Self {
        Anchors {
            anchors,
            window: Cell::new(0),
        }
    }

    /// The time (in ticks) of `stamp`: exact at an anchor, placed evenly
    /// between the two around it otherwise, the nearest anchor's outside
    /// them (which the invariants rule out; 0 with no anchor at all).
    /// Fastest when stamps come in increasing order, as `collect` asks.
    #[inline]
    pub(crate) fn ticks(&self, stamp: u64) -> u64 {
        let anchors = self.anchors;
        let mut w = self.window.get();
        while w + 2 < anchors.len() && anchors[w + 1].0 < stamp {
            w += 1;
        }
        if w + 1 >= anchors.len() || stamp < anchors[w].0 || anchors[w + 1].0 < stamp {
            return self.ticks_elsewhere(stamp);
        }
        self.window.set(w);
        Self::placed(anchors[w], anchors[w + 1], stamp)
    }

    /// `ticks` for a stamp before the current window or outside all.
    #[cold]
    fn ticks_elsewhere(&self, stamp: u64) -> u64 {
        let anchors = self.anchors;
        let after = anchors.partition_point(|&(s, _)| s < stamp);
        if after == anchors.len() {
            return anchors.last().map_or(0, |&(_, t)| t);
        }
        if after == 0 || anchors[after].0 == stamp {
            return anchors[after].1;
        }
        self.window.set(after - 1);
        Self::placed(anchors[after - 1], anchors[after], stamp)
    }

    /// `stamp`, between anchors `(s0, t0)` and `(s1, t1)`, placed evenly.
    #[inline]
    fn placed((s0, t0): (u64, u64), (s1, t1): (u64, u64), stamp: u64) -> u64 {
        let (span, offset, whole) = (t1.saturating_sub(t0), stamp - s0, s1 - s0);
        if offset == 0 {
            return t0;
        }
        let placed = match span.checked_mul(offset) {
            Some(product) => product / whole,
            None => (u128::from(span) * u128::from(offset) / u128::from(whole)) as u64,
        };
        t0 + placed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_between_anchors_are_placed_evenly_and_in_order() {
        let anchors = [(0, 1_000), (4, 1_400), (5, 9_000)];
        let a = Anchors::new(&anchors);
        let times: Vec<u64> = (0..=5).map(|s| a.ticks(s)).collect();
        assert_eq!(times, [1_000, 1_100, 1_200, 1_300, 1_400, 9_000]);
        // Outside the anchors: the nearest one.
        assert_eq!(a.ticks(9), 9_000);
        assert_eq!(Anchors::new(&anchors[1..]).ticks(2), 1_400);
        assert_eq!(Anchors::new(&[]).ticks(3), 0);
        // Back to an earlier window (an outer task's start).
        assert_eq!(a.ticks(5), 9_000);
        assert_eq!(a.ticks(1), 1_100);
    }

    #[test]
    fn short_windows_space_readings_out_and_a_long_one_reads_every_event() {
        let stamps = Stamps::new();
        let mut ticks = 0;
        let mut reads = Vec::new();
        // 200 events 10 ticks apart, the first one read: the gap doubles
        // up to MAX_GAP.
        let mut read_at = 0;
        for stamp in 0..200 {
            ticks += 10;
            if stamp >= read_at {
                reads.push(stamp);
                read_at = stamp + u64::from(stamps.anchor(stamp, ticks).1);
            }
        }
        let gaps: Vec<u64> = reads.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(&gaps[..6], &[2, 4, 8, 16, 32, 32]);
        // One long window: the next event is read, and the one after.
        let (anchor, gap) = stamps.anchor(read_at, ticks + 1_000_000);
        assert_eq!((anchor, gap), ((read_at, ticks + 1_000_000), 1));
        assert_eq!(stamps.anchor(read_at + 1, ticks + 2_000_000).1, 1);
        // Short again: the gap doubles from there.
        assert_eq!(stamps.anchor(read_at + 2, ticks + 2_000_010).1, 2);
    }
}
