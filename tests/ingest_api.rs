//! Document management, async uploads and tasks, bulk and ZIP uploads through HTTP.

mod common;

use std::io::Write as _;
use std::time::Duration;

use common::{assert_error_body, test_config, TestServer};
use serde_json::{json, Value};

fn md(topic: &str, n: usize) -> String {
    let body: String = (0..n)
        .map(|i| format!("Paragraph {i} explains {topic} in plain words.\n\n"))
        .collect();
    format!("# {topic}\n\n{body}")
}

/// Polls a task until it leaves pending/running.
pub async fn wait_task(s: &TestServer, id: &str) -> Value {
    for _ in 0..600 {
        let (st, t) = s.get_json(&format!("/api/v1/tasks/{id}")).await;
        assert_eq!(st, 200, "{t}");
        if !matches!(t["status"].as_str(), Some("pending" | "running")) {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {id} did not finish");
}

fn sources_of(body: &Value) -> Vec<String> {
    body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["source"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_by_id_batch_source_and_filter() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.post_file(
        "/api/v1/upload",
        "pumps.md",
        md("pumps", 80).as_bytes(),
        &[("section", "engineering")],
    )
    .await;
    s.post_file(
        "/api/v1/upload",
        "valves.md",
        md("valves", 80).as_bytes(),
        &[("section", "engineering")],
    )
    .await;
    s.post_file(
        "/api/v1/upload",
        "bread.md",
        md("baking bread", 80).as_bytes(),
        &[("section", "kitchen")],
    )
    .await;
    let (_, stats) = s.get_json("/api/v1/documents/stats").await;
    let total = stats["total_documents"].as_u64().unwrap();
    assert_eq!(stats["by_source"].as_object().unwrap().len(), 3);
    let by_lang: u64 = stats["by_language"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(by_lang, total, "{stats}");
    let (_, src) = s.get_json("/api/v1/documents/sources").await;
    assert_eq!(
        src,
        json!({"sources": ["bread.md", "pumps.md", "valves.md"], "count": 3})
    );

    // One by id.
    let hit = s.search("baking bread", 1).await;
    let id = hit["results"][0]["doc_id"].as_str().unwrap().to_owned();
    let r = s
        .client
        .delete(s.url(&format!("/api/v1/documents/{id}")))
        .send()
        .await
        .unwrap();
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["status"], "deleted");
    assert_eq!(body["doc_id"], id.as_str());
    let (st, _) = s.get_json(&format!("/api/v1/documents/{id}")).await;
    assert_eq!(st, 404);
    let again: Value = s
        .client
        .delete(s.url(&format!("/api/v1/documents/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(again["status"], "not_found");
    assert!(!s.search("baking bread", 50).await["results"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["doc_id"] == id.as_str()));

    // A batch with one unknown id.
    let (_, page) = s.get_json("/api/v1/documents?page_size=100").await;
    let pump_ids: Vec<String> = page["documents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["metadata"]["source"] == "pumps.md")
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .take(2)
        .collect();
    let (st, b) = s
        .post_json(
            "/api/v1/documents/delete",
            &json!({"doc_ids": [pump_ids[0], pump_ids[1], "nope"]}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(
        (
            b["deleted"].as_u64(),
            b["skipped"].as_u64(),
            b["errors"].as_u64()
        ),
        (Some(2), Some(1), Some(0))
    );
    assert!(b["details"][0]["message"].is_null());
    assert_eq!(b["details"][2]["status"], "not_found");

    // By source.
    let (st, b) = s
        .post_json(
            "/api/v1/documents/delete/by-source",
            &json!({"source": "valves.md"}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(b["source"], "valves.md");
    assert!(b["deleted"].as_u64().unwrap() >= 1);
    assert!(!sources_of(&s.search("valves", 20).await).contains(&"valves.md".to_string()));

    // By filter: $ne keeps the pumps, $in on section deletes them.
    let (st, b) = s
        .post_json(
            "/api/v1/documents/delete/by-filter",
            &json!({"where": {"section": "engineering", "source": {"$ne": "pumps.md"}}}),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(b["deleted"], 0);
    let (st, b) = s
        .post_json(
            "/api/v1/documents/delete/by-filter",
            &json!({"where": {"section": {"$in": ["engineering", "other"]}, "file_type": "md"}}),
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert!(b["deleted"].as_u64().unwrap() >= 1);
    assert_eq!(b["where"]["file_type"], "md");
    let (_, src) = s.get_json("/api/v1/documents/sources").await;
    assert_eq!(src["sources"], json!(["bread.md"]));
    for bad in [
        json!({"where": {}}),
        json!({"where": {"a-b": 1}}),
        json!({"where": {"x": {"$gt": 1}}}),
        json!({"where": {"x": [1]}}),
        json!({}),
    ] {
        let (st, b) = s
            .post_json("/api/v1/documents/delete/by-filter", &bad)
            .await;
        assert_error_body(st, &b, 400);
    }
    let (st, b) = s
        .post_json("/api/v1/documents/delete/by-source", &json!({"source": ""}))
        .await;
    assert_error_body(st, &b, 400);
    // Indexes still agree with the store.
    let (_, ready) = s.get_json("/api/v1/health/ready").await;
    assert_eq!(ready["components"][1]["healthy"], true, "{ready}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_upload_tasks_list_and_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = test_config(dir.path());
    cfg.task_workers = 1;
    let s = TestServer::start_with(cfg).await;
    let (st, ack) = s
        .post_file(
            "/api/v1/upload/async",
            "pumps.md",
            md("pumps", 10).as_bytes(),
            &[],
        )
        .await;
    assert_eq!(st, 200, "{ack}");
    assert_eq!(ack["status"], "pending");
    assert!(ack["created_at"].as_str().unwrap().len() >= 19);
    assert!(!ack["created_at"].as_str().unwrap().ends_with('Z'));
    let t = wait_task(&s, ack["task_id"].as_str().unwrap()).await;
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["progress"], 1.0);
    assert_eq!(t["result"]["filename"], "pumps.md");
    assert!(t["result"]["chunks_added"].as_u64().unwrap() >= 1);
    assert!(t["started_at"].is_string() && t["completed_at"].is_string());
    assert_eq!(
        s.search("pumps", 1).await["results"][0]["source"],
        "pumps.md"
    );

    // A big file keeps the single worker busy; the next task is cancelled while pending.
    let big = md("turbines", 3000);
    let (_, busy) = s
        .post_file("/api/v1/upload/async", "turbines.md", big.as_bytes(), &[])
        .await;
    let (_, queued) = s
        .post_file(
            "/api/v1/upload/async",
            "later.md",
            md("later", 3).as_bytes(),
            &[],
        )
        .await;
    let qid = queued["task_id"].as_str().unwrap();
    let r = s
        .client
        .delete(s.url(&format!("/api/v1/tasks/{qid}")))
        .send()
        .await
        .unwrap();
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["status"], "cancelled", "{body}");
    // The running one is cancelled mid-file: nothing of it is stored.
    let bid = busy["task_id"].as_str().unwrap();
    let started = std::time::Instant::now();
    let r = s
        .client
        .delete(s.url(&format!("/api/v1/tasks/{bid}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let t = wait_task(&s, bid).await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "cancellation took {:?}",
        started.elapsed()
    );
    assert_eq!(t["status"], "cancelled");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, src) = s.get_json("/api/v1/documents/sources").await;
    assert_eq!(
        src["sources"],
        json!(["pumps.md"]),
        "a cancelled upload wrote nothing"
    );
    assert_eq!(wait_task(&s, qid).await["status"], "cancelled");
    let r = s
        .client
        .delete(s.url(&format!("/api/v1/tasks/{qid}")))
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    assert_error_body(st, &r.json().await.unwrap(), 400);
    // Every upload's file is gone: completed, cancelled while pending, cancelled while
    // running (its worker removes it as it stops).
    let uploads = dir.path().join("uploads");
    let left = || std::fs::read_dir(&uploads).unwrap().count();
    for _ in 0..100 {
        if left() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(left(), 0, "upload files left behind");

    // Listing: newest first, filters and bounds.
    let (st, all) = s.get_json("/api/v1/tasks").await;
    assert_eq!(st, 200);
    assert_eq!(all["total"], 3);
    assert_eq!(all["tasks"][0]["task_id"], qid);
    let (_, cancelled) = s.get_json("/api/v1/tasks?status=cancelled&limit=1").await;
    assert_eq!(
        (
            cancelled["total"].as_u64(),
            cancelled["tasks"].as_array().unwrap().len()
        ),
        (Some(2), 1)
    );
    let (_, done) = s.get_json("/api/v1/tasks?status=completed").await;
    assert_eq!(done["total"], 1);
    for q in ["limit=0", "limit=201", "limit=x", "status=weird"] {
        let (st, b) = s.get_json(&format!("/api/v1/tasks?{q}")).await;
        assert_error_body(st, &b, 400);
    }
    let (st, _) = s.get_json("/api/v1/tasks?limit=200").await;
    assert_eq!(st, 200);
    let (st, b) = s.get_json("/api/v1/tasks/unknown").await;
    assert_error_body(st, &b, 404);
    let r = s
        .client
        .delete(s.url("/api/v1/tasks/unknown"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    // Unsupported types are refused before a task exists.
    let (st, b) = s
        .post_file("/api/v1/upload/async", "x.exe", b"MZ", &[])
        .await;
    assert_error_body(st, &b, 400);
    s.stop().await;
    assert_eq!(left(), 0);

    // Files no unfinished task will read are swept at start-up.
    let mut cfg = test_config(dir.path());
    cfg.task_workers = 1;
    for stray in ["half-written.part", "0b3c9c1e-5b2f-4d7e-9a55-4a4f2a9d1c11"] {
        std::fs::write(uploads.join(stray), b"leftover").unwrap();
    }
    let s = TestServer::start_with(cfg).await;
    assert_eq!(left(), 0, "stray upload files were kept");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_and_zip_uploads() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = test_config(dir.path());
    cfg.max_bulk_files = 4;
    cfg.max_zip_entries = 10;
    let s = TestServer::start_with(cfg).await;
    let a = md("anchors", 4);
    let part = |name: &str, bytes: &[u8]| {
        reqwest::multipart::Part::bytes(bytes.to_vec()).file_name(name.to_owned())
    };
    let form = reqwest::multipart::Form::new()
        .part("files", part("anchors.md", a.as_bytes()))
        .part("files", part("copy.md", a.as_bytes()))
        .part("files", part("tool.exe", b"MZ"))
        .part(
            "files",
            part("notes.txt", b"Plain notes about ropes and knots."),
        )
        .text("section", "bulk");
    let b: Value = s
        .client
        .post(s.url("/api/v1/upload/bulk"))
        .multipart(form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(b["total_files"], 4);
    assert_eq!(b["successful"], 3);
    assert_eq!(b["failed"], 1);
    assert_eq!(b["duplicates"], 1);
    assert_eq!(b["errors"][0]["filename"], "tool.exe");
    assert!(b["errors"][0]["error"]
        .as_str()
        .unwrap()
        .contains("unsupported"));
    // The two identical files ran side by side: whichever committed second is the duplicate.
    let dups: Vec<&Value> = b["results"].as_array().unwrap()[..2]
        .iter()
        .filter(|r| r["duplicate_type"] == "content_hash")
        .collect();
    assert_eq!(dups.len(), 1, "{b}");
    assert!(b["total_chunks_added"].as_u64().unwrap() >= 2);
    assert_eq!(
        s.search("knots", 1).await["results"][0]["metadata"]["section"],
        "bulk"
    );
    // Too many files.
    let mut form = reqwest::multipart::Form::new();
    for i in 0..5 {
        form = form.part("files", part(&format!("f{i}.txt"), b"x y z"));
    }
    let r = s
        .client
        .post(s.url("/api/v1/upload/bulk"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    assert_error_body(st, &r.json().await.unwrap(), 400);

    let zip = |entries: &[(&str, Vec<u8>)]| -> Vec<u8> {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, bytes) in entries {
            w.start_file(*name, opts).unwrap();
            w.write_all(bytes).unwrap();
        }
        w.finish().unwrap().into_inner()
    };
    let good = zip(&[
        ("docs/ropes.md", md("ropes", 3).into_bytes()),
        ("docs/sails.txt", b"Sails catch the wind.".to_vec()),
    ]);
    let (st, b) = s
        .post_file(
            "/api/v1/upload/bulk/zip",
            "docs.zip",
            &good,
            &[("section", "zipped")],
        )
        .await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(
        (b["total_files"].as_u64(), b["successful"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(b["results"][0]["filename"], "ropes.md");
    let (_, before) = s.get_json("/api/v1/documents/stats").await;

    let traversal = zip(&[
        ("ok.md", b"# Fine\n\ntext".to_vec()),
        ("../../etc/evil.md", b"# Evil\n\ntext".to_vec()),
    ]);
    let bomb = zip(&[("zeros.txt", vec![b'0'; 60 * 1024 * 1024])]);
    let many: Vec<(String, Vec<u8>)> = (0..11)
        .map(|i| (format!("f{i}.txt"), b"tiny".to_vec()))
        .collect();
    let many = zip(&many
        .iter()
        .map(|(n, b)| (n.as_str(), b.clone()))
        .collect::<Vec<_>>());
    for (name, bytes) in [
        ("t.zip", traversal),
        ("bomb.zip", bomb),
        ("many.zip", many),
        ("junk.zip", b"PK\x03\x04junk".to_vec()),
    ] {
        let (st, b) = s
            .post_file("/api/v1/upload/bulk/zip", name, &bytes, &[])
            .await;
        assert_error_body(st, &b, 400);
        assert!(b["detail"].as_str().unwrap().contains("ZIP"), "{b}");
    }
    let (_, after) = s.get_json("/api/v1/documents/stats").await;
    assert_eq!(before, after, "refused archives wrote nothing");
    s.stop().await;
}
