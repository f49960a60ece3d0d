//! Unit tests of the conversation service over a temp store and index.

use super::*;

fn open(dir: &Path, clock: &Clock) -> Conversations {
    let store = Store::open(&dir.join("ragd.sqlite")).unwrap();
    Conversations::open(store, dir, clock.clone(), 30).unwrap()
}

/// Creates a user (conversations reference `users`) and returns its id.
pub(crate) async fn user(c: &Conversations, email: &str) -> String {
    let users = crate::assistant::users::Users::new(c.store.clone(), c.clock.clone(), None);
    let new = crate::assistant::users::NewUser {
        email: email.into(),
        ..Default::default()
    };
    users.create(new).await.unwrap().user.id
}

#[tokio::test(flavor = "multi_thread")]
async fn create_append_history_search_delete_purge() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::default();
    let c = open(dir.path(), &clock);
    let alice = user(&c, "alice@example.com").await;
    let bob = user(&c, "bob@example.com").await;
    let (alice, bob) = (alice.as_str(), bob.as_str());

    let conv = c.create(alice, None).await.unwrap();
    assert_eq!(conv.title, DEFAULT_TITLE);
    c.append(
        alice,
        &conv.conversation_id,
        NewMessage::text(Role::User, "How do I calibrate the torque wrench?"),
    )
    .await
    .unwrap();
    let m2 = c
        .append(
            alice,
            &conv.conversation_id,
            NewMessage::text(Role::Assistant, "Use the calibration rig."),
        )
        .await
        .unwrap();
    let h = c
        .history(alice, &conv.conversation_id, None, None)
        .await
        .unwrap();
    assert_eq!(h.title, "How do I calibrate the torque wrench?");
    assert_eq!(h.total, 2);
    assert_eq!(h.messages[1].message_id, m2.message_id);
    let h = c
        .history(alice, &conv.conversation_id, Some(1), Some(1))
        .await
        .unwrap();
    assert_eq!(h.messages.len(), 1);
    assert_eq!(h.messages[0].role, "assistant");
    c.append(
        alice,
        &conv.conversation_id,
        NewMessage::text(Role::Tool, "{\"wrench_count\": 3}"),
    )
    .await
    .unwrap();
    let recent = c.recent(alice, &conv.conversation_id, 2).await.unwrap();
    assert_eq!(recent.len(), 2);
    assert_eq!(
        (recent[0].role.as_str(), recent[1].role.as_str()),
        ("assistant", "tool")
    );

    // Another user sees nothing.
    assert!(matches!(
        c.history(bob, &conv.conversation_id, None, None).await,
        Err(AssistantError::NotFound(_))
    ));
    assert_eq!(c.search(bob, "wrench", None, None).await.unwrap().total, 0);

    let found = c.search(alice, "wrenches", None, None).await.unwrap();
    assert!(found.total >= 1, "{found:?}");
    assert!(found.results.iter().any(|r| r.snippet.contains("wrench")));
    // Tool outputs are stored but not searched.
    assert!(found
        .results
        .iter()
        .all(|r| !r.snippet.contains("wrench_count")));

    c.delete(alice, &conv.conversation_id).await.unwrap();
    assert_eq!(
        c.search(alice, "wrench", None, None).await.unwrap().total,
        0
    );
    assert!(matches!(
        c.delete(alice, &conv.conversation_id).await,
        Err(AssistantError::NotFound(_))
    ));
    let deleted = ListQuery {
        status: Some("Deleted".into()),
        ..Default::default()
    };
    assert_eq!(c.list(alice, deleted.clone()).await.unwrap().total, 1);

    clock.advance(Duration::from_secs(29 * 86400));
    assert_eq!(c.purge_expired().await.unwrap(), 0);
    clock.advance(Duration::from_secs(2 * 86400));
    // The lazy sweep in `list` purges it.
    assert_eq!(c.list(alice, deleted).await.unwrap().total, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn list_pages_and_validates() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::default();
    let c = open(dir.path(), &clock);
    let u = user(&c, "u@example.com").await;
    let u = u.as_str();
    for i in 0..25 {
        c.create(u, Some(format!("t{i}"))).await.unwrap();
        clock.advance(Duration::from_millis(5));
    }
    let p = c.list(u, ListQuery::default()).await.unwrap();
    assert_eq!((p.page, p.page_size, p.total, p.pages), (1, 20, 25, 2));
    assert_eq!(p.conversations[0].title, "t24");
    let p2 = c
        .list(
            u,
            ListQuery {
                page: Some(2),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(p2.conversations.len(), 5);
    for bad in [
        ListQuery {
            page_size: Some(0),
            ..Default::default()
        },
        ListQuery {
            page_size: Some(101),
            ..Default::default()
        },
        ListQuery {
            status: Some("Archived".into()),
            ..Default::default()
        },
    ] {
        assert!(matches!(
            c.list(u, bad).await,
            Err(AssistantError::BadRequest(_))
        ));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn index_is_rebuilt_when_missing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::default();
    let (u, id) = {
        let c = open(dir.path(), &clock);
        let u = user(&c, "u@example.com").await;
        let conv = c.create(&u, Some("Budget".into())).await.unwrap();
        c.append(
            &u,
            &conv.conversation_id,
            NewMessage::text(Role::User, "zeppelin maintenance"),
        )
        .await
        .unwrap();
        (u, conv.conversation_id)
    };
    std::fs::remove_dir_all(dir.path().join("conversations_fulltext")).unwrap();
    let c = open(dir.path(), &clock);
    let found = c.search(&u, "zeppelin", None, None).await.unwrap();
    assert_eq!(found.results[0].conversation_id, id);
    assert_eq!(found.results[0].title, "Budget");
}
