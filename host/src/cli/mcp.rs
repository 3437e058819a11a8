//! `butler mcp status`: what the running host's MCP hub serves — each provider's state,
//! tools, rejected names and counters, and the namespace conflicts; `butler mcp
//! start|stop|restart ID`: one provider on request; `butler mcp log`: the hub's activity
//! log (`--follow` to keep printing; `--tool GLOB`, `--method`, `--provider`, `--outcome`
//! and `--endpoint` to keep to some entries); `butler mcp token add|list|revoke`: the tokens
//! of the MCP profiles (no running host needed); `butler mcp held` and `butler mcp
//! approve`: the quarantine of what providers give models to read; `butler mcp add|remove`:
//! the servers the owner adds by name, and `butler mcp import`: those another client has
//! configured (no running host needed); `butler mcp login|logout NAME`: a remote server's
//! OAuth login, through the running host.

use std::fmt::Write as _;
use std::process::ExitCode;

use serde_json::Value;

use butler_host::mcp_servers::{self, NewServer, Reach};
use butler_host::upstream::oauth::logins::{Logins, Preregistered};
use butler_mcp::activity::OUTCOMES;

use super::Target;
use super::client::Client;

/// `butler mcp` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// The MCP hub's providers: state, pid, tools, rejected names, calls, conflicts.
    Status {
        /// Print the full JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Start an MCP provider now (also one stopped on request, crashed or idle).
    Start {
        /// The provider's extension id.
        id: String,
        #[command(flatten)]
        target: Target,
    },
    /// Stop an MCP provider and keep it stopped (calls are refused) until `butler mcp start`.
    Stop {
        /// The provider's extension id.
        id: String,
        #[command(flatten)]
        target: Target,
    },
    /// Stop an MCP provider and start it again.
    Restart {
        /// The provider's extension id.
        id: String,
        #[command(flatten)]
        target: Target,
    },
    /// The hub's activity log: one line per request it answered, oldest first.
    Log {
        /// Keep printing new entries as they come.
        #[arg(long)]
        follow: bool,
        /// Only requests whose tool, prompt or resource URI matches this glob.
        #[arg(long, value_name = "GLOB")]
        tool: Option<String>,
        /// Only requests of this JSON-RPC method (`tools/call`, `resources/read`, …).
        #[arg(long)]
        method: Option<String>,
        /// Only requests this provider answered (an extension id, or `host`).
        #[arg(long, value_name = "ID")]
        provider: Option<String>,
        /// Only requests with this outcome.
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(OUTCOMES))]
        outcome: Option<String>,
        /// Only requests through this endpoint: `main`, `butler` or `p/PROFILE`.
        #[arg(long)]
        endpoint: Option<String>,
        /// How many of the latest entries to print first.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        #[command(flatten)]
        target: Target,
    },
    /// Serve the hub over stdin/stdout, for MCP clients that start their servers as
    /// processes (configure the client with `butler mcp stdio`).
    Stdio {
        #[command(flatten)]
        target: Target,
    },
    /// Tools, prompts, resources, templates and skills held for the owner's review
    /// (`mcp.quarantine`): new ones, and changed ones with what changed since approved.
    Held {
        /// Print the full JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Approve a provider's held items — those named, or with `--all` everything it
    /// offers — or trust it wholesale.
    Approve {
        /// The provider's extension id.
        provider: String,
        /// What to approve: a tool by its own name, anything else as `KIND:NAME`
        /// (`prompt:NAME`, `resource:URI`, `resourceTemplate:TEMPLATE`, `skill:NAME`), the
        /// provider's instructions as `instructions`; none, without
        /// `--trust`/`--distrust`: everything held, as `--all`.
        items: Vec<String>,
        /// Approve every held item the provider offers: tools, prompts, resources,
        /// resource templates, skills and its instructions.
        #[arg(long, conflicts_with = "items")]
        all: bool,
        /// Trust the provider wholesale: its tools pass as they come, changed or not.
        #[arg(long)]
        trust: bool,
        /// No longer trust it wholesale (its tools are checked against their pins again).
        #[arg(long, conflicts_with = "trust")]
        distrust: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Add an MCP server: a remote one by its URL, or a command the hub starts (after
    /// `--`). It becomes the extension `tools/NAME/`, which a running host picks up at once.
    #[command(
        after_help = "Examples:\n  butler mcp add linear https://mcp.linear.app/mcp\n  butler mcp add github https://api.githubcopilot.com/mcp/ --header 'Authorization=Bearer ${GITHUB_TOKEN}'\n  butler mcp add files --env LOG=1 -- npx -y @modelcontextprotocol/server-filesystem ~/notes"
    )]
    Add {
        /// Its name: the extension's id, and the namespace of its tools (`NAME__tool`, `-` as `_`).
        name: String,
        /// The remote server's URL: `https://…`, or `http://` to this machine.
        #[arg(required_unless_present = "command", conflicts_with = "command")]
        url: Option<String>,
        /// A header every request to the remote server carries, `K=V` (or `K: V`);
        /// `${VAR}` in it takes the host's environment at start, so the file need not hold a token.
        #[arg(long = "header", value_name = "K=V", conflicts_with = "command")]
        headers: Vec<String>,
        /// An environment variable for the command, `K=V`.
        #[arg(long = "env", value_name = "K=V", conflicts_with = "url")]
        env: Vec<String>,
        /// Per-call limit in seconds (5–3600; default 600).
        #[arg(long = "timeout", value_name = "SEC")]
        timeout: Option<u32>,
        /// The OAuth client the server's authorization server gave you, for a server that
        /// registers none by itself (kept in the state folder, 0600; `butler mcp login` uses it).
        #[arg(long = "client-id", value_name = "ID", conflicts_with = "command")]
        client_id: Option<String>,
        /// That client's secret (a confidential client).
        #[arg(long = "client-secret", value_name = "SECRET", requires = "client_id")]
        client_secret: Option<String>,
        /// A scope `butler mcp login` asks for (repeatable; none: those the server names).
        #[arg(long = "scope", value_name = "S", conflicts_with = "command")]
        scopes: Vec<String>,
        /// The command that starts the server, and its arguments, after `--`.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
        #[command(flatten)]
        target: Target,
    },
    /// Import the MCP servers another client has configured — Claude Desktop, Claude
    /// Code, Cursor, VS Code, Windsurf — each as `butler mcp add` would, and print the one
    /// entry the client should keep: the hub. The client's file is only read.
    Import {
        /// The client's config file: `claude_desktop_config.json`, `~/.claude.json` or
        /// `.mcp.json`, `~/.cursor/mcp.json`, `.vscode/mcp.json`, `~/.codeium/windsurf/mcp_config.json`.
        file: std::path::PathBuf,
        /// Say what would be added and what skipped; add nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Log in to a remote MCP server with OAuth: prints the authorization URL (first line),
    /// waits for the browser to come back to the host, and exits 0 once tokens are stored.
    Login {
        /// The server's name (its extension id).
        name: String,
        /// Open the URL in the default browser too.
        #[arg(long)]
        open: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Forget a remote MCP server's OAuth tokens (revoking them where the server can).
    Logout {
        /// The server's name (its extension id).
        name: String,
        #[command(flatten)]
        target: Target,
    },
    /// Remove an MCP server `butler mcp add` added (its folder `tools/NAME/`, and its
    /// login and client kept in the state folder).
    Remove {
        /// Its name.
        name: String,
        #[command(flatten)]
        target: Target,
    },
    /// The tokens that open the MCP profiles (`mcp.profiles` in the root config).
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
}

/// `butler mcp token` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Make a token for a profile and print it — once: only its hash is kept.
    Add {
        /// What to call it (the client it is for): letters, digits, `-`, `_`, `.`.
        name: String,
        /// The profile it opens.
        #[arg(long)]
        profile: String,
        #[command(flatten)]
        target: Target,
    },
    /// The tokens: name, profile, when made (never the tokens themselves).
    List {
        #[command(flatten)]
        target: Target,
    },
    /// Revoke a token: it opens nothing from the next request on.
    Revoke {
        /// Its name.
        name: String,
        #[command(flatten)]
        target: Target,
    },
}

/// Runs a `butler mcp` subcommand.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Stdio { target } => return super::stdio::run(target.workdir),
        Command::Token { command } => token(command)?,
        Command::Add { name, url, headers, env, timeout, client_id, client_secret, scopes, command, target } => {
            let reach = match url {
                Some(url) => Reach::Http { url, headers: pairs(&headers, "--header")? },
                None => Reach::Stdio { command, env: pairs(&env, "--env")? },
            };
            let client = (client_id.is_some() || !scopes.is_empty()).then_some(Preregistered {
                client_id,
                client_secret,
                scopes,
            });
            add(&NewServer { name, reach, timeout_sec: timeout }, client.as_ref(), target)?;
        }
        Command::Login { name, open, target } => return login(&name, open, target),
        Command::Logout { name, target } => logout(&name, target)?,
        Command::Import { file, dry_run, target } => import(&file, dry_run, target)?,
        Command::Remove { name, target } => {
            // A running host forgets the login it holds (and revokes it) first: a server
            // added again under this name must ask for a login anew.
            if let Ok(client) = Client::connect(target.workdir.clone()) {
                client.delete(&login_path(&name))?;
            }
            let instance = open_instance(target)?;
            let removed = mcp_servers::remove(&instance, &name)?;
            Logins::new(&instance.state_dir()).forget_all(&name)?;
            outln!("removed `{name}` ({})", removed.display());
            // The variables it was allowed go with it: a manifest dropped in later under the
            // name is not given them.
            match mcp_servers::disallow_variables(&instance, &name) {
                Ok(taken) if !taken.is_empty() => {
                    eprintln!("took back {} (the root config's mcp.allowEnv)", butler_mcp::host_env::listed(&taken));
                }
                Ok(_) => {}
                Err(e) => eprintln!("butler: cannot take back its variables in the root config's mcp.allowEnv: {e}"),
            }
        }
        Command::Held { json, target } => held(json, target)?,
        Command::Approve { provider, items, all, trust, distrust, target } => {
            approve(&provider, &items, all, (trust || distrust).then_some(trust), target)?;
        }
        Command::Start { id, target } => act(&id, "start", target)?,
        Command::Stop { id, target } => act(&id, "stop", target)?,
        Command::Restart { id, target } => act(&id, "restart", target)?,
        Command::Log { follow, tool, method, provider, outcome, endpoint, limit, target } => {
            let filter = [
                ("name", tool),
                ("method", method),
                ("provider", provider),
                ("outcome", outcome),
                ("endpoint", endpoint),
            ];
            log(follow, &filter, limit, target)?;
        }
        Command::Status { json, target } => {
            let status = Client::connect(target.workdir)?.get("/mcp/status")?;
            if json {
                outln!("{status:#}");
            } else {
                out!("{}", render(&status));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The instance `target` names (or the default one), opened without a running host.
fn open_instance(target: Target) -> anyhow::Result<butler_host::instance::Instance> {
    let workdir = super::settings::workdir(target.workdir, &super::settings::Settings::load()?)?;
    Ok(butler_host::instance::Instance::open(&workdir)?)
}

/// `K=V` arguments of option `flag`, as a map.
fn pairs(args: &[String], flag: &str) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    args.iter().map(|arg| mcp_servers::pair(arg).map_err(|why| anyhow::anyhow!("{flag}: {why}"))).collect()
}

/// Writes `server` into the instance (and `client`, its pre-registered OAuth client, into
/// the state folder) and says where its tools will be.
fn add(server: &NewServer, client: Option<&Preregistered>, target: Target) -> anyhow::Result<()> {
    let instance = open_instance(target)?;
    let logins = Logins::new(&instance.state_dir());
    // Before the manifest (a running host may dial the server as soon as it is there), and
    // never over what a server already there under the name keeps.
    let kept = client.filter(|_| !mcp_servers::folder(&instance, &server.name).exists());
    // The variables the owner's own --header and --env name are allowed (mcp.allowEnv)
    // before the manifest is there, so the server is never dialled without them; only for
    // a server that can be added.
    let variables = server.reach.variables();
    if !variables.is_empty() && mcp_servers::check(&instance, server).is_ok() {
        let allowed = mcp_servers::allow_variables(&instance, &server.name, &variables).map_err(|e| {
            anyhow::anyhow!("cannot give it its variables in the root config's mcp.allowEnv (nothing was added): {e}")
        })?;
        if !allowed.is_empty() {
            eprintln!(
                "gave it {} from the host's environment (the root config's mcp.allowEnv)",
                butler_mcp::host_env::listed(&allowed)
            );
        }
    }
    if let Some(client) = kept {
        logins.save_client(&server.name, client)?;
    }
    let added = mcp_servers::add(&instance, server);
    if added.is_err() && kept.is_some() {
        // Not added: the client kept for it goes too.
        logins.forget_client(&server.name)?;
    }
    let file = added.map_err(|e| match e {
        mcp_servers::ServerError::Invalid(problems) => {
            anyhow::anyhow!("`{}` cannot be added:\n  {}", server.name, problems.join("\n  "))
        }
        other => other.into(),
    })?;
    outln!("added `{}`: {}", server.name, file.display());
    let namespace = server.name.replace('-', "_");
    if instance.config.scan_roots.iter().any(|root| root == mcp_servers::FOLDER) {
        eprintln!(
            "its tools join the hub as `{namespace}__<tool>` — a running host picks it up by itself; `butler mcp status` shows it"
        );
    } else {
        eprintln!(
            "the root config's scanRoots leave out `{}`: add it there for the hub to see this server",
            mcp_servers::FOLDER
        );
    }
    Ok(())
}

/// How long `butler mcp login` waits for the browser to come back (the host forgets the
/// login then too).
const LOGIN_WAIT: std::time::Duration = butler_host::upstream::oauth::broker::PENDING_FOR;

/// `butler mcp login NAME`: begins the login on the running host, prints its URL first,
/// then waits for its outcome.
fn login(name: &str, open: bool, target: Target) -> anyhow::Result<ExitCode> {
    let client = Client::connect(target.workdir)?;
    let begun = client.post(&login_path(name), &serde_json::json!({}))?;
    let (Some(url), Some(id)) = (begun["url"].as_str(), begun["login"].as_str()) else {
        anyhow::bail!("the host began no login (its answer has no URL)");
    };
    outln!("{url}");
    if open && let Err(e) = open_browser(url) {
        eprintln!("cannot open a browser ({e}): open the URL above yourself");
    }
    eprintln!("waiting for the browser to come back to the host (at most {} min)…", LOGIN_WAIT.as_secs() / 60);
    let deadline = std::time::Instant::now() + LOGIN_WAIT;
    while std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(300));
        let outcome = client.get(&format!("/mcp/logins/{id}"))?;
        match outcome["state"].as_str() {
            Some("done") => {
                outln!("logged in to `{name}`");
                return Ok(ExitCode::SUCCESS);
            }
            Some("failed") => {
                anyhow::bail!(
                    "the login to `{name}` failed: {}",
                    outcome["reason"].as_str().unwrap_or("no reason given")
                );
            }
            _ => {}
        }
    }
    anyhow::bail!(
        "the browser did not come back within {} min: run `butler mcp login {name}` again",
        LOGIN_WAIT.as_secs() / 60
    )
}

/// The API path of server `name`'s login.
fn login_path(name: &str) -> String {
    let encoded = percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC);
    format!("/mcp/providers/{encoded}/login")
}

/// Opens `url` in the desktop's browser (`xdg-open`, or `open` on macOS), not waiting.
fn open_browser(url: &str) -> std::io::Result<()> {
    // Only a web page: the opener would hand any other scheme to whatever handles it.
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(std::io::Error::other("it is not an http(s) URL"));
    }
    let opener = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
    std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(drop)
}

/// `butler mcp logout NAME`: through the running host (which also revokes the tokens),
/// else straight in the state folder.
fn logout(name: &str, target: Target) -> anyhow::Result<()> {
    let forgotten = match Client::connect(target.workdir.clone()) {
        Ok(client) => client.delete(&login_path(name))?["forgotten"] == true,
        Err(_) => Logins::new(&open_instance(target)?.state_dir()).forget(name)?,
    };
    if forgotten {
        outln!("logged out of `{name}`: its tokens are forgotten");
    } else {
        outln!("`{name}` had no login");
    }
    Ok(())
}

/// Imports the servers of a client's config `file` (or, `dry_run`, says what it would),
/// then prints the entry the client should keep instead of them.
fn import(file: &std::path::Path, dry_run: bool, target: Target) -> anyhow::Result<()> {
    use mcp_servers::Imported;
    let instance = open_instance(target)?;
    let (client, entries) = mcp_servers::client_config::read(file)?;
    let outcomes = mcp_servers::import(&instance, &entries, dry_run);
    let verb = if dry_run { "would add" } else { "added" };
    for (entry, outcome) in entries.iter().zip(&outcomes) {
        match outcome {
            Imported::Added(name, _) => {
                let how = match entry.outcome.as_ref().map(|s| &s.reach) {
                    Ok(Reach::Http { url, .. }) => butler_mcp::upstream::shown_url(url),
                    Ok(Reach::Stdio { command, .. }) => command.join(" "),
                    Err(_) => String::new(),
                };
                outln!("{verb} `{name}` ({how}) from \"{}\"", entry.name);
                // What it would read from the host's environment, and what it may not yet:
                // an imported file is not the owner's word.
                let reads = entry.outcome.as_ref().map(|s| s.reach.variables()).unwrap_or_default();
                let refused = instance.config.mcp.variables_not_given(name, reads);
                if !refused.is_empty() {
                    outln!(
                        "  it would read {} from the host's environment, which it is not given: they read as unset until you list them under \"{name}\" in the root config's mcp.allowEnv",
                        butler_mcp::host_env::listed(&refused)
                    );
                }
            }
            Imported::Skipped(why) => outln!("skipped \"{}\": {why}", entry.name),
        }
    }
    let added = outcomes.iter().filter(|o| matches!(o, Imported::Added(..))).count();
    outln!(
        "{added} of {} servers {}",
        entries.len(),
        if dry_run { "would be added (nothing was written)" } else { "added" }
    );
    let token_only = instance.config.mcp.auth == butler_host::instance::config::AuthMode::Token;
    // The running host's address, else the one `butler serve` takes by default.
    let origin = butler_host::instance::HostFile::read(&instance.state_dir())
        .map_or_else(|_| format!("http://127.0.0.1:{}", butler_host::http::DEFAULT_PORT), |info| info.url);
    let url = format!("{origin}{}/mcp", butler_host::http::API_PREFIX);
    let program = std::env::current_exe().map_or_else(|_| "butler".to_owned(), |p| p.display().to_string());
    outln!(
        "\nThe client keeps one entry, the hub (this file is left as it is — replace its servers with this):\n{:#}",
        client.hub_entry(&url, &program, token_only)
    );
    Ok(())
}

/// Prints the latest `limit` entries of the activity log that match `filter` (query
/// parameters of `GET /mcp/activity`, each when given), then (with `follow`) the new ones
/// every second until interrupted.
fn log(follow: bool, filter: &[(&str, Option<String>)], limit: usize, target: Target) -> anyhow::Result<()> {
    let client = Client::connect(target.workdir)?;
    let filter: String = filter
        .iter()
        .filter_map(|(key, value)| Some((key, value.as_deref()?)))
        .map(|(key, value)| {
            format!("&{key}={}", percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC))
        })
        .collect();
    let limit = limit.clamp(1, 500);
    if !follow {
        let page = client.get(&format!("/mcp/activity?limit={limit}{filter}"))?;
        print_entries(&page["entries"], true);
        return Ok(());
    }
    // Following goes on from the newest entry, whether it matches or not, so that a filter
    // matching little does not make every poll look back through what it passed over.
    let mut last = newest_seq(&client)?;
    if last > 0 {
        let page = client.get(&format!("/mcp/activity?limit={limit}&before={}{filter}", last + 1))?;
        print_entries(&page["entries"], true);
    }
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
        let newest = newest_seq(&client)?;
        if newest <= last {
            continue;
        }
        // Oldest first, what came after `last` up to `newest`.
        let page = client.get(&format!("/mcp/activity?limit=500&after={last}&before={}{filter}", newest + 1))?;
        let printed = print_entries(&page["entries"], false);
        // A full page may have more behind it: the next poll goes on from its last entry.
        last = if page["next"].is_null() { newest } else { printed.unwrap_or(newest) };
    }
}

/// The `seq` of the newest entry of the activity log, 0 when it is empty.
fn newest_seq(client: &Client) -> anyhow::Result<u64> {
    Ok(client.get("/mcp/activity?limit=1")?["entries"][0]["seq"].as_u64().unwrap_or(0))
}

/// Prints a page oldest first (reversing one that is `newest_first`); the newest `seq`
/// printed.
fn print_entries(entries: &Value, newest_first: bool) -> Option<u64> {
    let mut entries: Vec<&Value> = entries.as_array()?.iter().collect();
    if newest_first {
        entries.reverse();
    }
    for e in &entries {
        let text = |key: &str| e[key].as_str().unwrap_or("-").to_owned();
        let outcome = match e["code"].as_i64() {
            Some(code) => format!("{} {code}", text("outcome")),
            None => text("outcome"),
        };
        outln!(
            "{}  {:<6} {:<10} {:<16} {:<32} {:<12} {:>8.1} ms  {:<14} {} B → {} B",
            text("at"),
            text("endpoint"),
            text("revision"),
            text("method"),
            text("name"),
            text("provider"),
            e["ms"].as_f64().unwrap_or(0.0),
            outcome,
            e["requestBytes"],
            e["responseBytes"],
        );
    }
    entries.last().and_then(|e| e["seq"].as_u64())
}

/// One provider action; prints the provider's state after it.
fn act(id: &str, action: &str, target: Target) -> anyhow::Result<()> {
    let path = format!("/mcp/providers/{id}/{action}");
    let data = Client::connect(target.workdir)?.post(&path, &serde_json::json!({}))?;
    let status = &data["status"];
    let pid = status["pid"].as_u64().map_or_else(|| "-".to_owned(), |pid| format!("pid {pid}"));
    outln!("{id}: {} ({pid})", status["state"].as_str().unwrap_or("unknown"));
    Ok(())
}

fn render(status: &Value) -> String {
    let mut out = String::new();
    let empty = Vec::new();
    let providers = status["providers"].as_array().unwrap_or(&empty);
    let host: Vec<&str> =
        status["host"]["tools"].as_array().unwrap_or(&empty).iter().filter_map(Value::as_str).collect();
    let _ = writeln!(out, "host tools: {}", host.join(", "));
    if providers.is_empty() {
        let _ = writeln!(out, "no MCP providers (an extension declares one with an `mcp` block)");
    }
    for p in providers {
        let text = |key: &str| p[key].as_str().unwrap_or("-").to_owned();
        let pid = p["pid"].as_u64().map_or_else(|| "-".to_owned(), |pid| pid.to_string());
        let tools = p["tools"].as_array().map_or(0, Vec::len);
        let p50 = p["p50Ms"].as_f64().map_or_else(|| "-".to_owned(), |ms| format!("{ms:.1} ms"));
        let held = match p["held"].as_array().map_or(0, Vec::len) {
            0 => String::new(),
            n => format!(" ({n} held for review: `butler mcp held`)"),
        };
        let protocol = p["protocol"].as_str().map(|v| format!(", {v}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "{} ({}__*): {}{protocol}, pid {pid}, {tools} tools{}{held}, {} calls ({} errors, {} timeouts), p50 {p50}",
            text("id"),
            text("namespace"),
            text("state"),
            if p["cached"] == true {
                " (cached)"
            } else if p["pending"] == true {
                " (still starting: lists left out until it answers)"
            } else {
                ""
            },
            p["calls"],
            p["errors"],
            p["timeouts"],
        );
        for rejected in p["rejected"].as_array().unwrap_or(&empty) {
            let _ = writeln!(
                out,
                "  rejected {:?}: {}",
                rejected["tool"].as_str().unwrap_or_default(),
                rejected["reason"].as_str().unwrap_or_default()
            );
        }
        match p["login"]["state"].as_str() {
            Some("needed") => {
                let _ = writeln!(
                    out,
                    "  login needed: {} — `butler mcp login {}`",
                    p["login"]["reason"].as_str().unwrap_or_default(),
                    text("id")
                );
            }
            Some("signed-in") => {
                let scope = p["login"]["scope"].as_str().map(|s| format!(", scope {s}")).unwrap_or_default();
                let _ = writeln!(out, "  logged in at {}{scope}", p["login"]["issuer"].as_str().unwrap_or_default());
            }
            _ => {}
        }
        if let Some(error) = p["lastError"].as_str() {
            let _ = writeln!(out, "  last error: {error}");
        }
    }
    for conflict in status["conflicts"].as_array().unwrap_or(&empty) {
        let _ = writeln!(
            out,
            "conflict: {} wants namespace `{}`, held by {}",
            conflict["id"].as_str().unwrap_or_default(),
            conflict["namespace"].as_str().unwrap_or_default(),
            conflict["heldBy"].as_str().unwrap_or_default()
        );
    }
    out
}

/// `butler mcp token …`: straight on the instance's state directory, so it works whether
/// or not a host runs (a running host reads the file again on its next request).
fn token(command: TokenCommand) -> anyhow::Result<()> {
    use butler_host::instance::{Instance, tokens};
    let (TokenCommand::Add { target, .. } | TokenCommand::List { target } | TokenCommand::Revoke { target, .. }) =
        &command;
    let workdir = super::settings::workdir(target.workdir.clone(), &super::settings::Settings::load()?)?;
    let instance = Instance::open(&workdir)?;
    let state_dir = instance.state_dir();
    match command {
        TokenCommand::Add { name, profile, .. } => {
            if !instance.config.mcp.profiles.contains_key(&profile) {
                let known: Vec<&str> = instance.config.mcp.profiles.keys().map(String::as_str).collect();
                anyhow::bail!(
                    "the root config declares no MCP profile `{profile}` (it declares: {})",
                    if known.is_empty() { "none — add one under mcp.profiles".to_owned() } else { known.join(", ") }
                );
            }
            let token = tokens::add(&state_dir, &name, &profile)?;
            outln!("{token}");
            eprintln!(
                "token `{name}` opens the profile `{profile}` — send it as `Authorization: Bearer <token>` to {}/mcp/p/{profile}; it is shown only now",
                butler_host::http::API_PREFIX
            );
        }
        TokenCommand::List { .. } => {
            let listed = tokens::list(&state_dir)?;
            if listed.is_empty() {
                outln!("no tokens (make one with `butler mcp token add NAME --profile P`)");
            }
            for record in listed {
                outln!("{:<24} profile {:<16} made {}", record.name, record.profile, record.created);
            }
        }
        TokenCommand::Revoke { name, .. } => {
            let gone = tokens::revoke(&state_dir, &name)?;
            outln!("revoked `{}` (profile {})", gone.name, gone.profile);
        }
    }
    Ok(())
}

/// `butler mcp held`: each held tool, and for a changed one the fields that changed.
fn held(json: bool, target: Target) -> anyhow::Result<()> {
    let report = Client::connect(target.workdir)?.get("/mcp/quarantine")?;
    if json {
        outln!("{report:#}");
        return Ok(());
    }
    if report["enabled"] != true {
        outln!("the quarantine is off (`mcp.quarantine` in the root config): nothing is held");
        return Ok(());
    }
    let held = report["held"].as_array().cloned().unwrap_or_default();
    if held.is_empty() {
        outln!("nothing is held");
    }
    for tool in held {
        let text = |key: &str| tool[key].as_str().unwrap_or("-").to_owned();
        let kind = match text("kind").as_str() {
            "tool" | "-" => String::new(),
            kind => format!("{kind}:"),
        };
        outln!("{} {kind}{} ({}): {}", text("provider"), text("name"), text("public"), text("reason"));
        let now = &tool["definition"];
        match tool["approved"].get("definition") {
            // New: all of it — a poisoned parameter description or instructions text must be
            // seen before it is approved, not only the description.
            None => {
                for (key, value) in now.as_object().into_iter().flatten().filter(|(key, _)| *key != "name") {
                    outln!("  {key}: {}", shown(Some(value)));
                }
            }
            Some(before) => {
                let mut keys: Vec<&String> = now.as_object().into_iter().flat_map(|o| o.keys()).collect();
                keys.extend(before.as_object().into_iter().flat_map(|o| o.keys()));
                keys.sort();
                keys.dedup();
                for key in keys.into_iter().filter(|k| now.get(*k) != before.get(*k)) {
                    outln!("  {key}:\n    - {}\n    + {}", shown(before.get(key)), shown(now.get(key)));
                }
            }
        }
    }
    Ok(())
}

/// An item named on the command line: `KIND:NAME` when KIND is one the quarantine knows
/// (a resource's URI keeps its own colons), `instructions` for the provider's
/// instructions, else a tool's name (`tool:instructions` for a tool of that name).
fn item_of(named: &str) -> Value {
    use butler_mcp::quarantine::INSTRUCTIONS;
    if named == INSTRUCTIONS {
        return serde_json::json!({"kind": INSTRUCTIONS, "name": INSTRUCTIONS});
    }
    match named.split_once(':') {
        Some((kind, name)) if butler_mcp::quarantine::Kind::parse(kind).is_some() => {
            serde_json::json!({"kind": kind, "name": name})
        }
        _ => serde_json::json!({"kind": "tool", "name": named}),
    }
}

fn shown(value: Option<&Value>) -> String {
    match value {
        None => "(absent)".to_owned(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    }
}

/// `butler mcp approve PROVIDER [ITEM…] [--all] [--trust|--distrust]`.
fn approve(provider: &str, items: &[String], all: bool, trust: Option<bool>, target: Target) -> anyhow::Result<()> {
    let mut body = serde_json::json!({"provider": provider});
    if all {
        body["all"] = serde_json::json!(true);
    } else if !items.is_empty() {
        body["items"] = items.iter().map(|item| item_of(item)).collect();
    }
    if let Some(trust) = trust {
        body["trust"] = serde_json::json!(trust);
    }
    let done = Client::connect(target.workdir)?.post("/mcp/quarantine/approve", &body)?;
    let approved: Vec<&str> = done["approved"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    outln!(
        "{provider}: approved {}{}",
        if approved.is_empty() { "nothing held".to_owned() } else { approved.join(", ") },
        if done["trusted"] == true { "; trusted wholesale" } else { "" }
    );
    Ok(())
}
