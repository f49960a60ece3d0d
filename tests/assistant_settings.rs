//! `get_settings` (admin only, secrets masked) versus `get_config` (guests, client-safe),
//! and the settings service's per-key validation.

mod common;

use std::sync::Arc;

use common::{create_user, test_config, Auth, TestServer};
use ragd::assistant::settings::Settings;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn config_is_open_settings_are_admin_only_and_masked() {
    let tmp = tempfile::tempdir().unwrap();
    let admin = create_user(tmp.path(), "admin@example.com", "password1", true).await;
    let user = create_user(tmp.path(), "user@example.com", "password2", false).await;
    let mut config = test_config(tmp.path());
    config.jwt_secret = Some("super-secret-jwt-value".into());
    config.api_keys = vec!["kb-api-key-0123456789".into()];
    let server = TestServer::start_with(config).await;

    // Guests (GET or POST) get the client-safe subset.
    for method in [Method::GET, Method::POST] {
        let r = server
            .call(method, "assistant.api.get_config", &json!({}), &Auth::None)
            .await;
        let d = r.data();
        assert_eq!(d["authenticated"], false);
        assert_eq!(d["rate_limits"]["chat"], 100);
        assert_eq!(d["rate_limits"]["tools"], 50);
        assert_eq!(d["primary_language"], "en");
        assert!(d["enabled_modules"].is_array());
        assert!(d["answer_mode"].is_string() && d["llm_available"].is_boolean());
        assert!(d["version"].is_string());
        let text = r.body.to_string();
        assert!(!text.contains("super-secret") && !text.contains("kb-api-key"));
        assert!(d.get("system_prompt").is_none() && d.get("server").is_none());
    }
    let r = server
        .call(
            Method::GET,
            "assistant.api.get_config",
            &json!({}),
            &Auth::Token(user.clone()),
        )
        .await;
    assert_eq!(r.data()["authenticated"], true);

    // Settings: 401 for guests, 403 for users, masked for admins.
    let r = server
        .call(
            Method::GET,
            "assistant.api.get_settings",
            &json!({}),
            &Auth::None,
        )
        .await;
    assert_eq!(r.error(401), "AuthenticationError");
    let r = server
        .call(
            Method::GET,
            "assistant.api.get_settings",
            &json!({}),
            &Auth::Token(user),
        )
        .await;
    assert_eq!(r.error(403), "PermissionError");
    let r = server
        .call(
            Method::GET,
            "assistant.api.get_settings",
            &json!({}),
            &Auth::Token(admin),
        )
        .await;
    let d = r.data();
    assert_eq!(d["settings"]["require_confirmation_for_high_risk"], true);
    assert_eq!(d["server"]["bearer_tokens_enabled"], true);
    assert_eq!(d["server"]["jwt_secret"], "supe********");
    assert_eq!(d["server"]["api_keys"][0], "kb-a********");
    let text = r.body.to_string();
    assert!(!text.contains("super-secret-jwt-value") && !text.contains("kb-api-key-0123456789"));
}

#[tokio::test]
async fn updates_are_validated_per_key_and_visible_in_config() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path()).unwrap();
    let config = test_config(tmp.path());
    let store = ragd::store::Store::open(&tmp.path().join("ragd.sqlite")).unwrap();
    let settings = Settings::new(
        store,
        Arc::new(config.clone()),
        ragd::time::Clock::default(),
    );

    let s = settings
        .update("company_name", json!(" Acme "))
        .await
        .unwrap();
    assert_eq!(s.company_name, "Acme");
    settings
        .update("primary_language", json!("AR"))
        .await
        .unwrap();
    settings
        .update("assistant_tone", json!("friendly"))
        .await
        .unwrap();
    for (k, v) in [
        ("primary_language", json!("klingon")),
        ("assistant_tone", json!("angry")),
        ("enabled_modules", json!(["nope"])),
        ("enabled_modules", json!("knowledge_base")),
        ("knowledge_sources", json!(["file:///etc/passwd"])),
        ("require_confirmation_for_high_risk", json!(false)),
        ("company_name", json!(42)),
        ("no_such_key", json!(1)),
    ] {
        let e = settings.update(k, v.clone()).await.unwrap_err();
        assert!(
            matches!(e, ragd::assistant::AssistantError::BadRequest(_)),
            "{k}={v}: {e:?}"
        );
    }
    let s = settings.get().await.unwrap();
    assert_eq!(
        (s.primary_language.as_str(), s.assistant_tone.as_str()),
        ("ar", "friendly")
    );

    let server = TestServer::start_with(config).await;
    let r = server
        .call(
            Method::GET,
            "assistant.api.get_config",
            &json!({}),
            &Auth::None,
        )
        .await;
    let d = r.data();
    assert_eq!(d["company_name"], "Acme");
    assert_eq!(d["primary_language"], "ar");
    assert_eq!(d["assistant_tone"], "friendly");
}
