//! Onboarding sessions: the questions of `assets/onboarding/` are answered one by one
//! (pre-filled ones skipped), a configuration is generated, reviewed, then executed:
//! settings saved, modules enabled, one scrape task queued per knowledge source.
//!
//! States: `in_progress` -> `review` (every question answered or an optional one
//! skipped) -> `completed` | `failed` (by `execute`). Answers may still be changed in
//! `review`; nothing changes after `completed`/`failed` (409). A session belongs to
//! the user who started it; anyone else gets 404. Every signed-in user may onboard (the
//! contract restricts only `get_settings` to administrators); because the configuration
//! it applies is global, each execution records who applied which settings (`applied_by`
//! in the session's result, and the log). The API counts these operations in the chat
//! rate-limit scope.

pub mod questions;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::settings::Settings;
use super::users::CurrentUser;
use super::AssistantError;
use crate::error::Error;
use crate::jobs::Jobs;
use crate::store::onboarding::{self as repo, OnboardingRow};
use crate::store::Store;
use crate::time::Clock;

type Result<T, E = AssistantError> = std::result::Result<T, E>;

/// Seconds each scrape of a knowledge source may take.
const SCRAPE_TIMEOUT_SECS: u64 = 30;

/// What a session remembers beyond its status.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct State {
    /// Question key -> normalised answer (`null`: an optional question skipped).
    answers: Map<String, Value>,
    /// Keys answered by `start_onboarding`.
    prefilled: Vec<String>,
    /// Generated when the session reaches `review`.
    configuration: Option<Value>,
    /// What `execute` applied.
    result: Option<Value>,
    /// Why `execute` failed.
    error: Option<String>,
}

/// The onboarding service.
#[derive(Clone)]
pub struct Onboarding {
    store: Store,
    settings: Settings,
    jobs: Jobs,
    clock: Clock,
    /// Executions run one at a time, so a configuration is never applied twice.
    executing: Arc<tokio::sync::Mutex<()>>,
}

impl Onboarding {
    /// The service.
    pub fn new(store: Store, settings: Settings, jobs: Jobs, clock: Clock) -> Self {
        Self {
            store,
            settings,
            jobs,
            clock,
            executing: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// Starts a session; `modules` and `company_name`, when given, are validated and
    /// pre-filled. Returns the session's view.
    pub async fn start(
        &self,
        user: &CurrentUser,
        modules: Option<Value>,
        company_name: Option<Value>,
    ) -> Result<Value> {
        let mut state = State::default();
        for (key, given) in [("modules", modules), ("company_name", company_name)] {
            let Some(given) = given else { continue };
            let q = questions::find(key).ok_or_else(|| {
                AssistantError::Internal(anyhow::anyhow!("question '{key}' missing"))
            })?;
            let answer = q
                .validate(&given)
                .map_err(|why| AssistantError::BadRequest(format!("{key}: {why}")))?;
            if !answer.is_null() {
                state.answers.insert(key.to_owned(), answer);
                state.prefilled.push(key.to_owned());
            }
        }
        let status = advance(&mut state);
        let now = self.clock.now_iso();
        let row = OnboardingRow {
            id: uuid::Uuid::new_v4().to_string(),
            user_id: user.id.clone(),
            status: status.into(),
            state: encode(&state)?,
            created_at: now.clone(),
            updated_at: now,
        };
        let r = row.clone();
        self.store.write(move |tx| repo::insert(tx, &r)).await?;
        tracing::info!(session_id = %row.id, user_id = %user.id, prefilled = ?state.prefilled, "onboarding started");
        view(&row, &state)
    }

    /// Records one answer after validating it; returns the session's view (the next
    /// question, or `review` with the generated configuration).
    pub async fn submit(
        &self,
        user: &CurrentUser,
        session_id: &str,
        question_key: &str,
        answer: Value,
    ) -> Result<Value> {
        let q = questions::find(question_key).ok_or_else(|| {
            AssistantError::BadRequest(format!(
                "unknown question_key '{question_key}' (known: {})",
                questions::all()
                    .iter()
                    .map(|q| q.key.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        let normalised = q
            .validate(&answer)
            .map_err(|why| AssistantError::BadRequest(format!("{question_key}: {why}")))?;
        let (sid, uid, key, now) = (
            session_id.to_owned(),
            user.id.clone(),
            question_key.to_owned(),
            self.clock.now_iso(),
        );
        let (row, state) = self
            .store
            .write(move |tx| {
                let mut row = repo::get(tx, &sid, &uid)?.ok_or_else(|| {
                    Error::NotFound(format!("onboarding session '{sid}' not found"))
                })?;
                if !matches!(row.status.as_str(), "in_progress" | "review") {
                    return Err(Error::Conflict(format!(
                        "onboarding session is {}; answers can no longer change",
                        row.status
                    )));
                }
                let mut state = decode(&row.state)?;
                state.answers.insert(key, normalised);
                row.status = advance(&mut state).into();
                row.state = encode(&state)?;
                row.updated_at = now;
                repo::update(tx, &row.id, &row.status, &row.state, &row.updated_at)?;
                Ok((row, state))
            })
            .await?;
        tracing::info!(session_id, question_key, status = %row.status, "onboarding answer recorded");
        view(&row, &state)
    }

    /// The whole state of a session.
    pub async fn status(&self, user: &CurrentUser, session_id: &str) -> Result<Value> {
        let row = self.load(user, session_id).await?;
        let state = decode(&row.state)?;
        view(&row, &state)
    }

    /// Applies the generated configuration; only from `review` (409 otherwise).
    pub async fn execute(&self, user: &CurrentUser, session_id: &str) -> Result<Value> {
        let _one_at_a_time = self.executing.lock().await;
        let mut row = self.load(user, session_id).await?;
        if row.status != "review" {
            return Err(AssistantError::Conflict(format!(
                "onboarding session is {}; it can be executed only in review",
                row.status
            )));
        }
        let mut state = decode(&row.state)?;
        let config = state.configuration.clone().unwrap_or(Value::Null);
        let mut applied = json!({
            "settings": [],
            "enabled_modules": [],
            "scrape_tasks": [],
            "applied_by": {"user_id": user.id, "email": user.email},
        });
        let outcome = self.apply(&config, &mut applied).await;
        match outcome {
            Ok(()) => {
                row.status = "completed".into();
                tracing::info!(
                    session_id,
                    user_id = %user.id,
                    email = %user.email,
                    settings = %applied["settings"],
                    "onboarding configuration executed"
                );
            }
            Err(e) => {
                let reason = match &e {
                    AssistantError::Internal(inner) => {
                        tracing::error!(session_id, error = ?inner, "onboarding execution failed");
                        "internal error while applying the configuration; see the server log"
                            .to_owned()
                    }
                    other => other.to_string(),
                };
                tracing::warn!(session_id, %reason, "onboarding configuration failed");
                row.status = "failed".into();
                state.error = Some(reason);
            }
        }
        applied["executed_at"] = json!(self.clock.now_iso());
        state.result = Some(applied);
        row.state = encode(&state)?;
        row.updated_at = self.clock.now_iso();
        let r = row.clone();
        self.store
            .write(move |tx| repo::update(tx, &r.id, &r.status, &r.state, &r.updated_at))
            .await?;
        view(&row, &state)
    }

    /// Saves the settings, then queues the scrapes, recording each step in `applied`.
    async fn apply(&self, config: &Value, applied: &mut Value) -> Result<()> {
        let mut patch = config["settings"].as_object().cloned().unwrap_or_default();
        patch.insert("onboarding_completed".into(), Value::Bool(true));
        let keys: Vec<String> = patch.keys().cloned().collect();
        let saved = self.settings.apply(patch).await?;
        applied["settings"] = json!(keys);
        applied["enabled_modules"] = json!(saved.enabled_modules);
        let urls: Vec<String> = config["scrape_urls"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|u| u.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        for url in urls {
            let ack = self
                .jobs
                .submit_scrape(vec![url.clone()], SCRAPE_TIMEOUT_SECS, true)
                .await?;
            if let Some(tasks) = applied["scrape_tasks"].as_array_mut() {
                tasks.push(json!({"url": url, "task_id": ack.task_id}));
            }
        }
        Ok(())
    }

    async fn load(&self, user: &CurrentUser, session_id: &str) -> Result<OnboardingRow> {
        let (sid, uid) = (session_id.to_owned(), user.id.clone());
        self.store
            .read(move |c| repo::get(c, &sid, &uid))
            .await?
            .ok_or_else(|| {
                AssistantError::NotFound(format!("onboarding session '{session_id}' not found"))
            })
    }
}

/// The first question neither answered nor skipped.
fn open_question(state: &State) -> Option<&'static questions::Question> {
    questions::all()
        .iter()
        .find(|q| !state.answers.contains_key(&q.key))
}

/// `in_progress` while a question is open; else `review`, with the configuration.
fn advance(state: &mut State) -> &'static str {
    if open_question(state).is_some() {
        state.configuration = None;
        return "in_progress";
    }
    let mut settings = Map::new();
    for q in questions::all() {
        match state.answers.get(&q.key) {
            Some(v) if !v.is_null() => {
                settings.insert(q.setting.clone(), v.clone());
            }
            _ => {}
        }
    }
    let urls = settings
        .get("knowledge_sources")
        .cloned()
        .unwrap_or_else(|| json!([]));
    state.configuration = Some(json!({"settings": settings, "scrape_urls": urls}));
    "review"
}

fn view(row: &OnboardingRow, state: &State) -> Result<Value> {
    let total = questions::all().len();
    let answered = questions::all()
        .iter()
        .filter(|q| state.answers.contains_key(&q.key))
        .count();
    let question = if row.status == "in_progress" {
        open_question(state)
    } else {
        None
    };
    Ok(json!({
        "session_id": row.id,
        "status": row.status,
        "question": question,
        "progress": {
            "answered": answered,
            "total": total,
            "percent": (answered * 100).checked_div(total).unwrap_or(100),
        },
        "answers": state.answers,
        // Every question in order, so a client can go back to an answered one.
        "questions": questions::all(),
        "prefilled": state.prefilled,
        "configuration": state.configuration,
        "result": state.result,
        "error": state.error,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }))
}

fn encode(state: &State) -> Result<String, Error> {
    serde_json::to_string(state).map_err(|e| Error::Internal(e.into()))
}

fn decode(text: &str) -> Result<State, Error> {
    serde_json::from_str(text)
        .map_err(|e| Error::Internal(anyhow::Error::new(e).context("onboarding state")))
}
