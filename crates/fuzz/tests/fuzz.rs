//! Each fuzz target runs from its corpus for a bounded number of inputs: no panic, and
//! the inputs reach both sides of the parser (some accepted, most rejected), so the
//! mutations are felt. CI runs the same targets for a bounded time as well.

use flightdeck_fuzz::{Budget, TARGETS, Verdict, corpus_dir, fuzz, load_corpus};

#[test]
fn every_target_survives_its_corpus_and_thousands_of_mutations() {
    for target in &TARGETS {
        let corpus = load_corpus(&corpus_dir(target.name)).expect("corpus");
        assert!(
            corpus.len() >= 3,
            "{}: a corpus of {}",
            target.name,
            corpus.len()
        );
        let budget = Budget {
            runs: 3000,
            time: None,
        };
        let stats = match fuzz(target, &corpus, 42, budget) {
            Ok(s) => s,
            Err(c) => panic!(
                "{}: {} on input {:?}",
                c.target,
                c.message,
                String::from_utf8_lossy(&c.input)
            ),
        };
        assert_eq!(stats.runs, 3000 + corpus.len() as u64);
        assert!(stats.accepted > 0, "{}: nothing accepted", target.name);
        assert!(stats.rejected > 0, "{}: nothing rejected", target.name);
    }
}

#[test]
fn every_corpus_entry_but_the_broken_ones_is_accepted() {
    for target in &TARGETS {
        let dir = corpus_dir(target.name);
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .expect("corpus")
            .map(|e| e.expect("entry").path())
            .collect();
        paths.sort();
        for path in paths {
            let input = std::fs::read(&path).expect("read");
            let broken = path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("broken-"));
            let want = if broken {
                Verdict::Rejected
            } else {
                Verdict::Accepted
            };
            assert_eq!((target.run)(&input), want, "{}", path.display());
        }
    }
}

#[test]
fn a_panicking_target_is_reported_with_its_input() {
    fn panics_on_x(input: &[u8]) -> Verdict {
        assert!(!input.contains(&b'x'), "found an x");
        Verdict::Rejected
    }
    let target = flightdeck_fuzz::Target {
        name: "test",
        run: panics_on_x,
        tokens: &[b"x"],
    };
    let crash = fuzz(
        &target,
        &[b"abc".to_vec()],
        1,
        Budget {
            runs: 1000,
            time: None,
        },
    )
    .expect_err("found");
    assert!(crash.message.contains("found an x"), "{}", crash.message);
    assert!(crash.input.contains(&b'x'));
}
