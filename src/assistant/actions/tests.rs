//! Unit tests of the pending-action lifecycle over a temp store.

use std::time::Duration;

use serde_json::json;

use super::*;

async fn setup() -> (tempfile::TempDir, Actions, Clock, String) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("ragd.sqlite")).unwrap();
    let clock = Clock::default();
    let users = crate::assistant::users::Users::new(store.clone(), clock.clone(), None);
    let new = crate::assistant::users::NewUser {
        email: "a@example.com".into(),
        ..Default::default()
    };
    let uid = users.create(new).await.unwrap().user.id;
    let actions = Actions::open(store, clock.clone(), 900).unwrap();
    (dir, actions, clock, uid)
}

#[tokio::test(flavor = "multi_thread")]
async fn pending_then_decided_once() {
    let (_d, a, _clock, uid) = setup().await;
    let p = a
        .propose(&uid, "delete_source", &json!({"source": "x"}))
        .await
        .unwrap();
    assert_eq!(a.list_pending(&uid).await.unwrap().count, 1);
    assert!(matches!(
        a.get("someone-else", &p.action_id).await,
        Err(AssistantError::NotFound(_))
    ));
    assert!(matches!(
        a.decide("someone-else", &p.action_id, "executing", None)
            .await,
        Err(AssistantError::NotFound(_))
    ));
    let row = a
        .decide(&uid, &p.action_id, "executing", None)
        .await
        .unwrap();
    assert_eq!(row.status, "executing");
    assert!(matches!(
        a.decide(&uid, &p.action_id, "executing", None).await,
        Err(AssistantError::Conflict(_))
    ));
    a.finish(&p.action_id, Ok(json!({"deleted": 3})))
        .await
        .unwrap();
    let done = a.get(&uid, &p.action_id).await.unwrap();
    assert_eq!(done.status, "executed");
    assert_eq!(done.result, Some(json!({"deleted": 3})));
    assert_eq!(a.list_pending(&uid).await.unwrap().count, 0);

    let q = a
        .propose(&uid, "delete_source", &json!({"source": "y"}))
        .await
        .unwrap();
    let r = a
        .decide(&uid, &q.action_id, "rejected", Some("not now".into()))
        .await
        .unwrap();
    assert_eq!(
        (r.status.as_str(), r.reason.as_deref()),
        ("rejected", Some("not now"))
    );
    assert!(matches!(
        a.decide(&uid, &q.action_id, "executing", None).await,
        Err(AssistantError::Conflict(_))
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn expires_by_the_clock() {
    let (_d, a, clock, uid) = setup().await;
    let p = a
        .propose(&uid, "delete_source", &json!({"source": "x"}))
        .await
        .unwrap();
    clock.advance(Duration::from_secs(899));
    assert_eq!(a.list_pending(&uid).await.unwrap().count, 1);
    clock.advance(Duration::from_secs(2));
    assert_eq!(a.list_pending(&uid).await.unwrap().count, 0);
    assert_eq!(a.get(&uid, &p.action_id).await.unwrap().status, "expired");
    let err = a
        .decide(&uid, &p.action_id, "executing", None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, AssistantError::Conflict(ref m) if m.contains("expired")),
        "{err}"
    );
}
