//! The mutations a fuzz input goes through: bits flipped, bytes and runs deleted,
//! duplicated or overwritten, tokens of the target's grammar inserted, and pieces of
//! another corpus entry spliced in. Deterministic from the seed.

use flightdeck_cloud::{Rng as _, SeededRng};

/// The fuzzer's only randomness: flightdeck's own seeded generator.
pub struct Rng(SeededRng);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(SeededRng::new(seed))
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }
}

/// The largest input a mutation may make.
pub const INPUT_MAX: usize = 64 * 1024;

/// Applies one to eight mutations to `input`.
pub fn mutate(input: &mut Vec<u8>, rng: &mut Rng, tokens: &[&[u8]], corpus: &[Vec<u8>]) {
    for _ in 0..1 + rng.below(8) {
        mutate_once(input, rng, tokens, corpus);
    }
    input.truncate(INPUT_MAX);
}

fn mutate_once(input: &mut Vec<u8>, rng: &mut Rng, tokens: &[&[u8]], corpus: &[Vec<u8>]) {
    let len = input.len();
    match rng.below(8) {
        0 if len > 0 => {
            let at = rng.below(len);
            input[at] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(64));
            input.drain(at..at + n);
        }
        2 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(256));
            let piece = input[at..at + n].to_vec();
            let to = rng.below(input.len() + 1);
            input.splice(
                to..to,
                piece.iter().copied().cycle().take(n * (1 + rng.below(4))),
            );
        }
        3 if !tokens.is_empty() => {
            let token = tokens[rng.below(tokens.len())];
            let to = rng.below(len + 1);
            input.splice(to..to, token.iter().copied());
        }
        4 if len > 0 => {
            let at = rng.below(len);
            input[at] = INTERESTING[rng.below(INTERESTING.len())];
        }
        5 if !corpus.is_empty() => {
            let other = &corpus[rng.below(corpus.len())];
            if !other.is_empty() {
                let from = rng.below(other.len());
                let n = 1 + rng.below((other.len() - from).min(512));
                let to = rng.below(len + 1);
                input.splice(to..to, other[from..from + n].iter().copied());
            }
        }
        6 if len > 0 => {
            let at = rng.below(len);
            let digits = b"99999999999999999999999999";
            let n = 1 + rng.below(digits.len());
            input.splice(at..at, digits[..n].iter().copied());
        }
        _ => {
            let cut = rng.below(len + 1);
            input.truncate(cut);
        }
    }
}

/// Bytes that often sit on a parser's edges.
const INTERESTING: [u8; 16] = [
    0, b'\n', b'\r', b'\t', b' ', b'"', b'\'', b'\\', b'<', b'>', b'&', b'{', b'[', b':', 0x7f,
    0xff,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_change_the_input_and_stay_within_bounds() {
        let mut rng = Rng::new(7);
        let seed = b"kind: Cluster\nspec: {}\n".to_vec();
        let mut changed = 0;
        for _ in 0..1000 {
            let mut input = seed.clone();
            mutate(
                &mut input,
                &mut rng,
                &[b"---\n"],
                std::slice::from_ref(&seed),
            );
            assert!(input.len() <= INPUT_MAX);
            changed += usize::from(input != seed);
        }
        assert!(changed > 900, "{changed} of 1000 inputs changed");
    }
}
