//! The data that crosses the session's boundary: stream handles, HTTP intents, adapter inputs,
//! and the outputs the app and the adapter drain.

use std::fmt;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};

use super::error::ClientError;
use super::event::ClientEvent;
use super::wire::{Message, RequestId, Response};

/// One HTTP exchange, allocated by the session (quinn's `ConnectionHandle`). Adapters map it to
/// their in-flight request; ids are never reused within a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(pub(crate) u64);

impl StreamId {
    /// An id no session allocates: for an exchange the session did not start (the OAuth
    /// machine's requests, carried by the same HTTP engine).
    pub const UNALLOCATED: StreamId = StreamId(u64::MAX);

    /// The raw number, for logs and maps.
    pub const fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stream#{}", self.0)
    }
}

/// What an HTTP intent is for. Adapters need not look at it; it names the request in logs and
/// lets tests check the rules per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HttpRequestKind {
    // S-POST-2.
    /// A POST carrying one JSON-RPC message.
    Post,
    // S-GET-1.
    /// The GET listening stream.
    Listen,
    // S-RES-5, S-RES-8.
    /// A GET with `Last-Event-ID` resuming a broken POST stream.
    Resume,
    // S-SESS-8.
    /// The DELETE that ends the session.
    Delete,
    /// A request of the OAuth flow (metadata, registration, token) that the driver carries
    /// to its own URL ([`crate::auth`]); never emitted by the session.
    Authorization,
}

/// An HTTP request the adapter must perform against the MCP endpoint (the adapter knows the
/// URL). Its response is fed back with [`Input`]s carrying the same `stream`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// The exchange this request starts.
    pub stream: StreamId,
    /// What it is for.
    pub kind: HttpRequestKind,
    /// `POST`, `GET` or `DELETE`.
    pub method: Method,
    /// Every header to send, protocol headers included.
    pub headers: HeaderMap,
    /// The body (empty for GET and DELETE).
    pub body: Bytes,
}

/// How an exchange failed below HTTP, as the adapter classifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportFailure {
    /// The connection could not be established.
    Connect,
    /// The connection broke (reset, EOF in the middle of a body, HTTP/2 stream reset).
    Reset,
    /// An adapter-level timeout fired.
    Timeout,
    /// The TLS handshake failed: the server's certificate was refused, or the two sides
    /// could not agree.
    Tls(TlsFailure),
    /// Anything else (protocol errors below MCP).
    Other,
}

impl fmt::Display for TransportFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TransportFailure::Connect => "connect failed",
            TransportFailure::Reset => "connection reset",
            TransportFailure::Timeout => "transport timeout",
            TransportFailure::Tls(reason) => return write!(f, "TLS: {reason}"),
            TransportFailure::Other => "transport failure",
        })
    }
}

/// Why a TLS handshake failed, as far as the TLS library tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TlsFailure {
    /// The server's certificate does not chain to a trusted root (an unknown CA, a
    /// self-signed certificate).
    UnknownIssuer,
    /// The certificate is not valid for the host name (or address) dialled.
    NameMismatch,
    /// The certificate has expired.
    Expired,
    /// The certificate is not valid yet.
    NotYetValid,
    /// The certificate was revoked.
    Revoked,
    /// Another problem with the certificate (its encoding, signature, purpose...).
    BadCertificate,
    /// The handshake failed otherwise: no protocol version or cipher suite in common, an
    /// alert from the peer, a peer that does not speak TLS.
    Handshake,
}

impl fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TlsFailure::UnknownIssuer => "the certificate's issuer is not trusted",
            TlsFailure::NameMismatch => "the certificate is not valid for this host name",
            TlsFailure::Expired => "the certificate has expired",
            TlsFailure::NotYetValid => "the certificate is not valid yet",
            TlsFailure::Revoked => "the certificate was revoked",
            TlsFailure::BadCertificate => "the certificate was refused",
            TlsFailure::Handshake => "the handshake failed",
        })
    }
}

/// What the adapter observed on an exchange. Inputs for a stream the session no longer knows
/// (after an [`Output::Abort`], or after its end) are ignored.
#[derive(Debug, Clone)]
pub enum Input<'a> {
    /// The response status and headers.
    ResponseHead {
        /// The exchange.
        stream: StreamId,
        /// The status.
        status: StatusCode,
        /// The headers.
        headers: &'a HeaderMap,
    },
    /// A piece of the response body, split anywhere.
    Body {
        /// The exchange.
        stream: StreamId,
        /// The bytes.
        chunk: Bytes,
    },
    /// The body ended normally.
    End {
        /// The exchange.
        stream: StreamId,
    },
    /// The exchange failed before or during the body.
    Failed {
        /// The exchange.
        stream: StreamId,
        /// How.
        kind: TransportFailure,
    },
}

/// A JSON-RPC message from the server, with the stream it came on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// The exchange that carried it (a POST stream, the listening stream or a resume).
    pub stream: StreamId,
    /// The message: a server→client request or notification, or (inside an outcome) the
    /// response to one of our requests.
    pub message: Message,
}

/// How a request ended. Every request the app sent ends with exactly one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestResult {
    /// The server's response (a result or a JSON-RPC error), and the stream it came on.
    Response {
        /// The stream that carried it.
        stream: StreamId,
        /// The response.
        response: Response,
    },
    /// The request failed; no response will be delivered.
    Failed(ClientError),
    /// The app cancelled it.
    Cancelled,
}

/// The outcome of one request, keyed by its JSON-RPC id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestOutcome {
    /// The request's id.
    pub id: RequestId,
    /// How it ended.
    pub result: RequestResult,
}

/// What the session asks of its caller. Drain with [`super::ClientSession::poll_output`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Output {
    /// Perform this HTTP request (adapter).
    Http(HttpRequest),
    /// Drop this exchange and feed nothing more for it (adapter).
    Abort(StreamId),
    /// A server→client request or notification (app). Answer a request by `send`ing a
    /// response.
    Message(Delivered),
    /// A request of ours ended (app).
    Outcome(RequestOutcome),
    /// Something the session decided (app, logs).
    Event(ClientEvent),
}

/// What `send` did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendReceipt {
    /// POSTed on this stream.
    Posted(StreamId),
    // G-9.
    /// Queued until the session is ready.
    Queued,
    /// Absorbed: the app's own `notifications/initialized`, which the session already sends.
    Absorbed,
}

impl Output {
    /// The event, if this output is one.
    pub fn as_event(&self) -> Option<&ClientEvent> {
        match self {
            Output::Event(e) => Some(e),
            _ => None,
        }
    }

    /// The HTTP intent, if this output is one.
    pub fn as_http(&self) -> Option<&HttpRequest> {
        match self {
            Output::Http(h) => Some(h),
            _ => None,
        }
    }
}
