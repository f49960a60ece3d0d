//! Reciprocal rank fusion of ranked candidate lists (dense and BM25).

use std::collections::HashMap;

/// The RRF constant: how strongly top ranks dominate (60, as in Cormack et al.).
pub const RRF_K: f64 = 60.0;

/// Fuses ranked lists of keys (best first) into one ranking with scores
/// `sum(1 / (RRF_K + rank))` over the lists a key appears in, scaled so that a key
/// ranked first in every list scores 1.0. Ties keep the order of first appearance.
pub fn reciprocal_rank(lists: &[&[u64]]) -> Vec<(u64, f32)> {
    let mut score: HashMap<u64, f64> = HashMap::new();
    let mut order: Vec<u64> = Vec::new();
    for list in lists {
        for (rank, key) in list.iter().enumerate() {
            let s = score.entry(*key).or_insert_with(|| {
                order.push(*key);
                0.0
            });
            *s += 1.0 / (RRF_K + rank as f64 + 1.0);
        }
    }
    let best = lists.iter().filter(|l| !l.is_empty()).count() as f64 / (RRF_K + 1.0);
    let mut out: Vec<(u64, f32)> = order
        .into_iter()
        .map(|k| (k, (score[&k] / best.max(f64::MIN_POSITIVE)) as f32))
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_wins_and_scores_are_scaled() {
        let fused = reciprocal_rank(&[&[1, 2, 3], &[1, 3, 4]]);
        assert_eq!(fused[0], (1, 1.0));
        assert_eq!(fused[1].0, 3, "in both lists beats 2 that is in one");
        assert!(fused.windows(2).all(|w| w[0].1 >= w[1].1));
        assert_eq!(fused.len(), 4);
        let single = reciprocal_rank(&[&[7, 8], &[]]);
        assert_eq!(single[0], (7, 1.0));
        assert!(reciprocal_rank(&[&[], &[]]).is_empty());
    }
}
