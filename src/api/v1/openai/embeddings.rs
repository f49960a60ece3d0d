//! `POST /v1/embeddings`: text (a string or strings) or token ids (an array, or arrays)
//! embedded by ragd's embedder. Token ids are read as the embedder's own tokenizer's ids
//! and decoded to text first (ids the tokenizer does not have are refused). Vectors come
//! as floats or base64 of little-endian f32; `dimensions` must be the model's own.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{model_not_found, OaiCaller, OaiJson};
use crate::api::v1::openai_error::OpenAiError;
use crate::error::Error;
use crate::state::AppState;

/// Most inputs in one request.
pub const MAX_INPUTS: usize = 256;

/// The request body.
#[derive(Debug, Deserialize)]
pub struct EmbeddingsRequest {
    /// The embedder's id (`GET /v1/models`).
    pub model: String,
    /// A string, strings, token ids or arrays of token ids.
    pub input: Value,
    /// `float` (default) or `base64`.
    pub encoding_format: Option<String>,
    /// Must equal the model's dimension when given.
    pub dimensions: Option<u64>,
}

/// One input, as text or token ids.
enum Input {
    Text(String),
    Ids(Vec<u32>),
}

fn ids(v: &[Value]) -> Option<Vec<u32>> {
    v.iter()
        .map(|x| x.as_u64().and_then(|n| u32::try_from(n).ok()))
        .collect()
}

fn inputs(input: &Value) -> Result<Vec<Input>, OpenAiError> {
    let bad = || {
        OpenAiError::invalid(
            "input",
            "input must be a string, an array of strings, an array of token ids or an array of such arrays",
        )
    };
    let out = match input {
        Value::String(s) => vec![Input::Text(s.clone())],
        Value::Array(items) if items.is_empty() => {
            return Err(OpenAiError::invalid("input", "input must not be empty"))
        }
        Value::Array(items) if items.iter().all(Value::is_string) => items
            .iter()
            .map(|s| Input::Text(s.as_str().unwrap_or_default().to_owned()))
            .collect(),
        Value::Array(items) if items.iter().all(Value::is_number) => {
            vec![Input::Ids(ids(items).ok_or_else(bad)?)]
        }
        Value::Array(items) if items.iter().all(Value::is_array) => items
            .iter()
            .map(|a| {
                a.as_array()
                    .filter(|a| !a.is_empty())
                    .and_then(|a| ids(a))
                    .map(Input::Ids)
                    .ok_or_else(bad)
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(bad()),
    };
    if out.len() > MAX_INPUTS {
        return Err(OpenAiError::invalid(
            "input",
            format!("at most {MAX_INPUTS} inputs per request, got {}", out.len()),
        ));
    }
    Ok(out)
}

/// `POST /v1/embeddings`.
#[utoipa::path(
    post,
    path = "/v1/embeddings",
    tag = "openai",
    operation_id = "v1_embeddings",
    description = "OpenAI embeddings: input a string, strings or token arrays; encoding_format float or base64.",
    request_body(content = serde_json::Value, content_type = "application/json"),
    responses(
        (status = 200, description = "The response in OpenAI's shape", body = serde_json::Value),
        (status = 400, description = "Invalid request", body = serde_json::Value),
        (status = 401, description = "Missing or wrong key", body = serde_json::Value),
    ),
    security(("bearer" = [])),
)]
pub async fn embeddings(
    State(state): State<AppState>,
    OaiCaller(caller): OaiCaller,
    OaiJson(req): OaiJson<EmbeddingsRequest>,
) -> Result<Json<Value>, OpenAiError> {
    let embedder = state.models.embedder.clone();
    if req.model != embedder.name() {
        return Err(model_not_found(&req.model));
    }
    let base64 = match req.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(OpenAiError::invalid(
                "encoding_format",
                format!("encoding_format must be 'float' or 'base64', got '{other}'"),
            ))
        }
    };
    let dim = embedder.dim();
    if let Some(d) = req.dimensions {
        if d as usize != dim {
            return Err(OpenAiError::invalid(
                "dimensions",
                format!("{} makes {dim}-dimensional vectors and cannot shorten them; leave dimensions out or send {dim}", embedder.name()),
            ));
        }
    }
    let inputs = inputs(&req.input)?;
    let counter = embedder.token_counter().clone();
    let window = embedder.max_tokens();
    // Tokenizing is CPU work: off the runtime's threads.
    let (texts, tokens) = tokio::task::spawn_blocking(move || {
        let mut texts = Vec::with_capacity(inputs.len());
        let mut tokens = 0usize;
        for (i, input) in inputs.into_iter().enumerate() {
            let text = match input {
                Input::Text(t) => t,
                Input::Ids(ids) => counter.decode(&ids).map_err(|e| {
                    OpenAiError::invalid(
                        "input",
                        format!(
                            "input[{i}]: token ids the embedder's tokenizer cannot decode: {e}"
                        ),
                    )
                })?,
            };
            let n = counter.count(&text);
            if n > window {
                return Err(OpenAiError::invalid(
                    "input",
                    format!("input[{i}] is {n} tokens; the embedder reads at most {window}"),
                )
                .with_code("context_length_exceeded"));
            }
            tokens += n;
            texts.push(text);
        }
        Ok((texts, tokens))
    })
    .await
    .map_err(|e| OpenAiError::from(Error::from(e)))??;
    let count = texts.len();
    let vectors = embedder
        .embed(texts)
        .await
        .map_err(|e| OpenAiError::from(Error::from(e)))?;
    tracing::info!(caller = %caller.label(), inputs = count, tokens, base64, "embeddings");
    let data: Vec<Value> = vectors
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let embedding = if base64 {
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    if data.len() != count {
        return Err(OpenAiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the embedder returned a wrong number of vectors",
        ));
    }
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "model": embedder.name(),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    })))
}
