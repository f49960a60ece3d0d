//! Unit tests of the registry: the tool list of DECISIONS.md, listing and validation.

use serde_json::json;

use super::*;

fn user(is_admin: bool) -> CurrentUser {
    CurrentUser {
        id: "u".into(),
        email: "u@example.com".into(),
        is_admin,
    }
}

#[test]
fn every_decided_tool_is_registered_with_its_category_and_risk() {
    let r = ToolRegistry::new();
    let expect = [
        ("search_knowledge_base", "knowledge_base", "low"),
        ("ask_knowledge_base", "knowledge_base", "low"),
        ("list_documents", "knowledge_base", "low"),
        ("get_document", "knowledge_base", "low"),
        ("get_document_stats", "knowledge_base", "low"),
        ("list_sources", "knowledge_base", "low"),
        ("list_tasks", "knowledge_base", "low"),
        ("get_task", "knowledge_base", "low"),
        ("scrape_url", "knowledge_base", "medium"),
        ("upload_text", "knowledge_base", "medium"),
        ("delete_document", "knowledge_base", "high"),
        ("delete_source", "knowledge_base", "high"),
        ("delete_by_filter", "knowledge_base", "high"),
        ("search_conversations", "conversations", "low"),
        ("list_conversations", "conversations", "low"),
        ("get_current_datetime", "system", "low"),
        ("calculate", "system", "low"),
        ("update_setting", "system", "high"),
    ];
    let all = r.list(None, true, &user(true)).unwrap();
    assert_eq!(all.len(), expect.len());
    for (name, cat, risk) in expect {
        let t = all.iter().find(|t| t.tool_name == name).expect(name);
        let v = serde_json::to_value(t).unwrap();
        assert_eq!(
            (v["category"].as_str(), v["risk"].as_str()),
            (Some(cat), Some(risk)),
            "{name}"
        );
        assert_eq!(v["schema"]["type"], "object", "{name}");
        assert_eq!(t.requires_confirmation, risk == "high");
    }
    assert!(r.get("update_setting").unwrap().admin_only);
}

#[test]
fn listing_filters_and_hides_admin_tools() {
    let r = ToolRegistry::new();
    let plain = r.list(None, false, &user(false)).unwrap();
    assert!(plain
        .iter()
        .all(|t| t.tool_name != "update_setting" && t.schema.is_none()));
    let conv = r.list(Some("conversations"), false, &user(false)).unwrap();
    assert_eq!(conv.len(), 2);
    assert!(matches!(
        r.list(Some("weather"), false, &user(false)),
        Err(AssistantError::BadRequest(_))
    ));
}

#[test]
fn validation_names_fields_and_unknown_tools_are_404() {
    let r = ToolRegistry::new();
    assert!(matches!(
        r.validate("nope", &json!({})),
        Err(AssistantError::NotFound(_))
    ));
    let err = r
        .validate("search_knowledge_base", &json!({"top_k": 5}))
        .unwrap_err();
    assert_eq!(err.to_string(), "params.query is required");
    let err = r
        .validate(
            "search_knowledge_base",
            &json!({"query": "x", "top_k": 500}),
        )
        .unwrap_err();
    assert_eq!(err.to_string(), "params.top_k must be at most 50");
    let err = r
        .validate("list_tasks", &json!({"status": "done"}))
        .unwrap_err();
    assert!(err.to_string().contains("params.status must be one of"));
    let err = r
        .validate("update_setting", &json!({"key": "colour", "value": 1}))
        .unwrap_err();
    assert!(err.to_string().contains("params.key"));
    assert_eq!(
        r.validate("list_sources", &serde_json::Value::Null)
            .unwrap(),
        json!({})
    );
    assert!(r.validate("list_sources", &json!({"x": 1})).is_err());
    assert!(ToolRegistry::check_allowed(r.get("update_setting").unwrap(), &user(false)).is_err());
}
