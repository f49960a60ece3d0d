//! Parameter types (with their JSON schemas) of the knowledge-base tools.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::schema::{object, Prop, ToolParams};

fn five() -> usize {
    5
}
fn one() -> u64 {
    1
}
fn twenty() -> u64 {
    20
}

/// `search_knowledge_base`.
#[derive(Debug, Deserialize)]
pub struct SearchKb {
    pub query: String,
    #[serde(default = "five")]
    pub top_k: usize,
}

impl ToolParams for SearchKb {
    fn schema() -> Value {
        object(vec![
            (
                "query",
                Prop::string("What to search for").min(1).max(1000),
                true,
            ),
            (
                "top_k",
                Prop::integer("Results to return")
                    .min(1)
                    .max(50)
                    .default(json!(5)),
                false,
            ),
        ])
    }
}

/// `ask_knowledge_base`.
#[derive(Debug, Deserialize)]
pub struct AskKb {
    pub question: String,
    #[serde(default = "five")]
    pub top_k: usize,
}

impl ToolParams for AskKb {
    fn schema() -> Value {
        object(vec![
            (
                "question",
                Prop::string("The question to answer from the knowledge base")
                    .min(1)
                    .max(2000),
                true,
            ),
            (
                "top_k",
                Prop::integer("Passages to answer from")
                    .min(1)
                    .max(20)
                    .default(json!(5)),
                false,
            ),
        ])
    }
}

/// `list_documents`.
#[derive(Debug, Deserialize)]
pub struct ListDocuments {
    #[serde(default = "one")]
    pub page: u64,
    #[serde(default = "twenty")]
    pub page_size: u64,
}

impl ToolParams for ListDocuments {
    fn schema() -> Value {
        object(vec![
            (
                "page",
                Prop::integer("Page, from 1")
                    .min(1)
                    .max(1_000_000)
                    .default(json!(1)),
                false,
            ),
            (
                "page_size",
                Prop::integer("Documents per page")
                    .min(1)
                    .max(100)
                    .default(json!(20)),
                false,
            ),
        ])
    }
}

/// `get_document` and `delete_document`.
#[derive(Debug, Deserialize)]
pub struct DocumentId {
    pub document_id: String,
}

impl ToolParams for DocumentId {
    fn schema() -> Value {
        object(vec![(
            "document_id",
            Prop::string("The document (chunk) id").min(1).max(200),
            true,
        )])
    }
}

/// Tools without parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

impl ToolParams for NoParams {
    fn schema() -> Value {
        object(vec![])
    }
}

const TASK_STATUSES: &[&str] = &["pending", "running", "completed", "failed", "cancelled"];

/// `list_tasks`.
#[derive(Debug, Deserialize)]
pub struct ListTasks {
    pub status: Option<String>,
    #[serde(default = "twenty")]
    pub limit: u64,
}

impl ToolParams for ListTasks {
    fn schema() -> Value {
        object(vec![
            (
                "status",
                Prop::string("Only tasks in this state").one_of(TASK_STATUSES),
                false,
            ),
            (
                "limit",
                Prop::integer("Most tasks returned, newest first")
                    .min(1)
                    .max(100)
                    .default(json!(20)),
                false,
            ),
        ])
    }
}

/// `get_task`.
#[derive(Debug, Deserialize)]
pub struct TaskId {
    pub task_id: String,
}

impl ToolParams for TaskId {
    fn schema() -> Value {
        object(vec![(
            "task_id",
            Prop::string("The task id").min(1).max(100),
            true,
        )])
    }
}

fn thirty() -> u64 {
    30
}
fn yes() -> bool {
    true
}

/// `scrape_url`: queued as a background task.
#[derive(Debug, Deserialize)]
pub struct ScrapeUrl {
    pub url: String,
    #[serde(default = "thirty")]
    pub timeout: u64,
    #[serde(default = "yes")]
    pub skip_duplicates: bool,
}

impl ToolParams for ScrapeUrl {
    fn schema() -> Value {
        object(vec![
            ("url", Prop::string("An http(s) URL").min(1).max(2048), true),
            (
                "timeout",
                Prop::integer("Seconds").min(5).max(120).default(json!(30)),
                false,
            ),
            (
                "skip_duplicates",
                Prop::boolean("Skip a URL or content already stored").default(json!(true)),
                false,
            ),
        ])
    }
}

fn uploaded() -> String {
    "uploaded".into()
}

/// `upload_text`: ingested at once as a text source named from the title.
#[derive(Debug, Deserialize)]
pub struct UploadText {
    pub title: String,
    pub text: String,
    #[serde(default = "uploaded")]
    pub section: String,
}

impl ToolParams for UploadText {
    fn schema() -> Value {
        object(vec![
            (
                "title",
                Prop::string("Title; also names the source (as '<title>.txt')")
                    .min(1)
                    .max(200),
                true,
            ),
            (
                "text",
                Prop::string("The text to add").min(1).max(1_000_000),
                true,
            ),
            (
                "section",
                Prop::string("Section label")
                    .min(1)
                    .max(100)
                    .default(json!("uploaded")),
                false,
            ),
        ])
    }
}

/// `delete_source`.
#[derive(Debug, Deserialize)]
pub struct SourceName {
    pub source: String,
}

impl ToolParams for SourceName {
    fn schema() -> Value {
        object(vec![(
            "source",
            Prop::string("The source (file name or URL)")
                .min(1)
                .max(2048),
            true,
        )])
    }
}

/// `delete_by_filter`.
#[derive(Debug, Deserialize)]
pub struct ByFilter {
    #[serde(rename = "where")]
    pub filter: Map<String, Value>,
}

impl ToolParams for ByFilter {
    fn schema() -> Value {
        object(vec![(
            "where",
            Prop::object("Metadata keys and values, AND-ed; a value may be {\"$in\": [..]} or {\"$ne\": v}; never empty").min(1),
            true,
        )])
    }
}
