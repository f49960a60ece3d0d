//! `ragd backup` and `ragd restore`.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use futures::StreamExt as _;
use ragd::kb::backup::{self, Manifest};
use ragd::state::data_lock::DataDirLock;
use tokio::io::AsyncWriteExt as _;

use super::client::Server;

/// Where `ragd backup` reads from.
pub enum From {
    /// A running server (its URL and key).
    Server {
        url: String,
        api_key: Option<String>,
    },
    /// A data directory no server is using.
    DataDir(PathBuf),
}

/// Writes a backup archive to `dest` (refusing to overwrite a file there).
pub async fn backup(from: From, dest: PathBuf) -> anyhow::Result<()> {
    if dest.exists() {
        anyhow::bail!(
            "{} already exists: name a new file for the backup",
            dest.display()
        );
    }
    let manifest = match from {
        From::Server { url, api_key } => from_server(&url, api_key.as_deref(), &dest).await?,
        From::DataDir(dir) => from_data_dir(dir, dest.clone()).await?,
    };
    print_summary("backed up", &manifest);
    println!("archive: {}", dest.display());
    Ok(())
}

async fn from_server(url: &str, key: Option<&str>, dest: &Path) -> anyhow::Result<Manifest> {
    let server = Server::new(url, key, None)?;
    eprintln!("asking {} for a backup...", server.base);
    let r = server
        .http
        .post(server.url("/api/v1/admin/backup"))
        .send()
        .await
        .with_context(|| server.unreachable())?;
    let r = server.check(r).await?;
    let total = r.content_length();
    let part = PathBuf::from(format!("{}.part", dest.display()));
    let mut file = tokio::fs::File::create(&part)
        .await
        .with_context(|| format!("creating {}", part.display()))?;
    let bar = indicatif::ProgressBar::new(total.unwrap_or(0));
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {bytes}/{total_bytes} {bytes_per_sec} {wide_bar} {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut body = r.bytes_stream();
    let copied = async {
        while let Some(chunk) = body.next().await {
            let chunk = chunk.context("the download broke off")?;
            file.write_all(&chunk).await?;
            bar.inc(chunk.len() as u64);
        }
        file.sync_all().await?;
        anyhow::Ok(())
    }
    .await;
    bar.finish_and_clear();
    if let Err(e) = copied {
        let _ = tokio::fs::remove_file(&part).await;
        return Err(e);
    }
    tokio::fs::rename(&part, dest).await?;
    // What arrived must be a whole backup.
    let d = dest.to_owned();
    Ok(tokio::task::spawn_blocking(move || backup::read_manifest(&d)).await??)
}

async fn from_data_dir(dir: PathBuf, dest: PathBuf) -> anyhow::Result<Manifest> {
    let _lock = DataDirLock::acquire(&dir).map_err(|e| {
        anyhow::anyhow!("{e}: back it up through that server with `ragd backup --server URL`")
    })?;
    let db = dir.join("ragd.sqlite");
    anyhow::ensure!(
        db.exists(),
        "{} holds no ragd database (ragd.sqlite)",
        dir.display()
    );
    tokio::task::spawn_blocking(move || -> anyhow::Result<Manifest> {
        let store = ragd::store::Store::open(&db).context("opening the database")?;
        let src = backup::Source {
            store: &store,
            data_dir: &dir,
        };
        Ok(backup::create(&src, &dest, &|step| eprintln!("{step}..."))?)
    })
    .await?
}

/// Restores `src` into the empty (or new) data directory `data_dir`.
pub async fn restore(src: PathBuf, data_dir: PathBuf) -> anyhow::Result<()> {
    let _lock = DataDirLock::acquire(&data_dir).map_err(|e| {
        anyhow::anyhow!("{e}: stop it first, and restore into a new or empty directory")
    })?;
    let dir = data_dir.clone();
    let manifest = tokio::task::spawn_blocking(move || {
        backup::restore(&src, &dir, &|step| eprintln!("{step}..."))
    })
    .await??;
    print_summary("restored", &manifest);
    println!(
        "data directory: {} (the search indexes are rebuilt when `ragd serve` starts on it)",
        data_dir.display()
    );
    Ok(())
}

fn print_summary(what: &str, m: &Manifest) {
    println!(
        "{what}: {} sources, {} chunks, {} users, {} conversations (ragd {}, schema {}, taken {})",
        m.sources,
        m.chunks,
        m.users,
        m.conversations,
        m.ragd_version,
        m.schema_version,
        m.created_at
    );
}
