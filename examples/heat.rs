//! 2-D heat diffusion on a 512 x 512 grid, 400 steps, each step one
//! parallel loop: first with the default (auto) partitioner, then with an
//! affinity partitioner kept across the steps, so that each piece of the
//! grid goes back to the worker whose cache already holds it. Prints the
//! time per step of each, and the share of pieces that ran on the worker
//! of the step before; writes the final field to `heat.png` (or the path
//! given as the first argument).
//!
//! ```sh
//! cargo run --release --example heat [-- out.png]
//! ```

use sixfold::{AffinityPartitioner, Pool};
use std::time::{Duration, Instant};

const N: usize = 512;
const STEPS: usize = 400;
/// Diffusion number: stable for an explicit step while <= 0.25.
const ALPHA: f32 = 0.24;

/// The starting field: cold, with three hot discs.
fn initial() -> Vec<f32> {
    let mut field = vec![0.0f32; N * N];
    let discs = [
        (128.0, 160.0, 40.0),
        (330.0, 300.0, 70.0),
        (420.0, 90.0, 25.0),
    ];
    for (i, cell) in field.iter_mut().enumerate() {
        let (r, c) = ((i / N) as f32, (i % N) as f32);
        if discs
            .iter()
            .any(|&(y, x, radius)| (r - y).powi(2) + (c - x).powi(2) < radius * radius)
        {
            *cell = 1.0;
        }
    }
    field
}

/// One step for the cells `out` of the next field, which start at flat
/// index `offset`: each cell moves towards the mean of its four
/// neighbours. The border stays as it is (cold).
fn step_cells(cur: &[f32], out: &mut [f32], offset: usize) {
    for (j, cell) in out.iter_mut().enumerate() {
        let i = offset + j;
        let (r, c) = (i / N, i % N);
        *cell = if r == 0 || c == 0 || r == N - 1 || c == N - 1 {
            cur[i]
        } else {
            let around = cur[i - 1] + cur[i + 1] + cur[i - N] + cur[i + N];
            cur[i] + ALPHA * (around - 4.0 * cur[i])
        };
    }
}

/// Run `STEPS` steps, each one loop over the field cut into pieces by
/// `step`; the time per step.
fn simulate(pool: &Pool, mut step: impl FnMut(&mut [f32], &[f32]) + Send) -> (Vec<f32>, Duration) {
    let (mut cur, mut next) = (initial(), initial());
    let start = Instant::now();
    pool.install(|| {
        for _ in 0..STEPS {
            step(&mut next, &cur);
            std::mem::swap(&mut cur, &mut next);
        }
    });
    (cur, start.elapsed() / STEPS as u32)
}

/// Cold to hot: black, blue, red, yellow, white.
fn color(t: f32) -> [u8; 3] {
    let t = t.clamp(0.0, 1.0).sqrt();
    let ramp = [
        [0.0, 0.0, 0.0],
        [0.1, 0.1, 0.6],
        [0.8, 0.1, 0.1],
        [1.0, 0.8, 0.1],
        [1.0, 1.0, 1.0],
    ];
    let x = t * (ramp.len() - 1) as f32;
    let k = (x as usize).min(ramp.len() - 2);
    let f = x - k as f32;
    let mix = |ch: usize| ((ramp[k][ch] * (1.0 - f) + ramp[k + 1][ch] * f) * 255.0) as u8;
    [mix(0), mix(1), mix(2)]
}

fn write_png(path: &str, field: &[f32]) -> Result<(), Box<dyn std::error::Error>> {
    let max = field.iter().copied().fold(f32::MIN_POSITIVE, f32::max);
    let pixels: Vec<u8> = field.iter().flat_map(|&t| color(t / max)).collect();
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut encoder = png::Encoder::new(file, N as u32, N as u32);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.write_header()?.write_image_data(&pixels)?;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args().nth(1).unwrap_or_else(|| "heat.png".into());
    let pool = Pool::new()?;
    println!(
        "{N} x {N} grid, {STEPS} steps, {} workers",
        pool.num_workers()
    );

    let (auto_field, auto_step) = simulate(&pool, |next, cur| {
        sixfold::for_chunks_mut(next, |out, offset| step_cells(cur, out, offset))
    });

    let mut affinity = AffinityPartitioner::new();
    // The share of each step after the first (which makes the plan).
    let mut kept = 0.0;
    let mut steps = 0;
    let (field, affinity_step) = simulate(&pool, |next, cur| {
        sixfold::for_chunks_mut_with(next, &mut affinity, |out, offset| {
            step_cells(cur, out, offset)
        });
        if steps > 0 {
            kept += affinity.kept_share();
        }
        steps += 1;
    });
    // Same arithmetic cell by cell, whatever the pieces: the same field.
    assert_eq!(auto_field, field);

    println!(
        "auto partitioner:     {:>8.1} us a step",
        auto_step.as_secs_f64() * 1e6
    );
    println!(
        "affinity partitioner: {:>8.1} us a step, {:.1}% of its {} pieces on the worker of the step before",
        affinity_step.as_secs_f64() * 1e6,
        100.0 * kept / (steps - 1) as f64,
        affinity.pieces()
    );
    write_png(&out, &field)?;
    println!("final field written to {out}");
    Ok(())
}
