//! The `ragd` command line: parses flags, builds the configuration and calls the library.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use ragd::config::{Config, KeyList, Layer, LogFormat};

#[derive(Parser)]
#[command(
    name = "ragd",
    version,
    about = "An offline knowledge base and AI assistant"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the knowledge-base and assistant APIs.
    Serve(ServeArgs),
}

#[derive(Args)]
struct ServeArgs {
    /// Configuration file (default: ./ragd.toml if present; or RAGD_CONFIG).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address to bind.
    #[arg(long)]
    host: Option<String>,
    /// Port to bind.
    #[arg(long)]
    port: Option<u16>,
    /// Data directory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Models directory.
    #[arg(long)]
    models_dir: Option<PathBuf>,
    /// Embedding model: folder under the models directory, or a path.
    #[arg(long)]
    embedding_model: Option<String>,
    /// Comma-separated API keys for /api/v1 (empty: auth off).
    #[arg(long)]
    api_keys: Option<String>,
    /// Log format: text or json.
    #[arg(long, value_parser = ["text", "json"])]
    log_format: Option<String>,
}

impl ServeArgs {
    fn layer(&self) -> Layer {
        Layer {
            host: self.host.clone(),
            port: self.port,
            data_dir: self.data_dir.clone(),
            models_dir: self.models_dir.clone(),
            embedding_model: self.embedding_model.clone(),
            api_keys: self.api_keys.clone().map(KeyList::Csv),
            log_format: self.log_format.as_deref().map(|f| {
                if f == "json" {
                    LogFormat::Json
                } else {
                    LogFormat::Text
                }
            }),
            ..Layer::default()
        }
    }
}

fn load_config(args: &ServeArgs) -> anyhow::Result<Config> {
    let env: HashMap<String, String> = std::env::vars().collect();
    let file = match args
        .config
        .clone()
        .or_else(|| env.get("RAGD_CONFIG").map(PathBuf::from))
    {
        Some(path) => Layer::from_file(&path)?,
        None if std::path::Path::new("ragd.toml").exists() => {
            Layer::from_file("ragd.toml".as_ref())?
        }
        None => Layer::default(),
    };
    Config::resolve([file, Layer::from_env(&env)?, args.layer()])
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,tantivy=warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutdown signal received");
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => {
            let config = load_config(&args)?;
            init_tracing(config.log_format);
            let addr = format!("{}:{}", config.host, config.port);
            let listener = tokio::net::TcpListener::bind(&addr)
                .await
                .with_context(|| format!("binding {addr}"))?;
            ragd::run(config, listener, shutdown_signal()).await
        }
    }
}
