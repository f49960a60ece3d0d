//! ragd: an offline knowledge base and assistant in one process.
//!
//! The module tree follows the layers `api -> kb -> parse/chunk/retrieval/ml/store`:
//! only `store` speaks SQL, only `ml` names candle, only `retrieval` names usearch and
//! tantivy, only `parse` touches file formats.

pub mod api;
pub mod assistant;
pub mod chunk;
pub mod config;
pub mod error;
pub mod jobs;
pub mod kb;
pub mod ml;
pub mod parse;
pub mod retrieval;
pub mod state;
pub mod store;
pub mod time;

use std::future::Future;

pub use config::Config;
pub use state::AppState;

/// Builds every service from `config`, then serves both APIs on `listener` until
/// `shutdown` resolves. Derived indexes are flushed to disk before it returns.
pub async fn run(
    config: Config,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let state = AppState::build(config).await?;
    let app = api::app(state.clone());
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "ragd listening");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    tracing::info!("shutting down: flushing indexes");
    state.shutdown().await?;
    Ok(())
}
