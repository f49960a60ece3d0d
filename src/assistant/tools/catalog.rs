//! The list of tools (DECISIONS.md, "Tools"): names, descriptions, categories, risks and
//! the schema of each one's params type.

use super::kb_params::*;
use super::schema::ToolParams;
use super::system_tools::*;
use super::{Category, Risk, ToolSpec};

fn spec<P: ToolParams>(
    name: &'static str,
    description: &'static str,
    category: Category,
    risk: Risk,
) -> ToolSpec {
    ToolSpec {
        name,
        description,
        category,
        risk,
        admin_only: false,
        schema: P::schema(),
    }
}

/// Every tool, knowledge base first.
pub(super) fn all() -> Vec<ToolSpec> {
    use Category::{Conversations as Conv, KnowledgeBase as Kb, System as Sys};
    use Risk::{High, Low, Medium};
    vec![
        spec::<SearchKb>(
            "search_knowledge_base",
            "Search the knowledge base for passages relevant to a query (hybrid dense + BM25).",
            Kb,
            Low,
        ),
        spec::<AskKb>(
            "ask_knowledge_base",
            "Answer a question from the knowledge base, citing its sources.",
            Kb,
            Low,
        ),
        spec::<ListDocuments>(
            "list_documents",
            "List stored documents (chunks), a page at a time.",
            Kb,
            Low,
        ),
        spec::<DocumentId>(
            "get_document",
            "Read one stored document (chunk) by id.",
            Kb,
            Low,
        ),
        spec::<NoParams>(
            "get_document_stats",
            "Count documents by source and by language.",
            Kb,
            Low,
        ),
        spec::<NoParams>(
            "list_sources",
            "List every stored source (file name or URL).",
            Kb,
            Low,
        ),
        spec::<ListTasks>(
            "list_tasks",
            "List background tasks (uploads, scrapes), newest first.",
            Kb,
            Low,
        ),
        spec::<TaskId>(
            "get_task",
            "Read one background task's state and result.",
            Kb,
            Low,
        ),
        spec::<ScrapeUrl>(
            "scrape_url",
            "Queue a web page to be scraped into the knowledge base; returns the task id.",
            Kb,
            Medium,
        ),
        spec::<UploadText>(
            "upload_text",
            "Add a text to the knowledge base as a source named after its title.",
            Kb,
            Medium,
        ),
        spec::<DocumentId>(
            "delete_document",
            "Delete one document (chunk). Needs confirmation.",
            Kb,
            High,
        ),
        spec::<SourceName>(
            "delete_source",
            "Delete every document of a source. Needs confirmation.",
            Kb,
            High,
        ),
        spec::<ByFilter>(
            "delete_by_filter",
            "Delete every document whose metadata matches a filter. Needs confirmation.",
            Kb,
            High,
        ),
        spec::<SearchConversations>(
            "search_conversations",
            "Full-text search over your own conversations.",
            Conv,
            Low,
        ),
        spec::<ListConversations>(
            "list_conversations",
            "List your own conversations, most recent first.",
            Conv,
            Low,
        ),
        spec::<CurrentDatetime>(
            "get_current_datetime",
            "The current date and time (UTC, or at a given offset).",
            Sys,
            Low,
        ),
        spec::<Calculate>(
            "calculate",
            "Evaluate an arithmetic expression safely.",
            Sys,
            Low,
        ),
        ToolSpec {
            admin_only: true,
            ..spec::<UpdateSetting>(
                "update_setting",
                "Change one assistant setting. Administrators only; needs confirmation.",
                Sys,
                High,
            )
        },
    ]
}
