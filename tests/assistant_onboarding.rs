//! Onboarding from start to `completed` (every validation error, 409 outside review,
//! another user's session is 404), by an administrator and by a plain user (who applied
//! which settings is recorded), and the chat-scope rate limit these operations share.

mod common;

use std::time::Duration;

use common::{create_user, test_config, Auth, Reply, TestServer};
use reqwest::Method;
use serde_json::{json, Value};

async fn op(server: &TestServer, name: &str, params: Value, auth: &Auth) -> Reply {
    server
        .call(
            Method::POST,
            &format!("assistant.api.{name}"),
            &params,
            auth,
        )
        .await
}

async fn answer(server: &TestServer, auth: &Auth, sid: &str, key: &str, answer: Value) -> Reply {
    op(
        server,
        "submit_onboarding_answer",
        json!({"session_id": sid, "question_key": key, "answer": answer}),
        auth,
    )
    .await
}

#[tokio::test]
async fn onboarding_start_to_completed() {
    let tmp = tempfile::tempdir().unwrap();
    let admin = Auth::Token(create_user(tmp.path(), "admin@example.com", "password1", true).await);
    let other = Auth::Token(create_user(tmp.path(), "other@example.com", "password2", true).await);
    let server = TestServer::start(tmp.path()).await;

    let r = op(
        &server,
        "start_onboarding",
        json!({"modules": ["bogus"]}),
        &admin,
    )
    .await;
    assert_eq!(r.error(400), "ValidationError");

    // Pre-filled answers are skipped.
    let r = op(
        &server,
        "start_onboarding",
        json!({"company_name": "Acme Corp", "modules": ["knowledge_base", "system"]}),
        &admin,
    )
    .await;
    let d = r.data().clone();
    let sid = d["session_id"].as_str().unwrap().to_owned();
    assert_eq!(d["status"], "in_progress");
    assert_eq!(d["question"]["key"], "industry");
    assert_eq!(d["question"]["type"], "choice");
    assert!(d["question"]["options"].as_array().unwrap().len() > 2);
    assert_eq!(d["progress"]["answered"], 2);
    assert_eq!(d["prefilled"], json!(["modules", "company_name"]));
    assert!(r.header("x-ratelimit-limit").is_some());

    // Executing before review is a conflict.
    let r = op(
        &server,
        "execute_onboarding_configuration",
        json!({"session_id": sid}),
        &admin,
    )
    .await;
    assert_eq!(r.error(409), "ConflictError");

    // Every validation error names the reason.
    let invalid = [
        ("industry", json!("astrology"), "not one of"),
        ("industry", json!(null), "answer"),
        ("industry", json!(""), "needs an answer"),
        ("company_name", json!("A"), "at least 2"),
        ("company_name", json!("<script>"), "not allowed"),
        ("company_name", json!("x".repeat(101)), "at most 100"),
        ("modules", json!([]), "needs an answer"),
        ("modules", json!(["knowledge_base", "bogus"]), "not one of"),
        ("primary_language", json!("xx"), "not one of"),
        (
            "knowledge_sources",
            json!(["ftp://example.com/file"]),
            "http",
        ),
        ("knowledge_sources", json!(["not a url"]), "invalid URL"),
        ("assistant_tone", json!(5), "not one of"),
        ("assistant_tone", json!(["friendly"]), "one option"),
        ("confirm_high_risk", json!(false), "high-risk"),
        ("confirm_high_risk", json!("maybe"), "true or false"),
        ("system_prompt", json!("y".repeat(4001)), "at most 4000"),
        ("no_such_question", json!("x"), "unknown question_key"),
    ];
    for (key, value, reason) in invalid {
        let r = answer(&server, &admin, &sid, key, value.clone()).await;
        assert_eq!(r.error(400), "ValidationError", "{key}={value}");
        let detail = r.body["message"]["error"]["detail"].as_str().unwrap();
        assert!(detail.contains(reason), "{key}={value}: {detail}");
    }
    let r = op(
        &server,
        "submit_onboarding_answer",
        json!({"session_id": sid, "question_key": "industry"}),
        &admin,
    )
    .await;
    assert!(r.body["message"]["error"]["detail"]
        .as_str()
        .unwrap()
        .contains("answer"));
    r.error(400);
    let r = answer(
        &server,
        &admin,
        "no-such-session",
        "industry",
        json!("finance"),
    )
    .await;
    assert_eq!(r.error(404), "DoesNotExistError");

    // Answers by JSON, form (a JSON-encoded list) and query alike.
    let r = answer(&server, &admin, &sid, "industry", json!("Finance")).await;
    assert_eq!(r.data()["question"]["key"], "primary_language");
    let req = server
        .client
        .post(server.url("/api/method/assistant.api.submit_onboarding_answer"))
        .form(&[
            ("session_id", sid.as_str()),
            ("question_key", "primary_language"),
            ("answer", "ar"),
        ]);
    let r = server.send_reply(common::with_auth(req, &admin)).await;
    assert_eq!(r.data()["question"]["key"], "knowledge_sources");
    let req = server
        .client
        .post(server.url("/api/method/assistant.api.submit_onboarding_answer"))
        .query(&[
            ("session_id", sid.as_str()),
            ("question_key", "knowledge_sources"),
            (
                "answer",
                r#"["https://example.invalid/a","https://example.invalid/b"]"#,
            ),
        ]);
    let r = server.send_reply(common::with_auth(req, &admin)).await;
    assert_eq!(r.data()["question"]["key"], "assistant_tone");
    answer(&server, &admin, &sid, "assistant_tone", json!("friendly"))
        .await
        .data();
    let r = answer(&server, &admin, &sid, "confirm_high_risk", json!("true")).await;
    assert_eq!(r.data()["question"]["key"], "system_prompt");
    // The optional last question is skipped with an empty answer: review.
    let r = answer(&server, &admin, &sid, "system_prompt", json!("")).await;
    let d = r.data().clone();
    assert_eq!(d["status"], "review");
    assert!(d["question"].is_null());
    assert_eq!(d["progress"]["percent"], 100);
    let cfg = &d["configuration"];
    assert_eq!(cfg["settings"]["company_name"], "Acme Corp");
    assert_eq!(cfg["settings"]["industry"], "finance");
    assert_eq!(
        cfg["settings"]["enabled_modules"],
        json!(["knowledge_base", "system"])
    );
    assert_eq!(cfg["settings"]["require_confirmation_for_high_risk"], true);
    assert_eq!(cfg["scrape_urls"].as_array().unwrap().len(), 2);
    // Answers may still change in review.
    let r = answer(&server, &admin, &sid, "assistant_tone", json!("concise")).await;
    assert_eq!(
        r.data()["configuration"]["settings"]["assistant_tone"],
        "concise"
    );

    // Another user's session does not exist for them.
    for (name, params) in [
        ("get_onboarding_status", json!({"session_id": sid})),
        (
            "execute_onboarding_configuration",
            json!({"session_id": sid}),
        ),
        (
            "submit_onboarding_answer",
            json!({"session_id": sid, "question_key": "industry", "answer": "retail"}),
        ),
    ] {
        let r = op(&server, name, params, &other).await;
        assert_eq!(r.error(404), "DoesNotExistError", "{name}");
    }

    // Execute: settings applied, one scrape task per source.
    let r = op(
        &server,
        "execute_onboarding_configuration",
        json!({"session_id": sid}),
        &admin,
    )
    .await;
    let d = r.data().clone();
    assert_eq!(d["status"], "completed", "{d}");
    let tasks = d["result"]["scrape_tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    for t in tasks {
        let id = t["task_id"].as_str().unwrap();
        let (s, body) = server.get_json(&format!("/api/v1/tasks/{id}")).await;
        assert_eq!(s, 200, "{body}");
        assert_eq!(body["kind"], "scrape");
    }
    assert_eq!(
        d["result"]["enabled_modules"],
        json!(["knowledge_base", "system"])
    );
    let r = server
        .call(
            Method::GET,
            "assistant.api.get_config",
            &json!({}),
            &Auth::None,
        )
        .await;
    let c = r.data();
    assert_eq!(c["company_name"], "Acme Corp");
    assert_eq!(c["primary_language"], "ar");
    assert_eq!(c["assistant_tone"], "concise");
    assert_eq!(c["onboarding_completed"], true);

    // Done: nothing changes any more.
    let r = op(
        &server,
        "execute_onboarding_configuration",
        json!({"session_id": sid}),
        &admin,
    )
    .await;
    assert_eq!(r.error(409), "ConflictError");
    let r = answer(&server, &admin, &sid, "industry", json!("retail")).await;
    assert_eq!(r.error(409), "ConflictError");
    let r = server
        .call(
            Method::GET,
            "assistant.api.get_onboarding_status",
            &json!({"session_id": sid}),
            &admin,
        )
        .await;
    let d = r.data();
    assert_eq!(d["status"], "completed");
    assert_eq!(d["answers"]["industry"], "finance");
    assert!(d["answers"]["system_prompt"].is_null());
    assert_eq!(d["result"]["scrape_tasks"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_plain_user_onboards_their_own_session_and_is_recorded_as_applying_it() {
    let tmp = tempfile::tempdir().unwrap();
    let admin = Auth::Token(create_user(tmp.path(), "admin@example.com", "password1", true).await);
    let user = Auth::Token(create_user(tmp.path(), "user@example.com", "password3", false).await);
    let server = TestServer::start(tmp.path()).await;

    // Guests do not onboard.
    let r = op(&server, "start_onboarding", json!({}), &Auth::None).await;
    assert!(matches!(r.status, 401 | 403), "{}", r.body);

    let r = op(
        &server,
        "start_onboarding",
        json!({"company_name": "Plain Co", "modules": ["knowledge_base"]}),
        &user,
    )
    .await;
    let sid = r.data()["session_id"].as_str().unwrap().to_owned();
    // An administrator's session list is their own: this one does not exist for them.
    let r = op(
        &server,
        "get_onboarding_status",
        json!({"session_id": sid}),
        &admin,
    )
    .await;
    assert_eq!(r.error(404), "DoesNotExistError");
    for (key, value) in [
        ("industry", json!("retail")),
        ("primary_language", json!("en")),
        ("knowledge_sources", json!([])),
        ("assistant_tone", json!("friendly")),
        ("confirm_high_risk", json!("true")),
        ("system_prompt", json!("")),
    ] {
        answer(&server, &user, &sid, key, value).await.data();
    }
    let r = op(
        &server,
        "get_onboarding_status",
        json!({"session_id": sid}),
        &user,
    )
    .await;
    assert_eq!(r.data()["status"], "review", "{}", r.body);
    let r = op(
        &server,
        "execute_onboarding_configuration",
        json!({"session_id": sid}),
        &user,
    )
    .await;
    let d = r.data().clone();
    assert_eq!(d["status"], "completed", "{d}");
    assert_eq!(d["result"]["applied_by"]["email"], "user@example.com");
    assert!(d["result"]["applied_by"]["user_id"]
        .as_str()
        .is_some_and(|u| !u.is_empty()));
    let applied = d["result"]["settings"].as_array().unwrap();
    assert!(applied.contains(&json!("company_name")), "{applied:?}");
    assert!(d["result"]["scrape_tasks"].as_array().unwrap().is_empty());
    let r = server
        .call(
            Method::GET,
            "assistant.api.get_config",
            &json!({}),
            &Auth::None,
        )
        .await;
    assert_eq!(r.data()["company_name"], "Plain Co");
    assert_eq!(r.data()["onboarding_completed"], true);
    // The record stays with the session.
    let r = op(
        &server,
        "get_onboarding_status",
        json!({"session_id": sid}),
        &user,
    )
    .await;
    assert_eq!(
        r.data()["result"]["applied_by"]["email"],
        "user@example.com"
    );
    // The settings themselves stay an administrator's to read.
    let r = server
        .call(Method::GET, "assistant.api.get_settings", &json!({}), &user)
        .await;
    assert_eq!(r.error(403), "PermissionError");
}

#[tokio::test]
async fn chat_scope_rate_limit_per_user_and_window() {
    let tmp = tempfile::tempdir().unwrap();
    let admin = Auth::Token(create_user(tmp.path(), "admin@example.com", "password1", true).await);
    let other = Auth::Token(create_user(tmp.path(), "other@example.com", "password2", true).await);
    let config = test_config(tmp.path());
    let clock = ragd::time::Clock::default();
    let server = TestServer::start_with(ragd::AppState::builder(config).clock(clock.clone())).await;
    // Start at the beginning of a window, so the test never straddles two.
    let ms = clock.now().timestamp_millis().rem_euclid(60_000) as u64;
    clock.advance(Duration::from_millis(60_000 - ms + 10));

    let r = op(&server, "start_onboarding", json!({}), &admin).await;
    let sid = r.data()["session_id"].as_str().unwrap().to_owned();
    let status = json!({"session_id": sid});
    let reset: i64 = r.header("x-ratelimit-reset").unwrap().parse().unwrap();
    assert_eq!(reset % 60, 0);
    assert!(reset > clock.unix() && reset <= clock.unix() + 60);
    for i in 2..=100u32 {
        let r = server
            .call(
                Method::GET,
                "assistant.api.get_onboarding_status",
                &status,
                &admin,
            )
            .await;
        r.data();
        assert_eq!(r.header("x-ratelimit-limit").as_deref(), Some("100"));
        assert_eq!(
            r.header("x-ratelimit-remaining"),
            Some((100 - i).to_string())
        );
    }
    // The 101st in the window.
    let r = server
        .call(
            Method::GET,
            "assistant.api.get_onboarding_status",
            &status,
            &admin,
        )
        .await;
    assert_eq!(r.error(429), "RateLimitExceededError");
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry));
    assert_eq!(r.header("x-ratelimit-limit").as_deref(), Some("100"));
    assert_eq!(r.header("x-ratelimit-remaining").as_deref(), Some("0"));
    assert_eq!(r.header("x-ratelimit-reset"), Some(reset.to_string()));
    // Errors from the handler still carry the headers; other users have their own budget.
    let r = op(
        &server,
        "get_onboarding_status",
        json!({"session_id": "nope"}),
        &other,
    )
    .await;
    r.error(404);
    assert_eq!(r.header("x-ratelimit-remaining").as_deref(), Some("99"));
    // Guests are refused before counting.
    let r = op(
        &server,
        "get_onboarding_status",
        json!({"session_id": sid}),
        &Auth::None,
    )
    .await;
    r.error(401);

    clock.advance(Duration::from_secs(60));
    let r = server
        .call(
            Method::GET,
            "assistant.api.get_onboarding_status",
            &status,
            &admin,
        )
        .await;
    r.data();
    assert_eq!(r.header("x-ratelimit-remaining").as_deref(), Some("99"));
}
