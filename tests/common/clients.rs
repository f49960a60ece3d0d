//! The real client SDKs (openai, anthropic, mcp) driving ragd: Python scripts under
//! `tests/clients/`, run with the venv `scripts/py_clients.sh` makes (`scripts/test.sh`
//! runs it and sets `$RAGD_TEST_CLIENT_PYTHON`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::engines::made_by;

/// The venv's python with the SDKs installed.
pub fn client_python() -> PathBuf {
    made_by(
        "RAGD_TEST_CLIENT_PYTHON",
        "ragd-clients/venv/bin/python",
        "scripts/py_clients.sh",
    )
}

/// What a client script printed and how it ended.
#[derive(Debug)]
pub struct ClientRun {
    /// Whether it exited with status 0.
    pub ok: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl ClientRun {
    /// Panics with both streams unless the script succeeded.
    pub fn assert_ok(&self) -> &Self {
        assert!(
            self.ok,
            "client script failed\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// The stdout lines that start with `prefix`, the prefix cut off.
    pub fn lines_with(&self, prefix: &str) -> Vec<String> {
        self.stdout
            .lines()
            .filter_map(|l| l.strip_prefix(prefix).map(str::to_owned))
            .collect()
    }
}

/// Runs `tests/clients/<script>` with `args` and extra environment `envs`, killed after
/// `timeout` (a hang is a failure, not a stuck test).
pub async fn run_client(
    script: &str,
    args: &[&str],
    envs: &[(&str, &str)],
    timeout: Duration,
) -> ClientRun {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(script);
    let mut cmd = tokio::process::Command::new(client_python());
    cmd.arg(&path)
        .args(args)
        .envs(envs.iter().copied())
        .env("PYTHONUNBUFFERED", "1")
        .kill_on_drop(true);
    let out = tokio::time::timeout(timeout, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{script} ran past {timeout:?}"))
        .unwrap_or_else(|e| panic!("starting {script}: {e}"));
    ClientRun {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
