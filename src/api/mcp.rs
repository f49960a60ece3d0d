//! The MCP server (Model Context Protocol): the assistant's tools and the knowledge
//! base's sources for agents and desktop clients (Claude Desktop, Claude Code, IDEs).
//! [`protocol`] answers the methods whatever carries them; [`http`] is the streamable
//! HTTP transport at `/mcp`; [`stdio`] serves the same over stdin/stdout for `ragd mcp`,
//! on a data directory or forwarding to a running server. docs/mcp.md is the user's guide.

pub mod confirm;
pub mod http;
pub mod jsonrpc;
pub mod protocol;
pub mod resources;
pub mod sessions;
pub mod stdio;
pub mod tools;

use std::sync::Arc;

use axum::routing::post;
use axum::Router;

use crate::state::AppState;

/// The `/mcp` route (POST, GET, DELETE), to be merged into the application.
pub fn routes<S>(state: AppState) -> Router<S> {
    let shared = http::McpHttp {
        server: protocol::McpServer::new(state),
        sessions: Arc::new(sessions::Sessions::default()),
    };
    Router::new()
        .route("/mcp", post(http::post).get(http::get).delete(http::delete))
        .with_state(shared)
}
