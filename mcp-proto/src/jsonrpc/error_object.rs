//! The one JSON-RPC error object: the envelope's (raw `data`) and the schema's (typed `data`).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

// S-RPC-6.
/// The `error` member of an error response: an integer `code`, a `message`, an
/// optional `data` of type `D`, and the members JSON-RPC does not define.
///
/// The envelope ([`Response`](super::Response), [`parse_message`](super::parse_message),
/// [`encode`](super::Message::to_bytes)) uses the default `D`, raw JSON: `data` keeps whatever
/// value the sender put there, `null` included (`Some("null")`), byte for byte, and
/// [`PartialEq`] compares it byte for byte. The envelope parser drops unknown members
/// (`extra` is empty); the encoder writes `extra` after `data` when it is not empty.
///
/// The typed MCP layer (`mcp_service::schema`) uses it with `serde_json::Value` or a typed `D`
/// (`UnsupportedProtocolVersionData`, …) through serde, which keeps unknown members in
/// `extra` for a lossless round trip. The spec's bare error shapes (`DecodeError`,
/// `InvalidRequestError`, …) are `ErrorObject<serde_json::Value>` with the matching
/// [`error_codes`](super::error_codes) constant.
#[derive(Debug, Clone, Serialize)]
#[serde(bound(serialize = "D: Serialize"))]
pub struct ErrorObject<D = Box<RawValue>> {
    /// The error code; see [`error_codes`](super::error_codes).
    pub code: i64,
    /// A short description, "SHOULD be limited to a concise single sentence".
    pub message: String,
    /// Extra information defined by the sender.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<D>,
    /// Members JSON-RPC does not define, kept for a lossless round trip (serde); always empty
    /// when read by the envelope parser.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl<D> ErrorObject<D> {
    /// An error with `code` and `message`, no `data` and no other member.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
            extra: Map::new(),
        }
    }

    /// The same error with `data`.
    pub fn with_data(mut self, data: D) -> Self {
        self.data = Some(data);
        self
    }
}

impl ErrorObject {
    /// Reads the raw `data` as `T`: the typed view of an error received by the envelope.
    /// `None` when there is no data; an error when it does not have `T`'s shape.
    pub fn data_as<T: serde::de::DeserializeOwned>(&self) -> Option<Result<T, serde_json::Error>> {
        self.data.as_deref().map(|d| serde_json::from_str(d.get()))
    }
}

/// How two error `data` values compare, for [`ErrorObject`]'s [`PartialEq`]: byte for byte
/// for raw JSON, by value otherwise.
///
/// Raw JSON has no [`PartialEq`] of its own, so `ErrorObject<D>` is comparable for the `D`
/// implementing this trait; a typed `data` of your own gets it with a one-line impl calling
/// `==`.
pub trait ErrorData {
    /// `true` when the two values are equal.
    fn data_eq(&self, other: &Self) -> bool;
}

impl ErrorData for Box<RawValue> {
    fn data_eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl ErrorData for Value {
    fn data_eq(&self, other: &Self) -> bool {
        self == other
    }
}

impl<D: ErrorData> PartialEq for ErrorObject<D> {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code
            && self.message == other.message
            && match (&self.data, &other.data) {
                (Some(a), Some(b)) => a.data_eq(b),
                (None, None) => true,
                _ => false,
            }
            && self.extra == other.extra
    }
}

impl Eq for ErrorObject {}

// Written by hand rather than derived: a derived `#[serde(flatten)]` buffers the members,
// and raw JSON `data` cannot be read back from that buffer.
impl<'de, D: Deserialize<'de>> Deserialize<'de> for ErrorObject<D> {
    fn deserialize<De: Deserializer<'de>>(deserializer: De) -> Result<Self, De::Error> {
        struct ObjectVisitor<D>(PhantomData<D>);

        impl<'de, D: Deserialize<'de>> Visitor<'de> for ObjectVisitor<D> {
            type Value = ErrorObject<D>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON-RPC error object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut code = None;
                let mut message = None;
                let mut data = None;
                let mut extra = Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "code" if code.is_some() => return Err(de::Error::duplicate_field("code")),
                        "code" => code = Some(map.next_value()?),
                        "message" if message.is_some() => {
                            return Err(de::Error::duplicate_field("message"));
                        }
                        "message" => message = Some(map.next_value()?),
                        "data" if data.is_some() => return Err(de::Error::duplicate_field("data")),
                        "data" => data = Some(map.next_value::<Option<D>>()?),
                        _ => {
                            let value = map.next_value()?;
                            extra.insert(key, value);
                        }
                    }
                }
                Ok(ErrorObject {
                    code: code.ok_or_else(|| de::Error::missing_field("code"))?,
                    message: message.ok_or_else(|| de::Error::missing_field("message"))?,
                    data: data.flatten(),
                    extra,
                })
            }
        }

        deserializer.deserialize_map(ObjectVisitor(PhantomData))
    }
}

/// The spec's bare error shapes, with untyped `data`.
impl ErrorObject<serde_json::Value> {
    /// `-32700`, parse error.
    pub fn parse_error(message: impl Into<String>) -> Self {
        Self::new(super::error_codes::PARSE_ERROR, message)
    }

    /// `-32600`, invalid request.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(super::error_codes::INVALID_REQUEST, message)
    }

    /// `-32601`, method not found.
    pub fn method_not_found(message: impl Into<String>) -> Self {
        Self::new(super::error_codes::METHOD_NOT_FOUND, message)
    }

    /// `-32602`, invalid params.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(super::error_codes::INVALID_PARAMS, message)
    }

    /// `-32603`, internal error.
    pub fn internal_error(message: impl Into<String>) -> Self {
        Self::new(super::error_codes::INTERNAL_ERROR, message)
    }

    /// `-32020`, header mismatch (2026-07-28).
    pub fn header_mismatch(message: impl Into<String>) -> Self {
        Self::new(super::error_codes::HEADER_MISMATCH, message)
    }

    /// Reads `data` as `T`: the typed view of an error received with untyped data. `None`
    /// when there is no data; an error when it does not have `T`'s shape.
    pub fn data_as<T: serde::de::DeserializeOwned>(&self) -> Option<Result<T, serde_json::Error>> {
        self.data.clone().map(serde_json::from_value)
    }
}
