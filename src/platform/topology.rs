//! The machine's cores as the scheduler sees them: which cores this process
//! may run on, each core's OS index (what a worker is pinned to), which
//! cores share an L2 or an L3 cache, and each core's NUMA node. Placement
//! (`Pinning::Cores`) and the victim tiers of stealing are built from it.
//!
//! [`Topology::detect`] reads the machine once, into plain data:
//!
//! - with the cargo feature `hwloc`, through the `hwloc2` crate. Several of
//!   that crate's calls are unsound (checked against hwloc 2.9: the list is
//!   on `hwloc_snapshot`), so they are fenced into the private `hwloc_snapshot` module below, which calls
//!   only the ones checked to work, copies what it needs and drops the hwloc
//!   topology before it returns. No hwloc type leaves that module;
//! - otherwise (or if hwloc fails, or under Miri, where FFI cannot run),
//!   from `core_affinity`'s list of allowed CPUs, as one flat group;
//! - if even that fails, `available_parallelism()` cores with no cache or
//!   NUMA information.
//!
//! Invariants kept by every constructor:
//!
//! - there is at least one core, so `worker % num_cores()` is always valid;
//! - every core's `pus` is non-empty, sorted, and contains its `os_index`;
//! - detection respects the CPU mask of the calling thread (`taskset`, or
//!   `sched_setaffinity`): a core none of whose PUs are allowed is left
//!   out, and an allowed core lists only its allowed PUs. hwloc itself
//!   ignores the mask, which is why its cores are intersected with
//!   `core_affinity`'s list.

use std::fmt;

/// One core this process may run on.
///
/// Built by [`Topology::detect`], or by hand for [`Topology::from_cores`].
///
/// ```
/// use sixfold::{CoreInfo, Topology};
/// // An SMT core with two hardware threads, CPUs 2 and 3.
/// let core = CoreInfo { os_index: 2, pus: vec![2, 3], l2: Some(1), l3: Some(0), numa: Some(0) };
/// let topo = Topology::from_cores(vec![core.clone()]);
/// assert_eq!(topo.cores(), [core]);
/// // Detected cores hold their first allowed PU, on any machine.
/// for c in Topology::detect().cores() {
///     assert_eq!(c.pus.first(), Some(&c.os_index));
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreInfo {
    /// The OS index of the core's first allowed processing unit (PU, a
    /// hardware thread): the CPU to pin a worker to, as
    /// `core_affinity::CoreId { id: os_index as usize }`.
    pub os_index: u32,
    /// The OS indices of this core's PUs that the process may use, sorted.
    /// More than one on an SMT (hyper-threaded) core, when hwloc knows it.
    pub pus: Vec<u32>,
    /// An id shared by exactly the cores that share one L2 cache (`None`:
    /// unknown). Only comparable within one topology.
    pub l2: Option<u32>,
    /// An id shared by exactly the cores that share one L3 cache (`None`:
    /// unknown). Only comparable within one topology.
    pub l3: Option<u32>,
    /// The OS index of the core's NUMA node (`None`: unknown). If a core is
    /// local to several nodes, the lowest.
    pub numa: Option<u32>,
}

impl CoreInfo {
    /// A core with one PU and nothing known about its caches or memory.
    fn bare(os_index: u32) -> CoreInfo {
        CoreInfo {
            os_index,
            pus: vec![os_index],
            l2: None,
            l3: None,
            numa: None,
        }
    }
}

/// Where a [`Topology`] came from.
///
/// ```
/// use sixfold::{Topology, TopologySource};
/// let given = Topology::from_cores(Vec::new());
/// assert_eq!(given.source(), TopologySource::Fallback);
/// assert!(given.to_string().ends_with("from fallback"));
/// let detected = Topology::detect();
/// if detected.source() == TopologySource::CoreAffinity {
///     // One PU a "core", no cache information, NUMA node 0 for all.
///     for c in detected.cores() {
///         assert_eq!((c.pus.len(), c.l2, c.l3, c.numa), (1, None, None, Some(0)));
///     }
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TopologySource {
    /// hwloc (cargo feature `hwloc`): physical cores with their PUs, shared
    /// caches and NUMA nodes.
    Hwloc,
    /// `core_affinity`'s list of allowed CPUs, as one flat group: each
    /// "core" is really one PU (a hardware thread), with no cache
    /// information and NUMA node 0 for all.
    CoreAffinity,
    /// Neither worked, or the cores were given by hand
    /// ([`Topology::from_cores`]).
    Fallback,
}

impl TopologySource {
    fn name(self) -> &'static str {
        match self {
            TopologySource::Hwloc => "hwloc",
            TopologySource::CoreAffinity => "core_affinity",
            TopologySource::Fallback => "fallback",
        }
    }
}

/// How near two cores are, nearest first (`SameL2 < SameL3 < SameNuma <
/// Other`): the tiers in which a worker looks for victims to steal from.
///
/// ```
/// use sixfold::Proximity;
/// assert!(Proximity::SameL2 < Proximity::SameL3);
/// assert!(Proximity::SameL3 < Proximity::SameNuma);
/// assert!(Proximity::SameNuma < Proximity::Other);
/// // `WorkerStats::steals_by_tier` is indexed by `Proximity as usize`.
/// assert_eq!(Proximity::Other as usize, 3);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Proximity {
    /// The cores share an L2 cache (or are the same core).
    SameL2,
    /// The cores share an L3 cache but not an L2.
    SameL3,
    /// The cores share a NUMA node but no cache that is known.
    SameNuma,
    /// Nothing shared that is known.
    Other,
}

/// The cores this process may run on, with their cache and NUMA locality.
///
/// A plain snapshot taken by [`Topology::detect`]: it holds no handle to
/// hwloc, it is cheap to clone, `Send` and `Sync`, and it does not change
/// if the machine or the CPU mask changes later.
///
/// ```
/// use sixfold::{CoreInfo, Proximity, Topology};
/// let core = |os_index, l2| CoreInfo { os_index, pus: vec![os_index], l2: Some(l2), l3: Some(0), numa: Some(0) };
/// // Two pairs of cores, each pair sharing an L2, all four one L3.
/// let topo = Topology::from_cores(vec![core(0, 0), core(1, 0), core(2, 1), core(3, 1)]);
/// assert_eq!(topo.proximity(0, 1), Proximity::SameL2);
/// assert_eq!(topo.proximity(1, 2), Proximity::SameL3);
/// // A pool can be given it instead of the detected one.
/// let pool = sixfold::Pool::builder().num_threads(2).topology(topo.clone()).build().unwrap();
/// assert_eq!(pool.topology().cores(), topo.cores());
/// ```
#[derive(Clone, Debug)]
pub struct Topology {
    /// Never empty (see the module invariants).
    cores: Vec<CoreInfo>,
    source: TopologySource,
}

impl Topology {
    /// Reads the cores this process may run on.
    ///
    /// With the cargo feature `hwloc`, from hwloc; if hwloc fails in any way
    /// (or under Miri), from `core_affinity`'s list of allowed CPUs; if that
    /// fails too, [`std::thread::available_parallelism`] cores numbered from
    /// 0. [`source`](Topology::source) says which. Never panics.
    ///
    /// The CPU mask is read from the *calling thread*: call this before
    /// pinning it, from a thread that has the process's mask. Under
    /// `taskset -c 0` the result has one core, with `os_index` 0.
    ///
    /// Without hwloc each core is one logical CPU (a PU): on an SMT machine,
    /// two hardware threads of one physical core appear as two cores.
    ///
    /// ```
    /// use sixfold::{Proximity, Topology};
    ///
    /// let topo = Topology::detect();
    /// assert!(topo.num_cores() >= 1);
    /// let first = topo.core_for_worker(0);
    /// assert!(first.pus.contains(&first.os_index));
    /// // More workers than cores wrap around.
    /// assert_eq!(topo.core_for_worker(topo.num_cores()), first);
    /// assert_eq!(topo.proximity(0, 0), Proximity::SameL2);
    /// println!("{topo}");
    /// ```
    pub fn detect() -> Topology {
        // Read the mask first and once: it is the calling thread's, and hwloc
        // does not apply it.
        let allowed = allowed_pus();

        #[cfg(all(feature = "hwloc", not(miri)))]
        if let Some(cores) = hwloc_snapshot::read_cores(allowed.as_deref()) {
            return Topology {
                cores,
                source: TopologySource::Hwloc,
            };
        }

        match allowed {
            Some(pus) => Topology {
                cores: pus
                    .into_iter()
                    .map(|pu| CoreInfo {
                        numa: Some(0),
                        ..CoreInfo::bare(pu)
                    })
                    .collect(),
                source: TopologySource::CoreAffinity,
            },
            None => {
                let n = std::thread::available_parallelism().map_or(1, |n| n.get());
                let n = u32::try_from(n).unwrap_or(u32::MAX);
                Topology {
                    cores: (0..n).map(CoreInfo::bare).collect(),
                    source: TopologySource::Fallback,
                }
            }
        }
    }

    /// A topology made of the given cores, in this order, for tests and for
    /// users who know their machine better than detection does. The source
    /// is [`TopologySource::Fallback`].
    ///
    /// An empty `cores` gives one core with `os_index` 0 and nothing else
    /// known. Each core's `pus` is sorted and deduplicated, and its
    /// `os_index` is added to it if missing.
    ///
    /// ```
    /// use sixfold::{CoreInfo, Topology, TopologySource};
    /// let core = CoreInfo { os_index: 5, pus: vec![7, 6, 7], l2: None, l3: None, numa: None };
    /// let topo = Topology::from_cores(vec![core]);
    /// assert_eq!(topo.cores()[0].pus, [5, 6, 7]);
    /// assert_eq!(topo.source(), TopologySource::Fallback);
    /// let empty = Topology::from_cores(Vec::new());
    /// assert_eq!(empty.num_cores(), 1);
    /// assert_eq!(empty.cores()[0].os_index, 0);
    /// ```
    pub fn from_cores(cores: Vec<CoreInfo>) -> Topology {
        let mut cores = cores;
        if cores.is_empty() {
            cores.push(CoreInfo::bare(0));
        }
        for core in &mut cores {
            core.pus.push(core.os_index);
            core.pus.sort_unstable();
            core.pus.dedup();
        }
        Topology {
            cores,
            source: TopologySource::Fallback,
        }
    }

    /// The cores, at least one. With hwloc they are in hwloc's logical
    /// order, so neighbours in the slice are near each other; otherwise in
    /// order of OS index. A topology from
    /// [`from_cores`](Self::from_cores) keeps the order it was given.
    ///
    /// ```
    /// use sixfold::{CoreInfo, Topology};
    /// let core = |os_index| CoreInfo { os_index, pus: vec![os_index], l2: None, l3: None, numa: None };
    /// let topo = Topology::from_cores(vec![core(4), core(2)]);
    /// let os: Vec<u32> = topo.cores().iter().map(|c| c.os_index).collect();
    /// assert_eq!(os, [4, 2]);
    /// assert!(!Topology::detect().cores().is_empty());
    /// ```
    pub fn cores(&self) -> &[CoreInfo] {
        &self.cores
    }

    /// The number of cores, at least 1.
    ///
    /// ```
    /// use sixfold::Topology;
    /// let topo = Topology::detect();
    /// assert!(topo.num_cores() >= 1);
    /// assert_eq!(topo.num_cores(), topo.cores().len());
    /// assert_eq!(Topology::from_cores(Vec::new()).num_cores(), 1);
    /// ```
    pub fn num_cores(&self) -> usize {
        self.cores.len()
    }

    /// Where this topology came from.
    ///
    /// ```
    /// use sixfold::{Topology, TopologySource};
    /// assert_eq!(Topology::from_cores(Vec::new()).source(), TopologySource::Fallback);
    /// // A pool keeps the source of the topology it was built with.
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// assert_eq!(pool.topology().source(), Topology::detect().source());
    /// ```
    pub fn source(&self) -> TopologySource {
        self.source
    }

    /// How near the cores at positions `a` and `b` of [`cores`](Self::cores)
    /// are: [`Proximity::SameL2`] if both L2 ids are known and equal, else
    /// `SameL3` by the L3 ids, else `SameNuma` by the NUMA ids, else `Other`.
    /// A core is `SameL2` with itself, known caches or not: it shares all of
    /// them.
    ///
    /// # Panics
    ///
    /// If `a` or `b` is not below [`num_cores`](Self::num_cores).
    ///
    /// ```
    /// use sixfold::{CoreInfo, Proximity::*, Topology};
    /// let core = |os_index, l2, l3, numa| CoreInfo { os_index, pus: vec![os_index], l2, l3, numa };
    /// let topo = Topology::from_cores(vec![
    ///     core(0, Some(0), Some(0), Some(0)),
    ///     core(1, Some(0), Some(0), Some(0)),
    ///     core(2, Some(1), Some(0), Some(0)),
    ///     core(3, None, Some(1), Some(0)),
    ///     core(4, None, None, Some(1)),
    /// ]);
    /// assert_eq!([1, 2, 3, 4].map(|b| topo.proximity(0, b)), [SameL2, SameL3, SameNuma, Other]);
    /// assert_eq!(topo.proximity(3, 4), Other); // unknown ids are never equal
    /// assert_eq!(topo.proximity(4, 4), SameL2); // but a core is near itself
    /// ```
    pub fn proximity(&self, a: usize, b: usize) -> Proximity {
        let n = self.cores.len();
        assert!(
            a < n && b < n,
            "core positions {a} and {b}: the topology has {n} cores"
        );
        if a == b {
            return Proximity::SameL2;
        }
        let (x, y) = (&self.cores[a], &self.cores[b]);
        let same = |p: Option<u32>, q: Option<u32>| p.is_some() && p == q;
        if same(x.l2, y.l2) {
            Proximity::SameL2
        } else if same(x.l3, y.l3) {
            Proximity::SameL3
        } else if same(x.numa, y.numa) {
            Proximity::SameNuma
        } else {
            Proximity::Other
        }
    }

    /// The core for worker `worker`: `cores()[worker % num_cores()]`, so
    /// with more workers than cores, workers share cores round-robin.
    ///
    /// ```
    /// use sixfold::{CoreInfo, Topology};
    /// let core = |os_index| CoreInfo { os_index, pus: vec![os_index], l2: None, l3: None, numa: None };
    /// let topo = Topology::from_cores(vec![core(8), core(9), core(10)]);
    /// assert_eq!(topo.core_for_worker(1).os_index, 9);
    /// assert_eq!(topo.core_for_worker(4).os_index, 9); // 4 % 3 = 1
    /// ```
    pub fn core_for_worker(&self, worker: usize) -> &CoreInfo {
        &self.cores[worker % self.cores.len()]
    }
}

/// A short table, one line per core (`-` for unknown), then the source:
///
/// ```text
/// core  os  l2  l3  numa  pus
///    0   0   0   0     0  0
///    1   1   1   0     0  1
/// 2 cores, from hwloc
/// ```
impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Id(Option<u32>);
        impl fmt::Display for Id {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.0 {
                    Some(id) => id.fmt(f),
                    None => "-".fmt(f),
                }
            }
        }

        writeln!(f, "core  os  l2  l3  numa  pus")?;
        for (i, c) in self.cores.iter().enumerate() {
            let pus: Vec<String> = c.pus.iter().map(u32::to_string).collect();
            writeln!(
                f,
                "{i:>4} {:>3} {:>3} {:>3} {:>5}  {}",
                c.os_index,
                Id(c.l2),
                Id(c.l3),
                Id(c.numa),
                pus.join(",")
            )?;
        }
        let n = self.cores.len();
        let s = if n == 1 { "" } else { "s" };
        write!(f, "{n} core{s}, from {}", self.source.name())
    }
}

/// The calling thread's allowed CPUs (PU OS indices), sorted, or `None` if
/// `core_affinity` cannot tell (or tells nothing).
fn allowed_pus() -> Option<Vec<u32>> {
    let mut pus: Vec<u32> = core_affinity::get_core_ids()?
        .into_iter()
        .filter_map(|id| u32::try_from(id.id).ok())
        .collect();
    pus.sort_unstable();
    pus.dedup();
    (!pus.is_empty()).then_some(pus)
}

/// The fence around `hwloc2`. Its rules (each unsound call was reproduced
/// with hwloc 2.9 under valgrind):
///
/// - only `Topology::new`, `objects_with_type(&ObjectType::Core)`,
///   `parent()`, `object_type()`, `logical_index()`, `cpuset()` and
///   `nodeset()` are called, all checked to work with hwloc 2.9;
/// - `cpuset()`/`nodeset()` return a `Bitmap` that points into the
///   topology's memory with no lifetime: each is `.clone()`d (an owned
///   copy) in the expression that gets it and turned into plain `u32`s
///   before the topology is dropped;
/// - never `objects_with_type(&ObjectType::NUMANode)` (panics: hwloc2 maps
///   virtual depths one slot off), never `name()` (frees hwloc's memory),
///   never `Display`/`Debug` of a `TopologyObject` (heap overflow) or of a
///   `Bitmap` (leaks);
/// - no hwloc type leaves this module: it returns `Vec<CoreInfo>`.
#[cfg(all(feature = "hwloc", not(miri)))]
mod hwloc_snapshot {
    use super::CoreInfo;
    use hwloc2::{ObjectType, Topology, TopologyObject};

    /// The cores with at least one PU in `allowed` (all cores if `None`),
    /// each with only its allowed PUs, in hwloc's logical order. `None` if
    /// hwloc fails or finds no allowed core, so that the caller falls back.
    pub(super) fn read_cores(allowed: Option<&[u32]>) -> Option<Vec<CoreInfo>> {
        // hwloc2 panics on some inputs it mis-maps (none of the calls below
        // did on the machines checked, but the fallback must hold if one
        // does elsewhere). The hwloc topology is dropped during unwinding.
        std::panic::catch_unwind(|| read(allowed)).ok().flatten()
    }

    fn read(allowed: Option<&[u32]>) -> Option<Vec<CoreInfo>> {
        let topo = Topology::new()?;
        let mut cores = Vec::new();
        for core in topo.objects_with_type(&ObjectType::Core).ok()? {
            // `cpuset()` wraps hwloc's own bitmap without owning it (and
            // without a lifetime); `clone()` makes an owned copy at once.
            let Some(view) = core.cpuset() else {
                continue;
            };
            let cpuset = view.clone();
            // A core's cpuset is finite, so this iteration ends; hwloc
            // iterates in ascending order, so `pus` comes out sorted.
            let pus: Vec<u32> = cpuset
                .into_iter()
                .filter(|pu| allowed.is_none_or(|a| a.binary_search(pu).is_ok()))
                .collect();
            let Some(&os_index) = pus.first() else {
                continue; // no allowed PU: the mask excludes this core
            };
            // Only the first node: a nodeset can be full (infinite) on a
            // machine without NUMA information, so it is never collected.
            let numa = core.nodeset().and_then(|s| s.clone().into_iter().next());
            cores.push(CoreInfo {
                os_index,
                pus,
                l2: enclosing(core, |t| matches!(t, ObjectType::L2Cache)),
                l3: enclosing(core, |t| matches!(t, ObjectType::L3Cache)),
                numa,
            });
        }
        // `topo` is dropped here, after every bitmap was copied out.
        (!cores.is_empty()).then_some(cores)
    }

    /// The logical index of the nearest ancestor of `obj` whose type passes
    /// `is_kind`. In hwloc 2 caches are ancestors of the cores they serve
    /// and NUMA nodes are not in this chain, so a parent walk finds the
    /// cache shared by exactly the cores below it. Logical indices are
    /// unique per type, so equal ids mean the same cache.
    fn enclosing(obj: &TopologyObject, is_kind: impl Fn(&ObjectType) -> bool) -> Option<u32> {
        let mut up = obj.parent();
        while let Some(o) = up {
            if is_kind(&o.object_type()) {
                return Some(o.logical_index());
            }
            up = o.parent();
        }
        None
    }
}

/// Whether a pool binds its workers to cores.
///
/// ```
/// use sixfold::{Pinning, Pool};
/// assert_eq!(Pinning::default(), Pinning::None);
/// let floating = Pool::builder().num_threads(2).build().unwrap();
/// assert_eq!(floating.worker_core(0), None);
/// let pinned = Pool::builder().num_threads(2).pinning(Pinning::Cores).build().unwrap();
/// for w in 0..2 {
///     assert_eq!(pinned.worker_core(w), Some(pinned.topology().core_for_worker(w)));
/// }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Pinning {
    /// Workers float wherever the OS puts them (the default). Steals then
    /// ignore the topology: every other worker is one tier.
    #[default]
    None,
    /// Worker i is bound to `topology.core_for_worker(i)` (its first
    /// allowed PU), through `core_affinity`; more workers than cores wrap
    /// around. Steals try the nearest workers first (`Proximity`).
    Cores,
}

/// Each worker's steal victims, nearest tier first (tiers by [`Proximity`]).
pub(crate) struct VictimTiers {
    /// `tiers[p as usize]`: the other workers at proximity `p`.
    pub(crate) tiers: [Vec<usize>; 4],
}

impl VictimTiers {
    /// Victims of every worker of a pool of `workers` slots.
    pub(crate) fn for_pool(topology: &Topology, pinning: Pinning, workers: usize) -> Vec<Self> {
        (0..workers)
            .map(|me| {
                let mut tiers: [Vec<usize>; 4] = Default::default();
                for other in (0..workers).filter(|&o| o != me) {
                    let tier = match pinning {
                        Pinning::None => Proximity::Other,
                        Pinning::Cores => topology
                            .proximity(me % topology.num_cores(), other % topology.num_cores()),
                    };
                    tiers[tier as usize].push(other);
                }
                VictimTiers { tiers }
            })
            .collect()
    }
}
