//! The LLM engine on tiny random-weight GGUF files of each family, written in the real
//! format by `ragd::ml::llm::tiny`: loading, templates, sampling, stop sequences, streaming
//! of complete UTF-8, constrained decoding, the bounded queue and cancellation.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ragd::ml::llm::tiny::write_tiny_gguf;
use ragd::ml::llm::{
    Arch, Backend, ChatMessage, CpuOptions, DigitsOnly, FinishReason, GenerateRequest,
    GenerationParams, LlmEngine, LlmEvent, LlmHandle, LlmWorkerOptions, Prompt, Role, TokenFilter,
    Vocabulary,
};
use ragd::ml::MlError;

const ARCHS: [Arch; 3] = [Arch::Llama, Arch::Qwen2, Arch::Phi3];

fn tiny(dir: &Path, arch: Arch) -> PathBuf {
    let path = dir.join(format!("tiny-{}.gguf", arch.as_str()));
    write_tiny_gguf(&path, arch).unwrap();
    path
}

/// ragd's CPU engine with one thread (tests run side by side).
fn backend() -> Backend {
    Backend::Cpu {
        options: CpuOptions {
            threads: Some(1),
            tier: None,
            ..CpuOptions::default()
        },
        prompt_cache_bytes: 64 << 20,
    }
}

fn engine(dir: &Path, arch: Arch) -> LlmEngine {
    LlmEngine::load(&tiny(dir, arch), backend()).unwrap()
}

fn handle(dir: &Path, arch: Arch, queue_capacity: usize) -> LlmHandle {
    let opts = LlmWorkerOptions {
        queue_capacity,
        threads: Some(1),
        ..LlmWorkerOptions::default()
    };
    LlmHandle::spawn(engine(dir, arch), opts).unwrap()
}

fn chat(text: &str) -> Prompt {
    Prompt::Chat(vec![
        ChatMessage::new(Role::System, "Answer from the sources."),
        ChatMessage::new(Role::User, text),
    ])
}

fn request(max_tokens: usize, seed: u64) -> GenerateRequest {
    GenerateRequest {
        prompt: chat("hello world"),
        params: GenerationParams {
            max_tokens,
            seed,
            temperature: 1.0,
            top_p: 0.95,
            ignore_eos: true,
            ..GenerationParams::default()
        },
        filter: None,
    }
}

/// Text pieces and the final event of a stream.
async fn collect(mut rx: tokio::sync::mpsc::Receiver<LlmEvent>) -> (Vec<String>, LlmEvent) {
    let mut pieces = Vec::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            LlmEvent::Token { text } => pieces.push(text),
            done => return (pieces, done),
        }
    }
    panic!("the stream ended without Done or Error");
}

fn finish(ev: &LlmEvent) -> (usize, usize, FinishReason) {
    match ev {
        LlmEvent::Done {
            prompt_tokens,
            completion_tokens,
            finish_reason,
        } => (*prompt_tokens, *completion_tokens, *finish_reason),
        other => panic!("expected Done, got {other:?}"),
    }
}

#[tokio::test]
async fn every_family_loads_and_generates_to_max_tokens() {
    let dir = tempfile::tempdir().unwrap();
    for arch in ARCHS {
        let h = handle(dir.path(), arch, 4);
        assert_eq!(h.info().family, arch.as_str());
        assert_eq!(h.name(), format!("tiny-{}", arch.as_str()));
        assert_eq!(h.context_length(), 4096);
        let prompt_tokens = h.count_prompt_tokens(&chat("hello world")).unwrap();
        assert!(prompt_tokens > h.count_tokens("hello world"));
        let (pieces, done) = collect(h.generate(request(24, 1)).unwrap()).await;
        assert_eq!(
            finish(&done),
            (prompt_tokens, 24, FinishReason::Length),
            "{arch:?}"
        );
        assert!(pieces.iter().all(|p| !p.is_empty()));
    }
}

#[tokio::test]
async fn the_same_seed_gives_the_same_text() {
    let dir = tempfile::tempdir().unwrap();
    for arch in ARCHS {
        let h = handle(dir.path(), arch, 4);
        let a = collect(h.generate(request(32, 7)).unwrap())
            .await
            .0
            .concat();
        let b = collect(h.generate(request(32, 7)).unwrap())
            .await
            .0
            .concat();
        let c = collect(h.generate(request(32, 8)).unwrap())
            .await
            .0
            .concat();
        assert_eq!(a, b, "{arch:?}");
        assert_ne!(a, c, "{arch:?}");
        // Greedy decoding does not depend on the seed.
        let greedy = |seed| {
            let mut r = request(16, seed);
            r.params.temperature = 0.0;
            r
        };
        let g1 = collect(h.generate(greedy(1)).unwrap()).await.0.concat();
        let g2 = collect(h.generate(greedy(2)).unwrap()).await.0.concat();
        assert_eq!(g1, g2);
    }
}

#[tokio::test]
async fn generation_ends_before_a_stop_sequence() {
    let dir = tempfile::tempdir().unwrap();
    for arch in ARCHS {
        let h = handle(dir.path(), arch, 4);
        let full = collect(h.generate(request(60, 3)).unwrap())
            .await
            .0
            .concat();
        let chars: Vec<char> = full.chars().collect();
        assert!(chars.len() > 20, "{arch:?}: {full:?}");
        let stop: String = chars[12..15].iter().collect();
        let expected = &full[..full.find(&stop).unwrap()];
        let mut r = request(60, 3);
        r.params.stop = vec![stop.clone(), "a stop that never comes".into()];
        let (pieces, done) = collect(h.generate(r).unwrap()).await;
        assert_eq!(pieces.concat(), expected, "{arch:?} stop {stop:?}");
        assert_eq!(finish(&done).2, FinishReason::StopSequence(0));
        assert!(finish(&done).1 < 60);
    }
}

/// Allows only the given ids, in turn: forces the model to spell a byte sequence. While
/// `hold` is set, every step after the second waits, so a request stays running.
struct Spell {
    ids: Vec<u32>,
    step: usize,
    steps: Arc<AtomicUsize>,
    hold: Arc<AtomicBool>,
}

impl TokenFilter for Spell {
    fn restrict(&mut self, _generated: &str, _vocab: &Vocabulary, allowed: &mut [bool]) {
        while self.step >= 2 && self.hold.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let want = self.ids[self.step % self.ids.len()] as usize;
        self.step += 1;
        self.steps.fetch_add(1, Ordering::SeqCst);
        for (id, ok) in allowed.iter_mut().enumerate() {
            *ok = id == want;
        }
    }
}

fn spell(h: &LlmHandle, bytes: &[u8], steps: &Arc<AtomicUsize>) -> Box<dyn TokenFilter> {
    spell_held(h, bytes, steps, &Arc::new(AtomicBool::new(false)))
}

fn spell_held(
    h: &LlmHandle,
    bytes: &[u8],
    steps: &Arc<AtomicUsize>,
    hold: &Arc<AtomicBool>,
) -> Box<dyn TokenFilter> {
    let v = h.tokenizer();
    let ids = bytes
        .iter()
        .map(|b| {
            (0..v.vocab_size() as u32)
                .find(|&id| v.piece_bytes(id) == [*b] && !v.is_special(id))
                .unwrap()
        })
        .collect();
    Box::new(Spell {
        ids,
        step: 0,
        steps: Arc::clone(steps),
        hold: Arc::clone(hold),
    })
}

#[tokio::test]
async fn streamed_text_never_splits_a_character() {
    let dir = tempfile::tempdir().unwrap();
    // Llama and Phi-3 spell "é" and "😀" with <0xNN> byte tokens; Qwen2 with byte-level
    // pieces. Each token carries one byte, so characters arrive over 2 and 4 tokens.
    for arch in ARCHS {
        let h = handle(dir.path(), arch, 4);
        for ch in ["é", "😀"] {
            let steps = Arc::new(AtomicUsize::new(0));
            let mut r = request(8, 1);
            r.filter = Some(spell(&h, ch.as_bytes(), &steps));
            let (pieces, done) = collect(h.generate(r).unwrap()).await;
            let n = 8 / ch.len();
            assert_eq!(pieces, vec![ch.to_owned(); n], "{arch:?}");
            assert_eq!(finish(&done).1, 8);
        }
    }
}

#[tokio::test]
async fn a_digits_filter_allows_only_digits() {
    let dir = tempfile::tempdir().unwrap();
    for arch in ARCHS {
        let h = handle(dir.path(), arch, 4);
        for seed in 0..4 {
            let mut r = request(40, seed);
            r.params.ignore_eos = false;
            r.filter = Some(Box::new(DigitsOnly { max_digits: 6 }));
            let (pieces, done) = collect(h.generate(r).unwrap()).await;
            let text = pieces.concat();
            assert!(!text.is_empty() && text.len() <= 6, "{arch:?}: {text:?}");
            assert!(
                text.bytes().all(|b| b.is_ascii_digit()),
                "{arch:?}: {text:?}"
            );
            assert_eq!(finish(&done).2, FinishReason::Stop);
        }
    }
}

#[tokio::test]
async fn the_context_window_bounds_prompt_and_answer() {
    let dir = tempfile::tempdir().unwrap();
    let h = handle(dir.path(), Arch::Qwen2, 4);
    let mut r = request(100, 1);
    r.prompt = Prompt::Tokens(vec![5; 4090]);
    let (_, done) = collect(h.generate(r).unwrap()).await;
    assert_eq!(finish(&done), (4090, 6, FinishReason::Length));

    let mut r = request(100, 1);
    r.prompt = Prompt::Tokens(vec![5; 4096]);
    let (pieces, done) = collect(h.generate(r).unwrap()).await;
    assert!(pieces.is_empty());
    match done {
        LlmEvent::Error(MlError::InvalidInput(msg)) => assert!(msg.contains("4096"), "{msg}"),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// A request that runs for a long time unless stopped (and while `hold` is set, until it
/// is cleared), counting its steps.
fn long_request(
    h: &LlmHandle,
    steps: &Arc<AtomicUsize>,
    hold: &Arc<AtomicBool>,
) -> GenerateRequest {
    let mut r = request(4000, 1);
    r.filter = Some(spell_held(h, b"ab", steps, hold));
    r
}

async fn wait_idle(h: &LlmHandle) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while h.in_flight() > 0 {
        assert!(Instant::now() < deadline, "the LLM thread is still busy");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn dropping_the_stream_stops_generation_and_frees_the_thread() {
    let dir = tempfile::tempdir().unwrap();
    let h = handle(dir.path(), Arch::Llama, 1);
    let steps = Arc::new(AtomicUsize::new(0));
    let free = Arc::new(AtomicBool::new(false));
    let mut rx = h.generate(long_request(&h, &steps, &free)).unwrap();
    assert!(matches!(rx.recv().await, Some(LlmEvent::Token { .. })));
    drop(rx);
    wait_idle(&h).await;
    let taken = steps.load(Ordering::SeqCst);
    assert!(taken < 4000, "generation ran to the end ({taken} steps)");
    // The thread takes new work at once.
    let (_, done) = collect(h.generate(request(5, 1)).unwrap()).await;
    assert_eq!(finish(&done).1, 5);
}

#[tokio::test]
async fn a_full_queue_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let h = handle(dir.path(), Arch::Qwen2, 1);
    let steps = Arc::new(AtomicUsize::new(0));
    let hold = Arc::new(AtomicBool::new(true));
    let mut running = h.generate(long_request(&h, &steps, &hold)).unwrap();
    // The first token means the worker has taken the request off the queue.
    assert!(matches!(running.recv().await, Some(LlmEvent::Token { .. })));
    let queued = h.generate(request(3, 1)).unwrap();
    let started = Instant::now();
    assert!(matches!(
        h.generate(request(3, 1)),
        Err(MlError::Overloaded)
    ));
    assert!(started.elapsed() < Duration::from_millis(100));
    assert_eq!(h.in_flight(), 2);
    drop(running);
    hold.store(false, Ordering::SeqCst);
    let (_, done) = collect(queued).await;
    assert_eq!(finish(&done).1, 3);
    wait_idle(&h).await;
}

#[test]
fn damaged_or_foreign_files_are_load_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = tiny(dir.path(), Arch::Llama);
    let bytes = std::fs::read(&path).unwrap();

    let truncated = dir.path().join("truncated.gguf");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let not_gguf = dir.path().join("notes.gguf");
    std::fs::write(&not_gguf, b"this is not a model").unwrap();
    // The same file claiming another architecture.
    let mut gemma = bytes.clone();
    let needle = b"\x05\x00\x00\x00\x00\x00\x00\x00llama";
    let at = gemma
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap();
    gemma[at + 8..at + 13].copy_from_slice(b"gemma");
    let foreign = dir.path().join("gemma.gguf");
    std::fs::write(&foreign, &gemma).unwrap();

    for (file, hint) in [
        (&truncated, "weights"),
        (&not_gguf, "GGUF"),
        (&foreign, "gemma"),
        (&dir.path().join("missing.gguf"), "cannot open"),
    ] {
        match LlmEngine::load(file, backend()) {
            Err(MlError::Load(msg)) => assert!(msg.contains(hint), "{msg}"),
            Err(e) => panic!("{}: expected a load error, got {e}", file.display()),
            Ok(_) => panic!("{} loaded", file.display()),
        }
    }
}

/// The stateless completion core (`ml::llm::completion`) on a real tiny model: text
/// streams and adds up to the output; under `Required` the output is one call that
/// parses against the tool's schema; history that does not fit the window is dropped,
/// oldest first, and messages that alone do not fit are refused.
#[tokio::test]
async fn the_completion_core_streams_text_then_calls() {
    use ragd::ml::llm::completion::{fit_prompt, Completion, CompletionEvent, CompletionRequest};
    use ragd::ml::llm::tool_grammar::{CallMode, ToolGrammar};
    use ragd::ml::llm::SharedGenerator;

    let dir = tempfile::tempdir().unwrap();
    let llm: SharedGenerator = Arc::new(handle(dir.path(), Arch::Qwen2, 4));
    let params = |max_tokens| GenerationParams {
        max_tokens,
        temperature: 0.0,
        ..GenerationParams::default()
    };
    let request = |tools, call_mode, max_tokens| CompletionRequest {
        system: "Answer from the sources.".into(),
        history: vec![
            ChatMessage::new(Role::User, "hello"),
            ChatMessage::new(Role::Assistant, "world"),
        ],
        messages: vec![ChatMessage::new(Role::User, "the data base")],
        tools,
        tool_specs: Vec::new(),
        call_mode,
        params: params(max_tokens),
    };

    let mut c = Completion::start(llm.clone(), request(None, CallMode::Auto, 12))
        .await
        .unwrap();
    let mut streamed = String::new();
    while let Some(event) = c.next().await.unwrap() {
        match event {
            CompletionEvent::Text(t) => streamed.push_str(&t),
            CompletionEvent::Call(call) => panic!("a call without tools: {call:?}"),
        }
    }
    assert_eq!(streamed, c.output());
    assert_eq!(c.text(), c.output().trim());
    let f = c.finished();
    assert!(
        f.prompt_tokens > 0 && (1..=12).contains(&f.completion_tokens),
        "{f:?}"
    );

    let schema = serde_json::json!({
        "type": "object",
        "properties": {"unit": {"type": "string", "enum": ["days"]}},
        "required": ["unit"],
        "additionalProperties": false
    });
    let grammar = ToolGrammar::new([("count_days", &schema)]);
    let mut c = Completion::start(llm.clone(), request(Some(grammar), CallMode::Required, 256))
        .await
        .unwrap();
    let mut events = Vec::new();
    while let Some(event) = c.next().await.unwrap() {
        events.push(event);
    }
    let calls: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            CompletionEvent::Call(c) => Some(c.clone()),
            CompletionEvent::Text(t) => {
                assert!(t.trim().is_empty(), "text beside a required call: {t:?}");
                None
            }
        })
        .collect();
    assert_eq!(calls.len(), 1, "{events:?} from {:?}", c.output());
    let call = calls[0].as_ref().expect("the call parses");
    assert_eq!(call.name, "count_days");
    assert_eq!(call.arguments, serde_json::json!({"unit": "days"}));

    // 10 history messages of ~600 tokens each in a 4,096-token window.
    let long = "hello world and the data base of it ".repeat(60);
    let history: Vec<ChatMessage> = (0..10)
        .map(|i| ChatMessage::new(Role::User, format!("{i} {long}")))
        .collect();
    let question = [ChatMessage::new(Role::User, "the data base")];
    let fitted = fit_prompt(llm.as_ref(), "sys", &history, &question, &[], 256).unwrap();
    let (prompt, room) = (fitted.prompt, fitted.room);
    let Prompt::Chat(messages) = &prompt else {
        panic!("a chat prompt")
    };
    let kept = &messages[1..messages.len() - 1];
    assert!(
        !kept.is_empty() && kept.len() < history.len(),
        "{} kept",
        kept.len()
    );
    assert_eq!(
        kept,
        &history[history.len() - kept.len()..],
        "the newest are kept"
    );
    assert_eq!(messages[0].content, "sys");
    assert_eq!(messages.last().unwrap().content, "the data base");
    let total = llm.count_prompt_tokens(&prompt).unwrap();
    assert!(room == 256 && total + room <= 4096, "{total} + {room}");
    let too_long = [ChatMessage::new(Role::User, long.repeat(10))];
    match fit_prompt(llm.as_ref(), "sys", &[], &too_long, &[], 256) {
        Err(MlError::InvalidInput(m)) => assert!(m.contains("window"), "{m}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}
