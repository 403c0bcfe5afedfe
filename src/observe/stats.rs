//! Per-worker counters: which of the six rules supplied each task, steal
//! attempts and successes, times slept.
//!
//! Each worker writes only its own [`WorkerCounters`] (a relaxed load and
//! store, no read-modify-write: there is a single writer), so counting costs
//! the hot path a plain increment. Readers (`Pool::stats`) may see a
//! snapshot that is slightly stale but never torn.

use crate::platform::sync::{AtomicU64, Ordering};
use std::fmt;

/// The six places a worker takes its next task from, in priority order.
///
/// ```
/// use sixfold::Rule;
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// pool.enqueue(|| {});
/// pool.wait_idle();
/// // An enqueued task comes from the shared queue: rule 5.
/// assert_eq!(pool.stats().by_rule(Rule::SharedQueue), 1);
/// assert_eq!(Rule::SharedQueue.number(), 5);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum Rule {
    /// Rule 1: the task that the finished task's `execute` returned.
    Returned = 0,
    /// Rule 2: the successor the finished task made ready (it was the last
    /// predecessor to complete).
    Successor = 1,
    /// Rule 3: the newest task of the worker's own deque (LIFO).
    OwnDeque = 2,
    /// Rule 4: a task with affinity for this worker, from its mailbox.
    Mailbox = 3,
    /// Rule 5: approximately the oldest task of the shared enqueue queue.
    SharedQueue = 4,
    /// Rule 6: the oldest task of a randomly chosen other worker's deque.
    Steal = 5,
}

impl Rule {
    /// All rules, in priority order.
    ///
    /// ```
    /// use sixfold::Rule;
    /// assert_eq!(Rule::ALL.len(), 6);
    /// for (i, rule) in Rule::ALL.into_iter().enumerate() {
    ///     assert_eq!(rule as usize, i); // the index into `tasks_by_rule`
    ///     assert_eq!(rule.number(), i + 1);
    /// }
    /// assert_eq!((Rule::ALL[0], Rule::ALL[5]), (Rule::Returned, Rule::Steal));
    /// ```
    pub const ALL: [Rule; 6] = [
        Rule::Returned,
        Rule::Successor,
        Rule::OwnDeque,
        Rule::Mailbox,
        Rule::SharedQueue,
        Rule::Steal,
    ];

    /// The rule's number, 1 to 6.
    ///
    /// ```
    /// use sixfold::Rule;
    /// assert_eq!(Rule::Returned.number(), 1);
    /// assert_eq!(Rule::OwnDeque.number(), 3);
    /// assert_eq!(Rule::Steal.number(), 6);
    /// ```
    pub fn number(self) -> usize {
        self as usize + 1
    }

    /// A short name for tables.
    ///
    /// ```
    /// use sixfold::Rule;
    /// assert_eq!(Rule::OwnDeque.short_name(), "own-deque");
    /// assert_eq!(Rule::SharedQueue.short_name(), "shared");
    /// // `Stats` heads its columns with number and name.
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// assert!(pool.stats().to_string().contains("5:shared"));
    /// ```
    pub fn short_name(self) -> &'static str {
        match self {
            Rule::Returned => "returned",
            Rule::Successor => "successor",
            Rule::OwnDeque => "own-deque",
            Rule::Mailbox => "mailbox",
            Rule::SharedQueue => "shared",
            Rule::Steal => "steal",
        }
    }
}

/// The live counters of one worker (single writer: that worker).
#[derive(Default)]
pub(crate) struct WorkerCounters {
    by_rule: [AtomicU64; 6],
    steal_attempts: AtomicU64,
    steals: AtomicU64,
    steals_by_tier: [AtomicU64; 4],
    sleeps: AtomicU64,
    stack_guarded_waits: AtomicU64,
    proxies_claimed_from_stuck: AtomicU64,
    loop_parts_helped: AtomicU64,
}

#[inline]
fn bump(counter: &AtomicU64, by: u64) {
    // Single writer: a load and a store cannot lose an update.
    counter.store(counter.load(Ordering::Relaxed) + by, Ordering::Relaxed);
}

impl WorkerCounters {
    #[inline]
    pub(crate) fn task(&self, rule: Rule) {
        bump(&self.by_rule[rule as usize], 1);
    }

    #[inline]
    pub(crate) fn steal_attempts(&self, n: u64) {
        bump(&self.steal_attempts, n);
    }

    /// A steal succeeded, from a victim at proximity `tier`.
    #[inline]
    pub(crate) fn steal_success(&self, tier: usize) {
        bump(&self.steals, 1);
        bump(&self.steals_by_tier[tier], 1);
    }

    #[inline]
    pub(crate) fn slept(&self) {
        bump(&self.sleeps, 1);
    }

    #[inline]
    pub(crate) fn stack_guarded_wait(&self) {
        bump(&self.stack_guarded_waits, 1);
    }

    /// This worker claimed another worker's proxy: its target looked stuck.
    #[inline]
    pub(crate) fn proxy_claimed_from_stuck(&self) {
        bump(&self.proxies_claimed_from_stuck, 1);
    }

    /// This worker ran a part of another worker's loop share.
    #[inline]
    pub(crate) fn loop_part_helped(&self) {
        bump(&self.loop_parts_helped, 1);
    }

    pub(crate) fn snapshot(&self) -> WorkerStats {
        WorkerStats {
            tasks_by_rule: std::array::from_fn(|i| self.by_rule[i].load(Ordering::Relaxed)),
            steal_attempts: self.steal_attempts.load(Ordering::Relaxed),
            steals: self.steals.load(Ordering::Relaxed),
            steals_by_tier: std::array::from_fn(|i| self.steals_by_tier[i].load(Ordering::Relaxed)),
            sleeps: self.sleeps.load(Ordering::Relaxed),
            stack_guarded_waits: self.stack_guarded_waits.load(Ordering::Relaxed),
            proxies_claimed_from_stuck: self.proxies_claimed_from_stuck.load(Ordering::Relaxed),
            loop_parts_helped: self.loop_parts_helped.load(Ordering::Relaxed),
        }
    }
}

/// What one worker did since the pool started. New counters may be added:
/// build one with `WorkerStats::default()`, not a struct literal.
///
/// ```
/// use sixfold::Rule;
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// pool.spawn_on(1, || {}).unwrap(); // worker 1 only, through its mailbox
/// pool.wait_idle();
/// let stats = pool.stats();
/// assert_eq!(stats.workers.len(), 2);
/// let w1 = &stats.workers[1];
/// assert_eq!(w1.tasks_by_rule[Rule::Mailbox as usize], 1);
/// assert_eq!(stats.workers[0].total(), 0);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Tasks started, indexed by `Rule as usize` (rule number minus one).
    pub tasks_by_rule: [u64; 6],
    /// Victim deques probed by rule 6.
    pub steal_attempts: u64,
    /// Probes that took a task.
    pub steals: u64,
    /// The same steals by the victim's proximity, indexed by
    /// `Proximity as usize` (same L2, same L3, same NUMA node, other).
    /// Without pinning every steal counts as `Other`.
    pub steals_by_tier: [u64; 4],
    /// Times the worker blocked in the sleep protocol.
    pub sleeps: u64,
    /// Nested waits that began past half of the worker's stack and so did
    /// not steal (the stack guard, see ARCHITECTURE.md).
    pub stack_guarded_waits: u64,
    /// Tasks with affinity for another worker that this one claimed and
    /// ran because their target looked stuck: busy, taking nothing from
    /// its mailbox, for about a millisecond (a long task, or a thread
    /// waiting for a core on a loaded machine).
    pub proxies_claimed_from_stuck: u64,
    /// Parts of an affinity-partitioned loop, sent to another worker, that
    /// this one ran: it had run its own parts, and that worker had not yet
    /// started these (it was slower, or had not got a core).
    pub loop_parts_helped: u64,
}

impl WorkerStats {
    /// Tasks this worker took by `rule`.
    ///
    /// ```
    /// use sixfold::{Rule, WorkerStats};
    /// let mut w = WorkerStats::default();
    /// w.tasks_by_rule[Rule::Steal as usize] = 3;
    /// assert_eq!(w.by_rule(Rule::Steal), 3);
    /// assert_eq!(w.by_rule(Rule::OwnDeque), 0);
    /// ```
    pub fn by_rule(&self, rule: Rule) -> u64 {
        self.tasks_by_rule[rule as usize]
    }

    /// All tasks this worker ran.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// for worker in [0, 1, 1] {
    ///     pool.spawn_on(worker, || {}).unwrap();
    /// }
    /// pool.wait_idle();
    /// let totals: Vec<u64> = pool.stats().workers.iter().map(|w| w.total()).collect();
    /// assert_eq!(totals, [1, 2]);
    /// ```
    pub fn total(&self) -> u64 {
        self.tasks_by_rule.iter().sum()
    }
}

/// A snapshot of a pool's counters (`Pool::stats`).
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// for _ in 0..10 {
///     pool.enqueue(|| {});
/// }
/// pool.wait_idle();
/// let stats = pool.stats();
/// assert_eq!(stats.workers.len(), 2);
/// assert_eq!(stats.total(), 10);
/// assert_eq!(stats.unhandled_panics, 0);
/// println!("{stats}"); // a table: one row per worker, one column per rule
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// One entry per worker slot, by worker index.
    pub workers: Vec<WorkerStats>,
    /// Panics of `'static` tasks that no `panic_handler` took.
    pub unhandled_panics: u64,
}

impl Stats {
    /// Tasks taken by `rule`, summed over workers.
    ///
    /// ```
    /// use sixfold::Rule;
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// // `install`'s job comes through the shared queue; the spawns inside
    /// // it go to its worker's deque, and run from there or are stolen.
    /// pool.install(|| (0..3).for_each(|_| pool.spawn(|| {})));
    /// pool.wait_idle();
    /// let stats = pool.stats();
    /// assert_eq!(stats.by_rule(Rule::SharedQueue), 1);
    /// assert_eq!(stats.by_rule(Rule::OwnDeque) + stats.by_rule(Rule::Steal), 3);
    /// ```
    pub fn by_rule(&self, rule: Rule) -> u64 {
        self.workers.iter().map(|w| w.by_rule(rule)).sum()
    }

    /// All tasks run.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// assert_eq!(pool.stats().total(), 0);
    /// pool.spawn(|| {});
    /// pool.enqueue(|| {});
    /// pool.wait_idle();
    /// assert_eq!(pool.stats().total(), 2);
    /// ```
    pub fn total(&self) -> u64 {
        self.workers.iter().map(WorkerStats::total).sum()
    }

    /// The counters accumulated since `earlier` (per worker).
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// pool.enqueue(|| {});
    /// pool.wait_idle();
    /// let before = pool.stats();
    /// for _ in 0..3 {
    ///     pool.enqueue(|| {});
    /// }
    /// pool.wait_idle();
    /// assert_eq!(pool.stats().total(), 4);
    /// assert_eq!(pool.stats().since(&before).total(), 3);
    /// ```
    pub fn since(&self, earlier: &Stats) -> Stats {
        Stats {
            workers: self
                .workers
                .iter()
                .enumerate()
                .map(|(i, now)| {
                    let before = earlier.workers.get(i).cloned().unwrap_or_default();
                    WorkerStats {
                        tasks_by_rule: std::array::from_fn(|r| {
                            now.tasks_by_rule[r] - before.tasks_by_rule[r]
                        }),
                        steal_attempts: now.steal_attempts - before.steal_attempts,
                        steals: now.steals - before.steals,
                        steals_by_tier: std::array::from_fn(|t| {
                            now.steals_by_tier[t] - before.steals_by_tier[t]
                        }),
                        sleeps: now.sleeps - before.sleeps,
                        stack_guarded_waits: now.stack_guarded_waits - before.stack_guarded_waits,
                        proxies_claimed_from_stuck: now.proxies_claimed_from_stuck
                            - before.proxies_claimed_from_stuck,
                        loop_parts_helped: now.loop_parts_helped - before.loop_parts_helped,
                    }
                })
                .collect(),
            unhandled_panics: self.unhandled_panics - earlier.unhandled_panics,
        }
    }
}

impl fmt::Display for Stats {
    /// A table: one row per worker, one column per rule, then steals.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:<8}", "worker")?;
        for rule in Rule::ALL {
            write!(
                f,
                " {:>12}",
                format!("{}:{}", rule.number(), rule.short_name())
            )?;
        }
        writeln!(f, " {:>10} {:>8} {:>7}", "steal-try", "stolen", "sleeps")?;
        let mut row = |name: &str, w: &WorkerStats| -> fmt::Result {
            write!(f, "{name:<8}")?;
            for count in w.tasks_by_rule {
                write!(f, " {count:>12}")?;
            }
            writeln!(
                f,
                " {:>10} {:>8} {:>7}",
                w.steal_attempts, w.steals, w.sleeps
            )
        };
        let mut total = WorkerStats::default();
        for (i, w) in self.workers.iter().enumerate() {
            row(&i.to_string(), w)?;
            for r in 0..6 {
                total.tasks_by_rule[r] += w.tasks_by_rule[r];
            }
            total.steal_attempts += w.steal_attempts;
            total.steals += w.steals;
            for t in 0..4 {
                total.steals_by_tier[t] += w.steals_by_tier[t];
            }
            total.sleeps += w.sleeps;
            total.stack_guarded_waits += w.stack_guarded_waits;
            total.proxies_claimed_from_stuck += w.proxies_claimed_from_stuck;
        }
        row("all", &total)
    }
}
