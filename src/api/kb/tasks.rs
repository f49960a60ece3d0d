//! `/tasks`: list, read and cancel background tasks.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::api::error::{ApiError, ErrorBody};
use crate::api::extract::{check_range, ApiPath, ApiQuery};
use crate::jobs::{CancelResult, TaskList, TaskStatus, TaskView};
use crate::state::AppState;

/// Filters of `GET /tasks`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TasksQuery {
    /// Only tasks in this state: pending, running, completed, failed, cancelled.
    pub status: Option<String>,
    /// Most tasks returned, 1-200.
    #[param(default = 50, minimum = 1, maximum = 200)]
    pub limit: Option<i64>,
}

/// Newest tasks first.
#[utoipa::path(get, path = "/api/v1/tasks", tag = "tasks", params(TasksQuery),
    responses((status = 200, body = TaskList), (status = 400, body = ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<TasksQuery>,
) -> Result<Json<TaskList>, ApiError> {
    let limit = check_range("limit", q.limit.unwrap_or(50), 1, 200)? as u64;
    let status = q
        .status
        .filter(|s| !s.is_empty())
        .map(|s| TaskStatus::parse(&s))
        .transpose()?;
    Ok(Json(state.jobs.list(status, limit).await?))
}

/// One task.
#[utoipa::path(get, path = "/api/v1/tasks/{task_id}", tag = "tasks",
    params(("task_id" = String, Path, description = "task id")),
    responses((status = 200, body = TaskView), (status = 404, body = ErrorBody)))]
pub async fn get_one(
    State(state): State<AppState>,
    ApiPath(task_id): ApiPath<String>,
) -> Result<Json<TaskView>, ApiError> {
    Ok(Json(state.jobs.get(task_id).await?))
}

/// Cancels a pending or running task.
#[utoipa::path(delete, path = "/api/v1/tasks/{task_id}", tag = "tasks",
    params(("task_id" = String, Path, description = "task id")),
    responses((status = 200, body = CancelResult), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn cancel(
    State(state): State<AppState>,
    ApiPath(task_id): ApiPath<String>,
) -> Result<Json<CancelResult>, ApiError> {
    Ok(Json(state.jobs.cancel(task_id).await?))
}
