//! The HTTP gate's header rules, driven with arbitrary header maps: `Host`, `Origin` and
//! `Sec-Fetch-Site` (built from pieces that reach the interesting spellings, or raw bytes)
//! among other headers, for an arbitrary port; or a request head as written (the seed
//! corpus's form).
//!
//! Properties: an accepted request has exactly one `Host`, naming `localhost` or a loopback
//! address; at most one `Origin`, which is `http://` and a loopback name with the host's
//! port; no cross-site or same-site `Sec-Fetch-Site`. Every refusal is one of the gate's
//! codes with its status. A plain loopback `Host` alone is always accepted.
#![no_main]

use std::net::IpAddr;

use arbitrary::{Arbitrary, Unstructured};
use butler_host::http::gate::{GateConfig, check, is_own_origin};
use http::header::{HOST, ORIGIN};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
enum Name {
    Host,
    Origin,
    FetchSite,
    Other(String),
}

#[derive(Debug, Arbitrary)]
enum Piece {
    Http,
    Https,
    Localhost,
    Loopback4,
    Loopback6,
    Bracketed6,
    Mapped6,
    Evil,
    Colon,
    Dot,
    Port,
    At,
    Slash,
    CrossSite,
    SameOrigin,
    Digits(u32),
    Text(String),
    Bytes(Vec<u8>),
}

impl Piece {
    fn bytes(&self, port: u16) -> Vec<u8> {
        let text = match self {
            Self::Http => "http://",
            Self::Https => "https://",
            Self::Localhost => "LocalHost",
            Self::Loopback4 => "127.0.0.1",
            Self::Loopback6 => "::1",
            Self::Bracketed6 => "[::1]",
            Self::Mapped6 => "[::ffff:127.0.0.1]",
            Self::Evil => "evil.example",
            Self::Colon => ":",
            Self::Dot => ".",
            Self::Port => return port.to_string().into_bytes(),
            Self::At => "@",
            Self::Slash => "/",
            Self::CrossSite => "cross-site",
            Self::SameOrigin => "same-origin",
            Self::Digits(n) => return n.to_string().into_bytes(),
            Self::Text(s) => return s.clone().into_bytes(),
            Self::Bytes(b) => return b.clone(),
        };
        text.as_bytes().to_vec()
    }
}

#[derive(Debug, Arbitrary)]
struct Input {
    port: Option<u16>,
    headers: Vec<(Name, Vec<Piece>)>,
}

/// A request head as a client writes it (`GET /path HTTP/1.1`, then `Name: value` lines),
/// the seed corpus's form, for the host's default port.
fn written(data: &[u8]) -> Option<HeaderMap> {
    let text = std::str::from_utf8(data).ok()?;
    let mut lines = text.split("\r\n").flat_map(|l| l.split('\n'));
    let request = lines.next()?;
    if !(request.starts_with("GET ") || request.starts_with("POST ")) {
        return None;
    }
    let mut headers = HeaderMap::new();
    for line in lines.take_while(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':')?;
        headers.append(HeaderName::from_bytes(name.as_bytes()).ok()?, HeaderValue::from_str(value.trim()).ok()?);
    }
    Some(headers)
}

fuzz_target!(|data: &[u8]| {
    if let Some(headers) = written(data) {
        decided(GateConfig { port: 19387 }, &headers);
        return;
    }
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else { return };
    let config = GateConfig { port: input.port.unwrap_or(19387) };
    let mut headers = HeaderMap::new();
    for (name, pieces) in input.headers.iter().take(12) {
        let name = match name {
            Name::Host => HOST,
            Name::Origin => ORIGIN,
            Name::FetchSite => HeaderName::from_static("sec-fetch-site"),
            Name::Other(other) => match HeaderName::from_bytes(other.as_bytes()) {
                Ok(name) => name,
                Err(_) => continue,
            },
        };
        let bytes: Vec<u8> = pieces.iter().take(12).flat_map(|p| p.bytes(config.port)).collect();
        if let Ok(value) = HeaderValue::from_bytes(&bytes) {
            headers.append(name, value);
        }
    }
    decided(config, &headers);
    // Completeness: the plainest loopback Host is let through.
    for host in ["127.0.0.1", "localhost", "[::1]"] {
        let mut plain = HeaderMap::new();
        plain.insert(HOST, HeaderValue::from_str(&format!("{host}:{}", config.port)).expect("a header value"));
        assert!(check(config, &plain).is_ok(), "{host}:{}", config.port);
    }
});

fn decided(config: GateConfig, headers: &HeaderMap) {
    match check(config, headers) {
        Ok(()) => {
            let hosts: Vec<_> = headers.get_all(HOST).iter().collect();
            assert_eq!(hosts.len(), 1, "one Host");
            let host = hosts[0].to_str().expect("an accepted Host is text");
            assert!(loopback_authority(host).is_some(), "accepted Host {host:?}");
            let origins: Vec<_> = headers.get_all(ORIGIN).iter().collect();
            assert!(origins.len() <= 1, "one Origin at most");
            if let Some(origin) = origins.first() {
                let origin = origin.to_str().expect("an accepted Origin is text");
                let authority = origin.strip_prefix("http://").expect("an accepted Origin is http");
                let port = loopback_authority(authority).unwrap_or_else(|| panic!("accepted Origin {origin:?}"));
                assert_eq!(port.unwrap_or(80), config.port, "accepted Origin {origin:?}");
                assert!(is_own_origin(config, origin));
            }
            let sites: Vec<_> = headers.get_all("sec-fetch-site").iter().collect();
            assert!(sites.len() <= 1);
            if let Some(site) = sites.first().and_then(|s| s.to_str().ok()) {
                let site = site.to_ascii_lowercase();
                assert!(site != "cross-site" && site != "same-site", "accepted Sec-Fetch-Site {site:?}");
            }
        }
        Err(error) => {
            let status = match error.code.as_ref() {
                "duplicate_header" => StatusCode::BAD_REQUEST,
                "host_not_allowed" | "origin_not_allowed" | "cross_site_request" => StatusCode::FORBIDDEN,
                other => panic!("unknown refusal code {other}"),
            };
            assert_eq!(error.status, status, "{error:?}");
            assert!(error.message.chars().count() < 300, "a refusal quotes headers briefly: {error:?}");
        }
    }
}

/// `name[:port]` where the name is `localhost` or a loopback address (brackets around an
/// IPv6 one, one trailing dot allowed) and the port canonical decimal: `Some(port)`.
fn loopback_authority(authority: &str) -> Option<Option<u16>> {
    let (name, port) = match authority.rfind(':') {
        Some(at) if !authority[..at].ends_with(':') && authority[at + 1..].bytes().all(|b| b.is_ascii_digit()) => {
            (&authority[..at], Some(&authority[at + 1..]))
        }
        _ => (authority, None),
    };
    let port = match port {
        None => None,
        Some(p) if p.is_empty() || (p.len() > 1 && p.starts_with('0')) => return None,
        Some(p) => Some(p.parse::<u16>().ok()?),
    };
    let name = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(name);
    let name = name.strip_suffix('.').unwrap_or(name);
    let loopback = name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    loopback.then_some(port)
}
