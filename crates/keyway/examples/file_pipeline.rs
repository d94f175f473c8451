//! An order-preserving file pipeline: read lines, transform them in parallel on a keyway
//! [`Pool`], and write the results in input order, with an [`OrderedMap`].
//!
//! The sink writes each line as its turn comes, on whichever worker finishes the turn before it:
//! no consumer thread, no reordering buffer of our own. [`OrderedMap::finish`] hands the sink
//! back once every line is written; dropping it flushes the file. The program then reads the
//! output back and exits non-zero if any line is missing or out of order.
//!
//! Run with `cargo run -p keyway --example file_pipeline`.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::num::NonZeroUsize;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use keyway::{OrderedMap, Pool};

const LINES: usize = 20_000;

/// The work: uneven on purpose, so later lines often finish before earlier ones.
fn transform(line: String) -> String {
    let n: u64 = line
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let mut x = n;
    for _ in 0..(n % 64) * 200 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
    }
    format!("{} -> {:016x}", line.to_uppercase(), x)
}

fn main() -> Result<ExitCode, Box<dyn std::error::Error + Send + Sync>> {
    let dir = std::env::temp_dir().join(format!("keyway-file-pipeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (input, output) = (dir.join("input.txt"), dir.join("output.txt"));
    let mut w = BufWriter::new(File::create(&input)?);
    for i in 0..LINES {
        writeln!(w, "line {i}")?;
    }
    w.into_inner().map_err(|e| e.into_error())?;

    let pool = Pool::new()?;
    let write_errors = Arc::new(AtomicUsize::new(0));
    let mut out = BufWriter::new(File::create(&output)?);
    let errors = Arc::clone(&write_errors);
    let map = OrderedMap::new(1024, transform, move |line: String| {
        if writeln!(out, "{line}").is_err() {
            errors.fetch_add(1, Ordering::Relaxed);
        }
    })?
    // At most 4,096 lines read ahead of the writer.
    .with_max_in_flight(NonZeroUsize::new(4096).expect("not zero"));

    let mut refused = 0;
    for line in BufReader::new(File::open(&input)?).lines() {
        map.submit(line?, |task| {
            if pool.execute(task).is_err() {
                refused += 1; // the task is dropped: its line is skipped
            }
        });
    }
    let sequencer = map.sequencer().clone(); // to count panicked items after `finish`
    drop(map.finish()); // every line written; dropping the sink flushes the file
    pool.shutdown();
    let panics = sequencer.panicked();

    let mut bad = write_errors.load(Ordering::Relaxed) + refused + panics as usize;
    let written: Vec<String> = BufReader::new(File::open(&output)?)
        .lines()
        .collect::<Result<_, _>>()?;
    if written.len() != LINES {
        eprintln!("expected {LINES} lines, found {}", written.len());
        bad += 1;
    }
    for (i, line) in written.iter().enumerate() {
        if !line.starts_with(&format!("LINE {i} -> ")) {
            eprintln!("line {i} out of order: {line:?}");
            bad += 1;
            break;
        }
    }
    std::fs::remove_dir_all(&dir)?;
    if bad == 0 {
        println!("{LINES} lines transformed in parallel and written in order");
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::FAILURE)
    }
}
