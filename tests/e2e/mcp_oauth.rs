//! OAuth logins to remote MCP servers, checked against software we did not write: the
//! official conformance suite's client auth scenarios, with the hub as the client. The
//! suite starts each scenario's server and authorization server and runs
//! `tests/fixtures/conformance/oauth-client.sh`, which acts as the owner: `butler mcp add`
//! with the scenario's URL, `butler mcp login` (its URL followed as a browser would), then
//! a list and a call through the hub's endpoint.

use std::collections::BTreeSet;

use crate::conformance::{Suite, expected_failures, fixture};
use crate::util::Butler;

#[test]
fn the_conformance_suites_client_auth_scenarios_pass_with_the_hub_as_the_client() {
    let dir = tempfile::tempdir().expect("temp");
    std::fs::write(dir.path().join("butler.json"), r#"{"mcp": {"quarantine": false}}"#).expect("root config");
    let butler = Butler::start(dir.path());
    let script = fixture("oauth-client.sh");
    let mut command = Suite::Stable.client(&format!("bash {}", script.display()));
    command
        .args(["--suite", "auth"])
        .env("BUTLER", crate::util::butler_binary())
        .env("BUTLER_WORKDIR", &butler.workdir)
        .env("BUTLER_HUB", butler.api("/mcp"));
    let run = crate::conformance::run(command);
    let expected = expected_failures(&fixture(&format!("oauth-client-{}.txt", Suite::Stable.version())));
    let failed: BTreeSet<&str> =
        run.scenarios.iter().filter(|(_, passed)| !**passed).map(|(s, _)| s.as_str()).collect();
    let listed: BTreeSet<&str> = expected.keys().map(String::as_str).collect();
    assert!(run.scenarios.len() >= 14, "every scenario of the suite ran:\n{}", run.text);
    assert_eq!(failed, listed, "the scenarios that fail are exactly those listed, with their reasons:\n{}", run.text);
    // No token the scenarios gave shows in the status.
    let (_, status) = butler.get_json("/mcp/status");
    assert!(!status.to_string().contains("test-token"), "{status}");
}
