//! Which replica holds which cluster: computed alike by every replica from the same
//! live replicas and clusters (see `replica.rs`).

use std::collections::BTreeMap;

/// FNV-1a, 64 bits: a hash every replica computes alike.
fn fnv(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The replica each cluster belongs to, among `replicas` (see the module's doc).
pub fn assign(clusters: &[String], replicas: &[String]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if replicas.is_empty() {
        return out;
    }
    let share = clusters.len().div_ceil(replicas.len());
    let mut load: BTreeMap<&str, usize> = BTreeMap::new();
    let mut order: Vec<&String> = clusters.iter().collect();
    order.sort_by_key(|c| (fnv(&[c.as_str()]), c.as_str()));
    order.dedup();
    for c in order {
        let mut ranked: Vec<&String> = replicas.iter().collect();
        ranked.sort_by_key(|r| {
            (
                std::cmp::Reverse(fnv(&[c.as_str(), r.as_str()])),
                r.as_str(),
            )
        });
        if let Some(r) = ranked
            .into_iter()
            .find(|r| load.get(r.as_str()).copied().unwrap_or(0) < share)
        {
            *load.entry(r.as_str()).or_default() += 1;
            out.insert(c.clone(), r.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(prefix: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}{i}")).collect()
    }

    fn loads(a: &BTreeMap<String, String>) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for r in a.values() {
            *out.entry(r.clone()).or_default() += 1;
        }
        out
    }

    #[test]
    fn every_cluster_goes_to_one_replica_and_none_holds_more_than_its_share() {
        for (clusters, replicas) in [(30, 3), (31, 3), (1000, 7), (5, 8), (1, 1)] {
            let cs = names("cluster-", clusters);
            let rs = names("replica-", replicas);
            let a = assign(&cs, &rs);
            assert_eq!(a.len(), clusters, "{clusters} over {replicas}");
            let share = clusters.div_ceil(replicas);
            for (r, n) in loads(&a) {
                assert!(n <= share, "{r} holds {n} of {clusters}, share {share}");
            }
        }
        assert!(assign(&names("c", 3), &[]).is_empty());
    }

    #[test]
    fn a_replica_that_joins_or_leaves_moves_few_clusters() {
        let cs = names("cluster-", 300);
        let three = names("replica-", 3);
        let four = names("replica-", 4);
        let before = assign(&cs, &three);
        let after = assign(&cs, &four);
        let moved = cs.iter().filter(|c| before[*c] != after[*c]).count();
        // The newcomer's share (75) must move; a little more may, never most.
        assert!((75..=120).contains(&moved), "{moved} of 300 moved");
        let left = assign(&cs, &names("replica-", 2));
        let moved = cs.iter().filter(|c| before[*c] != left[*c]).count();
        assert!((100..=160).contains(&moved), "{moved} of 300 moved");
    }

    #[test]
    fn every_replica_computes_the_same_assignment_whatever_the_order() {
        let cs = names("cluster-", 50);
        let mut rs = names("replica-", 3);
        let a = assign(&cs, &rs);
        rs.reverse();
        let mut cs2 = cs.clone();
        cs2.reverse();
        assert_eq!(a, assign(&cs2, &rs));
    }
}
