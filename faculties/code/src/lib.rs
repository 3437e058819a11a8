//! Built-in faculty `code`: code mode. Its one command, `run` (offered to the hub's
//! clients as `butler__run_code` where code mode is on), runs a JavaScript program in Boa,
//! a JavaScript engine written in Rust, compiled into this component: the program calls
//! the tools of the endpoint it was called through with `await tools.<ns>.<tool>(args)`
//! (through `butler:hub/tools`, which the host checks against `hubTools` and the
//! endpoint), its `console` output is captured, and the value it returns is the result.
//!
//! The host gives every call a fresh instance, a deadline and a memory cap; this faculty
//! adds the caps that are its own — console output, the result's size — and fails the
//! whole run when a tool-call limit was reached, even if the program caught the error.
//! Everything is built for `wasm32` only: a native build of the workspace compiles nothing.

#[cfg(target_arch = "wasm32")]
mod guest;
