//! Parameter types of the knowledge-base tools; their JSON schemas are generated from
//! these declarations by [`tool_params!`].

use serde_json::{Map, Value};

use super::schema::tool_params;

const TASK_STATUSES: &[&str] = &["pending", "running", "completed", "failed", "cancelled"];

tool_params! {
    /// `search_knowledge_base`.
    pub struct SearchKb {
        /// What to search for
        pub query: String => [min 1, max 1000],
        /// Results to return
        pub top_k: usize = 5 => [min 1, max 50],
    }

    /// `ask_knowledge_base`.
    pub struct AskKb {
        /// The question to answer from the knowledge base
        pub question: String => [min 1, max 2000],
        /// Passages to answer from
        pub top_k: usize = 5 => [min 1, max 20],
    }

    /// `list_documents`.
    pub struct ListDocuments {
        /// Page, from 1
        pub page: u64 = 1 => [min 1, max 1_000_000],
        /// Documents per page
        pub page_size: u64 = 20 => [min 1, max 100],
    }

    /// `get_document` and `delete_document`.
    pub struct DocumentId {
        /// The document (chunk) id
        pub document_id: String => [min 1, max 200],
    }

    /// Tools without parameters.
    pub struct NoParams {}

    /// `list_tasks`.
    pub struct ListTasks {
        /// Only tasks in this state
        pub status: Option<String> => [enum TASK_STATUSES],
        /// Most tasks returned, newest first
        pub limit: u64 = 20 => [min 1, max 100],
    }

    /// `get_task`.
    pub struct TaskId {
        /// The task id
        pub task_id: String => [min 1, max 100],
    }

    /// `scrape_url`: queued as a background task.
    pub struct ScrapeUrl {
        /// An http(s) URL
        pub url: String => [min 1, max 2048],
        /// Seconds
        pub timeout: u64 = 30 => [min 5, max 120],
        /// Skip a URL or content already stored
        pub skip_duplicates: bool = true,
    }

    /// `upload_text`: ingested at once as a text source named from the title.
    pub struct UploadText {
        /// Title; also names the source (as '<title>.txt')
        pub title: String => [min 1, max 200],
        /// The text to add
        pub text: String => [min 1, max 1_000_000],
        /// Section label
        pub section: String = "uploaded".into() => [min 1, max 100],
    }

    /// `delete_source`.
    pub struct SourceName {
        /// The source (file name or URL)
        pub source: String => [min 1, max 2048],
    }

    /// `delete_by_filter`.
    pub struct ByFilter {
        /// Metadata keys and values, AND-ed; a value may be {"$in": [..]} or {"$ne": v}; never empty
        #[serde(rename = "where")]
        pub filter: Map<String, Value> => [min 1],
    }
}
