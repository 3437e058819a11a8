//! Test guest: a faculty from the future (`butler:faculty@9.0.0`).

// The generated export glue is `unsafe` (it defines the component's ABI exports).
#![allow(unsafe_code)]

#[allow(missing_docs)]
mod bindings {
    wit_bindgen::generate!({ world: "faculty", path: "wit" });
}

struct Future;

impl bindings::exports::butler::faculty::guest::Guest for Future {
    fn describe() -> String {
        r#"{"schemaVersion":1,"kind":"faculty","id":"future","name":"Future"}"#.to_owned()
    }
}

bindings::export!(Future with_types_in bindings);
