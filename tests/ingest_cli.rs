//! `ragd ingest`: folders of the shared fixtures through a running server and on a data
//! directory; a second run changes nothing and says so; a changed file is updated in
//! place; a killed or interrupted run resumes; bad input is reported clearly and the
//! rest goes in.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::sync::{create_change_rename, refusals, sources, within};
use common::{shared_dir, TestServer};
use serde_json::Value;

/// Runs `ragd ingest ARGS`; returns (exit code, stdout, stderr).
fn ingest(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ragd"))
        .arg("ingest")
        .args(args)
        .env("RAGD_MODELS_DIR", common::models_dir())
        .env("RAGD_LLM_MODEL", "none")
        .output()
        .expect("running ragd");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `ragd ingest --json ARGS` through the server `s`, with the state file `state`.
fn ingest_json(s: &TestServer, state: &Path, paths: &[&Path]) -> (i32, Value) {
    let state = state.display().to_string();
    let mut args = vec!["--server", &s.base, "--state-file", &state, "--json"];
    let paths: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    args.extend(paths.iter().map(String::as_str));
    let (code, out, err) = ingest(&args);
    let summary = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}\n{err}"));
    (code, summary)
}

/// A copy of the shared Markdown and CSV fixtures.
fn fixtures(into: &Path) -> PathBuf {
    let data = shared_dir().join("fixtures/docling/tests/data");
    let dir = into.join("docs");
    for kind in ["md", "csv"] {
        let to = dir.join(kind);
        std::fs::create_dir_all(&to).unwrap();
        for e in std::fs::read_dir(data.join(kind).join("sources")).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
    dir
}

fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("no {k} in {v}"))
}

async fn source_count(s: &TestServer) -> u64 {
    s.get_json("/api/v1/documents/sources").await.1["count"]
        .as_u64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_twice_then_a_change() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = fixtures(tmp.path());
    let files = 19;
    let state = tmp.path().join("state.json");
    let s = TestServer::start(&tmp.path().join("data")).await;

    let (code, first) = ingest_json(&s, &state, &[&docs]);
    let refused = first["refused"].as_array().unwrap().len() as u64;
    assert_eq!(n(&first, "added") + refused, files, "{first}");
    assert!(n(&first, "added") >= 15, "{first}");
    assert_eq!(code, if refused == 0 { 0 } else { 2 });
    assert_eq!(source_count(&s).await, n(&first, "added"));

    // The second run sends nothing and says so.
    let st = state.display().to_string();
    let (_, out, _) = ingest(&[
        "--server",
        &s.base,
        "--state-file",
        &st,
        &docs.display().to_string(),
    ]);
    assert!(out.contains("nothing changed"), "{out}");
    let (_, second) = ingest_json(&s, &state, &[&docs]);
    assert_eq!(
        n(&second, "added") + n(&second, "updated") + n(&second, "duplicates"),
        0,
        "{second}"
    );
    assert_eq!(n(&second, "unchanged"), n(&first, "added"), "{second}");

    // One file changed: only it is sent, and it is updated in place.
    let changed = docs.join("md/duck.md");
    let mut text = std::fs::read_to_string(&changed).unwrap();
    text.push_str("\n\nA new closing paragraph about the duck's migration south in winter.\n");
    std::fs::write(&changed, text).unwrap();
    let (_, third) = ingest_json(&s, &state, &[&docs]);
    assert_eq!(n(&third, "updated"), 1, "{third}");
    assert_eq!(n(&third, "added"), 0, "{third}");
    assert_eq!(n(&third, "unchanged"), n(&first, "added") - 1, "{third}");
    let r = s.search("duck migration south in winter", 1).await;
    assert_eq!(r["results"][0]["source"], "duck.md", "{r}");

    // Include and exclude patterns; a glob.
    let (_, only_csv) = ingest_json(
        &s,
        &tmp.path().join("other-state.json"),
        &[Path::new(&format!("{}/*/csv-*.csv", docs.display()))],
    );
    let csv_refused = only_csv["refused"].as_array().unwrap().len() as u64;
    assert_eq!(n(&only_csv, "duplicates") + csv_refused, 9, "{only_csv}");
    assert_eq!(
        n(&only_csv, "added") + n(&only_csv, "updated"),
        0,
        "{only_csv}"
    );
    let (code, out, err) = ingest(&[
        "--server",
        &s.base,
        "--state-file",
        &tmp.path().join("third-state.json").display().to_string(),
        "--include",
        "*.md",
        "--exclude",
        "duck*",
        "--json",
        &docs.display().to_string(),
    ]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}{err}"));
    assert_eq!(code, 0, "{v}");
    // The nine other Markdown files, all already stored with this content.
    assert_eq!(n(&v, "duplicates"), 9, "{v}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_reported_and_the_rest_goes_in() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    std::fs::create_dir_all(docs.join("sub")).unwrap();
    std::fs::write(docs.join("a.md"), "# A\n\nAlpha pumps are blue.\n").unwrap();
    std::fs::write(docs.join("sub/b.txt"), "Beta valves are red.").unwrap();
    std::fs::write(
        docs.join("sub/a.md"),
        "# Other A\n\nSame name, elsewhere.\n",
    )
    .unwrap();
    std::fs::write(docs.join("image.xyz"), "not a document").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(tmp.path().join("gone.md"), docs.join("dangling.md")).unwrap();
    let s = TestServer::start(&tmp.path().join("data")).await;
    let missing = tmp.path().join("no-such-folder");
    let (code, v) = ingest_json(&s, &tmp.path().join("state.json"), &[&docs, &missing]);
    assert_eq!(code, 2, "{v}");
    assert_eq!(n(&v, "added"), 2, "{v}");
    assert_eq!(n(&v, "unsupported"), 1, "{v}");
    let reasons = refusals(&v);
    let has = |path: &str, why: &str| {
        assert!(
            reasons.iter().any(|r| r.contains(path) && r.contains(why)),
            "no refusal of {path} for {why:?}: {reasons:#?}"
        )
    };
    has("dangling.md", "broken symbolic link");
    has("no-such-folder", "does not exist");
    has("sub/a.md", "another file of this name");
    assert_eq!(reasons.len(), 3, "{reasons:#?}");
    assert_eq!(source_count(&s).await, 2);
    // A server is not reached: a clear message, not a panic.
    let (code, _, err) = ingest(&[
        "--server",
        "http://127.0.0.1:9",
        &docs.display().to_string(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("is it running?"), "{err}");
    // The data directory of a running server is not opened beside it (`ragd serve`
    // holds its lock; the test server runs in this process, so the test takes it).
    let _lock = ragd::state::data_lock::DataDirLock::acquire(&tmp.path().join("data")).unwrap();
    let (code, _, err) = ingest(&[
        "--data-dir",
        &tmp.path().join("data").display().to_string(),
        &docs.display().to_string(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("in use") && err.contains("--server"), "{err}");
    s.stop().await;
}

/// Starts `ragd ingest --server` on `dir` in the background.
fn spawn_ingest(s: &TestServer, state: &Path, dir: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_ragd"))
        .args(["ingest", "--server", &s.base, "--state-file"])
        .arg(state)
        .arg("--json")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until the first batch's answer is recorded.
fn wait_for(path: &Path) {
    let t = Instant::now();
    while !path.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no batch was answered"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `count` small distinct files under `dir`, named with `prefix`.
fn notes(dir: &Path, prefix: &str, count: u64) {
    std::fs::create_dir_all(dir).unwrap();
    for i in 0..count {
        std::fs::write(
            dir.join(format!("{prefix}-{i:04}.txt")),
            format!(
                "Note {prefix} {i}: the compressor in bay {i} was checked on day {} and passed.",
                i % 28 + 1
            ),
        )
        .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_or_interrupted_ingest_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let total = 400u64;
    let docs = tmp.path().join("many");
    notes(&docs, "note", total);
    let s = TestServer::start(&tmp.path().join("data")).await;
    let state = tmp.path().join("state.json");

    // Killed outright after its first answered batch.
    let mut child = spawn_ingest(&s, &state, &docs);
    wait_for(&state);
    child.kill().unwrap();
    child.wait().unwrap();
    let stored = source_count(&s).await;
    assert!(
        stored > 0 && stored < total,
        "{stored} stored before the kill"
    );

    // The next run completes: what was recorded is not sent again, and what was stored
    // but not recorded (the batch in flight) is not stored twice.
    let (code, v) = ingest_json(&s, &state, &[&docs]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        n(&v, "added") + n(&v, "duplicates") + n(&v, "unchanged"),
        total,
        "{v}"
    );
    assert!(
        n(&v, "unchanged") > 0,
        "the killed run's work was kept: {v}"
    );
    assert_eq!(source_count(&s).await, total);
    let (_, v) = ingest_json(&s, &state, &[&docs]);
    assert_eq!(n(&v, "unchanged"), total, "{v}");

    // Interrupted with Ctrl-C: it stops after the requests in flight, says so (exit
    // 130), and the next run finishes the rest.
    let more = tmp.path().join("more");
    notes(&more, "more", total);
    let state2 = tmp.path().join("state2.json");
    let mut child = spawn_ingest(&s, &state2, &more);
    wait_for(&state2);
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t = Instant::now();
    let out = loop {
        if child.try_wait().unwrap().is_some() {
            break child.wait_with_output().unwrap();
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "Ctrl-C did not stop it"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    if out.status.code() == Some(130) {
        assert_eq!(v["interrupted"], true, "{v}");
        assert!(n(&v, "not_sent") > 0, "{v}");
    } else {
        // It finished before the signal arrived.
        assert_eq!(out.status.code(), Some(0), "{v}");
    }
    let (code, v) = ingest_json(&s, &state2, &[&more]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        n(&v, "added") + n(&v, "duplicates") + n(&v, "unchanged"),
        total,
        "{v}"
    );
    assert_eq!(source_count(&s).await, 2 * total);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_data_directory_without_a_server() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = fixtures(tmp.path());
    let data = tmp.path().join("data");
    let state = tmp.path().join("state.json").display().to_string();
    let args = [
        "--data-dir",
        &data.display().to_string(),
        "--state-file",
        &state,
        "--json",
        &docs.join("md").display().to_string(),
    ];
    let (code, out, err) = ingest(&args);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}{err}"));
    assert!(code == 0 || code == 2, "{v}");
    let added = n(&v, "added");
    assert!(added >= 8, "{v}");
    let (_, out, _) = ingest(&args);
    let again: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(n(&again, "unchanged"), added, "{again}");
    // A server started on it has every file, and its indexes agree.
    let s = TestServer::start(&data).await;
    assert_eq!(source_count(&s).await, added);
    let (_, ready) = s.get_json("/api/v1/health/ready").await;
    assert_eq!(ready["ready"], true, "{ready}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_mode_follows_create_change_rename_and_delete() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("watched");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("first.md"),
        "# First\n\nThe first file is here.\n",
    )
    .unwrap();
    let s = TestServer::start(&tmp.path().join("data")).await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_ragd"))
        .args(["ingest", "--watch", "--server", &s.base, "--state-file"])
        .arg(tmp.path().join("state.json"))
        .arg(&docs)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    within("the first run", async || sources(&s).await == ["first.md"]).await;

    create_change_rename(&s, &docs).await;

    std::fs::remove_file(docs.join("first.md")).unwrap();
    let took = within("a delete", async || sources(&s).await == ["renamed.md"]).await;
    assert!(took < Duration::from_secs(2), "delete seen after {took:?}");

    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "Ctrl-C did not stop the watch"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("deleted 1"), "{text}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_file_and_a_pipe_are_refused_with_the_reason() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("readable.md"), "# Readable\n\nWrens nest here.\n").unwrap();
    std::fs::write(
        docs.join("locked.md"),
        "# Locked\n\nNobody may read this.\n",
    )
    .unwrap();
    std::fs::set_permissions(
        docs.join("locked.md"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    // A FIFO of a document's name: reading it would block for ever.
    let fifo = std::ffi::CString::new(docs.join("pipe.md").display().to_string()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let state_dir = tmp.path().join("state");
    std::fs::create_dir_all(&state_dir).unwrap();
    for d in [tmp.path(), &docs, &state_dir] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let s = TestServer::start(&tmp.path().join("data")).await;
    // Permissions do not stop root: as root, the ingest runs as `nobody`.
    let mut cmd = if unsafe { libc::geteuid() } == 0 {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_ragd"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_ragd"))
    };
    let mut child = cmd
        .args(["ingest", "--json", "--server", &s.base, "--state-file"])
        .arg(state_dir.join("state.json"))
        .arg(&docs)
        .env("HOME", &state_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < Duration::from_secs(60), "the ingest hung");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|_| panic!("{text}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(2), "{v}");
    assert_eq!(n(&v, "added"), 1, "{v}");
    let reasons = refusals(&v);
    assert_eq!(reasons.len(), 2, "{reasons:#?}");
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("locked.md") && r.contains("permission denied")),
        "{reasons:#?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("pipe.md") && r.contains("not a regular file")),
        "{reasons:#?}"
    );
    assert_eq!(source_count(&s).await, 1);
    s.stop().await;
}
