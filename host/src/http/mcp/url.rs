//! The one reading of MCP URLs. Everything that asks whether a request is for the MCP
//! surface, or for which of its endpoints, asks [`McpUrl`]: the listener (which
//! connections go to the hub's runtime), the error framing and the gate's and credential
//! check's refusals (which requests get a JSON-RPC error), the credential check (whose
//! token opens which endpoint), and the handler both request paths call (which endpoint a
//! request is for). So they agree, under both prefixes ([`API_PREFIX`] and
//! [`LEGACY_PREFIX`]).

use crate::http::{API_PREFIX, LEGACY_PREFIX};

/// Where a request under the MCP routes (`…/mcp`, `…/mcp/…`) is addressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpUrl<'a> {
    /// `…/mcp`: the owner's endpoint.
    Main,
    /// `…/mcp/butler`: the restricted endpoint (the distilling agent's).
    Restricted,
    /// `…/mcp/p/<name>`: a profile's endpoint, the name as written (maybe percent-encoded).
    Profile(&'a str),
    /// `…/mcp/s/<id>`: a running agent session's endpoint, the id as written.
    AgentSession(&'a str),
    /// Any other path under `…/mcp/` (the hub's status, providers, activity, quarantine —
    /// or no route at all): not an endpoint, but MCP's, so refused with a JSON-RPC error.
    Other,
}

impl<'a> McpUrl<'a> {
    /// Where `path` (without its query) is addressed; `None` when it is not under the MCP
    /// routes of either prefix.
    #[must_use]
    pub fn of(path: &'a str) -> Option<Self> {
        let rest = [API_PREFIX, LEGACY_PREFIX]
            .iter()
            .find_map(|prefix| path.strip_prefix(prefix).and_then(|rest| rest.strip_prefix("/mcp")))?;
        let one_segment = |name: &'a str| (!name.is_empty() && !name.contains('/')).then_some(name);
        Some(match rest {
            "" => Self::Main,
            "/butler" => Self::Restricted,
            _ if !rest.starts_with('/') => return None, // `…/mcpx`
            _ => {
                if let Some(name) = rest.strip_prefix("/p/").and_then(one_segment) {
                    Self::Profile(name)
                } else if let Some(id) = rest.strip_prefix("/s/").and_then(one_segment) {
                    Self::AgentSession(id)
                } else {
                    Self::Other
                }
            }
        })
    }

    /// Whether this is one of the endpoints a client speaks MCP to (`POST`, `GET`, `DELETE`).
    #[must_use]
    pub fn is_endpoint(self) -> bool {
        !matches!(self, Self::Other)
    }

    /// The method of a request whose first bytes are `start`, and where its target is
    /// addressed on the MCP routes (`None`: not under them, or too little of the target
    /// arrived to tell). A target cut short is never taken for an endpoint: its last
    /// segment may go on.
    #[must_use]
    pub fn of_request_start(start: &'a [u8]) -> (&'a str, Option<Self>) {
        let line = start.split(|b| *b == b'\r' || *b == b'\n').next().unwrap_or_default();
        let text = std::str::from_utf8(line)
            .unwrap_or_else(|e| std::str::from_utf8(&line[..e.valid_up_to()]).unwrap_or_default());
        let (method, rest) = text.split_once(' ').unwrap_or((text, ""));
        let (target, whole) = match rest.split_once(' ') {
            Some((target, _)) => (target, true),
            None => (rest, false),
        };
        let (path, whole) = match target.split_once('?') {
            Some((path, _)) => (path, true),
            None => (target, whole),
        };
        let url = match Self::of(path) {
            Some(url) if whole => Some(url),
            // `…/mcp` cut short may be `…/mcpx`; a cut endpoint name may go on.
            Some(Self::Main) | None => None,
            Some(_) => Some(Self::Other),
        };
        (method, url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_prefixes_name_the_same_endpoints() {
        for prefix in [API_PREFIX, LEGACY_PREFIX] {
            let of = |rest: &str| McpUrl::of(&format!("{prefix}{rest}")).map(|u| format!("{u:?}"));
            assert_eq!(of("/mcp").as_deref(), Some("Main"), "{prefix}");
            assert_eq!(of("/mcp/butler").as_deref(), Some("Restricted"));
            assert_eq!(of("/mcp/p/fs").as_deref(), Some("Profile(\"fs\")"));
            assert_eq!(of("/mcp/p/f%6F").as_deref(), Some("Profile(\"f%6F\")"));
            assert_eq!(of("/mcp/s/abc").as_deref(), Some("AgentSession(\"abc\")"));
            for other in ["/mcp/", "/mcp/status", "/mcp/p/", "/mcp/p/fs/x", "/mcp/s/", "/mcp/s/a/b", "/mcp/butler/x"] {
                assert_eq!(of(other).as_deref(), Some("Other"), "{prefix}{other}");
            }
            for none in ["/mcpx", "/mcp.json", "/health", "", "/api"] {
                assert_eq!(of(none), None, "{prefix}{none}");
            }
        }
        assert_eq!(McpUrl::of("/mcp"), None);
        assert_eq!(McpUrl::of("/other/api/mcp"), None);
        assert!(McpUrl::Main.is_endpoint() && McpUrl::Profile("x").is_endpoint() && !McpUrl::Other.is_endpoint());
    }

    #[test]
    fn a_request_start_is_read_as_the_router_would_route_it() {
        fn read(start: &str) -> (&str, Option<McpUrl<'_>>) {
            McpUrl::of_request_start(start.as_bytes())
        }
        assert_eq!(read("POST /myspace-butler/api/mcp HTTP/1.1\r\n"), ("POST", Some(McpUrl::Main)));
        assert_eq!(read("POST /myspace-butler/mcp HTTP/1.1\r\n"), ("POST", Some(McpUrl::Main)));
        assert_eq!(read("GET /myspace-butler/mcp/p/fs?x=1 HTTP/1.1"), ("GET", Some(McpUrl::Profile("fs"))));
        assert_eq!(read("POST /myspace-butler/api/mcp?"), ("POST", Some(McpUrl::Main)));
        assert_eq!(read("DELETE /myspace-butler/api/mcpx HTTP/1.1"), ("DELETE", None));
        assert_eq!(read("GET /myspace-butler/api/health HTTP/1.1"), ("GET", None));
        // Cut short: `…/mcp` may go on as `…/mcpx`; a cut name is under MCP, not an endpoint.
        assert_eq!(read("POST /myspace-butler/api/mcp"), ("POST", None));
        assert_eq!(read("POST /myspace-butler/api/mcp/p/lo"), ("POST", Some(McpUrl::Other)));
        assert_eq!(read("POST /myspace-butler/api/mcp/"), ("POST", Some(McpUrl::Other)));
        assert_eq!(read("\u{1}garbage"), ("\u{1}garbage", None));
        assert_eq!(McpUrl::of_request_start(b"POST /myspace-butler/mcp \xff"), ("POST", Some(McpUrl::Main)));
    }
}
