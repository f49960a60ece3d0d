//! The web page's settings screen in real headless Chromium: the installed LLM files with
//! why one cannot run, only runnable files offered, and a switch to another (the real
//! SmolLM2 file under a second name) that the screen shows after a reload. Screenshots go
//! to `target/web-screenshots/`.

mod common;

use std::path::Path;

use common::browser::{js, Browser, Page};
use common::{create_user, TestServer};
use ragd::config::Config;

const ADMIN: (&str, &str) = ("admin@example.com", "admin-password-1");
const SMOL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

fn config_on(data: &Path, models: &Path) -> Config {
    common::models_config(data, models, "old.gguf")
}

fn choose(p: &Page, value: &str) {
    p.eval(&format!(
        "(() => {{ const s = document.querySelector('#llm-model-select'); s.value = {}; \
         s.dispatchEvent(new Event('change')); return s.value; }})()",
        js(value)
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_settings_screen_lists_and_switches_models() {
    let tmp = tempfile::tempdir().unwrap();
    let models = tmp.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    let real = common::models_dir().join(SMOL);
    std::os::unix::fs::symlink(&real, models.join("old.gguf")).unwrap();
    std::os::unix::fs::symlink(&real, models.join("new.gguf")).unwrap();
    std::fs::write(models.join("broken.gguf"), b"not a model").unwrap();
    let data = tmp.path().join("data");
    create_user(&data, ADMIN.0, ADMIN.1, true).await;
    let server = TestServer::start_with(config_on(&data, &models)).await;
    let base = server.base.clone();
    tokio::task::spawn_blocking(move || {
        let browser = Browser::launch();
        let p = browser.page(1280, 1000);
        p.sign_in(&base, ADMIN.0, ADMIN.1);
        p.click("#top nav a[href='#/settings']");
        p.wait_for("#llm-models table tbody tr");
        let panel = p.text("#llm-models");
        assert!(panel.contains("old.gguf (active)"), "{panel}");
        assert!(
            panel.contains("cannot run") && panel.contains("not a readable GGUF"),
            "{panel}"
        );
        assert!(panel.contains("llama") && panel.contains("Q4_1"), "{panel}");
        // Only runnable files are offered.
        let options = p.eval(
            "[...document.querySelectorAll('#llm-model-select option')].map(o => o.value).join(',')",
        );
        assert_eq!(options, "new.gguf,old.gguf");
        p.screenshot_full("20-settings-models");

        choose(&p, "new.gguf");
        p.click("#llm-switch");
        p.wait(
            "document.querySelector('#llm-models .notice.ok')?.textContent.includes('Now answering')",
            "the switch to be confirmed",
        );
        let panel = p.text("#llm-models");
        assert!(panel.contains("new.gguf (active)"), "{panel}");
        assert!(!panel.contains("old.gguf (active)"), "{panel}");
        // The server panel names the new file without leaving the page.
        p.wait(
            "document.querySelector('#server-settings')?.textContent.includes('new.gguf')",
            "the server panel to name the new file",
        );
        p.screenshot_full("21-settings-model-switched");

        // Coming back shows the file now in use.
        p.click("#top nav a[href='#/documents']");
        p.click("#top nav a[href='#/settings']");
        p.wait(
            "document.querySelector('#health')?.textContent.includes('llm')",
            "the health panel",
        );
        p.wait_for("#llm-model-select");
        assert_eq!(p.eval("document.querySelector('#llm-model-select').value"), "new.gguf");
    })
    .await
    .unwrap();
    server.stop().await;
}
