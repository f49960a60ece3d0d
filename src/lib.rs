//! ragd: an offline knowledge base and assistant in one process.
//!
//! The module tree follows the layers (each may use those below it, never above):
//!
//! ```text
//! api                      HTTP only: both APIs, errors, SSE, OpenAPI
//!  -> assistant            users, conversations, chat, tools, onboarding
//!   -> jobs                durable background tasks (async uploads, scrapes)
//!    -> kb                 the knowledge base: ingest, search, query, documents
//!     -> parse, chunk, retrieval, ml, store
//! ```
//!
//! Only `store` speaks SQL, only `ml` names candle, only `retrieval` names usearch and
//! tantivy, only `parse` touches file formats; `state` builds and wires everything.
//! `telemetry` (the Prometheus metrics) and `time` sit below every layer.
//! `scripts/check_layers.sh` checks these rules.

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
pub mod telemetry;
pub mod time;

use std::future::Future;

pub use config::Config;
pub use state::{AppState, AppStateBuilder};

/// Builds every service from `config` (or a builder carrying what an embedding program
/// supplies: a clock, a generator), then serves both APIs on `listener` until `shutdown`
/// resolves. Derived indexes are flushed to disk before it returns.
pub async fn run(
    config: impl Into<AppStateBuilder>,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let state = config.into().build().await?;
    let folders = kb::sync::watch::Folders::start(
        state.kb.clone(),
        &state.config.watch_dirs,
        &state.config.data_dir,
        state.config.watch_keep_deleted,
    );
    let folders = match folders {
        Ok(f) => f,
        Err(e) => {
            state.shutdown().await?;
            return Err(e);
        }
    };
    let app = api::app(state.clone());
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "ragd listening");
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await;
    if let Some(f) = folders {
        f.stop().await;
    }
    served?;
    tracing::info!("shutting down: flushing indexes");
    state.shutdown().await?;
    Ok(())
}
