//! `POST /reindex`: re-embeds the stored chunks with the running embedder, as a task.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;

use crate::api::error::{ApiError, ErrorBody};
use crate::jobs::TaskAck;
use crate::state::AppState;

/// Starts a background task that re-embeds every chunk whose vector another embedder
/// made (after a start with a different embedder, searches answer 503 until it has
/// finished). Its progress (`result.chunks_done` of `result.chunks_total`) is followed
/// at `/api/v1/tasks/{task_id}`; a task interrupted by a stop or a crash resumes at the
/// next start.
#[utoipa::path(post, path = "/api/v1/reindex", tag = "tasks",
    responses((status = 202, description = "Re-embedding queued", body = TaskAck),
        (status = 409, description = "A reindex task is already pending or running", body = ErrorBody)))]
pub async fn reindex(
    State(state): State<AppState>,
) -> Result<(StatusCode, Json<TaskAck>), ApiError> {
    Ok((
        StatusCode::ACCEPTED,
        Json(state.jobs.submit_reindex().await?),
    ))
}
