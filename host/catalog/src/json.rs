//! Reading owner-written JSON files strictly and safely, for manifests and the root config.
//!
//! - the size read is capped before anything is allocated for it;
//! - FIFOs, sockets and devices are refused (opening a FIFO would block);
//! - a UTF-8 byte-order mark is accepted, other encodings are refused;
//! - a key written twice in one object is an error (`serde_json` would keep the last one
//!   silently, which makes `"kind": "tool"` at the top of a file mean nothing);
//! - whole numbers written with a decimal point (`1.0`) are integers, as JSON Schema says.
//!
//! Errors are one-line strings naming the file; callers wrap them in their own types.

use std::fmt;
use std::io::Read;
use std::path::Path;

use serde::Deserializer;
use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Whether an I/O error says the file system could not be asked right now (out of file
/// descriptors or memory, permission, I/O, a vanished or stale mount) rather than
/// something about the file itself (it is missing, a loop of links, not a directory): what
/// was known of such a file should stand.
#[must_use]
pub fn is_unreadable(error: &std::io::Error) -> bool {
    use rustix::io::Errno;
    let Some(errno) = error.raw_os_error().map(Errno::from_raw_os_error) else { return false };
    [
        Errno::MFILE,
        Errno::NFILE,
        Errno::NOMEM,
        Errno::ACCESS,
        Errno::PERM,
        Errno::IO,
        Errno::AGAIN,
        Errno::INTR,
        Errno::STALE,
        Errno::NOTCONN,
        Errno::TIMEDOUT,
        Errno::BUSY,
        Errno::NOBUFS,
        Errno::NODEV,
        Errno::NXIO,
    ]
    .contains(&errno)
}

/// Why a file could not be read as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    /// A readable reason naming the file.
    pub message: String,
    /// The file system could not be asked (out of file descriptors, permission, I/O): the
    /// file may be fine, so what was known of it should stand.
    pub unreadable: bool,
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<ParseError> for ReadError {
    fn from(error: ParseError) -> Self {
        Self { message: error.to_string(), unreadable: false }
    }
}

/// Why the bytes of a file are not the JSON [`parse_bytes`] takes; the message names the
/// file.
#[derive(Debug, thiserror::Error)]
#[allow(missing_docs, reason = "its fields are the parts of each variant's #[error] message")]
pub enum ParseError {
    /// A byte that is not UTF-8, at `offset`.
    #[error("{name} is not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 {
        name: String,
        /// Where the first invalid byte is.
        offset: usize,
    },
    /// Nothing but white space.
    #[error("{name} is empty")]
    Empty { name: String },
    /// Not strict JSON; the parser's message says where.
    #[error("{name} is not valid JSON: {source}")]
    Invalid {
        name: String,
        /// The parser's error, with line and column.
        source: serde_json::Error,
    },
}

impl From<String> for ReadError {
    fn from(message: String) -> Self {
        Self { message, unreadable: false }
    }
}

/// Reads and parses `path`. `Ok(None)` when there is no such file.
///
/// # Errors
/// A readable reason naming the file: not a regular file, too large, not UTF-8, empty,
/// not JSON, or a duplicate key (with line and column); or that it could not be read.
pub fn read_file(path: &Path, max_bytes: u64) -> Result<Option<Value>, ReadError> {
    let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    let unreadable =
        |e: std::io::Error| ReadError { message: format!("cannot read {name}: {e}"), unreadable: is_unreadable(&e) };
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unreadable(e)),
    };
    if meta.is_dir() {
        return Err(format!("{name} is a directory, not a file").into());
    }
    if !meta.is_file() {
        return Err(format!("{name} is not a regular file").into());
    }
    let too_large = || ReadError::from(format!("{name} is larger than {} KiB", max_bytes / 1024));
    if meta.len() > max_bytes {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    match std::fs::File::open(path).and_then(|file| file.take(max_bytes + 1).read_to_end(&mut bytes)) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unreadable(e)),
    }
    if bytes.len() as u64 > max_bytes {
        return Err(too_large());
    }
    Ok(Some(parse_bytes(&bytes, &name)?))
}

/// Parses the bytes of a file named `name` as [`read_file`] does once they are read: UTF-8
/// (a byte-order mark is skipped), not blank, strict JSON (see the module docs).
///
/// # Errors
/// A one-line reason naming the file.
pub fn parse_bytes(bytes: &[u8], name: &str) -> Result<Value, ParseError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| ParseError::NotUtf8 { name: name.to_owned(), offset: e.valid_up_to() })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Err(ParseError::Empty { name: name.to_owned() });
    }
    parse(text).map_err(|source| ParseError::Invalid { name: name.to_owned(), source })
}

/// Parses `text` strictly (see the module docs).
///
/// # Errors
/// The parser's message with line and column.
pub fn parse(text: &str) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = Strict.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// Builds a [`Value`] like `serde_json` does, refusing duplicate keys.
struct Strict;

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        /// Integers an f64 holds exactly.
        const EXACT: f64 = 9_007_199_254_740_992.0;
        if v.fract() == 0.0 && v.abs() <= EXACT {
            #[allow(clippy::cast_possible_truncation)]
            return Ok(Value::from(v as i64));
        }
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Strict)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if map.contains_key(&key) {
                let key = crate::validation::one_line(&key);
                return Err(A::Error::custom(format!("the field `{key}` is written twice")));
            }
            let value = access.next_value_seed(Strict)?;
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

/// Deserializes a schema-valid document into its typed form; a value the type cannot
/// hold (e.g. a number too large for the field) is reported at its JSON pointer.
///
/// # Errors
/// `(pointer, message)`.
pub fn typed<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, (String, String)> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let mut pointer = String::new();
        for segment in e.path().iter() {
            match segment {
                serde_path_to_error::Segment::Seq { index } => pointer.push_str(&format!("/{index}")),
                serde_path_to_error::Segment::Map { key } => {
                    pointer.push('/');
                    pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                }
                serde_path_to_error::Segment::Enum { .. } | serde_path_to_error::Segment::Unknown => {}
            }
        }
        let inner = e.into_inner().to_string();
        let message = if inner.contains("integer") || inner.contains("floating point") {
            "is out of range for this field".to_owned()
        } else {
            format!("cannot be used: {inner}")
        };
        (pointer, message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_refused_with_their_position() {
        let err = parse("{\n \"kind\": \"tool\",\n \"kind\": \"faculty\"\n}").expect_err("duplicate");
        assert!(err.to_string().contains("`kind` is written twice at line 3"), "{err}");
        assert!(parse(r#"{"a": {"b": 1}, "c": {"b": 2}}"#).is_ok(), "same key in different objects");
    }

    #[test]
    fn whole_floats_are_integers() {
        assert_eq!(parse("[1.0, 2.5, -3.0]").expect("json"), serde_json::json!([1, 2.5, -3]));
    }
}
