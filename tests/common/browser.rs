//! Headless Chromium (installed by scripts/setup.sh) for the browser tests. Pages either
//! render once (`--dump-dom`) or are driven over the DevTools protocol on a pipe
//! (`--remote-debugging-pipe`: commands on fd 3, replies and events on fd 4, one JSON
//! message per NUL byte), so no port and no websocket client are needed. Requests that
//! would leave the machine fail at once (a dead proxy), and every request a page makes is
//! recorded, so a test can prove none left.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

/// Flags of every test browser.
pub const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    // Any request that would leave the machine fails at once.
    "--proxy-server=127.0.0.1:9",
    "--proxy-bypass-list=127.0.0.1",
];

/// How long a test waits for the page to reach a state.
const WAIT: Duration = Duration::from_secs(120);

/// The installed Chromium's command.
pub fn chromium() -> &'static str {
    ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("chromium is not installed: run scripts/setup.sh")
}

/// Where screenshots go: `<target>/web-screenshots/`.
pub fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("web-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two new descriptors into `fds`, which we then own.
    unsafe {
        assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0, "pipe2");
        (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
    }
}

type Replies = Arc<Mutex<HashMap<u64, mpsc::Sender<Value>>>>;

/// A running Chromium; killed on drop.
pub struct Browser {
    child: Child,
    commands: Mutex<File>,
    next_id: AtomicU64,
    replies: Replies,
    /// Every URL a page requested.
    pub requests: Arc<Mutex<Vec<String>>>,
    /// Uncaught exceptions, `console.error` calls and browser errors (CSP included),
    /// except failed network requests, which tests provoke on purpose.
    pub errors: Arc<Mutex<Vec<String>>>,
    profile: tempfile::TempDir,
}

fn record_event(v: &Value, requests: &Mutex<Vec<String>>, errors: &Mutex<Vec<String>>) {
    let p = &v["params"];
    match v["method"].as_str().unwrap_or_default() {
        "Network.requestWillBeSent" => {
            if let Some(url) = p["request"]["url"].as_str() {
                requests.lock().unwrap().push(url.to_owned());
            }
        }
        "Runtime.exceptionThrown" => errors
            .lock()
            .unwrap()
            .push(format!("exception: {}", p["exceptionDetails"])),
        "Runtime.consoleAPICalled" if p["type"] == "error" => errors
            .lock()
            .unwrap()
            .push(format!("console.error: {}", p["args"])),
        "Log.entryAdded" if p["entry"]["level"] == "error" && p["entry"]["source"] != "network" => {
            errors
                .lock()
                .unwrap()
                .push(format!("log: {}", p["entry"]["text"]))
        }
        _ => {}
    }
}

impl Browser {
    /// Starts Chromium with the DevTools protocol on a pipe.
    pub fn launch() -> Self {
        let profile = tempfile::tempdir().unwrap();
        let (cmd_read, cmd_write) = pipe();
        let (out_read, out_write) = pipe();
        let (r3, w4) = (cmd_read.as_raw_fd(), out_write.as_raw_fd());
        let mut command = Command::new(chromium());
        command
            .args(FLAGS)
            .arg("--remote-debugging-pipe")
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(profile.path().join("chromium.log")).unwrap());
        // SAFETY: only async-signal-safe calls between fork and exec. Both ends are first
        // moved above fd 10 so that neither dup2 overwrites the other.
        unsafe {
            command.pre_exec(move || {
                let a = libc::fcntl(r3, libc::F_DUPFD, 10);
                let b = libc::fcntl(w4, libc::F_DUPFD, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(a);
                libc::close(b);
                Ok(())
            });
        }
        let child = command.spawn().expect("chromium starts");
        drop((cmd_read, out_write));

        let replies: Replies = Arc::default();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let (rp, rq, er) = (replies.clone(), requests.clone(), errors.clone());
        std::thread::spawn(move || {
            let mut reader = BufReader::new(File::from(out_read));
            let mut buf = Vec::new();
            while reader.read_until(0, &mut buf).is_ok_and(|n| n > 0) {
                if buf.last() == Some(&0) {
                    buf.pop();
                }
                if let Ok(v) = serde_json::from_slice::<Value>(&buf) {
                    match v["id"].as_u64() {
                        Some(id) => {
                            if let Some(tx) = rp.lock().unwrap().remove(&id) {
                                let _ = tx.send(v);
                            }
                        }
                        None => record_event(&v, &rq, &er),
                    }
                }
                buf.clear();
            }
        });
        Self {
            child,
            commands: Mutex::new(File::from(cmd_write)),
            next_id: AtomicU64::new(1),
            replies,
            requests,
            errors,
            profile,
        }
    }

    /// Sends one command (to a page's session, or to the browser); its result or error.
    pub fn send(&self, session: Option<&str>, method: &str, params: Value) -> Result<Value, Value> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::channel();
        self.replies.lock().unwrap().insert(id, tx);
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.commands
            .lock()
            .unwrap()
            .write_all(&bytes)
            .expect("write to chromium");
        let mut reply = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                let log = std::fs::read_to_string(self.profile.path().join("chromium.log"));
                panic!("chromium did not answer {method}; its log: {log:?}")
            });
        match reply.get_mut("error") {
            Some(e) => Err(e.take()),
            None => Ok(reply["result"].take()),
        }
    }

    /// Like [`send`](Self::send); an error fails the test.
    pub fn call(&self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.send(session, method, params)
            .unwrap_or_else(|e| panic!("{method} failed: {e}"))
    }

    /// Opens a tab of `width` x `height` CSS pixels.
    pub fn page(&self, width: u32, height: u32) -> Page<'_> {
        let target = self.call(None, "Target.createTarget", json!({"url": "about:blank"}));
        let attached = self.call(
            None,
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        let page = Page {
            browser: self,
            session: attached["sessionId"].as_str().unwrap().to_owned(),
        };
        for domain in [
            "Page.enable",
            "Runtime.enable",
            "Network.enable",
            "Log.enable",
        ] {
            page.call(domain, json!({}));
        }
        page.viewport(width, height, false);
        page
    }

    /// Every recorded URL that is neither on `base` nor local to the page.
    pub fn outside_requests(&self, base: &str) -> Vec<String> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|u| !u.starts_with(base))
            .filter(|u| {
                !["data:", "blob:", "about:"]
                    .iter()
                    .any(|p| u.starts_with(p))
            })
            .cloned()
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One tab, driven like a person would: real clicks, typing and keys.
pub struct Page<'b> {
    browser: &'b Browser,
    session: String,
}

/// A string as a JavaScript literal.
pub fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

impl Page<'_> {
    pub fn call(&self, method: &str, params: Value) -> Value {
        self.browser.call(Some(&self.session), method, params)
    }

    /// Sets the viewport; `mobile` emulates a phone (touch layout, 2x pixels).
    pub fn viewport(&self, width: u32, height: u32, mobile: bool) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": if mobile { 2 } else { 1 }, "mobile": mobile}),
        );
    }

    /// Loads `url` and waits until its scripts have run.
    pub fn goto(&self, url: &str) {
        self.call("Page.navigate", json!({"url": url}));
        self.wait("document.readyState === 'complete'", "the page to load");
    }

    /// Evaluates `expr` (awaiting a promise): its value, or why it failed (an exception,
    /// or a page that is navigating and has no context yet).
    pub fn try_eval(&self, expr: &str) -> Result<Value, String> {
        let r = self
            .browser
            .send(
                Some(&self.session),
                "Runtime.evaluate",
                json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
            )
            .map_err(|e| e.to_string())?;
        match r.get("exceptionDetails") {
            Some(e) => Err(e.to_string()),
            None => Ok(r["result"]["value"].clone()),
        }
    }

    /// Evaluates `expr` (awaiting a promise) and returns its value.
    pub fn eval(&self, expr: &str) -> Value {
        self.try_eval(expr)
            .unwrap_or_else(|e| panic!("evaluating `{expr}` failed: {e}"))
    }

    /// The text of the first element matching `selector` ("" when none).
    pub fn text(&self, selector: &str) -> String {
        self.eval(&format!(
            "document.querySelector({})?.textContent ?? ''",
            js(selector)
        ))
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }

    /// Polls `expr` until it is truthy and returns it; on timeout saves a screenshot and
    /// fails naming `what`.
    pub fn wait(&self, expr: &str, what: &str) -> Value {
        let started = Instant::now();
        loop {
            // While the page navigates there is briefly no context to evaluate in.
            let last = self.try_eval(expr);
            if let Ok(v) = &last {
                if !matches!(v, Value::Null | Value::Bool(false))
                    && *v != json!(0)
                    && *v != json!("")
                {
                    return v.clone();
                }
            }
            if started.elapsed() > WAIT {
                self.screenshot("FAILED");
                let body = self.try_eval("document.body.innerText");
                panic!("timed out waiting for {what} (last: {last:?}); the page says:\n{body:?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for an element matching `selector`.
    pub fn wait_for(&self, selector: &str) {
        self.wait(
            &format!("!!document.querySelector({})", js(selector)),
            selector,
        );
    }

    /// Clicks the middle of the element matching `selector` with the mouse, once it is
    /// visible and nothing covers it.
    pub fn click(&self, selector: &str) {
        let probe = format!(
            "(() => {{ const el = document.querySelector({});
                if (!el) return null;
                el.scrollIntoView({{block: 'center', inline: 'center'}});
                const r = el.getBoundingClientRect();
                if (r.width === 0 || r.height === 0) return null;
                const x = r.left + r.width / 2, y = r.top + r.height / 2;
                const top = document.elementFromPoint(x, y);
                return top && (top === el || el.contains(top)) ? [x, y] : null; }})()",
            js(selector)
        );
        let at = self.wait(&probe, &format!("{selector} to be clickable"));
        let (x, y) = (at[0].as_f64().unwrap(), at[1].as_f64().unwrap());
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
            );
        }
    }

    /// Focuses the field matching `selector`, clears it and types `text`.
    pub fn type_into(&self, selector: &str, text: &str) {
        self.wait_for(selector);
        self.eval(&format!(
            "(() => {{ const el = document.querySelector({}); el.focus(); el.select?.(); }})()",
            js(selector)
        ));
        self.call("Input.insertText", json!({"text": text}));
    }

    /// Presses a key: `Enter`, `Escape` or `Tab`.
    pub fn press(&self, key: &str) {
        let (code, text) = match key {
            "Enter" => (13, "\r"),
            "Escape" => (27, ""),
            "Tab" => (9, ""),
            other => panic!("no key code for {other}"),
        };
        self.call(
            "Input.dispatchKeyEvent",
            json!({"type": if text.is_empty() { "rawKeyDown" } else { "keyDown" }, "key": key, "code": key,
                   "windowsVirtualKeyCode": code, "text": text}),
        );
        self.call(
            "Input.dispatchKeyEvent",
            json!({"type": "keyUp", "key": key, "code": key, "windowsVirtualKeyCode": code}),
        );
    }

    /// Signs in on the page at `base` as `email` and waits for the documents screen.
    pub fn sign_in(&self, base: &str, email: &str, password: &str) {
        self.goto(base);
        self.wait_for("form.signin");
        self.type_into("#email", email);
        self.type_into("#password", password);
        self.press("Enter");
        self.wait(
            "!document.querySelector('#top').hidden && !!document.querySelector('#drop-zone')",
            "the documents screen after signing in",
        );
    }

    /// Chooses `paths` in the file input matching `selector` (as the file picker does).
    pub fn set_files(&self, selector: &str, paths: &[&Path]) {
        let doc = self.call("DOM.getDocument", json!({}));
        let node = self.call(
            "DOM.querySelector",
            json!({"nodeId": doc["root"]["nodeId"], "selector": selector}),
        );
        let files: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        self.call(
            "DOM.setFileInputFiles",
            json!({"files": files, "nodeId": node["nodeId"]}),
        );
    }

    /// Saves a PNG of the viewport as `<target>/web-screenshots/<name>.png`.
    pub fn screenshot(&self, name: &str) -> PathBuf {
        self.capture(name, json!({"format": "png"}))
    }

    /// Like [`screenshot`](Self::screenshot), of the whole page however long it is.
    pub fn screenshot_full(&self, name: &str) -> PathBuf {
        let m = self.call("Page.getLayoutMetrics", json!({}));
        let size = &m["cssContentSize"];
        let clip =
            json!({"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1});
        self.capture(
            name,
            json!({"format": "png", "captureBeyondViewport": true, "clip": clip}),
        )
    }

    fn capture(&self, name: &str, params: Value) -> PathBuf {
        // Let layout and fonts settle.
        let _ = self
            .try_eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))");
        let shot = self.call("Page.captureScreenshot", params);
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        let path = screenshot_dir().join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }
}
