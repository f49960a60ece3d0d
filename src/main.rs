//! The `ragd` command line: parses flags, builds the configuration and calls the library.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use ragd::config::{Config, KeyList, Layer, LogFormat};

mod cli;

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
    /// Manage assistant API users (works on the data directory; loads no models).
    User(cli::user::UserArgs),
    /// List the installed models, or prepare models for an offline install (`pull` needs
    /// a connection; the server never does).
    Models(cli::models::ModelsArgs),
    /// Re-embed the stored chunks with the running server's embedder (after a change of
    /// embedder): starts the server's reindex task and follows it until it ends.
    Reindex(ReindexArgs),
    /// Serve MCP over stdin/stdout (for clients that start a command, e.g. Claude
    /// Desktop): on the data directory as one user, or forwarding to a running server.
    Mcp(McpArgs),
    /// Write a consistent backup archive of the knowledge base (sources, chunks and
    /// vectors, users, conversations, settings, unfinished uploads), from a running
    /// server or from a data directory no server is using.
    Backup(BackupArgs),
    /// Restore a backup archive into a new or empty data directory.
    Restore(RestoreArgs),
    /// Ingest files, folders (recursively), glob patterns and ZIP archives, through a
    /// running server or on a data directory no server is using; only what changed
    /// since the last run is sent. Exit status: 0, 2 when some files were refused, 130
    /// when interrupted (run it again to resume).
    Ingest(IngestArgs),
    /// Ask the running server a question: the answer streams, its sources are listed
    /// below, numbered.
    Ask(AskArgs),
    /// Search the running server's knowledge base.
    Search(AskArgs),
}

#[derive(Args)]
struct AskArgs {
    /// The question (or search query).
    text: String,
    /// Base URL of the running server.
    #[arg(long, default_value = "http://127.0.0.1:8000")]
    server: String,
    /// The server's API key, when it requires one.
    #[arg(long, env = "RAGD_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Passages to use (ask) or return (search).
    #[arg(long, default_value_t = 5)]
    top_k: u64,
    /// Print the server's JSON response instead (for scripts).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct IngestArgs {
    /// Files, folders, glob patterns (quoted) or .zip archives.
    #[arg(required = true)]
    paths: Vec<String>,
    /// Send to a running server (its base URL); the key from RAGD_API_KEY.
    #[arg(long, conflicts_with_all = ["data_dir", "config"])]
    server: Option<String>,
    /// The key sent to --server.
    #[arg(long, env = "RAGD_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Configuration file (default: ./ragd.toml if present; or RAGD_CONFIG).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Data directory to ingest into (must not be in use: use --server then).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Only files matching this glob (file name or path; repeatable).
    #[arg(long)]
    include: Vec<String>,
    /// Leave out files matching this glob (file name or path; repeatable).
    #[arg(long)]
    exclude: Vec<String>,
    /// The section stored with every file.
    #[arg(long, default_value = "uploaded")]
    section: String,
    /// Where the record of earlier runs is kept (default: one file per knowledge base
    /// under ~/.local/state/ragd/ingest).
    #[arg(long)]
    state_file: Option<PathBuf>,
    /// Print the summary as JSON (no progress bar).
    #[arg(long)]
    json: bool,
    /// After the first run, keep watching PATHs: new and changed files are ingested,
    /// deleted files' sources deleted (unless --keep-deleted), renames both; until Ctrl-C.
    #[arg(long)]
    watch: bool,
    /// With --watch: keep the sources of deleted files.
    #[arg(long, requires = "watch")]
    keep_deleted: bool,
}

#[derive(Args)]
struct BackupArgs {
    /// The archive to write (a new file).
    dest: PathBuf,
    /// Back up through a running server (its base URL); needs a server API key in
    /// RAGD_API_KEY when the server has keys.
    #[arg(long, conflicts_with_all = ["data_dir", "config"])]
    server: Option<String>,
    /// The key sent to --server.
    #[arg(long, env = "RAGD_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Configuration file (default: ./ragd.toml if present; or RAGD_CONFIG).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Data directory to back up (must not be in use: use --server then).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

#[derive(Args)]
struct RestoreArgs {
    /// The archive written by `ragd backup`.
    src: PathBuf,
    /// The data directory to restore into: new or empty.
    #[arg(long)]
    data_dir: PathBuf,
}

#[derive(Args)]
struct McpArgs {
    /// Forward to a running server (its base URL, or its /mcp) instead of opening the
    /// data directory.
    #[arg(long, conflicts_with_all = ["config", "data_dir", "models_dir", "user"])]
    server: Option<String>,
    /// The credential sent to --server: a user's api_key:api_secret (or a server key).
    #[arg(long, env = "RAGD_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Configuration file (default: ./ragd.toml if present; or RAGD_CONFIG).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Data directory (must not be in use by a running server: use --server then).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Models directory.
    #[arg(long)]
    models_dir: Option<PathBuf>,
    /// Email of the user the tools run as (default: the first administrator).
    #[arg(long)]
    user: Option<String>,
}

#[derive(Args)]
struct ReindexArgs {
    /// Base URL of the running server.
    #[arg(long, default_value = "http://127.0.0.1:8000")]
    server: String,
    /// The server's API key, when it requires one.
    #[arg(long, env = "RAGD_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
}

#[derive(Args, Default)]
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
    /// Where the local models run: auto, cpu, cuda, cuda:N or metal (RAGD_DEVICE).
    #[arg(long)]
    device: Option<ragd::ml::device::DeviceChoice>,
    /// Comma-separated API keys for /api/v1 (empty: auth off).
    #[arg(long)]
    api_keys: Option<String>,
    /// Log format: text or json.
    #[arg(long, value_parser = ["text", "json"])]
    log_format: Option<String>,
    /// Base URL of an OpenAI-compatible server that runs the LLM (empty: the local engine).
    #[arg(long)]
    llm_url: Option<String>,
    /// Model name to ask `--llm-url` for.
    #[arg(long)]
    llm_remote_model: Option<String>,
    /// Base URL of an embedding server (empty: the local embedder).
    #[arg(long)]
    embed_url: Option<String>,
    /// The embedding server's API: openai (/v1/embeddings) or tei (/embed).
    #[arg(long)]
    embed_api: Option<ragd::config::EmbedApi>,
    /// Model name to ask `--embed-url` for.
    #[arg(long)]
    embed_remote_model: Option<String>,
    /// Base URL of a reranking server (empty: the local cross-encoder).
    #[arg(long)]
    rerank_url: Option<String>,
    /// The reranking server's API: jina (/v1/rerank) or tei (/rerank).
    #[arg(long)]
    rerank_api: Option<ragd::config::RerankApi>,
    /// Model name to ask `--rerank-url` for.
    #[arg(long)]
    rerank_remote_model: Option<String>,
}

impl ServeArgs {
    fn layer(&self) -> Layer {
        Layer {
            host: self.host.clone(),
            port: self.port,
            data_dir: self.data_dir.clone(),
            models_dir: self.models_dir.clone(),
            embedding_model: self.embedding_model.clone(),
            device: self.device,
            api_keys: self.api_keys.clone().map(KeyList::Csv),
            log_format: self.log_format.as_deref().map(|f| {
                if f == "json" {
                    LogFormat::Json
                } else {
                    LogFormat::Text
                }
            }),
            llm_url: self.llm_url.clone(),
            llm_remote_model: self.llm_remote_model.clone(),
            embed_url: self.embed_url.clone(),
            embed_api: self.embed_api,
            embed_remote_model: self.embed_remote_model.clone(),
            rerank_url: self.rerank_url.clone(),
            rerank_api: self.rerank_api,
            rerank_remote_model: self.rerank_remote_model.clone(),
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
    // Colours only on a terminal: a log redirected to a file stays plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

/// Logs of a command that prints its own output: warnings only, on stderr.
fn cli_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
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
            let _lock = ragd::state::data_lock::DataDirLock::acquire(&config.data_dir)?;
            let addr = format!("{}:{}", config.host, config.port);
            let listener = tokio::net::TcpListener::bind(&addr)
                .await
                .with_context(|| format!("binding {addr}"))?;
            ragd::run(config, listener, shutdown_signal()).await
        }
        Command::User(args) => cli::user::command(args).await,
        Command::Models(args) => cli::models::command(args).await,
        Command::Reindex(args) => reindex_command(args).await,
        Command::Mcp(args) => mcp_command(args).await,
        Command::Backup(args) => {
            cli_logs();
            let from = match args.server {
                Some(url) => cli::backup::From::Server {
                    url,
                    api_key: args.api_key,
                },
                None => cli::backup::From::DataDir(
                    load_config(&ServeArgs {
                        config: args.config,
                        data_dir: args.data_dir,
                        ..ServeArgs::default()
                    })?
                    .data_dir,
                ),
            };
            cli::backup::backup(from, args.dest).await
        }
        Command::Ingest(args) => ingest_command(args).await,
        Command::Ask(args) => {
            cli_logs();
            let server = cli::client::Server::new(&args.server, args.api_key.as_deref(), None)?;
            cli::ask::ask(&server, &args.text, args.top_k, args.json).await
        }
        Command::Search(args) => {
            cli_logs();
            let server = cli::client::Server::new(&args.server, args.api_key.as_deref(), None)?;
            cli::ask::search(&server, &args.text, args.top_k, args.json).await
        }
        Command::Restore(args) => {
            cli_logs();
            cli::backup::restore(args.src, args.data_dir).await
        }
    }
}

/// `ragd ingest`: opens the target (the server, or the data directory under its lock),
/// runs the ingest and prints the summary.
async fn ingest_command(args: IngestArgs) -> anyhow::Result<()> {
    cli_logs();
    let (target, target_id, ignore) = match &args.server {
        Some(url) => {
            let server = cli::client::Server::new(url, args.api_key.as_deref(), None)?;
            let id = format!("server:{}", server.base);
            (cli::ingest::Target::Server(server), id, Vec::new())
        }
        None => {
            let mut config = load_config(&ServeArgs {
                config: args.config.clone(),
                data_dir: args.data_dir.clone(),
                ..ServeArgs::default()
            })?;
            // Ingesting needs the embedder, not a language model.
            config.llm_model = "none".into();
            let lock =
                ragd::state::data_lock::DataDirLock::acquire(&config.data_dir).map_err(|e| {
                    anyhow::anyhow!("{e}: ingest through it with `ragd ingest --server URL`")
                })?;
            let dir = std::path::absolute(&config.data_dir)?;
            let state = ragd::AppState::build(config)
                .await
                .with_context(|| format!("opening the data directory {}", dir.display()))?;
            let id = format!("dir:{}", dir.display());
            // The data directory's own files are never ingested from it.
            (
                cli::ingest::Target::Local {
                    state: Box::new(state),
                    _lock: lock,
                },
                id,
                vec![dir],
            )
        }
    };
    let request = ragd::kb::sync::Request {
        paths: args.paths,
        include: args.include,
        exclude: args.exclude,
        section: args.section,
        state_file: args
            .state_file
            .unwrap_or_else(|| cli::ingest::default_state_path(&target_id)),
        target_id,
        delete_missing: args.watch && !args.keep_deleted,
        ignore,
    };
    let stop = cli::ingest::stop_on_ctrl_c();
    if args.watch {
        let watched = cli::ingest::watch(&request, &target, args.json, &stop).await;
        target.close().await?;
        return watched;
    }
    let summary = cli::ingest::run(&request, &target, args.json, &stop).await;
    target.close().await?;
    let summary = summary?;
    cli::ingest::print(&summary, args.json)?;
    if summary.interrupted {
        std::process::exit(130);
    }
    if !summary.refused.is_empty() {
        std::process::exit(2);
    }
    Ok(())
}

/// `ragd mcp`: MCP over stdio. Stdout carries only protocol messages; logs go to stderr.
async fn mcp_command(args: McpArgs) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .try_init();
    if let Some(url) = &args.server {
        let key = args.api_key.filter(|k| !k.is_empty());
        return ragd::api::mcp::stdio::forward(url, key).await;
    }
    let config = load_config(&ServeArgs {
        config: args.config.clone(),
        data_dir: args.data_dir.clone(),
        models_dir: args.models_dir.clone(),
        ..ServeArgs::default()
    })?;
    let _lock = ragd::state::data_lock::DataDirLock::acquire(&config.data_dir)
        .map_err(|e| anyhow::anyhow!("{e}: reach that server with `ragd mcp --server URL`"))?;
    let data_dir = config.data_dir.clone();
    let state = ragd::AppState::build(config)
        .await
        .with_context(|| format!("opening the data directory {}", data_dir.display()))?;
    let users = state.assistant.users.list().await?;
    let chosen = match &args.user {
        Some(email) => users
            .iter()
            .find(|u| u.email.eq_ignore_ascii_case(email.trim()))
            .with_context(|| format!("no user '{email}' (see `ragd user list`)"))?,
        None => users
            .iter()
            .find(|u| u.is_admin)
            .context("no administrator to act as: name a user with --user")?,
    };
    let user = ragd::assistant::users::CurrentUser {
        id: chosen.id.clone(),
        email: chosen.email.clone(),
        is_admin: chosen.is_admin,
    };
    let served = ragd::api::mcp::stdio::serve_local(state.clone(), user).await;
    state.shutdown().await?;
    served
}

/// `ragd reindex`: `POST /api/v1/reindex` (or, if one is already running, follows that
/// task), then prints the task's progress until it ends; fails unless it completed.
async fn reindex_command(args: ReindexArgs) -> anyhow::Result<()> {
    use serde_json::Value;
    let base = args.server.trim_end_matches('/').to_owned();
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(key) = args.api_key.filter(|k| !k.is_empty()) {
        headers.insert(
            "X-API-Key",
            reqwest::header::HeaderValue::from_str(&key)
                .context("RAGD_API_KEY is not a valid header value")?,
        );
    }
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .timeout(std::time::Duration::from_secs(60))
        .build()?;
    let answer = client
        .post(format!("{base}/api/v1/reindex"))
        .send()
        .await
        .with_context(|| format!("reaching ragd at {base} (is it running? see --server)"))?;
    let status = answer.status();
    let body: Value = answer.json().await.unwrap_or(Value::Null);
    let task_id = match status.as_u16() {
        202 => {
            println!("{}", body["message"].as_str().unwrap_or("reindex queued"));
            body["task_id"].as_str().unwrap_or_default().to_owned()
        }
        // One is already pending or running: follow that one.
        409 => {
            println!("{}", body["detail"].as_str().unwrap_or_default());
            let list: Value = client
                .get(format!("{base}/api/v1/tasks?limit=200"))
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            list["tasks"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|t| {
                    t["kind"] == "reindex"
                        && matches!(t["status"].as_str(), Some("pending" | "running"))
                })
                .and_then(|t| t["task_id"].as_str())
                .context("the server lists no reindex task to follow")?
                .to_owned()
        }
        _ => anyhow::bail!(
            "the server answered {status}: {}",
            body["detail"].as_str().unwrap_or("no detail")
        ),
    };
    anyhow::ensure!(!task_id.is_empty(), "the server returned no task id");
    let mut last = String::new();
    loop {
        let task: Value = client
            .get(format!("{base}/api/v1/tasks/{task_id}"))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let state = task["status"].as_str().unwrap_or("unknown");
        let r = &task["result"];
        let line = match (r["chunks_done"].as_u64(), r["chunks_total"].as_u64()) {
            (Some(done), Some(total)) => format!("{state}: {done}/{total} chunks re-embedded"),
            _ => format!(
                "{state}: {:.0}%",
                task["progress"].as_f64().unwrap_or(0.0) * 100.0
            ),
        };
        if line != last {
            println!("{line}");
            last = line;
        }
        match state {
            "completed" => return Ok(()),
            "failed" | "cancelled" => anyhow::bail!(
                "the reindex task {state}: {}",
                task["error"].as_str().unwrap_or("no reason given")
            ),
            _ => tokio::time::sleep(std::time::Duration::from_secs(1)).await,
        }
    }
}
