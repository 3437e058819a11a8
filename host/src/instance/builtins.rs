//! The built-in faculties (journal, distill, validity, cards; code), compiled from
//! `faculties/` by the build and embedded in the binary. A new instance gets the pipeline's
//! as `faculties/<id>.wasm`; those [`ON_DEMAND`] are installed when the owner turns on what
//! they serve ([`install_on_demand`]: `code`, with code mode). `butler faculty upgrade`
//! brings an existing instance's copies up to date — but never overwrites one the owner
//! changed, and installs no on-demand one.
//!
//! `<stateDir>/builtins.json` records the hash of each file the host installed; a file
//! whose hash no longer matches was modified by the owner.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{Instance, InstanceError, write_atomic};

/// `(id, component bytes)` of every built-in faculty.
pub const BUILTINS: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/builtins.rs"));

/// Built-ins installed only when the owner turns on what they serve, not into every new
/// instance: `code` (a JavaScript engine, megabytes to compile) serves code mode.
pub const ON_DEMAND: &[&str] = &["code"];

/// File under the state directory recording what was installed.
const RECORD: &str = "builtins.json";

/// What an upgrade would do (or did) to one built-in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Not present: installed.
    Install,
    /// The same as this host's.
    UpToDate,
    /// The host installed it and the owner did not touch it: replaced.
    Upgrade,
    /// The owner changed (or replaced) it: left alone.
    KeepModified,
}

/// Copies missing built-ins into `faculties/`, recording them; never overwrites.
///
/// # Errors
/// [`InstanceError::Create`].
pub fn install_missing(instance: &Instance) -> Result<(), InstanceError> {
    let plan = plan(instance)?;
    apply(instance, &plan.into_iter().filter(|(_, a)| *a == Action::Install).collect::<Vec<_>>())
}

/// What `butler faculty upgrade` would do, per built-in id.
///
/// # Errors
/// [`InstanceError::Create`] when a file cannot be read.
pub fn plan(instance: &Instance) -> Result<Vec<(String, Action)>, InstanceError> {
    let record = read_record(&instance.state_dir());
    let dir = faculties_dir(instance);
    let mut plan = Vec::new();
    for (id, bytes) in BUILTINS {
        let path = dir.join(format!("{id}.wasm"));
        let action = match std::fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && ON_DEMAND.contains(id) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Action::Install,
            Err(source) => return Err(InstanceError::Create { path, source }),
            Ok(current) if current == *bytes => Action::UpToDate,
            Ok(current) if record.get(*id) == Some(&hash(&current)) => Action::Upgrade,
            Ok(_) => Action::KeepModified,
        };
        plan.push(((*id).to_owned(), action));
    }
    Ok(plan)
}

/// Carries out the install and upgrade steps of `plan`.
///
/// # Errors
/// [`InstanceError::Create`] naming the file.
pub fn apply(instance: &Instance, plan: &[(String, Action)]) -> Result<(), InstanceError> {
    let state_dir = instance.state_dir();
    let dir = faculties_dir(instance);
    let mut record = read_record(&state_dir);
    for (id, action) in plan {
        if !matches!(action, Action::Install | Action::Upgrade) {
            continue;
        }
        let Some((_, bytes)) = BUILTINS.iter().find(|(b, _)| b == id) else { continue };
        let path = dir.join(format!("{id}.wasm"));
        let create = |source| InstanceError::Create { path: path.clone(), source };
        std::fs::create_dir_all(&dir).map_err(create)?;
        write_atomic(&path, bytes).map_err(create)?;
        record.insert(id.clone(), hash(bytes));
    }
    let bytes = serde_json::to_vec_pretty(&record)
        .map_err(std::io::Error::other)
        .map_err(|source| InstanceError::Create { path: state_dir.join(RECORD), source })?;
    super::write_private(&state_dir.join(RECORD), &bytes)
        .map_err(|source| InstanceError::Create { path: state_dir.join(RECORD), source })
}

/// Installs the on-demand built-in `id` (see [`ON_DEMAND`]) when the instance lacks it;
/// one present, the owner's or an older host's, is left as it is. Whether it installed it.
///
/// # Errors
/// [`InstanceError::Create`] naming the file.
pub fn install_on_demand(instance: &Instance, id: &str) -> Result<bool, InstanceError> {
    if !ON_DEMAND.contains(&id) || faculties_dir(instance).join(format!("{id}.wasm")).exists() {
        return Ok(false);
    }
    apply(instance, &[(id.to_owned(), Action::Install)])?;
    Ok(true)
}

/// Where faculties are dropped: the scan root named `faculties` (the first root if there
/// is none). Built-ins live there too.
#[must_use]
pub fn faculties_dir(instance: &Instance) -> std::path::PathBuf {
    let roots = instance.scan_config().roots;
    roots
        .iter()
        .find(|r| r.file_name().is_some_and(|n| n == "faculties"))
        .or_else(|| roots.first())
        .cloned()
        .unwrap_or_else(|| instance.root.join("faculties"))
}

fn read_record(state_dir: &Path) -> BTreeMap<String, String> {
    std::fs::read(state_dir.join(RECORD)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

fn hash(bytes: &[u8]) -> String {
    data_encoding::HEXLOWER.encode(&Sha256::digest(bytes))
}
