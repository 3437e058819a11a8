//! A provider's result on its way to the client ([`Answer`]): read into a `Value` where the
//! hub looks into it or changes it, else passed on as the text the provider wrote. The
//! common `tools/call` answer is then neither built into a tree of maps and strings nor
//! written out again from one: its text is checked as JSON in full, without allocating,
//! and copied once.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// A result's top-level keys that the hub reads or changes on its way to the client (a
/// 2026-07-28 provider's protocol keys, cache hints and rounds): a result with any of them
/// is read into a `Value`.
const ACTED_ON: [&str; 6] = ["_meta", "resultType", "ttlMs", "cacheScope", "requestState", "inputRequests"];

/// A provider's result.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Read into a value.
    Read(Value),
    /// An object the hub passes on as its provider wrote it.
    Verbatim(Verbatim),
}

/// A result object as its provider wrote it, checked to be JSON in full (as the `Value`
/// reading checks it: UTF-8, escapes, numbers' range, depth) and holding none of the keys
/// the hub acts on.
#[derive(Debug, Clone)]
pub struct Verbatim {
    text: Box<RawValue>,
    is_error: bool,
}

impl PartialEq for Verbatim {
    fn eq(&self, other: &Self) -> bool {
        self.text.get() == other.text.get()
    }
}

impl Verbatim {
    /// The object's JSON text, byte for byte as the provider wrote it.
    #[must_use]
    pub fn text(&self) -> &str {
        self.text.get()
    }

    /// Whether it is a tool's error (`"isError": true`).
    #[must_use]
    pub fn is_error(&self) -> bool {
        self.is_error
    }

    /// The result read into a value.
    #[must_use]
    pub fn to_value(&self) -> Value {
        read(&self.text)
    }
}

impl Answer {
    /// The result as a value (a verbatim one read now).
    #[must_use]
    pub fn into_value(self) -> Value {
        match self {
            Self::Read(value) => value,
            Self::Verbatim(verbatim) => verbatim.to_value(),
        }
    }
}

impl From<Value> for Answer {
    fn from(value: Value) -> Self {
        Self::Read(value)
    }
}

/// A result's text as a provider's line carried it, checked to be JSON in full.
#[derive(Debug, Clone, Copy)]
pub struct Written<'a> {
    text: &'a RawValue,
    /// An object without any of the keys the hub acts on.
    plain: bool,
    is_error: bool,
}

impl<'a> Written<'a> {
    /// Checks `text` in full; `None` when it is not JSON the `Value` reading would take.
    #[must_use]
    pub fn check(text: &'a RawValue) -> Option<Self> {
        let mut reader = serde_json::Deserializer::from_str(text.get());
        let seen = Checked { top: true }.deserialize(&mut reader).ok()?;
        reader.end().ok()?;
        let (plain, is_error) = match seen {
            Seen::Top { plain, is_error } => (plain, is_error),
            Seen::True | Seen::Other => (false, false),
        };
        Some(Self { text, plain, is_error })
    }

    /// The answer: verbatim where `verbatim` allows it and the hub would change nothing in
    /// the result, else read.
    #[must_use]
    pub fn answer(self, verbatim: bool) -> Answer {
        if verbatim && self.plain {
            Answer::Verbatim(Verbatim { text: self.text.to_owned(), is_error: self.is_error })
        } else {
            Answer::Read(read(self.text))
        }
    }
}

/// A result's text, checked by [`Written::check`], read into a value (it parses: the check
/// refuses what the `Value` reading refuses).
fn read(text: &RawValue) -> Value {
    serde_json::from_str(text.get()).unwrap_or(Value::Null)
}

/// What the check learns of a value.
enum Seen {
    /// `true`.
    True,
    /// An object at the top: whether it is plain (no key the hub acts on) and a tool's
    /// error (`"isError": true`, the last one as a `Value` would keep it).
    Top { plain: bool, is_error: bool },
    /// Anything else.
    Other,
}

/// Checks a value as the `Value` reading would — every string decoded, every number read,
/// nesting within the reader's depth limit — keeping nothing of it but what [`Seen`] says
/// (`IgnoredAny` skips a value without these checks). `top`: the result itself, whose keys
/// are looked at.
#[derive(Clone, Copy)]
struct Checked {
    top: bool,
}

impl<'de> DeserializeSeed<'de> for Checked {
    type Value = Seen;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Seen, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Checked {
    type Value = Seen;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Seen, A::Error> {
        let inner = Checked { top: false };
        let (mut plain, mut is_error) = (true, false);
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            let seen = map.next_value_seed(inner)?;
            if self.top {
                plain &= !ACTED_ON.contains(&key.as_ref());
                if key == "isError" {
                    is_error = matches!(seen, Seen::True);
                }
            }
        }
        Ok(if self.top { Seen::Top { plain, is_error } } else { Seen::Other })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Seen, A::Error> {
        while seq.next_element_seed(Checked { top: false })?.is_some() {}
        Ok(Seen::Other)
    }

    fn visit_bool<E>(self, value: bool) -> Result<Seen, E> {
        Ok(if value { Seen::True } else { Seen::Other })
    }

    fn visit_i64<E>(self, _: i64) -> Result<Seen, E> {
        Ok(Seen::Other)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Seen, E> {
        Ok(Seen::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Seen, E> {
        Ok(Seen::Other)
    }

    fn visit_str<E>(self, _: &str) -> Result<Seen, E> {
        Ok(Seen::Other)
    }

    fn visit_unit<E>(self) -> Result<Seen, E> {
        Ok(Seen::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(text: &str) -> Option<Answer> {
        let raw: &RawValue = serde_json::from_str(text).ok()?;
        Some(Written::check(raw)?.answer(true))
    }

    #[test]
    fn a_plain_object_is_passed_on_as_written() {
        let text = r#"{"content":[{"type":"text","text":"Echo: caf\u00e9"}],"isError":true}"#;
        let Some(Answer::Verbatim(verbatim)) = written(text) else { panic!("verbatim") };
        assert_eq!(verbatim.text(), text, "not a byte changed");
        assert!(verbatim.is_error());
        assert_eq!(verbatim.to_value(), serde_json::from_str::<Value>(text).unwrap_or_default());
        let Some(Answer::Verbatim(ok)) = written(r#"{"content":[],"isError":"true","isError":false}"#) else {
            panic!("verbatim")
        };
        assert!(!ok.is_error(), "only `true` itself, the last one as a `Value` would keep it");
    }

    #[test]
    fn a_result_the_hub_acts_on_is_read() {
        for text in [
            r#"{"content":[],"_meta":{"a":1}}"#,
            r#"{"resultType":"input_required","inputRequests":{}}"#,
            r#"{"content":[],"ttlMs":3,"cacheScope":"x"}"#,
            r#"{"content":[],"result\u0054ype":"complete"}"#,
            "[1,2]",
            "3",
            "null",
        ] {
            let expected: Value = serde_json::from_str(text).unwrap_or_default();
            assert_eq!(written(text), Some(Answer::Read(expected)), "{text}");
        }
        let raw: &RawValue = serde_json::from_str(r#"{"content":[]}"#).unwrap_or_else(|_| unreachable!());
        let read = Written::check(raw).map(|w| w.answer(false));
        assert_eq!(read, Some(Answer::Read(serde_json::json!({"content": []}))), "not asked for verbatim");
    }

    #[test]
    fn what_the_value_reading_refuses_is_refused() {
        let deep = format!(r#"{{"a":{}1{}}}"#, "[".repeat(200), "]".repeat(200));
        for text in [r#"{"a":"\udc00"}"#, r#"{"a":1e400}"#, r#"{"isError":"\ud800"}"#, deep.as_str()] {
            // RawValue alone takes each of these (it only skips the value).
            let raw: Option<&RawValue> = serde_json::from_str(text).ok();
            assert!(serde_json::from_str::<Value>(text).is_err(), "{text}");
            assert!(raw.and_then(Written::check).is_none(), "{text}");
        }
    }
}
