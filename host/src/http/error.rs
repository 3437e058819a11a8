//! The error envelope: `{"ok":false,"error":{"code","message"}}` with a fitting
//! status. Every error the HTTP surface returns goes through [`ApiError`]; handlers never
//! build error JSON by hand. [`ApiJson`] and [`ObjectBody`] read JSON bodies so that
//! their rejections (bad JSON, wrong content type, too large) use the envelope too.

use std::borrow::Cow;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, JsonRejection};
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

/// Largest request body any route accepts unless it says otherwise.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// An error as clients see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable `snake_case` code.
    pub code: Cow<'static, str>,
    /// What went wrong, for a person.
    pub message: String,
    /// More, for programs (a faculty's failure `details`), when there is more.
    pub details: Option<Box<Value>>,
}

impl ApiError {
    /// An error with any status.
    pub fn new(status: StatusCode, code: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        Self { status, code: code.into(), message: message.into(), details: None }
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

    /// 500: the host itself failed.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
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
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(details) = self.details {
            error["details"] = *details;
        }
        let body = json!({"ok": false, "error": error});
        (self.status, axum::Json(body)).into_response()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        body_rejection(rejection.status(), rejection.body_text())
    }
}

impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> Self {
        match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => body_rejection(StatusCode::PAYLOAD_TOO_LARGE, String::new()),
            status => Self::new(
                status,
                "invalid_body",
                format!("the request body could not be read: {}", rejection.body_text()),
            ),
        }
    }
}

fn body_rejection(status: StatusCode, text: String) -> ApiError {
    let code = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        _ => "invalid_json",
    };
    let message = match status {
        StatusCode::PAYLOAD_TOO_LARGE => format!("the request body is larger than {} KiB", MAX_BODY_BYTES / 1024),
        _ => text,
    };
    ApiError::new(status, code, message)
}

/// A JSON request body (`Content-Type: application/json`, else 415), read strictly — a key
/// written twice is refused, since which one was meant cannot be known — whose rejections
/// use the error envelope.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(req.headers()) {
            return Err(not_json());
        }
        let bytes = Bytes::from_request(req, state).await?;
        let text =
            std::str::from_utf8(&bytes).map_err(|_| ApiError::bad_request("invalid_json", "the body is not UTF-8"))?;
        let value = crate::json::parse(text)
            .map_err(|e| ApiError::bad_request("invalid_json", format!("the body is not valid JSON: {e}")))?;
        let typed = serde_json::from_value(value)
            .map_err(|e| ApiError::bad_request("invalid_json", format!("the body does not fit: {e}")))?;
        Ok(Self(typed))
    }
}

/// Whether the request says its body is JSON (`application/json`, or a `+json` type).
fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::trim)
        .is_some_and(|mime| mime.eq_ignore_ascii_case("application/json") || mime.ends_with("+json"))
}

/// 415 `unsupported_media_type`.
fn not_json() -> ApiError {
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        "the body must be JSON, sent with `Content-Type: application/json`",
    )
}

/// An optional JSON object body: none (or only whitespace) is `{}`, whatever the request's
/// type; anything else must be sent as JSON (`Content-Type: application/json`, else 415)
/// and be one JSON object, strictly parsed ([`object_body`]).
#[derive(Debug, Clone, Default)]
pub struct ObjectBody(pub Map<String, Value>);

impl<S> FromRequest<S> for ObjectBody
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json = is_json(req.headers());
        let bytes = Bytes::from_request(req, state).await?;
        if !json && !bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(not_json());
        }
        object_body(&bytes).map(Self)
    }
}

/// An optional JSON object body: empty means `{}`; anything else must be one JSON object
/// (strictly parsed: a key written twice is refused).
///
/// # Errors
/// 400 `invalid_json` naming the problem.
fn object_body(bytes: &Bytes) -> Result<Map<String, Value>, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    let text =
        std::str::from_utf8(bytes).map_err(|_| ApiError::bad_request("invalid_json", "the body is not UTF-8"))?;
    match crate::json::parse(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::bad_request("invalid_json", "the body must be a JSON object")),
        Err(e) => Err(ApiError::bad_request("invalid_json", format!("the body is not valid JSON: {e}"))),
    }
}

impl From<butler_faculty::CallError> for ApiError {
    fn from(error: butler_faculty::CallError) -> Self {
        let code = error.code().to_owned();
        match &error {
            // A faculty that says what kind of failure it is gets that kind's status.
            butler_faculty::CallError::Guest { failure, .. } if failure.typed => Self {
                status: status_of_kind(failure.kind),
                details: failure.details.clone(),
                ..Self::new(StatusCode::OK, code, error.to_string())
            },
            _ => Self::new(status_for(&code), code, error.to_string()),
        }
    }
}

/// The HTTP status of a failure's kind (`butler:faculty@0.2.0` says the kind).
#[must_use]
pub fn status_of_kind(kind: butler_faculty::wit::FailureKind) -> StatusCode {
    use butler_faculty::wit::FailureKind as K;
    match kind {
        K::InvalidInput => StatusCode::BAD_REQUEST,
        K::NotFound => StatusCode::NOT_FOUND,
        K::Conflict => StatusCode::CONFLICT,
        K::Forbidden => StatusCode::FORBIDDEN,
        K::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        K::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        K::Failed => StatusCode::UNPROCESSABLE_ENTITY,
        K::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The HTTP status of a call error code. Host codes are listed; the codes of a
/// `butler:faculty@0.1.0` faculty (which says no kind) follow the naming conventions in
/// `docs/http-api.md`.
#[must_use]
pub fn status_for(code: &str) -> StatusCode {
    match code {
        "unknown_faculty" | "unknown_command" | "unknown_report" | "unknown_action" | "unknown_extension"
        | "not_found" => StatusCode::NOT_FOUND,
        "not_hosted" | "extension_removed" => StatusCode::CONFLICT,
        "invalid_args" => StatusCode::BAD_REQUEST,
        "owner_required" | "operator_only" | "forbidden" => StatusCode::FORBIDDEN,
        "faculty_unavailable" | "busy" | "shutting_down" | "not_served" => StatusCode::SERVICE_UNAVAILABLE,
        "internal" => StatusCode::INTERNAL_SERVER_ERROR,
        "timeout" => StatusCode::GATEWAY_TIMEOUT,
        "too_many_failures" => StatusCode::TOO_MANY_REQUESTS,
        "trap" | "memory_limit" | "command_failed" | "invalid_output" | "invalid_report" | "call_depth_exceeded" => {
            StatusCode::BAD_GATEWAY
        }
        c if c.starts_with("invalid_") => StatusCode::BAD_REQUEST,
        c if c.ends_with("_not_found") || c.ends_with("_unavailable") => StatusCode::NOT_FOUND,
        c if c.starts_with("stale_")
            || c.ends_with("_expired")
            || c.ends_with("_conflict")
            || c.ends_with("_not_active") =>
        {
            StatusCode::CONFLICT
        }
        c if c.ends_with("_invalid") || c.ends_with("_required") => StatusCode::FORBIDDEN,
        c if c.ends_with("_too_large") => StatusCode::PAYLOAD_TOO_LARGE,
        _ => StatusCode::UNPROCESSABLE_ENTITY,
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
