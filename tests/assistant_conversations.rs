//! Conversations through the assistant API: pagination, isolation between users, soft
//! delete and purge by the clock, per-user full-text search; and the search latency at
//! 10,000 messages (ignored by default: `cargo test --test assistant_conversations -- --ignored --nocapture`).

mod common;

use std::time::{Duration, Instant};

use common::{create_user, test_config, Auth, TestServer};
use ragd::assistant::conversations::{NewMessage, Role};
use reqwest::Method;
use serde_json::{json, Value};

const GET: Method = Method::GET;
const POST: Method = Method::POST;

struct Setup {
    _dir: tempfile::TempDir,
    server: TestServer,
    state: ragd::AppState,
    clock: ragd::time::Clock,
    alice: (Auth, String),
    bob: (Auth, String),
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let a = create_user(dir.path(), "alice@example.com", "password-a", false).await;
    let b = create_user(dir.path(), "bob@example.com", "password-b", false).await;
    let mut config = test_config(dir.path());
    // These tests make many calls; the limit itself is tested in assistant_tools.
    config.rate_limit_chat = 10_000;
    let clock = ragd::time::Clock::default();
    let config = ragd::AppState::builder(config).clock(clock.clone());
    let (server, state) = TestServer::start_with_state(config).await;
    let alice = (Auth::Token(a.clone()), common::user_id(&state, &a).await);
    let bob = (Auth::Token(b.clone()), common::user_id(&state, &b).await);
    Setup {
        _dir: dir,
        server,
        state,
        clock,
        alice,
        bob,
    }
}

impl Setup {
    async fn op(
        &self,
        method: Method,
        op: &str,
        params: Value,
        who: &(Auth, String),
    ) -> common::Reply {
        self.server
            .call(method, &format!("assistant.api.{op}"), &params, &who.0)
            .await
    }

    async fn create(&self, who: &(Auth, String), title: Option<&str>) -> String {
        let p = title.map(|t| json!({"title": t})).unwrap_or(json!({}));
        let r = self.op(POST, "create_conversation", p, who).await;
        r.data()["conversation_id"].as_str().unwrap().to_owned()
    }

    async fn deleted_count(&self) -> u64 {
        let r = self
            .op(
                GET,
                "list_conversations",
                json!({"status": "Deleted"}),
                &self.alice,
            )
            .await;
        r.data()["total"].as_u64().unwrap()
    }

    async fn say(
        &self,
        who: &(Auth, String),
        conversation_id: &str,
        role: Role,
        text: &str,
    ) -> String {
        self.state
            .assistant
            .conversations
            .append(&who.1, conversation_id, NewMessage::text(role, text))
            .await
            .unwrap()
            .message_id
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pagination_history_and_isolation() {
    let s = setup().await;
    for i in 0..25 {
        s.create(&s.alice, Some(&format!("topic {i}"))).await;
    }
    let r = s.op(GET, "list_conversations", json!({}), &s.alice).await;
    let d = r.data();
    assert_eq!(
        (
            d["page"].as_u64(),
            d["page_size"].as_u64(),
            d["total"].as_u64()
        ),
        (Some(1), Some(20), Some(25))
    );
    assert_eq!(d["conversations"].as_array().unwrap().len(), 20);
    assert_eq!(d["status"], "Active");
    assert!(r.header("x-ratelimit-limit").is_some());
    let r = s
        .op(GET, "list_conversations", json!({"page": 2}), &s.alice)
        .await;
    assert_eq!(r.data()["conversations"].as_array().unwrap().len(), 5);
    for bad in [
        json!({"page_size": 0}),
        json!({"page_size": 101}),
        json!({"page": 0}),
        json!({"status": "Archived"}),
    ] {
        assert_eq!(
            s.op(GET, "list_conversations", bad, &s.alice)
                .await
                .error(400),
            "ValidationError"
        );
    }

    // An untitled conversation is named by its first user message.
    let id = s.create(&s.alice, None).await;
    let r = s
        .op(
            GET,
            "get_conversation_history",
            json!({"conversation_id": id}),
            &s.alice,
        )
        .await;
    assert_eq!(r.data()["title"], "New conversation");
    s.say(&s.alice, &id, Role::User, "Where is the spare key kept?")
        .await;
    let m2 = s
        .say(&s.alice, &id, Role::Assistant, "In the blue box.")
        .await;
    let r = s
        .op(
            GET,
            "get_conversation_history",
            json!({"conversation_id": id}),
            &s.alice,
        )
        .await;
    let d = r.data();
    assert_eq!(d["title"], "Where is the spare key kept?");
    assert_eq!(
        (
            d["limit"].as_u64(),
            d["offset"].as_u64(),
            d["total"].as_u64()
        ),
        (Some(50), Some(0), Some(2))
    );
    assert_eq!(d["messages"][0]["role"], "user");
    let r = s
        .op(
            GET,
            "get_conversation_history",
            json!({"conversation_id": id, "limit": 1, "offset": 1}),
            &s.alice,
        )
        .await;
    assert_eq!(r.data()["messages"][0]["message_id"], m2.as_str());
    let r = s
        .op(
            GET,
            "get_conversation_history",
            json!({"conversation_id": id, "limit": 201}),
            &s.alice,
        )
        .await;
    r.error(400);
    s.op(GET, "get_conversation_history", json!({}), &s.alice)
        .await
        .error(400);

    // Bob sees none of it.
    let r = s.op(GET, "list_conversations", json!({}), &s.bob).await;
    assert_eq!(r.data()["total"], 0);
    let r = s
        .op(
            GET,
            "get_conversation_history",
            json!({"conversation_id": id}),
            &s.bob,
        )
        .await;
    assert_eq!(r.error(404), "DoesNotExistError");
    s.op(
        Method::DELETE,
        "delete_conversation",
        json!({"conversation_id": id}),
        &s.bob,
    )
    .await
    .error(404);
    s.op(
        GET,
        "list_conversations",
        json!({}),
        &(Auth::None, String::new()),
    )
    .await
    .error(401);
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn search_is_per_user_and_skips_deleted() {
    let s = setup().await;
    let a1 = s.create(&s.alice, Some("Depot logistics")).await;
    let m1 = s
        .say(
            &s.alice,
            &a1,
            Role::User,
            "The zebra crossing near the depot needs repainting.",
        )
        .await;
    let a2 = s.create(&s.alice, Some("Zoo trip")).await;
    s.say(&s.alice, &a2, Role::Assistant, "Zebras sleep standing up.")
        .await;
    let b1 = s.create(&s.bob, None).await;
    s.say(
        &s.bob,
        &b1,
        Role::User,
        "zebra stripes pattern for the logo",
    )
    .await;

    let r = s
        .op(
            GET,
            "search_conversations",
            json!({"query": "zebra"}),
            &s.alice,
        )
        .await;
    let d = r.data();
    assert_eq!(d["total"], 2, "{d}");
    let hits = d["results"].as_array().unwrap();
    assert!(hits.iter().all(|h| h["conversation_id"] != b1.as_str()));
    let top = hits
        .iter()
        .find(|h| h["conversation_id"] == a1.as_str())
        .expect("a1 found");
    assert_eq!(top["message_id"], m1.as_str());
    assert_eq!(top["title"], "Depot logistics");
    assert!(
        top["snippet"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("zebra"),
        "{top}"
    );
    assert!(top["score"].as_f64().unwrap() > 0.0);
    // Titles are searched too.
    let r = s
        .op(
            GET,
            "search_conversations",
            json!({"query": "logistics"}),
            &s.alice,
        )
        .await;
    assert_eq!(r.data()["results"][0]["message_id"], Value::Null);
    // Paging.
    let r = s
        .op(
            GET,
            "search_conversations",
            json!({"query": "zebra", "page_size": 1, "page": 2}),
            &s.alice,
        )
        .await;
    assert_eq!(r.data()["results"].as_array().unwrap().len(), 1);

    // Bob's title (from his first message) and his message both match: one hit, the
    // message's, since the title would only repeat it.
    let r = s
        .op(
            GET,
            "search_conversations",
            json!({"query": "zebra"}),
            &s.bob,
        )
        .await;
    let hits = r.data()["results"].as_array().unwrap().clone();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0]["conversation_id"], b1.as_str());
    assert!(hits[0]["message_id"].is_string(), "{hits:?}");
    assert_eq!(r.data()["total"], 1);

    let r = s
        .op(
            Method::DELETE,
            "delete_conversation",
            json!({"conversation_id": a1}),
            &s.alice,
        )
        .await;
    assert_eq!(r.data()["status"], "Deleted");
    let r = s
        .op(
            GET,
            "search_conversations",
            json!({"query": "depot"}),
            &s.alice,
        )
        .await;
    assert_eq!(
        r.data()["total"],
        0,
        "deleted conversations leave search at once"
    );
    s.op(GET, "search_conversations", json!({}), &s.alice)
        .await
        .error(400);
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn soft_delete_then_purge_after_retention() {
    let s = setup().await;
    let id = s.create(&s.alice, Some("Old plans")).await;
    s.say(&s.alice, &id, Role::User, "archive the quokka report")
        .await;
    let keep = s.create(&s.alice, Some("Keep me")).await;
    let r = s
        .op(
            POST,
            "delete_conversation",
            json!({"conversation_id": id}),
            &s.alice,
        )
        .await;
    assert!(r.data()["purge_after"].as_str().is_some());
    s.op(
        POST,
        "delete_conversation",
        json!({"conversation_id": id}),
        &s.alice,
    )
    .await
    .error(404);
    s.op(
        GET,
        "get_conversation_history",
        json!({"conversation_id": id}),
        &s.alice,
    )
    .await
    .error(404);
    let active = s.op(GET, "list_conversations", json!({}), &s.alice).await;
    assert_eq!(active.data()["total"], 1);
    assert_eq!(s.deleted_count().await, 1);

    s.clock.advance(Duration::from_secs(29 * 86_400));
    assert_eq!(
        s.deleted_count().await,
        1,
        "kept until the retention period ends"
    );
    s.clock.advance(Duration::from_secs(2 * 86_400));
    assert_eq!(s.deleted_count().await, 0, "purged 31 days after deletion");
    let r = s
        .op(
            GET,
            "get_conversation_history",
            json!({"conversation_id": keep}),
            &s.alice,
        )
        .await;
    r.data();
    let r = s
        .op(
            GET,
            "search_conversations",
            json!({"query": "quokka"}),
            &s.alice,
        )
        .await;
    assert_eq!(r.data()["total"], 0);
    s.server.stop().await;
}

/// Inserts 10,000 messages through the service and times searches over them.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "benchmark: run with --ignored --nocapture"]
async fn search_latency_at_10k_messages() {
    let s = setup().await;
    let words = [
        "invoice", "router", "shipment", "payroll", "printer", "contract", "budget", "laptop",
        "meeting", "vendor", "license", "backup", "firewall", "holiday", "refund", "warranty",
    ];
    let conversations = 100;
    let per = 100;
    let started = Instant::now();
    for c in 0..conversations {
        let id = s.create(&s.alice, Some(&format!("thread {c}"))).await;
        for m in 0..per {
            let n = c * per + m;
            let text = format!(
                "message {n}: the {} for the {} was discussed with the {} team; follow up on {} next week",
                words[n % 16], words[(n / 16) % 16], words[(n / 256) % 16], words[(n * 7) % 16]
            );
            let role = if m % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            s.say(&s.alice, &id, role, &text).await;
        }
    }
    let insert = started.elapsed();
    let total = conversations * per;
    println!(
        "inserted {total} messages in {insert:?} ({:.2} ms/message)",
        insert.as_secs_f64() * 1e3 / total as f64
    );

    // The first search commits what the inserts staged (unless the upkeep task did).
    let t = Instant::now();
    let r = s
        .state
        .assistant
        .conversations
        .search(&s.alice.1, "warranty", None, None)
        .await
        .unwrap();
    println!(
        "first search after the inserts: {:?} ({} hits)",
        t.elapsed(),
        r.total
    );
    for q in [
        "invoice",
        "router firmware",
        "payroll vendor refund",
        "message 4242",
    ] {
        let mut times = Vec::new();
        let mut hits = 0;
        for _ in 0..20 {
            let t = Instant::now();
            let r = s
                .state
                .assistant
                .conversations
                .search(&s.alice.1, q, None, None)
                .await
                .unwrap();
            times.push(t.elapsed());
            hits = r.total;
        }
        times.sort();
        println!(
            "service search {q:?}: {hits} hits, p50 {:?}, p95 {:?}",
            times[times.len() / 2],
            times[times.len() * 95 / 100]
        );
    }
    let mut times = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let r = s
            .op(
                GET,
                "search_conversations",
                json!({"query": "invoice budget"}),
                &s.alice,
            )
            .await;
        times.push(t.elapsed());
        r.data();
    }
    times.sort();
    println!(
        "HTTP search_conversations: p50 {:?}, p95 {:?}",
        times[10], times[19]
    );
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn search_index_survives_restarts_and_is_rebuilt_when_lost() {
    let dir = tempfile::tempdir().unwrap();
    let a = Auth::Token(create_user(dir.path(), "a@example.com", "password-a", false).await);
    let server = TestServer::start(dir.path()).await;
    let p = json!({"title": "Aurora borealis photos"});
    server
        .call(POST, "assistant.api.create_conversation", &p, &a)
        .await
        .data();
    assert_eq!(aurora_hits(&server, &a).await, 1);
    server.stop().await;

    let server = TestServer::start(dir.path()).await;
    assert_eq!(aurora_hits(&server, &a).await, 1, "committed at shutdown");
    server.stop().await;

    std::fs::remove_dir_all(dir.path().join("conversations_fulltext")).unwrap();
    let server = TestServer::start(dir.path()).await;
    assert_eq!(aurora_hits(&server, &a).await, 1, "rebuilt from SQLite");
    server.stop().await;
}

async fn aurora_hits(server: &TestServer, who: &Auth) -> u64 {
    let p = json!({"query": "aurora"});
    let r = server
        .call(GET, "assistant.api.search_conversations", &p, who)
        .await;
    r.data()["total"].as_u64().unwrap()
}
