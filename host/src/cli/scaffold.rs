//! `butler faculty new` and `butler faculty wit`: a faculty project to start from, in Rust,
//! Python or JavaScript, and the WIT it builds against — everything a faculty author needs
//! without a checkout of this repository. The toolchain versions a skeleton pins are the
//! ones the test suite builds with (`tests/tools/`).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use include_dir::{Dir, include_dir};

static WIT: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../wit");
/// The WIT version new faculties target.
const WIT_VERSION: &str = "0.2.0";
const KIT_LIB: &str = include_str!("../../../faculties/kit/src/lib.rs");
const NPM_PINS: &str = include_str!("../../../tests/tools/package.json");
const PYPI_PINS: &str = include_str!("../../../tests/tools/requirements.txt");

/// The language of a new faculty project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Cargo project with the guest kit (`wasm32-wasip2`).
    Rust,
    /// `app.py` for componentize-py.
    Python,
    /// `faculty.js` for componentize-js.
    Js,
}

/// One file of a skeleton: its path in the project and its template.
type Template = (&'static str, &'static str);

const RUST: &[Template] = &[
    ("Cargo.toml", include_str!("../../templates/faculty/rust/Cargo.toml.tmpl")),
    ("src/lib.rs", include_str!("../../templates/faculty/rust/lib.rs.tmpl")),
    ("README.md", include_str!("../../templates/faculty/rust/README.md.tmpl")),
    ("vendor/kit/Cargo.toml", include_str!("../../templates/faculty/rust/kit-Cargo.toml.tmpl")),
    (".gitignore", "/target\n"),
];
const PYTHON: &[Template] = &[
    ("app.py", include_str!("../../templates/faculty/python/app.py.tmpl")),
    ("README.md", include_str!("../../templates/faculty/python/README.md.tmpl")),
    ("requirements.txt", "componentize-py=={{componentize_py}}\n"),
    (".gitignore", "/.venv/\n__pycache__/\n*.wasm\n"),
];
const JS: &[Template] = &[
    ("faculty.js", include_str!("../../templates/faculty/js/faculty.js.tmpl")),
    ("package.json", include_str!("../../templates/faculty/js/package.json.tmpl")),
    ("README.md", include_str!("../../templates/faculty/js/README.md.tmpl")),
    (".gitignore", "/node_modules/\n*.wasm\n"),
];

/// Creates the project of faculty `name` in `dir` (which must not exist or be empty), and
/// returns the lines telling how to build it and install it into `faculties` (the
/// instance's faculties folder; unknown: a placeholder). Each line runs on its own, from
/// any directory: the paths in it are absolute.
pub fn new_project(name: &str, lang: Lang, dir: &Path, faculties: Option<&Path>) -> anyhow::Result<Vec<String>> {
    let valid = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.len() <= 64;
    if !valid {
        bail!("`{name}` is not a valid faculty id: use lowercase letters, digits and `-`, starting with a letter");
    }
    if dir.exists() && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        bail!("{} already exists and is not empty", dir.display());
    }
    let title: String = name
        .split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect();
    let pins = Pins::bundled()?;
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{type}}", &title)
            .replace("{{title}}", &title)
            .replace("{{crate}}", &name.replace('-', "_"))
            .replace("{{version}}", butler_host::VERSION)
            .replace("{{componentize_py}}", &pins.componentize_py)
            .replace("{{componentize_js}}", &pins.componentize_js)
            .replace("{{preview2_shim}}", &pins.preview2_shim)
    };
    let templates = match lang {
        Lang::Rust => RUST,
        Lang::Python => PYTHON,
        Lang::Js => JS,
    };
    for (path, template) in templates {
        write(&dir.join(path), &fill(template))?;
    }
    if lang == Lang::Rust {
        write(&dir.join("vendor/kit/src/lib.rs"), KIT_LIB)?;
    }
    write_wit(&dir.join("wit"), false)?;

    let at = shell_word(&std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned()).display().to_string());
    let into =
        faculties.map_or_else(|| "<instance>/faculties".to_owned(), |folder| shell_word(&folder.display().to_string()));
    let installed = |file: &str| format!("install:   cp {file} {into}/{name}.wasm");
    Ok(match lang {
        Lang::Rust => vec![
            "toolchain: rustup target add wasm32-wasip2".to_owned(),
            format!("build it:  cd {at} && cargo build --release --target wasm32-wasip2"),
            installed(&format!("{at}/target/wasm32-wasip2/release/{}.wasm", name.replace('-', "_"))),
        ],
        Lang::Python => vec![
            format!("toolchain: cd {at} && python3 -m venv .venv && .venv/bin/pip install -r requirements.txt"),
            format!(
                "build it:  cd {at} && .venv/bin/componentize-py -d wit/butler-faculty@{WIT_VERSION} -w faculty-wasi componentize app -p . -o {name}.wasm"
            ),
            installed(&format!("{at}/{name}.wasm")),
        ],
        Lang::Js => vec![
            format!("toolchain: cd {at} && npm install"),
            format!("build it:  cd {at} && npm run build"),
            installed(&format!("{at}/{name}.wasm")),
        ],
    })
}

/// Writes the WIT faculties build against (every version the host serves, with the WASI
/// interfaces they use) into `dir`. A file already there with other content is refused
/// unless `replace`; identical ones are left as they are. Returns the files written.
pub fn write_wit(dir: &Path, replace: bool) -> anyhow::Result<Vec<PathBuf>> {
    let files = all_files(&WIT);
    let mut differing = Vec::new();
    for file in &files {
        let path = dir.join(file.path());
        if let Ok(existing) = std::fs::read(&path)
            && existing != file.contents()
        {
            differing.push(path);
        }
    }
    if !replace && !differing.is_empty() {
        bail!(
            "{} already holds other versions of these files (run with --force to replace them): {}",
            dir.display(),
            differing.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    let mut written = Vec::new();
    for file in files {
        let path = dir.join(file.path());
        if std::fs::read(&path).is_ok_and(|existing| existing == file.contents()) {
            continue;
        }
        let text = file.contents_utf8().context("WIT files are UTF-8")?;
        write(&path, text)?;
        written.push(path);
    }
    Ok(written)
}

/// The toolchain versions the skeletons pin: the ones `tests/tools/` pins for the suite.
struct Pins {
    componentize_py: String,
    componentize_js: String,
    preview2_shim: String,
}

impl Pins {
    fn bundled() -> anyhow::Result<Self> {
        let npm: serde_json::Value = serde_json::from_str(NPM_PINS).context("the bundled npm pins are JSON")?;
        let npm_pin = |package: &str| {
            npm["dependencies"][package].as_str().map(str::to_owned).with_context(|| format!("no pin for {package}"))
        };
        let componentize_py = PYPI_PINS
            .lines()
            .find_map(|line| line.trim().strip_prefix("componentize-py=="))
            .map(str::to_owned)
            .context("no pin for componentize-py")?;
        Ok(Self {
            componentize_py,
            componentize_js: npm_pin("@bytecodealliance/componentize-js")?,
            preview2_shim: npm_pin("@bytecodealliance/preview2-shim")?,
        })
    }
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn all_files<'a>(dir: &'a Dir<'a>) -> Vec<&'a include_dir::File<'a>> {
    let mut files: Vec<_> = dir.files().collect();
    for sub in dir.dirs() {
        files.extend(all_files(sub));
    }
    files
}

/// `word` as one shell word: as it is when that is safe, else single-quoted.
fn shell_word(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "_./-+@%:,=".contains(c)) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_steps_name_absolute_paths_and_the_real_faculties_folder() {
        let temp = tempfile::tempdir().expect("temp");
        let dir = temp.path().join("weather");
        let faculties = temp.path().join("my instance/faculties");
        let steps = new_project("weather", Lang::Rust, &dir, Some(&faculties)).expect("created");
        let install = steps.iter().find(|s| s.starts_with("install:")).expect("an install step");
        let built = dir.join("target/wasm32-wasip2/release/weather.wasm");
        let quoted = shell_word(&faculties.display().to_string());
        assert_eq!(*install, format!("install:   cp {} {quoted}/weather.wasm", built.display()), "{steps:?}");
        let temp_relative = tempfile::tempdir_in(".").expect("temp here");
        let relative = temp_relative.path().file_name().map(|n| Path::new(n).join("w")).expect("name");
        let steps = new_project("w", Lang::Js, &relative, None).expect("created");
        let absolute = std::path::absolute(&relative).expect("absolute");
        assert!(steps.iter().all(|s| !s.contains(" cd ") || s.contains(&*absolute.display().to_string())), "{steps:?}");
        assert!(steps.iter().any(|s| s.ends_with("<instance>/faculties/w.wasm")), "{steps:?}");
    }

    #[test]
    fn the_pins_are_read_from_the_suites_tools() {
        let pins = Pins::bundled().expect("pins");
        assert!(pins.componentize_py.starts_with("0."), "{}", pins.componentize_py);
        assert!(pins.componentize_js.chars().all(|c| c.is_ascii_digit() || c == '.'), "{}", pins.componentize_js);
        assert!(!pins.preview2_shim.is_empty());
        let doc = include_str!("../../../docs/faculties.md").split_whitespace().collect::<Vec<_>>().join(" ");
        for named in [
            format!("componentize-py {}", pins.componentize_py),
            format!("componentize-js {}", pins.componentize_js),
            format!("preview2-shim {}", pins.preview2_shim),
        ] {
            assert!(doc.contains(&named), "docs/faculties.md names the tested version: {named}");
        }
    }

    #[test]
    fn paths_are_quoted_for_the_shell_only_when_needed() {
        assert_eq!(shell_word("/tmp/my-faculty"), "/tmp/my-faculty");
        assert_eq!(shell_word("/tmp/my faculty"), "'/tmp/my faculty'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }

    #[test]
    fn the_wit_is_written_once_and_a_changed_file_is_not_overwritten() {
        let dir = tempfile::tempdir().expect("temp");
        let written = write_wit(dir.path(), false).expect("written");
        let faculty = dir.path().join(format!("butler-faculty@{WIT_VERSION}/faculty.wit"));
        assert!(written.contains(&faculty), "{written:?}");
        assert!(write_wit(dir.path(), false).expect("again").is_empty(), "identical files are left alone");
        std::fs::write(&faculty, "mine").expect("edit");
        let refused = write_wit(dir.path(), false).expect_err("refused").to_string();
        assert!(refused.contains("--force") && refused.contains("faculty.wit"), "{refused}");
        assert_eq!(std::fs::read_to_string(&faculty).expect("read"), "mine");
        assert_eq!(write_wit(dir.path(), true).expect("replaced"), std::slice::from_ref(&faculty));
        assert!(std::fs::read_to_string(&faculty).expect("read").contains("interface"));
    }
}
