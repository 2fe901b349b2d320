//! Mutation fuzzing of what flightdeck reads from outside: spec files, OpenNebula's
//! XML-RPC answers (and the XML documents inside them), and OpenStack's JSON error
//! bodies. Each target starts from its corpus in `crates/fuzz/corpus/<target>/` (kept in
//! the repository), then feeds it mutated inputs for a bounded number of runs or time. A
//! panic is a failure, reported with the input that made it.
//!
//! Stable Rust has no libFuzzer here, so the fuzzing is not coverage-guided: inputs come
//! from grammar-aware mutation (each target's own tokens) and splicing of corpus
//! entries. It is deterministic from its seed, so a failure replays.

pub mod mutate;
mod targets;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use targets::{TARGETS, Target, Verdict};

use mutate::{Rng, mutate};

/// How long one fuzzing run may go on.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Mutated inputs at most (the corpus entries themselves are always run).
    pub runs: u64,
    /// Wall-clock time at most, if given.
    pub time: Option<Duration>,
}

/// What a run saw.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub runs: u64,
    pub accepted: u64,
    pub rejected: u64,
    /// The slowest input and how long it took.
    pub slowest: Duration,
    pub slowest_len: usize,
}

/// An input that made the target panic.
#[derive(Clone, Debug)]
pub struct Crash {
    pub target: &'static str,
    pub input: Vec<u8>,
    pub message: String,
}

/// The corpus directory of `target` in this repository.
pub fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

/// Every file in `dir`, in name order.
pub fn load_corpus(dir: &Path) -> std::io::Result<Vec<Vec<u8>>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    paths.sort();
    paths.iter().map(std::fs::read).collect()
}

/// Runs `target` over `corpus`, then over mutated inputs until `budget` is spent.
pub fn fuzz(
    target: &Target,
    corpus: &[Vec<u8>],
    seed: u64,
    budget: Budget,
) -> Result<Stats, Crash> {
    let started = Instant::now();
    let mut rng = Rng::new(seed);
    let mut stats = Stats::default();
    let quiet = QuietPanics::install();
    let result = (|| {
        for input in corpus {
            run_one(target, input, &mut stats)?;
        }
        while stats.runs < budget.runs.saturating_add(corpus.len() as u64) {
            if budget.time.is_some_and(|t| started.elapsed() >= t) {
                break;
            }
            let mut input = match corpus.len() {
                0 => Vec::new(),
                n => corpus[rng.below(n)].clone(),
            };
            mutate(&mut input, &mut rng, target.tokens, corpus);
            run_one(target, &input, &mut stats)?;
        }
        Ok(())
    })();
    drop(quiet);
    result.map(|()| stats)
}

fn run_one(target: &Target, input: &[u8], stats: &mut Stats) -> Result<(), Crash> {
    let started = Instant::now();
    let verdict = std::panic::catch_unwind(|| (target.run)(input)).map_err(|panic| Crash {
        target: target.name,
        input: input.to_vec(),
        message: panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into()),
    })?;
    let took = started.elapsed();
    if took > stats.slowest {
        stats.slowest = took;
        stats.slowest_len = input.len();
    }
    stats.runs += 1;
    match verdict {
        Verdict::Accepted => stats.accepted += 1,
        Verdict::Rejected => stats.rejected += 1,
    }
    Ok(())
}

/// While fuzzing, panics are caught and reported with their input; the default hook's
/// message for each would only be noise. The previous hook comes back on drop.
struct QuietPanics;

impl QuietPanics {
    fn install() -> Self {
        std::panic::set_hook(Box::new(|_| {}));
        QuietPanics
    }
}

impl Drop for QuietPanics {
    fn drop(&mut self) {
        let _ = std::panic::take_hook();
    }
}
