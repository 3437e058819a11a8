//! Whether a URL names one of the host's own listeners. A provider whose URL is the host's
//! own MCP endpoint would make the hub list and call itself: every list would wait on
//! itself until its deadline. The scan refuses such a server as a diagnostic, and the hub's
//! dialer refuses to connect to one.
//!
//! Only what the URL itself says is compared: an IP literal, or `localhost` (and names under
//! `.localhost`, which resolve to loopback). A DNS name is not resolved here — that could
//! block — so the host also marks its own outgoing MCP requests, and its gate refuses a
//! request that carries its own mark.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Whether `url` (`http://` or `https://`) reaches one of `listeners`, as far as the URL
/// alone says.
#[must_use]
pub fn names_own_listener(url: &str, listeners: &[SocketAddr]) -> bool {
    let Some((ips, port)) = target(url) else { return false };
    listeners.iter().any(|listener| {
        listener.port() == port
            && ips.iter().any(|ip| {
                *ip == listener.ip()
                    // A listener on every address takes what any loopback address reaches;
                    // connecting to the unspecified address reaches loopback.
                    || (listener.ip().is_unspecified() && (ip.is_loopback() || ip.is_unspecified()))
                    || (ip.is_unspecified() && listener.ip().is_loopback())
            })
    })
}

/// The addresses and port `url` connects to, when the URL names them without DNS.
fn target(url: &str) -> Option<(Vec<IpAddr>, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit('@').next()?;
    let (host, port) = match host_port.strip_prefix('[') {
        Some(bracketed) => {
            let (host, after) = bracketed.split_once(']')?;
            (host, after.strip_prefix(':'))
        }
        None => match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        },
    };
    let port = match port {
        Some(port) if !port.is_empty() => port.parse().ok()?,
        _ => default_port,
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let ips = if host == "localhost" || host.ends_with(".localhost") {
        vec![IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::LOCALHOST)]
    } else {
        vec![host.parse::<IpAddr>().ok().or_else(|| legacy_ipv4(&host))?]
    };
    Some((ips, port))
}

/// The forms of an IPv4 address that URL parsers accept beside dotted quads: one decimal
/// number (`2130706433`) or hexadecimal (`0x7f000001`).
fn legacy_ipv4(host: &str) -> Option<IpAddr> {
    let number = match host.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
        None if host.bytes().all(|b| b.is_ascii_digit()) => host.parse().ok()?,
        None => return None,
    };
    Some(IpAddr::V4(Ipv4Addr::from(number)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> SocketAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn the_hosts_own_endpoint_is_recognised_however_it_is_written() {
        let own = [at("127.0.0.1:19387")];
        for url in [
            "http://127.0.0.1:19387/myspace-butler/api/mcp",
            "http://localhost:19387/myspace-butler/api/mcp",
            "http://LOCALHOST.:19387/mcp",
            "http://app.localhost:19387/mcp",
            "http://user:pw@127.0.0.1:19387/mcp?x=1",
            "http://0.0.0.0:19387/mcp",
            "http://2130706433:19387/mcp",
            "http://0x7f000001:19387/mcp",
            "https://127.0.0.1:19387",
        ] {
            assert!(names_own_listener(url, &own), "{url}");
        }
        for url in [
            "http://127.0.0.1:19388/mcp",
            "http://127.0.0.2:19387/mcp",
            "http://[::1]:19387/mcp",
            "https://example.com:19387/mcp",
            "http://127.0.0.1/mcp",
            "cmd://node server.js",
            "not a url",
        ] {
            assert!(!names_own_listener(url, &own), "{url}");
        }
        let everywhere = [at("0.0.0.0:8080")];
        assert!(names_own_listener("http://127.0.0.5:8080/", &everywhere));
        assert!(names_own_listener("http://[::1]:8080/", &[at("[::]:8080")]));
        assert!(names_own_listener("http://localhost/", &[at("127.0.0.1:80")]), "the scheme's port");
    }
}
