//! Path and query extractors whose rejections use the error envelope: axum's own answer
//! with plain text (a path segment that is not UTF-8, a query string that does not
//! deserialize — `?t=a&t=b`, say).

use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::http::ApiError;

/// Path parameters; a segment that cannot be read is 400 `invalid_path`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(Self(value)),
            // A route and its handler disagree on the parameters: a host defect.
            Err(rejection) if rejection.status().is_server_error() => Err(ApiError::internal(rejection.body_text())),
            Err(rejection) => Err(ApiError::bad_request("invalid_path", rejection.body_text())),
        }
    }
}

/// A query string; one that does not deserialize is 400 `invalid_query`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(Self(value)),
            Err(rejection) => Err(ApiError::bad_request("invalid_query", rejection.body_text())),
        }
    }
}
