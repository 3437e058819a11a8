//! `butler:faculty@0.2.0` — host bindings and the host side of its imports: JSON in and
//! out, failures with a typed kind.

use super::super::sandbox::CallState;
use super::{FailureKind, GuestFailure};

/// Generated bindings (`bindgen!` output).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
mod generated {
    wasmtime::component::bindgen!({
        world: "faculty",
        path: "../../wit/butler-faculty@0.2.0",
    });
}

/// The same world with asynchronous imports and exports, for calls run on an async task
/// (see [`super::AwaitedPre`]); its types are the ones above.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub(super) mod awaited {
    wasmtime::component::bindgen!({
        world: "faculty",
        path: "../../wit/butler-faculty@0.2.0",
        imports: { default: async },
        exports: { default: async },
        with: { "butler:faculty/types": super::generated::butler::faculty::types },
    });
}

pub use generated::{Faculty, FacultyPre};

use generated::butler;
use generated::butler::faculty::types::{Failure, FailureKind as Kind, Level};

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

    fn call(&mut self, action: String, input: String) -> Result<String, Failure> {
        self.host_call(&action, &input).map_err(to_wit)
    }
}

impl awaited::butler::faculty::host::Host for CallState {
    async fn log(&mut self, level: Level, message: String) {
        butler::faculty::host::Host::log(self, level, message);
    }

    async fn now_ms(&mut self) -> u64 {
        CallState::now_ms(self)
    }

    async fn call(&mut self, action: String, input: String) -> Result<String, Failure> {
        self.host_call_awaited(action, &input).await.map_err(to_wit)
    }
}

/// The guest's failure in the host's terms; `details` that are not JSON are kept as text.
pub(super) fn from_wit(failure: Failure) -> GuestFailure {
    let kind = match failure.kind {
        Kind::InvalidInput => FailureKind::InvalidInput,
        Kind::NotFound => FailureKind::NotFound,
        Kind::Conflict => FailureKind::Conflict,
        Kind::Forbidden => FailureKind::Forbidden,
        Kind::Unavailable => FailureKind::Unavailable,
        Kind::TooLarge => FailureKind::TooLarge,
        Kind::Failed => FailureKind::Failed,
        Kind::Internal => FailureKind::Internal,
    };
    let details =
        failure.details.map(|text| Box::new(serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))));
    GuestFailure { kind, code: failure.code, message: failure.message, details, typed: true }
}

/// A failure of a `host.call` in the guest's terms (`details` as JSON text).
fn to_wit(failure: GuestFailure) -> Failure {
    Failure {
        kind: kind_to_wit(failure.kind),
        code: failure.code,
        message: failure.message,
        details: failure.details.map(|d| d.to_string()),
    }
}

fn kind_to_wit(kind: FailureKind) -> Kind {
    match kind {
        FailureKind::InvalidInput => Kind::InvalidInput,
        FailureKind::NotFound => Kind::NotFound,
        FailureKind::Conflict => Kind::Conflict,
        FailureKind::Forbidden => Kind::Forbidden,
        FailureKind::Unavailable => Kind::Unavailable,
        FailureKind::TooLarge => Kind::TooLarge,
        FailureKind::Failed => Kind::Failed,
        FailureKind::Internal => Kind::Internal,
    }
}
