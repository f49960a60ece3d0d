//! `POST /admin/backup`: a consistent backup archive of the whole data directory,
//! streamed to the caller (administrators only).

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::api::assistant::auth::session_cookie;
use crate::api::auth;
use crate::api::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// A backup archive (tar: `manifest.json`, `ragd.sqlite`, the files of unfinished
/// upload tasks) taken while the server keeps serving; `ragd restore` puts it into an
/// empty data directory. Needs a server API key, or the session of an administrator.
#[utoipa::path(post, path = "/api/v1/admin/backup", tag = "admin",
    responses((status = 200, description = "The archive", content_type = "application/x-tar"),
        (status = 403, description = "Not an administrator", body = ErrorBody)))]
pub async fn backup(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    // The key middleware lets the web page's signed-in users through: only an
    // administrator among them may take the whole knowledge base away.
    if state.config.auth_enabled() && !headers.contains_key(auth::HEADER) {
        let user = match session_cookie(&headers) {
            Some(sid) => state.assistant.users.by_session(&sid).await.ok(),
            None => None,
        };
        if !user.is_some_and(|u| u.is_admin) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "backups are for administrators: use a server API key",
            ));
        }
    }
    let dir = state.config.data_dir.clone();
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let path = dir.join(format!(".backup-{}.tar", uuid::Uuid::new_v4()));
    let manifest = state.kb.backup(dir, path.clone()).await?;
    let file = tokio::fs::File::open(&path).await.map_err(internal)?;
    let len = file.metadata().await.map_err(internal)?.len();
    // The open file stays readable once unlinked: nothing is left behind, even when the
    // client goes away mid-download.
    tokio::fs::remove_file(&path).await.map_err(internal)?;
    tracing::info!(
        sources = manifest.sources,
        chunks = manifest.chunks,
        bytes = len,
        "backup streamed"
    );
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-tar".to_owned()),
            (header::CONTENT_LENGTH, len.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"ragd-backup-{stamp}.tar\""),
            ),
        ],
        Body::from_stream(tokio_util::io::ReaderStream::new(file)),
    )
        .into_response())
}

fn internal(e: std::io::Error) -> ApiError {
    ApiError::from(crate::error::Error::Internal(
        anyhow::Error::new(e).context("streaming a backup"),
    ))
}
