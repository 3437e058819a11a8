//! The harness the end-to-end tests share with the benchmarks (the `butler-test-support`
//! crate: start `butler serve` on a temp instance, talk to it, stop it), plus the test
//! guests `host/build.rs` builds.

pub use butler_test_support::*;

/// Guests built from source by `host/build.rs`.
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

#[test]
fn the_harness_runs_the_binary_cargo_built_for_these_tests() {
    let built = std::path::Path::new(env!("CARGO_BIN_EXE_butler"));
    assert_eq!(butler_binary().canonicalize().expect("found"), built.canonicalize().expect("built"));
}
