//! The web page for people at `/`: sign-in, documents, ask, chat, onboarding and
//! settings, built on the two public APIs like any other client. Everything it loads is
//! compiled into the binary (`assets/web/`) and served from `/web/<file>`; its content
//! security policy lets it reach this server only.
//!
//! `/` answers browsers (an `Accept` that names `text/html`) with the page and every
//! other client with the service description as JSON, as it always has.

use std::sync::LazyLock;

use axum::extract::{Path, State};
use axum::http::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH, VARY};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::assistant::auth::MaybeUser;
use super::error::ApiError;
use crate::assistant::AssistantError;
use crate::state::AppState;

/// The page's shell; `{{BOOT}}` becomes the start-up data.
const INDEX_HTML: &str = include_str!("../../assets/web/index.html");

/// The page may load and call this server only: no CDN, no outside fonts, no frames.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; \
    base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// One embedded file of the page.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "app.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../../assets/web/app.css"),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/web/app.js"),
    },
    Asset {
        name: "api.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/web/api.js"),
    },
    Asset {
        name: "dom.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/web/dom.js"),
    },
    Asset {
        name: "documents.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/web/documents.js"),
    },
    Asset {
        name: "ask.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/web/ask.js"),
    },
    Asset {
        name: "chat.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/web/chat.js"),
    },
    Asset {
        name: "actions.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/web/actions.js"),
    },
    Asset {
        name: "setup.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/web/setup.js"),
    },
    Asset {
        name: "settings.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/web/settings.js"),
    },
    Asset {
        name: "markdown.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/web/markdown.js"),
    },
    Asset {
        name: "labels.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../assets/web/labels.js"),
    },
    Asset {
        name: "icon.svg",
        content_type: "image/svg+xml",
        body: include_str!("../../assets/web/icon.svg"),
    },
];

/// Each asset's entity tag (a hash of its bytes), so browsers revalidate cheaply and
/// never run a stale script after an upgrade.
static ETAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| {
            format!(
                "\"{}\"",
                &hex::encode(Sha256::digest(a.body.as_bytes()))[..16]
            )
        })
        .collect()
});

/// `/` and the page's files.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(root))
        .route("/web/{file}", get(asset))
}

/// Whether the client asked for HTML (a browser navigating), not JSON.
fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|media| media.trim().starts_with("text/html"))
}

/// What `/` has always answered to API clients.
fn service_description() -> Value {
    json!({
        "name": "ragd",
        "version": env!("CARGO_PKG_VERSION"),
        "web": "/",
        "docs": "/docs",
        "redoc": "/redoc",
        "openapi": "/openapi.json",
        "api": "/api/v1",
        "assistant_api": "/api/method/assistant.api.<operation>",
    })
}

async fn root(
    State(state): State<AppState>,
    headers: HeaderMap,
    user: Result<MaybeUser, AssistantError>,
) -> Response {
    let mut resp = if wants_html(&headers) {
        // An expired or unknown session is simply a signed-out visitor here.
        let user = user.ok().and_then(|u| u.0);
        page(&boot_data(&state, user.as_ref())).into_response()
    } else {
        Json(service_description()).into_response()
    };
    resp.headers_mut()
        .insert(VARY, HeaderValue::from_static("Accept, Cookie"));
    resp
}

/// What the page needs before its first request: who is signed in (never a secret).
fn boot_data(state: &AppState, user: Option<&crate::assistant::users::CurrentUser>) -> Value {
    json!({
        "user": user.map(|u| json!({"email": u.email, "is_admin": u.is_admin})),
        "max_upload_bytes": state.config.max_upload_bytes,
    })
}

fn page(boot: &Value) -> Response {
    // Inside <script type="application/json">: no `<` may close the element early.
    let boot = boot.to_string().replace('<', "\\u003c");
    let html = INDEX_HTML.replace("{{BOOT}}", &boot);
    let mut resp = (StatusCode::OK, html).into_response();
    let h = resp.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    // The page names the signed-in user: never cached.
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    resp
}

async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    let Some(i) = ASSETS.iter().position(|a| a.name == file) else {
        return ApiError::new(StatusCode::NOT_FOUND, format!("no file /web/{file}"))
            .into_response();
    };
    let (a, etag) = (&ASSETS[i], &ETAGS[i]);
    let fresh = headers
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut resp = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        a.body.into_response()
    };
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(a.content_type));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(ETAG, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn browsers_get_html_and_clients_json() {
        let mut h = HeaderMap::new();
        assert!(!wants_html(&h));
        h.insert(ACCEPT, HeaderValue::from_static("*/*"));
        assert!(!wants_html(&h));
        h.insert(ACCEPT, HeaderValue::from_static("application/json"));
        assert!(!wants_html(&h));
        h.insert(
            ACCEPT,
            HeaderValue::from_static("text/html,application/xhtml+xml,*/*;q=0.8"),
        );
        assert!(wants_html(&h));
    }

    #[test]
    fn the_shell_names_only_embedded_files() {
        assert!(INDEX_HTML.contains("{{BOOT}}"));
        for src in INDEX_HTML.split("\"/web/").skip(1) {
            let name = src.split('"').next().unwrap_or_default();
            assert!(
                ASSETS.iter().any(|a| a.name == name),
                "index.html names /web/{name}, which is not embedded"
            );
        }
        // Every script module imports only embedded siblings.
        for a in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            for part in a.body.split("from './").skip(1) {
                let name = part.split('\'').next().unwrap_or_default();
                assert!(
                    ASSETS.iter().any(|x| x.name == name),
                    "{} imports ./{name}, which is not embedded",
                    a.name
                );
            }
            assert!(!a.body.contains("http://") && !a.body.contains("https://"));
        }
    }
}
