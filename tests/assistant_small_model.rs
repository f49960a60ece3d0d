//! The assistant on the real SmolLM2-135M-Instruct file at default settings, as a new
//! user meets it: the tool is chosen without the model volunteering a call (the time,
//! a delete held for confirmation with the data still there, a knowledge-base question
//! answered from the handbook with citations), and `/query` answers only what the
//! sources say, with the per-sentence check exposed in `grounding`.

mod common;

use common::{create_user, test_config, Auth, TestServer};
use ragd::config::Config;

fn smollm2_config(data: &std::path::Path) -> Config {
    Config {
        // The server's default LLM: the SmolLM2 file in models/.
        llm_model: Config::default().llm_model,
        ..test_config(data)
    }
}

#[tokio::test]
async fn smollm2_picks_tools_holds_deletes_and_answers_from_the_sources() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let auth = Auth::Token(create_user(&data, "user@example.com", "password1", false).await);
    let server = TestServer::start_with(smollm2_config(&data)).await;
    common::scenarios::small_model_assistant(&server, &auth, "smollm2").await;
    server.stop().await;
}
