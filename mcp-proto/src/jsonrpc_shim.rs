//! TEMPORARY stand-in for the `jsonrpc` module being written on another branch, with the
//! agreed names, so the server compiles and is tested until it lands. Replaced wholesale by
//! the real module at merge time; nothing else should grow here.
#![allow(missing_docs)]

use std::fmt;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RequestId {
    Number(i64),
    String(Box<str>),
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{s:?}"),
        }
    }
}

impl Serialize for RequestId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RequestId::Number(n) => s.serialize_i64(*n),
            RequestId::String(v) => s.serialize_str(v),
        }
    }
}

impl RequestId {
    fn from_raw(raw: &RawValue) -> Option<RequestId> {
        match serde_json::from_str::<serde_json::Value>(raw.get()).ok()? {
            serde_json::Value::Number(n) => n.as_i64().map(RequestId::Number),
            serde_json::Value::String(s) => Some(RequestId::String(s.into())),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Request {
    pub id: RequestId,
    pub method: Box<str>,
    pub params: Option<Box<RawValue>>,
}

#[derive(Debug, Clone)]
pub struct Notification {
    pub method: Box<str>,
    pub params: Option<Box<RawValue>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: Box<str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Box<RawValue>>,
}

#[derive(Debug, Clone)]
pub enum Outcome {
    Result(Box<RawValue>),
    Error(ErrorObject),
}

#[derive(Debug, Clone)]
pub struct Response {
    pub id: Option<RequestId>,
    pub outcome: Outcome,
}

#[derive(Debug, Clone)]
pub enum Message {
    Request(Request),
    Notification(Notification),
    Response(Response),
}

#[derive(Debug, Clone)]
pub struct InvalidMessage {
    pub id: Option<RequestId>,
}

#[derive(Debug)]
pub enum Body {
    Single(Message),
    Batch(Vec<Result<Message, InvalidMessage>>),
}

#[derive(Debug, Clone)]
pub enum ParseFailure {
    Parse,
    Invalid(Option<RequestId>),
}

impl ParseFailure {
    pub fn code(&self) -> i64 {
        match self {
            ParseFailure::Parse => error_codes::PARSE_ERROR,
            ParseFailure::Invalid(_) => error_codes::INVALID_REQUEST,
        }
    }
    pub fn id(&self) -> Option<&RequestId> {
        match self {
            ParseFailure::Parse => None,
            ParseFailure::Invalid(id) => id.as_ref(),
        }
    }
}

pub mod error_codes {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
}

#[derive(Deserialize)]
struct RawMsg {
    jsonrpc: Option<String>,
    #[serde(default)]
    id: Option<Box<RawValue>>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Box<RawValue>>,
    #[serde(default)]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<RawError>,
}

#[derive(Deserialize)]
struct RawError {
    code: i64,
    message: String,
    #[serde(default)]
    data: Option<Box<RawValue>>,
}

fn classify(raw: &RawValue) -> Result<Message, InvalidMessage> {
    let Ok(m) = serde_json::from_str::<RawMsg>(raw.get()) else {
        return Err(InvalidMessage { id: None });
    };
    let id = m.id.as_deref().and_then(RequestId::from_raw);
    if m.jsonrpc.as_deref() != Some("2.0") {
        return Err(InvalidMessage { id });
    }
    match (m.method, m.id.is_some(), m.result, m.error) {
        (Some(method), true, None, None) => match id {
            Some(id) => Ok(Message::Request(Request {
                id,
                method: method.into(),
                params: m.params,
            })),
            None => Err(InvalidMessage { id: None }),
        },
        (Some(method), false, None, None) => Ok(Message::Notification(Notification {
            method: method.into(),
            params: m.params,
        })),
        (None, _, Some(result), None) => Ok(Message::Response(Response {
            id,
            outcome: Outcome::Result(result),
        })),
        (None, _, None, Some(e)) => Ok(Message::Response(Response {
            id,
            outcome: Outcome::Error(ErrorObject {
                code: e.code,
                message: e.message.into(),
                data: e.data,
            }),
        })),
        _ => Err(InvalidMessage { id }),
    }
}

pub fn parse_body(bytes: &[u8]) -> Result<Body, ParseFailure> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') {
        let items: Vec<Box<RawValue>> =
            serde_json::from_slice(bytes).map_err(|_| ParseFailure::Parse)?;
        if items.is_empty() {
            return Err(ParseFailure::Invalid(None));
        }
        Ok(Body::Batch(items.iter().map(|r| classify(r)).collect()))
    } else {
        let raw: Box<RawValue> = serde_json::from_slice(bytes).map_err(|_| ParseFailure::Parse)?;
        classify(&raw)
            .map(Body::Single)
            .map_err(|e| ParseFailure::Invalid(e.id))
    }
}

#[derive(Serialize)]
struct Out<'a> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a RequestId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorObject>,
}

impl Message {
    pub fn to_bytes(&self) -> Bytes {
        let out = match self {
            Message::Request(r) => Out {
                jsonrpc: "2.0",
                id: Some(&r.id),
                method: Some(&r.method),
                params: r.params.as_deref(),
                result: None,
                error: None,
            },
            Message::Notification(n) => Out {
                jsonrpc: "2.0",
                id: None,
                method: Some(&n.method),
                params: n.params.as_deref(),
                result: None,
                error: None,
            },
            Message::Response(r) => {
                let (result, error) = match &r.outcome {
                    Outcome::Result(v) => (Some(&**v), None),
                    Outcome::Error(e) => (None, Some(e)),
                };
                if r.id.is_none() {
                    // Errors without a readable id carry `id: null` (G-2).
                    let mut v = serde_json::json!({"jsonrpc": "2.0", "id": null});
                    if let Some(e) = error {
                        v["error"] = serde_json::to_value(e).unwrap_or_default();
                    }
                    return Bytes::from(serde_json::to_vec(&v).unwrap_or_default());
                }
                Out {
                    jsonrpc: "2.0",
                    id: r.id.as_ref(),
                    method: None,
                    params: None,
                    result,
                    error,
                }
            }
        };
        Bytes::from(serde_json::to_vec(&out).unwrap_or_default())
    }
}
