//! What the knowledge-base tools run on the knowledge base and the task queue (their
//! parameter types are in `kb_params`).

use serde_json::{json, Map, Value};

use super::kb_params::*;
use crate::assistant::{Assistant, AssistantError};
use crate::kb::ingest::{IngestSource, SourceType};
use crate::kb::query::QueryParams;
use crate::kb::search::SearchParams;
use crate::store::chunks::MetaCond;

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

/// `where` as metadata conditions, by the rules of `/documents/delete/by-filter`.
fn conditions(filter: &Map<String, Value>) -> Result<Vec<MetaCond>> {
    let bad = |m: String| AssistantError::BadRequest(m);
    let scalar = |k: &str, v: &Value| match v {
        Value::String(_) | Value::Number(_) | Value::Bool(_) => Ok(v.clone()),
        _ => Err(bad(format!(
            "params.where.{k}: expected a string, number or boolean"
        ))),
    };
    filter
        .iter()
        .map(|(k, v)| {
            if k.is_empty()
                || k.len() > 64
                || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err(bad(format!("params.where: '{k}' is not a metadata key")));
            }
            match v {
                Value::Object(op) if op.len() == 1 && op.contains_key("$in") => match &op["$in"] {
                    Value::Array(items) => Ok(MetaCond::In(
                        k.clone(),
                        items.iter().map(|i| scalar(k, i)).collect::<Result<_>>()?,
                    )),
                    _ => Err(bad(format!("params.where.{k}.$in must be an array"))),
                },
                Value::Object(op) if op.len() == 1 && op.contains_key("$ne") => {
                    Ok(MetaCond::Ne(k.clone(), scalar(k, &op["$ne"])?))
                }
                Value::Object(_) => {
                    Err(bad(format!("params.where.{k}: operators are $in and $ne")))
                }
                other => Ok(MetaCond::Eq(k.clone(), scalar(k, other)?)),
            }
        })
        .collect()
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

    pub(super) async fn tool_ask_kb(&self, p: AskKb) -> Result<Value> {
        let r = self
            .kb
            .query(QueryParams {
                question: p.question,
                top_k: p.top_k,
                initial_k: initial_k(p.top_k),
                include_timing: false,
                include_context: false,
                temperature: None,
            })
            .await?;
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
        to_value(self.jobs.list(p.status, p.limit).await?)
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
        let conds = conditions(&p.filter)?;
        let deleted = self.kb.delete_by_filter(conds).await?;
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

    #[test]
    fn filters_follow_the_api_rules() {
        let f = |v: Value| conditions(v.as_object().unwrap());
        assert_eq!(
            f(json!({"source": "a", "x": {"$in": [1]}, "y": {"$ne": true}}))
                .unwrap()
                .len(),
            3
        );
        assert!(f(json!({"a.b": 1})).is_err());
        assert!(f(json!({"a": {"$gt": 1}})).is_err());
        assert!(f(json!({"a": [1]})).is_err());
    }
}
