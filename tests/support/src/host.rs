//! A running `butler serve` on a temp instance: start it, talk to it over HTTP, stop it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use reqwest::blocking::{Client, RequestBuilder};
use serde_json::Value;

use crate::http::json_of;
use crate::{butler_binary, http, wait_until};

/// How long a host may take to start on a loaded 2-core machine.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A `butler` command isolated from the user's settings and instance.
pub fn butler_command(settings_home: &Path) -> Command {
    Launch::Plain.command(settings_home)
}

/// How a test host is launched beyond [`butler_command`].
#[derive(Clone, Copy)]
enum Launch {
    /// As this process's user, with its umask.
    Plain,
    /// Under file mode creation mask `.0` (through `sh`, which then becomes the `butler`
    /// process).
    Umask(u32),
    /// As the user (and group) `.0`, through `setpriv`, which then becomes the `butler`
    /// process: only a root test process can do it.
    User(u32),
}

impl Launch {
    fn command(self, settings_home: &Path) -> Command {
        let mut cmd = match self {
            Self::Plain => Command::new(butler_binary()),
            Self::Umask(umask) => {
                let mut cmd = Command::new("sh");
                cmd.args(["-c", &format!("umask {umask:03o} && exec \"$0\" \"$@\"")]).arg(butler_binary());
                cmd
            }
            Self::User(uid) => {
                let mut cmd = Command::new("setpriv");
                cmd.args([format!("--reuid={uid}"), format!("--regid={uid}"), "--clear-groups".into(), "--".into()])
                    .arg(butler_binary());
                cmd
            }
        };
        isolate(&mut cmd, settings_home);
        cmd
    }
}

fn isolate(cmd: &mut Command, settings_home: &Path) {
    cmd.env("XDG_CONFIG_HOME", settings_home)
        .env("HOME", settings_home)
        .env_remove("BUTLER_WORKDIR")
        .env_remove("BUTLER_PORT")
        .env_remove("BUTLER_BIND")
        .env("RUST_LOG", "info");
}

/// A running host.
pub struct Butler {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub origin: String,
    /// The listening port.
    pub port: u16,
    /// The instance directory.
    pub workdir: PathBuf,
    _home: tempfile::TempDir,
    client: Client,
}

impl Butler {
    /// Starts a host on a fresh temp instance (kept alive by the returned guard).
    pub fn start_fresh() -> (Self, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("temp dir");
        let butler = Self::start(&dir.path().join("instance"));
        (butler, dir)
    }

    /// A fresh instance (with its built-in faculties) whose root config `edit` changed
    /// before the host that serves it started.
    pub fn fresh_with_config(edit: impl FnOnce(&mut Value)) -> (Self, tempfile::TempDir) {
        Self::fresh_with_config_and_env(edit, &[])
    }

    /// As [`Self::fresh_with_config`], the host started with `env` added to its environment.
    pub fn fresh_with_config_and_env(edit: impl FnOnce(&mut Value), env: &[(&str, &str)]) -> (Self, tempfile::TempDir) {
        let (first, dir) = Self::start_fresh();
        let workdir = first.workdir.clone();
        assert!(first.stop().success());
        let path = workdir.join("butler.json");
        let mut config: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("config")).expect("config is JSON");
        edit(&mut config);
        std::fs::write(&path, serde_json::to_vec_pretty(&config).expect("json")).expect("config");
        (Self::start_with_env(&workdir, &[], env), dir)
    }

    /// Starts a host on `workdir` with `--port 0`.
    pub fn start(workdir: &Path) -> Self {
        Self::start_with(workdir, &[])
    }

    /// Starts a host with extra `serve` arguments.
    pub fn start_with(workdir: &Path, extra: &[&str]) -> Self {
        Self::start_with_env(workdir, extra, &[])
    }

    /// Starts a host with extra `serve` arguments and environment variables.
    pub fn start_with_env(workdir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Self {
        Self::spawn(workdir, extra, env, Stdio::inherit())
    }

    /// Starts a host with `RUST_LOG=filter`, its log (stderr) written to `log`.
    pub fn start_logging(workdir: &Path, filter: &str, log: &Path) -> Self {
        let file = std::fs::File::create(log).expect("log file");
        Self::spawn(workdir, &[], &[("RUST_LOG", filter)], Stdio::from(file))
    }

    /// Starts a host whose file mode creation mask is `umask`, its log (stderr) written to
    /// `log`.
    pub fn start_with_umask(workdir: &Path, umask: u32, log: &Path) -> Self {
        let file = std::fs::File::create(log).expect("log file");
        Self::spawn_as(workdir, &[], &[], Stdio::from(file), Launch::Umask(umask))
    }

    /// Starts a host run as the user `uid` (a root test process only) on a fresh instance in
    /// `dir`, which becomes that user's, as does the host's settings folder.
    pub fn start_as_user(dir: &Path, uid: u32) -> Self {
        std::os::unix::fs::chown(dir, Some(uid), Some(uid)).expect("give the folder to the user");
        Self::spawn_as(&dir.join("instance"), &[], &[], Stdio::inherit(), Launch::User(uid))
    }

    /// Starts a host that logs only warnings, and those nowhere — what a benchmark
    /// measures, so that writing its log costs nothing.
    pub fn start_quiet(workdir: &Path) -> Self {
        Self::spawn(workdir, &[], &[("RUST_LOG", "warn")], Stdio::null())
    }

    fn spawn(workdir: &Path, extra: &[&str], env: &[(&str, &str)], stderr: Stdio) -> Self {
        Self::spawn_as(workdir, extra, env, stderr, Launch::Plain)
    }

    fn spawn_as(workdir: &Path, extra: &[&str], env: &[(&str, &str)], stderr: Stdio, launch: Launch) -> Self {
        let home = tempfile::tempdir().expect("temp home");
        if let Launch::User(uid) = launch {
            std::os::unix::fs::chown(home.path(), Some(uid), Some(uid)).expect("give the home to the user");
        }
        let client = crate::http::client().build().expect("client");
        let mut command = launch.command(home.path());
        let mut child = command
            .args(["serve", "--port", "0", "--workdir"])
            .arg(workdir)
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn butler");
        let stdout = child.stdout.take().expect("stdout piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // Read to the end even after the URL was taken: a closed pipe would fail the
            // host's next write to stdout.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let origin_and_port = || -> Result<(String, u16), String> {
            let line = rx.recv_timeout(START_TIMEOUT).map_err(|e| format!("butler printed no URL: {e}"))?;
            let origin = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("http://"))
                .and_then(|rest| rest.split('/').next())
                .map(|authority| format!("http://{authority}"))
                .ok_or_else(|| format!("no URL in {line:?}"))?;
            let port = origin.rsplit(':').next().and_then(|p| p.parse().ok()).ok_or("no port in the URL")?;
            Ok((origin, port))
        };
        let (origin, port) = origin_and_port().unwrap_or_else(|why| {
            // The host is not handed to a `Butler` that would stop it: stop it here.
            let _ = child.kill();
            let _ = child.wait();
            panic!("{why}")
        });
        let workdir = std::fs::canonicalize(workdir).expect("workdir exists after start");
        Self { child, origin, port, workdir, _home: home, client }
    }

    /// `127.0.0.1:PORT`.
    #[must_use]
    pub fn authority(&self) -> &str {
        self.origin.trim_start_matches("http://")
    }

    /// One request over a fresh connection, without an HTTP library: status and body (see
    /// [`http::request`]).
    #[must_use]
    pub fn http(&self, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
        http::request(self.authority(), method, path, body)
    }

    /// `origin` + `/myspace-butler/api` + `path`.
    pub fn api(&self, path: &str) -> String {
        format!("{}/myspace-butler/api{path}", self.origin)
    }

    /// A GET request builder for an API path.
    pub fn get(&self, path: &str) -> RequestBuilder {
        self.client.get(self.api(path))
    }

    /// A request with any method to a full URL.
    pub fn request(&self, method: reqwest::Method, url: &str) -> RequestBuilder {
        self.client.request(method, url)
    }

    /// GET an API path and parse the JSON body.
    pub fn get_json(&self, path: &str) -> (u16, Value) {
        json_of(self.get(path).send().expect("request"))
    }

    /// The current `/catalog`.
    pub fn catalog(&self) -> Value {
        let (status, body) = self.get_json("/catalog");
        assert_eq!(status, 200, "{body}");
        body
    }

    /// Ids of the registered extensions.
    pub fn ids(&self) -> Vec<String> {
        self.catalog()["extensions"]
            .as_array()
            .expect("extensions array")
            .iter()
            .map(|e| e["id"].as_str().expect("id").to_owned())
            .collect()
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        terminate(&mut self.child)
    }

    /// Kills the host with SIGKILL (no chance to clean up) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The host's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }
}

impl Drop for Butler {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            terminate(&mut self.child);
        }
    }
}

fn terminate(child: &mut Child) -> std::process::ExitStatus {
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait().expect("wait")
}

impl Butler {
    /// POST a JSON body to an API path with extra headers; status and JSON answer.
    pub fn post_json(&self, path: &str, body: &Value, headers: &[(&str, &str)]) -> (u16, Value) {
        let mut request = self
            .request(reqwest::Method::POST, &self.api(path))
            .header("content-type", "application/json")
            .body(body.to_string());
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        json_of(request.send().expect("request"))
    }

    /// Runs a faculty command; status and JSON answer.
    pub fn command(&self, faculty: &str, command: &str, args: &Value) -> (u16, Value) {
        self.post_json(&format!("/faculties/{faculty}/commands/{command}"), &serde_json::json!({"args": args}), &[])
    }

    /// The entry of `GET /faculties` for `id`, if listed.
    pub fn faculty(&self, id: &str) -> Option<Value> {
        let (_, body) = self.get_json("/faculties");
        body["faculties"].as_array()?.iter().find(|f| f["id"] == id).cloned()
    }

    /// `GET /faculties`.
    pub fn faculties(&self) -> Value {
        let (status, body) = self.get_json("/faculties");
        assert_eq!(status, 200, "{body}");
        body
    }

    /// Waits until every faculty in `ids` is listed as ready (within `limit`).
    pub fn wait_all_ready(&self, ids: &[&str], limit: Duration) -> Duration {
        wait_until(limit, &format!("faculties {ids:?} ready"), || {
            let listed = self.faculties();
            let ready = |id: &str| {
                listed["faculties"]
                    .as_array()
                    .is_some_and(|all| all.iter().any(|f| f["id"] == id && f["state"] == "ready"))
            };
            ids.iter().all(|id| ready(id))
        })
    }

    /// Waits until faculty `id` is listed as ready.
    pub fn wait_ready(&self, id: &str) -> Duration {
        self.wait_ready_within(id, Duration::from_secs(30))
    }

    /// [`Self::wait_ready`] with a custom limit (big components compile for seconds).
    pub fn wait_ready_within(&self, id: &str, limit: Duration) -> Duration {
        wait_until(limit, &format!("faculty {id} ready"), || self.faculty(id).is_some_and(|f| f["state"] == "ready"))
    }

    /// Waits until faculty `id` runs its optimized code (a component found runs quickly
    /// compiled code for its first seconds).
    pub fn wait_optimized(&self, id: &str) {
        wait_until(Duration::from_secs(60), &format!("faculty {id} optimized"), || {
            self.faculty(id).is_some_and(|f| f["state"] == "ready" && f["optimized"] == true)
        });
    }

    /// Waits until no component is still compiling.
    pub fn wait_compiled(&self) {
        wait_until(Duration::from_secs(60), "background compiles finished", || {
            !self.catalog()["diagnostics"].as_array().expect("diagnostics").iter().any(|d| d["severity"] == "pending")
        });
    }

    /// Sends a request over a raw socket and reads the answer even if the server stopped
    /// reading the body early (as it does for oversized bodies) — the way browsers behave.
    pub fn raw(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, Value) {
        use std::io::{Read, Write};
        let authority = self.authority();
        let mut stream = std::net::TcpStream::connect(authority).expect("connect");
        let mut head = format!(
            "{method} /myspace-butler/api{path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body));
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        let text = String::from_utf8_lossy(&response);
        let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
        (status, serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON (status {status}): {body}")))
    }

    /// The owner token of this instance (in its state directory, `.butler` unless the root
    /// config says otherwise).
    pub fn owner_token(&self) -> String {
        let config: Value = std::fs::read_to_string(self.workdir.join("butler.json"))
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or(Value::Null);
        let state = config["stateDir"].as_str().unwrap_or(".butler");
        std::fs::read_to_string(self.workdir.join(state).join("owner-token")).expect("owner token").trim().to_owned()
    }
}

impl Butler {
    /// Logs in as the console would: a one-time link from `POST /console/links` (owner
    /// token), visited once; returns the session cookie (`name=value`) and the session's
    /// proof (from the fragment of the address the login redirects to).
    pub fn console_login(&self) -> (String, String) {
        let token = format!("Bearer {}", self.owner_token());
        let (status, body) = self.post_json("/console/links", &serde_json::json!({}), &[("authorization", &token)]);
        assert_eq!(status, 200, "{body}");
        let url = body["data"]["url"].as_str().expect("login url").to_owned();
        let client = crate::http::client().redirect(reqwest::redirect::Policy::none()).build().expect("client");
        let response = client.get(&url).send().expect("login");
        assert_eq!(response.status().as_u16(), 303, "the link logs in and sends to the console");
        let cookie = response.headers().get("set-cookie").expect("a session cookie").to_str().expect("ascii");
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
        let location = response.headers().get("location").expect("a redirect").to_str().expect("ascii");
        let proof = location.strip_prefix("/myspace-butler/#proof=").expect("the proof in the fragment").to_owned();
        (cookie.split(';').next().expect("name=value").to_owned(), proof)
    }

    /// The headers of an owner action from the logged-in console: the session cookie and
    /// its proof, plus the same-origin signals a browser sends.
    pub fn console_owner_headers(&self) -> Vec<(&'static str, String)> {
        let (cookie, proof) = self.console_login();
        vec![
            ("origin", self.origin.clone()),
            ("sec-fetch-site", "same-origin".to_owned()),
            ("x-butler-review", "1".to_owned()),
            ("cookie", cookie),
            ("x-butler-proof", proof),
        ]
    }
}
