//! `butler:hub@0.1.0` — the host side of `butler:hub/tools`, which a faculty imports beside
//! `butler:faculty@0.2.0` (its world `butler:hub/faculty`) to call the hub's tools its
//! command declares (see [`crate::hub`]).

use super::super::hub::HubCallError;
use super::super::sandbox::CallState;

/// Generated bindings (`bindgen!` output) of the interface alone.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
mod generated {
    wasmtime::component::bindgen!({
        inline: "
            package butler:host-side;
            world hub-tools {
                import butler:hub/tools@0.1.0;
            }
        ",
        path: "../../wit/butler-hub@0.1.0",
        world: "butler:host-side/hub-tools",
    });
}

pub use generated::HubTools;

use generated::butler::hub::tools::{CallError, Host};

impl Host for CallState {
    fn list_tools(&mut self) -> Result<String, CallError> {
        self.hub_grant().and_then(|grant| grant.list()).map_err(to_wit)
    }

    fn call_tool(&mut self, name: String, arguments: String) -> Result<String, CallError> {
        self.hub_grant().and_then(|grant| grant.call(&name, &arguments)).map_err(to_wit)
    }
}

fn to_wit(error: HubCallError) -> CallError {
    let message = error.to_string();
    match error {
        HubCallError::NotDeclared(_) => CallError::NotDeclared(message),
        HubCallError::NotOffered(_) => CallError::NotOffered(message),
        HubCallError::InvalidArguments(_) => CallError::InvalidArguments(message),
        HubCallError::Limit(_) => CallError::Limit(message),
        HubCallError::Failed(_) => CallError::Failed(message),
    }
}
