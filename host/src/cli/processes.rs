//! The processes the running host keeps, as a pm2 or process-compose user expects them:
//! `butler ps` (hosted tools and services, MCP providers: state, pid, uptime, restarts,
//! CPU, memory, last exit), `butler start|stop|restart ID`, `butler logs ID [--lines N]
//! [--follow] [--stderr]`.

use std::fmt::Write as _;
use std::io::BufRead;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use serde_json::{Value, json};

use super::Target;
use super::client::Client;

/// `butler ps`.
#[derive(Debug, clap::Args)]
pub struct Ps {
    /// Print the list as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    target: Target,
}

/// `butler start|stop|restart ID`.
#[derive(Debug, clap::Args)]
pub struct Act {
    /// A hosted tool's or service's id, or an MCP provider's.
    id: String,
    #[command(flatten)]
    target: Target,
}

/// `butler logs ID`.
#[derive(Debug, clap::Args)]
pub struct Logs {
    /// A hosted tool's or service's id, or an MCP provider's.
    id: String,
    /// Keep printing new lines until interrupted.
    #[arg(long, short)]
    follow: bool,
    /// Only the lines the program wrote on stderr.
    #[arg(long)]
    stderr: bool,
    /// How many of the kept lines to show first, per stream (its output, its errors, the
    /// host's notes about it); earlier runs' lines are kept too.
    #[arg(long, short = 'n', default_value_t = 15, value_name = "N")]
    lines: usize,
    #[command(flatten)]
    target: Target,
}

/// One process the host keeps: a hosted tool or service, or an MCP provider.
struct Process {
    id: String,
    /// `tool`, `service` or `mcp`.
    kind: &'static str,
    status: Value,
}

impl Process {
    /// Where its routes are: `/tools/ID`, `/services/ID`, `/mcp/providers/ID`.
    fn route(&self) -> String {
        match self.kind {
            "mcp" => format!("/mcp/providers/{}", self.id),
            kind => format!("/{kind}s/{}", self.id),
        }
    }
}

/// Every hosted tool and service (not the unmanaged ones: Butler runs nothing for them),
/// then every MCP provider, as the host lists them.
fn processes(client: &Client) -> anyhow::Result<Vec<Process>> {
    let mut found = Vec::new();
    for (path, key, kind) in [("/overview", "tools", "tool"), ("/services", "services", "service")] {
        for item in client.get(path)?[key].as_array().into_iter().flatten() {
            if item["state"] == "unmanaged" || item.get("restart").is_none() {
                continue;
            }
            let id = item["id"].as_str().unwrap_or_default().to_owned();
            found.push(Process { id, kind, status: item.clone() });
        }
    }
    for provider in client.get("/mcp/status")?["providers"].as_array().into_iter().flatten() {
        let id = provider["id"].as_str().unwrap_or_default().to_owned();
        found.push(Process { id, kind: "mcp", status: provider.clone() });
    }
    Ok(found)
}

/// The process `id` names: a hosted one first, else an MCP provider.
fn find(client: &Client, id: &str) -> anyhow::Result<Process> {
    let mut all = processes(client)?;
    match all.iter().position(|p| p.id == id) {
        Some(index) => Ok(all.swap_remove(index)),
        None => bail!(
            "no hosted tool or service and no MCP provider `{id}` (`butler ps` lists them; an extension without a \
             `hosted` or `mcp` block runs no process)"
        ),
    }
}

/// `butler ps`.
pub fn ps(args: &Ps) -> anyhow::Result<ExitCode> {
    let client = Client::connect(args.target.workdir.clone())?;
    let mut list = processes(&client)?;
    // The host measures its hosted items; a provider's use is read here, over a short while.
    let first: Vec<_> = list.iter().map(|p| pid(p).and_then(butler_process::usage::of_tree)).collect();
    if list.iter().zip(&first).any(|(p, usage)| p.kind == "mcp" && usage.is_some()) {
        std::thread::sleep(Duration::from_millis(250));
    }
    for (process, earlier) in list.iter_mut().zip(first) {
        if process.kind != "mcp" {
            continue;
        }
        let now = pid(process).and_then(butler_process::usage::of_tree);
        if let (Some(now), Some(earlier)) = (now, earlier) {
            process.status["cpuPercent"] = json!(now.cpu_percent_since(&earlier));
            process.status["rssBytes"] = json!(now.rss_bytes);
        }
    }
    if args.json {
        let rows: Vec<Value> = list.iter().map(|p| json!({"id": p.id, "kind": p.kind, "status": p.status})).collect();
        outln!("{:#}", json!(rows));
        return Ok(ExitCode::SUCCESS);
    }
    out!("{}", table(&list));
    Ok(ExitCode::SUCCESS)
}

fn pid(process: &Process) -> Option<u32> {
    process.status["pid"].as_u64().and_then(|pid| u32::try_from(pid).ok())
}

fn table(list: &[Process]) -> String {
    if list.is_empty() {
        return "no processes: no extension has a `hosted` or `mcp` block\n".to_owned();
    }
    let now = butler_host::catalog::time::now_ms();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<24} {:<8} {:<10} {:>8} {:>8} {:>8} {:>7} {:>9}  LAST EXIT",
        "ID", "KIND", "STATE", "PID", "UPTIME", "RESTARTS", "CPU", "MEM"
    );
    for p in list {
        let s = &p.status;
        let dash = || "-".to_owned();
        let last_exit = match (&s["lastExit"]["code"], s["lastExit"]["at"].as_u64()) {
            (Value::Number(code), Some(at)) => {
                let how = if s["lastExit"]["requested"] == true { "stopped, " } else { "" };
                format!("{how}code {code}, {} ago", duration(now.saturating_sub(at)))
            }
            _ => dash(),
        };
        let _ = writeln!(
            out,
            "{:<24} {:<8} {:<10} {:>8} {:>8} {:>8} {:>7} {:>9}  {last_exit}",
            p.id,
            p.kind,
            s["state"].as_str().unwrap_or("-"),
            s["pid"].as_u64().map_or_else(dash, |pid| pid.to_string()),
            s["uptimeMs"].as_u64().map_or_else(dash, duration),
            s["restarts"].as_u64().map_or_else(dash, |n| n.to_string()),
            s["cpuPercent"].as_f64().map_or_else(dash, |c| format!("{c:.1}%")),
            s["rssBytes"].as_u64().map_or_else(dash, megabytes),
        );
    }
    out
}

/// `ms` as the largest two units: `45s`, `3m12s`, `2h05m`, `4d02h`.
fn duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1_000_000.0)
}

/// `butler start|stop|restart ID`: prints the state after it (and the pid while it runs).
pub fn act(args: &Act, action: &str) -> anyhow::Result<ExitCode> {
    let client = Client::connect(args.target.workdir.clone())?;
    let process = find(&client, &args.id)?;
    let data = client.post(&format!("{}/{action}", process.route()), &json!({}))?;
    let status = &data["status"];
    let pid = status["pid"].as_u64().map(|pid| format!(" (pid {pid})")).unwrap_or_default();
    outln!("{}: {}{pid}", args.id, status["state"].as_str().unwrap_or("unknown"));
    Ok(ExitCode::SUCCESS)
}

/// `butler logs ID`: the last `--lines` kept lines of each stream (the host keeps the
/// latest of each item, earlier runs' included), then, with `--follow`, each new one as it
/// comes.
pub fn logs(args: &Logs) -> anyhow::Result<ExitCode> {
    let client = Client::connect(args.target.workdir.clone())?;
    let process = find(&client, &args.id)?;
    let mut stream = client.stream(&format!("{}/log", process.route()))?;
    let (mut event, mut data, mut line) = (String::new(), String::new(), String::new());
    // The kept lines, until the host says the live ones begin.
    let mut backlog: Option<Vec<Value>> = Some(Vec::new());
    loop {
        line.clear();
        if stream.read_line(&mut line)? == 0 {
            // The host closed the stream: it stopped, or the item went away.
            if let Some(kept) = backlog.take() {
                print_last(&kept, args);
            }
            return Ok(ExitCode::SUCCESS);
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if let Some(value) = line.strip_prefix("event:") {
            value.trim().clone_into(&mut event);
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push_str(value.trim_start());
        } else if line.is_empty() && !event.is_empty() {
            match event.as_str() {
                "log" => {
                    let entry: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
                    match backlog.as_mut() {
                        Some(kept) => kept.push(entry),
                        None if shown(&entry, args) => outln!("{}", log_line(&entry)),
                        None => {}
                    }
                }
                "live" => {
                    if let Some(kept) = backlog.take() {
                        print_last(&kept, args);
                    }
                    if !args.follow {
                        return Ok(ExitCode::SUCCESS);
                    }
                }
                "skipped" => {
                    let lines = serde_json::from_str::<Value>(&data).unwrap_or(Value::Null)["lines"].clone();
                    eprintln!("butler: {lines} lines were skipped: this terminal read slower than they came");
                }
                _ => {}
            }
            event.clear();
            data.clear();
        }
    }
}

/// Whether `entry` is shown (`--stderr`: only the program's errors).
fn shown(entry: &Value, args: &Logs) -> bool {
    !args.stderr || entry["stream"] == "stderr"
}

/// Prints the last `--lines` entries of each stream among `kept`.
fn print_last(kept: &[Value], args: &Logs) {
    for entry in last_lines(kept, args) {
        outln!("{}", log_line(entry));
    }
}

/// The last `--lines` shown entries of each stream among `kept`, in their order.
fn last_lines<'a>(kept: &'a [Value], args: &Logs) -> Vec<&'a Value> {
    let mut room: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut chosen: Vec<&Value> = kept
        .iter()
        .rev()
        .filter(|entry| shown(entry, args))
        .filter(|entry| {
            let left = room.entry(entry["stream"].as_str().unwrap_or("stdout")).or_insert(args.lines);
            let take = *left > 0;
            *left = left.saturating_sub(1);
            take
        })
        .collect();
    chosen.reverse();
    chosen
}

/// One entry as a line: fixed-width time, the stream (`out`, `err`, or `butler` for the
/// host's notes), the text.
fn log_line(entry: &Value) -> String {
    let at = entry["at"].as_u64().map(butler_host::catalog::time::rfc3339).unwrap_or_default();
    let mark = match entry["stream"].as_str() {
        Some("stderr") => "err",
        Some("butler") => "butler",
        _ => "out",
    };
    format!("{at} {mark:<6} {}", entry["text"].as_str().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backlog_shows_the_last_lines_of_each_stream() {
        let kept: Vec<Value> = (0..6)
            .map(|n| json!({"at": n, "stream": if n % 2 == 0 { "stdout" } else { "stderr" }, "text": n.to_string()}))
            .collect();
        let texts = |args: &Logs| -> Vec<String> {
            last_lines(&kept, args).iter().map(|e| e["text"].as_str().unwrap_or_default().to_owned()).collect()
        };
        let args = |lines: usize, stderr: bool| Logs {
            id: "x".into(),
            follow: false,
            stderr,
            lines,
            target: Target { workdir: None },
        };
        assert_eq!(texts(&args(2, false)), ["2", "3", "4", "5"]);
        assert_eq!(texts(&args(2, true)), ["3", "5"]);
        assert_eq!(texts(&args(0, false)), Vec::<String>::new());
        assert_eq!(texts(&args(99, false)).len(), 6);
    }

    #[test]
    fn log_lines_line_up_and_name_the_hosts_notes() {
        let note = json!({"at": 1_796_014_188_100_u64, "stream": "butler", "text": "exited with code 3"});
        let out = json!({"at": 1_796_014_188_000_u64, "stream": "stdout", "text": "hello"});
        assert_eq!(log_line(&note), "2026-11-30T04:49:48.100Z butler exited with code 3");
        assert_eq!(log_line(&out), "2026-11-30T04:49:48.000Z out    hello");
    }

    #[test]
    fn durations_show_their_two_largest_units() {
        assert_eq!(duration(999), "0s");
        assert_eq!(duration(45_000), "45s");
        assert_eq!(duration(192_000), "3m12s");
        assert_eq!(duration(7_500_000), "2h05m");
        assert_eq!(duration(3 * 86_400_000 + 7_200_000), "3d02h");
    }
}
