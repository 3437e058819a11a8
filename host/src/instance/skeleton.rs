//! The new-instance template (`skeleton/`), embedded in the binary so the host can create
//! an instance anywhere without the source tree.

use std::path::Path;

use include_dir::{Dir, include_dir};

use super::InstanceError;
use crate::catalog::scan::MANIFEST_FILE;

static SKELETON: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../skeleton");

/// Placeholder files that only exist so git keeps empty folders.
const PLACEHOLDER: &str = ".gitkeep";

/// Copies the skeleton into `root`, never overwriting a file that exists. The root
/// `butler.json` is written last, so an interrupted copy is completed on the next start.
///
/// # Errors
/// [`InstanceError::Create`] naming the path that could not be written.
pub fn copy_into(root: &Path) -> Result<(), InstanceError> {
    copy_dir(&SKELETON, root)?;
    if let Some(config) = SKELETON.get_file(MANIFEST_FILE) {
        write_new(&root.join(MANIFEST_FILE), config.contents())?;
    }
    Ok(())
}

fn copy_dir(dir: &Dir<'_>, root: &Path) -> Result<(), InstanceError> {
    let target = root.join(dir.path());
    std::fs::create_dir_all(&target).map_err(|source| InstanceError::Create { path: target.clone(), source })?;
    for sub in dir.dirs() {
        copy_dir(sub, root)?;
    }
    for file in dir.files() {
        let name = file.path().file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name == PLACEHOLDER || file.path() == Path::new(MANIFEST_FILE) {
            continue;
        }
        write_new(&root.join(file.path()), file.contents())?;
    }
    Ok(())
}

/// Writes `bytes` to `path` unless something is already there.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), InstanceError> {
    if path.symlink_metadata().is_ok() {
        return Ok(());
    }
    super::write_atomic(path, bytes).map_err(|source| InstanceError::Create { path: path.to_owned(), source })
}
