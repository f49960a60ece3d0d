//! The real all-MiniLM-L6-v2 against sentence-transformers' reference vectors (the
//! exact f32 path and the default, faster one), and the worker's batching: concurrent
//! requests share passes, interactive requests go ahead of bulk work.

mod common;

use ragd::ml::{device, BertEmbedder, EmbedHandle, EmbedWorkerOptions, Embedder, Precision};
use serde_json::Value;

fn load_with(precision: Precision) -> BertEmbedder {
    let dir = common::models_dir().join("all-MiniLM-L6-v2");
    BertEmbedder::load_with(&dir, device::best_device(), 32, precision)
        .unwrap_or_else(|e| panic!("{e}: run scripts/setup.sh to install the embedder"))
}

fn load() -> BertEmbedder {
    load_with(Precision::Auto)
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (*x as f64) * (*y as f64))
        .sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

fn reference() -> Vec<(String, Vec<f32>)> {
    let path = common::shared_dir().join("reference/minilm-embeddings.json");
    let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(v["max_seq_length"], 256);
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|it| {
            let e = it["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect();
            (it["text"].as_str().unwrap().to_owned(), e)
        })
        .collect()
}

/// The worst cosine to the reference over every text, embedded in one batch and alone.
fn worst_reference_cosine(model: &BertEmbedder) -> f64 {
    assert_eq!(model.dim(), 384);
    assert_eq!(model.max_tokens(), 256);
    let items = reference();
    assert!(items.len() >= 18);
    let texts: Vec<&str> = items.iter().map(|(t, _)| t.as_str()).collect();
    // Once as one padded batch, once one at a time: padding must not change a vector.
    let batched = model.embed(&texts).unwrap();
    let mut worst = 1.0f64;
    for (i, (text, expected)) in items.iter().enumerate() {
        let single = model.embed(&[text.as_str()]).unwrap().remove(0);
        for got in [&batched[i], &single] {
            let c = cosine(got, expected);
            if c < worst {
                eprintln!("{}: cosine {c:.7} for {text:?}", model.arithmetic());
            }
            worst = worst.min(c);
            let norm: f32 = got.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "not normalised: {norm}");
        }
    }
    eprintln!(
        "{}: worst cosine vs reference {worst:.7}",
        model.arithmetic()
    );
    worst
}

#[test]
fn the_exact_path_matches_sentence_transformers_reference() {
    let model = load_with(Precision::F32);
    assert_eq!(model.arithmetic(), "f32");
    let worst = worst_reference_cosine(&model);
    assert!(worst >= 0.9999, "worst cosine {worst:.6}");
}

#[test]
fn the_default_path_stays_within_0_999_of_the_reference() {
    let model = load();
    let worst = worst_reference_cosine(&model);
    assert!(
        worst >= 0.999,
        "{}: worst cosine {worst:.6}",
        model.arithmetic()
    );
}

#[test]
fn long_text_is_truncated_to_the_window() {
    let model = load();
    let counter = model.token_counter();
    let long = "word ".repeat(1000);
    assert!(counter.count(&long) > 256);
    let prefix: String = "word ".repeat(254);
    // 254 words + [CLS] + [SEP] = 256 tokens: the same vector as the 1000-word text.
    let v = model.embed(&[long.as_str(), prefix.as_str()]).unwrap();
    assert!(cosine(&v[0], &v[1]) > 0.99999);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_batches_concurrent_requests_in_order() {
    let model = load();
    let expected = model
        .embed(&["alpha one", "beta two", "gamma three"])
        .unwrap();
    let handle = EmbedHandle::spawn(
        model,
        EmbedWorkerOptions {
            queue_capacity: 64,
            max_batch_texts: 32,
            // Every request reaches the worker: what is tested is its batching.
            cache_bytes: 0,
            ..EmbedWorkerOptions::default()
        },
    )
    .unwrap();
    let mut tasks = Vec::new();
    for i in 0..24 {
        let h = handle.clone();
        tasks.push(tokio::spawn(async move {
            let texts = [
                "alpha one".to_string(),
                "beta two".to_string(),
                "gamma three".to_string(),
            ];
            let rotated: Vec<String> = texts.iter().cycle().skip(i % 3).take(3).cloned().collect();
            (i, h.embed(rotated).await.unwrap())
        }));
    }
    for t in tasks {
        let (i, got) = t.await.unwrap();
        for (j, v) in got.iter().enumerate() {
            assert!(
                cosine(v, &expected[(j + i) % 3]) > 0.99999,
                "request {i} item {j} out of order"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recent_texts_are_answered_from_the_cache() {
    let model = load();
    let direct = model
        .embed(&["alpha one", "beta two", "gamma three"])
        .unwrap();
    let handle = EmbedHandle::spawn(model, EmbedWorkerOptions::default()).unwrap();
    let texts = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let first = handle
        .embed(texts(&["alpha one", "beta two"]))
        .await
        .unwrap();
    let s1 = handle.stats();
    assert_eq!((s1.cache_hits, s1.cache_misses, s1.sequences), (0, 2, 2));
    // Two known texts (one twice) and a new one: only the new one reaches the model.
    let got = handle
        .embed(texts(&["beta two", "gamma three", "beta two", "alpha one"]))
        .await
        .unwrap();
    let s2 = handle.stats();
    assert_eq!(s2.sequences, 3, "only 'gamma three' is embedded");
    assert_eq!((s2.cache_hits, s2.cache_misses), (3, 3));
    // In the order asked, and the very vectors embedded before.
    assert_eq!(got[0], first[1]);
    assert_eq!(got[2], first[1]);
    assert_eq!(got[3], first[0]);
    for (v, want) in [(&got[3], 0), (&got[0], 1), (&got[1], 2)] {
        assert!(cosine(v, &direct[want]) > 0.99999);
    }
    // A probe always reaches the model.
    handle.embed_fresh(texts(&["alpha one"])).await.unwrap();
    assert_eq!(handle.stats().sequences, 4);
    assert_eq!(handle.stats().cache_hits, 3);
    // Turned off, nothing is kept.
    let off = EmbedHandle::spawn(
        load(),
        EmbedWorkerOptions {
            cache_bytes: 0,
            ..EmbedWorkerOptions::default()
        },
    )
    .unwrap();
    for _ in 0..2 {
        off.embed(texts(&["alpha one"])).await.unwrap();
    }
    assert_eq!((off.stats().sequences, off.stats().cache_hits), (2, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_fails_fast() {
    let model = load();
    let handle = EmbedHandle::spawn(
        model,
        EmbedWorkerOptions {
            queue_capacity: 1,
            max_batch_texts: 1,
            cache_bytes: 0,
            ..EmbedWorkerOptions::default()
        },
    )
    .unwrap();
    let big: Vec<String> = (0..64)
        .map(|i| format!("passage number {i} ").repeat(40))
        .collect();
    let mut pending = Vec::new();
    let mut overloaded = 0;
    for _ in 0..6 {
        let h = handle.clone();
        let texts = big.clone();
        pending.push(tokio::spawn(async move { h.embed(texts).await }));
    }
    for p in pending {
        if let Err(ragd::ml::MlError::Overloaded) = p.await.unwrap() {
            overloaded += 1;
        }
    }
    assert!(
        overloaded >= 1,
        "six large requests into a queue of one must overflow it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_requests_share_passes_and_give_each_its_own_vectors() {
    // The worker's batching is the same whatever the arithmetic; f32 is quickest to run
    // in unoptimised test builds (its products are gemm's, built optimised).
    let model = load_with(Precision::F32);
    let counter = model.token_counter();
    let texts: Vec<String> = (0..48)
        .map(|i| format!("passage {i} about pumps, valves and seal number {}", i * 7))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let expected = model.embed(&refs).unwrap();
    let handle = EmbedHandle::spawn(
        model,
        EmbedWorkerOptions {
            max_batch_tokens: 256,
            max_batch_texts: 32,
            ..EmbedWorkerOptions::default()
        },
    )
    .unwrap();
    // Sixteen requests of three texts, sent at once.
    let mut tasks = Vec::new();
    for part in texts.chunks(3) {
        let (h, seqs) = (
            handle.clone(),
            part.iter()
                .map(|t| counter.encode(t).unwrap())
                .collect::<Vec<_>>(),
        );
        tasks.push(tokio::spawn(
            async move { h.embed_bulk(seqs).await.unwrap() },
        ));
    }
    let mut got = Vec::new();
    for t in tasks {
        got.extend(t.await.unwrap());
    }
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert!(cosine(g, e) > 0.99999, "text {i} got another text's vector");
    }
    let stats = handle.stats();
    let tokens: usize = texts.iter().map(|t| counter.encode(t).unwrap().len()).sum();
    assert_eq!(stats.sequences, 48);
    assert_eq!(stats.tokens as usize, tokens);
    // Passes fill across requests up to the token budget: far fewer passes than requests.
    assert!(
        stats.passes <= 1 + (tokens as u64).div_ceil(256),
        "{} passes for 16 requests of {tokens} tokens",
        stats.passes
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interactive_request_goes_ahead_of_bulk_work() {
    let model = load_with(Precision::F32);
    let counter = model.token_counter();
    let long = "the quick brown fox jumps over the lazy dog ".repeat(12);
    let bulk: Vec<Vec<u32>> = (0..128)
        .map(|i| counter.encode(&format!("{i} {long}")).unwrap())
        .collect();
    let handle = EmbedHandle::spawn(model, EmbedWorkerOptions::default()).unwrap();
    let started = std::time::Instant::now();
    let work = {
        let h = handle.clone();
        tokio::spawn(async move { h.embed_bulk(bulk).await.unwrap() })
    };
    // Let the bulk work start, then ask for one query's vector.
    while handle.stats().passes == 0 && started.elapsed().as_secs() < 60 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let query = handle.embed(vec!["where is the fox".into()]).await.unwrap();
    assert_eq!(query[0].len(), 384);
    assert!(
        !work.is_finished(),
        "the query waited for all of the bulk work"
    );
    assert_eq!(work.await.unwrap().len(), 128);
}
