//! Inputs: request heads, bodies, disconnects, and the client's reading of a response
//! (time passing is `timeout.rs`'s input). The checks run in a fixed order so that a refused
//! request learns as little as possible: path, `Host`/`Origin`, CORS preflight,
//! authentication, method, headers, session, version, body; those that need only the
//! configuration are `admission.rs`'s. The rate limits (`rate.rs`) charge the address before
//! authentication, the principal after it, and a live session when it is found.

use std::time::Instant;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::admission::{mirrored_headers, origin_of, raw_version};
use super::cluster::ParkEvent;
use super::error::{CancelReason, ProtocolError};
use super::names::{EventRef, Owner};
use super::session::{SessionEvent, SessionStep, is_valid_session_id};
use super::stream::{
    Exchange, ExchangeState, LogicalStream, Phase, PostContext, StreamEvent, StreamKind, Written,
};
use super::timer::Timer;
use super::wire::{error_body, join_array, read_protocol_version};
use super::{
    ExchangeId, FollowFrom, InFlight, RequestHandle, RequestHead, Router, ServerEvent,
    ServerOutput, SessionHandle,
};
use crate::http::{accepts, header_name, mime};
use crate::jsonrpc::{BatchItem, Body, Message, Response, error_codes, parse_body};

use crate::{Era, ProtocolVersion};

impl Router {
    /// Whether `head` is a request the authentication step judges: what a driver running an
    /// asynchronous authenticator (the driver's) asks before it awaits a verdict
    /// (see [`ServerConfig::needs_authentication`](super::ServerConfig::needs_authentication)).
    pub fn needs_authentication(&self, head: &RequestHead<'_>) -> bool {
        self.config.needs_authentication(head)
    }

    /// Input: the head of an HTTP request. Returns the exchange's [`ExchangeId`]; the answer
    /// (possibly immediate) comes out of [`poll_output`](Router::poll_output). For a POST,
    /// feed the body with [`handle_body`](Router::handle_body) and
    /// [`handle_body_end`](Router::handle_body_end).
    pub fn handle_request(&mut self, now: Instant, head: RequestHead<'_>) -> ExchangeId {
        self.advance(now);
        let stream = ExchangeId(self.next());
        self.start_request(stream, head);
        stream
    }

    /// A request head under its (possibly re-used, for a parked request) [`ExchangeId`].
    pub(crate) fn start_request(&mut self, stream: ExchangeId, head: RequestHead<'_>) {
        if let Some((status, headers, body)) = self.health_answer(&head) {
            // Before every other check: probes name no allowed host and carry no credentials.
            self.answer(stream, status, headers, body);
            return;
        }
        let origin = origin_of(head.headers);
        if self.is_draining() {
            let stop = head.method == Method::POST;
            let error = ProtocolError::ShuttingDown;
            self.refuse(
                stream,
                error,
                origin.as_deref(),
                HeaderMap::new(),
                None,
                stop,
            );
            return;
        }
        if let Err((error, extra)) = self.route_head(stream, &head, origin.as_deref()) {
            // A POST refused before its body is read closes its connection, except when
            // a busy store pushed it back: its client sends it again in a moment, on the
            // same connection (the body, bounded by the body limit, is read and dropped).
            let stop =
                head.method == Method::POST && !matches!(error, ProtocolError::StoreBusy { .. });
            self.refuse(stream, error, origin.as_deref(), extra, None, stop);
        }
    }

    /// Input: a chunk of a POST body. Bytes beyond [`ServerLimits::max_body_bytes`] get 413
    /// at once, without being buffered. Chunks for an exchange that is not reading a body
    /// (already answered, unknown) are ignored.
    ///
    /// [`ServerLimits::max_body_bytes`]: super::ServerLimits::max_body_bytes
    pub fn handle_body(&mut self, now: Instant, stream: ExchangeId, chunk: &[u8]) {
        self.advance(now);
        self.body_chunk(stream, chunk);
    }

    pub(crate) fn body_chunk(&mut self, stream: ExchangeId, chunk: &[u8]) {
        if self.parked_input(stream, ParkEvent::Body(chunk)) {
            return;
        }
        let cap = self.config.limits.max_body_bytes;
        let Some(ex) = self.streams.exchange_mut(&stream) else {
            return;
        };
        let ExchangeState::ReadingBody(ctx) = &mut ex.state else {
            return;
        };
        if ctx.body.len().saturating_add(chunk.len()) > cap {
            let origin = ctx.origin.clone();
            self.remove_exchange(stream);
            self.refuse(
                stream,
                ProtocolError::PayloadTooLarge(cap),
                origin.as_deref(),
                HeaderMap::new(),
                None,
                true,
            );
            return;
        }
        ctx.body.extend_from_slice(chunk);
    }

    /// Input: the POST body is complete; the router parses and dispatches it.
    pub fn handle_body_end(&mut self, now: Instant, stream: ExchangeId) {
        self.advance(now);
        self.body_end(stream);
    }

    pub(crate) fn body_end(&mut self, stream: ExchangeId) {
        if self.parked_input(stream, ParkEvent::BodyEnd) {
            return;
        }
        let Some(ex) = self.streams.exchange_mut(&stream) else {
            return;
        };
        if !matches!(ex.state, ExchangeState::ReadingBody(_)) {
            return;
        }
        let session = ex.session;
        let Some(ex) = self.streams.remove_exchange(stream, &mut self.timers) else {
            return;
        };
        let ExchangeState::ReadingBody(ctx) = ex.state else {
            return;
        };
        if let Some(s) = session.and_then(|s| self.sessions.get_mut(&s)) {
            s.open_connections = s.open_connections.saturating_sub(1);
        }
        self.process_post(stream, *ctx);
    }

    /// Convenience: a whole request at once (head, body, end).
    pub fn handle_request_with_body(
        &mut self,
        now: Instant,
        head: RequestHead<'_>,
        body: &[u8],
    ) -> ExchangeId {
        let stream = self.handle_request(now, head);
        self.handle_body(now, stream, body);
        self.handle_body_end(now, stream);
        stream
    }

    /// Input: the client went away from `stream` (connection closed or reset, or a write
    /// failed). See [`Router`] for what that cancels.
    pub fn handle_disconnect(&mut self, now: Instant, stream: ExchangeId) {
        self.advance(now);
        if self.parked_input(stream, ParkEvent::Disconnect) {
            return;
        }
        self.disconnected(stream);
    }

    /// Input: the client took `bytes` more of `stream`'s body (the adapter handed them to the
    /// connection). Lets the waiting chunks out up to [`ServerLimits::send_window`]. Report
    /// at least every [`ServerConfig::write_report_threshold`] bytes taken, and whenever the
    /// body has taken everything it was given and waits for more; more often is harmless.
    /// Unknown or finished streams are ignored.
    ///
    /// [`ServerLimits::send_window`]: super::ServerLimits::send_window
    /// [`ServerConfig::write_report_threshold`]: super::ServerConfig::write_report_threshold
    pub fn handle_written(&mut self, now: Instant, stream: ExchangeId, bytes: usize) {
        self.advance(now);
        let fx = &mut Router::fx(self.now, &mut self.timers, &mut self.out);
        if self.streams.written(stream, bytes, &self.config, fx) == Written::Drained {
            self.remove_exchange(stream);
        }
    }

    /// The connection of `stream` is gone (the client left, or the slow-reader rule cut it).
    pub(crate) fn disconnected(&mut self, stream: ExchangeId) {
        let Some(ex) = self.streams.exchange(&stream) else {
            return;
        };
        let attached = match ex.state {
            ExchangeState::Attached(l) => Some(l),
            ExchangeState::ReadingBody(_) | ExchangeState::Draining => None,
        };
        self.remove_exchange(stream);
        let Some(lsid) = attached else { return };
        let Some(ls) = self.streams.stream_mut(&lsid) else {
            return;
        };
        if ls.connection != Some(stream) {
            return;
        }
        ls.detach();
        if matches!(ls.kind, StreamKind::Remote { .. }) {
            self.unfollow(lsid);
            return self.drop_stream(lsid);
        }
        let listen = matches!(ls.kind, StreamKind::Listen);
        if listen {
            self.unfollow(lsid);
        }
        let Some(ls) = self.streams.stream_mut(&lsid) else {
            return;
        };
        // A listen stream never ends on its own: it waits detached (its messages are stored
        // or queue in the session). A request stream lives on when the client can resume it.
        let keep = listen || (ls.resumable && ls.id_sent);
        match ls.step(StreamEvent::Disconnect { keep }) {
            Some(Phase::Detached) if !listen => {
                let at = self.now + self.config.streams.resume_grace;
                self.timers.set(&mut ls.grace, Timer::ResumeGrace(lsid), at);
            }
            Some(Phase::Done) => {
                self.cancel_stream_handlers(lsid, CancelReason::Disconnected);
                self.drop_stream(lsid);
            }
            _ => {}
        }
    }

    fn route_head(
        &mut self,
        stream: ExchangeId,
        head: &RequestHead<'_>,
        origin: Option<&str>,
    ) -> Result<(), (ProtocolError, HeaderMap)> {
        let plain = |e| (e, HeaderMap::new());
        let path = head.uri.path();
        if let Some(prm) = &self.config.security.protected_resource
            && prm.serves(path, &self.config.endpoint_path)
        {
            return self.serve_metadata(stream, head).map_err(plain);
        }
        if path != self.config.endpoint_path {
            return Err(plain(ProtocolError::NotFound));
        }
        self.config.security.check_host(head).map_err(plain)?;
        if head.method == Method::OPTIONS {
            return self.options(stream, head, origin);
        }
        debug_assert!(self.config.needs_authentication(head));
        let fresh = self.rate_first_sight(stream);
        self.charge_address(fresh, head).map_err(plain)?;
        let principal = self.config.authenticate(head)?;
        self.charge_principal(fresh, principal.as_deref())
            .map_err(plain)?;
        if fresh && matches!(*head.method, Method::POST | Method::GET) {
            // Pushed back before it adds store work (DELETE frees some: never refused); a
            // request parked on its session's load and run again was admitted already.
            self.check_store_backlog().map_err(plain)?;
        }
        let modern = self.config.is_modern(head.headers);
        if !modern && self.park_unloaded(stream, head, principal.as_deref(), origin) {
            return Ok(());
        }
        if modern && matches!(*head.method, Method::GET | Method::DELETE) {
            // S-NEW-1: no GET stream and no session to delete in 2026-07-28.
            let mut allow = HeaderMap::new();
            allow.insert(header::ALLOW, self.config.allow(Some(head.headers)));
            return Err((ProtocolError::MethodNotAllowed, allow));
        }
        match *head.method {
            Method::POST => self.post_head(stream, head, principal).map_err(plain),
            Method::GET => self.get_head(stream, head, principal).map_err(plain),
            Method::DELETE => self.delete_head(stream, head, principal).map_err(plain),
            _ => Err(plain(ProtocolError::MethodNotAllowed)),
        }
    }

    fn serve_metadata(
        &mut self,
        stream: ExchangeId,
        head: &RequestHead<'_>,
    ) -> Result<(), ProtocolError> {
        let (status, headers, body) = self.config.metadata_answer(head)?;
        self.answer(stream, status, headers, body);
        Ok(())
    }

    /// `OPTIONS` on the endpoint: 204 with `Allow`; with CORS configured and an `Origin`, the
    /// CORS preflight answer (403 for an origin CORS does not allow).
    fn options(
        &mut self,
        stream: ExchangeId,
        head: &RequestHead<'_>,
        origin: Option<&str>,
    ) -> Result<(), (ProtocolError, HeaderMap)> {
        let headers = self.config.options_answer(head, origin)?;
        self.answer(stream, StatusCode::NO_CONTENT, headers, None);
        Ok(())
    }

    /// The session named by `Mcp-Session-Id`, checked against the principal.
    fn lookup_session(
        &self,
        headers: &HeaderMap,
        principal: Option<&str>,
    ) -> Result<Option<SessionHandle>, ProtocolError> {
        let Some(value) = headers.get(&header_name::MCP_SESSION_ID) else {
            return Ok(None);
        };
        let id = value
            .to_str()
            .map_err(|_| ProtocolError::UnknownSession)?
            .trim();
        if !is_valid_session_id(id) {
            return Err(ProtocolError::UnknownSession);
        }
        let handle = self
            .sessions
            .by_id(id)
            .ok_or(ProtocolError::UnknownSession)?;
        let session = self
            .sessions
            .get(&handle)
            .ok_or(ProtocolError::UnknownSession)?;
        if session.principal.as_deref() != principal {
            // Another principal's session is indistinguishable from no session (S-SESS-12).
            return Err(ProtocolError::UnknownSession);
        }
        Ok(Some(handle))
    }

    fn require_session(
        &mut self,
        head: &RequestHead<'_>,
        principal: Option<&str>,
    ) -> Result<SessionHandle, ProtocolError> {
        let session = self
            .lookup_session(head.headers, principal)?
            .ok_or(ProtocolError::MissingSessionId)?;
        self.config
            .header_version(head.headers)
            .map_err(|()| self.config.unsupported_version(raw_version(head.headers)))?;
        self.charge_session(session)?;
        self.session_step(session, SessionEvent::Activity);
        Ok(session)
    }

    fn post_head(
        &mut self,
        stream: ExchangeId,
        head: &RequestHead<'_>,
        principal: Option<Box<str>>,
    ) -> Result<(), ProtocolError> {
        let (accept_json, accept_sse) = self.config.post_head_checks(head)?;
        // S-NEW-2: a modern request has no session; its `Mcp-Session-Id` is ignored.
        let header_version = self.config.header_version(head.headers);
        let modern = self.config.is_modern_version(header_version);
        let session = if self.config.stateless || modern {
            None
        } else {
            self.lookup_session(head.headers, principal.as_deref())?
        };
        if let Some(s) = session {
            header_version
                .map_err(|()| self.config.unsupported_version(raw_version(head.headers)))?;
            self.charge_session(s)?;
            self.session_step(s, SessionEvent::Activity);
            if let Some(sess) = self.sessions.get_mut(&s) {
                sess.open_connections += 1;
            }
        }
        let ctx = PostContext {
            session,
            header_version,
            accept_json,
            accept_sse,
            principal,
            origin: origin_of(head.headers),
            body: Vec::new(),
            mirrored: modern.then(|| mirrored_headers(head.headers)),
            requested_version: raw_version(head.headers).map(Into::into),
            client: self.config.security.request_client(head),
        };
        self.streams.insert_exchange(
            stream,
            Exchange::new(ExchangeState::ReadingBody(Box::new(ctx)), session),
        );
        Ok(())
    }

    fn get_head(
        &mut self,
        stream: ExchangeId,
        head: &RequestHead<'_>,
        principal: Option<Box<str>>,
    ) -> Result<(), ProtocolError> {
        if self.config.stateless || !self.config.enable_get_stream {
            return Err(ProtocolError::MethodNotAllowed);
        }
        if !accepts(head.headers, mime::TEXT_EVENT_STREAM) {
            return Err(ProtocolError::NotAcceptable(mime::TEXT_EVENT_STREAM));
        }
        let session = self.require_session(head, principal.as_deref())?;
        let origin = origin_of(head.headers);
        let last_event_id = head.headers.get(&header_name::LAST_EVENT_ID);
        match last_event_id {
            Some(v) => {
                let named = v
                    .to_str()
                    .ok()
                    .and_then(|v| self.config.resolve_event_id(v))
                    .ok_or(ProtocolError::UnknownLastEventId)?;
                let (lsid, seq) = match named {
                    EventRef::Stream(lsid, seq) => (lsid, seq),
                    EventRef::Remote(name, seq) => {
                        self.resume_remote(stream, session, name, seq, origin);
                        return Ok(());
                    }
                    EventRef::Listen(seq) => {
                        if let Some(lsid) = self.sessions.get(&session).and_then(|s| s.listen) {
                            self.streams
                                .charge_takeover(lsid, &self.config.limits, self.now)?;
                        }
                        self.open_listen_from(stream, session, origin, FollowFrom::After(seq));
                        return Ok(());
                    }
                };
                let Some(here) = self.streams.stream(&lsid) else {
                    if self.is_clustered() {
                        // One of ours this instance no longer holds (its copy of the session
                        // was dropped, say after the bus was lost, with its finished
                        // streams): the store has every event it sent, as for another
                        // instance's stream (an unknown one is refused there, 400).
                        let name = self.config.stream_name(lsid).into();
                        self.resume_remote(stream, session, name, seq, origin);
                        return Ok(());
                    }
                    return Err(ProtocolError::UnknownLastEventId);
                };
                // Only streams whose ids reached the wire can be resumed: a pending JSON
                // answer has no ids, and a guessed id must not hijack it.
                let owned = here.session == Some(session)
                    && here.resumable
                    && matches!(
                        here.phase(),
                        Phase::Open | Phase::Detached | Phase::Finished
                    );
                if !owned {
                    return Err(ProtocolError::UnknownLastEventId);
                }
                if self.sessions.get(&session).and_then(|s| s.listen) == Some(lsid) {
                    self.streams
                        .charge_takeover(lsid, &self.config.limits, self.now)?;
                }
                self.resume(stream, session, lsid, seq, origin);
            }
            None => {
                if let Some(lsid) = self.sessions.get(&session).and_then(|s| s.listen) {
                    self.streams
                        .charge_takeover(lsid, &self.config.limits, self.now)?;
                }
                self.open_listen(stream, session, origin);
            }
        }
        Ok(())
    }

    fn delete_head(
        &mut self,
        stream: ExchangeId,
        head: &RequestHead<'_>,
        principal: Option<Box<str>>,
    ) -> Result<(), ProtocolError> {
        if self.config.stateless || !self.config.enable_delete {
            return Err(ProtocolError::MethodNotAllowed);
        }
        let session = self.require_session(head, principal.as_deref())?;
        if self.cluster_delete(stream, session, origin_of(head.headers)) {
            return Ok(());
        }
        self.session_step(session, SessionEvent::Delete);
        let mut headers = HeaderMap::new();
        self.config
            .cors_headers(origin_of(head.headers).as_deref(), &mut headers);
        self.answer(stream, StatusCode::OK, headers, None);
        Ok(())
    }

    /// Parses and dispatches a complete POST body, in named steps: parse, admission (the
    /// modern era's own path, header/body mismatch, unsupported version), session lookup,
    /// version and batch validation, dispatch by message kind, then the answer (202, 400, or
    /// a request stream). Each step that refuses has answered `stream` when it returns `None`.
    fn process_post(&mut self, stream: ExchangeId, mut ctx: PostContext) {
        let Some((items, batch)) = self.parse_post(stream, &ctx) else {
            return;
        };
        if let Some(mirrored) = ctx.mirrored.take() {
            let origin = ctx.origin.clone();
            return self.process_modern(stream, &ctx, origin.as_deref(), items, batch, mirrored);
        }
        let Some(initialize) = self.admit_post(stream, &ctx, &items, batch) else {
            return;
        };
        let Some(session) = self.post_session(stream, &ctx, initialize) else {
            return;
        };
        let is_init = initialize.is_some();
        let Some(version) = self.validate_post(stream, &ctx, &items, batch, session, is_init)
        else {
            return;
        };
        let lsid = self.next();
        let principal = ctx.principal.as_deref();
        let (handles, kept) =
            self.dispatch_items(session, principal, lsid, items, batch, ctx.client);
        self.answer_post(
            stream, &ctx, session, lsid, handles, kept, batch, is_init, version,
        );
    }

    /// Step 1: the body as JSON-RPC messages and whether it was a batch; refuses a body that
    /// is not JSON (-32700) or not JSON-RPC (-32600).
    fn parse_post(
        &mut self,
        stream: ExchangeId,
        ctx: &PostContext,
    ) -> Option<(Vec<BatchItem>, bool)> {
        match parse_body(&ctx.body) {
            Ok(Body::Single(m)) => Some((vec![Ok(m)], false)),
            Ok(Body::Batch(items)) => Some((items, true)),
            Err(failure) => {
                let error = if failure.code() == error_codes::PARSE_ERROR {
                    ProtocolError::Parse
                } else {
                    ProtocolError::InvalidRequest("the body is not a JSON-RPC 2.0 message")
                };
                // "Parse error" / "Invalid Request", the detail in `data`, the id if readable.
                let body = Message::Response(failure.to_error_response()).to_bytes();
                let origin = ctx.origin.as_deref();
                self.refuse(stream, error, origin, HeaderMap::new(), Some(body), false);
                None
            }
        }
    }

    // S-NEW-7.
    /// Step 2, admission of a legacy-era body: a modern `_meta` under a legacy header is a
    /// mismatch, and with the modern era on an unsupported version is answered
    /// before anything session-related. Returns the lone `initialize` request, if that is
    /// what the body is (`Some(None)` otherwise).
    fn admit_post<'i>(
        &mut self,
        stream: ExchangeId,
        ctx: &PostContext,
        items: &'i [BatchItem],
        batch: bool,
    ) -> Option<Option<&'i crate::jsonrpc::Request>> {
        let origin = ctx.origin.as_deref();
        if self.config.modern_enabled()
            && let [Ok(Message::Request(r))] = items
            && !batch
            && let Some(v) = meta_protocol_version(r.params.as_deref())
        {
            // A body that says 2026-07-28 under a legacy (or no) header: the headers do not
            // mirror the body (S-NEW-7).
            let e = ProtocolError::HeaderMismatch(
                format!(
                    "Header mismatch: MCP-Protocol-Version header value {:?} does not match body value {v:?}",
                    ctx.requested_version.as_deref().unwrap_or_default()
                )
                .into(),
            );
            let body = self.config.protocol_error_body(Some(r.id.clone()), &e);
            self.refuse(stream, e, origin, HeaderMap::new(), Some(body), false);
            return None;
        }
        let initialize = match items {
            [Ok(Message::Request(r))] if !batch => (&*r.method == "initialize").then_some(r),
            _ => None,
        };
        if self.config.modern_enabled() && initialize.is_none() && ctx.header_version.is_err() {
            // With the modern era on, an unsupported version is answered before anything
            // session-related: a client probing with a version we lack learns our list
            // (S-NEW-7) instead of "initialize first".
            self.refuse_unsupported(stream, ctx, items);
            return None;
        }
        Some(initialize)
    }

    /// Step 3, session lookup: the session the head named (still live), none in stateless
    /// mode, or a new one for `initialize`; refuses an ended session (404) and a missing id
    /// (400). Returns `Some(session)`, where `session` is `None` only in stateless mode.
    fn post_session(
        &mut self,
        stream: ExchangeId,
        ctx: &PostContext,
        initialize: Option<&crate::jsonrpc::Request>,
    ) -> Option<Option<SessionHandle>> {
        let origin = ctx.origin.as_deref();
        let refusal = match ctx.session {
            Some(s) if self.sessions.contains(&s) => return Some(Some(s)),
            Some(_) => ProtocolError::UnknownSession,
            None if self.config.stateless => return Some(None),
            None => match initialize {
                Some(r) => {
                    let requested = read_protocol_version(r.params.as_deref());
                    match self.create_session(ctx.principal.clone(), requested) {
                        Ok(s) => return Some(Some(s)),
                        Err(e) => e,
                    }
                }
                None => ProtocolError::MissingSessionId,
            },
        };
        self.refuse(stream, refusal, origin, HeaderMap::new(), None, false);
        None
    }

    // G-6.
    /// Step 4, validation against the revision: an unsupported `MCP-Protocol-Version`
    /// (`initialize` is exempt), a batch outside 2025-03-26, a batch over the cap.
    /// Returns the revision the request stream speaks.
    fn validate_post(
        &mut self,
        stream: ExchangeId,
        ctx: &PostContext,
        items: &[BatchItem],
        batch: bool,
        session: Option<SessionHandle>,
        is_init: bool,
    ) -> Option<ProtocolVersion> {
        let origin = ctx.origin.as_deref();
        if !is_init && ctx.header_version.is_err() {
            self.refuse_unsupported(stream, ctx, items);
            return None;
        }
        let version = match session.and_then(|s| self.sessions.get(&s)) {
            Some(s) => s.version,
            None => ctx
                .header_version
                .ok()
                .flatten()
                .unwrap_or(ProtocolVersion::ASSUMED_WITHOUT_HEADER),
        };
        if batch && !version.allows_batch() {
            self.refuse(
                stream,
                ProtocolError::BatchNotAllowed,
                origin,
                HeaderMap::new(),
                None,
                false,
            );
            return None;
        }
        if batch && items.len() > self.config.limits.max_batch_len {
            let e = ProtocolError::InvalidRequest("the batch has too many messages");
            self.refuse(stream, e, origin, HeaderMap::new(), None, false);
            return None;
        }
        Some(version)
    }

    /// Step 5, dispatch by message kind: requests go to the app (and are owed a response on
    /// stream `lsid`), notifications to the app (`notifications/cancelled` is the router's),
    /// responses to the server→client request they answer. Returns the handles owed a
    /// response and the error responses already decided (invalid items, `initialize` in a
    /// batch, duplicate ids).
    fn dispatch_items(
        &mut self,
        session: Option<SessionHandle>,
        principal: Option<&str>,
        lsid: u64,
        items: Vec<BatchItem>,
        batch: bool,
        client: super::RequestClient,
    ) -> (Vec<RequestHandle>, Vec<Bytes>) {
        let mut handles = Vec::new();
        let mut kept = Vec::new();
        let mut batch_ids = Vec::new();
        for item in items {
            match item {
                Err(invalid) => {
                    kept.push(Message::Response(invalid.to_error_response()).to_bytes())
                }
                Ok(Message::Request(r)) => {
                    if batch && &*r.method == "initialize" {
                        kept.push(error_body(
                            Some(r.id),
                            error_codes::INVALID_REQUEST,
                            "initialize must not be part of a batch",
                        ));
                        continue;
                    }
                    let dup = batch_ids.contains(&r.id)
                        || session
                            .and_then(|s| self.sessions.get(&s))
                            .is_some_and(|s| s.work.inflight.contains_key(&r.id));
                    if dup {
                        self.out
                            .push_back(ServerOutput::Event(ServerEvent::DuplicateRequestId {
                                session,
                            }));
                        kept.push(error_body(
                            Some(r.id),
                            error_codes::INVALID_REQUEST,
                            "a request with this id is already in flight in this session",
                        ));
                        continue;
                    }
                    batch_ids.push(r.id.clone());
                    let handle = RequestHandle(self.next());
                    if let Some(s) = session.and_then(|s| self.sessions.get_mut(&s)) {
                        s.work.inflight.insert(r.id.clone(), handle);
                    }
                    self.inflight.insert(
                        handle,
                        InFlight {
                            session,
                            stream: lsid,
                            client_id: r.id.clone(),
                            initialize: &*r.method == "initialize",
                            client,
                        },
                    );
                    handles.push(handle);
                    self.out.push_back(ServerOutput::Request {
                        handle,
                        session,
                        request: r,
                        principal: principal.map(Into::into),
                    });
                }
                Ok(Message::Notification(n)) => {
                    if &*n.method == "notifications/cancelled" {
                        self.client_cancelled(session, n.params.as_deref());
                    } else {
                        self.out.push_back(ServerOutput::Notification {
                            session,
                            notification: n,
                        });
                    }
                }
                Ok(Message::Response(r)) => self.client_response(session, r),
            }
        }
        (handles, kept)
    }

    /// Step 6, the answer: 202 when nothing is owed a response, 400 with the error
    /// responses when only those are, else a pending request stream (upgraded to SSE at once
    /// in SSE mode, or when the client does not accept JSON in auto mode).
    #[allow(clippy::too_many_arguments)]
    fn answer_post(
        &mut self,
        stream: ExchangeId,
        ctx: &PostContext,
        session: Option<SessionHandle>,
        lsid: u64,
        handles: Vec<RequestHandle>,
        mut kept: Vec<Bytes>,
        batch: bool,
        is_init: bool,
        version: ProtocolVersion,
    ) {
        let origin = ctx.origin.as_deref();
        if handles.is_empty() {
            let mut headers = HeaderMap::new();
            self.config.cors_headers(origin, &mut headers);
            if kept.is_empty() {
                self.answer(stream, StatusCode::ACCEPTED, headers, None);
            } else {
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(mime::APPLICATION_JSON),
                );
                let body = if batch {
                    join_array(&kept)
                } else {
                    kept.swap_remove(0)
                };
                self.answer(stream, StatusCode::BAD_REQUEST, headers, Some(body));
            }
            return;
        }
        let resumable = session.is_some() && self.config.streams.resumability;
        if let Some(s) = session.and_then(|s| self.sessions.get_mut(&s)) {
            s.work.streams.push(lsid);
            s.open_connections += 1;
        }
        let mut ls = LogicalStream::new(
            session,
            StreamKind::Request {
                pending: handles,
                kept,
                batch,
                initialize: is_init,
            },
            Phase::Pending,
            resumable,
            version,
        );
        ls.connection = Some(stream);
        ls.accept_sse = ctx.accept_sse;
        ls.origin = ctx.origin.clone();
        self.streams.insert_stream(lsid, ls);
        self.streams.insert_exchange(
            stream,
            Exchange::new(ExchangeState::Attached(lsid), session),
        );
        let sse_now = match self.config.response_mode {
            super::ResponseMode::Sse => true,
            super::ResponseMode::Auto => !ctx.accept_json,
            super::ResponseMode::Json => false,
        };
        if sse_now {
            self.upgrade(lsid);
        }
    }

    // S-VER-4, S-NEW-7.
    /// Refuses a POST whose `MCP-Protocol-Version` we do not support (-32022 with
    /// the supported list when the modern era is on).
    fn refuse_unsupported(
        &mut self,
        stream: ExchangeId,
        ctx: &PostContext,
        items: &[crate::jsonrpc::BatchItem],
    ) {
        let e = self
            .config
            .unsupported_version(ctx.requested_version.as_deref());
        let id = match items {
            // The legacy answer keeps its historical null id.
            [Ok(Message::Request(r))] if self.config.modern_enabled() => Some(r.id.clone()),
            _ => None,
        };
        let body = self.config.protocol_error_body(id, &e);
        let origin = ctx.origin.clone();
        self.refuse(
            stream,
            e,
            origin.as_deref(),
            HeaderMap::new(),
            Some(body),
            false,
        );
    }

    fn create_session(
        &mut self,
        principal: Option<Box<str>>,
        requested: Option<ProtocolVersion>,
    ) -> Result<SessionHandle, ProtocolError> {
        if self.sessions.len() >= self.config.limits.max_sessions {
            return Err(ProtocolError::TooManySessions);
        }
        let ids = self
            .config
            .session_ids
            .as_mut()
            .ok_or(ProtocolError::NoSessionIdGenerator)?;
        let mut id = None;
        for _ in 0..3 {
            let candidate = ids.generate();
            if is_valid_session_id(&candidate) && self.sessions.by_id(candidate.as_str()).is_none()
            {
                id = Some(candidate.into_boxed_str());
                break;
            }
        }
        let id = id.ok_or(ProtocolError::BadSessionIdGenerated)?;
        // `initialize` negotiates among the legacy revisions only (it does not exist in
        // 2026-07-28).
        let legacy = |v: &ProtocolVersion| {
            v.era() == Era::Legacy && self.config.supported_versions.contains(v)
        };
        let version = requested
            .filter(legacy)
            .or_else(|| {
                self.config
                    .supported_versions
                    .iter()
                    .copied()
                    .filter(legacy)
                    .max()
            })
            .unwrap_or(ProtocolVersion::LATEST_LEGACY);
        let handle = SessionHandle(self.next());
        self.sessions.begin(handle, id, principal, version);
        self.out
            .push_back(ServerOutput::SessionCreated { session: handle });
        self.session_step(handle, SessionEvent::Activity);
        Ok(handle)
    }

    // S-CANCEL-1/3.
    /// `notifications/cancelled` from the client.
    fn client_cancelled(&mut self, session: Option<SessionHandle>, params: Option<&RawValue>) {
        #[derive(Deserialize)]
        struct Params {
            #[serde(rename = "requestId")]
            request_id: serde_json::Value,
        }
        let Some(session) = session else { return };
        let Some(p) = params.and_then(|p| serde_json::from_str::<Params>(p.get()).ok()) else {
            return;
        };
        let id = match p.request_id {
            serde_json::Value::Number(n) => n.as_i64().map(crate::jsonrpc::RequestId::Number),
            serde_json::Value::String(s) => Some(crate::jsonrpc::RequestId::String(s.into())),
            _ => None,
        };
        let Some(id) = id else { return };
        if !self.cancel_client_request(session, &id) {
            // Not running here: in a cluster, the instance running it stops it.
            self.broadcast_cancel(session, id);
        }
    }

    /// The client answered a server→client request.
    fn client_response(&mut self, session: Option<SessionHandle>, response: Response) {
        if let (Some(s), Some(id)) = (session, &response.id)
            && let Owner::Elsewhere(instance) = self.config.outbound_owner(id)
        {
            return self.forward_response(s, instance, response);
        }
        match session {
            Some(s) => self.match_client_response(s, response),
            None => self
                .out
                .push_back(ServerOutput::Event(ServerEvent::UnmatchedResponse {
                    session,
                })),
        }
    }

    /// The client answered a server→client request of this instance.
    pub(crate) fn match_client_response(&mut self, s: SessionHandle, response: Response) {
        let session = Some(s);
        let matched = match response
            .id
            .as_ref()
            .map(|id| self.config.outbound_owner(id))
        {
            Some(Owner::Here(n)) => Some(super::OutboundId(n))
                .filter(|id| self.outbound.get(id).is_some_and(|o| o.session == s)),
            _ => None,
        };
        match (matched, session) {
            (Some(id), Some(s)) => {
                self.forget_outbound(id);
                self.out.push_back(ServerOutput::ClientResponse {
                    request: id,
                    session: s,
                    response,
                });
            }
            _ => self
                .out
                .push_back(ServerOutput::Event(ServerEvent::UnmatchedResponse {
                    session,
                })),
        }
    }

    /// Applies a session event ([`Session::step`]) and its effects: the idle timer re-armed,
    /// or the session ended.
    pub(crate) fn session_step(&mut self, handle: SessionHandle, event: SessionEvent) {
        match self.sessions.step(handle, event) {
            None => return,
            Some(SessionStep::Touch | SessionStep::BecomeReady) => {}
            Some(SessionStep::End(reason)) => return self.end_session(handle, reason),
        }
        if event == SessionEvent::Activity {
            self.cluster_activity(handle);
        }
        self.rearm_idle(handle);
    }

    /// Arms a session's idle timer: the end of its TTL, or in a cluster the next touch.
    ///
    /// Every request moves that end later. An end later than the armed timer is only noted
    /// (`idle_extension_ms`) and the timer, when it fires, armed again for the rest: one
    /// operation on the timer set per TTL of a busy session, not per request.
    pub(crate) fn rearm_idle(&mut self, handle: SessionHandle) {
        let Some(ttl) = self.config.session_idle_ttl else {
            return;
        };
        let Some(s) = self.sessions.get(&handle) else {
            return;
        };
        let at = self.cluster_idle_deadline(s, ttl).unwrap_or(self.now + ttl);
        self.sessions.arm_idle(handle, at, &mut self.timers);
    }

    /// Answers `stream` with an error status and a JSON-RPC error body.
    pub(crate) fn refuse(
        &mut self,
        stream: ExchangeId,
        error: ProtocolError,
        origin: Option<&str>,
        mut headers: HeaderMap,
        body: Option<Bytes>,
        stop_reading: bool,
    ) {
        if error == ProtocolError::MethodNotAllowed && !headers.contains_key(header::ALLOW) {
            headers.insert(header::ALLOW, self.config.allow(None));
        }
        if let Some(secs) = error.retry_after_secs() {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(mime::APPLICATION_JSON),
        );
        self.config.cors_headers(origin, &mut headers);
        let body = body.unwrap_or_else(|| self.config.protocol_error_body(None, &error));
        let status = error.status_hint();
        self.out
            .push_back(ServerOutput::Event(ServerEvent::Rejected { stream, error }));
        if stop_reading {
            self.out.push_back(ServerOutput::StopReading { stream });
        }
        self.answer(stream, status, headers, Some(body));
    }

    /// A complete response: head, optional body, end.
    pub(crate) fn answer(
        &mut self,
        stream: ExchangeId,
        status: StatusCode,
        headers: HeaderMap,
        body: Option<Bytes>,
    ) {
        self.out.push_back(ServerOutput::ResponseHead {
            stream,
            status,
            headers,
        });
        if let Some(chunk) = body {
            self.out
                .push_back(ServerOutput::ResponseBody { stream, chunk });
        }
        self.out.push_back(ServerOutput::ResponseEnd { stream });
    }
}

/// `params._meta["io.modelcontextprotocol/protocolVersion"]` when it names a modern revision.
fn meta_protocol_version(params: Option<&RawValue>) -> Option<String> {
    #[derive(Deserialize)]
    struct P {
        #[serde(rename = "_meta")]
        meta: Option<serde_json::Map<String, serde_json::Value>>,
    }
    let params = params?.get();
    if !crate::jsonrpc::may_have_member(params, "_meta") {
        return None;
    }
    let p: P = serde_json::from_str(params).ok()?;
    let v = p
        .meta?
        .get(crate::mirror::META_PROTOCOL_VERSION)?
        .as_str()?
        .to_owned();
    (ProtocolVersion::parse(&v)?.era() == Era::Modern).then_some(v)
}
