//! Extension icons: how the manifest's `icon` string is interpreted, and reading
//! the image bytes the console asks for.
//!
//! Relative image paths are opened through a capability handle on the manifest
//! directory (`cap_std::fs::Dir`), so `..`, absolute components and symlinks that lead
//! outside cannot escape it — at scan time and again at every read.

use std::io::Read;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

/// Largest icon file served (2 MB).
pub const MAX_ICON_BYTES: u64 = 2 * 1024 * 1024;
/// A text icon keeps this many characters.
const TEXT_ICON_CHARS: usize = 8;
/// File extensions that make an icon string an image path.
const IMAGE_EXTENSIONS: [&str; 7] = ["png", "jpg", "jpeg", "gif", "webp", "svg", "ico"];

/// Where an image icon's bytes live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageSource {
    /// Relative to the manifest directory; read through a capability handle on it.
    Relative {
        /// The manifest directory; the path may not leave it.
        dir: PathBuf,
        /// The path inside it, as written.
        path: PathBuf,
    },
    /// An absolute path, used as given.
    Absolute(PathBuf),
}

/// How an extension's icon is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Icon {
    /// An image file the host serves.
    Image {
        /// Where the bytes are.
        source: ImageSource,
        /// The `Content-Type` it is served with, from the file's extension.
        media_type: &'static str,
    },
    /// An `http(s)://` or `data:image/` URL the console loads itself.
    Url(String),
    /// Emoji or short text (at most 8 characters).
    Text(String),
    /// No usable icon: a letter derived from the name.
    Letter(String),
}

/// Interprets `spec` for the extension named `name` whose manifest lives in `dir`.
///
/// Returns the icon and, when an image path could not be used, a warning explaining why
/// (the icon then falls back to a letter).
#[must_use]
pub fn resolve(spec: Option<&str>, name: &str, dir: &Path) -> (Icon, Option<String>) {
    let letter = || Icon::Letter(letter_for(name));
    let Some(spec) = spec.map(str::trim).filter(|s| !s.is_empty()) else {
        return (letter(), None);
    };
    let lower = spec.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("data:image/") {
        return (Icon::Url(spec.to_owned()), None);
    }
    let Some(media_type) = media_type_of(spec) else {
        return (Icon::Text(spec.chars().take(TEXT_ICON_CHARS).collect()), None);
    };
    let path = PathBuf::from(spec);
    let source = if path.is_absolute() {
        ImageSource::Absolute(path)
    } else {
        ImageSource::Relative { dir: dir.to_owned(), path }
    };
    match check(&source) {
        Ok(()) => (Icon::Image { source, media_type }, None),
        Err(why) => {
            // The path is the manifest author's text: a control character in it must not
            // break the message into lines.
            let (spec, why) = (crate::validation::one_line(spec), crate::validation::one_line(&why.to_string()));
            (letter(), Some(format!("icon `{spec}` cannot be used ({why}); showing a letter instead")))
        }
    }
}

/// Reads the bytes of an image icon, enforcing the same rules as at scan time.
///
/// # Errors
/// A readable reason when the file is missing, too large, not a file, or leaves the
/// manifest directory.
pub fn read(source: &ImageSource) -> Result<Vec<u8>, IconError> {
    check(source)?;
    let file = match source {
        ImageSource::Relative { dir, path } => open_dir(dir)?.open(path).map_err(|e| describe_io(&e))?.into_std(),
        ImageSource::Absolute(path) => std::fs::File::open(path).map_err(|e| describe_io(&e))?,
    };
    let mut bytes = Vec::new();
    file.take(MAX_ICON_BYTES + 1).read_to_end(&mut bytes).map_err(|e| describe_io(&e))?;
    if bytes.len() as u64 > MAX_ICON_BYTES {
        return Err(IconError::TooLarge);
    }
    Ok(bytes)
}

/// The first letter or digit of the name, upper-cased (`?` when there is none).
#[must_use]
pub fn letter_for(name: &str) -> String {
    name.chars().find(|c| c.is_alphanumeric()).map_or_else(|| "?".to_owned(), |c| c.to_uppercase().collect())
}

fn media_type_of(spec: &str) -> Option<&'static str> {
    let ext = Path::new(spec).extension()?.to_str()?.to_ascii_lowercase();
    if !IMAGE_EXTENSIONS.contains(&ext.as_str()) {
        return None;
    }
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        _ => "image/x-icon",
    })
}

fn check(source: &ImageSource) -> Result<(), IconError> {
    let meta = match source {
        ImageSource::Relative { dir, path } => {
            let meta = open_dir(dir)?.metadata(path).map_err(|e| describe_io(&e))?;
            (meta.is_file(), meta.len())
        }
        ImageSource::Absolute(path) => {
            let meta = std::fs::metadata(path).map_err(|e| describe_io(&e))?;
            (meta.is_file(), meta.len())
        }
    };
    match meta {
        (false, _) => Err(IconError::NotAFile),
        (true, len) if len > MAX_ICON_BYTES => Err(IconError::TooLarge),
        _ => Ok(()),
    }
}

fn open_dir(dir: &Path) -> Result<Dir, IconError> {
    Dir::open_ambient_dir(dir, ambient_authority()).map_err(|e| describe_io(&e))
}

fn describe_io(error: &std::io::Error) -> IconError {
    match error.kind() {
        std::io::ErrorKind::NotFound => IconError::NotFound,
        std::io::ErrorKind::PermissionDenied if error.to_string().contains("outside") => IconError::Outside,
        _ => IconError::Io(error.to_string()),
    }
}

/// Why an image icon cannot be used or read; the message is shown to the owner after
/// the icon's path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IconError {
    /// No file at the path.
    #[error("file not found")]
    NotFound,
    /// The path leaves the manifest's directory.
    #[error("the path leads outside the extension directory")]
    Outside,
    /// Something other than a regular file is there.
    #[error("not a regular file")]
    NotAFile,
    /// Larger than [`MAX_ICON_BYTES`].
    #[error("larger than 2 MB")]
    TooLarge,
    /// Another I/O error, as the system words it.
    #[error("{0}")]
    Io(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_url_and_letter() {
        let dir = Path::new("/nonexistent");
        assert_eq!(resolve(None, "weather", dir).0, Icon::Letter("W".into()));
        assert_eq!(resolve(Some("  "), "3d tool", dir).0, Icon::Letter("3".into()));
        assert_eq!(resolve(Some("🌤️ weather now"), "x", dir).0, Icon::Text("🌤️ weather".chars().take(8).collect()));
        assert_eq!(
            resolve(Some("https://example.org/i.png"), "x", dir).0,
            Icon::Url("https://example.org/i.png".into())
        );
        assert_eq!(
            resolve(Some("data:image/png;base64,AAAA"), "x", dir).0,
            Icon::Url("data:image/png;base64,AAAA".into())
        );
    }

    #[test]
    fn a_path_with_a_newline_gives_a_one_line_warning() {
        let (icon, warning) = resolve(Some("/nonexist\nt/icon.png"), "x", Path::new("/nonexistent"));
        assert_eq!(icon, Icon::Letter("X".into()));
        let warning = warning.expect("a warning");
        assert!(!warning.contains('\n') && warning.contains("/nonexist\\nt/icon.png"), "{warning}");
    }

    #[test]
    fn relative_images_cannot_escape() {
        let root = std::env::temp_dir().join(format!("butler-icon-{}", std::process::id()));
        let ext = root.join("ext");
        std::fs::create_dir_all(&ext).expect("mkdir");
        std::fs::write(root.join("outside.png"), b"png").expect("write");
        std::fs::write(ext.join("inside.png"), b"png").expect("write");
        std::os::unix::fs::symlink(root.join("outside.png"), ext.join("link.png")).expect("symlink");

        let (icon, warning) = resolve(Some("inside.png"), "x", &ext);
        assert!(matches!(icon, Icon::Image { media_type: "image/png", .. }), "{icon:?}");
        assert!(warning.is_none());
        for escape in ["../outside.png", "link.png", "missing.png"] {
            let (icon, warning) = resolve(Some(escape), "x", &ext);
            assert_eq!(icon, Icon::Letter("X".into()), "{escape}");
            assert!(warning.is_some(), "{escape}");
        }
        let source = ImageSource::Relative { dir: ext.clone(), path: "../outside.png".into() };
        assert!(matches!(read(&source), Err(IconError::Outside)));
        std::fs::remove_dir_all(&root).ok();
    }
}
