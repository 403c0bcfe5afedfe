//! Pinning workers to cores, and stealing nearest first.

use sixfold::{CoreInfo, Pinning, Pool, Proximity, Topology, current_worker};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The CPUs the calling thread may run on (Linux `sched_getaffinity`).
fn my_cpus() -> BTreeSet<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the call writes at
    // most size_of::<cpu_set_t>() bytes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let rc = libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        assert_eq!(rc, 0, "sched_getaffinity failed");
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect()
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn pinned_workers_run_on_their_core() {
    let threads = 3; // more workers than cores on a 2-core machine: wraps
    type Masks = Arc<Mutex<Vec<(usize, BTreeSet<usize>)>>>;
    let masks: Masks = Arc::default();
    let m = masks.clone();
    let pool = Pool::builder()
        .num_threads(threads)
        .pinning(Pinning::Cores)
        // The start handler runs on the worker, after it was pinned.
        .start_handler(move |i| m.lock().unwrap().push((i, my_cpus())))
        .build()
        .unwrap();
    // Make sure every start handler ran.
    pool.install(|| ());
    while masks.lock().unwrap().len() < threads {
        std::thread::yield_now();
    }
    let topo = pool.topology();
    for (i, cpus) in masks.lock().unwrap().iter() {
        let core = topo.core_for_worker(*i);
        assert_eq!(pool.worker_core(*i), Some(core));
        assert_eq!(
            cpus,
            &BTreeSet::from([core.os_index as usize]),
            "worker {i} should be bound to CPU {}",
            core.os_index
        );
    }
    // Without pinning, workers keep the process's mask.
    let free = Pool::builder().num_threads(1).build().unwrap();
    assert_eq!(free.worker_core(0), None);
    let expected = my_cpus();
    assert_eq!(free.install(my_cpus), expected);
}

/// Four workers pinned to a made-up topology: two L2 pairs {0,1} and {2,3}
/// under one L3. Worker 0 holds all the work; worker 1 (same L2) steals
/// from it in the nearest tier, workers 2 and 3 find their L2 partner empty
/// and steal one tier out.
#[test]
#[cfg_attr(miri, ignore)]
fn steals_try_the_nearest_tier_first_and_are_counted_by_tier() {
    let cpus: Vec<u32> = my_cpus().into_iter().map(|c| c as u32).collect();
    let core = |i: usize, l2: u32| CoreInfo {
        os_index: cpus[i % cpus.len()],
        pus: vec![cpus[i % cpus.len()]],
        l2: Some(l2),
        l3: Some(0),
        numa: Some(0),
    };
    let topo = Topology::from_cores(vec![core(0, 0), core(1, 0), core(2, 1), core(3, 1)]);
    assert_eq!(topo.proximity(0, 1), Proximity::SameL2);
    assert_eq!(topo.proximity(0, 2), Proximity::SameL3);
    let pool = Arc::new(
        Pool::builder()
            .num_threads(4)
            .pinning(Pinning::Cores)
            .topology(topo)
            .build()
            .unwrap(),
    );
    let before = pool.stats();
    let go = Arc::new(AtomicBool::new(false));
    let (p, g) = (pool.clone(), go.clone());
    pool.spawn_with_affinity(0, move || {
        assert_eq!(current_worker(), Some(0));
        // About 100 ms of work in all: on a machine with fewer cores than
        // workers, long enough that the OS schedules every worker while
        // worker 0 still holds tasks (a few microseconds of work let one
        // thief take everything before worker 1 first ran).
        for _ in 0..20_000 {
            p.spawn(|| {
                let start = std::time::Instant::now();
                while start.elapsed() < std::time::Duration::from_micros(5) {
                    std::hint::spin_loop();
                }
            });
        }
        g.store(true, Ordering::SeqCst);
        // Keep worker 0 busy so the others must steal.
        std::thread::sleep(std::time::Duration::from_millis(20));
    })
    .unwrap();
    pool.wait_idle();
    assert!(go.load(Ordering::SeqCst));
    let stats = pool.stats().since(&before);
    for (i, w) in stats.workers.iter().enumerate() {
        assert_eq!(
            w.steals_by_tier.iter().sum::<u64>(),
            w.steals,
            "worker {i}: tiers add up"
        );
    }
    let by = |w: usize, t: Proximity| stats.workers[w].steals_by_tier[t as usize];
    assert!(
        stats.workers[1].steals > 0,
        "worker 1 stole nothing:\n{stats}"
    );
    assert_eq!(by(1, Proximity::SameL2), stats.workers[1].steals, "{stats}");
    for w in [2, 3] {
        // Their only victims with work are worker 0 (L3) and, rarely, each
        // other (L2) when one holds a stolen task's leftovers: none here,
        // the tasks spawn nothing.
        assert_eq!(by(w, Proximity::SameL3), stats.workers[w].steals, "{stats}");
    }
}

/// A worker woken on a CPU another worker of its pool runs on moves off it
/// by narrowing its allowed CPUs and restoring them at once: no task may
/// ever run under a narrowed set, and a pinned worker keeps its one CPU.
/// Each round lets the workers fall asleep, then wakes both with work.
#[test]
#[cfg_attr(miri, ignore)]
fn woken_workers_run_every_task_under_their_own_allowed_cpus() {
    let process = my_cpus();
    let free = Pool::builder().num_threads(2).build().unwrap();
    let pinned = Pool::builder()
        .num_threads(2)
        .pinning(Pinning::Cores)
        .build()
        .unwrap();
    for _ in 0..40 {
        // Longer than a search's rounds: both pools' workers sleep.
        std::thread::sleep(std::time::Duration::from_millis(3));
        for (index, cpus) in free.broadcast(|_| my_cpus()).into_iter().enumerate() {
            assert_eq!(cpus, process, "unpinned worker {index}");
        }
        for (index, cpus) in pinned.broadcast(|_| my_cpus()).into_iter().enumerate() {
            let core = pinned.worker_core(index).expect("pinned");
            assert_eq!(
                cpus,
                BTreeSet::from([core.os_index as usize]),
                "pinned worker {index}"
            );
        }
        // Work that wakes the second worker while the first runs.
        let (a, b) = free.install(|| {
            sixfold::join(
                || {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                    my_cpus()
                },
                my_cpus,
            )
        });
        assert_eq!((a, b), (process.clone(), process.clone()));
    }
}
