//! The envelope types: [`Message`] and its three kinds, [`Body`], [`ErrorObject`].

use bytes::Bytes;
use serde_json::value::RawValue;

use super::{ErrorObject, InvalidMessage, RequestId, encode};

/// Byte-wise equality of two optional raw payloads.
fn raw_opt_eq(a: &Option<Box<RawValue>>, b: &Option<Box<RawValue>>) -> bool {
    a.as_deref().map(RawValue::get) == b.as_deref().map(RawValue::get)
}

// S-RPC-4, S-RPC-10.
/// A JSON-RPC request: it carries an [`id`](Self::id) and expects exactly one [`Response`]
/// with that id.
///
/// `params`, when present, must be a JSON **object**. The parser guarantees it;
/// a caller building a `Request` by hand must too, or its encoding will be refused by peers
/// (and by [`parse_body`](super::parse_body)).
///
/// Equality compares `params` byte by byte: `{"a":1}` and `{ "a": 1 }` differ.
#[derive(Debug, Clone)]
pub struct Request {
    // S-RPC-2.
    /// The request id, never `null`.
    pub id: RequestId,
    /// The method name, unescaped.
    pub method: Box<str>,
    /// The parameters, a JSON object kept as raw text; `None` when absent (or `null` on the
    /// wire).
    pub params: Option<Box<RawValue>>,
}

impl Request {
    /// A request with the given id, method and raw `params` (which must be an object).
    pub fn new(
        id: impl Into<RequestId>,
        method: impl Into<Box<str>>,
        params: Option<Box<RawValue>>,
    ) -> Self {
        Self {
            id: id.into(),
            method: method.into(),
            params,
        }
    }

    /// The JSON text of this request.
    pub fn to_bytes(&self) -> Bytes {
        encode::request_to_bytes(self)
    }
}

impl PartialEq for Request {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.method == other.method
            && raw_opt_eq(&self.params, &other.params)
    }
}

impl Eq for Request {}

// S-RPC-8.
/// A JSON-RPC notification: a method call without an id, which the receiver MUST NOT answer.
///
/// `params`, when present, must be a JSON object, as for [`Request`].
#[derive(Debug, Clone)]
pub struct Notification {
    /// The method name, unescaped.
    pub method: Box<str>,
    /// The parameters, a JSON object kept as raw text; `None` when absent (or `null` on the
    /// wire).
    pub params: Option<Box<RawValue>>,
}

impl Notification {
    /// A notification with the given method and raw `params` (which must be an object).
    pub fn new(method: impl Into<Box<str>>, params: Option<Box<RawValue>>) -> Self {
        Self {
            method: method.into(),
            params,
        }
    }

    /// The JSON text of this notification.
    pub fn to_bytes(&self) -> Bytes {
        encode::notification_to_bytes(self)
    }
}

impl PartialEq for Notification {
    fn eq(&self, other: &Self) -> bool {
        self.method == other.method && raw_opt_eq(&self.params, &other.params)
    }
}

impl Eq for Notification {}

// S-RPC-5.
/// What a [`Response`] carries: exactly one of `result` and `error`.
#[derive(Debug, Clone)]
pub enum Outcome {
    // S-RPC-10.
    /// A success. The value is kept raw and is not checked: MCP results are objects,
    /// but the transport only forwards them, so any JSON value is accepted.
    Result(Box<RawValue>),
    /// A failure.
    Error(ErrorObject),
}

impl PartialEq for Outcome {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Result(a), Self::Result(b)) => a.get() == b.get(),
            (Self::Error(a), Self::Error(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Outcome {}

// S-RPC-7, G-2.
/// A JSON-RPC response, success or error.
///
/// `id` is `None` when the wire had `"id": null` or no `id` at all. That is legal only for an
/// error response, sent when the request id could not be read; a success
/// response always has an id. Build responses with [`Response::result`] and
/// [`Response::error`], which keep that invariant.
///
/// Encoding writes no `id` member when `id` is `None`: the 2025-11-25 and 2026-07-28 schemas
/// type the error id as an optional string or integer, so `"id": null` would not validate
/// there, and the transport text of every revision speaks of an error response "with no id".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The id of the request answered; `None` only for an error about an unreadable request.
    pub id: Option<RequestId>,
    /// The result or the error.
    pub outcome: Outcome,
}

impl Response {
    /// A success response to request `id`.
    pub fn result(id: RequestId, result: Box<RawValue>) -> Self {
        Self {
            id: Some(id),
            outcome: Outcome::Result(result),
        }
    }

    /// An error response; `id` is `None` when the request id could not be read.
    pub fn error(id: Option<RequestId>, error: ErrorObject) -> Self {
        Self {
            id,
            outcome: Outcome::Error(error),
        }
    }

    /// `true` for an error response.
    pub fn is_error(&self) -> bool {
        matches!(self.outcome, Outcome::Error(_))
    }

    /// The JSON text of this response.
    pub fn to_bytes(&self) -> Bytes {
        encode::response_to_bytes(self)
    }
}

/// The three kinds of JSON-RPC message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageKind {
    /// A method call with an id: expects a response.
    Request,
    /// A method call without an id: expects nothing.
    Notification,
    /// A result or an error answering a request.
    Response,
}

// S-RPC-12.
/// One JSON-RPC 2.0 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A response (success or error).
    Response(Response),
}

impl Message {
    /// The JSON text of this message, written directly (no `serde_json::Value` in between).
    ///
    /// For every message [`parse_body`](super::parse_body) returns,
    /// `parse_message(&m.to_bytes()) == Ok(m)`. A hand-built message round-trips too as long
    /// as its raw payloads are well-formed, `params` is an object, and a success response has
    /// an id.
    pub fn to_bytes(&self) -> Bytes {
        encode::message_to_bytes(self)
    }

    /// Appends the JSON text of this message to `out` (the allocation-free form of
    /// [`to_bytes`](Self::to_bytes)).
    pub fn write_to(&self, out: &mut Vec<u8>) {
        encode::write_message(out, self);
    }

    /// Which kind of message this is.
    pub fn kind(&self) -> MessageKind {
        match self {
            Self::Request(_) => MessageKind::Request,
            Self::Notification(_) => MessageKind::Notification,
            Self::Response(_) => MessageKind::Response,
        }
    }

    /// The id: a request's own id, or the id a response answers. `None` for notifications and
    /// for error responses without an id.
    pub fn id(&self) -> Option<&RequestId> {
        match self {
            Self::Request(r) => Some(&r.id),
            Self::Notification(_) => None,
            Self::Response(r) => r.id.as_ref(),
        }
    }

    /// The method name of a request or notification; `None` for responses.
    pub fn method(&self) -> Option<&str> {
        match self {
            Self::Request(r) => Some(&r.method),
            Self::Notification(n) => Some(&n.method),
            Self::Response(_) => None,
        }
    }

    /// The raw `params` of a request or notification, when present.
    pub fn params(&self) -> Option<&RawValue> {
        match self {
            Self::Request(r) => r.params.as_deref(),
            Self::Notification(n) => n.params.as_deref(),
            Self::Response(_) => None,
        }
    }
}

impl From<Request> for Message {
    fn from(r: Request) -> Self {
        Self::Request(r)
    }
}

impl From<Notification> for Message {
    fn from(n: Notification) -> Self {
        Self::Notification(n)
    }
}

impl From<Response> for Message {
    fn from(r: Response) -> Self {
        Self::Response(r)
    }
}

/// One element of a batch: a message, or the reason it is not one.
///
/// An invalid element does not sink the batch (JSON-RPC 2.0 §6): the others are still
/// processed, and the [`InvalidMessage`] carries the element's id when it was readable, so
/// that an error response can be made for it.
pub type BatchItem = Result<Message, InvalidMessage>;

// S-POST-5, S-RPC-11, G-8, S-POST-6, S-POST-5.
/// A whole HTTP body (or SSE `data`) as received: one message, or a batch.
///
/// Batches exist only in revision 2025-03-26; from 2025-06-18 on a
/// body is one message, and [`parse_message`](super::parse_message) enforces that.
/// The parser does not check what a batch mixes (2025-03-26 allows requests with notifications,
/// or responses alone): that is for the caller, which knows the direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// A single message (a JSON object).
    Single(Message),
    /// A non-empty JSON array, element by element, in order.
    Batch(Vec<BatchItem>),
}

impl Body {
    /// `true` for a batch (even a batch of one).
    pub fn is_batch(&self) -> bool {
        matches!(self, Self::Batch(_))
    }

    /// The items, in order; a single message becomes a one-item list.
    pub fn into_items(self) -> Vec<BatchItem> {
        match self {
            Self::Single(m) => vec![Ok(m)],
            Self::Batch(items) => items,
        }
    }
}
