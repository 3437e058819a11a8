//! The web console (SPEC §10): the page and assets as served (types, CSP, the gate) and
//! the live-update stream.

use serde_json::Value;

use crate::util::{Butler, tool, write_manifest};

fn page(butler: &Butler, path: &str) -> reqwest::blocking::Response {
    butler.request(reqwest::Method::GET, &format!("{}{path}", butler.origin)).send().expect("request")
}

#[test]
fn the_page_and_its_assets_are_served_with_their_types_and_a_strict_policy() {
    let (butler, _dir) = Butler::start_fresh();
    for (path, kind) in [
        ("/myspace-butler/", "text/html"),
        ("/myspace-butler/assets/app.js", "text/javascript"),
        ("/myspace-butler/assets/style.css", "text/css"),
        ("/myspace-butler/assets/icon.svg", "image/svg+xml"),
    ] {
        let response = page(&butler, path);
        assert_eq!(response.status(), 200, "{path}");
        let header =
            |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        assert!(header("content-type").starts_with(kind), "{path}: {}", header("content-type"));
        let csp = header("content-security-policy");
        assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe"), "{path}: {csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header("referrer-policy"), "no-referrer", "{path}");
        let etag = header("etag");
        let again = butler
            .request(reqwest::Method::GET, &format!("{}{path}", butler.origin))
            .header("if-none-match", &etag)
            .send()
            .expect("request");
        assert_eq!(again.status(), 304, "{path} revalidates");
    }
    let redirect = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
        .get(format!("{}/myspace-butler", butler.origin))
        .send()
        .expect("request");
    assert_eq!(redirect.status(), 303);
    assert_eq!(redirect.headers()["location"], "/myspace-butler/");
    for missing in
        ["/myspace-butler/assets/nope.js", "/myspace-butler/assets/..%2fmod.rs", "/myspace-butler/assets/x.exe"]
    {
        let response = page(&butler, missing);
        assert_eq!(response.status(), 404, "{missing}");
    }
    // The gate applies to the console as to the API: a page elsewhere cannot embed or fetch it.
    let refused = butler
        .request(reqwest::Method::GET, &format!("{}/myspace-butler/", butler.origin))
        .header("sec-fetch-site", "cross-site")
        .send()
        .expect("request");
    assert_eq!(refused.status(), 403);
}

#[test]
fn events_announce_what_changed() {
    use std::io::{BufRead, BufReader};
    let (butler, _dir) = Butler::start_fresh();
    let response = butler.get("/events").send().expect("events");
    assert!(response.headers()["content-type"].to_str().unwrap_or_default().starts_with("text/event-stream"));
    let mut lines = BufReader::new(response).lines();
    let mut next_change = || loop {
        let line = lines.next().expect("a line").expect("readable");
        if let Some(data) = line.strip_prefix("data: ") {
            return serde_json::from_str::<Value>(data).expect("JSON data");
        }
    };
    let first = next_change();
    assert!(first["catalog"].is_u64() && first["supervised"].is_string(), "{first}");
    write_manifest(&butler.workdir, "tools/fresh", &tool("fresh", "Fresh"));
    let second = next_change();
    assert_ne!(first["catalog"], second["catalog"], "{first} → {second}");
}
