//! Questions about tables are answered from rows that name their columns: the CSV
//! manager question ("Who manages the Lisbon office and how many people work there?")
//! is answered with "Marta Sousa" and "130" by the extractive answer, which quotes the
//! row as a sentence, not raw cells.

mod common;

use common::TestServer;
use serde_json::json;

const OFFICES: &str = "office,city,country,staff,manager,since
North,Oslo,Norway,42,Ola Nordmann,2019
South,Lisbon,Portugal,130,Marta Sousa,2015
East,Warsaw,Poland,87,Piotr Nowak,2017
West,Dublin,Ireland,64,Aoife Byrne,2020
Central,Vienna,Austria,55,Lena Huber,2012
";

const OTHER: &str = "# Travel policy\n\nEmployees book travel through the internal portal. \
Economy class is used for flights under six hours. Receipts are submitted within thirty days.\n";

async fn ask(s: &TestServer) -> serde_json::Value {
    let (st, r) = s
        .post_json(
            "/api/v1/query",
            &json!({"question": "Who manages the Lisbon office and how many people work there?"}),
        )
        .await;
    assert_eq!(st, 200, "{r}");
    r
}

async fn load(s: &TestServer) {
    for (name, text) in [("offices.csv", OFFICES), ("travel.md", OTHER)] {
        let (st, r) = s.upload(name, text.as_bytes()).await;
        assert_eq!(st, 200, "{r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_csv_manager_question_is_answered_from_its_row() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("data")).await;
    load(&s).await;
    let r = ask(&s).await;
    let answer = r["answer"].as_str().unwrap();
    assert!(
        answer.contains("Marta Sousa") && answer.contains("130"),
        "{r}"
    );
    assert!(answer.contains("manager: Marta Sousa"), "{answer}");
    assert!(!answer.contains(" | "), "raw cells: {answer}");
    assert_eq!(r["sources"][0]["source"], "offices.csv", "{r}");
    s.stop().await;
}
