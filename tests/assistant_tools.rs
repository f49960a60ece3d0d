//! Tools and pending actions through the assistant API: every tool via `execute_tool`
//! (knowledge-base tools against a document uploaded through `/api/v1/upload`), invalid
//! params, admin-only tools, the confirm / reject / expire / 409 lifecycle of high-risk
//! actions, and the tools rate limit.

mod common;

use std::time::Duration;

use common::{create_user, test_config, Auth, Reply, TestServer};
use reqwest::Method;
use serde_json::{json, Value};

const POLICY: &str =
    "# Leave policy\n\nEvery employee receives twenty-five days of paid vacation per year. \
Unused vacation days may be carried over until the end of March of the following year.\n\n\
## Sick leave\n\nSick leave requires a doctor's note after three consecutive days of absence.\n";

struct Setup {
    _dir: tempfile::TempDir,
    server: TestServer,
    clock: ragd::time::Clock,
    user: Auth,
    other: Auth,
    admin: Auth,
}

async fn setup(rate_limit_tools: u32) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let u = create_user(dir.path(), "user@example.com", "password-u", false).await;
    let o = create_user(dir.path(), "other@example.com", "password-o", false).await;
    let a = create_user(dir.path(), "admin@example.com", "password-a", true).await;
    let mut config = test_config(dir.path());
    config.rate_limit_tools = rate_limit_tools;
    let clock = ragd::time::Clock::default();
    let server = TestServer::start_with(ragd::AppState::builder(config).clock(clock.clone())).await;
    Setup {
        _dir: dir,
        server,
        clock,
        user: Auth::Token(u),
        other: Auth::Token(o),
        admin: Auth::Token(a),
    }
}

impl Setup {
    async fn op(&self, method: Method, op: &str, params: Value, who: &Auth) -> Reply {
        self.server
            .call(method, &format!("assistant.api.{op}"), &params, who)
            .await
    }

    async fn exec(&self, tool: &str, params: Value, who: &Auth) -> Reply {
        self.op(
            Method::POST,
            "execute_tool",
            json!({"tool_name": tool, "params": params}),
            who,
        )
        .await
    }

    /// Runs a low/medium tool and returns its result.
    async fn run(&self, tool: &str, params: Value) -> Value {
        let r = self.exec(tool, params, &self.user).await;
        let d = r.data();
        assert_eq!(d["success"], true, "{tool}: {d}");
        assert_eq!(d["requires_confirmation"], false, "{tool}: {d}");
        assert!(d["execution_time_ms"].as_f64().is_some(), "{tool}: {d}");
        d["result"].clone()
    }

    /// Proposes a high-risk tool and returns the action id (asserting nothing ran).
    async fn propose(&self, tool: &str, params: Value, who: &Auth) -> String {
        let r = self.exec(tool, params, who).await;
        let d = r.data();
        assert_eq!(d["success"], true, "{d}");
        assert_eq!(d["requires_confirmation"], true, "{d}");
        assert!(d["result"].is_null(), "{d}");
        d["action_id"].as_str().expect("action_id").to_owned()
    }

    async fn confirm(&self, id: &str, who: &Auth) -> Reply {
        self.op(
            Method::POST,
            "confirm_action",
            json!({"action_id": id}),
            who,
        )
        .await
    }
}

fn detail(r: &Reply) -> String {
    r.body["message"]["error"]["detail"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_tool_through_execute_tool() {
    let s = setup(1000).await;
    let (status, body) = s.server.upload("policy.md", POLICY.as_bytes()).await;
    assert_eq!(status, 200, "{body}");

    // Listing.
    let r = s
        .op(Method::GET, "get_available_tools", json!({}), &s.user)
        .await;
    let d = r.data();
    assert_eq!(
        d["count"], 17,
        "update_setting is hidden from non-admins: {d}"
    );
    assert!(d["tools"][0].get("schema").is_none());
    let r = s
        .op(
            Method::GET,
            "get_available_tools",
            json!({"include_schema": true, "category": "system"}),
            &s.admin,
        )
        .await;
    let tools = r.data()["tools"].as_array().unwrap().clone();
    assert_eq!(tools.len(), 3);
    assert!(tools.iter().all(|t| t["schema"]["type"] == "object"));
    s.op(
        Method::GET,
        "get_available_tools",
        json!({"category": "nope"}),
        &s.user,
    )
    .await
    .error(400);

    // Knowledge base, low risk.
    let r = s
        .run(
            "search_knowledge_base",
            json!({"query": "vacation days", "top_k": 3}),
        )
        .await;
    assert!(
        r["results"][0]["text"]
            .as_str()
            .unwrap()
            .contains("vacation"),
        "{r}"
    );
    let r = s
        .run(
            "ask_knowledge_base",
            json!({"question": "How many days of paid vacation per year?"}),
        )
        .await;
    assert!(!r["answer"].as_str().unwrap().is_empty(), "{r}");
    assert!(!r["sources"].as_array().unwrap().is_empty());
    let r = s.run("list_documents", json!({"page_size": 5})).await;
    let doc_id = r["documents"][0]["id"].as_str().unwrap().to_owned();
    assert!(r["total"].as_u64().unwrap() >= 1);
    let r = s.run("get_document", json!({"document_id": doc_id})).await;
    assert_eq!(r["id"], doc_id.as_str());
    let r = s.run("get_document_stats", json!({})).await;
    assert!(r["total_documents"].as_u64().unwrap() >= 1, "{r}");
    let r = s.run("list_sources", json!({})).await;
    assert!(
        r["sources"]
            .as_array()
            .unwrap()
            .contains(&json!("policy.md")),
        "{r}"
    );

    // Medium risk runs at once.
    let r = s
        .run("upload_text", json!({"title": "Parking rules", "text": "Visitors park on level two of the garage. Staff park on level three."}))
        .await;
    assert_eq!(r["success"], true, "{r}");
    assert!(r["chunks_added"].as_u64().unwrap() >= 1, "{r}");
    let r = s
        .run("search_knowledge_base", json!({"query": "garage visitors"}))
        .await;
    assert!(
        r["results"][0]["text"].as_str().unwrap().contains("garage"),
        "{r}"
    );
    let r = s
        .run("scrape_url", json!({"url": "http://127.0.0.1:9/page.html"}))
        .await;
    let task_id = r["task_id"].as_str().unwrap().to_owned();
    let r = s.run("get_task", json!({"task_id": task_id})).await;
    assert_eq!(r["task_id"], task_id.as_str());
    let r = s.run("list_tasks", json!({"limit": 5})).await;
    assert!(r["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["task_id"] == task_id.as_str()));
    s.exec("get_task", json!({"task_id": "missing"}), &s.user)
        .await
        .error(404);

    // Conversations (the caller's own) and system tools.
    s.op(
        Method::POST,
        "create_conversation",
        json!({"title": "Budget review"}),
        &s.user,
    )
    .await
    .data();
    let r = s.run("list_conversations", json!({})).await;
    assert_eq!(r["total"], 1);
    let r = s
        .run("search_conversations", json!({"query": "budget"}))
        .await;
    assert_eq!(r["results"][0]["title"], "Budget review");
    let r = s
        .exec("search_conversations", json!({"query": "budget"}), &s.other)
        .await;
    assert_eq!(r.data()["result"]["total"], 0);
    let r = s
        .run("get_current_datetime", json!({"utc_offset_minutes": 120}))
        .await;
    assert!(
        r["utc"].as_str().unwrap().len() >= 19 && r["local"].as_str().unwrap().ends_with("+02:00"),
        "{r}"
    );
    let r = s
        .run(
            "calculate",
            json!({"expression": "2 * (3 + 4)^2 - sqrt(16) % 3"}),
        )
        .await;
    assert_eq!(r["result"], 97);
    let r = s
        .exec("calculate", json!({"expression": "1/0"}), &s.user)
        .await;
    r.error(400);
    assert!(detail(&r).contains("division by zero"), "{}", r.body);

    // High risk: held, then run on confirmation.
    let id = s
        .propose("delete_document", json!({"document_id": doc_id}), &s.user)
        .await;
    s.run("get_document", json!({"document_id": doc_id})).await;
    let r = s.confirm(&id, &s.user).await;
    let d = r.data();
    assert_eq!(
        (d["status"].as_str(), d["success"].as_bool()),
        (Some("executed"), Some(true)),
        "{d}"
    );
    assert_eq!(d["result"]["status"], "deleted");
    s.exec("get_document", json!({"document_id": doc_id}), &s.user)
        .await
        .error(404);

    let id = s
        .propose(
            "delete_source",
            json!({"source": "Parking rules.txt"}),
            &s.user,
        )
        .await;
    let r = s.confirm(&id, &s.user).await;
    assert!(
        r.data()["result"]["deleted"].as_u64().unwrap() >= 1,
        "{}",
        r.body
    );
    let id = s
        .propose(
            "delete_by_filter",
            json!({"where": {"source": "policy.md"}}),
            &s.user,
        )
        .await;
    let r = s.confirm(&id, &s.user).await;
    assert!(
        r.data()["result"]["deleted"].as_u64().unwrap() >= 1,
        "{}",
        r.body
    );
    let r = s.run("get_document_stats", json!({})).await;
    assert_eq!(r["total_documents"], 0, "{r}");

    // Admin only.
    let r = s
        .exec(
            "update_setting",
            json!({"key": "company_name", "value": "Acme"}),
            &s.user,
        )
        .await;
    assert_eq!(r.error(403), "PermissionError");
    let id = s
        .propose(
            "update_setting",
            json!({"key": "company_name", "value": "Acme"}),
            &s.admin,
        )
        .await;
    let r = s.confirm(&id, &s.admin).await;
    assert_eq!(r.data()["result"]["value"], "Acme", "{}", r.body);
    // A setting that fails its own check is a failed action.
    let id = s
        .propose(
            "update_setting",
            json!({"key": "primary_language", "value": "xx"}),
            &s.admin,
        )
        .await;
    let r = s.confirm(&id, &s.admin).await;
    let d = r.data();
    assert_eq!(
        (d["status"].as_str(), d["success"].as_bool()),
        (Some("failed"), Some(false)),
        "{d}"
    );
    assert!(d["error"].as_str().unwrap().contains("primary_language"));
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_calls_are_refused_with_the_reason() {
    let s = setup(1000).await;
    let r = s
        .exec("search_knowledge_base", json!({"top_k": 3}), &s.user)
        .await;
    assert_eq!(r.error(400), "ValidationError");
    assert!(
        detail(&r).contains("params.query is required"),
        "{}",
        r.body
    );
    let r = s
        .exec(
            "search_knowledge_base",
            json!({"query": "x", "top_k": "many"}),
            &s.user,
        )
        .await;
    r.error(400);
    assert!(
        detail(&r).contains("params.top_k must be an integer"),
        "{}",
        r.body
    );
    let r = s
        .exec("list_documents", json!({"page_size": 1000}), &s.user)
        .await;
    assert!(
        detail(&r).contains("params.page_size must be at most 100"),
        "{}",
        r.body
    );
    let r = s
        .exec("list_tasks", json!({"status": "done"}), &s.user)
        .await;
    assert!(detail(&r).contains("params.status"), "{}", r.body);
    let r = s
        .exec(
            "calculate",
            json!({"expression": "1", "extra": true}),
            &s.user,
        )
        .await;
    assert!(detail(&r).contains("params.extra"), "{}", r.body);
    // High-risk params are checked before anything is held.
    let r = s
        .exec("delete_by_filter", json!({"where": {}}), &s.user)
        .await;
    r.error(400);
    let r = s
        .op(Method::GET, "list_pending_actions", json!({}), &s.user)
        .await;
    assert_eq!(r.data()["count"], 0);

    assert_eq!(
        s.exec("no_such_tool", json!({}), &s.user).await.error(404),
        "DoesNotExistError"
    );
    s.op(Method::POST, "execute_tool", json!({"params": {}}), &s.user)
        .await
        .error(400);
    s.op(
        Method::POST,
        "execute_tool",
        json!({"tool_name": "calculate", "params": 5}),
        &s.user,
    )
    .await
    .error(400);
    s.exec("calculate", json!({"expression": "2+2"}), &Auth::None)
        .await
        .error(401);
    // Form-encoded, as Frappe clients send it.
    let req = s
        .server
        .client
        .post(s.server.url("/api/method/assistant.api.execute_tool"))
        .form(&[
            ("tool_name", "calculate"),
            ("params", r#"{"expression": "6*7"}"#),
        ]);
    let r = s.server.send_reply(common::with_auth(req, &s.user)).await;
    assert_eq!(r.data()["result"]["result"], 42);
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn confirm_reject_expire_lifecycle() {
    let s = setup(1000).await;
    let pending = |who| {
        let s = &s;
        async move {
            let r = s
                .op(Method::GET, "list_pending_actions", json!({}), who)
                .await;
            r.data()["actions"].as_array().unwrap().clone()
        }
    };

    // Reject with a reason.
    let a = s
        .propose("delete_source", json!({"source": "nothing.md"}), &s.user)
        .await;
    let listed = pending(&s.user).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["action_id"], a.as_str());
    assert_eq!(listed[0]["tool_name"], "delete_source");
    assert!(pending(&s.other).await.is_empty());
    s.confirm(&a, &s.other).await.error(404);
    s.op(
        Method::POST,
        "reject_action",
        json!({"action_id": a}),
        &s.other,
    )
    .await
    .error(404);
    let r = s
        .op(
            Method::POST,
            "reject_action",
            json!({"action_id": a, "reason": "wrong source"}),
            &s.user,
        )
        .await;
    let d = r.data();
    assert_eq!(
        (d["status"].as_str(), d["reason"].as_str()),
        (Some("rejected"), Some("wrong source"))
    );
    assert_eq!(s.confirm(&a, &s.user).await.error(409), "ConflictError");
    s.op(
        Method::POST,
        "reject_action",
        json!({"action_id": a}),
        &s.user,
    )
    .await
    .error(409);
    assert!(pending(&s.user).await.is_empty());

    // Confirm once; the second is a conflict.
    let b = s
        .propose("delete_source", json!({"source": "nothing.md"}), &s.user)
        .await;
    let r = s.confirm(&b, &s.user).await;
    assert_eq!(r.data()["status"], "executed");
    assert_eq!(r.data()["result"]["deleted"], 0);
    assert!(detail(&s.confirm(&b, &s.user).await).contains("executed"));

    // Expire by the clock (15 minutes by default).
    let c = s
        .propose("delete_document", json!({"document_id": "x"}), &s.user)
        .await;
    s.clock.advance(Duration::from_secs(14 * 60));
    assert_eq!(pending(&s.user).await.len(), 1);
    s.clock.advance(Duration::from_secs(61));
    assert!(
        pending(&s.user).await.is_empty(),
        "expired actions are not listed"
    );
    let r = s.confirm(&c, &s.user).await;
    r.error(409);
    assert!(detail(&r).contains("expired"), "{}", r.body);
    s.op(
        Method::POST,
        "reject_action",
        json!({"action_id": c}),
        &s.user,
    )
    .await
    .error(409);

    // Confirming runs the tool: a failing one leaves the action failed.
    let d = s
        .propose(
            "delete_document",
            json!({"document_id": "missing"}),
            &s.user,
        )
        .await;
    let r = s.confirm(&d, &s.user).await;
    let data = r.data();
    assert_eq!(
        data["status"], "executed",
        "deleting a missing document reports not_found: {data}"
    );
    s.confirm("no-such-action", &s.user).await.error(404);
    s.op(Method::POST, "confirm_action", json!({}), &s.user)
        .await
        .error(400);
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_executions_are_rate_limited() {
    let s = setup(50).await;
    for i in 0..50 {
        let r = s
            .exec(
                "calculate",
                json!({"expression": format!("{i} + 1")}),
                &s.user,
            )
            .await;
        assert_eq!(r.data()["result"]["result"], i + 1);
        if i == 0 {
            assert_eq!(r.header("x-ratelimit-limit").as_deref(), Some("50"));
            assert_eq!(r.header("x-ratelimit-remaining").as_deref(), Some("49"));
            assert!(r.header("x-ratelimit-reset").is_some());
        }
    }
    let r = s
        .exec("calculate", json!({"expression": "1"}), &s.user)
        .await;
    assert_eq!(r.error(429), "RateLimitExceededError");
    assert!(r.header("retry-after").is_some());
    // confirm_action is in the same budget; other users have their own.
    s.op(
        Method::POST,
        "confirm_action",
        json!({"action_id": "x"}),
        &s.user,
    )
    .await
    .error(429);
    let r = s
        .exec("calculate", json!({"expression": "1"}), &s.other)
        .await;
    r.data();
    // Listing tools is not a tool execution.
    s.op(Method::GET, "get_available_tools", json!({}), &s.user)
        .await
        .data();
    // A new window opens a minute later.
    s.clock.advance(Duration::from_secs(61));
    s.exec("calculate", json!({"expression": "1"}), &s.user)
        .await
        .data();
    s.server.stop().await;
}
