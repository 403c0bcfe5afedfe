//! A pipeline of stages (parse, transform, checksum, ...) whose stages keep
//! their working set in one core's cache: shared by `examples/pipeline.rs`
//! and the `pipeline` benchmark.
//!
//! Each stage owns a model it reads and updates for every byte of every
//! item, as a compressor's frequency model or a parser's symbol table does
//! (256 KiB per stage). An item is a task; when a stage is done with it, it
//! hands the item to the next stage as a new task. With affinity, stage s
//! runs on worker `s % workers`, so its model stays in that core's cache,
//! written by that core alone; without, two cores write the same model and
//! its cache lines move back and forth between them.

use sixfold::Pool;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Entries of each stage's model (u64 each: 256 KiB).
const TABLE: usize = 32 * 1024;
/// Bytes of one item.
const ITEM: usize = 4096;

/// What one pipeline run measured.
pub struct PipelineReport {
    pub items: usize,
    pub elapsed: Duration,
    /// Stage tasks that ran on the worker their stage has affinity for
    /// (with affinity off: on the worker it *would* have).
    pub on_stage_worker: usize,
    pub stage_tasks: usize,
    /// Order-independent checksum of all items (the same with and without
    /// affinity).
    pub checksum: u64,
}

struct Stages {
    /// Per stage: its model (relaxed loads and stores: a statistic whose
    /// exact value does not matter, and no read-modify-write to serialize).
    tables: Vec<Vec<AtomicU64>>,
    workers: usize,
    on_stage_worker: AtomicUsize,
    checksum: AtomicU64,
    done: AtomicUsize,
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 31;
    x = x.wrapping_mul(0x7fb5_d329_728e_a185);
    x ^ (x >> 27)
}

impl Stages {
    fn new(stages: usize, workers: usize) -> Self {
        let table = |seed: u64| {
            (0..TABLE as u64)
                .map(|i| AtomicU64::new(mix(i ^ seed)))
                .collect()
        };
        Stages {
            tables: (1..=stages as u64).map(table).collect(),
            workers,
            on_stage_worker: AtomicUsize::new(0),
            checksum: AtomicU64::new(0),
            done: AtomicUsize::new(0),
        }
    }

    fn worker_of(&self, stage: usize) -> usize {
        stage % self.workers
    }

    /// Stage `stage` on `item`: every byte updates the stage's model. The
    /// item's new bytes depend only on the item (so the checksum is the same
    /// however the stages were scheduled); the model is what stays hot.
    fn work(&self, stage: usize, item: &mut [u8; ITEM]) -> u64 {
        let model = &self.tables[stage];
        let mut acc = 0u64;
        for (i, byte) in item.iter_mut().enumerate() {
            let slot = &model[(usize::from(*byte) * 97 + i * 131) % TABLE];
            let seen = slot.load(Ordering::Relaxed);
            slot.store(seen.wrapping_add(u64::from(*byte) + 1), Ordering::Relaxed);
            let out = mix(u64::from(*byte) ^ ((i as u64) << 8) ^ ((stage as u64) << 24));
            *byte = out as u8;
            acc = acc.rotate_left(3) ^ out;
        }
        acc
    }
}

fn stage(
    pool: &Arc<Pool>,
    stages: &Arc<Stages>,
    s: usize,
    mut item: Box<[u8; ITEM]>,
    affinity: bool,
) {
    let (pool2, stages2) = (pool.clone(), stages.clone());
    let task = move || {
        if sixfold::current_worker() == Some(stages2.worker_of(s)) {
            stages2.on_stage_worker.fetch_add(1, Ordering::Relaxed);
        }
        let acc = stages2.work(s, &mut item);
        if s + 1 < stages2.tables.len() {
            stage(&pool2, &stages2, s + 1, item, affinity);
        } else {
            stages2.checksum.fetch_add(acc, Ordering::Relaxed);
            stages2.done.fetch_add(1, Ordering::Release);
        }
    };
    if affinity {
        pool.spawn_with_affinity(stages.worker_of(s), task)
            .expect("stage workers exist");
    } else {
        pool.spawn(task);
    }
}

/// Push `items` items through `stages` stages on `pool`; block until all
/// are through.
pub fn run_pipeline(
    pool: &Arc<Pool>,
    stages: usize,
    items: usize,
    affinity: bool,
) -> PipelineReport {
    let stage_count = stages;
    let stages = Arc::new(Stages::new(stage_count, pool.num_workers()));
    let start = Instant::now();
    for n in 0..items {
        let mut item = Box::new([0u8; ITEM]);
        for (i, b) in item.iter_mut().enumerate() {
            *b = mix((n * ITEM + i) as u64) as u8;
        }
        stage(pool, &stages, 0, item, affinity);
    }
    pool.wait_idle();
    let elapsed = start.elapsed();
    assert_eq!(stages.done.load(Ordering::Acquire), items);
    PipelineReport {
        items,
        elapsed,
        on_stage_worker: stages.on_stage_worker.load(Ordering::Relaxed),
        stage_tasks: stage_count * items,
        checksum: stages.checksum.load(Ordering::Relaxed),
    }
}
