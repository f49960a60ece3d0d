//! The web page at `/`, driven in real headless Chromium (DevTools protocol, real clicks
//! and keys) against the real server with API keys configured and outside requests
//! blocked: sign in, onboarding, upload Markdown (dropped) and a PDF (chosen), duplicates
//! and updates, the list of sources, a question with a citation that opens its passage,
//! chat, a held high-risk tool call rejected and another confirmed, history search,
//! settings, a phone-sized screen, sign out; then the same page on the default LLM (the
//! real SmolLM2 file): an answer whose quoted sentences show before it is complete, with
//! a citation, the same in the chat, a held deletion confirmed.
//! Screenshots of each screen are written to `target/web-screenshots/`.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::browser::{js, Browser, Page};
use common::{create_user, test_config, Auth, TestServer};
use ragd::config::Config;
use ragd::ml::llm::{FinishReason, GenerateRequest, Generator, LlmEvent, ModelInfo, Prompt, Role};
use ragd::ml::MlError;
use reqwest::Method;
use serde_json::{json, Value};
use tokio::runtime::Handle;
use tokio::sync::mpsc;

const KEY: &str = "kb-key-never-shown-to-browsers-7f3a";
const ADMIN: (&str, &str) = ("admin@example.com", "admin-password-1");

const POLICY_V1: &str = "# Returns and shipping\n\n## Returns\n\nA product can be returned within 30 days of delivery. Refunds reach the original card within five business days.\n\n## Shipping\n\nOrders ship within two business days from the warehouse in Leeds.\n";
const POLICY_V2: &str = "# Returns and shipping\n\n## Returns\n\nA product can be returned within 45 days of delivery. Refunds reach the original card within five business days.\n\n## Shipping\n\nOrders ship within two business days from the warehouse in Leeds.\n";
const ARABIC: &str = "# سياسة الإرجاع\n\nيمكن إرجاع المنتج خلال خمسة وأربعين يوما من تاريخ التسليم. يعاد المبلغ إلى البطاقة الأصلية خلال خمسة أيام عمل.\n";

fn fixture_pdf() -> std::path::PathBuf {
    // Chromium reads a chosen file by its real path.
    common::shared_dir()
        .join("fixtures/docling/tests/data/pdf/sources/multi_page.pdf")
        .canonicalize()
        .unwrap()
}

/// Drops files onto the drop zone as a drag from the desktop would.
fn drop_files(p: &Page, files: &[(&str, &str)]) {
    let adds: String = files
        .iter()
        .map(|(name, text)| {
            format!(
                "dt.items.add(new File([{}], {}, {{type: 'text/markdown'}}));",
                js(text),
                js(name)
            )
        })
        .collect();
    p.eval(&format!(
        "(() => {{ const dt = new DataTransfer(); {adds}
            const zone = document.querySelector('#drop-zone');
            for (const type of ['dragenter', 'dragover', 'drop'])
                zone.dispatchEvent(new DragEvent(type, {{dataTransfer: dt, bubbles: true, cancelable: true}})); }})()"
    ));
}

/// Waits until `n` uploads have an outcome; returns `[name, state, text]` of each.
fn uploads_done(p: &Page, n: usize) -> Vec<Value> {
    p.wait(
        &format!("document.querySelectorAll('#uploads li.upload[data-state]').length >= {n} && !document.querySelector('#uploads li.upload:not([data-state])')"),
        &format!("{n} uploads to finish"),
    );
    p.eval(
        "[...document.querySelectorAll('#uploads li.upload')].map(li => [li.dataset.name, li.dataset.state, li.querySelector('.detail').textContent])",
    )
    .as_array()
    .unwrap()
    .clone()
}

fn state_of<'a>(uploads: &'a [Value], name: &str) -> Vec<&'a str> {
    uploads
        .iter()
        .filter(|u| u[0] == name)
        .map(|u| u[1].as_str().unwrap())
        .collect()
}

/// `/documents/sources` as the test's own client (no key configured) sees it.
fn listed_sources(rt: &Handle, client: &reqwest::Client, base: &str) -> Value {
    rt.block_on(async {
        client
            .get(format!("{base}/api/v1/documents/sources"))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    })
}

/// The knowledge base's sources as an API client with the key sees them.
fn sources(rt: &Handle, client: &reqwest::Client, base: &str) -> Value {
    rt.block_on(async {
        let r = client
            .get(format!("{base}/api/v1/documents/stats"))
            .header("X-API-Key", KEY)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.json::<Value>().await.unwrap()["by_source"].clone()
    })
}

/// Answers the onboarding questions through the page, up to the review.
fn onboarding(p: &Page) {
    p.wait_for("#setup-banner");
    p.click("#setup-banner a");
    p.wait_for("#setup-question[data-key='company_name']");
    p.screenshot("02-setup-question");
    p.type_into("#answer-company_name", "Acme Trading");
    p.press("Enter");
    let next = |key: &str| p.wait_for(&format!("#setup-question[data-key='{key}']"));
    let submit = || p.click("#setup-question button[type='submit']");
    next("industry");
    p.eval("document.querySelector('#answer-industry').value = 'retail'");
    submit();
    next("modules");
    submit();
    next("primary_language");
    p.eval("document.querySelector('#answer-primary_language').value = 'en'");
    submit();
    next("knowledge_sources");
    p.click("#setup-question button.skip-question");
    next("assistant_tone");
    p.click("label[for='answer-assistant_tone-friendly']");
    submit();
    next("confirm_high_risk");
    // Refusing the acknowledgement is explained, not accepted.
    submit();
    p.wait(
        "document.querySelector('#setup-question .notice.error')?.textContent.includes('confirmation')",
        "the refusal of an unchecked acknowledgement",
    );
    p.click("#answer-confirm_high_risk");
    submit();
    next("system_prompt");
    p.click("#setup-question button.skip-question");
    p.wait_for("#setup-review");
    assert!(p.text("#setup-review").contains("Acme Trading"));
    assert!(p.text("#setup-review").contains("Friendly"));
    p.screenshot("03-setup-review");
    p.click("#setup-apply");
    p.wait_for("#setup-done");
    p.wait(
        "document.querySelector('#top .org')?.textContent === 'Acme Trading'",
        "the organisation's name in the header",
    );
}

fn documents(p: &Page, rt: &Handle, client: &reqwest::Client, base: &str) {
    p.click("#top nav a[href='#/documents']");
    p.wait_for("#drop-zone");
    p.wait(
        "document.querySelector('#sources')?.textContent.includes('Nothing here yet')",
        "an empty knowledge base to say so",
    );
    drop_files(
        p,
        &[
            ("returns-policy.md", POLICY_V1),
            ("arabic-notes.md", ARABIC),
        ],
    );
    p.set_files("#file-input", &[&fixture_pdf()]);
    let up = uploads_done(p, 3);
    for name in ["returns-policy.md", "arabic-notes.md", "multi_page.pdf"] {
        assert_eq!(state_of(&up, name), ["ok"], "{name}: {up:?}");
    }
    // The same file again is a duplicate; a changed one updates the stored version.
    drop_files(p, &[("returns-policy.md", POLICY_V1)]);
    uploads_done(p, 4);
    drop_files(p, &[("returns-policy.md", POLICY_V2)]);
    let up = uploads_done(p, 5);
    assert_eq!(
        state_of(&up, "returns-policy.md"),
        ["update", "duplicate", "ok"],
        "{up:?}"
    );
    let dup = up.iter().find(|u| u[1] == "duplicate").unwrap().to_string();
    assert!(
        dup.contains("nothing was added") || dup.contains("already"),
        "{dup}"
    );

    for s in ["returns-policy.md", "arabic-notes.md", "multi_page.pdf"] {
        p.wait_for(&format!("#sources tr[data-source='{s}']"));
    }
    let stored = sources(rt, client, base);
    let pdf_count = stored["multi_page.pdf"].as_u64().unwrap();
    assert!(
        p.text("#sources tr[data-source='multi_page.pdf'] td.num") == pdf_count.to_string(),
        "the list shows the stored passage count"
    );
    p.screenshot_full("04-documents");
    p.type_into("#source-filter", "multi");
    p.wait(
        "document.querySelectorAll('#sources tbody tr').length === 1",
        "the filter to leave one source",
    );
    p.type_into("#source-filter", "");
    p.eval("document.querySelector('#source-filter').dispatchEvent(new Event('input'))");
}

fn ask(p: &Page) {
    p.click("#top nav a[href='#/ask']");
    p.type_into("#question", "When was the typewriter patented?");
    p.press("Enter");
    p.wait_for("#timing");
    let answer = p.text("#answer-text");
    assert!(answer.contains("1868"), "{answer}");
    assert!(p.text("#timing").starts_with("Answered in"));
    // The citation right after the sentence with the year opens that passage.
    p.eval(
        "(() => { let seen = ''; for (const n of document.querySelector('#answer-text').childNodes) {
            if (n.nodeType === 3) seen += n.textContent;
            else if (n.matches('button.cite') && seen.includes('1868')) { n.id = 'cite-1868'; return; } } })()",
    );
    p.screenshot("05-ask-answer");
    p.click("#cite-1868");
    p.wait_for("#passage-text");
    let passage = p.text("#passage");
    assert!(passage.contains("1868"), "{passage}");
    assert!(passage.contains("multi_page.pdf"), "{passage}");
    assert!(passage.contains("Page"), "the page is shown: {passage}");
    p.screenshot("06-ask-passage");
    p.press("Escape");
    p.wait("!document.querySelector('dialog')", "the passage to close");
    // Scores read as a relevance; the answer's passage is relevant.
    assert_eq!(p.text("#sources-heading"), "Sources");
    let first = p.text("ol.sources li .score");
    assert!(relevance_percent(&first) >= 50, "{first}");
    // A question the documents do not answer: its passages are only the closest ones,
    // and none reads as relevant.
    p.type_into("#question", "What is the capital of Peru?");
    p.press("Enter");
    p.wait(
        "document.querySelector('#sources-heading')?.textContent === 'Closest passages'",
        "the refusal's closest passages",
    );
    let answer = p.text("#answer-text");
    assert!(answer.contains("do not say"), "{answer}");
    let scores =
        p.eval("[...document.querySelectorAll('ol.sources li .score')].map(e => e.textContent)");
    let scores: Vec<String> = serde_json::from_value(scores).unwrap();
    assert!(!scores.is_empty());
    for s in &scores {
        let n = relevance_percent(s);
        assert!(n < 50, "an unrelated passage reads as relevant: {scores:?}");
    }
    p.screenshot("06b-ask-refusal-closest-passages");
}

/// The percentage of a source's "relevance NN%".
fn relevance_percent(shown: &str) -> u32 {
    shown
        .strip_prefix("relevance ")
        .and_then(|s| s.strip_suffix('%'))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a relevance: {shown:?}"))
}

/// The text of the last assistant reply, once it is finished.
fn last_reply(p: &Page) -> String {
    p.wait(
        "(() => { const m = [...document.querySelectorAll('#messages .message.assistant')].pop();
            return m && !m.hasAttribute('aria-busy') && m.querySelector('.text').textContent.length > 0; })()",
        "the reply",
    );
    p.eval("[...document.querySelectorAll('#messages .message.assistant .text')].pop().textContent")
        .as_str()
        .unwrap()
        .to_owned()
}

fn direction(p: &Page, selector: &str) -> String {
    p.eval(&format!(
        "getComputedStyle([...document.querySelectorAll({})].pop()).direction",
        js(selector)
    ))
    .as_str()
    .unwrap()
    .to_owned()
}

/// Runs delete_source on `source` from the chat's tool dialog.
fn run_delete_source(p: &Page, source: &str) {
    p.click("#tools-button");
    p.wait_for("#tool-select");
    p.eval("(() => { const s = document.querySelector('#tool-select'); s.value = 'delete_source'; s.dispatchEvent(new Event('change')); })()");
    p.type_into("#param-source", source);
    p.click("dialog button[data-value='run']");
}

fn chat(p: &Page, rt: &Handle, client: &reqwest::Client, base: &str) {
    p.click("#top nav a[href='#/chat']");
    p.type_into("#chat-input", "How long do I have to return a product?");
    p.press("Enter");
    let reply = last_reply(p);
    assert!(reply.contains("45 days"), "{reply}");
    p.wait_for("#messages .reply-sources");
    p.wait(
        "document.querySelector('#conversation-list .conversation .title')?.textContent.startsWith('How long do I have')",
        "the new conversation in the list, titled from its first message",
    );
    assert_eq!(direction(p, "#messages .message.user .text"), "ltr");
    p.type_into("#chat-input", "كم يوما لإرجاع المنتج؟");
    p.press("Enter");
    last_reply(p);
    assert_eq!(direction(p, "#messages .message.user .text"), "rtl");
    p.screenshot("07-chat");

    // A held high-risk call, rejected with a reason: nothing is deleted.
    run_delete_source(p, "multi_page.pdf");
    let held = ".tool.direct[data-status='pending_confirmation']";
    p.wait_for(&format!("{held} button.confirm"));
    p.type_into(
        &format!("{held} input.reason"),
        "Still needed for the audit",
    );
    p.click(&format!("{held} button.reject"));
    p.wait_for(".tool.direct[data-status='rejected']");
    assert!(p
        .text(".tool.direct[data-status='rejected']")
        .contains("Still needed for the audit"));
    assert!(sources(rt, client, base)["multi_page.pdf"].is_u64());

    // Another, confirmed: the source is gone.
    run_delete_source(p, "arabic-notes.md");
    p.wait_for(&format!("{held} button.confirm"));
    assert!(p.text(held).contains("arabic-notes.md"));
    assert!(
        sources(rt, client, base)["arabic-notes.md"].is_u64(),
        "a held action has not run"
    );
    p.screenshot("08-chat-held-action");
    p.click(&format!("{held} button.confirm"));
    p.wait_for(".tool.direct[data-status='executed']");
    assert!(p
        .text(".tool.direct[data-status='executed']")
        .contains("deleted"));
    assert!(sources(rt, client, base)["arabic-notes.md"].is_null());
    p.screenshot("09-chat-confirmed");

    // A throwaway conversation, deleted after confirming.
    p.click("#new-chat");
    p.wait(
        "document.querySelectorAll('#messages .message').length === 0",
        "a new chat",
    );
    p.type_into("#chat-input", "Scratch note about pallets");
    p.press("Enter");
    last_reply(p);
    p.wait_for("#conversation-list .conversation[aria-current='true']");
    p.wait(
        "document.querySelector('#conversation-list').textContent.includes('Scratch note about pallets')",
        "the scratch conversation in the list",
    );
    p.click("#conversation-list .conversation[aria-current='true'] button.delete");
    p.click("dialog button[data-value='ok']");
    p.wait(
        "!document.querySelector('#conversation-list').textContent.includes('Scratch note') && document.querySelectorAll('#conversation-list .conversation').length === 1",
        "the scratch conversation to be deleted",
    );
    // Only the signed-in user's own conversations are listed.
    assert!(!p.text("#conversation-list").contains("Ana private plans"));
}

fn history_search(p: &Page) {
    p.type_into("#history-search", "return");
    p.wait_for("#conversation-list .hit mark");
    assert!(p.text("#search-count").contains("for “return”"));
    p.screenshot("10-history-search");
    p.click("#conversation-list .hit a");
    p.wait(
        "document.querySelector('#thread-title')?.textContent.startsWith('How long do I have') && document.querySelectorAll('#messages .message').length === 4",
        "the found conversation with its four messages",
    );
}

fn drive(base: &str, rt: &Handle, client: &reqwest::Client) {
    let browser = Browser::launch();
    let p = browser.page(1280, 860);
    p.goto(base);
    p.wait_for("form.signin #email");
    p.screenshot("01-sign-in");
    p.type_into("#email", ADMIN.0);
    p.type_into("#password", "not-the-password");
    p.press("Enter");
    p.wait(
        "document.querySelector('.signin .notice.error')?.textContent.includes('Wrong email or password')",
        "the refusal of a wrong password",
    );
    p.sign_in(base, ADMIN.0, ADMIN.1);
    let html = p.eval("document.documentElement.outerHTML").to_string();
    assert!(!html.contains(KEY), "the page must never hold the API key");

    onboarding(&p);
    documents(&p, rt, client, base);
    ask(&p);
    chat(&p, rt, client, base);
    history_search(&p);

    p.click("#top nav a[href='#/settings']");
    p.wait_for("#assistant-settings table");
    p.wait_for("#health .components li");
    assert!(p.text("#assistant-settings").contains("Acme Trading"));
    assert!(!p.eval("document.body.innerHTML").to_string().contains(KEY));
    p.screenshot_full("11-settings");

    // A phone: one column, nothing wider than the screen.
    p.viewport(390, 844, true);
    p.click("#top nav a[href='#/documents']");
    p.wait_for("#sources tbody tr");
    assert_eq!(
        p.eval("document.documentElement.scrollWidth <= window.innerWidth"),
        json!(true),
        "the documents screen fits a phone"
    );
    p.screenshot("12-phone-documents");
    p.click("#top nav a[href='#/chat']");
    p.click("#conversation-list .conversation a");
    p.wait(
        "document.querySelectorAll('#messages .message').length === 4",
        "the conversation on a phone",
    );
    assert_eq!(
        p.eval("document.documentElement.scrollWidth <= window.innerWidth"),
        json!(true),
        "the chat fits a phone"
    );
    p.screenshot("13-phone-chat");
    p.viewport(1280, 860, false);

    // Signing out ends the page's access to the knowledge base too.
    p.click("#sign-out");
    p.wait_for("form.signin");
    let status = p.eval(
        "fetch('/api/v1/documents/stats', {headers: {'X-Requested-With': 'ragd-web'}}).then(r => r.status)",
    );
    assert_eq!(status, json!(401));

    let outside = browser.outside_requests(base);
    assert!(outside.is_empty(), "requests left the machine: {outside:?}");
    assert!(
        browser.requests.lock().unwrap().len() > 20,
        "requests were recorded"
    );
    let errors = browser.errors.lock().unwrap().clone();
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_works_end_to_end_without_an_llm() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    create_user(&data, ADMIN.0, ADMIN.1, true).await;
    let ana = create_user(&data, "ana@example.com", "ana-password-1", false).await;
    let config = Config {
        api_keys: vec![KEY.into()],
        ..test_config(&data)
    };
    let server = TestServer::start_with(config).await;
    server
        .call(
            Method::POST,
            "assistant.api.create_conversation",
            &json!({"title": "Ana private plans"}),
            &Auth::Token(ana),
        )
        .await
        .data();

    // API clients still get JSON at `/`; browsers get the page, locked to this server.
    let (status, body) = server.get_json("/").await;
    assert_eq!(status, 200);
    assert_eq!(body["api"], "/api/v1");
    let page = server
        .client
        .get(server.url("/"))
        .header("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
        .send()
        .await
        .unwrap();
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"));
    assert!(page.text().await.unwrap().contains("/web/app.js"));
    // Without a key or a session the knowledge base stays closed.
    let (status, _) = server.get_json("/api/v1/documents/stats").await;
    assert_eq!(status, 401);

    let (base, client, rt) = (
        server.base.clone(),
        server.client.clone(),
        Handle::current(),
    );
    tokio::task::spawn_blocking(move || drive(&base, &rt, &client))
        .await
        .unwrap();
    server.stop().await;
}

/// What the scripted model writes when asked to delete something.
const DELETE_CALL: &str = "I will remove that file.<tool_call>{\"name\": \"delete_source\", \"arguments\": {\"source\": \"old-notes.md\"}}</tool_call>";

/// Whether the last user message of `prompt` asks to delete something.
fn asks_delete(prompt: &Prompt) -> bool {
    match prompt {
        Prompt::Chat(m) => m
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .is_some_and(|m| m.content.contains("delete")),
        _ => false,
    }
}

/// Streams `text` as tokens of `size` characters, then its end; stops when nobody
/// listens any more.
async fn send_in_pieces(tx: &mpsc::Sender<LlmEvent>, text: &str, size: usize) {
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(size) {
        let text = piece.iter().collect();
        if tx.send(LlmEvent::Token { text }).await.is_err() {
            return;
        }
    }
    let done = LlmEvent::Done {
        prompt_tokens: 100,
        completion_tokens: chars.len() / size + 1,
        finish_reason: FinishReason::Stop,
    };
    let _ = tx.send(done).await;
}

/// A scripted model (the chat engine, the held action and the stream around it are
/// real): a request to delete something is answered with a `delete_source` call; anything
/// else with words, slowly and without end, until nobody listens any more.
struct Scripted {
    info: ModelInfo,
    /// Set when an endless answer stopped because its reader went away.
    stopped: Arc<AtomicBool>,
}

impl Generator for Scripted {
    fn generate(&self, request: GenerateRequest) -> Result<mpsc::Receiver<LlmEvent>, MlError> {
        let (tx, rx) = mpsc::channel(64);
        let asks_delete = asks_delete(&request.prompt);
        let stopped = self.stopped.clone();
        tokio::spawn(async move {
            if !asks_delete {
                while tx
                    .send(LlmEvent::Token {
                        text: "word ".into(),
                    })
                    .await
                    .is_ok()
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                stopped.store(true, Ordering::SeqCst);
                return;
            }
            send_in_pieces(&tx, DELETE_CALL, 6).await;
        });
        Ok(rx)
    }
    fn count_tokens(&self, text: &str) -> usize {
        text.len() / 4 + 1
    }
    fn count_prompt_tokens(&self, _prompt: &Prompt) -> Result<usize, MlError> {
        Ok(100)
    }
    fn info(&self) -> &ModelInfo {
        &self.info
    }
    fn in_flight(&self) -> usize {
        0
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_reply_that_calls_a_high_risk_tool_waits_for_confirmation() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    create_user(&data, ADMIN.0, ADMIN.1, true).await;
    let stopped = Arc::new(AtomicBool::new(false));
    let model = Scripted {
        info: ModelInfo {
            name: "scripted".into(),
            family: "qwen2".into(),
            context_length: 8192,
            template_tools: false,
        },
        stopped: stopped.clone(),
    };
    let config =
        ragd::AppState::builder(test_config(&data)).llm(Arc::new(model) as Arc<dyn Generator>);
    let server = TestServer::start_with(config).await;
    let (status, _) = server
        .upload(
            "old-notes.md",
            b"# Old notes\n\nThe pallets moved to bay four.\n",
        )
        .await;
    assert_eq!(status, 200);

    let (base, rt) = (server.base.clone(), Handle::current());
    let client = server.client.clone();
    tokio::task::spawn_blocking(move || {
        let browser = Browser::launch();
        let p = browser.page(1280, 860);
        p.sign_in(&base, ADMIN.0, ADMIN.1);
        p.click("#top nav a[href='#/chat']");
        p.type_into("#chat-input", "Please delete old-notes.md");
        p.press("Enter");
        let held = "#messages .message.assistant .tool[data-tool='delete_source'][data-status='pending_confirmation']";
        p.wait_for(&format!("{held} button.confirm"));
        assert!(last_reply(&p).contains("I will remove that file."));
        assert!(p.text(held).contains("old-notes.md"));
        let stored = listed_sources(&rt, &client, &base);
        assert_eq!(stored["count"], 1, "held, not run: {stored}");
        p.screenshot("14-chat-model-tool-call-held");
        p.click(&format!("{held} button.confirm"));
        p.wait_for("#messages .tool[data-tool='delete_source'][data-status='executed']");
        // Reopened, the conversation shows what became of the call, without buttons.
        p.call("Page.reload", json!({}));
        p.wait_for("#messages .tool[data-tool='delete_source'][data-status='executed']");
        assert!(p.eval("!document.querySelector('#messages button.confirm')") == json!(true));

        // A long reply shows that it is working and can be stopped; the model stops too.
        p.type_into("#chat-input", "Tell me everything about pallets");
        p.press("Enter");
        p.wait(
            "(document.querySelector('#messages .message.assistant[aria-busy] .text')?.textContent.length ?? 0) > 40",
            "the reply to stream",
        );
        // The clock of a reply in progress ("Thinking… 3 s").
        let clock = p.text("#chat-status");
        assert!(clock.contains("… ") && clock.ends_with(" s"), "{clock}");
        p.screenshot("15-chat-streaming");
        p.click("#chat-stop");
        p.wait(
            "document.querySelector('#messages .message.assistant:last-of-type .notice')?.textContent === 'Stopped.'",
            "the reply to stop",
        );
        let started = std::time::Instant::now();
        while !stopped.load(Ordering::SeqCst) {
            assert!(started.elapsed() < Duration::from_secs(30), "the model kept generating after Stop");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(p.eval("document.querySelector('#send-button').disabled"), json!(false));
        let outside = browser.outside_requests(&base);
        assert!(outside.is_empty(), "requests left the machine: {outside:?}");
        let errors = browser.errors.lock().unwrap().clone();
        assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
    })
    .await
    .unwrap();
    let (_, stored) = server.get_json("/api/v1/documents/sources").await;
    assert_eq!(stored["count"], 0, "confirmed, it ran: {stored}");
    server.stop().await;
}

/// The page on the server's default LLM, the real SmolLM2-135M-Instruct file: a question
/// answered by the model with a citation that opens its passage, and a chat message
/// whose high-risk call the router makes the model write, held until confirmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_works_with_the_default_llm() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    create_user(&data, ADMIN.0, ADMIN.1, true).await;
    let config = Config {
        llm_model: Config::default().llm_model,
        ..test_config(&data)
    };
    let server = TestServer::start_with(config).await;
    for (name, body) in [
        ("returns.md", POLICY_V1),
        (
            "old-notes.md",
            "# Old notes\n\nThe pallets moved to bay four.\n",
        ),
    ] {
        let (status, r) = server.upload(name, body.as_bytes()).await;
        assert_eq!(status, 200, "{r}");
    }

    let (base, rt) = (server.base.clone(), Handle::current());
    let client = server.client.clone();
    tokio::task::spawn_blocking(move || {
        let browser = Browser::launch();
        let p = browser.page(1280, 860);
        p.sign_in(&base, ADMIN.0, ADMIN.1);

        p.click("#top nav a[href='#/ask']");
        p.type_into("#question", "Within how many days can a product be returned?");
        p.press("Enter");
        // The sources' own sentence is visible while the model is still writing: the
        // answer is busy, its timing not yet shown, and the quote already there.
        let early = p.wait(
            "(() => { const a = document.querySelector('#answer');
                const t = document.querySelector('#answer-text');
                const quoted = t && t.querySelector('.piece.extractive');
                return a && a.getAttribute('aria-busy') === 'true' && quoted && quoted.offsetHeight > 0
                    && !document.querySelector('#timing')
                    && {text: t.innerText, status: document.querySelector('#ask-status').textContent}; })()",
            "the quoted text before the answer is complete",
        );
        p.screenshot("16-default-llm-ask-streaming");
        let shown = early["text"].as_str().unwrap();
        assert!(shown.contains("30 days") && shown.contains("[1]"), "{early}");
        assert!(
            early["status"].as_str().unwrap().starts_with("Quoted from your documents"),
            "{early}"
        );
        p.wait_for("#timing");
        let answer = p.text("#answer-text");
        assert!(answer.contains("30"), "{answer}");
        // (The finished answer turns each `[n]` into a button.)
        let first_claim = shown.split(" [").next().unwrap();
        assert!(
            answer.starts_with(first_claim),
            "what was shown stays: {shown:?} then {answer:?}"
        );
        let mode = p.text("#answer-mode");
        assert!(mode == "extractive" || mode == "mixed", "{mode}");
        p.screenshot("16-default-llm-ask");
        p.click("#answer-text button.cite");
        p.wait_for("#passage-text");
        let passage = p.text("#passage");
        assert!(passage.contains("returns.md"), "{passage}");
        p.press("Escape");
        p.wait("!document.querySelector('dialog')", "the passage to close");

        p.click("#top nav a[href='#/chat']");
        // A question for the documents: the quoted sentence shows in the reply while it
        // is still being written, and the finished reply says where its text comes from.
        p.type_into("#chat-input", "Within how many days can a product be returned?");
        p.press("Enter");
        let early = p.wait(
            "(() => { const m = [...document.querySelectorAll('#messages .message.assistant')].pop();
                return m && m.getAttribute('aria-busy') === 'true'
                    && m.querySelector('.text').textContent.includes('30 days')
                    && {text: m.querySelector('.text').textContent,
                        status: document.querySelector('#chat-status').textContent}; })()",
            "the quoted reply before it is complete",
        );
        p.screenshot("17-default-llm-chat-streaming");
        assert!(early["text"].as_str().unwrap().contains("[1]"), "{early}");
        assert!(
            early["status"].as_str().unwrap().starts_with("Quoted from your documents"),
            "{early}"
        );
        let reply = last_reply(&p);
        assert!(reply.contains("30 days"), "{reply}");
        let chip = p.text("#messages .message.assistant:last-child .who .chip");
        assert!(chip == "extractive" || chip == "mixed", "{chip}");
        p.screenshot("17-default-llm-chat-answer");
        p.type_into("#chat-input", "Delete old-notes.md");
        p.press("Enter");
        let held = "#messages .message.assistant .tool[data-tool='delete_source'][data-status='pending_confirmation']";
        p.wait_for(&format!("{held} button.confirm"));
        assert!(p.text(held).contains("old-notes.md"));
        let stored = listed_sources(&rt, &client, &base);
        assert_eq!(stored["count"], 2, "held, not run: {stored}");
        p.screenshot("18-default-llm-chat-held");
        p.click(&format!("{held} button.confirm"));
        p.wait_for("#messages .tool[data-tool='delete_source'][data-status='executed']");
        let outside = browser.outside_requests(&base);
        assert!(outside.is_empty(), "requests left the machine: {outside:?}");
        let errors = browser.errors.lock().unwrap().clone();
        assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
    })
    .await
    .unwrap();
    let (_, stored) = server.get_json("/api/v1/documents/sources").await;
    assert_eq!(stored["count"], 1, "confirmed, it ran: {stored}");
    server.stop().await;
}

/// Answers the first onboarding questions, leaves and comes back, and goes back: errors,
/// options and progress in words, the answers kept.
fn setup_in_words(p: &Page) {
    p.wait_for("#setup-banner");
    p.click("#setup-banner a");
    p.wait_for("#setup-question[data-key='company_name']");
    // Nothing typed: the reason is a sentence, not a key.
    p.click("#setup-question button[type='submit']");
    p.wait_for("#setup-question .notice.error");
    let error = p.text("#setup-question .notice.error");
    assert_eq!(error, "This question needs an answer.");
    p.type_into("#answer-company_name", "Acme Trading");
    p.press("Enter");
    let next = |key: &str| p.wait_for(&format!("#setup-question[data-key='{key}']"));
    let submit = || p.click("#setup-question button[type='submit']");
    next("industry");
    assert!(p.text("#answer-industry").contains("Manufacturing"));
    p.eval("document.querySelector('#answer-industry').value = 'retail'");
    submit();
    next("modules");
    let modules = p.text("#setup-question .choices");
    assert!(
        modules.contains("Knowledge base") && !modules.contains("knowledge_base"),
        "{modules}"
    );
    p.screenshot("20-setup-options-in-words");
    p.click("#answer-modules-system");
    submit();
    next("primary_language");
    let english = p.eval(
        "document.querySelector(\"#answer-primary_language option[value='en']\").textContent",
    );
    assert_eq!(english, json!("English"));
    assert_eq!(p.text("#setup-progress"), "3 of 8 answered");

    // Leaving and coming back continues where it stopped.
    p.click("#top nav a[href='#/documents']");
    p.wait_for("#drop-zone");
    p.click("#setup-banner a");
    next("primary_language");
    assert_eq!(p.text("#setup-progress"), "3 of 8 answered");
    // Back shows each earlier answer as it was given.
    p.click("#setup-back");
    next("modules");
    let checked = p.eval(
        "[...document.querySelectorAll('#setup-question input:checked')].map(b => b.value).join(',')",
    );
    assert_eq!(checked, json!("knowledge_base,conversations"));
    p.click("#setup-back");
    next("industry");
    assert_eq!(
        p.eval("document.querySelector('#answer-industry').value"),
        json!("retail")
    );
    p.screenshot("21-setup-back-keeps-answers");
    submit();
    next("modules");
    submit();
    next("primary_language");
    assert_eq!(p.text("#setup-progress"), "3 of 8 answered");
}

/// The documents' summary follows the filter; a refused type names ZIP among the types.
fn documents_in_words(p: &Page) {
    p.click("#top nav a[href='#/documents']");
    p.wait_for("#sources tr[data-source='returns.md']");
    let all = p.text("#source-summary");
    assert!(all.starts_with("2 sources · "), "{all}");
    let returns = p.text("#sources tr[data-source='returns.md'] td.num");
    p.type_into("#source-filter", "returns");
    p.wait(
        "document.querySelector('#source-summary')?.textContent.startsWith('1 of 2 sources')",
        "the summary of the filtered sources",
    );
    let summary = p.text("#source-summary");
    assert!(
        summary.contains(&format!(" · {returns} of ")),
        "the passages of the shown sources: {summary}"
    );
    drop_files(p, &[("setup.exe", "MZ not a document")]);
    let up = uploads_done(p, 1);
    let refusal = up[0][2].as_str().unwrap();
    assert!(
        up[0][1] == "error" && refusal.contains(".zip") && refusal.contains(".pdf"),
        "{up:?}"
    );
    p.screenshot_full("22-documents-filter-and-refusal");
}

/// An empty question and one over the limit are refused in words; nothing is cut.
fn ask_limits(p: &Page) {
    p.click("#top nav a[href='#/ask']");
    p.wait_for("#question");
    p.press("Enter");
    p.wait_for("#ask-problem .notice.error");
    assert_eq!(p.text("#ask-problem"), "Write a question first.");
    let near = "Where is the warehouse and how long does shipping take? ".repeat(80);
    p.type_into("#question", &near[..3500]);
    p.wait(
        "!document.querySelector('.counter').hidden",
        "the counter near the limit",
    );
    assert_eq!(p.text(".counter"), "3,500 / 4,000 characters");
    assert!(
        p.text("#ask-problem").is_empty(),
        "typing clears the refusal"
    );
    let long = near.repeat(2);
    p.type_into("#question", &long[..4100]);
    p.wait(
        "document.querySelector('.counter')?.classList.contains('over')",
        "the counter past the limit",
    );
    assert_eq!(
        p.eval("document.querySelector('#question').value.length"),
        json!(4100),
        "the field keeps every character"
    );
    p.press("Enter");
    p.wait_for("#ask-problem .notice.error");
    let why = p.text("#ask-problem");
    assert!(
        why.contains("4,100 characters")
            && why.contains("4,000")
            && why.contains("nothing was sent"),
        "{why}"
    );
    assert_eq!(
        p.eval("document.querySelector('#answer').hidden"),
        json!(true)
    );
    p.screenshot("23-ask-too-long");
}

/// The page's own call of the assistant API; its `message.data`.
fn op(p: &Page, name: &str, query: &str) -> Value {
    p.eval(&format!(
        "fetch('/api/method/assistant.api.{name}?{query}', {{headers: {{'X-Requested-With': 'ragd-web'}}}}).then(r => r.json()).then(j => j.message.data)"
    ))
}

/// A reply's citations and sources survive reopening; history search shows each
/// conversation once, snippets on word boundaries, and opens a hit at its message.
fn chat_kept_and_found(p: &Page) {
    p.click("#top nav a[href='#/chat']");
    p.wait_for("#chat-input");
    p.press("Enter");
    p.wait_for("#chat-problem .notice.error");
    assert_eq!(p.text("#chat-problem"), "Write a message first.");
    p.type_into("#chat-input", "How long do I have to return a product?");
    p.press("Enter");
    let reply = last_reply(p);
    assert!(reply.contains("30 days"), "{reply}");
    p.wait_for("#messages .message.assistant .text button.cite");
    p.wait(
        "location.hash.split('/').length === 3",
        "the conversation's address",
    );
    p.call("Page.reload", json!({}));
    p.wait_for("#messages .message.assistant .text button.cite");
    p.wait_for("#messages .message.assistant .reply-sources li");
    let shown = p.text("#messages .message.assistant .text");
    assert!(!shown.contains("[1]"), "citations are links: {shown}");
    p.screenshot("24-chat-reopened-citations");
    let id = p.eval("decodeURIComponent(location.hash.split('/')[2])");
    let id = id.as_str().unwrap();
    let history = op(
        p,
        "get_conversation_history",
        &format!("conversation_id={id}"),
    );
    let kept = &history["messages"][1];
    assert_eq!(kept["sources"][0]["source"], "returns.md", "{kept}");
    assert_eq!(kept["answer_mode"], "extractive", "{kept}");

    let long = "I bought a kettle in March and a toaster in April, and the toaster arrived broken, so before anything else I would like to know how long I have to return a product and whether the refund reaches my card.";
    p.type_into("#chat-input", long);
    p.press("Enter");
    p.wait("document.querySelectorAll('#messages .message').length === 4 && !document.querySelector('#messages [aria-busy]')", "the second reply");
    p.type_into("#history-search", "return");
    p.wait_for("#conversation-list .hit mark");
    assert_eq!(
        p.eval("document.querySelectorAll('#conversation-list .conversation.hit').length"),
        json!(1),
        "one entry for the one conversation"
    );
    let found = op(p, "search_conversations", "query=return");
    let history = op(
        p,
        "get_conversation_history",
        &format!("conversation_id={id}"),
    );
    let texts: Vec<String> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    let mut seen = std::collections::HashSet::new();
    for hit in found["results"].as_array().unwrap() {
        let snippet = hit["snippet"].as_str().unwrap();
        assert!(seen.insert(snippet.to_owned()), "a repeated hit: {found}");
        assert!(
            !snippet.contains('['),
            "no citation, whole or cut: {snippet}"
        );
        let core = snippet.trim_matches('…');
        // Each excerpt starts and ends on a word boundary of its message.
        let whole = texts.iter().any(|t| {
            let t = regex_lite_strip_citations(t);
            t.match_indices(core).any(|(at, _)| {
                let before = t[..at].chars().next_back();
                let after = t[at + core.len()..].chars().next();
                !before.is_some_and(char::is_alphanumeric)
                    && !after.is_some_and(char::is_alphanumeric)
            })
        });
        assert!(whole, "{snippet:?} is not cut on words of {texts:?}");
    }
    assert!(
        found["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["message_id"].is_string()),
        "no title hit repeating a message: {found}"
    );
    p.screenshot("25-history-search");
    p.eval("[...document.querySelectorAll('#conversation-list .hit a')].find(a => a.textContent.includes('toaster')).id = 'toaster-hit'");
    p.click("#toaster-hit");
    p.wait(
        "(() => { const m = document.querySelector('#messages .message.found');
            if (!m) return false;
            const r = m.getBoundingClientRect(), box = document.querySelector('#messages').getBoundingClientRect();
            return m.textContent.includes('toaster') && r.top >= box.top - 1 && r.bottom <= box.bottom + 1; })()",
        "the found message, marked and in view",
    );
    assert!(
        p.text("#conversation-list").contains("for “return”"),
        "the search stays"
    );
    p.screenshot("26-history-hit-opened");
}

/// A text without its citation markers (and the space before each).
fn regex_lite_strip_citations(t: &str) -> String {
    let mut out = String::with_capacity(t.len());
    let mut rest = t;
    while let Some(at) = rest.find('[') {
        let digits = rest[at + 1..]
            .chars()
            .take_while(char::is_ascii_digit)
            .count();
        if digits > 0 && rest[at + 1 + digits..].starts_with(']') {
            out.push_str(rest[..at].trim_end_matches(' '));
            rest = &rest[at + digits + 2..];
        } else {
            out.push_str(&rest[..=at]);
            rest = &rest[at + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// Settings labels in words, an optional model that is not installed in grey, passages
/// counted as passages.
fn settings_in_words(p: &Page) {
    p.click("#top nav a[href='#/settings']");
    p.wait_for("#server-settings table");
    p.wait_for("#health .components li");
    let heads = p.eval(
        "[...document.querySelectorAll('#server-settings th, #assistant-settings th, #health th')].map(t => t.innerText)",
    );
    let heads: Vec<&str> = heads
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for want in ["LLM model", "JWT secret", "Passages", "Sources"] {
        assert!(heads.contains(&want), "{want} in {heads:?}");
    }
    assert!(
        !heads
            .iter()
            .any(|t| t.contains("Llm") || t.contains("Jwt") || *t == "Documents"),
        "{heads:?}"
    );
    let reranker = p.eval(
        "(() => { const li = document.querySelector(\"#health li[data-component='reranker']\");
            const badge = li.querySelector('.badge');
            return {state: badge.textContent, color: getComputedStyle(badge).color}; })()",
    );
    assert_eq!(reranker["state"], "not installed", "{reranker}");
    assert_ne!(reranker["color"], "rgb(180, 35, 24)", "not red: {reranker}");
    let assistant = p.text("#assistant-settings");
    assert!(
        assistant.contains("Knowledge base, Conversations")
            && !assistant.contains("knowledge_base"),
        "{assistant}"
    );
    p.screenshot_full("27-settings-in-words");
}

/// Issue 31's fixes of the page that need no model: onboarding, documents, Ask's limits,
/// a chat reply kept with its citations, history search, settings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_speaks_plainly_and_keeps_what_it_showed() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    create_user(&data, ADMIN.0, ADMIN.1, true).await;
    let server = TestServer::start_with(test_config(&data)).await;
    for (name, body) in [
        ("returns.md", POLICY_V1),
        (
            "old-notes.md",
            "# Old notes\n\nThe pallets moved to bay four.\n",
        ),
    ] {
        let (status, r) = server.upload(name, body.as_bytes()).await;
        assert_eq!(status, 200, "{r}");
    }
    let base = server.base.clone();
    tokio::task::spawn_blocking(move || {
        let browser = Browser::launch();
        let p = browser.page(1280, 860);
        p.sign_in(&base, ADMIN.0, ADMIN.1);
        setup_in_words(&p);
        // Another tab (a new browser session of the same person) continues it too.
        let other = browser.page(1280, 860);
        other.goto(&format!("{base}#/setup"));
        other.wait(
            "document.querySelector('#setup-progress')?.textContent === '3 of 8 answered' && !!document.querySelector(\"#setup-question[data-key='primary_language']\")",
            "the setup continued in another tab",
        );
        p.call("Page.bringToFront", json!({}));
        documents_in_words(&p);
        ask_limits(&p);
        chat_kept_and_found(&p);
        settings_in_words(&p);
        let outside = browser.outside_requests(&base);
        assert!(outside.is_empty(), "requests left the machine: {outside:?}");
        let errors = browser.errors.lock().unwrap().clone();
        assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
    })
    .await
    .unwrap();
    server.stop().await;
}

/// What [`Writer`] answers to anything but a deletion: Markdown, and HTML that must not
/// run.
const MARKDOWN_REPLY: &str = "## Packing\n\nPut **heavy items** first and *fragile* ones on top:\n\n1. Pallets go to `bay four`\n2. Boxes are sealed\n3. Labels face out\n\n<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">";

/// A scripted model that writes a bare `delete_source` call (no words of its own, so the
/// reply is the engine's) when asked to delete, and [`MARKDOWN_REPLY`] otherwise.
struct Writer {
    info: ModelInfo,
}

impl Generator for Writer {
    fn generate(&self, request: GenerateRequest) -> Result<mpsc::Receiver<LlmEvent>, MlError> {
        let (tx, rx) = mpsc::channel(256);
        let asks_delete = asks_delete(&request.prompt);
        let text = if asks_delete {
            "<tool_call>{\"name\": \"delete_source\", \"arguments\": {\"source\": \"old-notes.md\"}}</tool_call>"
        } else {
            MARKDOWN_REPLY
        };
        tokio::spawn(async move {
            send_in_pieces(&tx, text, 8).await;
        });
        Ok(rx)
    }
    fn count_tokens(&self, text: &str) -> usize {
        text.len() / 4 + 1
    }
    fn count_prompt_tokens(&self, _prompt: &Prompt) -> Result<usize, MlError> {
        Ok(100)
    }
    fn info(&self) -> &ModelInfo {
        &self.info
    }
    fn in_flight(&self) -> usize {
        0
    }
}

/// Issue 31's chat fixes with a model: a tool card is one line with its JSON on demand;
/// the reply names no action id and says what became of the held call after Confirm,
/// also when reopened; Markdown is shown as such, and HTML in a reply runs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_replies_read_as_text_and_follow_their_held_calls() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    create_user(&data, ADMIN.0, ADMIN.1, true).await;
    let model = Writer {
        info: ModelInfo {
            name: "writer".into(),
            family: "qwen2".into(),
            context_length: 8192,
            template_tools: false,
        },
    };
    let config =
        ragd::AppState::builder(test_config(&data)).llm(Arc::new(model) as Arc<dyn Generator>);
    let server = TestServer::start_with(config).await;
    let (status, _) = server
        .upload(
            "old-notes.md",
            b"# Old notes\n\nThe pallets moved to bay four.\n",
        )
        .await;
    assert_eq!(status, 200);

    let base = server.base.clone();
    tokio::task::spawn_blocking(move || {
        let browser = Browser::launch();
        let p = browser.page(1280, 860);
        p.sign_in(&base, ADMIN.0, ADMIN.1);
        p.click("#top nav a[href='#/chat']");
        p.type_into("#chat-input", "Please delete old-notes.md");
        p.press("Enter");
        let card = "#messages .message.assistant .tool[data-tool='delete_source']";
        p.wait_for(&format!("{card}[data-status='pending_confirmation'] button.confirm"));
        let reply = last_reply(&p);
        let action = p.eval(&format!("document.querySelector({}).dataset.action", js(card)));
        let action = action.as_str().unwrap();
        assert!(
            !reply.contains(action) && !reply.contains("(action"),
            "no internal id: {reply}"
        );
        assert!(reply.contains("old-notes.md") && reply.contains("waits for your confirmation"), "{reply}");
        // What the held call will do is said in words; its JSON waits behind Details.
        assert_eq!(p.text(&format!("{card} .args")), "source: old-notes.md");
        assert_eq!(
            p.eval(&format!("document.querySelector({}).hidden", js(&format!("{card} .tool-body")))),
            json!(true)
        );
        p.screenshot("28-chat-held-call");
        p.click(&format!("{card} button.confirm"));
        p.wait_for(&format!("{card}[data-status='executed']"));
        let reply = last_reply(&p);
        assert!(
            reply.contains("was confirmed and done") && !reply.contains("confirmation"),
            "the reply follows the decision: {reply}"
        );
        // One line: name, status and time; the result only on demand.
        let shape = p.eval(&format!(
            "(() => {{ const c = document.querySelector({});
                const head = c.querySelector('.tool-head').getBoundingClientRect();
                return {{card: c.getBoundingClientRect().height, head: head.height,
                        result: c.querySelector('pre.result').offsetHeight, text: c.innerText}}; }})()",
            js(card)
        ));
        assert!(
            shape["card"].as_f64().unwrap() < shape["head"].as_f64().unwrap() + 30.0,
            "{shape}"
        );
        assert_eq!(shape["result"], 0, "{shape}");
        assert!(shape["text"].as_str().unwrap().contains("Done"), "{shape}");
        p.screenshot("29-chat-card-one-line");
        p.click(&format!("{card} .details-toggle"));
        let result = p.wait(
            &format!("(() => {{ const r = document.querySelector({}); return r.offsetHeight > 0 && r.textContent; }})()",
                js(&format!("{card} pre.result"))),
            "the result on demand",
        );
        assert!(result.as_str().unwrap().contains("deleted"), "{result}");
        p.screenshot("30-chat-card-details");

        // Reopened, the reply and the card say the same.
        p.call("Page.reload", json!({}));
        p.wait_for(&format!("{card}[data-status='executed']"));
        let reply = last_reply(&p);
        assert!(reply.contains("was confirmed and done"), "{reply}");

        // Markdown as text on the page; the HTML in it shown, not run.
        p.type_into("#chat-input", "Write me a short packing checklist");
        p.press("Enter");
        p.wait(
            "(() => { const m = [...document.querySelectorAll('#messages .message.assistant')].pop();
                return !m.hasAttribute('aria-busy') && m.querySelector('.text.md li'); })()",
            "the reply as Markdown",
        );
        let md = p.eval(
            "(() => { const t = [...document.querySelectorAll('#messages .message.assistant .text')].pop();
                return {heading: t.querySelector('h3')?.textContent, strong: t.querySelector('strong')?.textContent,
                        em: t.querySelector('em')?.textContent, items: t.querySelectorAll('ol li').length,
                        code: t.querySelector('code')?.textContent, text: t.textContent,
                        scripts: document.querySelectorAll('#messages script, #messages img').length,
                        pwned: window.__pwned ?? null}; })()",
        );
        assert_eq!(md["heading"], "Packing", "{md}");
        assert_eq!(md["strong"], "heavy items", "{md}");
        assert_eq!(md["em"], "fragile", "{md}");
        assert_eq!(md["items"], 3, "{md}");
        assert_eq!(md["code"], "bay four", "{md}");
        assert_eq!(md["scripts"], 0, "{md}");
        assert_eq!(md["pwned"], Value::Null, "{md}");
        let text = md["text"].as_str().unwrap();
        assert!(
            text.contains("<script>window.__pwned = 1</script>") && !text.contains("**"),
            "{md}"
        );
        p.screenshot("31-chat-markdown");
        let errors = browser.errors.lock().unwrap().clone();
        assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
    })
    .await
    .unwrap();
    server.stop().await;
}
