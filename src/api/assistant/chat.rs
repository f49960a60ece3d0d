//! Assistant API: chat (in progress).

use axum::Router;

use crate::state::AppState;

/// Routes of this group.
pub fn routes() -> Router<AppState> {
    Router::new()
}
