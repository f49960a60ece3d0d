//! The assistant service: users, settings, rate limits, conversations, tools and pending
//! actions, onboarding and the chat engine. No HTTP types here (see `api::assistant`).

pub mod actions;
pub mod chat;
pub mod conversations;
pub mod error;
mod history;
pub mod llm_models;
pub mod onboarding;
pub mod ratelimit;
pub mod settings;
pub mod tools;
pub mod users;

pub use error::AssistantError;

use std::sync::Arc;

use crate::config::Config;
use crate::jobs::Jobs;
use crate::kb::KnowledgeBase;
use crate::ml::Models;
use crate::store::Store;
use crate::time::Clock;

/// Everything the assistant operations run on; built once in `state.rs`.
pub struct Assistant {
    /// The resolved configuration.
    pub config: Arc<Config>,
    /// SQLite (users, conversations, actions, settings ...).
    pub store: Store,
    /// The knowledge base the tools and the chat use.
    pub kb: Arc<KnowledgeBase>,
    /// The models (the chat's LLM), shared with the knowledge base.
    pub models: Models,
    /// Background tasks (scrapes queued by tools and onboarding).
    pub jobs: Jobs,
    /// The time expiries and windows are measured by.
    pub clock: Clock,
    /// Users, logins, API keys and bearer tokens.
    pub users: users::Users,
    /// Per-user request budgets.
    pub limits: ratelimit::RateLimiter,
    /// The settings record.
    pub settings: settings::Settings,
    /// Conversations, their messages and their full-text index.
    pub conversations: Arc<conversations::Conversations>,
    /// The tool registry (list, get, validate); running is on `Assistant` (`tools.rs`).
    pub tools: tools::ToolRegistry,
    /// High-risk tool calls awaiting confirmation.
    pub actions: actions::Actions,
    /// Onboarding sessions.
    pub onboarding: onboarding::Onboarding,
    /// Picks the tools a chat turn offers (see `chat::router`).
    pub router: chat::router::ToolRouter,
}

/// Everything an [`Assistant`] is built from.
pub struct AssistantParts {
    pub config: Arc<Config>,
    pub kb: Arc<KnowledgeBase>,
    pub jobs: Jobs,
    pub models: Models,
    pub clock: Clock,
}

impl Assistant {
    /// Builds the assistant's services over the knowledge base's database.
    pub fn open(parts: AssistantParts) -> anyhow::Result<Self> {
        let AssistantParts {
            config,
            kb,
            jobs,
            models,
            clock,
        } = parts;
        let store = kb.store().clone();
        let users = users::Users::new(store.clone(), clock.clone(), config.jwt_secret.clone());
        // Start-up only: a brief blocking write (and one argon2 hash) on a fresh database.
        users.ensure_initial_admin(&config.data_dir)?;
        let limits = ratelimit::RateLimiter::new(
            clock.clone(),
            config.rate_limit_chat,
            config.rate_limit_tools,
        );
        let settings = settings::Settings::new(store.clone(), config.clone(), clock.clone())
            .with_llm(models.llm.clone());
        let onboarding = onboarding::Onboarding::new(
            store.clone(),
            settings.clone(),
            jobs.clone(),
            clock.clone(),
        );
        // Start-up only: opens (and, when stale, rebuilds) the conversation index.
        let conversations = Arc::new(conversations::Conversations::open(
            store.clone(),
            &config.data_dir,
            clock.clone(),
            config.conversation_retention_days,
        )?);
        conversations::spawn_sweeper(&conversations);
        let actions = actions::Actions::open(store.clone(), clock.clone(), config.action_ttl_secs)?;
        Ok(Self {
            conversations,
            tools: tools::ToolRegistry::new(),
            router: chat::router::ToolRouter::new(),
            actions,
            onboarding,
            users,
            limits,
            settings,
            store,
            clock,
            config,
            models,
            kb,
            jobs,
        })
    }
}
