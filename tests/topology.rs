//! `Topology`: what `detect()` promises on any machine (at least one core,
//! distinct PUs, worker wrap-around), the proximity tiers on a handmade
//! topology, that detection respects the CPU mask (`taskset -c N` gives
//! exactly core N), and, with the `hwloc` feature, that hwloc agrees with
//! Linux's `/sys/devices/system/cpu` on cores, PUs, caches and NUMA nodes.

use sixfold::{CoreInfo, Proximity, Topology, TopologySource};
use std::collections::BTreeSet;
use std::process::Command;

/// Tells the child test (this binary, re-run under `taskset`) to act.
const CHILD_ENV: &str = "SIXFOLD_TOPOLOGY_CHILD";
/// The line the child prints, parsed by the parent.
const CHILD_TAG: &str = "SIXFOLD_TOPOLOGY_CORES=";

fn core(os: u32, l2: Option<u32>, l3: Option<u32>, numa: Option<u32>) -> CoreInfo {
    CoreInfo {
        os_index: os,
        pus: vec![os],
        l2,
        l3,
        numa,
    }
}

#[test]
fn detect_gives_allowed_distinct_cores() {
    let topo = Topology::detect();
    let n = topo.num_cores();
    assert!(n >= 1, "{topo}");
    assert_eq!(n, topo.cores().len());

    let parallelism = std::thread::available_parallelism().map_or(1, |p| p.get());
    assert!(n <= parallelism, "{n} cores but {parallelism} CPUs: {topo}");

    let mut seen = BTreeSet::new();
    for c in topo.cores() {
        assert!(!c.pus.is_empty(), "{topo}");
        assert!(c.pus.contains(&c.os_index), "{topo}");
        assert!(c.pus.windows(2).all(|w| w[0] < w[1]), "unsorted: {topo}");
        for &pu in &c.pus {
            assert!(seen.insert(pu), "PU {pu} in two cores: {topo}");
        }
    }

    if topo.source() == TopologySource::CoreAffinity {
        // One flat group: one PU per core, NUMA node 0, caches unknown.
        for c in topo.cores() {
            assert_eq!(c.pus, vec![c.os_index]);
            assert_eq!((c.l2, c.l3, c.numa), (None, None, Some(0)));
        }
    }
    if !cfg!(feature = "hwloc") {
        assert_ne!(topo.source(), TopologySource::Hwloc);
    }

    let text = topo.to_string();
    assert_eq!(text.lines().count(), n + 2, "{text}");
    assert!(text.contains("core"), "{text}");
}

#[test]
fn workers_wrap_around_cores() {
    let topo = Topology::detect();
    let n = topo.num_cores();
    for w in 0..3 * n {
        assert_eq!(topo.core_for_worker(w), &topo.cores()[w % n]);
    }
    assert_eq!(topo.core_for_worker(n), topo.core_for_worker(0));
}

#[test]
fn a_core_is_nearest_to_itself() {
    let topo = Topology::detect();
    for i in 0..topo.num_cores() {
        assert_eq!(topo.proximity(i, i), Proximity::SameL2);
    }
    // Even with nothing known about its caches.
    let bare = Topology::from_cores(vec![core(3, None, None, None), core(5, None, None, None)]);
    assert_eq!(bare.proximity(1, 1), Proximity::SameL2);
    assert_eq!(bare.proximity(0, 1), Proximity::Other);
}

#[test]
fn detected_proximity_is_symmetric_and_flat_without_hwloc() {
    let topo = Topology::detect();
    let n = topo.num_cores();
    for a in 0..n {
        for b in 0..n {
            let p = topo.proximity(a, b);
            assert_eq!(p, topo.proximity(b, a));
            if a != b && topo.source() == TopologySource::CoreAffinity {
                assert_eq!(p, Proximity::SameNuma, "one flat group");
            }
        }
    }
}

/// Four cores: two L2 pairs {0,1} and {2,3} under one L3, and (as a
/// made-up machine can have it) NUMA node 0 for cores 0 and 1, node 1 for
/// core 2 and 3; plus a fifth core that shares nothing known.
#[test]
fn proximity_tiers_on_a_handmade_topology() {
    let topo = Topology::from_cores(vec![
        core(0, Some(0), Some(0), Some(0)),
        core(1, Some(0), Some(0), Some(0)),
        core(2, Some(1), Some(0), Some(1)),
        core(3, Some(1), Some(0), Some(1)),
    ]);
    assert_eq!(topo.source(), TopologySource::Fallback);
    assert_eq!(topo.num_cores(), 4);
    assert_eq!(topo.proximity(0, 1), Proximity::SameL2);
    assert_eq!(topo.proximity(2, 3), Proximity::SameL2);
    assert_eq!(topo.proximity(0, 2), Proximity::SameL3);
    assert_eq!(topo.proximity(3, 1), Proximity::SameL3);

    // Two NUMA nodes, no L3 shared across them.
    let numa = Topology::from_cores(vec![
        core(0, Some(0), Some(0), Some(0)),
        core(1, Some(0), Some(0), Some(0)),
        core(2, Some(1), Some(1), Some(1)),
        core(3, Some(1), Some(1), Some(1)),
        core(4, Some(2), Some(2), Some(0)),
        core(5, None, None, None),
    ]);
    assert_eq!(numa.proximity(0, 1), Proximity::SameL2);
    assert_eq!(numa.proximity(0, 4), Proximity::SameNuma);
    assert_eq!(numa.proximity(1, 2), Proximity::Other);
    assert_eq!(numa.proximity(5, 0), Proximity::Other);
    // Unknown ids never match each other.
    let unknown = Topology::from_cores(vec![
        core(0, None, None, Some(0)),
        core(1, None, None, Some(0)),
    ]);
    assert_eq!(unknown.proximity(0, 1), Proximity::SameNuma);

    // The tiers are ordered nearest first, as stealing walks them.
    assert!(Proximity::SameL2 < Proximity::SameL3);
    assert!(Proximity::SameL3 < Proximity::SameNuma);
    assert!(Proximity::SameNuma < Proximity::Other);

    let text = topo.to_string();
    assert!(text.ends_with("4 cores, from fallback"), "{text}");
}

#[test]
fn from_cores_fills_in_and_normalises() {
    let one = Topology::from_cores(Vec::new());
    assert_eq!(one.num_cores(), 1);
    assert_eq!(one.cores()[0], core(0, None, None, None));
    assert_eq!(one.core_for_worker(7).os_index, 0);

    let t = Topology::from_cores(vec![CoreInfo {
        os_index: 4,
        pus: vec![12, 12],
        l2: None,
        l3: None,
        numa: None,
    }]);
    assert_eq!(t.cores()[0].pus, vec![4, 12]);
}

#[test]
#[should_panic(expected = "the topology has 4 cores")]
fn proximity_out_of_range_panics() {
    let topo = Topology::from_cores((0..4).map(|i| core(i, None, None, None)).collect());
    topo.proximity(1, 4);
}

#[test]
fn topology_is_send_sync_and_clone() {
    fn check<T: Send + Sync + Clone + std::fmt::Debug>() {}
    check::<Topology>();
    check::<CoreInfo>();
    let t = Topology::detect();
    assert_eq!(t.clone().cores(), t.cores());
}

// ---- The CPU mask: taskset ---------------------------------------------

/// The calling thread's allowed CPUs, straight from the kernel.
fn thread_mask() -> Vec<u32> {
    // SAFETY: `cpu_set_t` is plain bits, valid when zeroed; the kernel
    // writes at most `size_of::<cpu_set_t>()` bytes into `set`.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let rc = libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set);
        assert_eq!(
            rc,
            0,
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        );
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .map(|cpu| cpu as u32)
            .collect()
    }
}

/// Restricts the calling thread to `cpu`.
fn pin_thread_to(cpu: u32) {
    // SAFETY: as in `thread_mask`; `cpu` is below CPU_SETSIZE (it came
    // from a mask), so CPU_SET stays inside `set`.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        let rc = libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
        assert_eq!(
            rc,
            0,
            "sched_setaffinity: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// The OS indices `detect()` gives, one per core, as the child prints them.
fn os_indices(topo: &Topology) -> Vec<u32> {
    topo.cores().iter().map(|c| c.os_index).collect()
}

/// The child half of `taskset_gives_one_core`: run by the parent under
/// `taskset`, it prints what `detect()` sees. Does nothing when run
/// directly (it is ignored, and checks the variable besides).
#[test]
#[ignore = "run by taskset_gives_one_core in a child process"]
fn taskset_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let topo = Topology::detect();
    let list: Vec<String> = os_indices(&topo).iter().map(u32::to_string).collect();
    // libtest may print "test taskset_child ... " on the same line.
    println!("{CHILD_TAG}{}", list.join(","));
    eprintln!("{topo}");
}

/// Runs this test binary's `taskset_child` under `taskset -c cpu` and
/// returns the OS indices it detected, or `None` if `taskset` is missing.
fn detect_under_taskset(cpu: u32) -> Option<Vec<u32>> {
    let exe = std::env::current_exe().expect("current_exe");
    let out = match Command::new("taskset")
        .arg("-c")
        .arg(cpu.to_string())
        .arg(exe)
        .args([
            "--exact",
            "taskset_child",
            "--nocapture",
            "--include-ignored",
        ])
        .env(CHILD_ENV, "1")
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("could not run taskset: {e}"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "taskset -c {cpu} child failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let line = stdout
        .lines()
        .find_map(|l| l.split_once(CHILD_TAG).map(|(_, rest)| rest.trim()))
        .unwrap_or_else(|| panic!("the child printed no {CHILD_TAG} line:\n{stdout}\n{stderr}"));
    Some(
        line.split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().expect("an OS index"))
            .collect(),
    )
}

/// What `detect()` gives in a fresh thread restricted to `cpu` with
/// `sched_setaffinity`: the same as `taskset` does for a whole process,
/// because detection reads the calling thread's mask.
fn detect_in_pinned_thread(cpu: u32) -> Vec<u32> {
    std::thread::spawn(move || {
        pin_thread_to(cpu);
        os_indices(&Topology::detect())
    })
    .join()
    .expect("the pinned thread panicked")
}

/// Acceptance: under `taskset -c 0` the detected topology has one core,
/// core 0. CPU 0 is used when this process may run on it (the usual case);
/// otherwise its first allowed CPU. The last allowed CPU is tried too, so
/// that "the first core" cannot pass by accident.
#[test]
#[cfg_attr(miri, ignore = "Miri cannot spawn processes")]
fn taskset_gives_one_core() {
    let mask = thread_mask();
    let first = *mask.first().expect("a non-empty CPU mask");
    let last = *mask.last().unwrap();
    let cpus: BTreeSet<u32> = [first, last].into_iter().collect();
    for cpu in cpus {
        match detect_under_taskset(cpu) {
            Some(cores) => assert_eq!(cores, vec![cpu], "under taskset -c {cpu}"),
            None => {
                eprintln!("taskset is not installed: restricting a thread instead");
                assert_eq!(detect_in_pinned_thread(cpu), vec![cpu], "pinned to {cpu}");
            }
        }
    }
}

/// The thread-mask half on its own (it needs no `taskset`).
#[test]
#[cfg_attr(miri, ignore = "sched_setaffinity is not supported by Miri")]
fn a_pinned_thread_detects_one_core() {
    let mask = thread_mask();
    for cpu in [mask[0], mask[mask.len() - 1]] {
        assert_eq!(detect_in_pinned_thread(cpu), vec![cpu], "pinned to {cpu}");
    }
    // The pinning stayed in that thread: this one still sees every CPU.
    assert_eq!(thread_mask(), mask);
}

// ---- hwloc against /sys/devices/system/cpu ------------------------------

/// Parses a Linux CPU list such as `0-3,8,10-11`.
#[cfg(feature = "hwloc")]
fn parse_cpu_list(text: &str) -> Vec<u32> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<u32>().unwrap()..=b.parse().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus
}

#[cfg(feature = "hwloc")]
fn read_sys(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The id of the cache of `level` (2 or 3) that `cpu` uses, as the set of
/// CPUs sharing it, from `cpuN/cache/index*/`.
#[cfg(feature = "hwloc")]
fn sys_cache_sharers(cpu: u32, level: u32) -> Option<Vec<u32>> {
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cache");
    for entry in std::fs::read_dir(dir).ok()? {
        let path = entry.ok()?.path();
        let field = |f: &str| std::fs::read_to_string(path.join(f)).ok();
        if field("level")?.trim() == level.to_string() && field("type")?.trim() != "Instruction" {
            return Some(parse_cpu_list(&field("shared_cpu_list")?));
        }
    }
    None
}

/// Acceptance: with hwloc, the topology agrees with `/sys/devices/system/cpu`
/// on the cores (distinct `(physical_package_id, core_id)` over the online
/// CPUs this process may use), each core's allowed PUs, cache sharing
/// where sysfs describes caches, and the NUMA node of each core's first PU
/// (its `nodeN` entry) where sysfs has such entries.
#[cfg(feature = "hwloc")]
#[test]
#[cfg_attr(miri, ignore = "hwloc is FFI and sysfs is outside Miri's isolation")]
fn hwloc_agrees_with_sysfs() {
    let topo = Topology::detect();
    assert_eq!(topo.source(), TopologySource::Hwloc, "{topo}");
    eprintln!("{topo}");

    let mask: BTreeSet<u32> = thread_mask().into_iter().collect();
    let online = parse_cpu_list(&read_sys("/sys/devices/system/cpu/online").unwrap());

    // (package, core) -> the allowed online CPUs of that core.
    let mut sys_cores = std::collections::BTreeMap::<(u32, u32), Vec<u32>>::new();
    for &cpu in online.iter().filter(|c| mask.contains(c)) {
        let field = |f: &str| -> u32 {
            let path = format!("/sys/devices/system/cpu/cpu{cpu}/topology/{f}");
            read_sys(&path).unwrap().trim().parse().unwrap()
        };
        let key = (field("physical_package_id"), field("core_id"));
        sys_cores.entry(key).or_default().push(cpu);
    }
    assert_eq!(
        topo.num_cores(),
        sys_cores.len(),
        "{topo}\nsysfs: {sys_cores:?}"
    );

    let mut hw_pus: Vec<Vec<u32>> = topo.cores().iter().map(|c| c.pus.clone()).collect();
    let mut sys_pus: Vec<Vec<u32>> = sys_cores.into_values().collect();
    hw_pus.sort();
    sys_pus.sort();
    assert_eq!(hw_pus, sys_pus, "PUs per core\n{topo}");

    for (i, a) in topo.cores().iter().enumerate() {
        let pu = a.pus[0];

        // NUMA: the nodeN entry of the core's first PU.
        let dir = format!("/sys/devices/system/cpu/cpu{pu}");
        let node = std::fs::read_dir(&dir).unwrap().find_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_prefix("node")?.parse::<u32>().ok()
        });
        if let Some(node) = node {
            assert_eq!(a.numa, Some(node), "NUMA node of core {i}\n{topo}");
        }

        // Caches: two cores share hwloc's L2 (L3) id exactly when sysfs
        // lists them as sharing that level.
        let id = |c: &CoreInfo, level| if level == 2 { c.l2 } else { c.l3 };
        for level in [2, 3] {
            let Some(sharers) = sys_cache_sharers(pu, level) else {
                continue;
            };
            assert!(
                id(a, level).is_some(),
                "L{level} of core {i} unknown\n{topo}"
            );
            for b in topo.cores() {
                assert_eq!(
                    id(a, level) == id(b, level),
                    sharers.contains(&b.pus[0]),
                    "L{level} sharing of PUs {pu} and {}\n{topo}",
                    b.pus[0]
                );
            }
        }
    }
}
