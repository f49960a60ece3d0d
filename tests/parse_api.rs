//! The /parse endpoints through HTTP, on files the tests write themselves.

mod common;

use common::{assert_error_body, sse_events, TestServer};
use serde_json::Value;

const PAGE: &str = r#"<html><head><title>Field Manual</title></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<main><h1>Field Manual</h1><p>Visit https://example.com/help for updates. The pump must be primed before use.</p>
<h2>Parts</h2><table><tr><th>Part</th><th>Code</th></tr><tr><td>Valve</td><td>V-100</td></tr><tr><td>Seal</td><td>S-200</td></tr></table>
<ul><li>Check the valve</li><li>Replace the seal</li></ul></main><footer>Copyright</footer></body></html>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parse_html_with_tables_and_cleaning() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let (st, p) = s
        .post_file("/api/v1/parse", "manual.html", PAGE.as_bytes(), &[])
        .await;
    assert_eq!(st, 200, "{p}");
    assert_eq!(p["success"], true);
    assert_eq!(p["source_file"], "manual.html");
    assert_eq!(p["format"], ".html");
    assert_eq!(p["metadata"]["title"], "Field Manual");
    assert_eq!(p["metadata"]["num_pages"], 1);
    let text = p["content"]["cleaned_text"].as_str().unwrap();
    assert!(text.contains("The pump must be primed before use."));
    assert!(!text.contains("https://"), "URLs are removed by default");
    assert!(
        !text.contains("Home") && !text.contains("Copyright"),
        "navigation and footer are not content"
    );
    assert_eq!(
        p["content"]["char_count"].as_u64().unwrap() as usize,
        text.chars().count()
    );
    assert_eq!(p["tables_count"], 1);
    let t = &p["tables"][0];
    assert_eq!(
        (
            t["rows"].as_u64(),
            t["cols"].as_u64(),
            t["page_number"].as_u64()
        ),
        (Some(3), Some(2), Some(1))
    );
    assert!(t["markdown"]
        .as_str()
        .unwrap()
        .contains("| Valve | V-100 |"));
    assert!(t["content"].as_str().unwrap().contains("Seal | S-200"));
    assert!(p["full_text"].as_str().unwrap().contains("| Part | Code |"));
    assert!(p["llm_ready"]
        .as_str()
        .unwrap()
        .starts_with("# Field Manual"));
    assert_eq!(p["llm_ready_mode"], "markdown");

    let (_, p) = s
        .post_file(
            "/api/v1/parse",
            "manual.html",
            PAGE.as_bytes(),
            &[("include_tables", "false"), ("remove_urls", "false")],
        )
        .await;
    assert!(!p["full_text"].as_str().unwrap().contains("V-100"));
    assert_eq!(p["tables_count"], 1, "tables are still reported");
    assert!(p["content"]["cleaned_text"]
        .as_str()
        .unwrap()
        .contains("https://example.com/help"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parse_text_formats() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    // Arabic: normalised by default, in logical order; kept as is when asked.
    let ar = "اللُّغَةُ العَرَبِيَّةُ جَمِيلَةٌ في المدرسة";
    let (st, p) = s
        .post_file("/api/v1/parse", "ar.txt", ar.as_bytes(), &[])
        .await;
    assert_eq!(st, 200, "{p}");
    assert_eq!(
        p["content"]["cleaned_text"],
        "اللغه العربيه جميله في المدرسه"
    );
    let (_, p) = s
        .post_file(
            "/api/v1/parse",
            "ar.txt",
            ar.as_bytes(),
            &[("normalize_arabic", "false")],
        )
        .await;
    assert_eq!(p["content"]["cleaned_text"], ar);
    // CSV with semicolons and a ragged row.
    let (st, p) = s
        .post_file(
            "/api/v1/parse",
            "stock.csv",
            "sku;qty;place\nA1;3;north\nB2;5\n".as_bytes(),
            &[],
        )
        .await;
    assert_eq!(st, 200, "{p}");
    assert_eq!(
        (
            p["tables"][0]["rows"].as_u64(),
            p["tables"][0]["cols"].as_u64()
        ),
        (Some(3), Some(3))
    );
    // JSON.
    let (st, p) = s
        .post_file(
            "/api/v1/parse",
            "inv.json",
            br#"{"title": "Inventory", "items": [{"sku": "A1"}, {"sku": "B2"}]}"#,
            &[],
        )
        .await;
    assert_eq!(st, 200, "{p}");
    assert_eq!(p["metadata"]["title"], "Inventory");
    assert_eq!(p["tables_count"], 1);
    // reStructuredText headings.
    let (st, p) = s
        .post_file(
            "/api/v1/parse",
            "guide.rst",
            b"Guide\n=====\n\nIntro.\n\nSetup\n-----\n\nSteps.\n",
            &[],
        )
        .await;
    assert_eq!(st, 200, "{p}");
    assert!(p["llm_ready"].as_str().unwrap().contains("## Setup"));
    // Markdown.
    let (st, p) = s
        .post_file("/api/v1/parse", "n.md", b"# Notes\n\n- a\n- b\n", &[])
        .await;
    assert_eq!(st, 200, "{p}");
    assert_eq!(p["metadata"]["title"], "Notes");
    s.stop().await;
}

fn long_markdown() -> String {
    let para = |n: usize| {
        (0..n)
            .map(|i| format!("Word{i} fills the section. "))
            .collect::<String>()
    };
    format!(
        "# Handbook\n\n{}\n\n## Safety\n\n{}\n\n### Gloves\n\n{}\n\n## Repairs\n\n{}\n",
        para(20),
        para(150),
        para(30),
        para(40)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sections_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let md = long_markdown();
    let fields = [
        ("target_chunk_words", "200"),
        ("max_chunk_words", "300"),
        ("include_full_text", "true"),
    ];
    let (st, r) = s
        .post_file("/api/v1/parse/sections", "h.md", md.as_bytes(), &fields)
        .await;
    assert_eq!(st, 200, "{r}");
    let stats = &r["chunking_stats"];
    assert_eq!(
        stats["strategy_used"], "semantic",
        "auto picks semantic for a document with headings"
    );
    assert_eq!(stats["sections_found"], 4);
    assert_eq!(stats["heading_distribution"]["2"], 2);
    assert_eq!(stats["pages_processed"], 1);
    let chunks = r["chunks"].as_array().unwrap();
    assert_eq!(
        stats["total_chunks"].as_u64().unwrap() as usize,
        chunks.len()
    );
    let safety: Vec<&Value> = chunks.iter().filter(|c| c["heading"] == "Safety").collect();
    assert!(safety.len() >= 2, "Safety has 750 words > 300: continued");
    assert_eq!(safety[1]["is_continuation"], true);
    let gloves = chunks.iter().find(|c| c["heading"] == "Gloves").unwrap();
    assert_eq!(gloves["section_path"], "Handbook > Safety > Gloves");
    assert_eq!(gloves["heading_level"], 3);
    assert_eq!(gloves["parent_section_id"], safety[0]["section_id"]);
    for (i, c) in chunks.iter().enumerate() {
        for key in [
            "chunk_id",
            "content",
            "section_path",
            "heading",
            "heading_level",
            "page_start",
            "page_end",
            "tables",
            "images",
            "chunk_index",
            "total_chunks",
            "word_count",
            "parent_section_id",
            "language",
            "is_continuation",
        ] {
            assert!(c.get(key).is_some(), "chunk lacks {key}");
        }
        assert_eq!(c["chunk_index"], i);
        assert_eq!(c["language"], "en");
        assert!(c["word_count"].as_u64().unwrap() <= 300);
    }
    assert!(r["full_text"].as_str().unwrap().contains("### Gloves"));

    for (mode, expect) in [
        ("paragraph", "paragraph"),
        ("page", "page"),
        ("disabled", "disabled"),
        ("semantic", "semantic"),
    ] {
        let (st, r) = s
            .post_file(
                "/api/v1/parse/sections",
                "h.md",
                md.as_bytes(),
                &[("chunking_mode", mode)],
            )
            .await;
        assert_eq!(st, 200, "{r}");
        assert_eq!(r["chunking_stats"]["strategy_used"], expect);
        assert!(r["full_text"].is_null());
        if mode == "disabled" {
            assert_eq!(r["chunks"].as_array().unwrap().len(), 1);
        }
    }
    for bad in [
        [("chunking_mode", "fancy")],
        [("target_chunk_words", "0")],
        [("max_chunk_words", "x")],
        [("table_mode", "exact")],
        [("enable_ocr", "maybe")],
    ] {
        let (st, b) = s
            .post_file("/api/v1/parse/sections", "h.md", md.as_bytes(), &bad)
            .await;
        assert_error_body(st, &b, 400);
    }
    let (st, b) = s
        .post_file(
            "/api/v1/parse/sections",
            "h.md",
            md.as_bytes(),
            &[("target_chunk_words", "900"), ("max_chunk_words", "100")],
        )
        .await;
    assert_error_body(st, &b, 400);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_streams_have_their_events_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let md = long_markdown();
    let ev = sse_events(
        s.send_file("/api/v1/parse/sections/stream", "h.md", md.as_bytes(), &[])
            .await,
    )
    .await;
    let kinds: Vec<&str> = ev.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(&kinds[..4], ["status", "metadata", "status", "section"]);
    assert_eq!(ev[0].1["stage"], "parsing");
    assert_eq!(ev[2].1["stage"], "processing");
    assert_eq!(ev[1].1["metadata"]["title"], "Handbook");
    assert_eq!(&kinds[kinds.len() - 2..], ["stats", "done"]);
    let sections: Vec<&Value> = ev
        .iter()
        .filter(|(k, _)| k == "section")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(
        sections.len() as u64,
        ev[kinds.len() - 2].1["total_chunks"].as_u64().unwrap()
    );
    let gloves = sections.iter().find(|d| d["heading"] == "Gloves").unwrap();
    assert_eq!(
        gloves["headers"],
        serde_json::json!(["Handbook", "Safety", "Gloves"])
    );
    assert!(gloves["content"].as_str().unwrap().contains("Word0"));

    let ev = sse_events(
        s.send_file(
            "/api/v1/parse/sections/incremental",
            "h.md",
            md.as_bytes(),
            &[("max_chunk_words", "400"), ("target_chunk_words", "100")],
        )
        .await,
    )
    .await;
    let kinds: Vec<&str> = ev.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds[0], "metadata");
    assert_eq!(kinds[1], "progress");
    assert_eq!(ev[1].1["page"], 1);
    assert_eq!(ev[1].1["total_pages"], 1);
    assert!(ev[1].1["message"].as_str().unwrap().contains("1 of 1"));
    assert!(kinds.contains(&"chunk"));
    assert_eq!(&kinds[kinds.len() - 2..], ["stats", "done"]);

    // Errors arrive as an error event, then done.
    let ev = sse_events(
        s.send_file(
            "/api/v1/parse/sections/stream",
            "bad.json",
            b"{not json",
            &[],
        )
        .await,
    )
    .await;
    let kinds: Vec<&str> = ev.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["status", "error", "done"]);
    assert_eq!(ev[1].1["status_code"], 400);
    assert!(ev[1].1["detail"].as_str().unwrap().contains("bad.json"));
    // Incremental refuses formats the contract does not list for it.
    let ev = sse_events(
        s.send_file(
            "/api/v1/parse/sections/incremental",
            "d.csv",
            b"a,b\n1,2\n",
            &[],
        )
        .await,
    )
    .await;
    assert_eq!(
        ev.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        ["error", "done"]
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn formats_and_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let (st, f) = s.get_json("/api/v1/parse/formats").await;
    assert_eq!(st, 200);
    let formats: Vec<&str> = f["formats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for ext in [
        ".pdf", ".docx", ".pptx", ".html", ".htm", ".md", ".csv", ".xlsx", ".png", ".jpg", ".jpeg",
        ".tiff", ".tif", ".bmp",
    ] {
        assert!(formats.contains(&ext), "{ext} missing");
        assert!(f["descriptions"][ext]
            .as_str()
            .is_some_and(|d| !d.is_empty()));
    }
    for (name, bytes) in [
        ("x.exe", b"MZ".to_vec()),
        ("x", b"abc".to_vec()),
        ("e.md", Vec::new()),
        ("b.txt", vec![0, 1, 2, 0]),
        ("j.json", b"{\"a\": [1, 2".to_vec()),
        (
            "w.html",
            b"<html><body><script>x()</script></body></html>".to_vec(),
        ),
    ] {
        let (st, b) = s.post_file("/api/v1/parse", name, &bytes, &[]).await;
        assert_error_body(st, &b, 400);
    }
    let r = s
        .client
        .post(s.url("/api/v1/parse"))
        .multipart(reqwest::multipart::Form::new().text("enable_ocr", "true"))
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    assert_error_body(st, &r.json().await.unwrap(), 400);
    s.stop().await;
}
