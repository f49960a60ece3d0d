//! What the knowledge-base tools run on the knowledge base and the task queue (their
//! parameter types are in `kb_params`).

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::kb_params::*;
use crate::assistant::{Assistant, AssistantError};
use crate::kb::answer::AnswerPiece;
use crate::kb::filter::MetadataFilter;
use crate::kb::ingest::{IngestSource, SourceType};
use crate::kb::query::QueryParams;
use crate::kb::search::SearchParams;

type Result<T> = std::result::Result<T, AssistantError>;

fn to_value<T: serde::Serialize>(v: T) -> Result<Value> {
    serde_json::to_value(v).map_err(|e| AssistantError::Internal(e.into()))
}

/// Candidates each retriever returns before fusion, for `top_k` results.
fn initial_k(top_k: usize) -> usize {
    (top_k * 4).clamp(20, 100)
}

/// The source name of an `upload_text` title: file-name-safe, with a text extension.
fn text_source_name(title: &str) -> String {
    let mut name: String = title
        .trim()
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || " -_.()".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(120)
        .collect();
    let lower = name.to_lowercase();
    if !(lower.ends_with(".txt") || lower.ends_with(".md")) {
        name.push_str(".txt");
    }
    name
}

impl Assistant {
    pub(super) async fn tool_search_kb(&self, p: SearchKb) -> Result<Value> {
        let r = self
            .kb
            .search(SearchParams {
                query: p.query,
                top_k: p.top_k,
                initial_k: initial_k(p.top_k),
                mode: Default::default(),
            })
            .await?;
        to_value(r)
    }

    pub(super) async fn tool_ask_kb(
        &self,
        p: AskKb,
        sink: Option<&mpsc::Sender<AnswerPiece>>,
    ) -> Result<Value> {
        let params = QueryParams {
            question: p.question,
            top_k: p.top_k,
            initial_k: initial_k(p.top_k),
            include_timing: false,
            include_context: false,
            temperature: None,
        };
        let r = self.kb.query_streaming(params, sink).await?;
        to_value(r)
    }

    pub(super) async fn tool_list_documents(&self, p: ListDocuments) -> Result<Value> {
        to_value(self.kb.documents(p.page, p.page_size).await?)
    }

    pub(super) async fn tool_get_document(&self, p: DocumentId) -> Result<Value> {
        to_value(self.kb.document(p.document_id).await?)
    }

    pub(super) async fn tool_document_stats(&self) -> Result<Value> {
        to_value(self.kb.document_stats().await?)
    }

    pub(super) async fn tool_list_sources(&self) -> Result<Value> {
        let sources = self.kb.sources().await?;
        Ok(json!({ "count": sources.len(), "sources": sources }))
    }

    pub(super) async fn tool_list_tasks(&self, p: ListTasks) -> Result<Value> {
        let status = p
            .status
            .filter(|s| !s.is_empty())
            .map(|s| crate::jobs::TaskStatus::parse(&s))
            .transpose()?;
        to_value(self.jobs.list(status, p.limit).await?)
    }

    pub(super) async fn tool_get_task(&self, p: TaskId) -> Result<Value> {
        to_value(self.jobs.get(p.task_id).await?)
    }

    pub(super) async fn tool_scrape_url(&self, p: ScrapeUrl) -> Result<Value> {
        let ack = self
            .jobs
            .submit_scrape(vec![p.url], p.timeout, p.skip_duplicates)
            .await?;
        to_value(ack)
    }

    pub(super) async fn tool_upload_text(&self, p: UploadText) -> Result<Value> {
        let name = text_source_name(&p.title);
        let format = crate::parse::Format::for_filename(&name)
            .map_err(|e| AssistantError::BadRequest(e.to_string()))?;
        let r = self
            .kb
            .ingest(IngestSource {
                name,
                source_type: SourceType::File,
                format,
                bytes: p.text.into_bytes(),
                section: p.section,
                title_hint: Some(p.title.trim().to_owned()),
                check_duplicates: true,
                task: None,
                progress: None,
            })
            .await?;
        to_value(r)
    }

    pub(super) async fn tool_delete_document(&self, p: DocumentId) -> Result<Value> {
        to_value(self.kb.delete_document(p.document_id).await?)
    }

    pub(super) async fn tool_delete_source(&self, p: SourceName) -> Result<Value> {
        let deleted = self.kb.delete_source(p.source.clone()).await?;
        Ok(json!({ "source": p.source, "deleted": deleted }))
    }

    pub(super) async fn tool_delete_by_filter(&self, p: ByFilter) -> Result<Value> {
        let filter = MetadataFilter::parse(&p.filter, "params.where")?;
        let deleted = self.kb.delete_by_filter(filter).await?;
        Ok(json!({ "where": p.filter, "deleted": deleted }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_sources_get_safe_names() {
        assert_eq!(text_source_name("Q3 plan/notes"), "Q3 plan_notes.txt");
        assert_eq!(text_source_name("readme.md"), "readme.md");
    }
}
