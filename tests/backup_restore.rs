//! `ragd backup` / `ragd restore` and `POST /api/v1/admin/backup`: a backup taken while
//! uploads and searches run restores to the same knowledge base (every source, chunk
//! text, vector, user, conversation and message compared), served by a real server on
//! the restored directory; bad input gets clear messages and changes nothing.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{create_user, test_config, Auth, TestServer};
use rusqlite::{Connection, OpenFlags};
use serde_json::json;

/// A small document about `topic`.
fn doc(topic: usize) -> String {
    format!(
        "# Topic {topic}\n\nMaintenance note {topic}: the unit numbered {topic} is serviced \
         every {} days by crew {}. Its filter model is F-{topic}-X and its pressure limit \
         is {} bar.\n",
        topic % 30 + 7,
        topic % 5,
        topic * 3 + 20
    )
}

/// Runs the `ragd` binary; returns (success, stdout, stderr).
fn ragd(args: &[&str], envs: &[(&str, &str)]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ragd"))
        .args(args)
        .envs(envs.iter().copied())
        .env("RAGD_MODELS_DIR", common::models_dir())
        .output()
        .expect("running ragd");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every row of `sql` as strings (blobs hex), in the query's order.
fn rows(db: &Path, sql: &str) -> Vec<Vec<String>> {
    let c = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut st = c.prepare(sql).unwrap();
    let n = st.column_count();
    st.query_map([], |r| {
        Ok((0..n)
            .map(|i| match r.get_ref(i).unwrap() {
                rusqlite::types::ValueRef::Null => "NULL".to_owned(),
                rusqlite::types::ValueRef::Integer(v) => v.to_string(),
                rusqlite::types::ValueRef::Real(v) => v.to_string(),
                rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                rusqlite::types::ValueRef::Blob(b) => hex::encode(b),
            })
            .collect())
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

const SOURCES: &str = "SELECT id, source, source_type, title, file_type, section, content_hash, \
                       chunk_count, created_at, updated_at FROM sources ORDER BY id";
const CHUNKS: &str = "SELECT c.id, s.source, c.position, c.text, c.text_hash, c.language, \
                      c.metadata, c.embedding FROM chunks c JOIN sources s ON s.id = c.source_id \
                      ORDER BY c.id";
const USERS: &str = "SELECT * FROM users ORDER BY id";
const CONVERSATIONS: &str = "SELECT * FROM conversations ORDER BY id";
const MESSAGES: &str = "SELECT * FROM messages ORDER BY id";
const SETTINGS: &str = "SELECT * FROM settings ORDER BY 1";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_under_load_restores_to_the_same_knowledge_base() {
    let tmp = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (tmp.path().join("a"), tmp.path().join("b"));
    let alice = Auth::Token(create_user(&a_dir, "alice@example.com", "password-a", true).await);
    let a = Arc::new(TestServer::start(&a_dir).await);
    for i in 0..6 {
        let (st, body) = a.upload(&format!("base-{i}.md"), doc(i).as_bytes()).await;
        assert_eq!(st, 200, "{body}");
    }
    for q in [
        "How often is unit 3 serviced?",
        "What is the filter of unit 4?",
    ] {
        a.call(
            reqwest::Method::POST,
            "assistant.api.chat_with_tools",
            &json!({"user_message": q}),
            &alice,
        )
        .await
        .data();
    }

    // Uploads and searches keep running while the backup is taken.
    let stop = Arc::new(AtomicBool::new(false));
    let uploader = {
        let (a, stop) = (a.clone(), stop.clone());
        tokio::spawn(async move {
            let mut i = 100;
            while !stop.load(Ordering::Relaxed) && i < 400 {
                let (st, body) = a.upload(&format!("load-{i}.md"), doc(i).as_bytes()).await;
                assert_eq!(st, 200, "{body}");
                i += 1;
            }
            i - 100
        })
    };
    let searcher = {
        let (a, stop) = (a.clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let r = a.search("filter model of unit 2", 3).await;
                assert!(r["count"].as_u64().unwrap() > 0);
                n += 1;
            }
            n
        })
    };
    // Let the load get going first.
    while a.get_json("/api/v1/documents/sources").await.1["count"]
        .as_u64()
        .unwrap()
        < 9
    {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let archive = tmp.path().join("kb.tar");
    let (archive_s, base) = (archive.display().to_string(), a.base.clone());
    let (ok, out, err) =
        tokio::task::spawn_blocking(move || ragd(&["backup", "--server", &base, &archive_s], &[]))
            .await
            .unwrap();
    assert!(ok, "backup failed: {out}\n{err}");
    assert!(out.contains("backed up:"), "{out}");
    // A few more uploads after the backup, which the restore must not have.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let uploaded = uploader.await.unwrap();
    let searched = searcher.await.unwrap();
    assert!(
        uploaded > 0 && searched > 0,
        "{uploaded} uploads, {searched} searches"
    );

    // Restore, then serve the restored directory.
    let (ok, out, err) = ragd(
        &[
            "restore",
            &archive.display().to_string(),
            "--data-dir",
            &b_dir.display().to_string(),
        ],
        &[],
    );
    assert!(ok, "restore failed: {out}\n{err}");
    assert!(out.contains("restored:"), "{out}");
    let b = TestServer::start(&b_dir).await;
    let (_, ready) = b.get_json("/api/v1/health/ready").await;
    assert_eq!(ready["ready"], true, "{ready}");
    let (_, stats) = b.get_json("/api/v1/documents/stats").await;
    let r = b.search("What is the pressure limit of unit 5?", 3).await;
    assert_eq!(r["results"][0]["source"], "base-5.md", "{r}");
    let list = b
        .call(
            reqwest::Method::GET,
            "assistant.api.list_conversations",
            &json!({}),
            &alice,
        )
        .await;
    assert_eq!(list.data()["total"], 2, "{:?}", list.body);
    b.stop().await;
    let a = Arc::into_inner(a).expect("the load tasks are done");
    a.stop().await;

    let (a_db, b_db) = (a_dir.join("ragd.sqlite"), b_dir.join("ragd.sqlite"));
    let (a_sources, b_sources) = (rows(&a_db, SOURCES), rows(&b_db, SOURCES));
    let (a_chunks, b_chunks) = (rows(&a_db, CHUNKS), rows(&b_db, CHUNKS));
    assert_eq!(
        stats["total_documents"].as_u64().unwrap() as usize,
        b_chunks.len()
    );
    // A snapshot: everything there before the load, part of the load, nothing after.
    assert!(b_sources.len() >= 9 && b_sources.len() < a_sources.len());
    for s in &b_sources {
        assert!(a_sources.contains(s), "restored source differs: {s:?}");
    }
    for c in &b_chunks {
        assert!(
            a_chunks.contains(c),
            "restored chunk differs: {:?}",
            &c[..4]
        );
    }
    // Every restored source is whole: its chunks, texts and vectors all there.
    for s in &b_sources {
        let (name, count) = (&s[1], s[7].parse::<usize>().unwrap());
        let mine = |cs: &Vec<Vec<String>>| cs.iter().filter(|c| &c[1] == name).count();
        assert_eq!(mine(&b_chunks), count, "{name}");
        assert_eq!(mine(&a_chunks), count, "{name}");
    }
    for table in [USERS, CONVERSATIONS, MESSAGES, SETTINGS] {
        assert_eq!(rows(&a_db, table), rows(&b_db, table), "{table}");
    }
    assert!(!rows(&b_db, MESSAGES).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_restores_are_refused_clearly_and_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let a_dir = tmp.path().join("a");
    let a = TestServer::start(&a_dir).await;
    a.upload("base.md", doc(1).as_bytes()).await;
    a.stop().await;
    // With no server running, straight from the data directory.
    let archive = tmp.path().join("kb.tar");
    let arc = archive.display().to_string();
    let (ok, out, err) = ragd(
        &["backup", "--data-dir", &a_dir.display().to_string(), &arc],
        &[],
    );
    assert!(ok, "{out}\n{err}");
    // Not over an existing file.
    let (ok, _, err) = ragd(
        &["backup", "--data-dir", &a_dir.display().to_string(), &arc],
        &[],
    );
    assert!(!ok && err.contains("already exists"), "{err}");

    // A destination that is not empty.
    let full = tmp.path().join("full");
    std::fs::create_dir_all(&full).unwrap();
    std::fs::write(full.join("notes.txt"), "mine").unwrap();
    let (ok, _, err) = ragd(
        &["restore", &arc, "--data-dir", &full.display().to_string()],
        &[],
    );
    assert!(!ok && err.contains("is not empty"), "{err}");
    assert_eq!(
        std::fs::read_dir(&full).unwrap().count(),
        2,
        "only notes.txt and the lock"
    );

    // Not a backup at all.
    let junk = tmp.path().join("junk.tar");
    std::fs::write(&junk, b"hello").unwrap();
    let empty = tmp.path().join("empty1");
    let (ok, _, err) = ragd(
        &[
            "restore",
            &junk.display().to_string(),
            "--data-dir",
            &empty.display().to_string(),
        ],
        &[],
    );
    assert!(!ok && err.contains("not a ragd backup"), "{err}");
    assert!(!empty.join("ragd.sqlite").exists());

    // A backup of another version: the manifest says another schema.
    let other = tmp.path().join("other.tar");
    rewrite_manifest(&archive, &other, |m| {
        m["schema_version"] = json!(99);
        m["ragd_version"] = json!("9.9.9");
    });
    let empty = tmp.path().join("empty2");
    let (ok, _, err) = ragd(
        &[
            "restore",
            &other.display().to_string(),
            "--data-dir",
            &empty.display().to_string(),
        ],
        &[],
    );
    assert!(
        !ok && err.contains("made by ragd 9.9.9 with database schema 99"),
        "{err}"
    );
    assert!(!empty.join("ragd.sqlite").exists());

    // A damaged archive: the database no longer matches its checksum.
    let damaged = tmp.path().join("damaged.tar");
    rewrite_manifest(&archive, &damaged, |m| {
        m["files"][0]["sha256"] = json!("00".repeat(32));
    });
    let (ok, _, err) = ragd(
        &[
            "restore",
            &damaged.display().to_string(),
            "--data-dir",
            &empty.display().to_string(),
        ],
        &[],
    );
    assert!(!ok && err.contains("damaged"), "{err}");
    assert!(!empty.join("ragd.sqlite").exists());

    // The good one still restores.
    let (ok, out, err) = ragd(
        &["restore", &arc, "--data-dir", &empty.display().to_string()],
        &[],
    );
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("1 sources"), "{out}");
}

/// Copies the archive `src` to `dst` with its manifest changed by `f`.
fn rewrite_manifest(src: &Path, dst: &Path, f: impl Fn(&mut serde_json::Value)) {
    use std::io::Read as _;
    let mut input = tar::Archive::new(std::fs::File::open(src).unwrap());
    let mut out = tar::Builder::new(std::fs::File::create(dst).unwrap());
    for e in input.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().into_owned();
        let mut data = Vec::new();
        e.read_to_end(&mut data).unwrap();
        if name == Path::new("manifest.json") {
            let mut m: serde_json::Value = serde_json::from_slice(&data).unwrap();
            f(&mut m);
            data = serde_json::to_vec(&m).unwrap();
        }
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o600);
        h.set_cksum();
        out.append_data(&mut h, &name, data.as_slice()).unwrap();
    }
    out.finish().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backup_endpoint_is_for_administrators() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a");
    create_user(&dir, "bob@example.com", "password-b", false).await;
    let mut cfg = test_config(&dir);
    cfg.api_keys = vec!["server-key".into()];
    let s = TestServer::start_with(cfg).await;
    let url = s.url("/api/v1/admin/backup");
    let r = s.client.post(&url).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    // A signed-in user who is not an administrator, through the web page.
    let sid = s.login("bob@example.com", "password-b").await;
    let r = s
        .client
        .post(&url)
        .header("X-Requested-With", "ragd-web")
        .header("Cookie", format!("sid={sid}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"], "forbidden");
    // The server key: the archive.
    let r = s
        .client
        .post(&url)
        .header("X-API-Key", "server-key")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "application/x-tar");
    let bytes = r.bytes().await.unwrap();
    let path = tmp.path().join("api.tar");
    std::fs::write(&path, &bytes).unwrap();
    let m = ragd::kb::backup::read_manifest(&path).unwrap();
    assert_eq!(m.users, 1);
    // Nothing is left behind in the data directory.
    assert!(!std::fs::read_dir(&dir).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with(".backup")));
    s.stop().await;
}
