//! Write a Butler faculty in Rust.
//!
//! A faculty is a WebAssembly component (`wasm32-wasip2`) that the Butler host runs in a
//! sandbox, one fresh instance per call, targeting `butler:faculty@0.2.0`: commands take
//! a JSON input the host has checked against the command's declared `input` schema, and
//! fail with a typed [`Failure`]. Implement [`Faculty`] and call [`faculty!`]:
//!
//! ```ignore
//! use butler_faculty_kit::{Failure, Faculty, Outcome, Value, faculty, input, json};
//!
//! struct Hello;
//!
//! #[derive(serde::Deserialize)]
//! struct Greet { who: String }
//!
//! impl Faculty for Hello {
//!     fn describe() -> Value {
//!         json!({"schemaVersion": 1, "kind": "faculty", "id": "hello", "name": "Hello",
//!                "commands": [{"id": "greet", "exec": ["self"],
//!                              "input": {"type": "object", "required": ["who"],
//!                                        "properties": {"who": {"type": "string"}}}}]})
//!     }
//!     fn invoke(command: &str, given: Value) -> Outcome {
//!         match command {
//!             "greet" => {
//!                 let Greet { who } = input(given)?;
//!                 Ok(json!({"greeting": format!("hello, {who}")}))
//!             }
//!             other => Err(Failure::unknown_command(other)),
//!         }
//!     }
//! }
//!
//! faculty!(Hello);
//! ```
//!
//! Build with `cargo build --target wasm32-wasip2 --release` and drop the `.wasm` into the
//! instance's `faculties/` folder. Files: `/data` is the faculty's own directory; the
//! directories the owner granted (root `butler.json`, `faculties.<id>.grants`) appear
//! where the grants say.

use std::path::Path;

pub use serde_json::{self, Value, json};

/// The raw WIT bindings (generated), for authors who want them: `bindings::butler::faculty::host`
/// for the imports, `bindings::exports::butler::faculty::guest::Guest` for the exports with
/// `export_component!(Type with_types_in butler_faculty_kit::bindings)`.
#[allow(missing_docs, clippy::all, clippy::pedantic, unsafe_code)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "faculty",
        path: "../../wit/butler-faculty@0.2.0",
        pub_export_macro: true,
        export_macro_name: "export_component",
        default_bindings_module: "butler_faculty_kit::bindings",
    });
}

/// The WIT version this kit targets.
pub const WIT_VERSION: &str = "0.2.0";

pub use bindings::butler::faculty::types::FailureKind as Kind;

/// A typed failure: its [`Kind`] decides what callers see (an HTTP caller gets the
/// kind's status), `code` is stable `snake_case` callers branch on, `message` is for
/// people, `details` is JSON with more for programs.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// What kind of failure it is.
    pub kind: Kind,
    /// Stable code callers branch on.
    pub code: String,
    /// What went wrong.
    pub message: String,
    /// More, for programs (boxed: a failure stays small on the happy path's `Result`).
    pub details: Option<Box<Value>>,
}

impl Failure {
    /// A failure with any code; its kind is read off the code's spelling, as the host
    /// does for faculties that say none: `invalid_*` → invalid input, `not_found` and
    /// `*_not_found` → not found, `stale_*`, `*_expired`, `*_conflict`, `*_not_active` →
    /// conflict, `*_required`, `*_invalid` → forbidden, `*_unavailable` → unavailable,
    /// `*_too_large` → too large, anything else → failed. Say the kind with
    /// [`Self::of_kind`] when the spelling does not.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        let code = code.into();
        Self { kind: kind_of(&code), code, message: message.into(), details: None }
    }

    /// A failure of kind `kind`.
    pub fn of_kind(kind: Kind, code: impl Into<String>, message: impl Into<String>) -> Self {
        Self { kind, code: code.into(), message: message.into(), details: None }
    }

    /// The same failure with `details`.
    #[must_use]
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// `invalid_args`.
    pub fn invalid_args(message: impl Into<String>) -> Self {
        Self::of_kind(Kind::InvalidInput, "invalid_args", message)
    }

    /// `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::of_kind(Kind::NotFound, "not_found", message)
    }

    /// `unknown_command`.
    #[must_use]
    pub fn unknown_command(command: &str) -> Self {
        Self::of_kind(Kind::NotFound, "unknown_command", format!("no command `{command}`"))
    }

    /// `unknown_report`.
    #[must_use]
    pub fn unknown_report(report: &str) -> Self {
        Self::of_kind(Kind::NotFound, "unknown_report", format!("no report `{report}`"))
    }

    /// `io_error`, naming the path: the faculty could not read or write its files.
    #[must_use]
    pub fn io(path: &Path, error: &std::io::Error) -> Self {
        Self::of_kind(Kind::Internal, "io_error", format!("{}: {error}", path.display()))
    }
}

/// The kind a failure code's spelling suggests, for a failure made without one — the
/// host's convention, kept identical to it (a test of the host's faculty runtime compares
/// the two): `invalid_*` → invalid input, `*_not_found` → not found, `stale_*`,
/// `*_expired`, `*_conflict`, `*_not_active` → conflict, `*_invalid`, `*_required`,
/// `*_only` → forbidden, `*_unavailable`, `busy` → unavailable, `*_too_large` → too large.
#[must_use]
pub fn kind_of(code: &str) -> Kind {
    match code {
        "not_found" | "unknown_command" | "unknown_report" | "unknown_action" | "unknown_faculty" => Kind::NotFound,
        "forbidden" => Kind::Forbidden,
        "busy" | "timeout" | "shutting_down" => Kind::Unavailable,
        "internal" | "trap" => Kind::Internal,
        c if c.starts_with("invalid_") => Kind::InvalidInput,
        c if c.ends_with("_not_found") => Kind::NotFound,
        c if c.starts_with("stale_")
            || c.ends_with("_expired")
            || c.ends_with("_conflict")
            || c.ends_with("_not_active") =>
        {
            Kind::Conflict
        }
        c if c.ends_with("_invalid") || c.ends_with("_required") || c.ends_with("_only") => Kind::Forbidden,
        c if c.ends_with("_unavailable") => Kind::Unavailable,
        c if c.ends_with("_too_large") => Kind::TooLarge,
        _ => Kind::Failed,
    }
}

impl From<serde_json::Error> for Failure {
    fn from(error: serde_json::Error) -> Self {
        Self::of_kind(Kind::Internal, "invalid_json", error.to_string())
    }
}

/// What a command or report returns.
pub type Outcome = Result<Value, Failure>;

/// At most `max` characters of `text`, with `…` when it was cut: caller text echoed in
/// messages and logs stays short (the host clips the same way; a test compares them).
#[must_use]
pub fn clip(text: &str, max: usize) -> String {
    let mut chars = text.chars();
    let mut out: String = chars.by_ref().take(max).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

/// A command's input as `T` (unknown fields refused when `T` says
/// `#[serde(deny_unknown_fields)]`).
///
/// # Errors
/// `invalid_args` naming the field and the problem.
pub fn input<T: serde::de::DeserializeOwned>(given: Value) -> Result<T, Failure> {
    serde_json::from_value(given).map_err(|e| Failure::invalid_args(e.to_string()))
}

/// Implemented by a faculty; exported with [`faculty!`].
pub trait Faculty {
    /// The manifest (`kind: "faculty"`). In a self-describing component, a command's or
    /// report's `exec[0]` names the component itself (write `"self"`). Commands declare
    /// their `input` JSON Schema; they take no `args`.
    fn describe() -> Value;

    /// Runs a command with its input (`{}` when the caller sent nothing).
    ///
    /// # Errors
    /// A [`Failure`] the caller receives as `{code, message, details}` with its kind's
    /// status.
    fn invoke(command: &str, input: Value) -> Outcome;

    /// Renders a report.
    ///
    /// # Errors
    /// [`Failure::unknown_report`] unless overridden.
    fn report(id: &str) -> Outcome {
        Err(Failure::unknown_report(id))
    }
}

/// Exports `$ty` (a [`Faculty`]) as the component's `guest` interface.
#[macro_export]
macro_rules! faculty {
    ($ty:ty) => {
        struct __ButlerFacultyExport;

        impl $crate::bindings::exports::butler::faculty::guest::Guest for __ButlerFacultyExport {
            fn describe() -> ::std::string::String {
                $crate::__private::describe::<$ty>()
            }

            fn invoke(
                command: ::std::string::String,
                input: ::std::string::String,
            ) -> ::std::result::Result<::std::string::String, $crate::bindings::butler::faculty::types::Failure> {
                $crate::__private::invoke::<$ty>(&command, &input)
            }

            fn report(
                id: ::std::string::String,
            ) -> ::std::result::Result<::std::string::String, $crate::bindings::butler::faculty::types::Failure> {
                $crate::__private::report::<$ty>(&id)
            }
        }

        $crate::bindings::export_component!(__ButlerFacultyExport with_types_in $crate::bindings);
    };
}

/// Glue used by [`faculty!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    use super::{Faculty, Failure, Outcome, Value};
    use crate::bindings::butler::faculty::types::Failure as WitFailure;

    fn encode(outcome: Outcome) -> Result<String, WitFailure> {
        outcome.and_then(|value| serde_json::to_string(&value).map_err(Failure::from)).map_err(|f| WitFailure {
            kind: f.kind,
            code: f.code,
            message: f.message,
            details: f.details.map(|d| d.to_string()),
        })
    }

    pub fn describe<F: Faculty>() -> String {
        F::describe().to_string()
    }

    pub fn invoke<F: Faculty>(command: &str, input: &str) -> Result<String, WitFailure> {
        let given = if input.trim().is_empty() {
            Ok(Value::Object(serde_json::Map::new()))
        } else {
            serde_json::from_str(input)
        };
        match given {
            Ok(given) => encode(F::invoke(command, given)),
            Err(e) => encode(Err(Failure::invalid_args(format!("the input is not JSON: {e}")))),
        }
    }

    pub fn report<F: Faculty>(id: &str) -> Result<String, WitFailure> {
        encode(F::report(id))
    }
}

/// Calls into the host.
pub mod host {
    use super::{Failure, Outcome, Value};
    use crate::bindings::butler::faculty::host as wit;
    use crate::bindings::butler::faculty::types::Level;

    /// Writes an informational line to the faculty's log.
    pub fn info(message: &str) {
        wit::log(Level::Info, message);
    }

    /// Writes a warning to the faculty's log.
    pub fn warn(message: &str) {
        wit::log(Level::Warn, message);
    }

    /// Writes an error to the faculty's log.
    pub fn error(message: &str) {
        wit::log(Level::Error, message);
    }

    /// Milliseconds since the Unix epoch.
    #[must_use]
    pub fn now_ms() -> u64 {
        wit::now_ms()
    }

    /// Runs a pipeline action through the host and returns its output.
    ///
    /// # Errors
    /// The failure the action returned (its kind kept), or `invalid_json` if its output
    /// was not JSON.
    pub fn call(action: &str, input: &Value) -> Outcome {
        let data = wit::call(action, &input.to_string()).map_err(|f| Failure {
            kind: f.kind,
            code: f.code,
            message: f.message,
            details: f.details.and_then(|d| serde_json::from_str(&d).ok()).map(Box::new),
        })?;
        Ok(serde_json::from_str(&data)?)
    }
}

/// Files, written so that a crash never leaves half of one.
pub mod fs {
    use std::io::Write;
    use std::path::Path;

    use super::Failure;

    /// Writes `bytes` to `path` through a temp file in the same folder and a rename.
    ///
    /// # Errors
    /// `io_error` naming the path.
    pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
        let tmp = path.with_file_name(format!(".{name}.tmp"));
        let result = std::fs::File::create(&tmp)
            .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(error) = result {
            let _ = std::fs::remove_file(&tmp);
            return Err(Failure::io(path, &error));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_without_a_said_kind_gets_the_kind_its_spelling_suggests() {
        for (code, kind) in [
            ("invalid_args", Kind::InvalidInput),
            ("card_not_found", Kind::NotFound),
            ("stale_revision", Kind::Conflict),
            ("lease_expired", Kind::Conflict),
            ("token_invalid", Kind::Forbidden),
            ("root_unavailable", Kind::Unavailable),
            ("body_too_large", Kind::TooLarge),
            ("checks_failed", Kind::Failed),
        ] {
            assert_eq!(Failure::new(code, "m").kind, kind, "{code}");
        }
        assert_eq!(Failure::of_kind(Kind::Unavailable, "io_error", "m").kind, Kind::Unavailable);
    }

    #[test]
    fn input_becomes_the_callers_type() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            n: u32,
        }
        assert_eq!(input::<Args>(json!({"n": 3})).map(|a| a.n), Ok(3));
        let refused = input::<Args>(json!({"n": 3, "x": 1})).expect_err("unknown field");
        assert_eq!((refused.kind, refused.code.as_str()), (Kind::InvalidInput, "invalid_args"));
    }
}
