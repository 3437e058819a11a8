//! The path checks: a card check's path (its spelling, `butler_store::check`, then its
//! resolution in the validity root, `butler_faculty_validity::files`), a component's
//! `exec[0]` (`catalog::component::resolve_exec`) and an icon path (`catalog::icon`), on a
//! tree made once per run with links that stay inside, lead out, into hidden folders, into
//! the host's state and to a manifest. The input is the path: as text, or (when it starts
//! with 0xff) built from segments that name the tree.
//!
//! Properties: a spelling the check accepts is relative, without `..`, empty or hidden
//! segments, and lexically inside the root; a path the validity root resolves, whatever
//! its spelling, is inside the root once every link is followed, not hidden, not in the
//! host's state, not a manifest, not a file with other hard links, and is what the file
//! system says is there; an accepted `exec[0]` stays in the extension folder; an icon that
//! can be read is a file inside the extension folder.
#![no_main]

use std::path::{Component, Path, PathBuf};
use std::sync::LazyLock;

use arbitrary::Unstructured;
use butler_faculty_validity::files::{Entry, Root};
use butler_host::catalog::component::resolve_exec;
use butler_host::catalog::icon::{self, Icon, ImageSource};
use butler_store::check::Check;
use libfuzzer_sys::fuzz_target;

/// The tree: `<tmp>/root` is the validity root; `<tmp>/outside` is not in it.
struct Tree {
    root: PathBuf,
    canonical: PathBuf,
    validity: Root,
    extension: PathBuf,
}

// The validity root is only ever used from the fuzzing thread.
unsafe impl Sync for Tree {}
unsafe impl Send for Tree {}

const SEGMENTS: &[&str] = &[
    "docs",
    "deep",
    "a.md",
    "b.md",
    "link.md",
    "dlink",
    "up",
    "upup",
    "tok-link.md",
    "state-link.md",
    "state-dir",
    "chain-1.md",
    "manifest.md",
    "hard.md",
    "passwd.md",
    "out.md",
    "loop",
    "self",
    ".butler",
    "owner-token",
    "state",
    "tools",
    "x",
    "butler.json",
    "icon.png",
    "out.png",
    "far.png",
    "..",
    ".",
    "",
    "missing",
];

static TREE: LazyLock<Tree> = LazyLock::new(|| {
    let base = std::env::temp_dir().join(format!("butler-fuzz-paths-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let root = base.join("root");
    let make = |dir: &str| std::fs::create_dir_all(root.join(dir)).expect("mkdir");
    let write = |file: &str, text: &str| std::fs::write(root.join(file), text).expect("write");
    let link = |target: &str, at: &str| std::os::unix::fs::symlink(target, root.join(at)).expect("symlink");
    for dir in ["docs/deep", ".butler", "state", "tools/x"] {
        make(dir);
    }
    std::fs::write(base.join("outside"), "outside").expect("write");
    write(".butler/owner-token", "secret");
    write("state/owner-token", "secret");
    write("tools/x/butler.json", "{}");
    write("tools/x/icon.png", "png");
    write("docs/a.md", "hello");
    write("docs/deep/b.md", "deep");
    link("deep/b.md", "docs/link.md");
    link("docs/deep", "dlink");
    link("..", "docs/up");
    link("../..", "docs/upup");
    link("../.butler/owner-token", "docs/tok-link.md");
    link("../state/owner-token", "docs/state-link.md");
    link("../state", "docs/state-dir");
    link("chain-2.md", "docs/chain-1.md");
    link("tok-link.md", "docs/chain-2.md");
    link("../tools/x/butler.json", "docs/manifest.md");
    link("/etc/passwd", "docs/passwd.md");
    link("../../outside", "docs/out.md");
    link("loop", "docs/loop");
    link(".", "docs/self");
    link("../../docs/a.md", "tools/x/out.png");
    link("../../../outside", "tools/x/far.png");
    std::fs::hard_link(root.join("state/owner-token"), root.join("docs/hard.md")).expect("hard link");
    let guest = root.to_str().expect("a UTF-8 temporary directory").to_owned();
    let internal = serde_json::json!({"paths": [format!("{guest}/state")], "names": ["butler.json"]});
    // Set before the root reads it, while the fuzzer runs nothing else.
    unsafe { std::env::set_var("BUTLER_INTERNAL", internal.to_string()) };
    let validity = Root::open(&guest).expect("the root");
    let canonical = root.canonicalize().expect("canonical root");
    Tree { extension: root.join("tools/x"), root, canonical, validity }
});

fn path_of(data: &[u8]) -> Option<String> {
    match data.split_first() {
        Some((0xff, rest)) => {
            let picks: Vec<u8> = Unstructured::new(rest).arbitrary().ok()?;
            Some(
                picks.iter().take(12).map(|p| SEGMENTS[usize::from(*p) % SEGMENTS.len()]).collect::<Vec<_>>().join("/"),
            )
        }
        _ => String::from_utf8(data.to_vec()).ok(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(path) = path_of(data) else { return };
    let tree = &*TREE;
    spelling(&path, tree);
    resolution(&path, tree);
    exec(&path, tree);
    icons(&path, tree);
});

/// `butler_store::check`: what the spelling check lets through.
fn spelling(path: &str, tree: &Tree) {
    let accepted = Check::Path { path: path.to_owned() }.validate().is_ok();
    if accepted {
        assert!(!path.is_empty() && path.len() <= 1024, "{path:?}");
        assert!(!path.contains(['\\', '\0']), "{path:?}");
        for segment in path.split('/') {
            assert!(!segment.is_empty() && segment != ".." && !segment.starts_with('.'), "{path:?}");
        }
        assert!(Path::new(path).components().all(|c| matches!(c, Component::Normal(_))), "{path:?}");
        assert!(tree.root.join(path).starts_with(&tree.root), "{path:?}");
    }
    let quote = Check::Quote { path: path.to_owned(), text: "x".to_owned() }.validate().is_ok();
    assert_eq!(accepted, quote, "{path:?}");
}

/// `butler_faculty_validity::files`: what the validity root resolves, whatever the spelling.
fn resolution(path: &str, tree: &Tree) {
    let Ok(entry) = tree.validity.entry(path) else { return };
    // The root walks every spelling from itself (a leading `/` included), as the OS does
    // for the root and the path written one after the other.
    let real = PathBuf::from(format!("{}/{path}", tree.root.display()))
        .canonicalize()
        .unwrap_or_else(|e| panic!("{path:?} resolved, but not by the OS: {e}"));
    let inside = real.strip_prefix(&tree.canonical).unwrap_or_else(|_| panic!("{path:?} resolved outside: {real:?}"));
    let segments: Vec<&str> = inside.iter().map(|s| s.to_str().expect("UTF-8")).collect();
    assert!(!segments.iter().any(|s| s.starts_with('.')), "{path:?} resolved to hidden {real:?}");
    assert_ne!(segments.first(), Some(&"state"), "{path:?} resolved into the host's state");
    assert_ne!(segments.last(), Some(&"butler.json"), "{path:?} resolved to a manifest");
    let meta = std::fs::metadata(&real).expect("metadata");
    match entry {
        Entry::File(size) => {
            assert!(meta.is_file() && meta.len() == size, "{path:?}");
            assert_eq!(std::os::unix::fs::MetadataExt::nlink(&meta), 1, "{path:?} has other hard links");
            let mut bytes = Vec::new();
            tree.validity.read(path, 1 << 20, &mut bytes).expect("a resolved file reads");
            assert_eq!(bytes, std::fs::read(&real).expect("read"), "{path:?} read another file");
        }
        Entry::Dir => assert!(meta.is_dir(), "{path:?}"),
        Entry::Other => {}
    }
}

/// `catalog::component::resolve_exec`: a component named by a path inside the folder.
fn exec(path: &str, tree: &Tree) {
    let Ok(resolved) = resolve_exec(&tree.extension, path) else { return };
    let inside = resolved.strip_prefix(&tree.extension).expect("the exec path starts in the folder");
    assert!(inside.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir)), "{path:?}");
}

/// `catalog::icon`: an image icon that can be read is a file inside the extension folder.
fn icons(path: &str, tree: &Tree) {
    let (icon, warning) = icon::resolve(Some(path), "Fuzz", &tree.extension);
    match &icon {
        Icon::Image { source: ImageSource::Relative { dir, path: relative }, .. } => {
            assert!(warning.is_none());
            let bytes = icon::read(&ImageSource::Relative { dir: dir.clone(), path: relative.clone() })
                .unwrap_or_else(|e| panic!("{path:?} resolved but does not read: {e}"));
            let real = dir.join(relative).canonicalize().expect("an icon read is there");
            let folder = tree.extension.canonicalize().expect("canonical folder");
            assert!(real.starts_with(&folder), "icon {path:?} read {real:?}, outside the folder");
            assert_eq!(bytes, std::fs::read(&real).expect("read"));
        }
        Icon::Image { source: ImageSource::Absolute(absolute), .. } => assert!(absolute.is_absolute()),
        Icon::Letter(_) | Icon::Text(_) | Icon::Url(_) => {}
    }
}
