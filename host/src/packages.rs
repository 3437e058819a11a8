//! The enabled capability packages as the running host serves them: their `stdio` MCP
//! servers joined to the hub beside the extensions' providers (same names, status,
//! quarantine and activity log), their `env` expanded from the host's environment when
//! they are handed over — never written anywhere.

use butler_catalog::imports::Imports;
use butler_mcp::PackageServer;

/// The MCP servers of the enabled packages in `imports` (reads their records: call it off
/// the async runtime's threads).
#[must_use]
pub fn servers(imports: &Imports) -> Vec<PackageServer> {
    imports
        .list()
        .into_iter()
        .filter(|record| record.enabled)
        .filter_map(|record| {
            let mcp = record.stdio_server(|name| std::env::var(name).ok())?;
            Some(PackageServer { id: record.provider_id(), mcp, dir: record.package_dir() })
        })
        .collect()
}
