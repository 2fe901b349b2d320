//! A damaged state file never panics flightdeck: random corruptions of a real store
//! (bytes flipped, runs zeroed, the file cut short or emptied) each end in a clear error
//! that names the file, or in a read that is correct. And the rolling backup restores.

use std::path::Path;

use flightdeck_store::{STORE_FILE, Store, StoreError, Write, backup_path};

/// The records and events a small store holds.
fn fill(store: &Store) {
    for i in 0..40 {
        let key = format!("cluster-{i:02}");
        let value = serde_json::json!({"name": key, "uid": format!("{i:016x}"), "machines": (0..i).collect::<Vec<_>>()});
        store
            .commit(vec![
                Write::put("clusters", &key, &value),
                Write::event(&key, &serde_json::json!({"reason": "Created", "n": i})),
            ])
            .expect("commit");
    }
}

/// Reads all of it as the daemon would, answering whether it is intact.
fn read_all(store: &Store) -> Result<bool, StoreError> {
    let keys = store.keys("clusters")?;
    let mut intact = keys.len() == 40;
    for key in &keys {
        let v: Option<serde_json::Value> = store.get("clusters", key)?;
        intact &= v.is_some_and(|v| v["name"] == key.as_str());
        let events: Vec<serde_json::Value> = store.events(key)?;
        intact &= events.len() == 1;
    }
    Ok(intact)
}

/// A deterministic xorshift, so a failing corruption can be replayed from its number.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn corrupt(bytes: &mut Vec<u8>, rng: &mut Rng) -> String {
    let len = bytes.len() as u64;
    match rng.below(5) {
        0 => {
            let n = 1 + rng.below(16);
            for _ in 0..n {
                let at = rng.below(len) as usize;
                bytes[at] ^= 1 << rng.below(8);
            }
            format!("{n} bit(s) flipped")
        }
        1 => {
            let at = rng.below(len) as usize;
            let run = (1 + rng.below(4096) as usize).min(bytes.len() - at);
            bytes[at..at + run].fill(0);
            format!("{run} bytes zeroed at {at}")
        }
        2 => {
            let at = rng.below(len) as usize;
            let run = (1 + rng.below(512) as usize).min(bytes.len() - at);
            for b in &mut bytes[at..at + run] {
                *b = rng.next() as u8;
            }
            format!("{run} random bytes at {at}")
        }
        3 => {
            let to = rng.below(len) as usize;
            bytes.truncate(to);
            format!("cut to {to} bytes")
        }
        _ => {
            // The header, where redb keeps its roots.
            let at = rng.below(len.min(4096)) as usize;
            bytes[at] = bytes[at].wrapping_add(1 + rng.below(255) as u8);
            format!("header byte {at} changed")
        }
    }
}

#[test]
fn two_hundred_random_corruptions_end_in_a_clear_error_or_a_correct_read() {
    let dir = tempfile::tempdir().expect("dir");
    let clean = dir.path().join("clean");
    {
        let store = Store::open(&clean).expect("open");
        fill(&store);
    }
    let image = std::fs::read(clean.join(STORE_FILE)).expect("image");
    let mut rng = Rng(0x5eed_f11e_d0c0_ffee);
    let (mut errors, mut intact) = (0, 0);
    for n in 0..240 {
        let mut bytes = image.clone();
        let what = corrupt(&mut bytes, &mut rng);
        let case = dir.path().join(format!("case-{n}"));
        std::fs::create_dir_all(&case).expect("dir");
        std::fs::write(case.join(STORE_FILE), &bytes).expect("write");
        let outcome = Store::open(&case).and_then(|s| {
            let ok = read_all(&s)?;
            s.check()?;
            Ok(ok)
        });
        match outcome {
            Ok(true) => intact += 1,
            Ok(false) => {
                // Read without error but not what was written: only acceptable when
                // nothing claims to be there (a file cut to nothing starts empty).
                let s = Store::open(&case).expect("reopens");
                assert!(
                    s.keys("clusters").expect("keys").is_empty(),
                    "corruption {n} ({what}) read back wrong data without an error"
                );
                intact += 1;
            }
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.contains(&case.join(STORE_FILE).display().to_string()),
                    "corruption {n} ({what}): the error names the file: {text}"
                );
                errors += 1;
            }
        }
        let _ = std::fs::remove_dir_all(&case);
    }
    eprintln!("{errors} errors, {intact} intact");
    assert_eq!(errors + intact, 240);
    assert!(
        errors > 50,
        "most corruptions are caught: {errors} errors, {intact} intact"
    );
}

#[test]
fn an_empty_or_foreign_file_is_an_error_naming_it_not_a_fresh_store() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join(STORE_FILE);
    std::fs::write(&path, b"this is not a redb file at all, but it is long enough to have a header ......................................................................................................").expect("write");
    let e = Store::open(dir.path()).expect_err("not a store");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
}

#[test]
fn the_rolling_backup_keeps_the_newest_copies_and_restores() {
    let dir = tempfile::tempdir().expect("dir");
    let store = Store::open(dir.path()).expect("open");
    fill(&store);
    for _ in 0..5 {
        store.rolling_backup(dir.path()).expect("backup");
    }
    let kept: Vec<bool> = (1..=5)
        .map(|n| backup_path(dir.path(), n).exists())
        .collect();
    assert_eq!(kept, [true, true, true, false, false]);
    drop(store);
    // Damage the store; the newest backup is whole.
    std::fs::write(dir.path().join(STORE_FILE), b"").expect("truncate");
    let restored = Store::open_file(&backup_path(dir.path(), 1)).expect("backup opens");
    assert!(read_all(&restored).expect("reads"));
    assert!(restored.check().expect("check").ok());
    let _ = Path::new("");
}
