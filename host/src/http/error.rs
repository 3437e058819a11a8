//! The error envelope (S-H3): `{"ok":false,"error":{"code","message"}}` with a fitting
//! status. Every error the HTTP surface returns goes through [`ApiError`]; handlers never
//! build error JSON by hand. [`ApiJson`] is the JSON body extractor whose rejections
//! (bad JSON, wrong content type, too large) use the envelope too.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;

/// Largest request body any route accepts unless it says otherwise.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// An error as clients see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable `snake_case` code.
    pub code: &'static str,
    /// What went wrong, for a person.
    pub message: String,
}

impl ApiError {
    /// An error with any status.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400: the request is malformed.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 403: refused by the request gate.
    pub fn forbidden(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, code, message)
    }

    /// 404: no such thing.
    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"ok": false, "error": {"code": self.code, "message": self.message}});
        (self.status, axum::Json(body)).into_response()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let status = rejection.status();
        let code = match status {
            StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            _ => "invalid_json",
        };
        let message = match status {
            StatusCode::PAYLOAD_TOO_LARGE => format!(
                "the request body is larger than {} KiB",
                MAX_BODY_BYTES / 1024
            ),
            _ => rejection.body_text(),
        };
        Self::new(status, code, message)
    }
}

/// A JSON request body whose rejections use the error envelope.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let axum::Json(value) = axum::Json::<T>::from_request(req, state).await?;
        Ok(Self(value))
    }
}

/// The fallback for unknown routes.
pub async fn unknown_route(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found("unknown_route", format!("no route for {}", uri.path()))
}

/// The response for a known path with an unsupported method.
pub async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not supported on {}", uri.path()),
    )
}
