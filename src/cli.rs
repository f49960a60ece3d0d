//! The commands of `ragd` beyond `serve`, one module each; `main.rs` only parses flags
//! and dispatches. They print their own output (stdout) and log to stderr.

pub mod ask;
pub mod backup;
pub mod client;
pub mod ingest;
pub mod models;
pub mod user;
