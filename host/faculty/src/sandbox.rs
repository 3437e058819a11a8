//! The sandbox one call runs in: a fresh WASI context with only the granted
//! directories preopened, no network, no inherited environment, captured stdio, a memory
//! cap, and the host side of the `butler:faculty/host` imports.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::{MemoryInputPipe, MemoryOutputPipe};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::guest_failure::GuestFailure;
use super::hub::{Grant, HubCallError};
use super::{CallContext, Dispatch};

/// Guest path of the faculty's own data directory.
pub const DATA: &str = "/data";
/// The environment variable holding the root config keys granted to the faculty
/// (`faculties.<id>.config`), as one JSON object; absent when none are.
pub const CONFIG_ENV: &str = "BUTLER_CONFIG";

/// The environment variable naming, by guest path, the instance's internals under the
/// faculty's grants (`{"paths": [...], "names": [...]}`): set only for a faculty granted a
/// folder that holds them.
pub const INTERNAL_ENV: &str = "BUTLER_INTERNAL";

/// Most a call may print on stdout (its JSON data) before output is cut off.
pub const MAX_STDOUT_BYTES: usize = 16 << 20;
/// Most stderr kept per call (it goes to the faculty's log).
pub const MAX_STDERR_BYTES: usize = 256 << 10;

/// One directory a call sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preopen {
    /// Host directory.
    pub host: PathBuf,
    /// Guest path (`/data`, `/self`, …).
    pub guest: String,
    /// Writable.
    pub write: bool,
}

/// Everything about a faculty's sandbox that does not change between calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// Faculty id (for logs and attribution).
    pub faculty: String,
    /// Directories to preopen (missing ones are skipped with a log line).
    pub preopens: Vec<Preopen>,
    /// Deadline of one call.
    pub timeout_ms: u64,
    /// Memory cap of one instance.
    pub memory_mb: u64,
    /// Environment variables the faculty sees (only what was granted: [`CONFIG_ENV`]).
    pub env: Vec<(String, String)>,
    /// What `host.now-ms` answers.
    pub clock: super::Clock,
}

impl Sandbox {
    /// The stores (see [`super::locks`]) a call of this faculty may write: its `/data` and
    /// every writable grant, by canonical path so that two spellings of one directory are
    /// one store. `/data` is created here, so its path is canonical from the first call.
    #[must_use]
    pub fn write_stores(&self) -> Vec<PathBuf> {
        let mut stores: Vec<PathBuf> = self
            .preopens
            .iter()
            .filter(|p| p.write)
            .map(|p| {
                if p.guest == DATA {
                    let _ = butler_catalog::files::create_private_dir(&p.host);
                }
                std::fs::canonicalize(&p.host).unwrap_or_else(|_| p.host.clone())
            })
            .collect();
        stores.sort();
        stores.dedup();
        stores
    }

    /// The host folders of `declared` (a manifest's `privateFolders`, guest paths), each
    /// under one of the writable preopens; a guest path under none is an `Err` naming it.
    #[must_use]
    pub fn private_folders(&self, declared: &[String]) -> Vec<Result<PathBuf, NotWritable>> {
        declared
            .iter()
            .map(|guest| {
                self.preopens
                    .iter()
                    .filter(|p| p.write)
                    .find_map(|p| {
                        let inside = std::path::Path::new(guest).strip_prefix(&p.guest).ok()?;
                        (!inside.as_os_str().is_empty()).then(|| p.host.join(inside))
                    })
                    .ok_or_else(|| NotWritable(guest.clone()))
            })
            .collect()
    }

    /// Creates the faculty's private folders owner-only and makes what is in them
    /// owner-only (see [`butler_catalog::files::tighten`]), saying in the log what changed.
    pub fn keep_private(&self, declared: &[String]) {
        for folder in self.private_folders(declared) {
            match folder {
                Ok(host) => {
                    if let Err(e) = butler_catalog::files::create_private_dir(&host) {
                        tracing::warn!(faculty = %self.faculty, "cannot create its private folder {}: {e}", host.display());
                    } else if let Some(line) = butler_catalog::files::tighten(&host).summary(&host) {
                        tracing::info!(faculty = %self.faculty, "{line}");
                    }
                }
                Err(NotWritable(guest)) => tracing::warn!(
                    faculty = %self.faculty,
                    "its private folder `{guest}` is not under a folder it may write: it is not kept private"
                ),
            }
        }
    }
}

/// A declared private folder (a guest path) that lies under no folder the faculty may
/// write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("its private folder `{0}` is not under a folder it may write")]
pub struct NotWritable(pub String);

/// The linear memory the calls running at once hold together, against a cap: each call
/// has its own cap (`memoryMb`), and 32 of them at 64 MiB would be 2 GiB, so together
/// they may hold no more than this ([`crate::SHARED_MEMORY_MB`] unless set up otherwise).
#[derive(Debug)]
pub struct SharedMemory {
    in_use: AtomicUsize,
    cap: usize,
}

impl SharedMemory {
    /// An account of `cap_mb` MiB.
    #[must_use]
    pub fn new(cap_mb: u64) -> Self {
        Self { in_use: AtomicUsize::new(0), cap: usize::try_from(cap_mb << 20).unwrap_or(usize::MAX) }
    }

    /// Its cap, in MiB.
    #[must_use]
    pub fn cap_mb(&self) -> u64 {
        u64::try_from(self.cap >> 20).unwrap_or(u64::MAX)
    }

    /// What the calls running hold now, in bytes.
    #[must_use]
    pub fn in_use(&self) -> usize {
        self.in_use.load(Ordering::Acquire)
    }

    /// Takes `bytes` more, if the cap allows.
    fn take(&self, bytes: usize) -> bool {
        self.in_use
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|total| *total <= self.cap)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: usize) {
        self.in_use.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Caps an instance's linear memories and tables, remembering whether it said no, so a
/// failed call can be reported as hitting the cap rather than as an anonymous trap; what
/// its memories take is taken from the [`SharedMemory`] of the calls running, and given
/// back when the call ends.
pub struct Limits {
    max_memory: usize,
    /// Set when a growth was refused: past the call's own cap.
    pub hit: bool,
    /// Set when a growth was refused because the calls running hold the shared cap.
    pub shared_hit: bool,
    shared: Option<Arc<SharedMemory>>,
    /// What this call took from `shared`.
    held: usize,
}

impl Limits {
    /// Its memories are counted against `shared` from now on.
    pub fn share(&mut self, shared: Arc<SharedMemory>) {
        self.shared = Some(shared);
    }
}

impl Drop for Limits {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            shared.give_back(self.held);
        }
    }
}

/// Table growth beyond this is refused (tables hold function references, not data).
const MAX_TABLE_ELEMENTS: usize = 1_000_000;

impl ResourceLimiter for Limits {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.max_memory {
            self.hit = true;
            return Ok(false);
        }
        if let Some(shared) = &self.shared {
            let more = desired.saturating_sub(current);
            if !shared.take(more) {
                self.shared_hit = true;
                return Ok(false);
            }
            self.held += more;
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// The store data of one call.
pub struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    /// The call's memory and table caps; `hit` says whether a growth was refused.
    pub limits: Limits,
    faculty: String,
    dispatch: Option<Arc<dyn Dispatch>>,
    context: CallContext,
    /// `faculty/command` of this call, the parent of its nested calls.
    caller: String,
    /// What the guest printed on stdout.
    pub stdout: MemoryOutputPipe,
    /// What the guest printed on stderr.
    pub stderr: MemoryOutputPipe,
    clock: super::Clock,
    /// What the call may do with the hub's tools, when its command declares `hubTools`.
    hub: Option<Grant>,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl CallState {
    /// A fresh sandbox for one call. `argv` and `stdin` are only seen by plain commands;
    /// `caller` (`faculty/command`) names the call to its nested calls.
    ///
    /// # Errors
    /// When a preopen cannot be opened.
    pub fn new(
        sandbox: &Sandbox,
        argv: &[String],
        stdin: Option<&str>,
        dispatch: Option<Arc<dyn Dispatch>>,
        context: CallContext,
        caller: String,
    ) -> wasmtime::Result<Self> {
        let stdout = MemoryOutputPipe::new(MAX_STDOUT_BYTES);
        let stderr = MemoryOutputPipe::new(MAX_STDERR_BYTES);
        let mut builder = WasiCtxBuilder::new();
        // Must come first: preopens copy the flag when they are added. File operations
        // then run on the calling (blocking) thread instead of hopping to a pool.
        builder.allow_blocking_current_thread(true);
        builder
            .stdin(MemoryInputPipe::new(stdin.unwrap_or_default().as_bytes().to_vec()))
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .args(argv)
            .envs(&sandbox.env)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }));
        for preopen in &sandbox.preopens {
            let perms = if preopen.write { FsPerms::ReadWrite } else { FsPerms::ReadOnly };
            // Opening is the existence check (no extra stat on the hot path). The faculty's
            // own /data is created the first time it is missing; a missing grant is skipped
            // (e.g. an unavailable validity root: the faculty sees no /validity).
            if let Err(error) = builder.preopened_dir(&preopen.host, &preopen.guest, perms) {
                if preopen.guest == DATA {
                    butler_catalog::files::create_private_dir(&preopen.host)?;
                    builder.preopened_dir(&preopen.host, &preopen.guest, perms)?;
                } else {
                    tracing::debug!(faculty = %sandbox.faculty, dir = %preopen.host.display(), "grant skipped: {error:#}");
                }
            }
        }
        let max_memory = usize::try_from(sandbox.memory_mb << 20).unwrap_or(usize::MAX);
        Ok(Self {
            wasi: builder.build(),
            table: ResourceTable::new(),
            limits: Limits { max_memory, hit: false, shared_hit: false, shared: None, held: 0 },
            faculty: sandbox.faculty.clone(),
            dispatch,
            context,
            caller,
            stdout,
            stderr,
            clock: sandbox.clock.clone(),
            hub: None,
        })
    }

    /// The same state, with what the call may do with the hub's tools.
    #[must_use]
    pub fn with_hub(mut self, hub: Option<Grant>) -> Self {
        self.hub = hub;
        self
    }

    /// `butler:hub/tools`: the call's grant, or why it has none.
    ///
    /// # Errors
    /// [`HubCallError::NotDeclared`] when the command declares no `hubTools`.
    pub fn hub_grant(&mut self) -> Result<&mut Grant, HubCallError> {
        self.hub.as_mut().ok_or_else(|| HubCallError::NotDeclared("this command declares no `hubTools`".to_owned()))
    }

    /// `host.log`, under the faculty's own log target.
    pub fn write_log(&self, level: log::Level, message: &str) {
        super::stats::emit(level, &self.faculty, message);
    }

    /// `host.now-ms`: the runtime's clock.
    #[must_use]
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// `host.call`: a pipeline action through the dispatcher, as a nested call of this one.
    ///
    /// # Errors
    /// `(code, message)` of the action's failure.
    pub fn host_call(&self, action: &str, args: &str) -> Result<String, GuestFailure> {
        let (dispatch, args, nested) = self.nested_call(args)?;
        dispatch.dispatch(action, args, &nested).map(|data| data.to_string()).map_err(|e| e.failure())
    }

    /// [`Self::host_call`] for a guest running on an async task: the nested call is
    /// dispatched from async code too ([`Dispatch::dispatch_awaited`]).
    ///
    /// # Errors
    /// As [`Self::host_call`].
    pub fn host_call_awaited(
        &self,
        action: String,
        args: &str,
    ) -> impl Future<Output = Result<String, GuestFailure>> + Send + 'static {
        let nested = self.nested_call(args);
        async move {
            let (dispatch, args, nested) = nested?;
            dispatch.dispatch_awaited(action, args, nested).await.map(|data| data.to_string()).map_err(|e| e.failure())
        }
    }

    /// What a nested call needs: the dispatcher, its arguments as JSON, its context.
    fn nested_call(&self, args: &str) -> Result<(Arc<dyn Dispatch>, Value, CallContext), GuestFailure> {
        let dispatch = self.dispatch.clone().ok_or_else(|| {
            GuestFailure::untyped(
                "call_unavailable".to_owned(),
                "host.call is not available while a faculty describes itself".to_owned(),
            )
        })?;
        let args: Value = serde_json::from_str(args)
            .map_err(|e| GuestFailure::untyped("invalid_json".to_owned(), format!("call arguments: {e}")))?;
        let nested = self.context.nested(&self.caller).map_err(|e| e.failure())?;
        Ok((dispatch, args, nested))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn sandbox(root: &std::path::Path) -> Sandbox {
        let preopen = |dir: &str, guest: &str, write| Preopen { host: root.join(dir), guest: guest.to_owned(), write };
        Sandbox {
            faculty: "keeper".to_owned(),
            preopens: vec![
                preopen("data", DATA, true),
                preopen("self", "/self", true),
                preopen("docs", "/docs", false),
            ],
            timeout_ms: 1000,
            memory_mb: 16,
            env: Vec::new(),
            clock: crate::Clock::system(),
        }
    }

    #[test]
    fn a_private_folder_must_lie_inside_a_folder_the_faculty_may_write() {
        let root = std::path::Path::new("/instance");
        let declared = ["/self/journal", "/docs/secret", "/self", "/elsewhere/x", "/selfish/x"].map(str::to_owned);
        assert_eq!(
            sandbox(root).private_folders(&declared),
            vec![
                Ok(root.join("self/journal")),
                Err(NotWritable("/docs/secret".to_owned())),
                Err(NotWritable("/self".to_owned())),
                Err(NotWritable("/elsewhere/x".to_owned())),
                Err(NotWritable("/selfish/x".to_owned())),
            ]
        );
    }

    #[test]
    fn private_folders_are_made_owner_only_with_what_is_in_them() {
        let dir = tempfile::tempdir().expect("temp");
        let journal = dir.path().join("self/journal");
        std::fs::create_dir_all(journal.join("spool")).expect("mkdir");
        std::fs::write(journal.join("spool/day.jsonl"), "{}\n").expect("write");
        for (path, mode) in
            [(journal.clone(), 0o755), (journal.join("spool"), 0o777), (journal.join("spool/day.jsonl"), 0o644)]
        {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        }
        sandbox(dir.path()).keep_private(&["/self/journal".to_owned(), "/self/sessions".to_owned()]);
        let mode = |p: &std::path::Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&journal), 0o700);
        assert_eq!(mode(&journal.join("spool")), 0o700);
        assert_eq!(mode(&journal.join("spool/day.jsonl")), 0o600);
        assert_eq!(mode(&dir.path().join("self/sessions")), 0o700, "a missing one is created owner-only");
    }
}
