//! Where `ragd ingest` sends files: a running server (`/upload/bulk`, `/upload/bulk/zip`)
//! or the knowledge base of a data directory opened in this process (holding its lock,
//! so never beside a server). Both answer with the bulk upload's result.

use std::collections::HashSet;

use anyhow::Context as _;
use serde_json::Value;

use crate::cli::client::Server;

/// The knowledge base being ingested into.
pub enum Target {
    Server(Server),
    Local {
        state: ragd::AppState,
        _lock: ragd::state::data_lock::DataDirLock,
    },
}

/// What became of one file.
#[derive(Debug, Clone)]
pub enum Outcome {
    Added { chunks: u64 },
    Updated { chunks: u64 },
    Duplicate,
    Refused(String),
}

impl Target {
    /// The source names stored now.
    pub async fn sources(&self) -> anyhow::Result<HashSet<String>> {
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
            Target::Local { state, .. } => Ok(state.kb.sources().await?.into_iter().collect()),
        }
    }

    /// Ingests `files` (name, bytes) together; one outcome per file, in order.
    pub async fn bulk(
        &self,
        files: Vec<(String, Vec<u8>)>,
        section: &str,
    ) -> anyhow::Result<Vec<Outcome>> {
        let n = files.len();
        let body = match self {
            Target::Server(s) => {
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
                s.check(r).await?.json::<Value>().await?
            }
            Target::Local { state, .. } => {
                serde_json::to_value(state.kb.ingest_many(files, section.to_owned()).await)?
            }
        };
        let outcomes = outcomes(&body);
        anyhow::ensure!(
            outcomes.len() == n,
            "the knowledge base answered for {} of {n} files",
            outcomes.len()
        );
        Ok(outcomes)
    }

    /// Ingests a ZIP archive of documents; one outcome per file inside (with its name).
    pub async fn zip(
        &self,
        bytes: Vec<u8>,
        section: &str,
    ) -> anyhow::Result<Vec<(String, Outcome)>> {
        let body = match self {
            Target::Server(s) => {
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
                s.check(r).await?.json::<Value>().await?
            }
            Target::Local { state, .. } => {
                serde_json::to_value(state.kb.ingest_zip(bytes, section.to_owned()).await?)?
            }
        };
        let names = body["results"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["filename"].as_str().unwrap_or("?").to_owned());
        Ok(names.zip(outcomes(&body)).collect())
    }

    /// Deletes the source `name` (and its chunks); a source already gone is no error.
    pub async fn delete_source(&self, name: &str) -> anyhow::Result<()> {
        match self {
            Target::Server(s) => {
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
            }
            Target::Local { state, .. } => {
                state.kb.delete_source(name.to_owned()).await?;
            }
        }
        Ok(())
    }

    /// Flushes and closes a local knowledge base.
    pub async fn close(self) -> anyhow::Result<()> {
        if let Target::Local { state, .. } = self {
            state.shutdown().await?;
        }
        Ok(())
    }
}

/// The bulk answer's results as outcomes (DECISIONS.md: `content_hash` duplicates wrote
/// nothing; `filepath` ones were updated in place).
fn outcomes(body: &Value) -> Vec<Outcome> {
    body["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let chunks =
                r["chunks_added"].as_u64().unwrap_or(0) + r["chunks_updated"].as_u64().unwrap_or(0);
            if r["success"] != true {
                Outcome::Refused(r["error"].as_str().unwrap_or("refused").to_owned())
            } else if r["is_duplicate"] == true && r["duplicate_type"] == "filepath" {
                Outcome::Updated { chunks }
            } else if r["is_duplicate"] == true {
                Outcome::Duplicate
            } else {
                Outcome::Added { chunks }
            }
        })
        .collect()
}
