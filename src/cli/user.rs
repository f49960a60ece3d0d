//! `ragd user`: manage the assistant API's users on the data directory (no models load).

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Subcommand};

use crate::{load_config, ServeArgs};

#[derive(Args)]
pub struct UserArgs {
    /// Configuration file (default: ./ragd.toml if present; or RAGD_CONFIG).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Data directory.
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    #[command(subcommand)]
    action: UserAction,
}

#[derive(Subcommand)]
pub enum UserAction {
    /// Create a user; prints `<api_key>:<api_secret>` as the last line (shown once).
    Add {
        email: String,
        /// Make the user an administrator.
        #[arg(long)]
        admin: bool,
        /// Password (at least 8 characters); a random one is generated and printed if absent.
        #[arg(long)]
        password: Option<String>,
        /// Display name.
        #[arg(long)]
        name: Option<String>,
    },
    /// List users.
    List,
    /// Remove a user.
    Remove { email: String },
    /// Issue a new API key and secret; prints `<api_key>:<api_secret>` as the last line.
    ResetKey { email: String },
}

/// `ragd user ...`: opens the database (running migrations) and nothing else.
pub async fn command(args: UserArgs) -> anyhow::Result<()> {
    use ragd::assistant::users::{NewUser, Users};
    let config = load_config(&ServeArgs {
        config: args.config.clone(),
        data_dir: args.data_dir.clone(),
        ..ServeArgs::default()
    })?;
    // Logs go to stderr: stdout carries only the command's output.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
        .with_writer(std::io::stderr)
        .try_init();
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating data directory {}", config.data_dir.display()))?;
    let store = ragd::store::Store::open(&config.data_dir.join("ragd.sqlite"))
        .context("opening the database")?;
    let users = Users::new(
        store,
        ragd::time::Clock::default(),
        config.jwt_secret.clone(),
    );
    match args.action {
        UserAction::Add {
            email,
            admin,
            password,
            name,
        } => {
            let generated = password.is_none();
            let c = users
                .create(NewUser {
                    email,
                    name,
                    password,
                    is_admin: admin,
                })
                .await?;
            println!("created user {} (admin: {})", c.user.email, c.user.is_admin);
            if generated {
                println!("password: {}", c.password);
            }
            println!("{}:{}", c.api_key, c.api_secret);
        }
        UserAction::List => {
            for u in users.list().await? {
                let role = if u.is_admin { "admin" } else { "user" };
                println!("{}\t{}\t{}\t{}", u.email, role, u.api_key, u.created_at);
            }
        }
        UserAction::Remove { email } => {
            users.remove(&email).await?;
            println!("removed user {email}");
        }
        UserAction::ResetKey { email } => {
            let (key, secret) = users.reset_key(&email).await?;
            println!("new API key for {email} (the old one no longer works):");
            println!("{key}:{secret}");
        }
    }
    Ok(())
}
