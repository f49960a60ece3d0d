//! Per-user full-text search over conversation titles and messages. A conversation's
//! title hit is left out when one of its messages matched too (the title is usually its
//! first message), as are hits showing the same excerpt of the same conversation; the
//! excerpts are tidied by [`snippet::tidy`](super::snippet::tidy).

use super::{
    in_range, repo, snippet, ConversationHit, Conversations, Result, SearchPage, MAX_PAGE_SIZE,
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
            let message_ids: Vec<String> =
                hits.iter().filter_map(|h| h.message_id.clone()).collect();
            let texts: std::collections::HashMap<String, String> = store
                .read_sync(|c| repo::message_texts(c, &message_ids))?
                .into_iter()
                .collect();
            let with_messages: std::collections::HashSet<&str> = hits
                .iter()
                .filter(|h| h.message_id.is_some())
                .map(|h| h.conversation_id.as_str())
                .collect();
            let mut seen = std::collections::HashSet::new();
            let mut dropped = 0usize;
            let mut results = Vec::with_capacity(hits.len());
            for h in &hits {
                let Some(title) = titles.get(&h.conversation_id) else {
                    continue;
                };
                let full = match &h.message_id {
                    Some(m) => texts.get(m).map(String::as_str),
                    None => Some(title.as_str()),
                };
                let s = snippet::tidy(&h.snippet_html, &h.snippet, full);
                let repeated =
                    h.message_id.is_none() && with_messages.contains(h.conversation_id.as_str());
                if repeated || !seen.insert((h.conversation_id.clone(), s.plain.clone())) {
                    dropped += 1;
                    continue;
                }
                results.push(ConversationHit {
                    conversation_id: h.conversation_id.clone(),
                    title: title.clone(),
                    message_id: h.message_id.clone(),
                    snippet: s.plain,
                    snippet_html: s.html,
                    score: h.score,
                });
            }
            let total = total.saturating_sub(dropped);
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
