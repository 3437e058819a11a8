//! `butler:faculty@0.1.0` — host bindings and the host side of its imports.

use super::super::sandbox::CallState;

/// Generated bindings (`bindgen!` output).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
mod generated {
    wasmtime::component::bindgen!({
        world: "faculty",
        path: "../../wit/butler-faculty@0.1.0",
    });
}

/// The same world with asynchronous imports and exports, for calls run on an async task
/// (see [`super::AwaitedPre`]); its types are the ones above.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub(super) mod awaited {
    wasmtime::component::bindgen!({
        world: "faculty",
        path: "../../wit/butler-faculty@0.1.0",
        imports: { default: async },
        exports: { default: async },
        with: { "butler:faculty/types": super::generated::butler::faculty::types },
    });
}

pub use generated::{Faculty, FacultyPre};

use generated::butler;
use generated::butler::faculty::types::{Failure, Level};

impl butler::faculty::types::Host for CallState {}

impl butler::faculty::host::Host for CallState {
    fn log(&mut self, level: Level, message: String) {
        let level = match level {
            Level::Trace => log::Level::Trace,
            Level::Debug => log::Level::Debug,
            Level::Info => log::Level::Info,
            Level::Warn => log::Level::Warn,
            Level::Error => log::Level::Error,
        };
        self.write_log(level, &message);
    }

    fn now_ms(&mut self) -> u64 {
        CallState::now_ms(self)
    }

    fn call(&mut self, action: String, args: String) -> Result<String, Failure> {
        self.host_call(&action, &args).map_err(|f| Failure { code: f.code, message: f.message })
    }
}

impl awaited::butler::faculty::host::Host for CallState {
    async fn log(&mut self, level: Level, message: String) {
        butler::faculty::host::Host::log(self, level, message);
    }

    async fn now_ms(&mut self) -> u64 {
        CallState::now_ms(self)
    }

    async fn call(&mut self, action: String, args: String) -> Result<String, Failure> {
        self.host_call_awaited(action, &args).await.map_err(|f| Failure { code: f.code, message: f.message })
    }
}
