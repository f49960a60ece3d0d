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

/// Every tool's schema as it was written by hand before the schemas were generated from
/// the params types (one `name schema` per line); the generated ones must not drift.
/// The `update_setting` keys and the `calculate` length come from their constants.
const SCHEMAS: &str = r#"
search_knowledge_base {"type":"object","properties":{"query":{"type":"string","description":"What to search for","minLength":1,"maxLength":1000},"top_k":{"type":"integer","description":"Results to return","minimum":1,"maximum":50,"default":5}},"required":["query"],"additionalProperties":false}
ask_knowledge_base {"type":"object","properties":{"question":{"type":"string","description":"The question to answer from the knowledge base","minLength":1,"maxLength":2000},"top_k":{"type":"integer","description":"Passages to answer from","minimum":1,"maximum":20,"default":5}},"required":["question"],"additionalProperties":false}
list_documents {"type":"object","properties":{"page":{"type":"integer","description":"Page, from 1","minimum":1,"maximum":1000000,"default":1},"page_size":{"type":"integer","description":"Documents per page","minimum":1,"maximum":100,"default":20}},"required":[],"additionalProperties":false}
get_document {"type":"object","properties":{"document_id":{"type":"string","description":"The document (chunk) id","minLength":1,"maxLength":200}},"required":["document_id"],"additionalProperties":false}
get_document_stats {"type":"object","properties":{},"required":[],"additionalProperties":false}
list_sources {"type":"object","properties":{},"required":[],"additionalProperties":false}
list_tasks {"type":"object","properties":{"status":{"type":"string","description":"Only tasks in this state","enum":["pending","running","completed","failed","cancelled"]},"limit":{"type":"integer","description":"Most tasks returned, newest first","minimum":1,"maximum":100,"default":20}},"required":[],"additionalProperties":false}
get_task {"type":"object","properties":{"task_id":{"type":"string","description":"The task id","minLength":1,"maxLength":100}},"required":["task_id"],"additionalProperties":false}
scrape_url {"type":"object","properties":{"url":{"type":"string","description":"An http(s) URL","minLength":1,"maxLength":2048},"timeout":{"type":"integer","description":"Seconds","minimum":5,"maximum":120,"default":30},"skip_duplicates":{"type":"boolean","description":"Skip a URL or content already stored","default":true}},"required":["url"],"additionalProperties":false}
upload_text {"type":"object","properties":{"title":{"type":"string","description":"Title; also names the source (as '<title>.txt')","minLength":1,"maxLength":200},"text":{"type":"string","description":"The text to add","minLength":1,"maxLength":1000000},"section":{"type":"string","description":"Section label","minLength":1,"maxLength":100,"default":"uploaded"}},"required":["title","text"],"additionalProperties":false}
delete_document {"type":"object","properties":{"document_id":{"type":"string","description":"The document (chunk) id","minLength":1,"maxLength":200}},"required":["document_id"],"additionalProperties":false}
delete_source {"type":"object","properties":{"source":{"type":"string","description":"The source (file name or URL)","minLength":1,"maxLength":2048}},"required":["source"],"additionalProperties":false}
delete_by_filter {"type":"object","properties":{"where":{"type":"object","description":"Metadata keys and values, AND-ed; a value may be {\"$in\": [..]} or {\"$ne\": v}; never empty","minProperties":1}},"required":["where"],"additionalProperties":false}
search_conversations {"type":"object","properties":{"query":{"type":"string","description":"Words to find in your conversations","minLength":1,"maxLength":1000},"page":{"type":"integer","description":"Page, from 1","minimum":1,"maximum":10000,"default":1},"page_size":{"type":"integer","description":"Results per page","minimum":1,"maximum":100,"default":20}},"required":["query"],"additionalProperties":false}
list_conversations {"type":"object","properties":{"page":{"type":"integer","description":"Page, from 1","minimum":1,"maximum":1000000,"default":1},"page_size":{"type":"integer","description":"Conversations per page","minimum":1,"maximum":100,"default":20},"status":{"type":"string","description":"Active or Deleted","enum":["Active","Deleted"],"default":"Active"}},"required":[],"additionalProperties":false}
get_current_datetime {"type":"object","properties":{"utc_offset_minutes":{"type":"integer","description":"Offset of the wanted local time from UTC, in minutes","minimum":-720,"maximum":840,"default":0}},"required":[],"additionalProperties":false}
calculate {"type":"object","properties":{"expression":{"type":"string","description":"Arithmetic: numbers, + - * / % ^, parentheses, sqrt abs round floor ceil ln log10 sin cos tan min max, pi, e","minLength":1,"maxLength":500}},"required":["expression"],"additionalProperties":false}
update_setting {"type":"object","properties":{"key":{"type":"string","description":"The setting","enum":["company_name","industry","enabled_modules","primary_language","assistant_tone","require_confirmation_for_high_risk","knowledge_sources","system_prompt","auto_execute_tools","onboarding_completed","llm_model"]},"value":{"description":"Its new value (checked per setting)"}},"required":["key","value"],"additionalProperties":false}
"#;

#[test]
fn schemas_match_the_snapshot() {
    let r = ToolRegistry::new();
    let listed = r.list(None, true, &user(true)).unwrap();
    let lines: Vec<&str> = SCHEMAS.trim().lines().collect();
    assert_eq!(listed.len(), lines.len());
    for line in lines {
        let (name, schema) = line.split_once(' ').unwrap();
        let mut expected: serde_json::Value = serde_json::from_str(schema).unwrap();
        match name {
            "update_setting" => {
                expected["properties"]["key"]["enum"] = json!(crate::assistant::settings::KEYS)
            }
            "calculate" => {
                expected["properties"]["expression"]["maxLength"] = json!(super::calc::MAX_LEN)
            }
            _ => {}
        }
        let got = listed.iter().find(|t| t.tool_name == name).expect(name);
        assert_eq!(got.schema.as_ref(), Some(&expected), "{name}");
    }
}
