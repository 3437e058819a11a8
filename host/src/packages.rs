//! The enabled capability packages as the running host serves them: their `stdio` MCP
//! servers joined to the hub beside the extensions' providers (same names, status,
//! quarantine and activity log), their `env` expanded from the host's environment when
//! they are handed over — never written anywhere — and their skills offered over MCP as a
//! prompt and read-only resources from the managed copy.

use butler_catalog::imports::Imports;
use butler_mcp::Package;

/// The enabled packages in `imports`, as the hub offers them (reads their records and
/// skills: call it off the async runtime's threads).
#[must_use]
pub fn enabled(imports: &Imports) -> Vec<Package> {
    imports
        .list()
        .into_iter()
        .filter(|record| record.enabled)
        .map(|record| Package {
            id: record.provider_id(),
            namespace: record.namespace(),
            server: record.stdio_server(|name| std::env::var(name).ok()).map(|mcp| (mcp, record.package_dir())),
            skill: imports.skill(&record),
        })
        .collect()
}
