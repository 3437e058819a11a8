//! The HTTP surface in process: the host assembled by [`Host::new`], as `butler serve`
//! assembles it, and its real router (the one `butler serve` serves) driven request by
//! request with `tower::ServiceExt::oneshot` — no socket, no binary. A [`Peer`] attaches
//! to each request what the listener attaches for a connection it accepted (which
//! listener, whether the kernel vouched for the peer's user), so the checks run exactly as
//! behind a socket. One host serves every test here: its instance has no faculties, so
//! nothing compiles and each request takes milliseconds.
//!
//! Covered: the gate (a foreign `Host` or `Origin` refused), the credential a connection
//! whose user could not be verified must carry, the error envelope (unknown route, bad
//! JSON, oversized body) and an owner action with and without the owner token. The listener's
//! own refusal of another user's connection, before any request is read, is the e2e
//! tier's (`tests/e2e/gate.rs`), where there is a connection to refuse.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::OnceLock;
use std::time::Instant;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use butler_host::host::{Host, Options};
use butler_host::http::connection::{PeerVerified, Transport};
use butler_host::http::{API_PREFIX, error::MAX_BODY_BYTES};
use butler_host::instance::Instance;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

/// The port the in-process host says it listens on: what its gate takes as its own.
const PORT: u16 = 19_999;

/// Who is on the other end of a request's connection, as the listener saw it
/// (`butler_host::http::listen`): it attaches the same [`Transport`] and [`PeerVerified`].
#[derive(Debug, Clone, Copy)]
enum Peer {
    /// A loopback TCP connection the kernel vouched for as the owner's user.
    Owner,
    /// A loopback TCP connection whose user the kernel could not say.
    Unverified,
}

impl Peer {
    /// `request` as it reaches the router over this peer's connection.
    fn attach(self, mut request: Request<Body>) -> Request<Body> {
        let verified = matches!(self, Self::Owner);
        request.extensions_mut().insert(Transport::Tcp);
        request.extensions_mut().insert(PeerVerified(verified));
        request
    }
}

/// The shared host, with the runtime its tasks run on and the folder of its instance.
struct InProcess {
    runtime: tokio::runtime::Runtime,
    host: Host,
    _dir: tempfile::TempDir,
}

fn host() -> &'static InProcess {
    static HOST: OnceLock<InProcess> = OnceLock::new();
    HOST.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp");
        // An instance whose root config exists is opened as is: no skeleton, no built-in
        // faculties to compile.
        std::fs::write(dir.path().join("butler.json"), "{}").expect("root config");
        let (instance, created) = Instance::open_or_create(dir.path()).expect("instance");
        assert!(!created);
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
        let listening = SocketAddr::from((Ipv4Addr::LOCALHOST, PORT));
        let options = Options { listening, hub_io: None, started: Instant::now() };
        let host = runtime.block_on(super::within("the host assembles", Host::new(instance, options))).expect("host");
        InProcess { runtime, host, _dir: dir }
    })
}

/// A request for `path` under the API prefix, with `headers` (a `Host` of ours unless
/// given).
fn request(method: &str, path: &str, headers: &[(&str, &str)], body: impl Into<Body>) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(format!("{API_PREFIX}{path}"));
    if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
        builder = builder.header("host", format!("127.0.0.1:{PORT}"));
    }
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(body.into()).expect("a request")
}

/// The router's answer to `request` over `peer`'s connection: status and JSON body.
fn send(peer: Peer, request: Request<Body>) -> (StatusCode, Value) {
    let InProcess { runtime, host, .. } = host();
    runtime.block_on(super::within("the answer", async {
        let response = host.router().oneshot(peer.attach(request)).await.expect("the router answers");
        let status = response.status();
        let bytes = response.into_body().collect().await.expect("the body").to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {}", String::from_utf8_lossy(&bytes)));
        (status, body)
    }))
}

/// Asserts `(status, body)` is the error envelope with `status` and `code`.
fn assert_refused((status, body): &(StatusCode, Value), expected: StatusCode, code: &str) {
    assert_eq!(*status, expected, "{body}");
    assert_eq!(body["ok"], false, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
}

fn bearer() -> String {
    format!("Bearer {}", host().host.state().owner_token)
}

#[test]
fn a_request_of_ours_passes_the_gate() {
    let (status, body) = send(Peer::Owner, request("GET", "/health", &[], Body::empty()));
    assert_eq!(status, StatusCode::OK, "{body}");
    let own_origin = format!("http://127.0.0.1:{PORT}");
    let (status, body) = send(Peer::Owner, request("GET", "/health", &[("origin", &own_origin)], Body::empty()));
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[test]
fn the_gate_refuses_a_foreign_host() {
    let answer = send(Peer::Owner, request("GET", "/health", &[("host", "attacker.example:19999")], Body::empty()));
    assert_refused(&answer, StatusCode::FORBIDDEN, "host_not_allowed");
}

#[test]
fn the_gate_refuses_a_foreign_origin() {
    let answer = send(Peer::Owner, request("GET", "/health", &[("origin", "http://attacker.example")], Body::empty()));
    assert_refused(&answer, StatusCode::FORBIDDEN, "origin_not_allowed");
    // Our name on another port is another origin.
    let answer = send(Peer::Owner, request("GET", "/health", &[("origin", "http://127.0.0.1:1")], Body::empty()));
    assert_refused(&answer, StatusCode::FORBIDDEN, "origin_not_allowed");
}

#[test]
fn a_connection_whose_user_is_unknown_must_carry_a_credential() {
    let answer = send(Peer::Unverified, request("GET", "/catalog", &[], Body::empty()));
    assert_refused(&answer, StatusCode::UNAUTHORIZED, "token_required");
    let token = bearer();
    let (status, body) =
        send(Peer::Unverified, request("GET", "/catalog", &[("authorization", &token)], Body::empty()));
    assert_eq!(status, StatusCode::OK, "{body}");
    let answer =
        send(Peer::Unverified, request("GET", "/catalog", &[("authorization", "Bearer wrong")], Body::empty()));
    assert_refused(&answer, StatusCode::UNAUTHORIZED, "token_required");
}

#[test]
fn an_unknown_route_is_the_error_envelope() {
    let answer = send(Peer::Owner, request("GET", "/no/such/route", &[], Body::empty()));
    assert_refused(&answer, StatusCode::NOT_FOUND, "unknown_route");
}

#[test]
fn a_body_that_is_not_json_is_the_error_envelope() {
    let json = [("content-type", "application/json")];
    let answer = send(Peer::Owner, request("PUT", "/layout", &json, "{\"version\": 1,"));
    assert_refused(&answer, StatusCode::BAD_REQUEST, "invalid_json");
    // A key written twice is refused, not guessed.
    let twice = r#"{"version": 1, "order": {"tools": ["a"]}, "order": {"tools": ["b"]}}"#;
    let answer = send(Peer::Owner, request("PUT", "/layout", &json, twice));
    assert_refused(&answer, StatusCode::BAD_REQUEST, "invalid_json");
}

#[test]
fn an_oversized_body_is_the_error_envelope() {
    let json = [("content-type", "application/json")];
    let oversized = format!("{{\"version\":1,\"pad\":\"{}\"}}", "x".repeat(MAX_BODY_BYTES));
    let answer = send(Peer::Owner, request("PUT", "/layout", &json, oversized));
    assert_refused(&answer, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
}

#[test]
fn an_owner_action_needs_the_owner() {
    // The owner's user on a verified connection is not the owner: any of its processes
    // (an MCP client, a faculty's child) can connect so.
    let answer = send(Peer::Owner, request("POST", "/console/links", &[], Body::empty()));
    assert_refused(&answer, StatusCode::FORBIDDEN, "owner_required");
    let answer =
        send(Peer::Owner, request("POST", "/console/links", &[("authorization", "Bearer wrong")], Body::empty()));
    assert_refused(&answer, StatusCode::FORBIDDEN, "owner_required");
    let token = bearer();
    let (status, body) =
        send(Peer::Owner, request("POST", "/console/links", &[("authorization", &token)], Body::empty()));
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["data"]["url"].as_str().is_some_and(|url| url.contains("/login")), "{body}");
}
