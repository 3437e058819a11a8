//! Notifications: the root config's `notification.command` is told, as JSON on its stdin,
//! when something awaits the owner —
//! - `review`: new items in the review queue (the report whose manifest says `provides:
//!   "review-queue"`), one message per burst: sent once the queue has been quiet for
//!   [`BURST_QUIET`] (or [`BURST_MAX`] after the burst began), with how many await review
//!   and the new items' titles;
//! - `quarantine`: MCP tools, prompts, resources and skills newly held for the owner's
//!   approval (a tool by its name, anything else as `<kind> <name>`);
//! - `confirm`: a delegation's result awaiting the owner's confirmation (handed in through
//!   a [`Notifier`]);
//! - `login`: a remote MCP server whose token could not be refreshed (handed in through a
//!   [`Notifier`] by the OAuth logins).
//!
//! The queue's report is read again only when the files it declares it `watch`es changed.
//! What is there when the host starts is the baseline, not news. The command runs under a
//! keeper with the environment scrubbed as for MCP providers, one at a time, and within
//! [`COMMAND_TIMEOUT`]: a failing, slow or missing command is logged
//! (`<stateDir>/logs/notifications.log`, credentials redacted) and never retried, and never
//! slows anything else.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use butler_catalog::manifest::CommandLine;
use butler_faculty::{CallContext, FacultyRuntime};
use butler_mcp::Hub;
use butler_process::HostEnv;

use crate::instance::Instance;
use crate::instance::live::LiveConfig;
use butler_process::keeper::{self, Input};
use butler_process::launch::Launch;
use butler_process::logs::Log;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

/// How often the queue and the held tools are looked at.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(2);
/// A burst of new review items is sent once the queue was this long without news…
pub const BURST_QUIET: Duration = Duration::from_secs(5);
/// …or this long after its first item, whichever comes first.
pub const BURST_MAX: Duration = Duration::from_secs(60);
/// How long the command may take; then its process group is stopped.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// The most titles one message lists (the count says how many there are).
pub const MAX_TITLES: usize = 20;

/// The most messages from other parts of the host waiting to be sent; beyond, a message is
/// dropped with a log line.
pub const MAX_WAITING: usize = 32;

/// Where other parts of the host hand their notifications (a delegation awaiting
/// confirmation): sent in order, with the same timeout and log. Does nothing when no
/// command is configured.
#[derive(Debug, Clone, Default)]
pub struct Notifier(Option<tokio::sync::mpsc::Sender<Value>>);

impl Notifier {
    /// Queues `message` (its `kind` and `summary` at least); never waits.
    pub fn tell(&self, message: Value) {
        if let Some(sender) = &self.0
            && sender.try_send(message).is_err()
        {
            tracing::warn!("a notification was dropped: {MAX_WAITING} are already waiting to be sent");
        }
    }
}

/// Sends notifications with the command the root config in force names (`config`: it
/// may be set, changed or removed while the host runs), from now on, for as long as the
/// host runs. While none is set, nothing is looked at and what is told is dropped; once
/// one is, what awaits the owner then is the baseline, not news.
pub fn spawn(
    config: Arc<LiveConfig>,
    host: HostEnv,
    instance: Arc<Instance>,
    faculties: Arc<FacultyRuntime>,
    hub: Arc<Hub>,
) -> Notifier {
    let dir = instance.state_dir();
    let log = Arc::new(Log::redacting(dir.join("logs").join("notifications.log")));
    let (sender, mut told) = tokio::sync::mpsc::channel(MAX_WAITING);
    tokio::spawn(async move {
        let mut watch = Watch::default();
        let mut first = true;
        // The queue's titles, and the stamp of the files it watches when they were read.
        let mut read: Option<(u64, Option<Vec<String>>)> = None;
        loop {
            let Some(command) = config.current().config.notification.active().cloned() else {
                first = true;
                let idle = tokio::time::sleep(CHECK_INTERVAL);
                tokio::pin!(idle);
                loop {
                    tokio::select! {
                        () = &mut idle => break,
                        Some(_dropped) = told.recv() => {}
                    }
                }
                continue;
            };
            let stamp = review_stamp(&faculties, &instance);
            let queue = match (&read, stamp) {
                (Some((seen, titles)), Some(now)) if *seen == now => titles.clone(),
                _ => {
                    let titles = review_titles(&faculties).await;
                    read = stamp.map(|now| (now, titles.clone()));
                    titles
                }
            };
            let held: BTreeSet<(String, String)> = hub
                .held_items(None)
                .into_iter()
                .map(|h| (held_label(&h), h.provider))
                .map(|(label, provider)| (provider, label))
                .collect();
            let now = Instant::now();
            let messages = if first { watch.baseline(queue, held) } else { watch.step(queue, held, now) };
            first = false;
            for message in messages {
                send(&command, &host, &dir, &log, &message).await;
            }
            let next_check = tokio::time::sleep(CHECK_INTERVAL);
            tokio::pin!(next_check);
            loop {
                tokio::select! {
                    () = &mut next_check => break,
                    Some(message) = told.recv() => send(&command, &host, &dir, &log, &message).await,
                }
            }
        }
    });
    Notifier(Some(sender))
}

/// The latest modification time among the files the review queue's report watches
/// (`None` when it declares none: then it is read every time).
fn review_stamp(faculties: &FacultyRuntime, instance: &Instance) -> Option<u64> {
    let declared = faculties.declared();
    let (faculty, report) = declared.review_queue.as_ref()?;
    let (_, _, paths) = declared.watched.iter().find(|(f, r, _)| f == faculty && r == report)?;
    let folders = instance.folders();
    let modified = |path: &Path| {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    };
    paths.iter().map(|p| modified(&instance.path(&butler_faculty::expand_folders(&folders, p)))).max()
}

/// The titles in the review queue (`None` when no faculty provides one, or it failed).
async fn review_titles(faculties: &Arc<FacultyRuntime>) -> Option<Vec<String>> {
    let (faculty, report) = faculties.declared().review_queue.clone()?;
    let context = CallContext::top(false).until(faculties.deadline_for(&faculty));
    let runtime = Arc::clone(faculties);
    let deadline = context.deadline();
    let data = faculties.blocking(deadline, move || runtime.report(&faculty, &report, &context)).await.ok()?;
    Some(
        data.get("items")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|i| i.get("title").and_then(Value::as_str))
            .map(str::to_owned)
            .collect(),
    )
}

/// What was last seen, and the burst being gathered.
#[derive(Debug, Default)]
pub struct Watch {
    queue: BTreeMap<String, usize>,
    held: BTreeSet<(String, String)>,
    burst: Option<Burst>,
}

#[derive(Debug)]
struct Burst {
    titles: Vec<String>,
    began: Instant,
    last: Instant,
    waiting: usize,
}

impl Watch {
    /// Takes what is there now as known: nothing to tell.
    pub fn baseline(&mut self, queue: Option<Vec<String>>, held: BTreeSet<(String, String)>) -> Vec<Value> {
        if let Some(queue) = queue {
            self.queue = counted(&queue);
        }
        self.held = held;
        Vec::new()
    }

    /// The messages due at `now`, given the queue's titles and the held tools now.
    pub fn step(&mut self, queue: Option<Vec<String>>, held: BTreeSet<(String, String)>, now: Instant) -> Vec<Value> {
        let mut messages = Vec::new();
        let new_tools: Vec<&(String, String)> = held.difference(&self.held).collect();
        if !new_tools.is_empty() {
            let tools: Vec<Value> = new_tools.iter().map(|(p, n)| json!({"provider": p, "tool": n})).collect();
            messages.push(json!({
                "kind": "quarantine",
                "summary": format!("{} MCP definition(s) await your approval", new_tools.len()),
                "count": held.len(),
                "tools": tools,
            }));
        }
        self.held = held;
        if let Some(queue) = queue {
            let now_counted = counted(&queue);
            let mut fresh = Vec::new();
            for (title, n) in &now_counted {
                let before = self.queue.get(title).copied().unwrap_or(0);
                fresh.extend(std::iter::repeat_n(title.clone(), n.saturating_sub(before)));
            }
            self.queue = now_counted;
            if !fresh.is_empty() {
                let burst = self.burst.get_or_insert(Burst { titles: Vec::new(), began: now, last: now, waiting: 0 });
                burst.titles.extend(fresh);
                burst.last = now;
            }
            if let Some(burst) = &mut self.burst {
                burst.waiting = queue.len();
            }
        }
        let due = self.burst.as_ref().is_some_and(|b| now >= b.last + BURST_QUIET || now >= b.began + BURST_MAX);
        if due && let Some(burst) = self.burst.take() {
            let mut titles = burst.titles;
            let new = titles.len();
            titles.truncate(MAX_TITLES);
            messages.push(json!({
                "kind": "review",
                "summary": format!("{new} new item(s) await your review ({} in all)", burst.waiting),
                "count": burst.waiting,
                "new": new,
                "titles": titles,
            }));
        }
        messages
    }
}

fn counted(titles: &[String]) -> BTreeMap<String, usize> {
    let mut counted = BTreeMap::new();
    for title in titles {
        *counted.entry(title.clone()).or_default() += 1;
    }
    counted
}

/// Runs the command with `message` on its stdin, within [`COMMAND_TIMEOUT`].
async fn send(command: &CommandLine, host: &HostEnv, state_dir: &Path, log: &Arc<Log>, message: &Value) {
    let mut message = message.clone();
    message["at"] = json!(butler_catalog::time::rfc3339(butler_catalog::time::now_ms()));
    let kind = message["kind"].as_str().unwrap_or_default().to_owned();
    let launch = match Launch::of(command, None, &BTreeMap::new(), state_dir, host) {
        Ok(launch) => launch.scrubbed(&[]),
        Err(e) => {
            log.note(format!("{kind}: the notification command cannot start: {e}"));
            return;
        }
    };
    let mut kept = match keeper::spawn_kept(&launch, Input::Piped) {
        Ok(kept) => kept,
        Err(e) => {
            log.note(format!("{kind}: cannot start `{}`: {e}", launch.program()));
            return;
        }
    };
    kept.log_output(log, true);
    let stdin = kept.child.stdin.take();
    let outcome = tokio::time::timeout(COMMAND_TIMEOUT, async {
        if let Some(mut stdin) = stdin {
            let mut line = message.to_string();
            line.push('\n');
            // A command that does not read its input still runs; what it misses is its own.
            let _ = stdin.write_all(line.as_bytes()).await;
        }
        kept.child.wait().await
    })
    .await;
    match outcome {
        Ok(Ok(status)) if status.success() => log.note(format!("{kind}: sent")),
        Ok(Ok(status)) => log.note(format!("{kind}: the notification command failed ({status})")),
        Ok(Err(e)) => log.note(format!("{kind}: cannot wait for the notification command: {e}")),
        Err(_) => {
            log.note(format!(
                "{kind}: the notification command took longer than {} s: stopped",
                COMMAND_TIMEOUT.as_secs()
            ));
            kept.stop().await;
        }
    }
    log.flush();
}

/// How a held item is named in a `quarantine` message: a tool by its own name, anything
/// else as `<kind> <name>` (a prompt's name, a resource's URI…).
fn held_label(held: &butler_mcp::HeldItem) -> String {
    match held.kind {
        butler_mcp::quarantine::Kind::Tool => held.name.clone(),
        kind => format!("{} {}", kind.as_str(), held.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn titles(list: &[&str]) -> Option<Vec<String>> {
        Some(list.iter().map(|t| (*t).to_owned()).collect())
    }

    #[test]
    fn a_burst_of_new_review_items_is_one_message_once_quiet() {
        let mut watch = Watch::default();
        let start = Instant::now();
        assert!(watch.baseline(titles(&["old"]), BTreeSet::new()).is_empty(), "the baseline is not news");
        let at = |s: u64| start + Duration::from_secs(s);
        assert!(watch.step(titles(&["old", "a"]), BTreeSet::new(), at(2)).is_empty(), "the burst gathers");
        assert!(watch.step(titles(&["old", "a", "b", "b"]), BTreeSet::new(), at(4)).is_empty());
        assert!(
            watch.step(titles(&["old", "a", "b", "b"]), BTreeSet::new(), at(6)).is_empty(),
            "not quiet long enough"
        );
        let sent = watch.step(titles(&["old", "a", "b", "b"]), BTreeSet::new(), at(9));
        let [message] = &sent[..] else { panic!("one message: {sent:?}") };
        assert_eq!((&message["kind"], &message["count"], &message["new"]), (&json!("review"), &json!(4), &json!(3)));
        assert_eq!(message["titles"], json!(["a", "b", "b"]));
        assert!(watch.step(titles(&["a", "b", "b"]), BTreeSet::new(), at(20)).is_empty(), "a decision is not news");
    }

    #[test]
    fn a_steady_stream_is_sent_at_the_latest_after_the_burst_maximum() {
        let mut watch = Watch::default();
        let start = Instant::now();
        watch.baseline(titles(&[]), BTreeSet::new());
        let mut queue = Vec::new();
        let mut sent = Vec::new();
        for s in (0..=BURST_MAX.as_secs()).step_by(2) {
            queue.push(format!("t{s}"));
            let list: Vec<&str> = queue.iter().map(String::as_str).collect();
            sent.extend(watch.step(titles(&list), BTreeSet::new(), start + Duration::from_secs(s)));
        }
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert_eq!(sent[0]["new"], json!(31));
        assert_eq!(sent[0]["titles"].as_array().map(Vec::len), Some(MAX_TITLES));
    }

    #[test]
    fn newly_held_tools_are_told_at_once() {
        let mut watch = Watch::default();
        let held = |names: &[&str]| names.iter().map(|n| ("fs".to_owned(), (*n).to_owned())).collect();
        watch.baseline(None, held(&["read"]));
        let sent = watch.step(None, held(&["read", "write"]), Instant::now());
        let [message] = &sent[..] else { panic!("one message: {sent:?}") };
        assert_eq!(message["kind"], "quarantine");
        assert_eq!(message["tools"], json!([{"provider": "fs", "tool": "write"}]));
        assert!(watch.step(None, held(&["read", "write"]), Instant::now()).is_empty());
    }
}
