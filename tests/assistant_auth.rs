//! Assistant API foundation: the envelope, parameters from JSON/form/query, the three
//! auth methods (401/403), first-run admin, the `ragd user` CLI.

mod common;

use std::time::Duration;

use common::{create_user, test_config, Auth, TestServer};
use reqwest::Method;
use serde_json::json;

const SETTINGS: &str = "assistant.api.get_settings";

fn read_initial_admin(dir: &std::path::Path) -> (String, String, String) {
    let text = std::fs::read_to_string(dir.join("initial-admin.txt")).unwrap();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("{name} missing in {text}"))
            .to_owned()
    };
    (
        field("email"),
        field("password"),
        format!("{}:{}", field("api_key"), field("api_secret")),
    )
}

#[tokio::test]
async fn initial_admin_is_written_once_with_mode_0600() {
    let tmp = tempfile::tempdir().unwrap();
    let server = TestServer::start(tmp.path()).await;
    let path = tmp.path().join("initial-admin.txt");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let (email, password, token) = read_initial_admin(tmp.path());
    assert_eq!(email, "admin@localhost");
    let r = server
        .call(
            Method::GET,
            SETTINGS,
            &json!({}),
            &Auth::Token(token.clone()),
        )
        .await;
    r.data();
    server.login(&email, &password).await;
    server.stop().await;

    // A restart neither rewrites the file nor, once it is deleted, recreates it.
    let before = std::fs::read_to_string(&path).unwrap();
    let server = TestServer::start(tmp.path()).await;
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
    server.stop().await;
    std::fs::remove_file(&path).unwrap();
    let server = TestServer::start(tmp.path()).await;
    assert!(!path.exists());
    let r = server
        .call(Method::GET, SETTINGS, &json!({}), &Auth::Token(token))
        .await;
    r.data();
}

#[tokio::test]
async fn no_initial_admin_when_users_exist() {
    let tmp = tempfile::tempdir().unwrap();
    create_user(tmp.path(), "first@example.com", "password1", false).await;
    let _server = TestServer::start(tmp.path()).await;
    assert!(!tmp.path().join("initial-admin.txt").exists());
}

#[tokio::test]
async fn api_key_auth_401_and_403() {
    let tmp = tempfile::tempdir().unwrap();
    let admin = create_user(tmp.path(), "admin@example.com", "password1", true).await;
    let user = create_user(tmp.path(), "user@example.com", "password2", false).await;
    let server = TestServer::start(tmp.path()).await;

    let r = server
        .call(
            Method::GET,
            SETTINGS,
            &json!({}),
            &Auth::Token(admin.clone()),
        )
        .await;
    let data = r.data();
    assert!(data["settings"].is_object(), "{data}");
    assert_eq!(
        r.body["message"]["tokens_used"],
        json!({"input": 0, "output": 0, "total": 0})
    );

    let r = server
        .call(Method::GET, SETTINGS, &json!({}), &Auth::Token(user))
        .await;
    assert_eq!(r.error(403), "PermissionError");
    let r = server
        .call(Method::GET, SETTINGS, &json!({}), &Auth::None)
        .await;
    assert_eq!(r.error(401), "AuthenticationError");
    let (key, _) = admin.split_once(':').unwrap();
    for bad in [format!("{key}:wrong"), key.to_owned(), "nope:nope".into()] {
        let r = server
            .call(Method::GET, SETTINGS, &json!({}), &Auth::Token(bad))
            .await;
        assert_eq!(r.error(401), "AuthenticationError");
    }
    let req = server
        .client
        .get(server.url(&format!("/api/method/{SETTINGS}")))
        .header("Authorization", "Basic abc");
    server.send_reply(req).await.error(401);
}

#[tokio::test]
async fn session_login_logout_with_json_form_and_query() {
    let tmp = tempfile::tempdir().unwrap();
    create_user(tmp.path(), "admin@example.com", "password1", true).await;
    let server = TestServer::start(tmp.path()).await;

    // JSON body.
    let sid = server.login("Admin@Example.com", "password1").await;
    let r = server
        .call(
            Method::GET,
            SETTINGS,
            &json!({}),
            &Auth::Session(sid.clone()),
        )
        .await;
    r.data();
    // Cookie attributes.
    let r = server
        .call(
            Method::POST,
            "login",
            &json!({"usr": "admin@example.com", "pwd": "password1"}),
            &Auth::None,
        )
        .await;
    let cookie = r.header("set-cookie").unwrap();
    for attr in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(cookie.contains(attr), "{cookie}");
    }
    // Form body.
    let req = server
        .client
        .post(server.url("/api/method/login"))
        .form(&[("usr", "admin@example.com"), ("pwd", "password1")]);
    let r = server.send_reply(req).await;
    assert_eq!(r.data()["user"]["email"], "admin@example.com");
    // Query string.
    let req = server
        .client
        .post(server.url("/api/method/login"))
        .query(&[("usr", "admin@example.com"), ("pwd", "password1")]);
    server.send_reply(req).await.data();

    // Wrong password, missing parameter, malformed JSON.
    let r = server
        .call(
            Method::POST,
            "login",
            &json!({"usr": "admin@example.com", "pwd": "nope"}),
            &Auth::None,
        )
        .await;
    assert_eq!(r.error(401), "AuthenticationError");
    let r = server
        .call(
            Method::POST,
            "login",
            &json!({"usr": "admin@example.com"}),
            &Auth::None,
        )
        .await;
    assert_eq!(r.error(400), "ValidationError");
    assert!(r.body["message"]["error"]["detail"]
        .as_str()
        .unwrap()
        .contains("pwd"));
    let req = server
        .client
        .post(server.url("/api/method/login"))
        .header("content-type", "application/json")
        .body("{not json");
    assert_eq!(server.send_reply(req).await.error(400), "ValidationError");

    // Logout ends the session.
    let req = common::with_auth(
        server.client.post(server.url("/api/method/logout")),
        &Auth::Session(sid.clone()),
    );
    let r = server.send_reply(req).await;
    assert_eq!(r.data()["logged_out"], true);
    let r = server
        .call(Method::GET, SETTINGS, &json!({}), &Auth::Session(sid))
        .await;
    assert_eq!(r.error(401), "AuthenticationError");
}

#[tokio::test]
async fn bearer_tokens() {
    use ragd::assistant::users::jwt::sign;
    let tmp = tempfile::tempdir().unwrap();
    create_user(tmp.path(), "admin@example.com", "password1", true).await;
    let mut config = test_config(tmp.path());
    config.jwt_secret = Some("test-secret".into());
    let clock = ragd::time::Clock::default();
    let server = TestServer::start_with(ragd::AppState::builder(config).clock(clock.clone())).await;
    let now = clock.unix();

    let good = sign(
        &json!({"sub": "admin@example.com", "exp": now + 120}),
        b"test-secret",
    );
    server
        .call(
            Method::GET,
            SETTINGS,
            &json!({}),
            &Auth::Bearer(good.clone()),
        )
        .await
        .data();

    let cases = [
        sign(
            &json!({"sub": "admin@example.com", "exp": now - 1}),
            b"test-secret",
        ),
        sign(
            &json!({"sub": "admin@example.com", "exp": now + 120}),
            b"other-secret",
        ),
        sign(&json!({"sub": "admin@example.com"}), b"test-secret"),
        sign(
            &json!({"sub": "ghost@example.com", "exp": now + 120}),
            b"test-secret",
        ),
        "not.a.jwt".into(),
    ];
    for t in cases {
        let r = server
            .call(Method::GET, SETTINGS, &json!({}), &Auth::Bearer(t))
            .await;
        assert_eq!(r.error(401), "AuthenticationError");
    }
    // The server clock decides expiry.
    clock.advance(Duration::from_secs(121));
    let r = server
        .call(Method::GET, SETTINGS, &json!({}), &Auth::Bearer(good))
        .await;
    assert!(r.body["message"]["error"]["detail"]
        .as_str()
        .unwrap()
        .contains("expired"));
    r.error(401);
}

#[tokio::test]
async fn bearer_tokens_off_without_secret() {
    use ragd::assistant::users::jwt::sign;
    let tmp = tempfile::tempdir().unwrap();
    create_user(tmp.path(), "admin@example.com", "password1", true).await;
    let server = TestServer::start(tmp.path()).await;
    let t = sign(
        &json!({"sub": "admin@example.com", "exp": i64::MAX / 2}),
        b"x",
    );
    server
        .call(Method::GET, SETTINGS, &json!({}), &Auth::Bearer(t))
        .await
        .error(401);
}

#[tokio::test]
async fn unknown_methods_and_verbs_use_the_envelope() {
    let tmp = tempfile::tempdir().unwrap();
    let server = TestServer::start(tmp.path()).await;
    let r = server
        .call(
            Method::GET,
            "assistant.api.no_such_thing",
            &json!({}),
            &Auth::None,
        )
        .await;
    assert_eq!(r.error(404), "DoesNotExistError");
    let r = server
        .call(Method::GET, "login", &json!({}), &Auth::None)
        .await;
    assert_eq!(r.error(405), "MethodNotAllowedError");
}

#[tokio::test]
async fn cli_user_commands() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_ragd");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(bin)
            .args(["user"])
            .args(args)
            .args(["--data-dir", tmp.path().to_str().unwrap()])
            .current_dir(tmp.path())
            .env_remove("RAGD_CONFIG")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, stdout, stderr) = run(&[
        "add",
        "cli@example.com",
        "--admin",
        "--password",
        "password1",
    ]);
    assert!(ok, "{stderr}");
    let last = stdout.lines().last().unwrap().to_owned();
    let (key, secret) = last.split_once(':').expect("key:secret on the last line");
    assert!(key.len() >= 16 && secret.len() >= 32, "{stdout}");
    assert!(!stdout.contains("password1"));

    let (ok, _, stderr) = run(&["add", "cli@example.com"]);
    assert!(!ok && stderr.contains("already exists"), "{stderr}");
    let (ok, stdout, _) = run(&["add", "plain@example.com"]);
    assert!(ok && stdout.contains("password: "), "{stdout}");
    let (ok, stdout, _) = run(&["list"]);
    assert!(
        ok && stdout.contains("cli@example.com\tadmin")
            && stdout.contains("plain@example.com\tuser"),
        "{stdout}"
    );

    let server = TestServer::start(tmp.path()).await;
    assert!(!tmp.path().join("initial-admin.txt").exists());
    server
        .call(
            Method::GET,
            SETTINGS,
            &json!({}),
            &Auth::Token(last.clone()),
        )
        .await
        .data();

    // reset-key: the old pair stops working, the new one works.
    let (ok, stdout, _) = run(&["reset-key", "cli@example.com"]);
    assert!(ok);
    let fresh = stdout.lines().last().unwrap().to_owned();
    server
        .call(Method::GET, SETTINGS, &json!({}), &Auth::Token(last))
        .await
        .error(401);
    server
        .call(
            Method::GET,
            SETTINGS,
            &json!({}),
            &Auth::Token(fresh.clone()),
        )
        .await
        .data();

    let (ok, _, _) = run(&["remove", "cli@example.com"]);
    assert!(ok);
    server
        .call(Method::GET, SETTINGS, &json!({}), &Auth::Token(fresh))
        .await
        .error(401);
    let (ok, _, stderr) = run(&["remove", "cli@example.com"]);
    assert!(!ok && stderr.contains("no user"), "{stderr}");
}
