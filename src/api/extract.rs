//! JSON, query and path extractors whose rejections use the contract's error body
//! (axum's own answer 400/415/422 in plain text). Handlers of `/api/v1` use only these.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// `Json<T>` with our error body: 400 for malformed or mistyped JSON, 413 if too large.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Self(v)),
            Err(rej) => Err(json_rejection(rej)),
        }
    }
}

/// A JSON body's rejection in the contract's error body (other surfaces convert it).
pub(crate) fn json_rejection(rej: JsonRejection) -> ApiError {
    let status = rej.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::new(status, "the request body is too large");
    }
    let detail = match &rej {
        JsonRejection::MissingJsonContentType(_) => {
            "expected a JSON body with 'Content-Type: application/json'".into()
        }
        JsonRejection::JsonSyntaxError(_) => format!("malformed JSON: {}", rej.body_text()),
        JsonRejection::JsonDataError(_) => format!("invalid request body: {}", rej.body_text()),
        _ => rej.body_text(),
    };
    ApiError::bad_request(detail)
}

/// `Query<T>` with our error body (400).
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(Self(v)),
            Err(rej) => Err(query_rejection(rej)),
        }
    }
}

fn query_rejection(rej: QueryRejection) -> ApiError {
    ApiError::bad_request(format!("invalid query parameters: {}", rej.body_text()))
}

/// `Path<T>` with our error body (400), e.g. for a segment that is not valid UTF-8
/// once percent-decoded.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(Self(v)),
            Err(rej) => Err(path_rejection(rej)),
        }
    }
}

fn path_rejection(rej: PathRejection) -> ApiError {
    if rej.status().is_server_error() {
        // A route whose pattern does not match its extractor: ours to fix, not the client's.
        return ApiError::from(crate::error::Error::Internal(anyhow::anyhow!(
            "path extraction: {}",
            rej.body_text()
        )));
    }
    ApiError::bad_request(format!("invalid path: {}", rej.body_text()))
}

/// Checks `lo <= v <= hi` for a named parameter.
pub fn check_range<T: PartialOrd + std::fmt::Display>(
    name: &str,
    v: T,
    lo: T,
    hi: T,
) -> Result<T, ApiError> {
    if v < lo || v > hi {
        return Err(ApiError::bad_request(format!(
            "{name} must be between {lo} and {hi}, got {v}"
        )));
    }
    Ok(v)
}
