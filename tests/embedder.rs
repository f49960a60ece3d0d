//! The real all-MiniLM-L6-v2 against sentence-transformers' reference vectors, and the
//! worker's batching of concurrent requests.

mod common;

use ragd::ml::{device, BertEmbedder, EmbedHandle, EmbedWorkerOptions, Embedder};
use serde_json::Value;

fn load() -> BertEmbedder {
    let dir = common::models_dir().join("all-MiniLM-L6-v2");
    BertEmbedder::load(&dir, device::best_device(), 32)
        .unwrap_or_else(|e| panic!("{e}: run scripts/setup.sh to install the embedder"))
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

#[test]
fn matches_sentence_transformers_reference() {
    let model = load();
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
            worst = worst.min(c);
            assert!(c >= 0.9999, "cosine {c:.6} for {text:?}");
            let norm: f32 = got.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "not normalised: {norm}");
        }
    }
    eprintln!("worst cosine vs reference: {worst:.7}");
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
            max_texts_per_call: 32,
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
async fn a_full_queue_fails_fast() {
    let model = load();
    let handle = EmbedHandle::spawn(
        model,
        EmbedWorkerOptions {
            queue_capacity: 1,
            max_texts_per_call: 1,
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
