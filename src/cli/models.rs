//! `ragd models`: list the installed GGUF files, or pull a model on a connected machine.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use ragd::config::{Config, LogFormat};

use crate::{init_tracing, load_config, ServeArgs};

#[derive(Args)]
pub struct ModelsArgs {
    #[command(subcommand)]
    action: ModelsAction,
}

#[derive(Subcommand)]
pub enum ModelsAction {
    /// Copy a model from the Hugging Face Hub into the models directory.
    Pull {
        /// Repository on the Hub, `owner/name`.
        repo: String,
        /// File to fetch (repeatable); default: the files ragd reads (a GGUF repo needs one).
        #[arg(long = "file")]
        files: Vec<String>,
        /// Branch, tag or commit.
        #[arg(long, default_value = "main")]
        revision: String,
        /// Models directory (default: ./models or RAGD_MODELS_DIR).
        #[arg(long, env = "RAGD_MODELS_DIR", default_value = "models")]
        models_dir: PathBuf,
        /// Folder name under the models directory (default: the repo's name).
        #[arg(long)]
        name: Option<String>,
    },
    /// Every GGUF under the models directory: architecture, parameters, quantization,
    /// context, size, whether ragd can run it (and why not), and the active `llm_model`.
    List {
        /// Configuration file (default: ./ragd.toml if present; or RAGD_CONFIG).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Models directory (default: the configuration's).
        #[arg(long)]
        models_dir: Option<PathBuf>,
        /// Data directory (where a model chosen at run time is remembered).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// One JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// `ragd models pull ...`: fetches on a connected machine; prints each file written.
pub async fn command(args: ModelsArgs) -> anyhow::Result<()> {
    let (repo, files, revision, models_dir, name) = match args.action {
        ModelsAction::Pull {
            repo,
            files,
            revision,
            models_dir,
            name,
        } => (repo, files, revision, models_dir, name),
        ModelsAction::List {
            config,
            models_dir,
            data_dir,
            json,
        } => {
            let config = load_config(&ServeArgs {
                config,
                models_dir,
                data_dir,
                ..ServeArgs::default()
            })?;
            return models_list(config, json).await;
        }
    };
    init_tracing(LogFormat::Text);
    let folder = name.unwrap_or_else(|| repo.rsplit('/').next().unwrap_or(&repo).to_owned());
    let request = ragd::ml::pull::PullRequest {
        dest: models_dir.join(folder),
        repo,
        revision,
        files,
        token: std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty()),
    };
    let written =
        tokio::task::spawn_blocking(move || ragd::ml::pull::pull(&request, true)).await??;
    for path in written {
        println!("{}", path.display());
    }
    Ok(())
}

/// `ragd models list`: inspects every GGUF's header (no weights are read).
async fn models_list(config: Config, json: bool) -> anyhow::Result<()> {
    // Logs go to stderr: stdout carries only the list.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
        .with_writer(std::io::stderr)
        .try_init();
    let list =
        tokio::task::spawn_blocking(move || ragd::state::installed_models(&config)).await??;
    if json {
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(());
    }
    if list.is_empty() {
        println!("no GGUF files under the models directory");
        return Ok(());
    }
    println!(
        "{:<2} {:<44} {:<10} {:>8} {:<8} {:>8} {:>9} {:<4} WHY NOT",
        "", "FILE", "ARCH", "PARAMS", "QUANT", "CONTEXT", "SIZE", "RUNS"
    );
    for m in &list {
        let line = format!(
            "{:<2} {:<44} {:<10} {:>8} {:<8} {:>8} {:>9} {:<4} {}",
            if m.active { "*" } else { "" },
            m.llm_model,
            if m.summary.architecture.is_empty() {
                "?"
            } else {
                &m.summary.architecture
            },
            human(m.summary.parameters as f64, 1000.0, ""),
            m.summary.quantization,
            m.summary
                .context_length
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into()),
            human(m.summary.size_bytes as f64, 1024.0, "B"),
            if m.summary.runnable { "yes" } else { "no" },
            m.summary.reason.as_deref().unwrap_or(""),
        );
        println!("{}", line.trim_end());
    }
    println!("* = the active llm_model");
    Ok(())
}

/// `1.2M`, `135M`, `4.1G`: a count in units of `base`.
fn human(v: f64, base: f64, unit: &str) -> String {
    let mut v = v;
    for prefix in ["", "K", "M", "G", "T"] {
        if v < base {
            return if prefix.is_empty() || v >= 100.0 {
                format!("{v:.0}{prefix}{unit}")
            } else {
                format!("{v:.1}{prefix}{unit}")
            };
        }
        v /= base;
    }
    format!("{v:.0}P{unit}")
}
