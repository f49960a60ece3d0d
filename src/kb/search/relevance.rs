//! The `score` of a retrieved passage without a reranker: a relevance in [0, 1] that
//! means the same across queries, so that a passage about something else scores low
//! whatever else the knowledge base holds. It is a logistic function of the passage's
//! cosine with the query (the embedder's) and its keyword evidence (`1 / (1 + rank)` in
//! the query's BM25 list, 0 when it is not there):
//!
//! `relevance = 1 / (1 + exp(-(COSINE * cosine + KEYWORD * keyword + BIAS)))`
//!
//! The weights were fitted by `scripts/calibrate_scores.sh` (examples/score_calibration.rs)
//! on a retrieval set from public data: Debian's English package descriptions (bookworm
//! main, 4,000 passages, 800 queries, each package's synopsis the query for its own long
//! description; set fingerprint b2a53bf789fb7cb9). Each query's candidates are the
//! server's own (its 20 nearest passages and 20 best BM25 matches from ragd's tantivy
//! index), with 10 random passages, and each query is asked again of the passages
//! without its answer; the even queries fit the weights (relevant and irrelevant
//! weighted equally, so 0.5 is where both are as likely), the odd ones are held out.
//! Ordering the candidates by it ranks better than reciprocal rank fusion did (the
//! figures are in docs/retrieval-scores.md).

/// Weight of the cosine.
pub const COSINE: f32 = 15.6353;
/// Weight of the keyword evidence.
pub const KEYWORD: f32 = 4.5695;
/// Bias.
pub const BIAS: f32 = -8.6697;

/// Keyword evidence of a passage at `rank` (from 0) of the BM25 list, 0 when absent.
pub fn keyword(rank: Option<usize>) -> f32 {
    rank.map_or(0.0, |r| 1.0 / (1.0 + r as f32))
}

/// The calibrated relevance (see the module docs).
pub fn relevance(cosine: f32, keyword: f32) -> f32 {
    1.0 / (1.0 + (-(COSINE * cosine + KEYWORD * keyword + BIAS)).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relevance_grows_with_either_evidence_and_stays_in_range() {
        assert!(relevance(0.9, 0.0) > 0.9);
        assert!(relevance(0.1, 0.0) < 0.01);
        assert!(relevance(0.4, 1.0) > relevance(0.4, 0.5));
        assert!(relevance(0.5, 0.0) > relevance(0.4, 0.0));
        for c in [-1.0, 0.0, 1.0] {
            for k in [0.0, 0.5, 1.0] {
                assert!((0.0..=1.0).contains(&relevance(c, k)));
            }
        }
        assert_eq!(keyword(None), 0.0);
        assert_eq!(keyword(Some(0)), 1.0);
        assert_eq!(keyword(Some(3)), 0.25);
    }
}
