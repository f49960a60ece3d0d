//! Real readiness checks of the knowledge base's components.

use std::time::Duration;

use super::{Component, KnowledgeBase};
use crate::ml::llm::{collect, GenerateRequest, Prompt};
use crate::store::chunks as repo;

const EMBED_PROBE_TIMEOUT: Duration = Duration::from_secs(10);
const LLM_PROBE_TIMEOUT: Duration = Duration::from_secs(30);

impl KnowledgeBase {
    /// Checks the embedder (a real embedding of a probe text) and the vector store
    /// (SQLite answers, and both derived indexes hold exactly the stored chunks; not
    /// healthy, with the reason, while the stored vectors are another embedder's).
    pub async fn health_components(&self) -> Vec<Component> {
        vec![self.check_embedder().await, self.check_vector_store().await]
    }

    async fn check_embedder(&self) -> Component {
        let probe = tokio::time::timeout(
            EMBED_PROBE_TIMEOUT,
            self.embedder.embed_fresh(vec!["health check".into()]),
        )
        .await;
        let (healthy, detail) = match probe {
            Ok(Ok(v)) if v.first().map(Vec::len) == Some(self.embedder.dim()) => (
                true,
                format!(
                    "{}{} answered a probe ({} dims)",
                    self.embedder.name(),
                    self.embedder
                        .served_by()
                        .map(|u| format!(" at {u}"))
                        .unwrap_or_default(),
                    self.embedder.dim()
                ),
            ),
            Ok(Ok(_)) => (
                false,
                "the embedder returned a vector of the wrong size".into(),
            ),
            Ok(Err(e)) => (false, e.to_string()),
            Err(_) => (
                false,
                format!("no answer within {}s", EMBED_PROBE_TIMEOUT.as_secs()),
            ),
        };
        let runs = Some(&self.placed.embedder);
        Component {
            name: "embedder".into(),
            healthy,
            installed: true,
            detail,
            device: runs.map(|r| r.device.clone()),
            arithmetic: runs.map(|r| r.arithmetic.clone()),
        }
    }

    /// The LLM: one greedy token of a probe prompt when one is loaded and idle (a busy one
    /// is evidently working).
    pub async fn check_llm(&self) -> Component {
        let slot = &self.llm;
        let active = slot
            .file()
            .and_then(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
            .map(|f| format!(" [file {f}]"))
            .unwrap_or_default();
        let (healthy, detail) = match &slot.current() {
            None => (
                false,
                match slot.failure() {
                    Some(why) => format!("the LLM cannot run: {why}; answers are extractive"),
                    None => "no LLM model file is installed; answers are extractive".to_owned(),
                },
            ),
            Some(llm) if llm.in_flight() > 0 => (
                true,
                format!(
                    "{}{active} is generating ({} requests)",
                    llm.info().name,
                    llm.in_flight()
                ),
            ),
            Some(llm) => {
                let mut request = GenerateRequest::new(Prompt::Text("Health check:".into()));
                request.params.max_tokens = 1;
                request.params.temperature = 0.0;
                let probe = collect(llm.as_ref(), request, |_| {});
                match tokio::time::timeout(LLM_PROBE_TIMEOUT, probe).await {
                    Ok(Ok(_)) => (
                        true,
                        format!(
                            "{}{active} ({}, {} tokens of context) generated a probe token",
                            llm.info().name,
                            llm.info().family,
                            llm.info().context_length
                        ),
                    ),
                    Ok(Err(e)) => (false, e.to_string()),
                    Err(_) => (
                        false,
                        format!("no answer within {}s", LLM_PROBE_TIMEOUT.as_secs()),
                    ),
                }
            }
        };
        let runs = Some(&self.placed.llm);
        Component {
            name: "llm".into(),
            healthy,
            installed: slot.current().is_some() || slot.failure().is_some(),
            detail,
            device: runs.map(|r| r.device.clone()),
            arithmetic: runs.map(|r| r.arithmetic.clone()),
        }
    }

    /// The reranker: a real probe pair when one is loaded.
    pub async fn check_reranker(&self) -> Component {
        let (healthy, detail) = match &self.reranker {
            None => (
                false,
                "no reranker model is installed; results are not reranked".to_owned(),
            ),
            Some(rr) => {
                let probe = rr.score("health check".into(), vec!["a probe passage".into()]);
                match tokio::time::timeout(EMBED_PROBE_TIMEOUT, probe).await {
                    Ok(Ok(s)) if s.len() == 1 && s[0].is_finite() => {
                        (true, format!("{} scored a probe pair", rr.name()))
                    }
                    Ok(Ok(_)) => (false, "the reranker returned no score".into()),
                    Ok(Err(e)) => (false, e.to_string()),
                    Err(_) => (
                        false,
                        format!("no answer within {}s", EMBED_PROBE_TIMEOUT.as_secs()),
                    ),
                }
            }
        };
        let runs = self.placed.reranker.as_ref();
        Component {
            name: "reranker".into(),
            healthy,
            installed: self.reranker.is_some(),
            detail,
            device: runs.map(|r| r.device.clone()),
            arithmetic: runs.map(|r| r.arithmetic.clone()),
        }
    }

    async fn check_vector_store(&self) -> Component {
        if let Some(reason) = self.searchable().stale_reason() {
            return Component {
                name: "vector_store".into(),
                healthy: false,
                installed: true,
                detail: reason,
                device: None,
                arithmetic: None,
            };
        }
        // What ingestion has staged in the full-text index counts too: commit it first.
        let ft = self.fulltext.clone();
        match tokio::task::spawn_blocking(move || ft.commit_staged()).await {
            Ok(Err(e)) => {
                tracing::error!(error = %format!("{e:#}"), "health: committing the full-text index failed")
            }
            Err(e) => tracing::error!(error = %e, "health: committing the full-text index failed"),
            Ok(Ok(_)) => {}
        }
        let counted = self.store.read(repo::count_chunks).await;
        let (healthy, detail) = match counted {
            Err(e) => {
                tracing::error!(error = %e, "health: database check failed");
                (false, "the database did not answer".into())
            }
            Ok(n) => {
                let (v, f) = (self.vectors.count(), self.fulltext.len());
                if v == n && f == n {
                    (
                        true,
                        format!("{n} chunks; vector and full-text indexes agree"),
                    )
                } else {
                    (
                        false,
                        format!("{n} chunks stored but {v} vectors and {f} full-text entries"),
                    )
                }
            }
        };
        Component {
            name: "vector_store".into(),
            healthy,
            installed: true,
            detail,
            device: None,
            arithmetic: None,
        }
    }
}
