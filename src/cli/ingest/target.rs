//! Where `ragd ingest` sends files: a running server (`/upload/bulk`, `/upload/bulk/zip`)
//! or the knowledge base of a data directory opened in this process (holding its lock,
//! so never beside a server). Both answer with the bulk upload's result.

use std::collections::HashSet;

use anyhow::Context as _;
use ragd::kb::sync::{outcomes, zip_outcomes, Outcome, Sink};
use serde_json::Value;

use crate::cli::client::Server;

/// The knowledge base being ingested into.
pub enum Target {
    Server(Server),
    Local {
        state: Box<ragd::AppState>,
        _lock: ragd::state::data_lock::DataDirLock,
    },
}

impl Target {
    /// Flushes and closes a local knowledge base.
    pub async fn close(self) -> anyhow::Result<()> {
        if let Target::Local { state, .. } = self {
            state.shutdown().await?;
        }
        Ok(())
    }
}

impl Sink for Target {
    async fn sources(&self) -> anyhow::Result<HashSet<String>> {
        match self {
            Target::Server(s) => {
                let r = s
                    .http
                    .get(s.url("/api/v1/documents/sources"))
                    .send()
                    .await
                    .with_context(|| s.unreachable())?;
                let body: Value = s.check(r).await?.json().await?;
                Ok(body["sources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect())
            }
            Target::Local { state, .. } => Sink::sources(&*state.kb).await,
        }
    }

    async fn bulk(
        &self,
        files: Vec<(String, Vec<u8>)>,
        section: &str,
    ) -> anyhow::Result<Vec<Outcome>> {
        let s = match self {
            Target::Server(s) => s,
            Target::Local { state, .. } => return state.kb.bulk(files, section).await,
        };
        let n = files.len();
        let mut form = reqwest::multipart::Form::new().text("section", section.to_owned());
        for (name, bytes) in files {
            form = form.part(
                "files",
                reqwest::multipart::Part::bytes(bytes).file_name(name),
            );
        }
        let r = s
            .http
            .post(s.url("/api/v1/upload/bulk"))
            .multipart(form)
            .send()
            .await
            .with_context(|| s.unreachable())?;
        let body = s.check(r).await?.json::<Value>().await?;
        let outcomes = outcomes(&body);
        anyhow::ensure!(
            outcomes.len() == n,
            "the server answered for {} of {n} files",
            outcomes.len()
        );
        Ok(outcomes)
    }

    async fn zip(&self, bytes: Vec<u8>, section: &str) -> anyhow::Result<Vec<(String, Outcome)>> {
        let s = match self {
            Target::Server(s) => s,
            Target::Local { state, .. } => return state.kb.zip(bytes, section).await,
        };
        let form = reqwest::multipart::Form::new()
            .text("section", section.to_owned())
            .part(
                "file",
                reqwest::multipart::Part::bytes(bytes).file_name("archive.zip"),
            );
        let r = s
            .http
            .post(s.url("/api/v1/upload/bulk/zip"))
            .multipart(form)
            .send()
            .await
            .with_context(|| s.unreachable())?;
        Ok(zip_outcomes(&s.check(r).await?.json::<Value>().await?))
    }

    async fn delete_source(&self, name: &str) -> anyhow::Result<()> {
        let s = match self {
            Target::Server(s) => s,
            Target::Local { state, .. } => return Sink::delete_source(&*state.kb, name).await,
        };
        let r = s
            .http
            .post(s.url("/api/v1/documents/delete/by-source"))
            .json(&serde_json::json!({ "source": name }))
            .send()
            .await
            .with_context(|| s.unreachable())?;
        if r.status() != reqwest::StatusCode::NOT_FOUND {
            s.check(r).await?;
        }
        Ok(())
    }
}
