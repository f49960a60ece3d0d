//! `/query` (extractive without an LLM), hybrid retrieval against each retriever alone,
//! calibrated scores (a relevance that means the same across queries), Arabic
//! normalisation, and a real cross-encoder (random weights, real files) reranking.

mod common;

use common::{assert_error_body, test_config, TestServer};
use ragd::kb::search::{RetrievalMode, SearchParams};
use serde_json::{json, Value};

const GUIDE: &str = "# Field Guide\n\n## Password resets\n\nTo reset a forgotten password, open the account page, \
choose 'Forgot password' and follow the link that arrives by email within five minutes.\n\n\
## Torque wrenches\n\nA torque wrench clicks when the set torque is reached. Calibrate it every twelve months.\n";

/// Filler: varied, code-like and unrelated passages so each retriever has competition.
fn corpus() -> Vec<(String, String)> {
    let mut docs = vec![("guide.md".to_string(), GUIDE.to_string())];
    let topics = [
        "garden hoses",
        "kitchen knives",
        "office chairs",
        "bicycle tyres",
        "paint rollers",
        "ceiling fans",
        "desk lamps",
        "water filters",
        "power drills",
        "tent poles",
    ];
    for (i, t) in topics.iter().enumerate() {
        docs.push((format!("catalogue-{i}.md"), format!("# Catalogue {i}\n\nOur {t} are durable and easy to maintain. \
            Clean the {t} after use and store them in a dry place. Replacement parts for {t} ship within a week.\n")));
    }
    // Codes that look alike: dense similarity cannot tell them apart.
    for code in ["SKU-4417-B", "SKU-4471-D", "SKU-7441-B", "SKU-4741-B"] {
        docs.push((
            format!("{code}.md"),
            format!("# {code}\n\n{code} torque wrench, half inch drive, chrome finish.\n"),
        ));
    }
    docs.push((
        "appendix.md".into(),
        "# Appendix\n\nThe appendix lists items in stock, among them SKU-4471-B, with \
        delivery terms for plumbing, electrical supplies and garden tools in all regions.\n"
            .into(),
    ));
    docs.push(("arabic.md".into(), "# المكتبة\n\nتقع المكتبة العامة في وسط المدينة وتفتح ابوابها كل يوم من الصباح حتى المساء.\n".into()));
    docs
}

async fn load(s: &TestServer) {
    for (name, text) in corpus() {
        let (st, r) = s.upload(&name, text.as_bytes()).await;
        assert_eq!(st, 200, "{name}: {r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extractive_answers_with_sources_and_timing() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    load(&s).await;
    let (st, r) = s
        .post_json(
            "/api/v1/query",
            &json!({"question": "How do I reset my password?", "include_context": true}),
        )
        .await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["question"], "How do I reset my password?");
    assert_eq!(r["answer_mode"], "extractive");
    let answer = r["answer"].as_str().unwrap();
    assert!(answer.contains("To reset a forgotten password"), "{answer}");
    assert!(
        answer.contains("[1]"),
        "sentences cite their source: {answer}"
    );
    let sources = r["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 5);
    assert_eq!(sources[0]["source"], "guide.md");
    assert_eq!(sources[0]["title"], "Field Guide");
    for k in ["title", "source", "section", "score", "doc_id"] {
        assert!(sources[0].get(k).is_some(), "source lacks {k}");
    }
    let t = &r["timing"];
    let f = |k: &str| {
        t[k].as_f64()
            .unwrap_or_else(|| panic!("timing.{k} missing: {t}"))
    };
    for k in [
        "embedding",
        "vector_search",
        "reranking",
        "retrieval_total",
        "context_formatting",
        "llm_generation",
        "total",
    ] {
        assert!(f(k) >= 0.0);
    }
    assert_eq!(f("reranking"), 0.0, "no reranker installed");
    assert!(
        (f("retrieval_total") - (f("embedding") + f("vector_search") + f("reranking"))).abs()
            < 1e-6
    );
    assert!(f("total") >= f("retrieval_total") + f("llm_generation"));
    assert!(f("embedding") > 0.0 && f("llm_generation") > 0.0);
    assert!(r["context_used"]
        .as_str()
        .unwrap()
        .starts_with("[1] Field Guide"));

    let (_, r) = s
        .post_json(
            "/api/v1/query",
            &json!({"question": "wrench calibration", "top_k": 2, "include_timing": false}),
        )
        .await;
    assert!(r["timing"].is_null());
    assert!(r["context_used"].is_null());
    assert_eq!(r["sources"].as_array().unwrap().len(), 2);
    for bad in [
        json!({"question": "x", "top_k": 0}),
        json!({"question": "x", "top_k": 21}),
        json!({"question": "x", "initial_k": 0}),
        json!({"question": "x", "initial_k": 101}),
        json!({"question": "x", "temperature": -0.1}),
        json!({"question": "x", "temperature": 2.5}),
        json!({"question": "  "}),
        json!({"top_k": 3}),
        json!({"question": "x", "include_timing": "yes"}),
    ] {
        let (st, b) = s.post_json("/api/v1/query", &bad).await;
        assert_error_body(st, &b, 400);
    }
    let (st, _) = s
        .post_json(
            "/api/v1/query",
            &json!({"question": "x", "top_k": 20, "initial_k": 100, "temperature": 2.0}),
        )
        .await;
    assert_eq!(st, 200);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_beats_each_retriever_alone() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    load(&s).await;
    s.stop().await;
    // The same data, searched through the library with each retriever alone.
    let state = ragd::AppState::build(test_config(dir.path()))
        .await
        .unwrap();
    let ranked = |mode: RetrievalMode, q: &str| {
        let kb = state.kb.clone();
        let q = q.to_owned();
        async move {
            let r = kb
                .retrieve(SearchParams {
                    query: q,
                    top_k: 5,
                    initial_k: 20,
                    mode,
                })
                .await
                .unwrap();
            r.hits.iter().map(|h| h.source.clone()).collect::<Vec<_>>()
        }
    };
    for q in [
        "SKU-4471-B",
        "I cannot remember my login secret, how do I get a new one?",
    ] {
        for m in [
            RetrievalMode::Dense,
            RetrievalMode::Bm25,
            RetrievalMode::Hybrid,
        ] {
            eprintln!("{q} {m:?}: {:?}", ranked(m, q).await);
        }
    }
    let top = |mode: RetrievalMode, q: &'static str| {
        let r = ranked(mode, q);
        async move { r.await.first().cloned().unwrap_or_default() }
    };
    // An exact code: BM25 matches it, dense sees only look-alike codes.
    let code = "SKU-4471-B";
    assert_ne!(
        top(RetrievalMode::Dense, code).await,
        "appendix.md",
        "dense alone should miss the exact code"
    );
    assert_eq!(top(RetrievalMode::Hybrid, code).await, "appendix.md");
    // A paraphrase: no shared words, dense understands it.
    let para = "I cannot remember my login secret, how do I get a new one?";
    assert_ne!(
        top(RetrievalMode::Bm25, para).await,
        "guide.md",
        "BM25 alone should miss the paraphrase"
    );
    assert_eq!(top(RetrievalMode::Hybrid, para).await, "guide.md");
    // Arabic with diacritics finds the text written without them (and with letter variants).
    let ar = "المَكْتَبَةُ العامَّة";
    assert_eq!(top(RetrievalMode::Bm25, ar).await, "arabic.md");
    assert_eq!(top(RetrievalMode::Hybrid, ar).await, "arabic.md");
    state.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scores_are_a_relevance_that_means_the_same_across_queries() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    load(&s).await;
    let search = |q: &'static str| {
        let s = &s;
        async move {
            let (st, r) = s
                .post_json("/api/v1/search", &json!({"query": q, "top_k": 5}))
                .await;
            assert_eq!(st, 200, "{r}");
            r["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| {
                    (
                        h["source"].as_str().unwrap().to_owned(),
                        h["score"].as_f64().unwrap(),
                    )
                })
                .collect::<Vec<_>>()
        }
    };
    // The relevant passage of each query scores above 0.5, the best passage of a query
    // the knowledge base knows nothing about scores below it (the fused rank score gave
    // every query's first result 1.0).
    for q in [
        "How do I reset my password?",
        "How often should a torque wrench be calibrated?",
    ] {
        let r = search(q).await;
        assert_eq!(r[0].0, "guide.md", "{q}: {r:?}");
        assert!(r[0].1 > 0.5, "{q}: {r:?}");
        assert!(r.iter().all(|(_, s)| (0.0..=1.0).contains(s)), "{r:?}");
        assert!(
            r.windows(2).all(|w| w[0].1 >= w[1].1),
            "in score order: {r:?}"
        );
    }
    for q in [
        "What is the capital of Peru?",
        "Who won the football world cup in 1998?",
    ] {
        let r = search(q).await;
        assert!(r.iter().all(|(_, s)| *s < 0.5), "{q}: {r:?}");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_encoder_reranks_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let models = tempfile::tempdir().unwrap();
    let rr_dir = models.path().join("tiny-cross-encoder");
    ragd::ml::reranker::write_random_cross_encoder(
        &rr_dir,
        &common::models_dir().join("all-MiniLM-L6-v2/tokenizer.json"),
    )
    .unwrap();
    let mut cfg = test_config(dir.path());
    cfg.reranker_model = rr_dir.to_string_lossy().into_owned();
    let s = TestServer::start_with(cfg).await;
    load(&s).await;
    let (_, ready) = s.get_json("/api/v1/health/ready").await;
    let rr = ready["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "reranker")
        .unwrap()
        .clone();
    assert_eq!(rr["healthy"], true, "{ready}");
    let (_, stats) = s.get_json("/api/v1/health/stats").await;
    assert_eq!(stats["reranker_enabled"], true);

    let (_, r) = s
        .post_json(
            "/api/v1/search",
            &json!({"query": "torque wrench", "top_k": 8, "initial_k": 8}),
        )
        .await;
    let results = r["results"].as_array().unwrap();
    let scores: Vec<f64> = results
        .iter()
        .map(|h| h["score"].as_f64().unwrap())
        .collect();
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]),
        "sorted by the reranker: {scores:?}"
    );
    assert!(
        scores.iter().all(|s| (0.0..=1.0).contains(s)),
        "probabilities: {scores:?}"
    );
    // The scores are the cross-encoder's own, computed directly on the same pairs.
    let model = ragd::ml::reranker::CrossEncoder::load(&rr_dir, candle_core::Device::Cpu).unwrap();
    let passages: Vec<String> = results
        .iter()
        .map(|h| h["text"].as_str().unwrap().to_owned())
        .collect();
    let direct = model.score("torque wrench", &passages).unwrap();
    for (a, b) in scores.iter().zip(&direct) {
        assert!((a - *b as f64).abs() < 1e-4, "{a} vs {b}");
    }
    // Reranking changed the fused order for this query.
    let fused_first = {
        let (_, plain) = s
            .post_json(
                "/api/v1/query",
                &json!({"question": "torque wrench", "top_k": 8, "initial_k": 8}),
            )
            .await;
        assert!(plain["timing"]["reranking"].as_f64().unwrap() > 0.0);
        plain["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["doc_id"].clone())
            .collect::<Vec<Value>>()
    };
    assert_eq!(fused_first.len(), 8);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bm25_finds_an_upload_as_soon_as_it_is_acknowledged() {
    // Ingestion answers once SQLite has the source and commits the full-text index
    // afterwards; a search must still see every acknowledged source.
    let dir = tempfile::tempdir().unwrap();
    let state = ragd::AppState::build(test_config(dir.path()))
        .await
        .unwrap();
    for round in 0..6 {
        let name = format!("part-{round}.md");
        let code = format!("ZQX{round}K7731");
        let text = format!("# Part {round}\n\nThe replacement part number is {code}.\n");
        let r = state
            .kb
            .ingest_file(ragd::kb::ingest::FileUpload {
                filename: name.clone(),
                bytes: text.into_bytes(),
                section: String::new(),
            })
            .await
            .unwrap();
        assert!(r.success, "{r:?}");
        let hits = state
            .kb
            .retrieve(SearchParams {
                query: code.to_lowercase(),
                top_k: 3,
                initial_k: 10,
                mode: RetrievalMode::Bm25,
            })
            .await
            .unwrap()
            .hits;
        assert_eq!(
            hits.first().map(|h| h.source.as_str()),
            Some(name.as_str()),
            "BM25 did not see {name} right after its upload"
        );
    }
    // Shutting down commits what is staged: the index on disk is the store's generation.
    state.shutdown().await.unwrap();
    let store_generation: i64 = rusqlite::Connection::open(dir.path().join("ragd.sqlite"))
        .unwrap()
        .query_row("SELECT generation FROM index_state WHERE id = 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    let metas = tantivy::Index::open_in_dir(dir.path().join("fulltext"))
        .unwrap()
        .load_metas()
        .unwrap();
    assert_eq!(metas.payload, Some(store_generation.to_string()));
    let docs: u32 = metas.segments.iter().map(|s| s.num_docs()).sum();
    assert_eq!(docs, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bm25_finds_every_file_of_a_bulk_upload_once_it_is_answered() {
    // A bulk request's files are acknowledged together when it is answered (their
    // groups share one full-text commit); every one of them must then be searchable.
    let dir = tempfile::tempdir().unwrap();
    let state = ragd::AppState::build(test_config(dir.path()))
        .await
        .unwrap();
    for round in 0..3 {
        let files: Vec<(String, Vec<u8>)> = (0..12)
            .map(|i| {
                let code = format!("QZV{round}X{i}K55");
                (
                    format!("batch-{round}-{i}.md"),
                    format!("# Batch {round} item {i}\n\nThe order code is {code}.\n").into_bytes(),
                )
            })
            .collect();
        let r = state.kb.ingest_many(files, String::new()).await;
        assert_eq!((r.successful, r.failed), (12, 0), "{r:?}");
        for i in 0..12 {
            let code = format!("QZV{round}X{i}K55");
            let hits = state
                .kb
                .retrieve(SearchParams {
                    query: code.to_lowercase(),
                    top_k: 1,
                    initial_k: 5,
                    mode: RetrievalMode::Bm25,
                })
                .await
                .unwrap()
                .hits;
            assert_eq!(
                hits.first().map(|h| h.source.clone()),
                Some(format!("batch-{round}-{i}.md")),
                "BM25 did not see {code} after the bulk request was answered"
            );
        }
    }
    state.shutdown().await.unwrap();
}
