//! Instance folders and extension manifests written for a test.

use std::path::Path;

use serde_json::Value;

/// Writes an extension manifest at `<workdir>/<rel>/butler.json`.
pub fn write_manifest(workdir: &Path, rel: &str, manifest: &Value) {
    let dir = workdir.join(rel);
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("butler.json"), serde_json::to_vec_pretty(manifest).expect("json"))
        .expect("write manifest");
}

/// A valid minimal tool manifest.
pub fn tool(id: &str, name: &str) -> Value {
    serde_json::json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": name})
}

/// An instance folder with this root config and the usual scan roots.
pub fn instance_with_config(config: &Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp");
    std::fs::write(dir.path().join("butler.json"), serde_json::to_vec_pretty(config).expect("json")).expect("config");
    for root in ["tools", "services", "faculties", "self"] {
        std::fs::create_dir_all(dir.path().join(root)).expect("mkdir");
    }
    dir
}
