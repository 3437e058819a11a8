//! Talking to the running host from the CLI: find it through `<stateDir>/host.json`,
//! authenticate with the owner token, and turn answers into readable output.

use std::path::PathBuf;

use anyhow::{Context, bail};
use butler_host::instance::{HostFile, Instance, owner};
use serde_json::Value;

use super::settings::{self, Settings};

/// A connection to the host serving an instance.
pub struct Client {
    url: String,
    token: String,
    agent: ureq::Agent,
}

impl Client {
    /// Finds the host serving the instance at `workdir` (flag, env, settings, default).
    pub fn connect(workdir: Option<PathBuf>) -> anyhow::Result<Self> {
        let workdir = settings::workdir(workdir, &Settings::load()?)?;
        let instance = Instance::open(&workdir)?;
        let state_dir = instance.state_dir();
        let info = HostFile::read(&state_dir).map_err(|_| {
            anyhow::anyhow!(
                "no butler host is running for the instance {} (start it with `butler serve`)",
                instance.root.display()
            )
        })?;
        let token = owner::read(&state_dir).context("cannot read the owner token")?;
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        Ok(Self { url: info.url, token, agent })
    }

    /// POSTs `body` to an API path; returns the `data` of a `{ok:true,data}` answer, or the
    /// whole body of a plain read.
    pub fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        let url = format!("{}{}{path}", self.url, butler_host::http::API_PREFIX);
        let response = self
            .agent
            .post(&url)
            .header("Authorization", &format!("Bearer {}", self.token))
            .send_json(body)
            .with_context(|| format!("cannot reach the host at {} (is it still running?)", self.url))?;
        answer(response)
    }

    /// GETs an API path.
    pub fn get(&self, path: &str) -> anyhow::Result<Value> {
        let url = format!("{}{}{path}", self.url, butler_host::http::API_PREFIX);
        let response = self
            .agent
            .get(&url)
            .header("Authorization", &format!("Bearer {}", self.token))
            .call()
            .with_context(|| format!("cannot reach the host at {} (is it still running?)", self.url))?;
        answer(response)
    }
}

fn answer(mut response: ureq::http::Response<ureq::Body>) -> anyhow::Result<Value> {
    let status = response.status();
    let body: Value = response.body_mut().read_json().context("the host answered with something that is not JSON")?;
    if body["ok"] == false {
        let code = body["error"]["code"].as_str().unwrap_or("error");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        bail!("{code}: {message} (HTTP {})", status.as_u16());
    }
    Ok(if body["ok"] == true { body["data"].clone() } else { body })
}
