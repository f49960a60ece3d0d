//! After the load: every acknowledged upload is listed and found by a search for its
//! unique marker, every acknowledged delete is neither, and the indexes agree with the
//! store.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt as _;
use serde_json::{json, Value};

use crate::mix::Fate;

/// What the check found.
#[derive(Debug, Default)]
pub struct Verdict {
    pub stored: usize,
    pub deleted: usize,
    /// Acknowledged uploads missing from the sources or from search.
    pub lost: Vec<String>,
    /// Acknowledged deletes still listed or found.
    pub resurrected: Vec<String>,
    /// `/health/ready` said the indexes and the store agree.
    pub indexes_agree: bool,
}

/// Checks `acknowledged` (source -> (marker, fate)) against the server at `base`.
pub async fn check(
    base: &str,
    acknowledged: &BTreeMap<String, (String, Fate)>,
) -> anyhow::Result<Verdict> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()?;
    let sources: Value = http
        .get(format!("{base}/api/v1/documents/sources"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let listed: HashSet<&str> = sources["sources"]
        .as_array()
        .context("sources")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let ready: Value = http
        .get(format!("{base}/api/v1/health/ready"))
        .send()
        .await?
        .json()
        .await?;
    let indexes_agree = ready["components"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["name"] == "vector_store" && c["healthy"] == true);

    // Each marker is one token in one source: BM25 ranks its chunks first.
    let found: Vec<(String, anyhow::Result<bool>)> = futures::stream::iter(acknowledged)
        .map(|(name, (marker, _))| {
            let http = http.clone();
            async move {
                let hit = async {
                    let body: Value = http
                        .post(format!("{base}/api/v1/search"))
                        .json(&json!({"query": marker, "top_k": 10}))
                        .send()
                        .await?
                        .error_for_status()?
                        .json()
                        .await?;
                    let results = body["results"].as_array().context("results")?;
                    Ok(results.iter().any(|r| r["source"] == name.as_str()))
                }
                .await;
                (name.clone(), hit)
            }
        })
        .buffer_unordered(4)
        .collect()
        .await;

    let mut v = Verdict {
        indexes_agree,
        ..Verdict::default()
    };
    for (name, hit) in found {
        let hit = hit.with_context(|| format!("searching for {name}"))?;
        let in_list = listed.contains(name.as_str());
        match acknowledged[&name].1 {
            Fate::Stored => {
                v.stored += 1;
                if !(in_list && hit) {
                    v.lost
                        .push(format!("{name} (listed: {in_list}, found: {hit})"));
                }
            }
            Fate::Deleted => {
                v.deleted += 1;
                if in_list || hit {
                    v.resurrected
                        .push(format!("{name} (listed: {in_list}, found: {hit})"));
                }
            }
        }
    }
    v.lost.sort();
    v.resurrected.sort();
    Ok(v)
}
