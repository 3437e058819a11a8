//! The MCP Skills extension (SEP-2640, `io.modelcontextprotocol/skills`) on every endpoint:
//! `skills/list`, `skills/get`, `resources/directory/read`, and the skills' files through
//! `resources/read`.
//!
//! An endpoint offers the skills of the providers it offers that declare the extension, and
//! the skill of every enabled package it offers whose `SKILL.md` names and describes it
//! ([`butler_catalog::suzu::imports::Skill::frontmatter`]). A provider's skills are namespaced in
//! their URIs, which must end in the skill's name: its `skill://<path>` is
//! `skill://<namespace>/<path>` on the main endpoint and on a prefixed profile, and its own
//! URI on a profile with `"prefix": false` (a URI of another scheme stays as it is; where two
//! providers give the same, the first keeps it). A package's skill is
//! `skill://<package id>/<name>`.
//!
//! The hub is a client of its providers as the extension wants a host to be: it keeps each
//! provider's listed entries (never its files: a file is fetched when a client reads it),
//! reads only the files an entry lists, and checks what it reads against the entry — the
//! size, the `sha256:` digest and, for `SKILL.md`, the front matter — refusing content that
//! differs. Under quarantine a provider's skill is held like its tools: the entry, digests
//! included, is what the owner approves, so an approved skill's files cannot change unseen.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use butler_catalog::suzu::imports::Skill as PackageSkill;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::provider::{Provider, ProviderSpec};
use crate::quarantine::Kind;
use crate::{Asker, Hub, RpcError, View, forward, offers};

pub use crate::provider::{SKILLS_EXTENSION as EXTENSION, declares_skills as declared};

/// The most entries a `skills/list` page holds.
pub const PAGE: usize = 50;

/// What a `skills/list` cursor starts with (then the offset of the page's first entry).
const CURSOR: &str = "skills:";

/// The MIME type of a directory resource.
const DIRECTORY: &str = "inode/directory";

/// The file every skill has at its root.
const MANIFEST: &str = "SKILL.md";

/// What an endpoint that offers skills declares under `capabilities.extensions`.
#[must_use]
pub fn settings() -> Value {
    json!({"directoryRead": true})
}

/// A skill an endpoint offers.
pub(crate) struct Offered {
    /// Its entry as the endpoint's clients see it (its URIs theirs).
    pub entry: Value,
    source: Source,
}

/// Where a skill comes from.
enum Source {
    /// A provider's, with its entry as the provider gave it and how its URIs read here.
    Provider { provider: Arc<Provider>, original: Value, mapping: Mapping },
    /// An enabled package's.
    Package(PackageSkill),
}

impl Offered {
    /// The URI of its `SKILL.md`.
    fn uri(&self) -> &str {
        self.entry.get("uri").and_then(Value::as_str).unwrap_or_default()
    }

    /// Whether `uri` is its `SKILL.md` or lies in its folder.
    fn holds(&self, uri: &str) -> bool {
        within(self.uri(), uri)
    }

    /// The URIs of its files (none when its provider gives them as `"dynamic"`).
    fn files(&self) -> Vec<&str> {
        let listed = self.entry.get("resources").and_then(Value::as_array).into_iter().flatten();
        listed.filter_map(|r| r.get("uri").and_then(Value::as_str)).collect()
    }

    /// Who serves it: a provider's id, or the package's.
    fn owner(&self) -> String {
        match &self.source {
            Source::Provider { provider, .. } => provider.spec.id.clone(),
            Source::Package(skill) => format!("suzu:{}", skill.package),
        }
    }
}

/// Whether `uri` is the skill's `SKILL.md` at `skill_uri`, or a file in its folder.
fn within(skill_uri: &str, uri: &str) -> bool {
    let root = skill_uri.strip_suffix(MANIFEST).unwrap_or(skill_uri);
    uri == skill_uri || (uri.starts_with(root) && uri.len() > root.len())
}

/// How a provider's skill URIs read on an endpoint: those starting `original` start
/// `public` instead (both empty: as they are).
#[derive(Clone)]
struct Mapping {
    original: String,
    public: String,
}

impl Mapping {
    /// How a skill of provider `spec` whose `SKILL.md` is at `uri` reads on `view`.
    fn of(view: &View, spec: &ProviderSpec, uri: &str) -> Self {
        let prefixed = match view {
            View::Profile(profile) => profile.spec.prefixed,
            View::Main | View::Restricted => true,
        };
        if prefixed && uri.starts_with("skill://") {
            Self { original: "skill://".to_owned(), public: format!("skill://{}/", spec.namespace) }
        } else {
            Self { original: String::new(), public: String::new() }
        }
    }

    fn to_public(&self, uri: &str) -> Option<String> {
        uri.strip_prefix(&self.original).map(|rest| format!("{}{rest}", self.public))
    }

    fn to_original(&self, uri: &str) -> Option<String> {
        uri.strip_prefix(&self.public).map(|rest| format!("{}{rest}", self.original))
    }
}

/// Whether `entry` (a provider's) is a skill entry as the extension defines one: a `uri`
/// ending in `/<name>/SKILL.md`, `frontmatter` with that `name` (by the Agent Skills
/// rules) and a `description`, and `resources` — `"dynamic"`, or every file once, each in
/// the skill's folder with a `sha256:` digest and a size, `SKILL.md` among them. Others
/// are not offered (a host must not load them).
#[must_use]
pub fn valid(entry: &Value) -> bool {
    let Some(uri) = entry.get("uri").and_then(Value::as_str) else { return false };
    let Some(folder) = uri.strip_suffix(&format!("/{MANIFEST}")) else { return false };
    let name = folder.rsplit('/').next().unwrap_or_default();
    let front = entry.get("frontmatter");
    let text_of = |key: &str| front.and_then(|f| f.get(key)).and_then(Value::as_str);
    if !uri.contains("://")
        || text_of("name") != Some(name)
        || !butler_catalog::suzu::imports::is_skill_name(name)
        || text_of("description").is_none_or(str::is_empty)
    {
        return false;
    }
    match entry.get("resources") {
        Some(Value::String(dynamic)) => dynamic == "dynamic",
        Some(Value::Array(files)) => {
            let mut seen = HashSet::new();
            files.iter().all(|file| {
                let file_uri = file.get("uri").and_then(Value::as_str).unwrap_or_default();
                within(uri, file_uri)
                    && seen.insert(file_uri)
                    && file.get("size").is_some_and(Value::is_u64)
                    && file.get("digest").and_then(Value::as_str).is_some_and(is_digest)
            }) && seen.contains(uri)
        }
        _ => false,
    }
}

/// Whether `digest` is `sha256:` and 64 lower-case hex digits.
fn is_digest(digest: &str) -> bool {
    digest
        .strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// `sha256:<hex>` of `bytes`.
fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", data_encoding::HEXLOWER.encode(&Sha256::digest(bytes)))
}

/// `entry` with its URIs read through `mapping`; `None` when one cannot be.
fn mapped(entry: &Value, mapping: &Mapping) -> Option<Value> {
    let mut public = entry.clone();
    public["uri"] = json!(mapping.to_public(entry.get("uri")?.as_str()?)?);
    if let Some(files) = public.get_mut("resources").and_then(Value::as_array_mut) {
        for file in files {
            let uri = mapping.to_public(file.get("uri")?.as_str()?)?;
            file["uri"] = json!(uri);
        }
    }
    Some(public)
}

/// The public URI of provider `spec`'s skill whose `SKILL.md` is at `uri`, on `view`.
pub(crate) fn public_uri(view: &View, spec: &ProviderSpec, uri: &str) -> String {
    Mapping::of(view, spec, uri).to_public(uri).unwrap_or_else(|| uri.to_owned())
}

/// The entry of an enabled package's skill, when the extension can offer it.
fn package_entry(skill: &PackageSkill) -> Option<Value> {
    let frontmatter = skill.frontmatter.clone()?;
    let files: Vec<Value> = skill
        .files
        .iter()
        .map(|f| json!({"uri": skill.uri(&f.path), "digest": format!("sha256:{}", f.sha256), "size": f.bytes}))
        .collect();
    Some(json!({"uri": skill.uri(MANIFEST), "frontmatter": frontmatter, "resources": files}))
}

/// `-32602` for a URI no offered skill has.
fn no_skill(uri: &str) -> RpcError {
    RpcError::invalid_params(format!("No skill is served at {uri}"))
}

/// A provider's content that is not what its skill's entry lists: refused.
fn unverified(uri: &str, what: &str, why: String) -> RpcError {
    RpcError {
        code: -32603,
        message: format!(
            "{uri}: the provider's content is not what its skill's entry lists ({why}), so it is not passed on; the provider's skill may have changed — list the skills again"
        ),
        data: Some(json!({"uri": uri, "verification": what})),
    }
}

/// The raw bytes of a `resources/read` content: its `text`, or its `blob` decoded.
fn bytes_of(content: &Value) -> Option<Vec<u8>> {
    use base64::Engine as _;
    if let Some(text) = content.get("text").and_then(Value::as_str) {
        return Some(text.as_bytes().to_vec());
    }
    let blob = content.get("blob").and_then(Value::as_str)?;
    base64::engine::general_purpose::STANDARD.decode(blob).ok()
}

/// Checks the content of `original` a provider answered with against the entry's
/// `listed` file (`{uri, digest, size}`), and, for the `SKILL.md`, its front matter
/// against `frontmatter`.
fn verify(public: &str, result: &Value, listed: &Value, frontmatter: Option<&Value>) -> Result<(), RpcError> {
    let original = listed.get("uri").and_then(Value::as_str).unwrap_or_default();
    let contents = result.get("contents").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let content = contents
        .iter()
        .find(|c| c.get("uri").and_then(Value::as_str) == Some(original))
        .or_else(|| contents.first())
        .ok_or_else(|| unverified(public, "content", "no content".to_owned()))?;
    let bytes = bytes_of(content).ok_or_else(|| unverified(public, "content", "no text or blob".to_owned()))?;
    let size = listed.get("size").and_then(Value::as_u64).unwrap_or_default();
    if bytes.len() as u64 != size {
        return Err(unverified(public, "size", format!("{} bytes where it lists {size}", bytes.len())));
    }
    let digest = digest_of(&bytes);
    if Some(digest.as_str()) != listed.get("digest").and_then(Value::as_str) {
        return Err(unverified(public, "digest", format!("its digest is {digest}")));
    }
    if let Some(frontmatter) = frontmatter {
        let text = String::from_utf8_lossy(&bytes);
        if butler_catalog::suzu::imports::front_matter_json(&text).as_ref() != Some(frontmatter) {
            return Err(unverified(public, "frontmatter", "its front matter differs from the entry's".to_owned()));
        }
    }
    Ok(())
}

impl Hub {
    /// The skills `view` offers, in order — the packages', then the providers' (those the
    /// quarantine lets through) — each under its public URI; a URI is offered once.
    pub(crate) fn offered_skills(&self, view: &View) -> Vec<Offered> {
        if matches!(view, View::Restricted) {
            return Vec::new();
        }
        let mut seen = HashSet::new();
        let mut offered = Vec::new();
        for (_, skill) in self.skills(view) {
            if let Some(entry) = package_entry(&skill)
                && seen.insert(entry["uri"].as_str().unwrap_or_default().to_owned())
            {
                offered.push(Offered { entry, source: Source::Package(skill) });
            }
        }
        for provider in self.providers().into_iter().filter(|p| offers(view, &p.spec)) {
            for original in provider.skills() {
                if !valid(&original) || self.is_held(&provider.spec.id, Kind::Skill, &original) {
                    continue;
                }
                let uri = original.get("uri").and_then(Value::as_str).unwrap_or_default();
                let mapping = Mapping::of(view, &provider.spec, uri);
                let Some(entry) = mapped(&original, &mapping) else { continue };
                if seen.insert(entry["uri"].as_str().unwrap_or_default().to_owned()) {
                    let source = Source::Provider { provider: Arc::clone(&provider), original, mapping };
                    offered.push(Offered { entry, source });
                }
            }
        }
        offered
    }

    /// Whether `view` offers any skill (then it declares the extension).
    #[must_use]
    pub fn offers_skills(&self, view: &View) -> bool {
        !self.offered_skills(view).is_empty()
    }

    /// Who serves the skill file or folder `uri` on `view` (a provider's id, `suzu:<id>`
    /// for a package), when a skill it offers holds it.
    pub(crate) fn skill_owner(&self, view: &View, uri: &str) -> Option<String> {
        self.offered_skills(view).iter().find(|s| s.holds(uri)).map(Offered::owner)
    }

    /// `skills/list`: a page of the skills `view` offers, from `cursor` on.
    ///
    /// # Errors
    /// A cursor this hub did not give.
    pub async fn list_skills(&self, view: &View, params: &Value) -> Result<Value, RpcError> {
        let start = match params.get("cursor") {
            None | Some(Value::Null) => 0,
            Some(cursor) => cursor
                .as_str()
                .and_then(|c| c.strip_prefix(CURSOR))
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| RpcError::invalid_params("Invalid params: unknown cursor"))?,
        };
        if !matches!(view, View::Restricted) {
            self.start_unlisted(Some(view)).await;
        }
        let offered = self.offered_skills(view);
        let (page, next) = page(&offered, start);
        let mut result = json!({"skills": page.iter().map(|s| s.entry.clone()).collect::<Vec<_>>()});
        if let Some(next) = next {
            result["nextCursor"] = json!(format!("{CURSOR}{next}"));
        }
        Ok(result)
    }

    /// `skills/get`: the entry of the skill whose `SKILL.md` is at `uri` on `view`.
    ///
    /// # Errors
    /// `-32602`: no such skill here, or it is held for the owner's review.
    pub async fn get_skill(&self, view: &View, params: &Value) -> Result<Value, RpcError> {
        let uri = params
            .get("uri")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("Invalid params: skills/get needs `uri`"))?;
        if !matches!(view, View::Restricted) {
            self.start_unlisted(Some(view)).await;
        }
        if let Some(found) = self.offered_skills(view).into_iter().find(|s| s.uri() == uri) {
            return Ok(json!({"skill": found.entry}));
        }
        Err(self.held_error(view, Kind::Skill, uri).unwrap_or_else(|| no_skill(uri)))
    }

    /// The skill resources `resources/list` shows on `view`: every file of a package's
    /// skill, and the `SKILL.md` of a provider's (named and described by its front matter).
    pub(crate) fn skill_resources(&self, view: &View) -> Vec<Value> {
        let mut resources = Vec::new();
        for (_, skill) in self.skills(view) {
            let front = |key: &str| skill.frontmatter.as_ref().and_then(|f| f.get(key)).cloned();
            resources.extend(skill.files.iter().map(|file| {
                let mut resource = json!({"uri": skill.uri(&file.path), "name": file.path,
                       "title": format!("{}: {}", skill.title, file.path), "mimeType": file.mime});
                if file.path == MANIFEST
                    && let (Some(name), Some(description)) = (front("name"), front("description"))
                {
                    resource["name"] = name;
                    resource["description"] = description;
                }
                resource
            }));
        }
        for skill in self.offered_skills(view) {
            if let Source::Provider { .. } = skill.source {
                let front = &skill.entry["frontmatter"];
                resources.push(json!({"uri": skill.uri(), "name": front["name"],
                                      "description": front["description"], "mimeType": "text/markdown"}));
            }
        }
        resources
    }

    /// `resources/read` of a skill's file `uri`, when a skill `view` offers (or holds for
    /// review) lies there: a package's file from its copy, a provider's from the provider —
    /// only a file its entry lists, checked against it ([`verify`]). `None`: no skill's.
    pub(crate) async fn read_skill(
        &self,
        view: &View,
        uri: &str,
        params: &Value,
        asker: &Asker<'_>,
    ) -> Option<Result<Value, RpcError>> {
        if let Some(read) = self.read_package_file(view, uri).await {
            return Some(read);
        }
        let Some(skill) = self.offered_skills(view).into_iter().find(|s| s.holds(uri)) else {
            // A held skill's files are refused as it is.
            return self.held_skill_at(view, uri).and_then(|held| self.held_error(view, Kind::Skill, &held)).map(Err);
        };
        let skill_uri = skill.uri().to_owned();
        let Source::Provider { provider, original, mapping } = skill.source else {
            return Some(Err(crate::not_a_resource(uri)));
        };
        let Some(original_uri) = mapping.to_original(uri) else { return Some(Err(crate::not_a_resource(uri))) };
        let listed = match original.get("resources") {
            Some(Value::Array(files)) => {
                let listed = files.iter().find(|f| f.get("uri").and_then(Value::as_str) == Some(&original_uri));
                match listed {
                    Some(listed) => Some(listed.clone()),
                    None => {
                        return Some(Err(RpcError::invalid_params(format!(
                            "{uri} is not a file of the skill {skill_uri}: its entry does not list it"
                        ))));
                    }
                }
            }
            _ => None,
        };
        let mut params = params.clone();
        params["uri"] = json!(original_uri);
        let mut result = match forward(&provider, crate::methods::RESOURCES_READ, params, asker).await {
            Ok(result) => result,
            Err(error) => return Some(Err(error)),
        };
        if let Some(listed) = &listed {
            let manifest = original.get("uri").and_then(Value::as_str) == Some(&original_uri);
            if let Err(refused) = verify(uri, &result, listed, manifest.then(|| &original["frontmatter"])) {
                tracing::warn!(provider = %provider.spec.id, "{}", refused.message);
                return Some(Err(refused));
            }
        }
        if let Some(contents) = result.get_mut("contents").and_then(Value::as_array_mut) {
            for content in contents {
                let public = content.get("uri").and_then(Value::as_str).and_then(|u| mapping.to_public(u));
                if let Some(public) = public {
                    content["uri"] = json!(public);
                }
            }
        }
        Some(Ok(result))
    }

    /// The public URI of the held skill (of a provider `view` offers) that `uri` lies in.
    fn held_skill_at(&self, view: &View, uri: &str) -> Option<String> {
        self.pins()?;
        self.providers().into_iter().filter(|p| offers(view, &p.spec)).find_map(|provider| {
            provider.skills().into_iter().find_map(|entry| {
                let original = entry.get("uri").and_then(Value::as_str)?;
                let public = public_uri(view, &provider.spec, original);
                (valid(&entry) && within(&public, uri) && self.is_held(&provider.spec.id, Kind::Skill, &entry))
                    .then_some(public)
            })
        })
    }

    /// The contents of a package's skill file `uri` names, when one of the skills `view`
    /// offers has it — from the copy, only while it is what was imported (its digest) —
    /// as text when it is UTF-8 of a textual type, else base64.
    async fn read_package_file(&self, view: &View, uri: &str) -> Option<Result<Value, RpcError>> {
        let (path, file) = self.skills(view).into_iter().find_map(|(_, skill)| {
            let file = skill.file_of(uri)?.clone();
            Some((skill.copy.join(&file.path), file))
        })?;
        let failed = |why: String| RpcError { code: -32603, message: format!("{uri}: {why}"), data: None };
        let bytes = match tokio::fs::read(&path).await {
            Ok(bytes) => bytes,
            Err(e) => return Some(Err(failed(format!("the skill's copy cannot be read: {e}")))),
        };
        if digest_of(&bytes) != format!("sha256:{}", file.sha256) {
            return Some(Err(failed(
                "the skill's copy changed since it was imported; import the package again".to_owned(),
            )));
        }
        let mime = file.mime;
        let textual = mime.starts_with("text/")
            || ["application/json", "application/javascript", "application/x-sh", "application/xml"]
                .contains(&mime.as_str());
        let content = match String::from_utf8(bytes) {
            Ok(text) if textual => json!({"uri": uri, "mimeType": mime, "text": text}),
            Ok(text) => json!({"uri": uri, "mimeType": mime, "blob": crate::base64_of(text.as_bytes())}),
            Err(e) => json!({"uri": uri, "mimeType": mime, "blob": crate::base64_of(e.as_bytes())}),
        };
        Some(Ok(json!({"contents": [content]})))
    }

    /// `resources/directory/read`: the direct children of a folder of a skill `view`
    /// offers, as the skill's entry lists its files (subfolders as `inode/directory`).
    ///
    /// # Errors
    /// `-32602`: `uri` is no folder of an offered skill (a file, or nothing), or a cursor
    /// was given (the answer is one page).
    pub async fn read_directory(&self, view: &View, params: &Value) -> Result<Value, RpcError> {
        let uri = params
            .get("uri")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("Invalid params: resources/directory/read needs `uri`"))?;
        if params.get("cursor").is_some_and(|c| !c.is_null()) {
            return Err(RpcError::invalid_params("Invalid params: unknown cursor"));
        }
        if !matches!(view, View::Restricted) {
            self.start_unlisted(Some(view)).await;
        }
        let offered = self.offered_skills(view);
        let mimes: BTreeMap<String, String> = offered
            .iter()
            .filter_map(|s| match &s.source {
                Source::Package(skill) => Some(skill.files.iter().map(|f| (skill.uri(&f.path), f.mime.clone()))),
                Source::Provider { .. } => None,
            })
            .flatten()
            .collect();
        let folder = uri.trim_end_matches('/');
        let mut children: BTreeMap<String, Value> = BTreeMap::new();
        for file in offered.iter().flat_map(Offered::files) {
            let Some(rest) = file.strip_prefix(folder).and_then(|r| r.strip_prefix('/')) else { continue };
            let (child, deeper) = rest.split_once('/').map_or((rest, false), |(child, _)| (child, true));
            let child_uri = format!("{folder}/{child}");
            let resource = if deeper {
                json!({"uri": child_uri, "name": child, "mimeType": DIRECTORY})
            } else {
                let mut resource = json!({"uri": child_uri, "name": child});
                let mime = mimes.get(file).cloned().or_else(|| child.ends_with(".md").then(|| "text/markdown".into()));
                if let Some(mime) = mime {
                    resource["mimeType"] = json!(mime);
                }
                resource
            };
            children.entry(child_uri).or_insert(resource);
        }
        if children.is_empty() {
            return Err(RpcError::invalid_params(format!("{uri} is not a directory resource")));
        }
        Ok(json!({"resources": children.into_values().collect::<Vec<_>>()}))
    }
}

/// The page of `offered` from `start`, and where the next one starts.
fn page(offered: &[Offered], start: usize) -> (&[Offered], Option<usize>) {
    let start = start.min(offered.len());
    let end = (start + PAGE).min(offered.len());
    (&offered[start..end], (end < offered.len()).then_some(end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(uri: &str, name: &str, files: Value) -> Value {
        json!({"uri": uri, "frontmatter": {"name": name, "description": "Does it"}, "resources": files})
    }

    fn file(uri: &str, bytes: &[u8]) -> Value {
        json!({"uri": uri, "digest": digest_of(bytes), "size": bytes.len()})
    }

    #[test]
    fn only_entries_the_extension_defines_are_offered() {
        let manifest = "skill://pdf/SKILL.md";
        let good = entry(manifest, "pdf", json!([file(manifest, b"x"), file("skill://pdf/a/b.md", b"y")]));
        assert!(valid(&good));
        assert!(valid(&entry("skill://acme/pdf/SKILL.md", "pdf", json!("dynamic"))));
        let bad = [
            entry(manifest, "other", json!([file(manifest, b"x")])),
            entry("skill://Pdf/SKILL.md", "Pdf", json!([file("skill://Pdf/SKILL.md", b"x")])),
            entry(manifest, "pdf", json!([file("skill://pdf/a.md", b"x")])),
            entry(manifest, "pdf", json!([file(manifest, b"x"), file("skill://other/a.md", b"y")])),
            entry(manifest, "pdf", json!([file(manifest, b"x"), file(manifest, b"x")])),
            entry(manifest, "pdf", json!([{"uri": manifest, "digest": "sha256:ABC", "size": 1}])),
            entry(manifest, "pdf", json!([{"uri": manifest, "digest": digest_of(b"x")}])),
            entry(manifest, "pdf", json!("static")),
            entry("skill://pdf/README.md", "pdf", json!("dynamic")),
            json!({"uri": manifest, "frontmatter": {"name": "pdf"}, "resources": "dynamic"}),
        ];
        for entry in bad {
            assert!(!valid(&entry), "{entry}");
        }
    }

    #[test]
    fn a_read_passes_only_with_the_listed_size_digest_and_front_matter() {
        let text = "---\nname: pdf\ndescription: Does it\n---\nBody\n";
        let listed = file("skill://pdf/SKILL.md", text.as_bytes());
        let front = json!({"name": "pdf", "description": "Does it"});
        let answer = |text: &str| json!({"contents": [{"uri": "skill://pdf/SKILL.md", "text": text}]});
        assert!(verify("u", &answer(text), &listed, Some(&front)).is_ok());
        let tampered = text.replace("Body", "Evil");
        let refused = verify("u", &answer(&tampered), &listed, Some(&front)).expect_err("tampered");
        assert_eq!(refused.data.as_ref().map(|d| d["verification"].clone()), Some(json!("digest")));
        let longer = format!("{text}more");
        let refused = verify("u", &answer(&longer), &listed, Some(&front)).expect_err("longer");
        assert_eq!(refused.data.as_ref().map(|d| d["verification"].clone()), Some(json!("size")));
        // Digest and size agree with the body, the front matter not with the entry.
        let relabelled = text.replace("Does it", "Steals it");
        let listed_relabelled = file("skill://pdf/SKILL.md", relabelled.as_bytes());
        let refused = verify("u", &answer(&relabelled), &listed_relabelled, Some(&front)).expect_err("front");
        assert_eq!(refused.data.as_ref().map(|d| d["verification"].clone()), Some(json!("frontmatter")));
        // A binary file, as base64.
        let blob = json!({"contents": [{"uri": "skill://pdf/SKILL.md", "blob": "/wBB"}]});
        assert!(verify("u", &blob, &file("skill://pdf/SKILL.md", &[0xff, 0x00, 0x41]), None).is_ok());
    }

    #[test]
    fn uris_are_namespaced_both_ways_and_pages_follow_on() {
        let mapping = Mapping { original: "skill://".to_owned(), public: "skill://docs/".to_owned() };
        assert_eq!(mapping.to_public("skill://pdf/SKILL.md").as_deref(), Some("skill://docs/pdf/SKILL.md"));
        assert_eq!(mapping.to_original("skill://docs/pdf/a.md").as_deref(), Some("skill://pdf/a.md"));
        assert_eq!(mapping.to_original("skill://other/pdf/a.md"), None);
        let listed = entry("skill://pdf/SKILL.md", "pdf", json!([file("skill://pdf/SKILL.md", b"x")]));
        let public = mapped(&listed, &mapping).expect("mapped");
        assert_eq!(public["resources"][0]["uri"], "skill://docs/pdf/SKILL.md");
        assert!(within("skill://docs/pdf/SKILL.md", "skill://docs/pdf/templates/a.md"));
        assert!(!within("skill://docs/pdf/SKILL.md", "skill://docs/pdfx/SKILL.md"));

        let offered: Vec<Offered> = (0..PAGE + 3)
            .map(|i| {
                let skill = PackageSkill {
                    package: format!("p{i}"),
                    title: String::new(),
                    description: None,
                    body: String::new(),
                    copy: std::path::PathBuf::new(),
                    files: Vec::new(),
                    frontmatter: None,
                };
                Offered { entry: json!({"uri": i}), source: Source::Package(skill) }
            })
            .collect();
        let (first, next) = page(&offered, 0);
        assert_eq!((first.len(), next), (PAGE, Some(PAGE)));
        let (rest, next) = page(&offered, PAGE);
        assert_eq!((rest.len(), next), (3, None));
        assert!(page(&offered, PAGE * 5).0.is_empty());
    }
}
