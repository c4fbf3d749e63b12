//! [`Error`]: what a handler returns when it fails, and what a request to the peer returns when
//! it fails.

use std::fmt;

use serde_json::value::RawValue;

use mcp_proto::client::{ApiMisuse, ClientError, ServerFault};
use mcp_proto::jsonrpc::{self, error_codes};

/// A failure of an application handler, or of a request sent to the peer.
///
/// Two kinds, because MCP reports them differently:
///
/// - **Application failures** ([`Error::new`], and any `std::error::Error` through `?`): in a
///   tool they become a *result* with `isError: true` and the message as text, so the model
///   sees what went wrong; in the other handlers (resources, prompts, completion) they become
///   a JSON-RPC `-32603` internal error carrying the message.
/// - **Protocol errors** ([`Error::protocol`], [`Error::invalid_params`],
///   [`Error::resource_not_found`]): a JSON-RPC error response with that code, from any handler,
///   tools included.
///
/// An error the *peer* answered with (the client refused a sampling request, say) is an
/// application failure that remembers the peer's code ([`Error::code`]), so that a tool which
/// propagates it with `?` still answers with a tool error, not a protocol error of its own.
///
/// Like `anyhow::Error`, this type converts from every `std::error::Error` (so `?` works on
/// `serde_json`, `std::io` and your own errors) and therefore does not implement
/// `std::error::Error` itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    message: String,
    code: Option<i64>,
    data: Option<serde_json::Value>,
    protocol: bool,
}

impl Error {
    /// An application failure with this message.
    pub fn new(message: impl fmt::Display) -> Self {
        Error {
            message: message.to_string(),
            code: None,
            data: None,
            protocol: false,
        }
    }

    /// A protocol error: answered as a JSON-RPC error with `code` and `message` by every
    /// handler, tools included.
    pub fn protocol(code: i64, message: impl fmt::Display) -> Self {
        Error {
            message: message.to_string(),
            code: Some(code),
            data: None,
            protocol: true,
        }
    }

    /// `-32602` invalid params (a protocol error).
    pub fn invalid_params(message: impl fmt::Display) -> Self {
        Self::protocol(error_codes::INVALID_PARAMS, message)
    }

    /// `-32002` resource not found, with `{"uri": uri}` as data (a protocol error). A
    /// 2026-07-28 request gets it as `-32602`, the code that revision assigns.
    pub fn resource_not_found(uri: &str) -> Self {
        Self::protocol(
            error_codes::RESOURCE_NOT_FOUND,
            format_args!("Resource not found: {uri}"),
        )
        .with_data(serde_json::json!({ "uri": uri }))
    }

    /// `-32601` method not found (a protocol error).
    pub fn method_not_found(method: &str) -> Self {
        Self::protocol(
            error_codes::METHOD_NOT_FOUND,
            format_args!("Method not found: {method}"),
        )
    }

    /// `-32603` internal error (a protocol error).
    pub fn internal(message: impl fmt::Display) -> Self {
        Self::protocol(error_codes::INTERNAL_ERROR, message)
    }

    /// The error the peer answered with: an application failure that keeps the peer's code
    /// and data.
    pub fn from_peer(error: &jsonrpc::ErrorObject) -> Self {
        Error {
            message: error.message.clone(),
            code: Some(error.code),
            data: error.data_as().and_then(Result::ok),
            protocol: false,
        }
    }

    /// The same error with `data` attached (sent as the JSON-RPC error's `data`).
    pub fn with_data(mut self, data: serde_json::Value) -> Self {
        self.data = Some(data);
        self
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The JSON-RPC code: the one given to [`Error::protocol`], or the peer's; `None` for a
    /// plain application failure.
    pub fn code(&self) -> Option<i64> {
        self.code
    }

    /// The data, when there is some.
    pub fn data(&self) -> Option<&serde_json::Value> {
        self.data.as_ref()
    }

    /// Whether this is a protocol error (answered as a JSON-RPC error even by a tool).
    pub fn is_protocol(&self) -> bool {
        self.protocol
    }

    /// The JSON-RPC error object for this error: its code, or `-32603` for an application
    /// failure.
    pub fn to_error_object(&self) -> jsonrpc::ErrorObject {
        let mut object = jsonrpc::ErrorObject::new(
            self.code.unwrap_or(error_codes::INTERNAL_ERROR),
            self.message.as_str(),
        );
        if let Some(data) = self.data.as_ref().and_then(|d| to_raw(d).ok()) {
            object = object.with_data(data);
        }
        object
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            Some(code) => write!(f, "{} (code {code})", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for Error {
    fn from(error: E) -> Self {
        Error::new(error)
    }
}

/// Serializes `value` to a raw JSON value.
pub(crate) fn to_raw<T: serde::Serialize + ?Sized>(
    value: &T,
) -> Result<Box<RawValue>, serde_json::Error> {
    serde_json::value::to_raw_value(value)
}

/// Why a message to the peer, or a request's answer, did not get through.
///
/// Over a [`ClientSession`](mcp_proto::client::ClientSession) (the `ClientBinding` and the
/// adapters' clients), the session's reasons arrive typed: a request timeout is
/// [`Timeout`](Self::Timeout), a session closed before the answer is [`Closed`](Self::Closed),
/// a stream that broke for good is [`Interrupted`](Self::Interrupted), any other failure of
/// the request is [`Client`](Self::Client), and a message the session would not take is
/// [`Refused`](Self::Refused). [`Failed`](Self::Failed) is left for failures with no typed
/// reason (a message that cannot be encoded, a server-side send error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PeerError {
    /// The connection or session is gone; nothing more can be sent or received.
    #[error("the connection to the peer is closed")]
    Closed,
    /// The transport gave up waiting for the answer.
    #[error("the peer did not answer in time")]
    Timeout,
    /// The request was cancelled before its answer came.
    #[error("the request was cancelled")]
    Cancelled,
    /// The transport cannot carry this message (a server→client request in stateless mode
    /// or in the 2026-07-28 revision, say).
    #[error("the transport cannot carry this message: {0}")]
    Unsupported(String),
    /// The exchange broke before the answer arrived and could not be resumed (the
    /// connection was cut before any event id reached the client, or every resume brought
    /// nothing): a [`ClientError::Transport`] or
    /// [`ServerFault::StreamEndedWithoutResponse`](mcp_proto::client::ServerFault::StreamEndedWithoutResponse).
    /// The server may or may not have acted on the request: the transport never re-sends it
    /// by itself, so sending it again is the caller's choice.
    #[error("the exchange broke before the answer and cannot be resumed: {0}")]
    Interrupted(ClientError),
    /// The client session failed the request for another reason: an HTTP error status,
    /// authorization required, the session expired, the server broke the protocol … (never
    /// [`ClientError::TimedOut`] nor [`ClientError::Closed`], which are
    /// [`Timeout`](Self::Timeout) and [`Closed`](Self::Closed)).
    #[error(transparent)]
    Client(ClientError),
    /// The client session refused to send the message: too many requests in flight, a second
    /// `initialize` … (never [`ApiMisuse::Closed`], which is [`Closed`](Self::Closed)).
    #[error("the session refused the message: {0}")]
    Refused(ApiMisuse),
    /// Another failure, with no typed reason.
    #[error("transport failure: {0}")]
    Failed(String),
}

impl From<ClientError> for PeerError {
    /// The typed reason for a request the client session failed (see [`PeerError`]).
    fn from(error: ClientError) -> Self {
        match error {
            ClientError::TimedOut => PeerError::Timeout,
            ClientError::Closed => PeerError::Closed,
            ClientError::Transport(_)
            | ClientError::Protocol(ServerFault::StreamEndedWithoutResponse) => {
                PeerError::Interrupted(error)
            }
            other => PeerError::Client(other),
        }
    }
}

impl From<ApiMisuse> for PeerError {
    /// The typed reason for a message the client session would not send.
    fn from(error: ApiMisuse) -> Self {
        match error {
            ApiMisuse::Closed => PeerError::Closed,
            other => PeerError::Refused(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_proto::client::TransportFailure;

    #[test]
    fn session_failures_arrive_typed() {
        assert_eq!(PeerError::from(ClientError::TimedOut), PeerError::Timeout);
        assert_eq!(PeerError::from(ClientError::Closed), PeerError::Closed);
        assert_eq!(PeerError::from(ApiMisuse::Closed), PeerError::Closed);
        let cut = ClientError::Transport(TransportFailure::Reset);
        assert_eq!(PeerError::from(cut.clone()), PeerError::Interrupted(cut));
        let ended = ClientError::Protocol(ServerFault::StreamEndedWithoutResponse);
        assert_eq!(
            PeerError::from(ended.clone()),
            PeerError::Interrupted(ended)
        );
        assert_eq!(
            PeerError::from(ClientError::SessionExpired),
            PeerError::Client(ClientError::SessionExpired)
        );
        let full = ApiMisuse::TooManyInFlight { limit: 1 };
        assert_eq!(PeerError::from(full.clone()), PeerError::Refused(full));
    }
}
