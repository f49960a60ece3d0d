//! `ragd ask` (a streamed answer with numbered sources) and `ragd search`, through a
//! running server.

use anyhow::Context as _;
use futures::StreamExt as _;
use serde_json::{json, Value};
use std::io::Write as _;

use super::client::Server;

/// `POST /api/v1/query` with `stream: true`: prints the answer as it arrives, then the
/// sources numbered as the answer cites them; `--json` prints the final response only.
pub async fn ask(
    server: &Server,
    question: &str,
    top_k: u64,
    json_out: bool,
) -> anyhow::Result<()> {
    let r = server
        .http
        .post(server.url("/api/v1/query"))
        .json(&json!({"question": question, "top_k": top_k, "stream": true}))
        .send()
        .await
        .with_context(|| server.unreachable())?;
    let r = server.check(r).await?;
    let mut body = r.bytes_stream();
    let mut buf = String::new();
    let mut done: Option<Value> = None;
    let mut out = std::io::stdout();
    'read: while let Some(chunk) = body.next().await {
        buf.push_str(&String::from_utf8_lossy(
            &chunk.context("the answer broke off")?,
        ));
        while let Some(end) = buf.find("\n\n") {
            let message: String = buf.drain(..end + 2).collect();
            let Some(data) = message.lines().find_map(|l| l.strip_prefix("data:")) else {
                continue;
            };
            let v: Value = serde_json::from_str(data.trim()).unwrap_or_default();
            match v["event"].as_str() {
                Some("token") if !json_out => {
                    print!("{}", v["delta"].as_str().unwrap_or(""));
                    out.flush()?;
                }
                Some("error") => anyhow::bail!(
                    "the server answered: {}",
                    v["detail"].as_str().unwrap_or("an error")
                ),
                Some("done") => {
                    done = Some(v);
                    break 'read;
                }
                _ => {}
            }
        }
    }
    let done = done.context("the answer ended before it was done")?;
    if json_out {
        println!("{}", serde_json::to_string_pretty(&done)?);
        return Ok(());
    }
    println!();
    print_sources(&done["sources"]);
    Ok(())
}

fn print_sources(sources: &Value) {
    let list = sources.as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        return;
    }
    println!("\nSources:");
    for (i, s) in list.iter().enumerate() {
        println!(
            "[{}] {} ({}{}) score {:.3}",
            i + 1,
            s["title"].as_str().unwrap_or(""),
            s["source"].as_str().unwrap_or(""),
            s["section"]
                .as_str()
                .filter(|x| !x.is_empty())
                .map(|x| format!(", {x}"))
                .unwrap_or_default(),
            s["score"].as_f64().unwrap_or(0.0)
        );
    }
}

/// `POST /api/v1/search`: the passages, numbered, with their sources and scores.
pub async fn search(
    server: &Server,
    query: &str,
    top_k: u64,
    json_out: bool,
) -> anyhow::Result<()> {
    let r = server
        .http
        .post(server.url("/api/v1/search"))
        .json(&json!({"query": query, "top_k": top_k}))
        .send()
        .await
        .with_context(|| server.unreachable())?;
    let v: Value = server.check(r).await?.json().await?;
    if json_out {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let results = v["results"].as_array().cloned().unwrap_or_default();
    if results.is_empty() {
        println!("no results");
    }
    for (i, r) in results.iter().enumerate() {
        println!(
            "[{}] {} (score {:.3})",
            i + 1,
            r["source"].as_str().unwrap_or(""),
            r["score"].as_f64().unwrap_or(0.0)
        );
        let text = r["text"].as_str().unwrap_or("").replace('\n', " ");
        let short: String = text.chars().take(300).collect();
        println!(
            "    {short}{}",
            if text.chars().count() > 300 {
                "…"
            } else {
                ""
            }
        );
    }
    Ok(())
}
