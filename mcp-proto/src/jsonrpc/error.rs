//! Why a body is not a JSON-RPC message: [`ParseFailure`] and its two halves.
//!
//! Both halves are the **peer's** fault: the bytes came off the wire. The
//! split follows JSON-RPC 2.0 §5.1: [`DecodeError`] (`-32700`) when the bytes are not JSON at
//! all, [`InvalidMessage`] (`-32600`) when they are JSON but not a JSON-RPC 2.0 message.

use std::fmt;

use serde_json::value::RawValue;

use super::{ErrorObject, MessageKind, RequestId, Response, encode, error_codes};

// S-POST-8.
/// A body that could not be parsed as JSON-RPC: the reason, its JSON-RPC error code, and what
/// an error response to it should look like.
///
/// As an HTTP server, answer it with [`status_hint`](Self::status_hint) (400) and the body of
/// [`to_error_response`](Self::to_error_response).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseFailure {
    /// Not JSON: `-32700`.
    #[error(transparent)]
    Parse(#[from] DecodeError),
    /// JSON, but not a JSON-RPC 2.0 message: `-32600`.
    #[error(transparent)]
    Invalid(#[from] InvalidMessage),
}

impl ParseFailure {
    /// [`PARSE_ERROR`](error_codes::PARSE_ERROR) or
    /// [`INVALID_REQUEST`](error_codes::INVALID_REQUEST).
    pub fn code(&self) -> i64 {
        match self {
            Self::Parse(e) => e.code(),
            Self::Invalid(e) => e.code(),
        }
    }

    /// The id of the offending message, when it could be read; the error response echoes it.
    /// Always `None` for a parse error.
    pub fn id(&self) -> Option<&RequestId> {
        match self {
            Self::Parse(_) => None,
            Self::Invalid(e) => e.id(),
        }
    }

    /// What the message seemed to be; see [`InvalidMessage::apparent_kind`].
    pub fn apparent_kind(&self) -> Option<MessageKind> {
        match self {
            Self::Parse(_) => None,
            Self::Invalid(e) => e.apparent_kind(),
        }
    }

    // S-POST-8.
    /// The HTTP status a server answers this body with: always `400 Bad Request`.
    pub fn status_hint(&self) -> http::StatusCode {
        http::StatusCode::BAD_REQUEST
    }

    // S-RPC-7.
    /// The error response to send back: the code, the canonical JSON-RPC message ("Parse
    /// error" / "Invalid Request"), the detail as a JSON string in `data`, and the id when it
    /// was readable (no `id` member otherwise).
    ///
    /// Do not send it when the failed message was itself a response
    /// ([`apparent_kind`](Self::apparent_kind) is `Some(Response)`): responses are never
    /// answered.
    pub fn to_error_response(&self) -> Response {
        match self {
            Self::Parse(e) => e.to_error_response(),
            Self::Invalid(e) => e.to_error_response(),
        }
    }
}

/// `detail` as a raw JSON string value.
fn detail_data(detail: &str) -> Option<Box<RawValue>> {
    let mut out = Vec::with_capacity(detail.len() + 2);
    encode::write_str(&mut out, detail);
    // The escaper emits a valid JSON string from a `str`, so both steps succeed; `.ok()` keeps
    // a (never expected) failure from panicking: the response is then sent without `data`.
    String::from_utf8(out)
        .ok()
        .and_then(|s| RawValue::from_string(s).ok())
}

/// The bytes are not JSON: invalid UTF-8, a syntax error, trailing garbage, an empty body, or
/// a string escape that is not valid Unicode in a member the envelope decodes (`-32700`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("JSON-RPC parse error: {detail}")]
pub struct DecodeError {
    detail: Box<str>,
}

impl DecodeError {
    pub(crate) fn new(detail: impl Into<Box<str>>) -> Self {
        Self {
            detail: detail.into(),
        }
    }

    /// What went wrong, with the position when known (from `serde_json`).
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// Always [`PARSE_ERROR`](error_codes::PARSE_ERROR).
    pub fn code(&self) -> i64 {
        error_codes::PARSE_ERROR
    }

    /// The `-32700` error response, without an id.
    pub fn to_error_response(&self) -> Response {
        let error = ErrorObject {
            code: self.code(),
            message: "Parse error".into(),
            data: detail_data(&self.detail),
            extra: serde_json::Map::new(),
        };
        Response::error(None, error)
    }
}

/// JSON that is not a valid JSON-RPC 2.0 message (`-32600`): the reason, and the message's id
/// when it was readable.
///
/// It is also the error half of a [`BatchItem`](super::BatchItem).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSON-RPC message: {reason}")]
pub struct InvalidMessage {
    id: Option<RequestId>,
    kind: Option<MessageKind>,
    reason: InvalidReason,
}

impl InvalidMessage {
    pub(crate) fn new(
        reason: InvalidReason,
        id: Option<RequestId>,
        kind: Option<MessageKind>,
    ) -> Self {
        Self { id, kind, reason }
    }

    /// Why the message is invalid.
    pub fn reason(&self) -> InvalidReason {
        self.reason
    }

    /// The message's `id`, when it was a valid id (a string or an integer) and appeared once.
    pub fn id(&self) -> Option<&RequestId> {
        self.id.as_ref()
    }

    /// What the message seemed to be, from the members present: `Request` or `Notification`
    /// when it has a `method` (and an `id` member, or none), `Response` when it has `result`
    /// or `error` and no `method`; `None` when it cannot tell (not an object, both `method`
    /// and an outcome, or none of them).
    ///
    /// A server answers an invalid request or notification with an error response, but never
    /// an invalid response: JSON-RPC does not answer responses.
    pub fn apparent_kind(&self) -> Option<MessageKind> {
        self.kind
    }

    /// Always [`INVALID_REQUEST`](error_codes::INVALID_REQUEST).
    pub fn code(&self) -> i64 {
        error_codes::INVALID_REQUEST
    }

    /// The `-32600` error response, echoing the id when it was readable.
    pub fn to_error_response(&self) -> Response {
        let error = ErrorObject {
            code: self.code(),
            message: "Invalid Request".into(),
            data: detail_data(&self.reason.to_string()),
            extra: serde_json::Map::new(),
        };
        Response::error(self.id.clone(), error)
    }
}

/// Why JSON is not a JSON-RPC 2.0 message. Each variant names the rule it breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InvalidReason {
    /// The body (or a batch element) is not a JSON object.
    NotAnObject,
    /// The body is `[]`: JSON-RPC 2.0 §6 makes an empty batch an invalid request.
    EmptyBatch,
    // S-POST-6.
    /// A JSON array where only a single message is allowed (revisions after 2025-03-26).
    BatchNotAllowed,
    /// An envelope member (`jsonrpc`, `id`, `method`, `params`, `result`, `error`, or
    /// `error.code`/`error.message`/`error.data`) appears more than once.
    DuplicateMember(&'static str),
    // S-RPC-1.
    /// No `jsonrpc` member.
    MissingVersion,
    // S-RPC-1.
    /// `jsonrpc` is not the string `"2.0"`.
    WrongVersion,
    /// `method` is present but not a string.
    MethodNotString,
    // S-RPC-2.
    /// A request with `"id": null`.
    NullRequestId,
    // S-RPC-2.
    /// An `id` that is neither a string nor an integer in `i64` range: a float such as `1.5`
    /// or `1.0`, a boolean, an array or an object.
    InvalidId,
    // S-RPC-10.
    /// `params` is present and neither an object nor `null` (arrays are refused).
    ParamsNotObject,
    /// `method` together with `result` or `error`: neither a call nor a response.
    MethodWithOutcome,
    // S-RPC-5.
    /// Both `result` and `error`.
    ResultAndError,
    /// None of `method`, `result` and `error`.
    NoMethodOrOutcome,
    // S-RPC-4, G-2.
    /// A success response whose `id` is `null` or absent: only an error may lack an id.
    ResultWithoutId,
    /// `error` is not an object.
    ErrorNotObject,
    // S-RPC-6.
    /// `error.code` is absent or not an integer in `i64` range.
    ErrorCodeNotInteger,
    // S-RPC-6.
    /// `error.message` is absent or not a string.
    ErrorMessageNotString,
}

impl fmt::Display for InvalidReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAnObject => f.write_str("a JSON-RPC message must be a JSON object"),
            Self::EmptyBatch => f.write_str("an empty batch is not allowed"),
            Self::BatchNotAllowed => f.write_str("batches are not allowed in this revision"),
            Self::DuplicateMember(name) => write!(f, "member `{name}` appears more than once"),
            Self::MissingVersion => f.write_str("member `jsonrpc` is missing"),
            Self::WrongVersion => f.write_str("member `jsonrpc` must be \"2.0\""),
            Self::MethodNotString => f.write_str("member `method` must be a string"),
            Self::NullRequestId => f.write_str("a request id must not be null"),
            Self::InvalidId => f.write_str("an id must be a string or an integer"),
            Self::ParamsNotObject => f.write_str("member `params` must be an object"),
            Self::MethodWithOutcome => {
                f.write_str("a message cannot have `method` and `result` or `error`")
            }
            Self::ResultAndError => f.write_str("a response cannot have both `result` and `error`"),
            Self::NoMethodOrOutcome => f.write_str("a message needs `method`, `result` or `error`"),
            Self::ResultWithoutId => f.write_str("a success response needs a non-null id"),
            Self::ErrorNotObject => f.write_str("member `error` must be an object"),
            Self::ErrorCodeNotInteger => f.write_str("`error.code` must be an integer"),
            Self::ErrorMessageNotString => f.write_str("`error.message` must be a string"),
        }
    }
}
