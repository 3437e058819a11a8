//! Errors hyper answers by itself, before any route sees the request: a head it cannot
//! parse (400), one larger than [`MAX_HEAD_BYTES`] or with too many
//! headers (431), a target too long (414), an unknown HTTP version (505). hyper writes
//! them with an empty body; [`Enveloped`] wraps each connection and writes them as the
//! error envelope instead — or, on the MCP routes, as a JSON-RPC error — so that every
//! error a client can get from the host has the same readable shape.
//!
//! The wrapper recognises hyper's answers by their form: an error status, `content-length: 0`
//! and no `content-type`. The routes never answer an error that way (every one of theirs
//! carries the envelope), so nothing else is rewritten. Whether the request was for an MCP
//! route ([`McpUrl::of_request_start`]), or was a `HEAD`, is read off the first bytes of the
//! request the answer is for.

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};

use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::mcp::McpUrl;

/// Largest request head accepted (request line and headers).
pub const MAX_HEAD_BYTES: usize = 64 << 10;

/// How much of a request's start is kept to tell which route it was for.
const REQUEST_START: usize = 128;

/// A connection whose bodiless error answers are rewritten (see the module doc).
pub struct Enveloped<S> {
    inner: S,
    /// The first bytes read of the request now being answered.
    request_start: Vec<u8>,
    /// A rewritten answer being written, and how much of it has gone out.
    rewritten: Option<(Vec<u8>, usize)>,
}

impl<S> Enveloped<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner, request_start: Vec::with_capacity(REQUEST_START), rewritten: None }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Enveloped<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        let room = REQUEST_START - this.request_start.len();
        if room > 0 {
            let fresh = &buf.filled()[before..];
            this.request_start.extend_from_slice(&fresh[..fresh.len().min(room)]);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> Enveloped<S> {
    /// Writes out the rewritten answer; `Ready(Ok(n))` claims hyper's `n` bytes once all of
    /// it has gone.
    fn drain_rewritten(&mut self, cx: &mut Context<'_>, claimed: usize) -> Poll<std::io::Result<usize>> {
        while let Some((bytes, written)) = &mut self.rewritten {
            if *written == bytes.len() {
                self.rewritten = None;
                return Poll::Ready(Ok(claimed));
            }
            match Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *written += n,
                other => return other,
            }
        }
        Poll::Ready(Ok(claimed))
    }

    /// Called with the start of every write: a new answer's head starts a new request.
    fn on_write(&mut self, first: &[u8], total: usize) -> bool {
        if !first.starts_with(b"HTTP/1.") {
            return false;
        }
        let rewrite = rewrite(first, total, &self.request_start);
        self.request_start.clear();
        match rewrite {
            Some(bytes) => {
                self.rewritten = Some((bytes, 0));
                true
            }
            None => false,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Enveloped<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        if this.rewritten.is_some() || this.on_write(buf, buf.len()) {
            return this.drain_rewritten(cx, buf.len());
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let total = bufs.iter().map(|b| b.len()).sum();
        let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &b[..]);
        if this.rewritten.is_some() || this.on_write(first, total) {
            return this.drain_rewritten(cx, total);
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The envelope answer replacing `head` (the whole of a write of `total` bytes), when it is
/// one of hyper's bodiless error answers.
fn rewrite(head: &[u8], total: usize, request_start: &[u8]) -> Option<Vec<u8>> {
    let end = head.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    if end != total {
        return None; // a body follows: a route's answer
    }
    let text = std::str::from_utf8(&head[..end]).ok()?;
    let status: u16 = text.get(9..12)?.parse().ok()?;
    let lines: Vec<String> = text.lines().skip(1).map(str::to_ascii_lowercase).collect();
    let bodiless = lines.iter().any(|l| l.trim_end() == "content-length: 0");
    if status < 400 || !bodiless || lines.iter().any(|l| l.starts_with("content-type:")) {
        return None;
    }
    let (method, mcp) = McpUrl::of_request_start(request_start);
    if method == "HEAD" {
        return None; // a HEAD answer must stay bodiless
    }
    let (code, message) = describe(status);
    let body = if mcp.is_some() {
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": message, "data": {"code": code}}})
    } else {
        json!({"ok": false, "error": {"code": code, "message": message}})
    }
    .to_string();
    let reason = text.lines().next().and_then(|l| l.get(13..)).unwrap_or("Error");
    Some(
        format!(
            "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

/// An error refused before a route ran, for a request for `path`: as the MCP routes
/// answer it ([`McpUrl`] reads the path) — a JSON-RPC error (`-32600`, the envelope's code
/// in `data`) with the same HTTP status — or as the envelope elsewhere.
pub(crate) fn refusal_for(path: &str, refusal: super::error::ApiError) -> axum::response::Response {
    use axum::response::IntoResponse;
    if McpUrl::of(path).is_none() {
        return refusal.into_response();
    }
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32600, "message": refusal.message, "data": {"code": refusal.code}},
    });
    (refusal.status, axum::Json(body)).into_response()
}

/// What a client is told when its request head is too large.
pub(crate) static HEAD_TOO_LARGE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("the request head is larger than {} KiB, or has too many headers", MAX_HEAD_BYTES >> 10)
});

fn describe(status: u16) -> (&'static str, String) {
    match status {
        431 => ("headers_too_large", HEAD_TOO_LARGE.clone()),
        414 => ("uri_too_long", "the request target is longer than the host accepts".to_owned()),
        413 => ("payload_too_large", "the request body is larger than the host accepts".to_owned()),
        408 => ("request_timeout", "the request did not arrive in time".to_owned()),
        505 => ("http_version_not_supported", "the host speaks HTTP/1.1 (and 1.0) only".to_owned()),
        s if s >= 500 => ("internal", "the host could not answer this request".to_owned()),
        _ => (
            "bad_request",
            "the request is not valid HTTP/1.1 (its request line or a header could not be parsed)".to_owned(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(head: &str, request: &str) -> Option<String> {
        rewrite(head.as_bytes(), head.len(), request.as_bytes()).map(|b| String::from_utf8(b).expect("utf-8"))
    }

    #[test]
    fn hypers_bodiless_errors_become_the_envelope() {
        let head = "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let out = answer(head, "GET /myspace-butler/api/health HTTP/1.1\r\nX: ").expect("rewritten");
        assert!(out.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "{out}");
        let body: serde_json::Value = serde_json::from_str(out.split_once("\r\n\r\n").expect("body").1).expect("json");
        assert_eq!(body["error"]["code"], "headers_too_large");
        let out = answer("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n", "\u{1}garbage").expect("rewritten");
        assert!(out.contains("\"bad_request\""), "{out}");
    }

    #[test]
    fn mcp_routes_get_a_json_rpc_error() {
        let head = "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n";
        for target in ["/myspace-butler/api/mcp", "/myspace-butler/mcp/butler", "/myspace-butler/api/mcp?x"] {
            let out = answer(head, &format!("POST {target} HTTP/1.1\r\n")).expect("rewritten");
            assert!(out.contains("\"jsonrpc\":\"2.0\"") && out.contains("-32600"), "{target}: {out}");
        }
        let out = answer(head, "POST /myspace-butler/api/mcpx HTTP/1.1\r\n").expect("rewritten");
        assert!(out.contains("\"ok\":false"), "{out}");
    }

    #[test]
    fn route_answers_and_head_requests_are_left_alone() {
        let with_body = "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n";
        assert_eq!(answer(with_body, "GET / HTTP/1.1"), None);
        let ok = "HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(answer(ok, "GET / HTTP/1.1"), None);
        let bodiless = "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(answer(bodiless, "HEAD /x HTTP/1.1"), None);
        let head_and_body = format!("{bodiless}{{}}");
        assert_eq!(rewrite(head_and_body.as_bytes(), head_and_body.len() + 2, b"GET / HTTP/1.1"), None);
    }
}
