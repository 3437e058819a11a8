//! Write a Butler faculty in Rust.
//!
//! A faculty is a WebAssembly component (`wasm32-wasip2`) that the Butler host runs in a
//! sandbox, one fresh instance per call. Implement [`Faculty`] and call [`faculty!`]:
//!
//! ```ignore
//! use butler_faculty_kit::{Args, Failure, Faculty, Outcome, faculty, json};
//!
//! struct Hello;
//!
//! impl Faculty for Hello {
//!     fn describe() -> serde_json::Value {
//!         json!({"schemaVersion": 1, "kind": "faculty", "id": "hello", "name": "Hello",
//!                "commands": [{"id": "greet", "exec": ["self"],
//!                              "args": [{"name": "who", "pattern": "[a-z]+", "positional": true}]}]})
//!     }
//!     fn invoke(command: &str, args: Args, _stdin: Option<String>) -> Outcome {
//!         match command {
//!             "greet" => Ok(json!({"greeting": format!("hello, {}", args.positional(0).unwrap_or("world"))})),
//!             other => Err(Failure::unknown_command(other)),
//!         }
//!     }
//! }
//!
//! faculty!(Hello);
//! ```
//!
//! Build with `cargo build --target wasm32-wasip2 --release` and drop the `.wasm` into the
//! instance's `faculties/` folder. Files: `/data` is the faculty's own directory; `/self`
//! and `/validity` exist when the owner granted them (root `butler.json`, `faculties.<id>.grants`).

use std::collections::BTreeMap;
use std::path::Path;

pub use serde_json::{self, Value, json};

/// The raw WIT bindings (generated), for authors who want them: `bindings::butler::faculty::host`
/// for the imports, `bindings::exports::butler::faculty::guest::Guest` for the exports with
/// `export_component!(Type with_types_in butler_faculty_kit::bindings)`.
#[allow(missing_docs, clippy::all, clippy::pedantic, unsafe_code)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "faculty",
        path: "../../wit/butler-faculty@0.1.0",
        pub_export_macro: true,
        export_macro_name: "export_component",
        default_bindings_module: "butler_faculty_kit::bindings",
    });
}

/// The WIT version this kit targets.
pub const WIT_VERSION: &str = "0.1.0";

/// A typed failure: `code` is stable `snake_case`, `message` is for people. The host
/// passes both to the caller unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Stable code callers branch on.
    pub code: String,
    /// What went wrong.
    pub message: String,
}

impl Failure {
    /// A failure with any code.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self { code: code.into(), message: message.into() }
    }

    /// `invalid_args`.
    pub fn invalid_args(message: impl Into<String>) -> Self {
        Self::new("invalid_args", message)
    }

    /// `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new("not_found", message)
    }

    /// `unknown_command`.
    #[must_use]
    pub fn unknown_command(command: &str) -> Self {
        Self::new("unknown_command", format!("no command `{command}`"))
    }

    /// `unknown_report`.
    #[must_use]
    pub fn unknown_report(report: &str) -> Self {
        Self::new("unknown_report", format!("no report `{report}`"))
    }

    /// `io_error`, naming the path.
    #[must_use]
    pub fn io(path: &Path, error: &std::io::Error) -> Self {
        Self::new("io_error", format!("{}: {error}", path.display()))
    }
}

impl From<serde_json::Error> for Failure {
    fn from(error: serde_json::Error) -> Self {
        Self::new("invalid_json", error.to_string())
    }
}

/// What a command or report returns.
pub type Outcome = Result<Value, Failure>;

/// A command's arguments as the host passed them: positional values and `--name value`
/// pairs, already validated against the manifest's `args` declarations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Args {
    positional: Vec<String>,
    named: BTreeMap<String, String>,
}

impl Args {
    /// Splits a host argument list into positional values and named pairs.
    #[must_use]
    pub fn parse(list: Vec<String>) -> Self {
        let mut args = Self::default();
        let mut items = list.into_iter();
        while let Some(item) = items.next() {
            match item.strip_prefix("--") {
                Some(name) if !name.is_empty() => {
                    let value = items.next().unwrap_or_default();
                    args.named.insert(name.to_owned(), value);
                }
                _ => args.positional.push(item),
            }
        }
        args
    }

    /// The `index`-th positional value.
    #[must_use]
    pub fn positional(&self, index: usize) -> Option<&str> {
        self.positional.get(index).map(String::as_str)
    }

    /// The value of `--name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&str> {
        self.named.get(name).map(String::as_str)
    }

    /// The value of `--name`, or an `invalid_args` failure.
    ///
    /// # Errors
    /// When the argument was not given.
    pub fn require(&self, name: &str) -> Result<&str, Failure> {
        self.get(name).ok_or_else(|| Failure::invalid_args(format!("missing argument `{name}`")))
    }
}

/// Implemented by a faculty; exported with [`faculty!`].
pub trait Faculty {
    /// The manifest (`kind: "faculty"`). In a self-describing component, a command's or
    /// report's `exec[0]` names the component itself (write `"self"`); further items are
    /// passed before the caller's arguments.
    fn describe() -> Value;

    /// Runs a command.
    ///
    /// # Errors
    /// A [`Failure`] the caller receives as `{code, message}`.
    fn invoke(command: &str, args: Args, stdin: Option<String>) -> Outcome;

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
                args: ::std::vec::Vec<::std::string::String>,
                stdin: ::std::option::Option<::std::string::String>,
            ) -> ::std::result::Result<::std::string::String, $crate::bindings::butler::faculty::types::Failure> {
                $crate::__private::invoke::<$ty>(&command, args, stdin)
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
    use super::{Args, Faculty, Failure, Outcome};
    use crate::bindings::butler::faculty::types::Failure as WitFailure;

    fn encode(outcome: Outcome) -> Result<String, WitFailure> {
        outcome
            .and_then(|value| serde_json::to_string(&value).map_err(Failure::from))
            .map_err(|f| WitFailure { code: f.code, message: f.message })
    }

    pub fn describe<F: Faculty>() -> String {
        F::describe().to_string()
    }

    pub fn invoke<F: Faculty>(command: &str, args: Vec<String>, stdin: Option<String>) -> Result<String, WitFailure> {
        encode(F::invoke(command, Args::parse(args), stdin))
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

    /// Runs a pipeline action through the host and returns its data.
    ///
    /// # Errors
    /// The failure the action returned, or `invalid_json` if its data was not JSON.
    pub fn call(action: &str, args: &Value) -> Outcome {
        let data = wit::call(action, &args.to_string()).map_err(|f| Failure::new(f.code, f.message))?;
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
    fn args_split_positional_and_named() {
        let args = Args::parse(vec!["a".into(), "--who".into(), "me".into(), "b".into()]);
        assert_eq!(args.positional(0), Some("a"));
        assert_eq!(args.positional(1), Some("b"));
        assert_eq!(args.get("who"), Some("me"));
        assert!(args.require("other").is_err());
    }
}
