// S-RPC-2.
//! [`RequestId`]: the JSON-RPC request id, a string or an integer.

use std::fmt;

use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::encode;

// S-RPC-2.
/// The id of a JSON-RPC request: a string or an integer, never `null`.
///
/// - **Integers** are kept as [`i64`]. The wire text must be a JSON integer (no fraction, no
///   exponent) in `i64` range: `1.0`, `1.5` and `1e3` are refused, and so is any integer above
///   `i64::MAX` or below `i64::MIN`. `-0` is read as `0`. The MCP schema types ids as
///   `"integer"`, and echoing `1.0` back as `1` could make a peer that matches ids by text lose
///   its response, so a non-integer number is an invalid id rather than something to round.
/// - **Strings** may hold any Unicode text, including the empty string and escapes.
///
/// `Number(1)` and `String("1")` are different ids. The derived [`Ord`] puts every number
/// before every string; it exists so ids can key ordered maps, not for any protocol meaning.
///
/// [`Display`](fmt::Display) writes the id as it appears on the wire: `7`, or `"abc"` with
/// JSON escapes. `Serialize`/`Deserialize` follow the same rules as the envelope parser
/// ([`parse_body`](super::parse_body)): deserializing `null`, a float, a boolean or a
/// structure fails.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id, unescaped.
    String(Box<str>),
}

impl RequestId {
    /// The integer, when this is a numeric id.
    pub fn as_number(&self) -> Option<i64> {
        match self {
            Self::Number(n) => Some(*n),
            Self::String(_) => None,
        }
    }

    /// The text, when this is a string id.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::Number(_) => None,
            Self::String(s) => Some(s),
        }
    }
}

impl From<i64> for RequestId {
    fn from(n: i64) -> Self {
        Self::Number(n)
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        Self::String(s.into())
    }
}

impl From<String> for RequestId {
    fn from(s: String) -> Self {
        Self::String(s.into_boxed_str())
    }
}

impl From<Box<str>> for RequestId {
    fn from(s: Box<str>) -> Self {
        Self::String(s)
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::String(s) => {
                f.write_str("\"")?;
                encode::escape_pieces(s, |piece| f.write_str(piece))?;
                f.write_str("\"")
            }
        }
    }
}

impl Serialize for RequestId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Number(n) => serializer.serialize_i64(*n),
            Self::String(s) => serializer.serialize_str(s),
        }
    }
}

impl<'de> Deserialize<'de> for RequestId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IdVisitor)
    }
}

struct IdVisitor;

impl Visitor<'_> for IdVisitor {
    type Value = RequestId;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC request id (a string or an integer in i64 range)")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<RequestId, E> {
        Ok(RequestId::Number(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<RequestId, E> {
        i64::try_from(v)
            .map(RequestId::Number)
            .map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<RequestId, E> {
        Ok(RequestId::from(v))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<RequestId, E> {
        Ok(RequestId::from(v))
    }
}
