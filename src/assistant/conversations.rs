//! Conversations: create, list, history, append (for the chat engine), soft delete,
//! purge after the retention period, and per-user full-text search.
//!
//! SQLite is the truth; the tantivy index (`retrieval::conversations`) is derived: each
//! write stages its index changes in the same serialised step, and they are committed in
//! groups (before any search, and every second), since one tantivy commit costs tens of
//! milliseconds. Search results are also checked against SQLite, so a deleted
//! conversation never shows even before its removal is committed.
//!
//! Purging: [`Conversations::purge_expired`] runs once at start-up, from the upkeep task
//! every [`SWEEP_EVERY`], and lazily before a list or a search when the last sweep is
//! older than [`SWEEP_EVERY`] by the server's clock (so a test that advances the clock
//! sees the purge on its next list).

mod purge;
mod reconcile;
mod search;
mod snippet;
pub mod types;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use parking_lot::Mutex;

pub use purge::spawn_sweeper;
pub use types::*;

use super::AssistantError;
use crate::error::Error;
use crate::retrieval::conversations::{ConvDoc, ConversationIndex};
use crate::store::conversations::{self as repo, NewMessageRow};
use crate::store::Store;
use crate::time::{format_iso, Clock};

/// How often deleted conversations past their retention are purged.
pub const SWEEP_EVERY: Duration = Duration::from_secs(3600);
/// Largest `page_size` of list and search.
const MAX_PAGE_SIZE: i64 = 100;
/// Largest history `limit`.
const MAX_HISTORY_LIMIT: i64 = 200;
/// Longest search query, in characters.
const MAX_QUERY_CHARS: usize = 1000;

type Result<T> = std::result::Result<T, AssistantError>;

/// The conversation service. Cheap to share behind an `Arc`.
pub struct Conversations {
    store: Store,
    index: Arc<ConversationIndex>,
    clock: Clock,
    retention: chrono::Duration,
    /// Serialises index-changing writes so SQLite and the index change in the same order.
    write_lock: Arc<Mutex<()>>,
    /// When the last purge ran, by the server's clock.
    last_sweep: Mutex<Option<DateTime<Utc>>>,
}

/// Checks an optional integer parameter against its range.
pub(crate) fn in_range(
    name: &str,
    v: Option<i64>,
    default: i64,
    min: i64,
    max: i64,
) -> Result<u64> {
    let v = v.unwrap_or(default);
    if !(min..=max).contains(&v) {
        return Err(AssistantError::BadRequest(format!(
            "{name} must be between {min} and {max}, got {v}"
        )));
    }
    Ok(v as u64)
}

fn not_found(id: &str) -> AssistantError {
    AssistantError::NotFound(format!("conversation '{id}' not found"))
}

impl Conversations {
    /// Opens the index under `data_dir` and rebuilds it from the store if it disagrees.
    /// Blocking; run at start-up.
    pub fn open(
        store: Store,
        data_dir: &Path,
        clock: Clock,
        retention_days: u64,
    ) -> anyhow::Result<Self> {
        let (index, disk) = ConversationIndex::open(data_dir)?;
        reconcile::reconcile(&store, &index, disk)?;
        Ok(Self {
            store,
            index: Arc::new(index),
            clock,
            retention: chrono::Duration::days(retention_days as i64),
            write_lock: Arc::new(Mutex::new(())),
            last_sweep: Mutex::new(None),
        })
    }

    /// Runs `f` (SQLite writes returning index changes) and stages the changes on the
    /// index, both under the write lock, on a blocking thread. Staged changes are committed
    /// before the next search and every second by the upkeep task; the commit records the
    /// generation `f` returned. If the index fails, the data is still stored and the index
    /// is rebuilt at the next start-up.
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&crate::store::Transaction<'_>) -> crate::error::Result<(T, IndexChange)>
            + Send
            + 'static,
    ) -> Result<T> {
        let (store, index, lock) = (
            self.store.clone(),
            self.index.clone(),
            self.write_lock.clone(),
        );
        let out = tokio::task::spawn_blocking(move || -> crate::error::Result<T> {
            let _guard = lock.lock();
            let (out, change) = store.write_sync(f)?;
            if let Some(generation) = change.generation {
                if let Err(e) = index.stage(&change.remove, &change.upsert, generation) {
                    tracing::error!(error = %format!("{e:#}"), generation, "updating the conversation index failed; it will be rebuilt at start-up");
                }
            }
            Ok(out)
        })
        .await
        .map_err(Error::from)??;
        Ok(out)
    }

    /// Creates a conversation for `user_id`; without a title it is "New conversation"
    /// until the first user message names it.
    #[tracing::instrument(skip_all, fields(user_id = %user_id))]
    pub async fn create(&self, user_id: &str, title: Option<String>) -> Result<ConversationView> {
        let title = title.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
        if title
            .as_ref()
            .is_some_and(|t| t.chars().count() > MAX_TITLE_CHARS)
        {
            return Err(AssistantError::BadRequest(format!(
                "title must be at most {MAX_TITLE_CHARS} characters"
            )));
        }
        let is_default = title.is_none();
        let title = title.unwrap_or_else(|| DEFAULT_TITLE.to_owned());
        let id = uuid::Uuid::new_v4().to_string();
        let now = self.clock.now_iso();
        let (cid, uid) = (id.clone(), user_id.to_owned());
        let row = self
            .write(move |tx| {
                repo::insert(tx, &cid, &uid, &title, is_default, &now)?;
                let generation = repo::bump_generation(tx)?;
                let row = repo::get(tx, &uid, &cid)?.ok_or_else(|| {
                    Error::Internal(anyhow::anyhow!("inserted conversation vanished"))
                })?;
                let doc = ConvDoc {
                    user_id: uid,
                    conversation_id: cid,
                    message_id: None,
                    text: title,
                };
                Ok((row, IndexChange::upsert(generation, vec![doc])))
            })
            .await?;
        tracing::info!(conversation_id = %id, "conversation created");
        Ok(row.into())
    }

    /// A page of `user_id`'s conversations (page 1, 20 per page, status `Active` by default).
    #[tracing::instrument(skip_all, fields(user_id = %user_id))]
    pub async fn list(&self, user_id: &str, q: ListQuery) -> Result<ConversationPage> {
        let page = in_range("page", q.page, 1, 1, i64::MAX / MAX_PAGE_SIZE)?;
        let page_size = in_range("page_size", q.page_size, 20, 1, MAX_PAGE_SIZE)?;
        let status = parse_status(q.status.as_deref())?;
        self.purge_if_due().await;
        let uid = user_id.to_owned();
        let (rows, total) = self
            .store
            .read(move |c| repo::list(c, &uid, status, (page - 1) * page_size, page_size))
            .await?;
        Ok(ConversationPage {
            conversations: rows.into_iter().map(Into::into).collect(),
            total,
            page,
            page_size,
            pages: total.div_ceil(page_size),
            status: status.to_owned(),
        })
    }

    /// One active conversation of `user_id`; 404 for another user's, a deleted or an unknown one.
    pub async fn get(&self, user_id: &str, conversation_id: &str) -> Result<ConversationView> {
        let (uid, cid) = (user_id.to_owned(), conversation_id.to_owned());
        let row = self.store.read(move |c| repo::get(c, &uid, &cid)).await?;
        match row {
            Some(r) if r.status == "Active" => Ok(r.into()),
            _ => Err(not_found(conversation_id)),
        }
    }

    /// Messages of an active conversation, oldest first (limit 50 (1-200), offset 0 by default).
    #[tracing::instrument(skip_all, fields(user_id = %user_id, conversation_id = %conversation_id))]
    pub async fn history(
        &self,
        user_id: &str,
        conversation_id: &str,
        limit: Option<i64>,
        offset: Option<i64>,
    ) -> Result<History> {
        let limit = in_range("limit", limit, 50, 1, MAX_HISTORY_LIMIT)?;
        let offset = in_range("offset", offset, 0, 0, i64::MAX)?;
        let (uid, cid) = (user_id.to_owned(), conversation_id.to_owned());
        let found = self
            .store
            .read(move |c| {
                let Some(conv) = repo::get(c, &uid, &cid)?.filter(|r| r.status == "Active") else {
                    return Ok(None);
                };
                Ok(Some((repo::messages(c, &cid, offset, limit)?, conv)))
            })
            .await?;
        let (messages, conv) = found.ok_or_else(|| not_found(conversation_id))?;
        Ok(History {
            conversation_id: conv.id,
            title: conv.title,
            status: conv.status,
            total: conv.message_count,
            messages: messages.into_iter().map(Into::into).collect(),
            limit,
            offset,
        })
    }

    /// The last `n` (1-200) messages of an active conversation of `user_id`, oldest first:
    /// the chat engine's context window.
    pub async fn recent(
        &self,
        user_id: &str,
        conversation_id: &str,
        n: u64,
    ) -> Result<Vec<MessageView>> {
        let n = n.clamp(1, MAX_HISTORY_LIMIT as u64);
        let (uid, cid) = (user_id.to_owned(), conversation_id.to_owned());
        let rows = self
            .store
            .read(move |c| {
                if repo::get(c, &uid, &cid)?
                    .filter(|r| r.status == "Active")
                    .is_none()
                {
                    return Ok(None);
                }
                Ok(Some(repo::recent_messages(c, &cid, n)?))
            })
            .await?;
        let rows = rows.ok_or_else(|| not_found(conversation_id))?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    /// Appends a message to an active conversation of `user_id` and indexes it; the first
    /// user message names a conversation still titled "New conversation".
    #[tracing::instrument(skip_all, fields(user_id = %user_id, conversation_id = %conversation_id, role = m.role.as_str()))]
    pub async fn append(
        &self,
        user_id: &str,
        conversation_id: &str,
        m: NewMessage,
    ) -> Result<MessageView> {
        let id = uuid::Uuid::new_v4().to_string();
        let now = self.clock.now_iso();
        let (uid, cid, mid) = (user_id.to_owned(), conversation_id.to_owned(), id.clone());
        let row = self
            .write(move |tx| {
                let conv = repo::get(tx, &uid, &cid)?
                    .filter(|r| r.status == "Active")
                    .ok_or_else(|| Error::NotFound(format!("conversation '{cid}' not found")))?;
                let row = NewMessageRow {
                    id: &mid,
                    conversation_id: &cid,
                    role: m.role.as_str(),
                    content: &m.content,
                    tool_calls: m.tool_calls.as_ref(),
                    attachments: m.attachments.as_ref(),
                    answer: m.answer.as_ref(),
                    tokens_in: m.tokens_in,
                    tokens_out: m.tokens_out,
                    created_at: &now,
                };
                let key = repo::insert_message(tx, &row)?;
                let mut docs = Vec::with_capacity(2);
                if conv.title_is_default && m.role == Role::User {
                    let title = title_from_message(&m.content);
                    repo::set_title(tx, &cid, &title)?;
                    docs.push(ConvDoc {
                        user_id: uid.clone(),
                        conversation_id: cid.clone(),
                        message_id: None,
                        text: title,
                    });
                }
                // System prompts and tool outputs are stored but not searched.
                if matches!(m.role, Role::User | Role::Assistant) {
                    docs.push(ConvDoc {
                        user_id: uid,
                        conversation_id: cid.clone(),
                        message_id: Some(mid.clone()),
                        text: m.content.clone(),
                    });
                }
                let generation = repo::bump_generation(tx)?;
                let view = MessageView {
                    message_id: mid,
                    conversation_id: cid,
                    role: m.role.as_str().to_owned(),
                    content: m.content,
                    tool_calls: m.tool_calls,
                    attachments: m.attachments,
                    tokens_in: m.tokens_in,
                    tokens_out: m.tokens_out,
                    created_at: now,
                    sources: None,
                    answer_mode: None,
                    grounding: None,
                }
                .with_answer(m.answer);
                tracing::debug!(key, "message stored");
                Ok((view, IndexChange::upsert(generation, docs)))
            })
            .await
            .map_err(|e| match e {
                AssistantError::NotFound(_) => not_found(conversation_id),
                other => other,
            })?;
        tracing::info!(message_id = %id, "message appended");
        Ok(row)
    }

    /// Soft-deletes an active conversation of `user_id` and removes it from search at once.
    #[tracing::instrument(skip_all, fields(user_id = %user_id, conversation_id = %conversation_id))]
    pub async fn delete(&self, user_id: &str, conversation_id: &str) -> Result<Deleted> {
        let now = self.clock.now();
        let now_iso = format_iso(now);
        let (uid, cid) = (user_id.to_owned(), conversation_id.to_owned());
        let deleted = self
            .write(move |tx| {
                if !repo::soft_delete(tx, &uid, &cid, &now_iso)? {
                    return Ok((false, IndexChange::none()));
                }
                let generation = repo::bump_generation(tx)?;
                Ok((true, IndexChange::remove(generation, vec![cid])))
            })
            .await?;
        if !deleted {
            return Err(not_found(conversation_id));
        }
        tracing::info!("conversation soft-deleted");
        Ok(Deleted {
            conversation_id: conversation_id.to_owned(),
            status: "Deleted".into(),
            deleted_at: format_iso(now),
            purge_after: format_iso(now + self.retention),
        })
    }
}

/// What one write changes in the index.
struct IndexChange {
    /// `None`: nothing to apply.
    generation: Option<u64>,
    remove: Vec<String>,
    upsert: Vec<ConvDoc>,
}

impl IndexChange {
    fn none() -> Self {
        Self {
            generation: None,
            remove: Vec::new(),
            upsert: Vec::new(),
        }
    }
    fn upsert(generation: u64, upsert: Vec<ConvDoc>) -> Self {
        Self {
            generation: Some(generation),
            remove: Vec::new(),
            upsert,
        }
    }
    fn remove(generation: u64, remove: Vec<String>) -> Self {
        Self {
            generation: Some(generation),
            remove,
            upsert: Vec::new(),
        }
    }
}

fn parse_status(s: Option<&str>) -> Result<&'static str> {
    match s.map(str::trim) {
        None | Some("") => Ok("Active"),
        Some(s) if s.eq_ignore_ascii_case("active") => Ok("Active"),
        Some(s) if s.eq_ignore_ascii_case("deleted") => Ok("Deleted"),
        Some(other) => Err(AssistantError::BadRequest(format!(
            "status must be Active or Deleted, got '{other}'"
        ))),
    }
}

#[cfg(test)]
mod tests;
