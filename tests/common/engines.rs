//! Real inference engines for the remote-backend tests: llama.cpp's `llama-server`,
//! built by `scripts/llama_server.sh` (which `scripts/test.sh` runs), started on a free
//! loopback port and killed when dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A file `scripts/llama_server.sh` made: `$var`, else `relative` under the user's cache.
/// Missing is a clear failure, not a skip: the test command makes them.
fn made_by_script(var: &str, relative: &str) -> PathBuf {
    made_by(var, relative, "scripts/llama_server.sh")
}

/// A file `script` made: `$var`, else `relative` under the user's cache. Missing is a
/// clear failure, not a skip: the test command runs the script.
pub fn made_by(var: &str, relative: &str, script: &str) -> PathBuf {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
            });
        cache.join(relative)
    });
    assert!(
        path.exists(),
        "{} is missing: run {script} (scripts/test.sh does) or set {var}",
        path.display()
    );
    path
}

/// The `llama-server` binary (built by the shared build tool).
pub fn llama_server_bin() -> PathBuf {
    made_by_script(
        "RAGD_TEST_LLAMA_SERVER",
        "llama-bench/build/bin/llama-server",
    )
}

/// The GGUF of the installed all-MiniLM-L6-v2 (llama.cpp's converter, f32).
pub fn minilm_gguf() -> PathBuf {
    made_by_script(
        "RAGD_TEST_MINILM_GGUF",
        "ragd-remote/all-MiniLM-L6-v2.f32.gguf",
    )
}

/// Held by a test while it runs an engine: engines on 2 cores side by side would make
/// each other's latencies meaningless (and time out).
pub async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// A free loopback port (bound, then released for the engine to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running `llama-server`.
pub struct LlamaServer {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    port: u16,
    args: Vec<String>,
}

impl LlamaServer {
    /// Starts `llama-server` on `model` with `extra` arguments and waits until it is ready.
    pub fn start(model: &std::path::Path, extra: &[&str]) -> Self {
        let port = free_port();
        let mut args: Vec<String> = vec![
            "-m".into(),
            model.display().to_string(),
            "--host".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut server = Self {
            child: None,
            url: format!("http://127.0.0.1:{port}"),
            port,
            args,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let child = Command::new(llama_server_bin())
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting llama-server");
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(120) {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    // llama.cpp's AMX weight buffers crash (SIGSEGV in its warm-up) where
                    // the CPU shows AMX but the VM denies its state: run it once more
                    // without its extra weight buffers, as scripts/bench_batch.sh does.
                    use std::os::unix::process::ExitStatusExt;
                    let plain = "--no-repack".to_string();
                    if status.signal() == Some(11) && !self.args.contains(&plain) {
                        eprintln!("llama-server crashed at start-up; again with --no-repack");
                        self.args.push(plain);
                        return self.spawn();
                    }
                    panic!(
                        "llama-server exited during start-up: {status} ({:?})",
                        self.args
                    );
                }
            }
            if http_status(self.port, "/health") == Some(200) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("llama-server did not become ready on port {}", self.port);
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the process (SIGKILL) and waits for it: the port then refuses connections.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port with the same arguments.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The status of `GET path` on a loopback port, by hand (no async runtime needed, and
/// none disturbed: the tests call this from theirs).
pub fn http_status(port: u16, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// A TCP proxy on loopback in front of `upstream` that forwards bytes both ways until
/// told to stall: then it keeps every connection open and forwards nothing more (a
/// network that hangs, not one that fails).
pub struct StallProxy {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    stall: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl StallProxy {
    /// Starts forwarding to `127.0.0.1:upstream` (needs the tokio runtime).
    pub async fn start(upstream: u16) -> Self {
        use std::sync::atomic::AtomicBool;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let stall = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stall.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                else {
                    continue;
                };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(pipe(cr, sw, flag.clone()));
                tokio::spawn(pipe(sr, cw, flag.clone()));
            }
        });
        Self { url, stall }
    }

    /// Stops forwarding (`true`) or resumes (`false`).
    pub fn set_stalled(&self, stalled: bool) {
        self.stall
            .store(stalled, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Copies `from` to `to`, holding each piece while `stall` is set.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    stall: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        while stall.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
}
