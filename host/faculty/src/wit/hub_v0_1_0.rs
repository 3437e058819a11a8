//! `butler:hub@0.1.0` — the host side of `butler:hub/tools`, which a faculty imports beside
//! `butler:faculty@0.2.0` (its world `butler:hub/faculty`) to call the hub's tools its
//! command declares (see [`crate::hub`]).

use super::super::hub::HubCallError;
use super::super::sandbox::CallState;

/// `bindgen!` of the interface alone (a world of the host's own that imports it), with
/// `$options` added: one spelling of the world for both bindings below.
macro_rules! hub_tools {
    ($($options:tt)*) => {
        wasmtime::component::bindgen!({
            inline: "
                package butler:host-side;
                world hub-tools {
                    import butler:hub/tools@0.1.0;
                }
            ",
            path: "../../wit/butler-hub@0.1.0",
            world: "butler:host-side/hub-tools",
            $($options)*
        });
    };
}

/// Generated bindings (`bindgen!` output) of the interface alone.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
mod generated {
    hub_tools!();
}

/// The same interface with asynchronous imports, for calls run on an async task (see
/// [`super::AwaitedPre`]). Its `call-error` is a type of its own, converted by the same
/// rule (`to_wit!`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub(super) mod awaited {
    hub_tools!(imports: { default: async },);
}

pub use generated::HubTools;

use generated::butler::hub::tools::{CallError, Host};

/// A [`HubCallError`] as the WIT `call-error` of either binding (they are distinct types
/// of one shape).
macro_rules! to_wit {
    ($wit:path, $error:expr) => {{
        use $wit as Wit;
        let error: HubCallError = $error;
        let message = error.to_string();
        match error {
            HubCallError::NotDeclared(_) => Wit::NotDeclared(message),
            HubCallError::NotOffered(_) => Wit::NotOffered(message),
            HubCallError::InvalidArguments(_) => Wit::InvalidArguments(message),
            HubCallError::Limit(_) => Wit::Limit(message),
            HubCallError::Failed(_) => Wit::Failed(message),
        }
    }};
}

impl Host for CallState {
    fn list_tools(&mut self) -> Result<String, CallError> {
        self.hub_grant().and_then(|grant| grant.list()).map_err(|e| to_wit!(CallError, e))
    }

    fn call_tool(&mut self, name: String, arguments: String) -> Result<String, CallError> {
        self.hub_grant().and_then(|grant| grant.call(&name, &arguments)).map_err(|e| to_wit!(CallError, e))
    }
}

impl awaited::butler::hub::tools::Host for CallState {
    async fn list_tools(&mut self) -> Result<String, awaited::butler::hub::tools::CallError> {
        let listed = match self.hub_grant() {
            Ok(grant) => grant.list_awaited().await,
            Err(e) => Err(e),
        };
        listed.map_err(|e| to_wit!(awaited::butler::hub::tools::CallError, e))
    }

    async fn call_tool(
        &mut self,
        name: String,
        arguments: String,
    ) -> Result<String, awaited::butler::hub::tools::CallError> {
        let called = match self.hub_grant() {
            Ok(grant) => grant.call_awaited(&name, &arguments).await,
            Err(e) => Err(e),
        };
        called.map_err(|e| to_wit!(awaited::butler::hub::tools::CallError, e))
    }
}
