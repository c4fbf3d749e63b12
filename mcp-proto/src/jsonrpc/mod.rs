// S-RPC-1..12, S-RPC-1, S-RPC-2, S-RPC-7, G-2, S-RPC-5, S-RPC-6, S-RPC-10, S-RPC-11, S-POST-5, G-8,
// S-POST-4.
//! JSON-RPC 2.0 envelopes as MCP uses them.
//!
//! The transport needs four things from a message: `jsonrpc`, `id`, `method`, and whether it
//! is a result or an error. This module reads exactly those and keeps every payload
//! (`params`, `result`, `error.data`) as raw JSON text in a [`Box<RawValue>`](RawValue), so
//! the transport never re-parses what it only forwards, and never builds a
//! `serde_json::Value` tree.
//!
//! - [`parse_body`] reads a whole body: one [`Message`] or a 2025-03-26 batch ([`Body`]).
//!   [`parse_message`] reads a body that must be a single message (2025-06-18 and later).
//! - Failures are a [`ParseFailure`]: `-32700` ([`DecodeError`], not JSON) or `-32600`
//!   ([`InvalidMessage`], JSON but not JSON-RPC). Each carries the id when it was readable
//!   and builds its own error response ([`ParseFailure::to_error_response`]).
//! - [`Message::to_bytes`] and [`encode_batch`] write JSON directly into [`bytes::Bytes`].
//!   For every parsed message `m`, `parse_message(&m.to_bytes()) == Ok(m)`.
//!
//! # Decisions
//!
//! Where JSON-RPC 2.0, the MCP schemas and the SDKs leave room, this module decides as
//! follows (each rule has a unit test named after its spec id).
//!
//! - **Version**: `jsonrpc` must be present and be the string `"2.0"`.
//! - **Ids**: a string (any text) or an integer in `i64` range. Floats are refused,
//!   `1.0` included: the schema says integer, and rounding would change the id a peer
//!   matches on. Integers beyond `i64` (`u64` above `i64::MAX`, `1e400`) are refused too.
//!   `null` is refused in requests; see [`RequestId`].
//! - **Error ids**: an error response may have `"id": null` or no `id`; both
//!   parse to `id: None`. A success response must have a valid id. On output, `None` is
//!   written as *no* `id` member (what the 2025-11-25 and later schemas allow).
//! - **Exactly one outcome**: a response has `result` or `error`, never both; a
//!   message with `method` and an outcome is invalid. An `error` must be an object with an
//!   integer `code` and a string `message`; `data` is optional and any value.
//! - **Params**: when present, an object. Arrays (positional params, legal in plain
//!   JSON-RPC) are refused as `-32600`, since no MCP method takes them and the 2026-07-28
//!   transport must read `params._meta`. `"params": null` is tolerated and read as absent
//!   (the Python SDK models params as optional-or-null); it is not written back.
//! - **Results** are not checked: MCP results are objects, but the transport only forwards
//!   them, and refusing a response would strand the request it answers.
//! - **Unknown members** at the top level (and in the error object) are tolerated and
//!   dropped: they are skipped without being decoded and are not written back.
//! - **Duplicate members**: an envelope member (`jsonrpc`, `id`, `method`, `params`,
//!   `result`, `error`, and `code`/`message`/`data` in the error object) given twice makes
//!   the message invalid (`-32600`). JSON (RFC 8259 §4) leaves the meaning of duplicate names
//!   open and parsers disagree (first wins, last wins), so accepting one would let two
//!   components read two different messages from the same bytes. A duplicated id is not
//!   echoed. Duplicates among unknown members, or inside payloads, are not looked at.
//! - **Batches**: a non-empty array; `[]` is an invalid request.
//!   An invalid element becomes an `Err` item; the batch itself stays valid. A syntax error
//!   anywhere is a parse error for the whole body.
//! - **Encoding**: UTF-8 only; invalid UTF-8 is a parse error, even inside a
//!   payload. One leading byte order mark is skipped. Trailing non-whitespace is a parse
//!   error.
//! - **Nesting**: parsing never recurses, so no body can overflow the stack; see the
//!   "Theory of operation" of the `decode` source file.
//!
//! Equality on messages compares raw payloads byte by byte; the parser keeps them exactly as
//! they were on the wire (minus surrounding whitespace).

mod decode;
mod encode;
mod error;
mod error_object;
mod id;
mod message;
#[cfg(test)]
mod tests;

pub use self::decode::{parse_body, parse_message};
pub use self::encode::encode_batch;
pub use self::error::{DecodeError, InvalidMessage, InvalidReason, ParseFailure};
pub use self::error_object::{ErrorData, ErrorObject};
pub use self::id::RequestId;
pub use self::message::{
    BatchItem, Body, Message, MessageKind, Notification, Outcome, Request, Response,
};
/// The raw JSON type of payloads, re-exported so that callers need not match `serde_json`
/// versions.
pub use serde_json::value::RawValue;

/// Whether the JSON text `raw` may hold a member named `key` (at any depth): it holds
/// `"key"` as written, or an escape (a key may be spelled with escapes). `false` is certain,
/// so a reader that parses only to find `key` can skip the parse: `params._meta` is
/// looked for in every request and present in few.
pub fn may_have_member(raw: &str, key: &str) -> bool {
    let bytes = raw.as_bytes();
    memchr::memchr(b'\\', bytes).is_some()
        || memchr::memmem::find_iter(bytes, key.as_bytes())
            .any(|at| at > 0 && bytes[at - 1] == b'"' && bytes.get(at + key.len()) == Some(&b'"'))
}

/// The `_meta` keys the 2026-07-28 revision reserves.
pub mod meta_keys {
    /// The protocol version of this request (request `_meta`; required in 2026-07-28).
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// The client's `Implementation` (request `_meta`).
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// The client's `ClientCapabilities` for this request
    /// (request `_meta`; required in 2026-07-28).
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// The least severe `LoggingLevel` the client wants for this
    /// request (request `_meta`).
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    /// The server's `Implementation` (result `_meta`).
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    /// The id of the `subscriptions/listen` request a notification or result belongs to.
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
    /// The progress token of a request (request `_meta`, every revision).
    pub const PROGRESS_TOKEN: &str = "progressToken";
}

// S-RPC-9, S-NEW-7, S-NEW-11, S-NEW-11.
/// JSON-RPC and MCP error codes.
///
/// JSON-RPC reserves `-32768..=-32000`; `-32000..=-32099` is for implementations. From
/// 2026-07-28, MCP reserves `-32020..=-32099` for itself and leaves `-32000..=-32019` to
/// legacy and implementation use.
pub mod error_codes {
    /// Invalid JSON was received (JSON-RPC 2.0).
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid request object (JSON-RPC 2.0).
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not available (JSON-RPC 2.0).
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters (JSON-RPC 2.0).
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal JSON-RPC error (JSON-RPC 2.0).
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The low end of the implementation-defined server-error range (JSON-RPC 2.0).
    pub const SERVER_ERROR_MIN: i64 = -32099;
    /// The high end of the implementation-defined server-error range (JSON-RPC 2.0).
    pub const SERVER_ERROR_MAX: i64 = -32000;
    /// A resource was not found (MCP 2025; replaced by [`INVALID_PARAMS`] in 2026-07-28).
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// URL-mode elicitation is required first (MCP 2025-11-25; retired in 2026-07-28).
    pub const URL_ELICITATION_REQUIRED: i64 = -32042;
    /// HTTP headers do not match the body, or required headers are missing (MCP 2026-07-28,
    /// HTTP 400).
    pub const HEADER_MISMATCH: i64 = -32020;
    /// The request needs a client capability that was not declared (MCP 2026-07-28, HTTP 400).
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// The requested protocol version is unknown or unsupported (MCP 2026-07-28, HTTP 400).
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}
