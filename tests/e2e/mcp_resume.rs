//! Resumable streams of the 2025 revisions: every event of a session's `GET` stream and of a
//! `POST`'s streamed answer has an id; a client that lost the connection resumes with a
//! `GET` carrying `Last-Event-ID` and gets what it missed once and in order (the call goes on
//! meanwhile); an id of another session's stream, or a forged one, opens nothing; and past
//! the replay window the client is told rather than resumed with a gap.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp::{Client, LIMIT, fake, instance, tools};
use crate::util::{Butler, wait_until, write_manifest};

/// One SSE event: its id and its data.
type Event = (Option<String>, String);

/// An open HTTP response read line by line.
struct Connection {
    status: u16,
    reader: BufReader<TcpStream>,
}

/// A request over a fresh connection to the main MCP endpoint, its head read.
fn open(butler: &Butler, method: &str, headers: &[(&str, &str)], body: Option<&Value>) -> Connection {
    let authority = butler.authority().to_owned();
    let mut stream = TcpStream::connect(&authority).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(3))).expect("timeout");
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut head = format!(
        "{method} /myspace-butler/api/mcp HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    write!(stream, "{head}\r\n{body}").expect("send");
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).expect("status line");
    let status = line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
            break;
        }
    }
    Connection { status, reader }
}

impl Connection {
    /// The next event, or `None` when none comes within the read timeout or the stream ends
    /// (chunk sizes and keep-alive comments are skipped).
    fn next_event(&mut self) -> Option<Event> {
        let (mut id, mut data, mut any) = (None, None::<String>, false);
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line).unwrap_or(0) == 0 {
                return None;
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if let Some(value) = line.strip_prefix("id: ") {
                (id, any) = (Some(value.to_owned()), true);
            } else if let Some(value) = line.strip_prefix("data: ").or_else(|| line.strip_prefix("data:")) {
                data = Some(data.map_or_else(|| value.to_owned(), |d| d + "\n" + value));
                any = true;
            } else if line.is_empty() && any {
                return Some((id, data.unwrap_or_default()));
            }
        }
    }

    /// Every event until none comes within the read timeout.
    fn drain(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.next_event()).collect()
    }

    /// The whole body (of a refusal).
    fn body(mut self) -> String {
        let mut text = String::new();
        while self.reader.read_line(&mut text).unwrap_or(0) > 0 {}
        text
    }
}

/// `(stream, n)` of an event id `<stream>-<n>`.
fn parts(id: &str) -> (String, u64) {
    let (stream, n) = id.rsplit_once('-').unwrap_or_else(|| panic!("an event id: {id}"));
    (stream.to_owned(), n.parse().unwrap_or_else(|_| panic!("a number in {id}")))
}

/// The message an event carries.
fn message(event: &Event) -> Value {
    serde_json::from_str(&event.1).unwrap_or_else(|e| panic!("{event:?}: {e}"))
}

/// Whether the main endpoint lists a tool of namespace `prefix`.
fn lists(client: &Client<'_>, prefix: &str) -> bool {
    let (_, _, listed) = client.post(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}), &[]);
    listed["result"]["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["name"].as_str().is_some_and(|n| n.starts_with(prefix))))
}

#[test]
fn a_dropped_get_stream_resumes_with_what_it_missed_once_and_in_order_and_only_for_its_session() {
    let dir = instance();
    std::fs::create_dir_all(dir.path().join("faculties")).expect("mkdir");
    let butler = Butler::start(dir.path());
    let client = Client::connect(&butler, "/mcp");
    let session = client.session_id().to_owned();
    let mut stream = open(&butler, "GET", &[("mcp-session-id", &session)], None);
    assert_eq!(stream.status, 200);
    // The priming event: an id and no message, to resume from.
    let (primed, data) = stream.next_event().expect("the priming event");
    let (id, n) = parts(&primed.expect("an id"));
    assert_eq!((n, data.as_str()), (0, ""));

    let notes = dir.path().join("faculties/notes.wasm");
    std::fs::copy(crate::util::guests::NOTES, &notes).expect("copy");
    let mut last = None;
    for _ in 0..20 {
        let event = stream.next_event().expect("the change is told");
        let told = message(&event)["method"] == "notifications/tools/list_changed";
        last = event.0;
        if told {
            break;
        }
    }
    let last = last.expect("an id on every event");
    let (same, seen) = parts(&last);
    assert_eq!(same, id, "one stream, one id prefix");
    drop(stream);

    // While the client is away, the tools change twice.
    std::fs::remove_file(&notes).expect("remove");
    wait_until(LIMIT, "the tools go with the faculty", || !lists(&client, "notes__"));
    std::fs::copy(crate::util::guests::NOTES, &notes).expect("copy");
    wait_until(LIMIT, "the tools come back", || lists(&client, "notes__"));

    let mut resumed = open(&butler, "GET", &[("mcp-session-id", &session), ("last-event-id", &last)], None);
    assert_eq!(resumed.status, 200);
    let missed = resumed.drain();
    let numbers: Vec<u64> = missed.iter().map(|e| parts(e.0.as_deref().expect("an id")).1).collect();
    let expected: Vec<u64> = (seen + 1..seen + 1 + missed.len() as u64).collect();
    assert_eq!(numbers, expected, "each missed event once, in order, none before: {missed:?}");
    let changes = missed.iter().filter(|e| message(e)["method"] == "notifications/tools/list_changed").count();
    assert!(changes >= 2, "both changes: {missed:?}");
    drop(resumed);

    // Resuming after the last one replays nothing again.
    let newest = missed.last().and_then(|e| e.0.clone()).expect("an id");
    let mut again = open(&butler, "GET", &[("mcp-session-id", &session), ("last-event-id", &newest)], None);
    assert_eq!(again.status, 200);
    assert_eq!(again.drain(), Vec::<Event>::new(), "nothing twice");

    // Another session's client cannot resume this stream; a forged id opens nothing either.
    let other = Client::connect(&butler, "/mcp");
    for (session, forged) in [(other.session_id(), newest.as_str()), (&session, "00000000000000000000000000000000-1")] {
        let refused = open(&butler, "GET", &[("mcp-session-id", session), ("last-event-id", forged)], None);
        assert_eq!(refused.status, 400, "{forged}");
        let body = refused.body();
        assert!(body.contains("names no event of this session's streams"), "{body}");
        assert!(!body.contains("list_changed"), "{body}");
    }
}

#[test]
fn a_calls_dropped_stream_resumes_to_its_answer_and_past_the_window_is_refused() {
    tools();
    let dir = instance();
    write_manifest(dir.path(), "tools/fake", &fake("fake", &dir.path().join("fake.log"), json!({})));
    let butler = Butler::start(dir.path());
    let client = Client::connect(&butler, "/mcp");
    let session = client.session_id().to_owned();
    let call = |steps: u32, pause: f64| {
        json!({"jsonrpc": "2.0", "id": 4242, "method": "tools/call", "params": {"name": "fake__progress",
               "arguments": {"steps": steps, "pause": pause}, "_meta": {"progressToken": "p"}}})
    };

    // Drop the call's stream after its first progress: the call goes on, and the resumed
    // stream carries the rest of the progress and the answer, then ends.
    let mut stream = open(&butler, "POST", &[("mcp-session-id", &session)], Some(&call(6, 0.3)));
    assert_eq!(stream.status, 200);
    let (primed, data) = stream.next_event().expect("the priming event");
    assert_eq!((parts(&primed.expect("an id")).1, data.as_str()), (0, ""));
    let first = stream.next_event().expect("the first progress");
    assert_eq!(message(&first)["params"]["progress"], 1, "{first:?}");
    drop(stream);
    let last = first.0.expect("an id");
    let mut resumed = open(&butler, "GET", &[("mcp-session-id", &session), ("last-event-id", &last)], None);
    assert_eq!(resumed.status, 200);
    let rest: Vec<Value> = resumed.drain().iter().map(message).collect();
    let progress: Vec<&Value> = rest.iter().map(|m| &m["params"]["progress"]).filter(|p| !p.is_null()).collect();
    assert_eq!(progress, [2, 3, 4, 5, 6].map(|n| json!(n)).iter().collect::<Vec<_>>(), "{rest:?}");
    assert_eq!(rest.last().map(|m| m["result"]["content"][0]["text"].clone()), Some(json!("done")), "{rest:?}");

    // Far more than the window keeps while away: resuming from the start is refused, saying so.
    let mut stream = open(&butler, "POST", &[("mcp-session-id", &session)], Some(&call(400, 0.0)));
    let _priming = stream.next_event();
    let first = stream.next_event().and_then(|e| e.0).expect("an id");
    drop(stream);
    let mut refusal = String::new();
    wait_until(LIMIT, "the window to move past the first event", || {
        let resumed = open(&butler, "GET", &[("mcp-session-id", &session), ("last-event-id", &first)], None);
        let gone = resumed.status == 410;
        if gone {
            refusal = resumed.body();
        }
        gone
    });
    assert!(refusal.contains("no longer kept") && refusal.contains("cannot resume without a gap"), "{refusal}");
}
