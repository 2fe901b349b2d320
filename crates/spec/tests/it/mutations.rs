//! Mutated specs: every shipped example, with each value replaced by each of a set of
//! wrong ones, and with its clusters repeated. Whatever is rejected, by the parser or by
//! a rule checked after parsing (cross-field, cross-cluster), names its line.

use std::path::Path;

use flightdeck_spec::load_documents;

/// Values that are wrong for most fields.
const WRONG: [&str; 12] = [
    "0",
    "-1",
    "''",
    "x",
    "99999999999999999999",
    "1.5",
    "[]",
    "{}",
    "10.0.0.0/33",
    "10.0.0.0/30",
    "1s",
    "!custom 3",
];

fn examples() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("examples")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read");
            (p.display().to_string(), text)
        })
        .collect();
    out.sort();
    out
}

/// Each `key: value` line's value replaced by each wrong value.
fn mutations(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some((key, value)) = line.split_once(": ") else {
            continue;
        };
        if value.trim().is_empty() || key.trim_start().starts_with('#') {
            continue;
        }
        for wrong in WRONG {
            let mut changed = lines.clone();
            let replaced = format!("{key}: {wrong}");
            changed[i] = &replaced;
            out.push(changed.join("\n") + "\n");
        }
    }
    out
}

#[test]
fn every_rejected_mutation_of_the_examples_names_its_line() {
    let (mut rejected, mut tried) = (0, 0);
    let mut without_line = Vec::new();
    for (name, text) in examples() {
        let doubled = format!("{text}\n---\n{text}");
        for spec in mutations(&text).into_iter().chain([doubled]) {
            tried += 1;
            if let Err(e) = load_documents(&spec, &name) {
                rejected += 1;
                // Every error of the file, not only the first.
                for e in e.all().filter(|e| e.line.is_none()) {
                    without_line.push(format!("{e}"));
                }
            }
        }
    }
    assert!(rejected > 300, "{rejected} of {tried} rejected");
    assert!(
        without_line.is_empty(),
        "{} of {rejected} rejected specs name no line:\n{}",
        without_line.len(),
        without_line.join("\n")
    );
}

#[test]
fn a_number_too_large_for_any_field_says_so_with_its_line() {
    let (_, text) = examples()
        .into_iter()
        .find(|(n, _)| n.ends_with("openstack.yaml"))
        .expect("example");
    let text = text.replacen("replicas: 3", "replicas: 99999999999999999999", 1);
    let e = load_documents(&text, "big.yaml").expect_err("too large");
    assert_eq!(e.path, "spec.controlPlane.replicas");
    assert!(e.line.is_some());
    assert!(
        e.message.contains("99999999999999999999 is too large"),
        "{}",
        e.message
    );
}
