//! The real `ragd` binary as a child process, for tests that kill it (SIGKILL) mid-work.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A running `ragd serve`; killed (SIGKILL) when dropped.
pub struct ChildServer {
    child: Child,
    pub base: String,
    /// The server's JSON log lines, parsed, as they come.
    pub logs: std::sync::mpsc::Receiver<Value>,
}

impl ChildServer {
    /// Starts `ragd serve` on port 0 over `data` with the test models directory, `args`
    /// added to its flags and `envs` to its environment; returns once it listens.
    pub fn start(data: &Path, args: &[&str], envs: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ragd"))
            .args(["serve", "--port", "0", "--log-format", "json"])
            .arg("--data-dir")
            .arg(data)
            .arg("--models-dir")
            .arg(super::models_dir())
            .args(args)
            .env("RUST_LOG", "info")
            .env("RAGD_LLM_MODEL", "none")
            .envs(envs.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start ragd");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let deadline = Instant::now() + Duration::from_secs(120);
        // Every line is kept, those logged during start-up too (tasks resume then).
        let (tx, logs) = std::sync::mpsc::channel();
        while Instant::now() < deadline {
            let Some(Ok(line)) = lines.next() else { break };
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let listening = v["fields"]["message"] == "ragd listening";
            let addr = v["fields"]["addr"].as_str().map(str::to_owned);
            let _ = tx.send(v);
            if listening {
                let addr = addr.expect("addr");
                // Keep draining the log so the server never blocks on a full pipe.
                std::thread::spawn(move || {
                    for line in lines.by_ref().map_while(Result::ok) {
                        if let Ok(v) = serde_json::from_str::<Value>(&line) {
                            let _ = tx.send(v);
                        }
                    }
                });
                return Self {
                    child,
                    base: format!("http://{addr}"),
                    logs,
                };
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("ragd did not start");
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// SIGKILL: no shutdown, no flush. The log lines already read stay in `logs`.
    pub fn kill(&mut self) {
        self.child.kill().expect("kill ragd");
        self.child.wait().expect("reap ragd");
    }

    /// The log lines received so far.
    pub fn drain_logs(&self) -> Vec<Value> {
        self.logs.try_iter().collect()
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
