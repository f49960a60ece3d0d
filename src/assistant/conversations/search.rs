//! Per-user full-text search over conversation titles and messages.

use super::{
    in_range, repo, ConversationHit, Conversations, Result, SearchPage, MAX_PAGE_SIZE,
    MAX_QUERY_CHARS,
};
use crate::assistant::AssistantError;
use crate::error::Error;

impl Conversations {
    /// Full-text search over `user_id`'s active conversations (titles and messages):
    /// page 1 of 20 by default, best first.
    #[tracing::instrument(skip_all, fields(user_id = %user_id))]
    pub async fn search(
        &self,
        user_id: &str,
        query: &str,
        page: Option<i64>,
        page_size: Option<i64>,
    ) -> Result<SearchPage> {
        let query = query.trim().to_owned();
        if query.is_empty() {
            return Err(AssistantError::BadRequest("query must not be empty".into()));
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(AssistantError::BadRequest(format!(
                "query must be at most {MAX_QUERY_CHARS} characters"
            )));
        }
        let page = in_range("page", page, 1, 1, 10_000)?;
        let page_size = in_range("page_size", page_size, 20, 1, MAX_PAGE_SIZE)?;
        self.purge_if_due().await;
        let started = std::time::Instant::now();
        let (index, store, uid, q) = (
            self.index.clone(),
            self.store.clone(),
            user_id.to_owned(),
            query.clone(),
        );
        let (results, total) = tokio::task::spawn_blocking(move || -> crate::error::Result<_> {
            let offset = ((page - 1) * page_size) as usize;
            let (hits, total) = index.search(&uid, &q, offset, page_size as usize)?;
            // SQLite is the truth: drop hits whose conversation is no longer active, and
            // show the current title.
            let mut ids: Vec<String> = hits.iter().map(|h| h.conversation_id.clone()).collect();
            ids.sort();
            ids.dedup();
            let titles: std::collections::HashMap<String, String> = store
                .read_sync(|c| repo::active_titles(c, &uid, &ids))?
                .into_iter()
                .collect();
            let results: Vec<ConversationHit> = hits
                .into_iter()
                .filter_map(|h| {
                    let title = titles.get(&h.conversation_id)?.clone();
                    Some(ConversationHit {
                        conversation_id: h.conversation_id,
                        title,
                        message_id: h.message_id,
                        snippet: h.snippet,
                        snippet_html: h.snippet_html,
                        score: h.score,
                    })
                })
                .collect();
            Ok((results, total as u64))
        })
        .await
        .map_err(Error::from)??;
        tracing::info!(
            hits = results.len(),
            total,
            elapsed_us = started.elapsed().as_micros() as u64,
            "conversations searched"
        );
        Ok(SearchPage {
            query,
            results,
            total,
            page,
            page_size,
        })
    }
}
