// S-NEW-2, S-NEW-3, S-NEW-6, S-NEW-5, S-NEW-9, S-NEW-1.
//! Sessionless requests: the modern era (2026-07-28) in the same router, where each request
//! carries its own metadata instead of a session: how a request whose
//! `MCP-Protocol-Version` is a modern revision is validated and admitted.
//!
//! # Theory of operation
//!
//! The era is a property of each request, not of the router: the header selects it
//! ([`Router::is_modern`]), and a modern request then runs through the *same* machinery as a
//! legacy one — an exchange bound to a request [`LogicalStream`] with the same phase table —
//! with the behaviour its version selects:
//!
//! - **no session**: `Mcp-Session-Id` is never read, minted or echoed; the request
//!   reaches the app with `session: None`;
//! - **not resumable**: no event ids, no priming, `Last-Event-ID` never read, so a
//!   disconnect is the `Disconnect { keep: false }` row of the phase table: the handler is
//!   cancelled at once and nothing more is written for it;
//! - **no server→client requests**: [`Router::send_request`] on a modern request
//!   fails with [`SendError::ModernNoRequests`](super::SendError); the service layer turns
//!   sampling, elicitation and roots into MRTR rounds instead;
//! - **the head waits** for the first message: a modern stream stays *Pending* until a
//!   notification must precede the answer (then SSE, with `X-Accel-Buffering: no` and the
//!   heartbeat comments of every SSE reply) or the answer arrives; an error answer then goes
//!   out as one JSON body with its HTTP status (`-32601` → 404, `-32020..-32022` → 400), a
//!   result as JSON or, when the client accepts only SSE or the mode is SSE, as a
//!   one-event stream;
//! - GET and DELETE get 405.
//!
//! Admission of a modern POST, in order (each refusal is a JSON-RPC error carrying the
//! request's id when the body has one):
//!
//! ```text
//!  check                                               refusal
//!  --------------------------------------------------  -----------------------------------
//!  body is JSON / JSON-RPC                             400 -32700 / -32600 (as legacy)
//!  not a batch                                         400 -32600
//!  not a response                                      400 -32600
//!  notification                                        202, handed to the app
//!  method not removed in 2026-07-28 (initialize, …)    404 -32601
//!  headers mirror the body (mirror::check_headers)     400 -32020 HeaderMismatch
//!  _meta has protocolVersion and clientCapabilities    400 -32602
//!  fewer than max_modern_in_flight in flight           503 -32000
//!  otherwise                                           handed to the app (session: None)
//! ```

use http::HeaderMap;
use serde::Deserialize;

use super::error::ProtocolError;
use super::stream::{Exchange, ExchangeState, LogicalStream, Phase, PostContext, StreamKind};
use super::{ExchangeId, InFlight, RequestHandle, Router, ServerOutput};
use crate::ProtocolVersion;
use crate::jsonrpc::meta_keys;
use crate::jsonrpc::{InvalidMessage, Message, Request};
use crate::mirror;

// S-NEW-4.
/// Methods of the legacy era that 2026-07-28 removed (absent from its schema): a modern
/// request for them gets 404 + -32601 from the router itself. Per-request `_meta` replaces
/// `initialize` and `logging/setLevel`; `subscriptions/listen` replaces
/// `resources/subscribe`; `ping` is gone too. SDKs that still send `ping` under 2026-07-28
/// (the official Python SDK, fastmcp) can be served with
/// [`ServerConfig::with_modern_ping`](super::ServerConfig::with_modern_ping): then `ping`
/// goes to the app like any modern request, and the service answers it `{}`.
pub const REMOVED_IN_MODERN: [&str; 5] = [
    "initialize",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
    "ping",
];

#[derive(Deserialize)]
struct MetaOnly {
    #[serde(rename = "_meta")]
    meta: Option<serde_json::Map<String, serde_json::Value>>,
    name: Option<serde_json::Value>,
}

impl Router {
    /// Admits (or refuses) a complete modern POST body. See the module docs for the order.
    pub(super) fn process_modern(
        &mut self,
        stream: ExchangeId,
        ctx: &PostContext,
        origin: Option<&str>,
        items: Vec<Result<Message, InvalidMessage>>,
        batch: bool,
        mirrored: HeaderMap,
    ) {
        if batch {
            return self.refuse(
                stream,
                ProtocolError::BatchNotAllowed,
                origin,
                HeaderMap::new(),
                None,
                false,
            );
        }
        let Some(item) = items.into_iter().next() else {
            return self.refuse(
                stream,
                ProtocolError::InvalidRequest("the body is empty"),
                origin,
                HeaderMap::new(),
                None,
                false,
            );
        };
        let request = match item {
            Err(invalid) => {
                let body = Message::Response(invalid.to_error_response()).to_bytes();
                let e = ProtocolError::InvalidRequest("the body is not a valid JSON-RPC message");
                return self.refuse(stream, e, origin, HeaderMap::new(), Some(body), false);
            }
            Ok(Message::Response(_)) => {
                return self.refuse(
                    stream,
                    ProtocolError::ModernResponse,
                    origin,
                    HeaderMap::new(),
                    None,
                    false,
                );
            }
            Ok(Message::Notification(n)) => {
                // Transport mechanics only (no client notification is defined over HTTP in
                // 2026-07-28): 202, and the app may look at it. `notifications/cancelled`
                // has no meaning here: closing the stream cancels (S-NEW-6).
                if &*n.method != "notifications/cancelled" {
                    self.out.push_back(ServerOutput::Notification {
                        session: None,
                        notification: n,
                    });
                }
                let mut headers = HeaderMap::new();
                self.config.cors_headers(origin, &mut headers);
                return self.answer(stream, http::StatusCode::ACCEPTED, headers, None);
            }
            Ok(Message::Request(r)) => r,
        };
        let mut admitted = self.admit_modern(&request, &mirrored);
        if admitted.is_ok() && self.streams.modern_live() >= self.config.limits.max_modern_in_flight
        {
            admitted = Err(ProtocolError::TooManyRequests);
        }
        if let Err(e) = admitted {
            let body = self
                .config
                .protocol_error_body(Some(request.id.clone()), &e);
            return self.refuse(stream, e, origin, HeaderMap::new(), Some(body), false);
        }
        self.start_modern(stream, ctx, request);
    }

    /// The checks of a modern request, after it is known to be one request.
    fn admit_modern(&self, request: &Request, mirrored: &HeaderMap) -> Result<(), ProtocolError> {
        let method = &*request.method;
        let lenient_ping = method == "ping" && self.config.modern_ping;
        if REMOVED_IN_MODERN.contains(&method) && !lenient_ping {
            return Err(ProtocolError::MethodNotFound(method.into()));
        }
        let params = request.params.as_deref();
        let parsed: Option<MetaOnly> = params.and_then(|p| serde_json::from_str(p.get()).ok());
        // The table keeps only declarations that make a header name
        // (`ParamHeaderTable::insert`).
        let decls = match (&self.config.param_headers, method, &parsed) {
            (Some(table), "tools/call", Some(MetaOnly { name: Some(n), .. })) => {
                n.as_str().map_or(&[][..], |n| table.get(n))
            }
            _ => &[],
        };
        mirror::check_headers(mirrored, method, params, decls)
            .map_err(|e| ProtocolError::HeaderMismatch(e.to_string().into()))?;
        let meta = parsed.and_then(|p| p.meta);
        let has = |key: &str, object: bool| {
            meta.as_ref()
                .and_then(|m| m.get(key))
                .is_some_and(|v| if object { v.is_object() } else { v.is_string() })
        };
        if !has(meta_keys::PROTOCOL_VERSION, false) {
            return Err(ProtocolError::MissingRequestMeta(
                meta_keys::PROTOCOL_VERSION,
            ));
        }
        if !has(meta_keys::CLIENT_CAPABILITIES, true) {
            return Err(ProtocolError::MissingRequestMeta(
                meta_keys::CLIENT_CAPABILITIES,
            ));
        }
        Ok(())
    }

    /// Binds an admitted modern request to a fresh request stream and hands it to the app.
    fn start_modern(&mut self, stream: ExchangeId, ctx: &PostContext, request: Request) {
        let lsid = self.next();
        let handle = RequestHandle(self.next());
        self.inflight.insert(
            handle,
            InFlight {
                session: None,
                stream: lsid,
                client_id: request.id.clone(),
                initialize: false,
                client: ctx.client,
            },
        );
        let mut ls = LogicalStream::new(
            None,
            StreamKind::Request {
                pending: vec![handle],
                kept: Vec::new(),
                batch: false,
                initialize: false,
            },
            Phase::Pending,
            false,
            ProtocolVersion::V2026_07_28,
        );
        ls.connection = Some(stream);
        ls.accept_sse = ctx.accept_sse;
        ls.origin = ctx.origin.clone();
        ls.modern = true;
        ls.sse_only = !ctx.accept_json;
        self.streams.insert_stream(lsid, ls);
        self.streams
            .insert_exchange(stream, Exchange::new(ExchangeState::Attached(lsid), None));
        self.out.push_back(ServerOutput::Request {
            handle,
            session: None,
            request,
            principal: ctx.principal.clone(),
        });
    }
}

// S-NEW-9, S-NEW-7.
/// The HTTP status of a modern error answer sent as one JSON body (and the
/// 400 the schema prescribes for -32021).
pub(super) fn modern_error_status(code: i64) -> Option<http::StatusCode> {
    use crate::jsonrpc::error_codes as c;
    match code {
        c::METHOD_NOT_FOUND => Some(http::StatusCode::NOT_FOUND),
        c::HEADER_MISMATCH
        | c::MISSING_REQUIRED_CLIENT_CAPABILITY
        | c::UNSUPPORTED_PROTOCOL_VERSION => Some(http::StatusCode::BAD_REQUEST),
        _ => None,
    }
}
