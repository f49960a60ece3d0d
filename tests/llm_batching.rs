//! Continuous batching leaves every generation as it would be alone: eight requests of
//! different prompts, lengths and sampling, run at once (joining and leaving the batch at
//! different steps), give token for token what each gives run alone, on a tiny model of
//! every family and on the real SmolLM2. Also: a batch is bounded by `parallel`, and a
//! request that does not fit the key/value budget waits and then runs.

mod common;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ragd::ml::llm::tiny::write_tiny_gguf;
use ragd::ml::llm::{
    Arch, Backend, ChatMessage, CpuOptions, FinishReason, GenerateRequest, GenerationParams,
    LlmEngine, LlmEvent, LlmHandle, LlmWorkerOptions, Prompt, Role,
};

const ARCHS: [Arch; 5] = [
    Arch::Llama,
    Arch::Qwen2,
    Arch::Qwen3,
    Arch::Phi3,
    Arch::Gemma3,
];

/// A worker on `path` with `parallel` generations per step and no prompt cache (so a
/// request alone and in a batch both compute their whole prompt).
fn handle(path: &Path, threads: usize, parallel: usize, kv_budget: usize) -> LlmHandle {
    let backend = Backend::Cpu {
        options: CpuOptions {
            threads: Some(threads),
            ..CpuOptions::default()
        },
        prompt_cache_bytes: 0,
    };
    let engine = LlmEngine::load(path, backend).unwrap();
    LlmHandle::spawn(
        engine,
        LlmWorkerOptions {
            queue_capacity: 16,
            threads: Some(threads),
            parallel,
            kv_budget,
            max_wait: None,
        },
    )
    .unwrap()
}

/// Request `i` of a mixed set: its own question (so prompts differ in length), greedy or
/// seeded sampling, and its own length. With `long`, requests 6 and 7 (the late ones)
/// carry a passage of several hundred tokens before their question, so their prompts run
/// in several chunks while the others decode.
fn request_with(i: usize, base_tokens: usize, ignore_eos: bool, long: bool) -> GenerateRequest {
    let questions = [
        "What is the capital of France?",
        "Name three colours.",
        "Write one sentence about the sea and the ships that sail on it at night.",
        "Count to five.",
        "Why is the sky blue?",
        "Say hello.",
        "What do bees make, and how do they make it in the hive over a summer?",
        "List two fruits.",
    ];
    GenerateRequest {
        prompt: Prompt::Chat(vec![
            ChatMessage::new(Role::System, "You are a helpful assistant."),
            ChatMessage::new(Role::User, {
                let q = questions[i % questions.len()];
                if long && i >= 6 {
                    let passage = "The harbour master keeps a log of every ship that enters \
                        the port, its cargo, its crew and the hour of its arrival. ";
                    format!("{}\n\n{q}", passage.repeat(18 + 5 * (i - 6)))
                } else {
                    q.to_owned()
                }
            }),
        ]),
        params: GenerationParams {
            max_tokens: base_tokens + 5 * i,
            temperature: if i % 3 == 2 { 0.8 } else { 0.0 },
            top_p: 0.9,
            seed: 7 + i as u64,
            ignore_eos,
            ..GenerationParams::default()
        },
        filter: None,
    }
}

/// The text pieces (one per generated token, or empty between characters) and the end.
async fn collect(
    mut rx: tokio::sync::mpsc::Receiver<LlmEvent>,
) -> (Vec<String>, usize, FinishReason) {
    let mut pieces = Vec::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            LlmEvent::Token { text } => pieces.push(text),
            LlmEvent::Done {
                completion_tokens,
                finish_reason,
                ..
            } => return (pieces, completion_tokens, finish_reason),
            LlmEvent::Error(e) => panic!("generation failed: {e}"),
        }
    }
    panic!("the stream ended without Done");
}

/// Runs the eight requests one at a time, then all at once (two of them a little later,
/// so they join a running batch), and checks that each gave the same tokens. Returns the
/// largest batch a decode step ran.
async fn same_alone_and_batched(
    h: &LlmHandle,
    what: &str,
    base_tokens: usize,
    ignore_eos: bool,
) -> usize {
    same_alone_and_batched_with(h, what, base_tokens, ignore_eos, false).await
}

async fn same_alone_and_batched_with(
    h: &LlmHandle,
    what: &str,
    base_tokens: usize,
    ignore_eos: bool,
    long: bool,
) -> usize {
    let request = |i: usize, base_tokens: usize, ignore_eos: bool| {
        request_with(i, base_tokens, ignore_eos, long)
    };
    let mut alone = Vec::new();
    for i in 0..8 {
        alone.push(collect(h.generate(request(i, base_tokens, ignore_eos)).unwrap()).await);
    }
    assert_eq!(
        h.batch_stats().peak.load(Ordering::Relaxed),
        1,
        "{what}: alone means alone"
    );
    let mut tasks = Vec::new();
    for i in 0..8 {
        if i == 6 {
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        let rx = h.generate(request(i, base_tokens, ignore_eos)).unwrap();
        tasks.push(tokio::spawn(collect(rx)));
    }
    for (i, t) in tasks.into_iter().enumerate() {
        let batched = t.await.unwrap();
        assert!(alone[i].1 > 0, "{what} request {i} generated nothing");
        assert_eq!(
            batched, alone[i],
            "{what} request {i}: batched (left) differs from alone (right)"
        );
    }
    assert_eq!(h.in_flight(), 0, "{what}: every request finished");
    h.batch_stats().peak.load(Ordering::Relaxed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_generations_equal_lone_ones_on_every_family() {
    let dir = tempfile::tempdir().unwrap();
    for arch in ARCHS {
        let path = dir.path().join(format!("tiny-{}.gguf", arch.as_str()));
        write_tiny_gguf(&path, arch).unwrap();
        let h = handle(&path, 1, 8, 1 << 30);
        // Long enough that the first answers still run while the last prompts (a hundred
        // tokens or more on these byte-level vocabularies) are read in short chunks.
        let peak = same_alone_and_batched(&h, arch.as_str(), 24, true).await;
        assert!(peak >= 6, "{}: batches of at most {peak}", arch.as_str());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_generations_equal_lone_ones_on_smollm2() {
    let path = common::models_dir().join("SmolLM2-135M-Instruct.Q4_1.gguf");
    let h = handle(&path, 2, 8, 1 << 30);
    let peak = same_alone_and_batched(&h, "SmolLM2", 24, false).await;
    assert!(peak >= 6, "SmolLM2: batches of at most {peak}");
}

/// Long prompts that join while others decode run in short chunks, interleaved with the
/// decode steps, and still give exactly their lone tokens (two threads, so a chunk too
/// short would split its attention over key ranges and sum differently).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_prompts_joining_running_decodes_give_their_lone_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    for arch in [Arch::Llama, Arch::Qwen3, Arch::Gemma3] {
        let path = dir.path().join(format!("tiny-{}.gguf", arch.as_str()));
        write_tiny_gguf(&path, arch).unwrap();
        cases.push((arch.as_str().to_owned(), path, 40, true));
    }
    let smollm2 = common::models_dir().join("SmolLM2-135M-Instruct.Q4_1.gguf");
    cases.push(("SmolLM2".to_owned(), smollm2, 40, true));
    for (what, path, base, ignore_eos) in cases {
        let h = handle(&path, 2, 8, 1 << 30);
        let peak = same_alone_and_batched_with(&h, &what, base, ignore_eos, true).await;
        assert!(peak >= 6, "{what}: batches of at most {peak}");
        let interleaved = h.batch_stats().interleaved.load(Ordering::Relaxed);
        // The six short prompts run at most one chunk each; the two long ones, several
        // hundred tokens each, run in chunks of 64 (about 7 and 9 on SmolLM2; more on the
        // tiny models' byte-level vocabularies) where one 512-token chunk used to hold them.
        assert!(
            interleaved >= 12,
            "{what}: {interleaved} prompt chunks ran beside decoding streams"
        );
    }
}

/// With room for one generation's key/value state, the others wait their turn and still
/// finish, with the same tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_does_not_fit_the_kv_budget_waits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny-llama.gguf");
    write_tiny_gguf(&path, Arch::Llama).unwrap();
    let h = handle(&path, 1, 8, 1);
    let peak = same_alone_and_batched(&h, "llama, 1-byte budget", 12, true).await;
    assert_eq!(peak, 1, "a budget for one means one at a time");
}

/// The time a request sent now is expected to take, which `/query` and the chat's answers
/// weigh against `answer_target_secs`: none while the model is idle, unknown (the
/// longest) while it is busy before any generation has ended, then the recent mean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_expected_time_follows_the_pace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny-llama.gguf");
    write_tiny_gguf(&path, Arch::Llama).unwrap();
    let h = handle(&path, 1, 8, 1 << 30);
    assert_eq!(h.expected(), None, "idle: a request starts at once");
    // Long enough (~0.1 s here) that each look below comes while it runs.
    let first = h.generate(request_with(0, 3000, true, false)).unwrap();
    assert_eq!(
        h.expected(),
        Some(Duration::MAX),
        "busy with no generation ended yet: no pace known"
    );
    assert_eq!(collect(first).await.1, 3000);
    assert_eq!(h.expected(), None, "idle again once it has ended");
    let mean = h.batch_stats().mean_ms.load(Ordering::Relaxed) as u64;
    assert!(mean > 0, "the ended generation set the pace");
    let second = h.generate(request_with(1, 3000, true, false)).unwrap();
    assert_eq!(
        h.expected(),
        Some(Duration::from_millis(2 * mean)),
        "beside one running: two generations' worth of the model's time"
    );
    let third = h.generate(request_with(2, 3000, true, false)).unwrap();
    assert_eq!(h.expected(), Some(Duration::from_millis(3 * mean)));
    let (a, b) = tokio::join!(collect(second), collect(third));
    assert_eq!(
        (a.1, b.1),
        (3005, 3010),
        "every token asked for (3000 + 5 i)"
    );

    // Generations that share the model count their share of each moment: two that ran
    // side by side from start to end set a pace of about half their wall time.
    let h = handle(&path, 1, 8, 1 << 30);
    let started = std::time::Instant::now();
    let (a, b) = (
        h.generate(request_with(3, 3000, true, false)).unwrap(),
        h.generate(request_with(4, 3000, true, false)).unwrap(),
    );
    let (a, b) = tokio::join!(collect(a), collect(b));
    let wall = started.elapsed().as_millis() as u64;
    assert_eq!((a.1, b.1), (3015, 3020));
    assert_eq!(h.batch_stats().peak.load(Ordering::Relaxed), 2);
    let pace = h.batch_stats().mean_ms.load(Ordering::Relaxed) as u64;
    assert!(
        pace > 0 && pace * 4 < wall * 3,
        "pace {pace} ms, the pair's wall time {wall} ms"
    );
}
