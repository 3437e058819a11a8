//! Talking to the running host from the CLI: find it through `<stateDir>/host.json`,
//! authenticate with the owner token, and turn answers into readable output.
//!
//! Requests go over the host's local socket (`<stateDir>/host.sock`) when it has one —
//! the owner token over that socket also makes the CLI the operator — and over loopback
//! TCP otherwise.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use butler_host::instance::{HostFile, Instance, owner};
use serde_json::Value;

use super::settings::{self, Settings};

/// How long the CLI waits for one answer (a faculty call's deadline is 30 s by default).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

/// How long a stream's answer may take to begin (its status line and headers).
const STREAM_HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection to the host serving an instance.
pub struct Client {
    url: String,
    token: String,
    agent: ureq::Agent,
    socket: Option<PathBuf>,
}

impl Client {
    /// Finds the host serving the instance at `workdir` (flag, env, settings, default).
    pub fn connect(workdir: Option<PathBuf>) -> anyhow::Result<Self> {
        let workdir = settings::workdir(workdir, &Settings::load()?)?;
        let (root, state_dir) = match Instance::open(&workdir) {
            Ok(instance) => {
                let state_dir = instance.state_dir();
                (instance.root, state_dir)
            }
            Err(error @ butler_host::instance::InstanceError::NotAnInstance { .. }) => return Err(error.into()),
            // An invalid root config does not lock the owner out of the running host, which
            // keeps its last good one: found by the file's `stateDir` alone.
            Err(error) => {
                eprintln!("butler: {error}\n(the running host keeps its last good config; reaching it anyway)");
                (workdir.clone(), butler_host::instance::config::RootConfig::state_dir_of_unchecked(&workdir))
            }
        };
        let info = HostFile::read(&state_dir).map_err(|_| {
            anyhow::anyhow!(
                "no butler host is running for the instance {} (start it with `butler serve`)",
                root.display()
            )
        })?;
        let token = owner::read(&state_dir).context("cannot read the owner token")?;
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(ANSWER_TIMEOUT))
            .build()
            .into();
        let socket = Some(state_dir.join(butler_host::http::LOCAL_SOCKET)).filter(|p| p.exists());
        Ok(Self { url: info.url, token, agent, socket })
    }

    /// POSTs `body` to an API path; returns the `data` of a `{ok:true,data}` answer, or the
    /// whole body of a plain read.
    pub fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        let (status, answer) = self.post_answer(path, body)?;
        json_answer(status, answer)
    }

    /// POSTs `body` to an API path; the HTTP status and the whole JSON answer (an error's
    /// `details` too).
    pub fn post_answer(&self, path: &str, body: &Value) -> anyhow::Result<(u16, Value)> {
        if let Some(answer) = self.over_socket("POST", path, Some(body)) {
            return answer;
        }
        let url = format!("{}{}{path}", self.url, butler_host::http::API_PREFIX);
        let response = self
            .agent
            .post(&url)
            .header("Authorization", &format!("Bearer {}", self.token))
            .send_json(body)
            .with_context(|| format!("cannot reach the host at {} (is it still running?)", self.url))?;
        read_answer(response)
    }

    /// DELETEs an API path; the `data` of its answer.
    pub fn delete(&self, path: &str) -> anyhow::Result<Value> {
        if let Some(answer) = self.over_socket("DELETE", path, None) {
            return answer.and_then(|(status, answer)| json_answer(status, answer));
        }
        let url = format!("{}{}{path}", self.url, butler_host::http::API_PREFIX);
        let response = self
            .agent
            .delete(&url)
            .header("Authorization", &format!("Bearer {}", self.token))
            .call()
            .with_context(|| format!("cannot reach the host at {} (is it still running?)", self.url))?;
        read_answer(response).and_then(|(status, answer)| json_answer(status, answer))
    }

    /// GETs an API path.
    pub fn get(&self, path: &str) -> anyhow::Result<Value> {
        if let Some(answer) = self.over_socket("GET", path, None) {
            return answer.and_then(|(status, answer)| json_answer(status, answer));
        }
        let url = format!("{}{}{path}", self.url, butler_host::http::API_PREFIX);
        let response = self
            .agent
            .get(&url)
            .header("Authorization", &format!("Bearer {}", self.token))
            .call()
            .with_context(|| format!("cannot reach the host at {} (is it still running?)", self.url))?;
        read_answer(response).and_then(|(status, answer)| json_answer(status, answer))
    }
}

impl Client {
    /// GETs a streaming API path (server-sent events) and returns its body as it arrives;
    /// a refusal is an error naming its code and message. Reads wait as long as the stream
    /// lasts: the host sends a keep-alive comment every 15 s, and the command is the
    /// owner's to interrupt.
    pub fn stream(&self, path: &str) -> anyhow::Result<Box<dyn BufRead>> {
        if let Some(socket) = &self.socket
            && let Ok(mut stream) = UnixStream::connect(socket)
        {
            // HTTP/1.0: the body comes as it is, never chunked, until the host closes.
            let head = format!(
                "GET {}{path} HTTP/1.0\r\nHost: localhost\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\n\r\n",
                butler_host::http::API_PREFIX,
                self.token,
            );
            // The answer's head within 30 s, as over TCP; the stream itself then runs until
            // the host closes it or the user stops the command.
            stream.set_write_timeout(Some(STREAM_HEAD_TIMEOUT))?;
            stream.set_read_timeout(Some(STREAM_HEAD_TIMEOUT))?;
            stream.write_all(head.as_bytes())?;
            let mut reader = BufReader::new(stream);
            let mut status_line = String::new();
            reader
                .read_line(&mut status_line)
                .context("the host closed the connection or did not answer within 30 s (is it still running?)")?;
            let status: u16 = status_line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
            let mut line = String::new();
            while reader.read_line(&mut line)? > 0 && !line.trim_end().is_empty() {
                line.clear();
            }
            if status != 200 {
                let mut body = Vec::new();
                reader.read_to_end(&mut body)?;
                let value: Value =
                    serde_json::from_slice(&body).context("the host answered with something that is not JSON")?;
                return Err(json_answer(status, value).err().unwrap_or_else(|| anyhow::anyhow!("HTTP {status}")));
            }
            reader.get_ref().set_read_timeout(None)?;
            return Ok(Box::new(reader));
        }
        let url = format!("{}{}{path}", self.url, butler_host::http::API_PREFIX);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(10)))
            .timeout_recv_response(Some(STREAM_HEAD_TIMEOUT))
            .build()
            .into();
        let mut response = agent
            .get(&url)
            .header("Authorization", &format!("Bearer {}", self.token))
            .call()
            .with_context(|| format!("cannot reach the host at {} (is it still running?)", self.url))?;
        let status = response.status().as_u16();
        if status != 200 {
            let value: Value =
                response.body_mut().read_json().context("the host answered with something that is not JSON")?;
            return Err(json_answer(status, value).err().unwrap_or_else(|| anyhow::anyhow!("HTTP {status}")));
        }
        Ok(Box::new(BufReader::new(response.into_body().into_reader())))
    }

    /// The request over the local socket; `None` when there is no socket to use (then TCP).
    fn over_socket(&self, method: &str, path: &str, body: Option<&Value>) -> Option<anyhow::Result<(u16, Value)>> {
        let socket = self.socket.as_ref()?;
        let mut stream = UnixStream::connect(socket).ok()?;
        let mut exchange = || -> anyhow::Result<(u16, Value)> {
            stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
            let body = body.map(Value::to_string).unwrap_or_default();
            let head = format!(
                "{method} {}{path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: Bearer {}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                butler_host::http::API_PREFIX,
                self.token,
                body.len()
            );
            // Head and body in one write: a host that answers before reading a body it does
            // not need, then closes, would otherwise reset the connection under the answer.
            stream.write_all(format!("{head}{body}").as_bytes())?;
            let mut response = Vec::new();
            stream.read_to_end(&mut response).context("the host closed the connection (is it still running?)")?;
            let (status, body) = split_response(&response)?;
            let value: Value =
                serde_json::from_slice(&body).context("the host answered with something that is not JSON")?;
            Ok((status, value))
        };
        Some(exchange())
    }
}

/// The status and (de-chunked) body of a whole HTTP/1.1 response.
fn split_response(response: &[u8]) -> anyhow::Result<(u16, Vec<u8>)> {
    let end = response.windows(4).position(|w| w == b"\r\n\r\n").context("the host's answer has no head")?;
    let head = String::from_utf8_lossy(&response[..end]);
    let status =
        head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).context("the host's answer has no status")?;
    let mut body = &response[end + 4..];
    let chunked = head.lines().any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.eq_ignore_ascii_case("transfer-encoding") && v.trim().eq_ignore_ascii_case("chunked")
        })
    });
    if !chunked {
        return Ok((status, body.to_vec()));
    }
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n").context("a torn chunk")?;
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&body[..line_end]).trim(), 16).context("a bad chunk size")?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok((status, out));
        }
        out.extend_from_slice(body.get(..size).context("a torn chunk")?);
        body = body.get(size + 2..).context("a torn chunk")?;
    }
}

fn read_answer(mut response: ureq::http::Response<ureq::Body>) -> anyhow::Result<(u16, Value)> {
    let status = response.status().as_u16();
    let body: Value = response.body_mut().read_json().context("the host answered with something that is not JSON")?;
    Ok((status, body))
}

/// The `data` of a `{ok:true,data}` answer, the whole body of a plain read, or an error
/// naming the code and message of a refusal.
pub fn json_answer(status: u16, body: Value) -> anyhow::Result<Value> {
    if body["ok"] == false {
        let code = body["error"]["code"].as_str().unwrap_or("error");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        bail!("{code}: {message} (HTTP {status})");
    }
    Ok(if body["ok"] == true { body["data"].clone() } else { body })
}
