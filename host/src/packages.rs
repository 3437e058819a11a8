//! The enabled capability packages as the running host serves them: their MCP servers
//! (`stdio` processes, `http` remote servers) joined to the hub beside the extensions'
//! providers (same names, status, quarantine and activity log), their `env` and `headers`
//! expanded from the host's environment when they are handed over — never written
//! anywhere — and their skills offered over MCP as a
//! prompt and read-only resources from the managed copy.

use butler_catalog::imports::Imports;
use std::time::Duration;

use butler_mcp::upstream::Remote;
use butler_mcp::{Package, Server};

/// The enabled packages in `imports`, as the hub offers them (reads their records and
/// skills: call it off the async runtime's threads).
#[must_use]
pub fn enabled(imports: &Imports) -> Vec<Package> {
    imports
        .list()
        .into_iter()
        .filter(|record| record.enabled)
        .map(|record| {
            let var = |name: &str| std::env::var(name).ok();
            let stdio = record.stdio_server(var).map(|mcp| Server::Stdio(mcp, record.package_dir()));
            let remote = record.remote_server(var).map(|(url, headers)| {
                let timeout = Duration::from_secs(u64::from(butler_catalog::manifest::Mcp::DEFAULT_TIMEOUT_SEC));
                Server::Remote(Remote { url, headers }, timeout)
            });
            Package {
                id: record.provider_id(),
                namespace: record.namespace(),
                server: stdio.or(remote),
                skill: imports.skill(&record),
            }
        })
        .collect()
}
