//! `flightdeck-fuzz [TARGET...] [--seconds N] [--runs N] [--seed S]`: fuzzes each target
//! (all of them by default) from its corpus for a bounded time. A crash writes its input
//! to `target/fuzz-crashes/<target>-<seed>.bin` and exits 1.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use flightdeck_fuzz::{Budget, TARGETS, corpus_dir, fuzz, load_corpus};

#[derive(Parser)]
#[command(about = "Fuzzes flightdeck's parsers of outside input from their corpora")]
struct Args {
    /// spec, xmlrpc, openstack-error; all of them if none is named.
    targets: Vec<String>,
    /// Wall-clock seconds per target.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Mutated inputs per target at most.
    #[arg(long, default_value_t = u64::MAX)]
    runs: u64,
    /// The first mutation's seed: a crash replays from it.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("flightdeck-fuzz: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> anyhow::Result<ExitCode> {
    for name in &args.targets {
        if !TARGETS.iter().any(|t| t.name == name) {
            let known: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
            bail!(
                "no fuzz target {name:?}; the targets are {}",
                known.join(", ")
            );
        }
    }
    let budget = Budget {
        runs: args.runs,
        time: Some(Duration::from_secs(args.seconds)),
    };
    for target in TARGETS
        .iter()
        .filter(|t| args.targets.is_empty() || args.targets.iter().any(|n| n == t.name))
    {
        let dir = corpus_dir(target.name);
        let corpus = load_corpus(&dir).with_context(|| format!("reading {}", dir.display()))?;
        eprintln!(
            "fuzz {}: {} corpus entries, {} s from seed {}",
            target.name,
            corpus.len(),
            args.seconds,
            args.seed
        );
        match fuzz(target, &corpus, args.seed, budget) {
            Ok(s) => println!(
                "fuzz {}: {} inputs, {} accepted, {} rejected, no crash; slowest {:.1} ms ({} bytes)",
                target.name,
                s.runs,
                s.accepted,
                s.rejected,
                s.slowest.as_secs_f64() * 1000.0,
                s.slowest_len
            ),
            Err(crash) => {
                let out = std::path::Path::new("target/fuzz-crashes");
                std::fs::create_dir_all(out)?;
                let file = out.join(format!("{}-{}.bin", crash.target, args.seed));
                std::fs::write(&file, &crash.input)?;
                eprintln!(
                    "fuzz {}: CRASH: {} (input of {} bytes written to {})",
                    crash.target,
                    crash.message,
                    crash.input.len(),
                    file.display()
                );
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
