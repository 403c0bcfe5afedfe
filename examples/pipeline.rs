//! A streaming text pipeline on `sixfold::Pipeline`: read a text in chunks,
//! analyse the chunks in parallel, write the results in order, with a
//! bounded number of chunks in flight.
//!
//! ```text
//!  read (serial, in order) -> analyse (parallel) -> tally (serial, in order,
//!  chunk of lines            words, letters,         pinned to worker 0)
//!                            a checksum
//! ```
//!
//! The reader owns its file handle and the tally its running totals, both
//! without a lock (`FnMut`); the analysis borrows a stop-word table from
//! `main`'s frame. Prints throughput, how many chunks each worker analysed
//! and where the pinned tally ran.
//!
//! Run: `cargo run --release --example pipeline [FILE]` (without a file it
//! generates 64 MiB of text).

use sixfold::{Pinning, Pipeline, Pool};
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::sync::Mutex;
use std::time::Instant;

/// Lines per chunk: a chunk is the unit that flows through the pipeline.
const LINES_PER_CHUNK: usize = 1_000;

/// What the parallel stage finds in one chunk.
struct Analysis {
    index: u64,
    lines: usize,
    words: usize,
    content_words: usize,
    letters: usize,
    checksum: u64,
    analysed_on: Option<usize>,
}

fn analyse(index: u64, text: &str, stop_words: &HashSet<&str>) -> Analysis {
    let mut analysis = Analysis {
        index,
        lines: text.lines().count(),
        words: 0,
        content_words: 0,
        letters: 0,
        checksum: 0,
        analysed_on: sixfold::current_worker(),
    };
    for word in text.split_whitespace() {
        analysis.words += 1;
        let lower = word.to_ascii_lowercase();
        if !stop_words.contains(lower.trim_matches(|c: char| !c.is_alphanumeric())) {
            analysis.content_words += 1;
        }
        for byte in lower.bytes().filter(u8::is_ascii_alphabetic) {
            analysis.letters += 1;
            analysis.checksum = analysis.checksum.rotate_left(5) ^ u64::from(byte);
        }
    }
    analysis
}

/// A deterministic text of about `bytes` bytes (no file needed).
fn generated_text(bytes: usize) -> impl Read {
    const WORDS: [&str; 16] = [
        "the", "pipeline", "moves", "a", "chunk", "of", "text", "through", "its", "stages", "and",
        "every", "worker", "keeps", "its", "cache",
    ];
    let mut text = String::with_capacity(bytes + 100);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    while text.len() < bytes {
        for _ in 0..12 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            text.push_str(WORDS[(x % 16) as usize]);
            text.push(' ');
        }
        text.push('\n');
    }
    std::io::Cursor::new(text.into_bytes())
}

fn main() {
    let path = std::env::args().nth(1);
    let input: Box<dyn Read + Send> = match &path {
        Some(path) => Box::new(std::fs::File::open(path).expect("the input file")),
        None => Box::new(generated_text(64 << 20)),
    };
    let pool = Pool::builder()
        .pinning(Pinning::Cores)
        .build()
        .expect("a pool");
    let workers = pool.num_workers();
    let stop_words: HashSet<&str> = ["the", "a", "of", "and", "its", "to", "in", "is"]
        .into_iter()
        .collect();

    // The reader: serial, so it owns the file without a lock.
    let mut reader = BufReader::with_capacity(1 << 20, input);
    let mut index = 0u64;
    let mut bytes_read = 0usize;
    // The tally: serial and in order, pinned to worker 0.
    let (mut lines, mut words, mut content, mut letters, mut checksum) = (0, 0, 0, 0, 0u64);
    let mut tally_workers = vec![0usize; workers];
    let analysed_by = Mutex::new(vec![0usize; workers]);
    let mut last_index = None;

    let mut pipeline = Pipeline::new(|| {
        let mut chunk = String::new();
        for _ in 0..LINES_PER_CHUNK {
            match reader.read_line(&mut chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => panic!("reading the input: {e}"),
            }
        }
        if chunk.is_empty() {
            return None;
        }
        bytes_read += chunk.len();
        index += 1;
        Some((index - 1, chunk))
    })
    .name("read")
    .parallel(|(index, chunk): (u64, String)| analyse(index, &chunk, &stop_words))
    .name("analyse")
    .serial_in_order(|a: Analysis| {
        // In order: every chunk right after the one before it.
        assert_eq!(last_index.map_or(0, |i| i + 1), a.index, "out of order");
        last_index = Some(a.index);
        lines += a.lines;
        words += a.words;
        content += a.content_words;
        letters += a.letters;
        checksum = checksum.rotate_left(7) ^ a.checksum;
        if let Some(w) = sixfold::current_worker() {
            tally_workers[w] += 1;
        }
        if let Some(w) = a.analysed_on {
            analysed_by.lock().unwrap()[w] += 1;
        }
    })
    .name("tally")
    .pin(0);
    println!("{pipeline:?}\n");

    let tokens = 4 * workers;
    let start = Instant::now();
    pool.run_pipeline(&mut pipeline, tokens)
        .expect("the pipeline runs");
    let elapsed = start.elapsed();
    drop(pipeline);

    let mib = bytes_read as f64 / (1 << 20) as f64;
    println!(
        "{} from {}: {} chunks of {} lines, {} tokens on {} workers",
        format_args!("{mib:.1} MiB"),
        path.as_deref().unwrap_or("generated text"),
        index,
        LINES_PER_CHUNK,
        tokens,
        workers
    );
    println!(
        "{lines} lines, {words} words ({content} not stop words), {letters} letters, checksum {checksum:016x}"
    );
    println!(
        "{:.1} ms: {:.0} MiB/s",
        elapsed.as_secs_f64() * 1e3,
        mib / elapsed.as_secs_f64()
    );
    println!(
        "chunks analysed per worker: {:?}",
        analysed_by.lock().unwrap()
    );
    let on_pin = tally_workers[0] as f64 / index.max(1) as f64;
    println!(
        "tally runs per worker: {tally_workers:?} ({:.1}% on its pinned worker 0)",
        100.0 * on_pin
    );
    println!(
        "\nThe tally reaches worker 0 through its mailbox (rule 4). While worker 0 is\n\
         busy analysing a chunk for longer than about a millisecond, another worker\n\
         takes a waiting tally item instead (the proxy's fallback), so nothing waits\n\
         behind a long chunk; on a free worker 0 nearly every tally runs there."
    );
    println!("\n{}", pool.stats());
}
