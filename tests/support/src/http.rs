//! HTTP the tests and benchmarks share: checks of the JSON envelope, and a minimal
//! HTTP/1.1 client on raw loopback sockets — one request per connection
//! ([`request`]), or many on one kept-alive connection ([`Client`]) — for measurements
//! where an HTTP library's own cost would show.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use reqwest::blocking::Response;
use serde_json::Value;

/// A builder of the blocking HTTP client the tests use. reqwest is built with TLS and no
/// crypto provider (the host picks ring, see `butler_host::upstream`), so the provider is
/// installed here first; a client built another way panics.
pub fn client() -> reqwest::blocking::ClientBuilder {
    // An error means a provider is installed already, which is all that is needed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::blocking::Client::builder()
}

/// Status and JSON body of a response.
pub fn json_of(response: Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().expect("body");
    let value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON (status {status}): {text}"));
    (status, value)
}

/// Asserts the error envelope with this status and code.
pub fn assert_error(status: u16, body: &Value, expected_status: u16, code: &str) {
    assert_eq!(status, expected_status, "{body}");
    assert_eq!(body["ok"], false, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
}

/// One HTTP/1.1 request to `/myspace-butler/api<path>` over a fresh loopback
/// connection: status and body.
///
/// # Panics
/// When the host cannot be reached.
#[must_use]
pub fn request(authority: &str, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let mut stream = TcpStream::connect(authority).expect("connect");
    let body = body.unwrap_or_default();
    let request = format!(
        "{method} /myspace-butler/api{path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("receive");
    let status = response.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    (status, body)
}

/// A keep-alive HTTP/1.1 client on one loopback connection.
pub struct Client {
    stream: BufReader<TcpStream>,
    authority: String,
}

impl Client {
    /// Connects to `authority` (`127.0.0.1:PORT`), with Nagle's delay off.
    ///
    /// # Panics
    /// When the host cannot be reached.
    #[must_use]
    pub fn connect(authority: &str) -> Self {
        let stream = TcpStream::connect(authority).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Self { stream: BufReader::new(stream), authority: authority.to_owned() }
    }

    /// One request on the open connection (`/myspace-butler/api<path>`): status and body.
    ///
    /// # Panics
    /// When the connection fails or the answer has no `Content-Length`.
    pub fn send(&mut self, method: &str, path: &str, body: &str) -> (u16, Vec<u8>) {
        let request = format!(
            "{method} /myspace-butler/api{path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            self.authority,
            body.len()
        );
        self.stream.get_mut().write_all(request.as_bytes()).expect("send");
        let (status, headers) = read_head(&mut self.stream);
        let length = header(&headers, "content-length").and_then(|v| v.parse().ok());
        let mut body = vec![0; length.expect("a Content-Length header")];
        self.stream.read_exact(&mut body).expect("body");
        (status, body)
    }
}

/// A response's status and headers (names lowercased), read up to the blank line.
///
/// # Panics
/// When the connection fails.
pub fn read_head(stream: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    stream.read_line(&mut line).expect("status line");
    let status = line.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut headers = Vec::new();
    loop {
        line.clear();
        stream.read_line(&mut line).expect("header");
        let text = line.trim_end();
        if text.is_empty() {
            return (status, headers);
        }
        if let Some((name, value)) = text.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
}

/// The value of header `name` (lowercase).
#[must_use]
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}
