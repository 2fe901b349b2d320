//! `flightdeck store check|backup|restore`: the state store's health and its recovery
//! path, run while no daemon serves the state directory (the store takes a lock).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use flightdeck_store::{BACKUPS_KEPT, STORE_FILE, Store, backup_path};

#[derive(Subcommand)]
pub enum StoreCommand {
    /// Open the store (redb's integrity check) and read every record and event; exit 0
    /// when all of it reads, 1 when something does not.
    Check(StoreArgs),
    /// Write a consistent copy as the newest of the rolling backups
    /// (`flightdeck.redb.backup-1`, older ones shift up to -3).
    Backup(StoreArgs),
    /// Put backup N (1 is the newest) in place of the store, keeping the damaged file as
    /// `flightdeck.redb.damaged`. Checks the backup first.
    Restore(RestoreArgs),
}

#[derive(Args)]
pub struct StoreArgs {
    /// The state directory (default: as `serve` picks it).
    #[arg(long)]
    state_dir: Option<PathBuf>,
}

#[derive(Args)]
pub struct RestoreArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Which backup: 1 (the newest) to 3.
    #[arg(long, default_value_t = 1)]
    from: usize,
}

fn dir_of(args: &StoreArgs) -> anyhow::Result<PathBuf> {
    args.state_dir
        .clone()
        .or_else(flightdeck_daemon::default_state_dir)
        .context("no state directory: give --state-dir")
}

/// Checks the store file at `path`, printing what it read.
fn check_file(path: &Path) -> anyhow::Result<bool> {
    let store = Store::open_file(path)?;
    let report = store.check()?;
    println!(
        "{}: {} record(s), {} event(s) read",
        path.display(),
        report.records,
        report.events
    );
    for problem in &report.unreadable {
        println!("  unreadable: {problem}");
    }
    Ok(report.ok())
}

pub fn run(command: StoreCommand) -> anyhow::Result<ExitCode> {
    match command {
        StoreCommand::Check(args) => {
            let dir = dir_of(&args)?;
            let path = dir.join(STORE_FILE);
            if !path.exists() {
                bail!(
                    "{} does not exist: there is no store to check",
                    path.display()
                );
            }
            let ok = check_file(&path)?;
            println!("{}", if ok { "store ok" } else { "store damaged" });
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        StoreCommand::Backup(args) => {
            let dir = dir_of(&args)?;
            let store = Store::open(&dir)?;
            let path = store.rolling_backup(&dir)?;
            println!("backup written to {}", path.display());
            Ok(ExitCode::SUCCESS)
        }
        StoreCommand::Restore(args) => {
            if args.from == 0 || args.from > BACKUPS_KEPT {
                bail!("--from must be 1 to {BACKUPS_KEPT}, got {}", args.from);
            }
            let dir = dir_of(&args.store)?;
            let backup = backup_path(&dir, args.from);
            if !backup.exists() {
                bail!("{} does not exist", backup.display());
            }
            if !check_file(&backup)? {
                bail!(
                    "backup {} is damaged too; try another --from",
                    backup.display()
                );
            }
            let path = dir.join(STORE_FILE);
            if path.exists() {
                let damaged = dir.join(format!("{STORE_FILE}.damaged"));
                std::fs::rename(&path, &damaged)
                    .with_context(|| format!("cannot move {} aside", path.display()))?;
                println!("the store was kept as {}", damaged.display());
            }
            std::fs::copy(&backup, &path)
                .with_context(|| format!("cannot copy {} into place", backup.display()))?;
            println!("restored {} from {}", path.display(), backup.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}
