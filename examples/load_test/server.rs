//! The server under test: `ragd serve` on a free port and a temp data directory, its log
//! in a file there, and the assistant users the clients sign in as.

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

/// A running `ragd serve`.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Where its log lines go.
    pub log: PathBuf,
}

/// What the server is started with.
pub struct Launch<'a> {
    pub bin: &'a Path,
    pub data_dir: &'a Path,
    pub models_dir: &'a Path,
    /// Extra `RAGD_*` settings, e.g. a rate limit.
    pub env: &'a [(String, String)],
}

impl Server {
    /// Starts the server and waits for its "ragd listening" log line.
    pub fn start(l: &Launch<'_>) -> anyhow::Result<Self> {
        let log = l.data_dir.join("server.log");
        let mut cmd = Command::new(l.bin);
        cmd.args(["serve", "--port", "0", "--log-format", "json"])
            .arg("--data-dir")
            .arg(l.data_dir)
            .arg("--models-dir")
            .arg(l.models_dir)
            // No ragd.toml of a checkout is picked up from the temp directory.
            .current_dir(l.data_dir)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in l.env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", l.bin.display()))?;
        let stdout = child.stdout.take().context("server stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let mut file = std::fs::File::create(&log)?;
        let deadline = Instant::now() + Duration::from_secs(180);
        while Instant::now() < deadline {
            let Some(Ok(line)) = lines.next() else { break };
            writeln!(file, "{line}")?;
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if v["fields"]["message"] == "ragd listening" {
                let addr = v["fields"]["addr"].as_str().context("addr")?.to_owned();
                // Keeps copying the log so the server never blocks on a full pipe.
                std::thread::spawn(move || {
                    for line in lines.map_while(Result::ok) {
                        let _ = writeln!(file, "{line}");
                    }
                });
                return Ok(Self {
                    child,
                    base: format!("http://{addr}"),
                    log,
                });
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        bail!("ragd did not start; see {}", log.display())
    }

    /// Server log lines at `ERROR` level.
    pub fn error_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"level\":\"ERROR\""))
            .map(str::to_owned)
            .collect()
    }

    /// CPU time the server has used so far (user + system), in seconds.
    pub fn cpu_seconds(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        // Fields after the parenthesised command name; utime and stime are 14th and 15th.
        let rest = stat.rsplit_once(')')?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
        // Clock ticks of USER_HZ, which is 100 on Linux.
        Some(ticks / 100.0)
    }

    /// Peak resident memory of the server so far (`VmHWM`), in MiB.
    pub fn peak_rss_mib(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let kb: f64 = status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        Some(kb / 1024.0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Creates `n` assistant users with `ragd user add` on `data_dir` (before the server
/// starts); returns their `key:secret` credentials.
pub fn create_users(bin: &Path, data_dir: &Path, n: usize) -> anyhow::Result<Vec<String>> {
    (0..n)
        .map(|i| create_user(bin, data_dir, &format!("load{i}@example.com"), false))
        .collect()
}

/// Creates one assistant user (an administrator when `admin`) with `ragd user add`;
/// returns its `key:secret` credentials.
pub fn create_user(
    bin: &Path,
    data_dir: &Path,
    email: &str,
    admin: bool,
) -> anyhow::Result<String> {
    let mut cmd = Command::new(bin);
    cmd.args(["user", "add", email])
        .args(["--password", "load-test-password"])
        .arg("--data-dir")
        .arg(data_dir)
        .current_dir(data_dir)
        .env("RUST_LOG", "warn");
    if admin {
        cmd.arg("--admin");
    }
    let out = cmd.output().context("ragd user add")?;
    if !out.status.success() {
        bail!(
            "ragd user add failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8(out.stdout)?;
    let last = stdout.lines().last().context("no credentials printed")?;
    Ok(last.trim().to_owned())
}
