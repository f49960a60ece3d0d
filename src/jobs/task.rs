//! What a task is: its kind with its payload, and its status. SQLite keeps both as text
//! (`kind`, `params` JSON, `status`); they become these types at the edge of `jobs`.

use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::error::{Error, Result};

/// A task's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    Pending,
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [TaskStatus; 5] = [
        Self::Pending,
        Self::Running,
        Self::Completed,
        Self::Failed,
        Self::Cancelled,
    ];

    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The status of this name; a bad name is the caller's 400.
    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|s| s.as_str()).collect();
                Error::bad_request(format!(
                    "status must be one of {}, got '{s}'",
                    names.join(", ")
                ))
            })
    }
}

/// What a task does, with everything it needs.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskKind {
    /// Ingest a file saved under the uploads folder by the task's id.
    Upload { filename: String, section: String },
    /// Scrape and ingest URLs one after the other.
    Scrape {
        urls: Vec<String>,
        timeout: Duration,
        skip_duplicates: bool,
    },
    /// Re-embed every chunk whose vector another embedder made (`kb::reembed`).
    Reindex(ReindexCheckpoint),
}

/// Where a reindex task is: saved after each batch, so that a task resumed after a
/// crash goes on from there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReindexCheckpoint {
    /// The embedder identity the task re-embeds with (`store::embedders`): a cursor
    /// saved for another one is not followed.
    pub embedder_id: Option<i64>,
    /// Every chunk with a key up to this one has been re-embedded.
    pub cursor: u64,
}

impl TaskKind {
    /// The kind's stored and shown name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Upload { .. } => "upload",
            Self::Scrape { .. } => "scrape",
            Self::Reindex(_) => "reindex",
        }
    }

    /// The payload as stored in the task row.
    pub fn params(&self) -> Value {
        match self {
            Self::Upload { filename, section } => {
                json!({ "filename": filename, "section": section })
            }
            Self::Scrape {
                urls,
                timeout,
                skip_duplicates,
            } => json!({
                "urls": urls,
                "timeout": timeout.as_secs(),
                "skip_duplicates": skip_duplicates,
            }),
            Self::Reindex(c) => json!({ "embedder_id": c.embedder_id, "cursor": c.cursor }),
        }
    }

    /// The kind of a stored row (`kind`, `params`); rows written by this version always
    /// read back, missing optional fields take their defaults.
    pub fn from_row(kind: &str, params: &Value) -> Result<Self> {
        match kind {
            "upload" => Ok(Self::Upload {
                filename: params["filename"].as_str().unwrap_or_default().to_owned(),
                section: params["section"].as_str().unwrap_or("uploaded").to_owned(),
            }),
            "scrape" => Ok(Self::Scrape {
                urls: params["urls"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|u| u.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default(),
                timeout: Duration::from_secs(params["timeout"].as_u64().unwrap_or(30)),
                skip_duplicates: params["skip_duplicates"].as_bool().unwrap_or(true),
            }),
            "reindex" => Ok(Self::Reindex(ReindexCheckpoint {
                embedder_id: params["embedder_id"].as_i64(),
                cursor: params["cursor"].as_u64().unwrap_or(0),
            })),
            other => Err(Error::Internal(anyhow::anyhow!(
                "unknown task kind '{other}'"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_statuses_round_trip() {
        for kind in [
            TaskKind::Upload {
                filename: "a.pdf".into(),
                section: "s".into(),
            },
            TaskKind::Scrape {
                urls: vec!["https://example.org/".into()],
                timeout: Duration::from_secs(12),
                skip_duplicates: false,
            },
            TaskKind::Reindex(ReindexCheckpoint::default()),
            TaskKind::Reindex(ReindexCheckpoint {
                embedder_id: Some(3),
                cursor: 1200,
            }),
        ] {
            assert_eq!(
                TaskKind::from_row(kind.name(), &kind.params()).unwrap(),
                kind
            );
        }
        assert!(TaskKind::from_row("index", &json!({})).is_err());
        for st in TaskStatus::ALL {
            assert_eq!(TaskStatus::parse(st.as_str()).unwrap(), st);
            assert_eq!(serde_json::to_value(st).unwrap(), st.as_str());
        }
        assert!(TaskStatus::parse("done").is_err());
    }
}
