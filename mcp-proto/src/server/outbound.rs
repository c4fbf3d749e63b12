//! Outputs and app commands: writing events on streams, finishing them, replies,
//! notifications, server→client requests, and sessions ending. The inputs are in `inbound.rs`
//! (requests, bodies, disconnects, the client's reading) and `timer.rs` (time passing).

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::StatusCode;
use http::header::{self, HeaderMap, HeaderValue};
use serde_json::value::RawValue;

use super::error::{CancelReason, CloseReason, SendError, ServerRequestError};
use super::session::{Queued, SessionEvent};
use super::store::Replay;
use super::stream::{
    Exchange, ExchangeState, LetGo, LogicalStream, Phase, Sent, StreamEvent, StreamKind,
    event_frame, events_lost_frame, priming_frame, retry_frame,
};
use super::timer::Timer;
use super::wire::{error_body, join_array, read_protocol_version};
use super::{
    Delivery, ExchangeId, FollowFrom, Outbound, OutboundId, RequestHandle, ResponseMode, Router,
    ServerEvent, ServerOutput, SessionHandle, Target,
};
use crate::http::{header as mcp_header, mime};
use crate::jsonrpc::{ErrorObject, Message, Notification, Outcome, Request, RequestId, Response};

impl Router {
    /// Command: answers a client request, exactly once. The router restores the client's id
    /// (requests are never cross-wired, even when two sessions use the same ids) and puts
    /// the response on the request's stream. Answering `initialize` with a result fixes the
    /// session's revision from `result.protocolVersion`; with an error, ends the session.
    pub fn respond(
        &mut self,
        now: Instant,
        handle: RequestHandle,
        mut outcome: Outcome,
    ) -> Result<(), SendError> {
        self.advance(now);
        if self.is_clustered()
            && let Some(f) = self.inflight.get(&handle)
            && let Some(session) = f.session
        {
            let init_ok = f.initialize && matches!(outcome, Outcome::Result(_));
            match self.hold_answer(session, handle, outcome, init_ok) {
                Some(o) => outcome = o,
                None => return Ok(()), // answered once the store has the session
            }
        }
        let inflight = self
            .inflight
            .remove(&handle)
            .ok_or(SendError::UnknownHandle)?;
        let init_ok = match (&outcome, inflight.initialize) {
            (Outcome::Result(r), true) => {
                if let Some(v) = read_protocol_version(Some(r))
                    && let Some(s) = inflight.session.and_then(|s| self.sessions.get_mut(&s))
                    && self.config.supported_versions.contains(&v)
                    && v.era() == crate::Era::Legacy
                {
                    s.version = v;
                    if let Some(ls) = self.streams.stream_mut(&inflight.stream) {
                        ls.version = v;
                    }
                }
                Some(true)
            }
            (Outcome::Error(_), true) => Some(false),
            _ => None,
        };
        if let Some(w) = inflight
            .session
            .and_then(|s| self.sessions.get_mut(&s))
            .and_then(|s| s.work.get_mut())
        {
            w.inflight.remove(&inflight.client_id);
        }
        if let (Outcome::Error(e), Some(ls)) = (&outcome, self.streams.stream_mut(&inflight.stream))
            && ls.modern
        {
            ls.error_status = super::sessionless::modern_error_status(e.code);
        }
        let answered = inflight.client_id.clone();
        let payload = Message::Response(Response {
            id: Some(inflight.client_id),
            outcome,
        })
        .to_bytes();
        if init_ok == Some(false) {
            // No session id for a failed initialize: strip it from a pending JSON head.
            if let Some(StreamKind::Request { initialize, .. }) = self
                .streams
                .stream_mut(&inflight.stream)
                .map(|s| &mut s.kind)
            {
                *initialize = false;
            }
        }
        self.write_response(inflight.stream, handle, payload, answered);
        if let Some(session) = inflight.session {
            match init_ok {
                Some(ok) => self.session_step(session, SessionEvent::InitializeAnswered { ok }),
                None => self.session_step(session, SessionEvent::Activity),
            }
            if let Some(s) = self.sessions.get_mut(&session) {
                s.shrink();
            }
        }
        Ok(())
    }

    /// Command: [`respond`](Router::respond) with a result.
    pub fn respond_result(
        &mut self,
        now: Instant,
        handle: RequestHandle,
        result: Box<RawValue>,
    ) -> Result<(), SendError> {
        self.respond(now, handle, Outcome::Result(result))
    }

    /// Command: [`respond`](Router::respond) with an error.
    pub fn respond_error(
        &mut self,
        now: Instant,
        handle: RequestHandle,
        error: ErrorObject,
    ) -> Result<(), SendError> {
        self.respond(now, handle, Outcome::Error(error))
    }

    /// Query: the exchange (HTTP request) whose response carries request `handle`'s
    /// messages, while it is connected (`None` once it is detached, or for an unknown
    /// handle).
    pub fn exchange_of(&self, handle: RequestHandle) -> Option<ExchangeId> {
        let lsid = self.inflight.get(&handle)?.stream;
        self.streams.stream(&lsid)?.connection
    }

    /// Query: the protocol revision request `handle` was made in (its session's, or, for a
    /// sessionless request, the one its POST declared), while it is in flight.
    pub fn request_version(
        &self,
        handle: RequestHandle,
    ) -> Option<crate::version::ProtocolVersion> {
        let lsid = self.inflight.get(&handle)?.stream;
        Some(self.streams.stream(&lsid)?.version)
    }

    /// Query: who sent request `handle` (see [`RequestClient`](super::RequestClient)), while
    /// it is in flight.
    pub fn request_client(&self, handle: RequestHandle) -> Option<super::RequestClient> {
        Some(self.inflight.get(&handle)?.client)
    }

    /// Command: sends a notification, related to a request or not (see [`Target`]).
    pub fn notify(
        &mut self,
        now: Instant,
        target: Target,
        notification: Notification,
    ) -> Result<Delivery, SendError> {
        self.advance(now);
        let payload = Message::Notification(notification).to_bytes();
        self.route(target, payload, None)
    }

    /// Command: sends a server→client request (sampling, elicitation, roots, ping). Its
    /// answer arrives as [`ServerOutput::ClientResponse`]; without one before `timeout`
    /// (default [`ServerConfig::streams.server_request_timeout`](super::ServerConfig)), it fails
    /// with [`ServerRequestError::Timeout`] and the client is sent `notifications/cancelled`.
    /// In stateless mode it fails at once with [`SendError::Stateless`] (rather than never
    /// reaching the client and timing out).
    pub fn send_request(
        &mut self,
        now: Instant,
        target: Target,
        method: &str,
        params: Option<Box<RawValue>>,
        timeout: Option<Duration>,
    ) -> Result<OutboundId, SendError> {
        self.advance(now);
        if self.config.stateless {
            return Err(SendError::Stateless);
        }
        let session = match target {
            Target::Session(s) => s,
            Target::Request(h) => {
                let f = self.inflight.get(&h).ok_or(SendError::UnknownHandle)?;
                if self.streams.stream(&f.stream).is_some_and(|l| l.modern) {
                    // S-NEW-5: never a JSON-RPC request on a modern stream.
                    return Err(SendError::ModernNoRequests);
                }
                f.session.ok_or(SendError::Stateless)?
            }
        };
        if !self.sessions.contains(&session) {
            return Err(SendError::UnknownSession);
        }
        let id = OutboundId(self.next());
        let wire_id = self
            .config
            .outbound_wire_id(id.0)
            .ok_or(SendError::InvalidMessage)?;
        let payload = Message::Request(Request {
            id: wire_id,
            method: method.into(),
            params,
        })
        .to_bytes();
        self.route(target, payload, Some(id))?;
        let mut deadline = None;
        let at = self.now + timeout.unwrap_or(self.config.streams.server_request_timeout);
        self.timers
            .set(&mut deadline, Timer::RequestDeadline(id), at);
        self.outbound.insert(id, Outbound { session, deadline });
        if let Some(s) = self.sessions.get_mut(&session) {
            s.work.outbound.push(id);
        }
        Ok(id)
    }

    /// Command: gives up on a server→client request. If it was still queued it is dropped
    /// unsent; otherwise the client is sent `notifications/cancelled`. No output follows.
    pub fn cancel_request(&mut self, now: Instant, request: OutboundId) -> Result<(), SendError> {
        self.advance(now);
        if !self.outbound.contains_key(&request) {
            return Err(SendError::UnknownHandle);
        }
        self.abandon_outbound(request, "cancelled by the server");
        Ok(())
    }

    // S-POST-20/22, S-GET-8.
    /// Command: closes the connection of a request's stream (or of the session's GET
    /// stream) without ending the stream, so that the client polls: it reconnects with GET
    /// and `Last-Event-ID` after the announced `retry`. A pending
    /// JSON answer is upgraded to SSE first. Needs resumability and a client of 2025-11-25
    /// or later ([`SendError::NotResumable`] otherwise).
    pub fn close_for_polling(&mut self, now: Instant, target: Target) -> Result<(), SendError> {
        self.advance(now);
        let lsid = match target {
            Target::Request(h) => {
                self.inflight
                    .get(&h)
                    .ok_or(SendError::UnknownHandle)?
                    .stream
            }
            Target::Session(s) => self
                .sessions
                .get(&s)
                .ok_or(SendError::UnknownSession)?
                .listen
                .ok_or(SendError::NotResumable)?,
        };
        let Some(ls) = self.streams.stream(&lsid) else {
            return Err(SendError::UnknownHandle);
        };
        if !(ls.resumable && ls.version.allows_priming()) {
            return Err(SendError::NotResumable);
        }
        if ls.phase() == Phase::Pending {
            self.upgrade(lsid);
        }
        match self.streams.stream_mut(&lsid) {
            // In a cluster, what the client was sent must be stored first (it resumes from
            // there): the close follows the commits.
            Some(ls) if !ls.uncommitted.is_empty() => {
                ls.poll_close_after_commit = true;
                Ok(())
            }
            Some(_) => {
                self.release_for_polling(lsid);
                Ok(())
            }
            None => Err(SendError::UnknownHandle),
        }
    }

    /// The connection of `lsid` lets go so that the client polls (see
    /// [`close_for_polling`](Router::close_for_polling)).
    pub(crate) fn release_for_polling(&mut self, lsid: u64) {
        let Some(ls) = self.streams.stream_mut(&lsid) else {
            return;
        };
        let Some(conn) = ls.detach() else {
            return; // Already away.
        };
        ls.step(StreamEvent::Release);
        if matches!(ls.kind, StreamKind::Request { .. }) {
            let at = self.now + self.config.streams.resume_grace;
            self.timers.set(&mut ls.grace, Timer::ResumeGrace(lsid), at);
        }
        self.send_chunk(conn, retry_frame(self.config.streams.retry_interval), true);
        self.end_exchange(conn);
        self.out
            .push_back(ServerOutput::Event(ServerEvent::ClosedForPolling {
                stream: conn,
            }));
    }

    // S-SESS-6.
    /// Command: ends a session: its streams end, handlers are cancelled, pending
    /// server→client requests fail, and its id gets 404 from now on.
    pub fn close_session(&mut self, now: Instant, session: SessionHandle) -> Result<(), SendError> {
        self.advance(now);
        if !self.sessions.contains(&session) {
            return Err(SendError::UnknownSession);
        }
        self.session_step(session, SessionEvent::AppClose);
        Ok(())
    }

    /// Command: a graceful stop. Every session ends ([`CloseReason::Shutdown`]), every
    /// handler is cancelled, every open exchange is finished (an SSE stream ends; an exchange
    /// that has not answered yet gets 503), and the router is left empty.
    pub fn shutdown(&mut self, now: Instant) {
        self.advance(now);
        let sessions = self.sessions.handles();
        for s in sessions {
            self.session_step(s, SessionEvent::Shutdown);
        }
        let handles: Vec<RequestHandle> = self.inflight.keys().copied().collect();
        for h in handles {
            if let Some(f) = self.inflight.remove(&h) {
                if let Some(StreamKind::Request { pending, .. }) =
                    self.streams.stream_mut(&f.stream).map(|l| &mut l.kind)
                {
                    pending.retain(|x| *x != h);
                }
                self.out.push_back(ServerOutput::Cancelled {
                    handle: h,
                    reason: CancelReason::Shutdown,
                });
            }
        }
        let conns: Vec<ExchangeId> = self.streams.exchange_ids();
        for conn in conns {
            let head_sent = match self.streams.exchange(&conn).map(|e| &e.state) {
                Some(ExchangeState::Attached(l)) => self
                    .streams
                    .stream(l)
                    .is_some_and(|l| l.phase() != Phase::Pending),
                _ => false,
            };
            self.remove_exchange(conn);
            if head_sent {
                self.out
                    .push_back(ServerOutput::ResponseEnd { stream: conn });
            } else {
                let mut headers = HeaderMap::new();
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(mime::APPLICATION_JSON),
                );
                let body = error_body(None, -32000, "the server is shutting down");
                self.answer(conn, StatusCode::SERVICE_UNAVAILABLE, headers, Some(body));
            }
        }
        let streams: Vec<u64> = self.streams.stream_ids();
        for l in streams {
            if let Some(ls) = self.streams.stream_mut(&l) {
                ls.connection = None;
            }
            self.drop_stream(l);
        }
        let outbound: Vec<OutboundId> = self.outbound.keys().copied().collect();
        for id in outbound {
            self.forget_outbound(id);
            self.out.push_back(ServerOutput::ServerRequestFailed {
                request: id,
                error: ServerRequestError::SessionClosed,
            });
        }
        self.shrink_tables();
    }

    /// Gives back table capacity once most of it is unused (after a burst of sessions).
    fn shrink_tables(&mut self) {
        self.sessions.shrink();
        self.streams.shrink();
        if self.inflight.capacity() > 64 && self.inflight.len() * 4 < self.inflight.capacity() {
            self.inflight.shrink_to_fit();
        }
    }

    // ---- routing ------------------------------------------------------------------------

    fn route(
        &mut self,
        target: Target,
        payload: Bytes,
        request: Option<OutboundId>,
    ) -> Result<Delivery, SendError> {
        match target {
            Target::Request(h) => {
                let lsid = self
                    .inflight
                    .get(&h)
                    .ok_or(SendError::UnknownHandle)?
                    .stream;
                self.send_related(lsid, payload, request)
            }
            Target::Session(s) => self.send_unrelated(s, payload, request),
        }
    }

    fn send_related(
        &mut self,
        lsid: u64,
        payload: Bytes,
        request: Option<OutboundId>,
    ) -> Result<Delivery, SendError> {
        let ls = self.streams.stream(&lsid).ok_or(SendError::UnknownHandle)?;
        match ls.phase() {
            Phase::Pending => {
                // A modern stream in SSE mode waits Pending too (its head may still become an
                // error status), and upgrades here.
                let can_upgrade = (self.config.response_mode == ResponseMode::Auto
                    || (ls.modern && self.config.response_mode == ResponseMode::Sse))
                    && ls.accept_sse;
                if can_upgrade {
                    self.upgrade(lsid);
                    self.write_event(lsid, payload);
                    return Ok(Delivery::RequestStream);
                }
                let session = ls.session.ok_or(SendError::JsonModeUndeliverable)?;
                self.send_unrelated(session, payload, request)?;
                self.out
                    .push_back(ServerOutput::Event(ServerEvent::Rerouted { session }));
                Ok(Delivery::Rerouted)
            }
            Phase::Open => {
                self.write_event(lsid, payload);
                Ok(Delivery::RequestStream)
            }
            Phase::Detached => {
                self.write_event(lsid, payload);
                Ok(Delivery::StoredForResume)
            }
            Phase::Finished | Phase::Done => Err(SendError::UnknownHandle),
        }
    }

    fn send_unrelated(
        &mut self,
        session: SessionHandle,
        payload: Bytes,
        request: Option<OutboundId>,
    ) -> Result<Delivery, SendError> {
        if self.config.stateless {
            return Err(SendError::Stateless);
        }
        if !self.sessions.contains(&session) {
            return Err(SendError::UnknownSession);
        }
        if self.publish(session, payload.clone()) {
            return Ok(Delivery::Published);
        }
        let s = self
            .sessions
            .get_mut(&session)
            .ok_or(SendError::UnknownSession)?;
        if let Some(lsid) = s.listen
            && let Some(ls) = self.streams.stream(&lsid)
        {
            // The GET stream is as durable as a request stream: while its connection is
            // away, messages are stored under its event ids for the resume.
            let delivery = match (ls.connection.is_some(), ls.resumable) {
                (true, _) => Some(Delivery::ListenStream),
                (false, true) => Some(Delivery::StoredForResume),
                (false, false) => None,
            };
            if let Some(delivery) = delivery {
                self.write_event(lsid, payload);
                return Ok(delivery);
            }
        }
        let fx = &mut Router::fx(self.now, &mut self.timers, &mut self.out);
        self.sessions
            .enqueue(session, Queued { payload, request }, &self.config, fx)
    }

    // ---- streams ------------------------------------------------------------------------

    pub(crate) fn sse_head(&self, ls: &LogicalStream) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(mime::TEXT_EVENT_STREAM),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert(
            mcp_header::X_ACCEL_BUFFERING,
            HeaderValue::from_static("no"),
        );
        self.session_header(ls, &mut headers);
        self.config.cors_headers(ls.origin.as_deref(), &mut headers);
        headers
    }

    fn session_header(&self, ls: &LogicalStream, headers: &mut HeaderMap) {
        if let StreamKind::Request {
            initialize: true, ..
        } = ls.kind
        {
            let id = ls
                .session
                .and_then(|s| self.sessions.get(&s))
                .map(|s| &*s.id);
            if let Some(v) = id.and_then(|id| HeaderValue::from_str(id).ok()) {
                headers.insert(mcp_header::MCP_SESSION_ID, v);
            }
        }
    }

    /// Pending → Open: the SSE head, the priming event, then the responses kept so far.
    pub(crate) fn upgrade(&mut self, lsid: u64) {
        let Some(ls) = self.streams.stream(&lsid) else {
            return;
        };
        // Only a pending stream sends a head (the table's other Upgrade rows change nothing).
        if ls.phase() != Phase::Pending {
            return;
        }
        let headers = self.sse_head(ls);
        let Some(ls) = self.streams.stream_mut(&lsid) else {
            return;
        };
        ls.step(StreamEvent::Upgrade);
        let kept = match &mut ls.kind {
            StreamKind::Request { kept, .. } => std::mem::take(kept),
            StreamKind::Listen | StreamKind::Remote { .. } => Vec::new(),
        };
        let Some(conn) = ls.connection else { return };
        self.out.push_back(ServerOutput::ResponseHead {
            stream: conn,
            status: StatusCode::OK,
            headers,
        });
        self.out
            .push_back(ServerOutput::Event(ServerEvent::Upgraded { stream: conn }));
        self.prime(lsid);
        for payload in kept {
            self.write_event(lsid, payload);
        }
        self.arm_heartbeat(conn);
    }

    // S-POST-19, G-3.
    /// The priming event, for clients that understand it.
    fn prime(&mut self, lsid: u64) {
        let retry = self.config.streams.retry_interval;
        let Some(ls) = self.streams.stream_mut(&lsid) else {
            return;
        };
        if !(ls.resumable && ls.version.allows_priming()) {
            return;
        }
        let Some(conn) = ls.connection else { return };
        ls.id_sent = true;
        let seq = ls.last_seq;
        let frame = priming_frame(&self.config.stream_event_id(lsid, seq), retry);
        if self.gate_event(lsid, 0, frame.clone(), None) {
            return; // written once the store registered the stream
        }
        self.send_chunk(conn, frame, true);
    }

    /// Writes one message as an SSE event (stored when resumable).
    pub(crate) fn write_event(&mut self, lsid: u64, payload: Bytes) {
        self.write_event_answering(lsid, payload, None);
    }

    /// [`write_event`](Router::write_event) of the answer to the client's request `answers`.
    pub(crate) fn write_event_answering(
        &mut self,
        lsid: u64,
        payload: Bytes,
        answers: Option<RequestId>,
    ) {
        let Some(ls) = self.streams.stream_mut(&lsid) else {
            return;
        };
        let id = if ls.resumable {
            ls.last_seq += 1;
            let seq = ls.last_seq;
            Some(self.config.stream_event_id(lsid, seq))
        } else {
            None
        };
        let Some(ls) = self.streams.stream_mut(&lsid) else {
            return;
        };
        let frame = event_frame(id.as_deref(), &payload);
        let seq = ls.last_seq;
        if id.is_some() && self.gate_event(lsid, seq, frame.clone(), Some((payload, answers))) {
            return; // stored in the cluster first, written once committed
        }
        let Some(ls) = self.streams.stream_mut(&lsid) else {
            return;
        };
        if id.is_some() {
            let sid = ls
                .session
                .and_then(|s| self.sessions.get(&s))
                .map(|s| &s.id);
            if let Some(sid) = sid {
                self.config
                    .event_store
                    .append(sid, lsid, ls.last_seq, frame.clone());
            }
        }
        if let Some(conn) = ls.connection {
            if id.is_some() {
                ls.id_sent = true;
            }
            self.write_raw(conn, frame);
        }
    }

    /// A live chunk on an SSE connection (paced: see `pace.rs`).
    pub(super) fn write_raw(&mut self, conn: ExchangeId, chunk: Bytes) {
        self.send_chunk(conn, chunk, true);
    }

    /// A chunk for `conn` ([`Streams::send_chunk`](super::stream::Streams::send_chunk));
    /// cuts the connection when the slow-reader rule says so.
    pub(crate) fn send_chunk(&mut self, conn: ExchangeId, chunk: Bytes, live: bool) {
        let fx = &mut Router::fx(self.now, &mut self.timers, &mut self.out);
        if self.streams.send_chunk(conn, chunk, live, &self.config, fx) == Sent::CutSlowReader {
            self.cut_slow_reader(conn);
        }
    }

    /// Ends `conn`'s response after whatever it still has to write
    /// ([`Streams::let_go`](super::stream::Streams::let_go)).
    pub(crate) fn end_exchange(&mut self, conn: ExchangeId) {
        let fx = &mut Router::fx(self.now, &mut self.timers, &mut self.out);
        if self.streams.let_go(conn, fx) == LetGo::Ended {
            self.remove_exchange(conn);
        }
    }

    /// The slow-reader rule fired (see `pace.rs`): abort the connection, then treat it as
    /// the client's disconnect.
    pub(super) fn cut_slow_reader(&mut self, conn: ExchangeId) {
        self.out
            .push_back(ServerOutput::ResponseAbort { stream: conn });
        self.out
            .push_back(ServerOutput::Event(ServerEvent::SlowReader {
                stream: conn,
            }));
        self.disconnected(conn);
    }

    pub(super) fn arm_heartbeat(&mut self, conn: ExchangeId) {
        let fx = &mut Router::fx(self.now, &mut self.timers, &mut self.out);
        self.streams.arm_heartbeat(conn, &self.config, fx);
    }

    /// A response for `handle` on its stream; finishes the stream when it was the last.
    fn write_response(
        &mut self,
        lsid: u64,
        handle: RequestHandle,
        payload: Bytes,
        answered: RequestId,
    ) {
        let Some(ls) = self.streams.stream_mut(&lsid) else {
            return;
        };
        if let StreamKind::Request { pending, .. } = &mut ls.kind {
            pending.retain(|h| *h != handle);
        }
        let last = ls.all_answered();
        match ls.phase() {
            Phase::Pending => {
                if let StreamKind::Request { kept, .. } = &mut ls.kind {
                    kept.push(payload);
                }
                // A modern answer that is not an error status goes out as SSE when the mode
                // or the client asks for it (legacy streams were upgraded at once instead).
                let sse = self.config.response_mode == ResponseMode::Sse || ls.sse_only;
                if ls.modern && last && ls.error_status.is_none() && sse && ls.accept_sse {
                    self.upgrade(lsid);
                }
            }
            Phase::Open | Phase::Detached => {
                self.write_event_answering(lsid, payload, Some(answered))
            }
            Phase::Finished | Phase::Done => return,
        }
        let Some(ls) = self.streams.stream(&lsid) else {
            return;
        };
        match (last, ls.phase().on(StreamEvent::LastResponse)) {
            (true, Some(Phase::Done)) => self.finish_json(lsid),
            (true, Some(Phase::Finished)) => self.finish_sse(lsid),
            _ => {}
        }
    }

    /// Pending → Done: one JSON body (an array for a batch).
    fn finish_json(&mut self, lsid: u64) {
        let Some(ls) = self.streams.stream(&lsid) else {
            return;
        };
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(mime::APPLICATION_JSON),
        );
        self.session_header(ls, &mut headers);
        self.config.cors_headers(ls.origin.as_deref(), &mut headers);
        let body = match &ls.kind {
            StreamKind::Request { kept, batch, .. } => match (kept.as_slice(), *batch) {
                ([one], false) => one.clone(),
                (all, _) => join_array(all),
            },
            StreamKind::Listen | StreamKind::Remote { .. } => return,
        };
        let status = ls.error_status.unwrap_or(StatusCode::OK);
        if let Some(conn) = ls.connection {
            self.answer(conn, status, headers, Some(body));
            self.remove_exchange(conn);
        }
        self.drop_stream(lsid);
    }

    /// Open/Detached → Finished: the connection ends; kept for replay when it had ids.
    fn finish_sse(&mut self, lsid: u64) {
        let retention = self.config.streams.finished_stream_retention;
        let Some(ls) = self.streams.stream_mut(&lsid) else {
            return;
        };
        // Called for an Open or Detached stream (a pending one is upgraded first).
        let next = ls.step(StreamEvent::LastResponse);
        debug_assert_eq!(next, Some(Phase::Finished));
        self.timers.clear(&mut ls.grace, Timer::ResumeGrace(lsid));
        let keep = ls.resumable && ls.last_seq > 0;
        if self.end_stream_in_cluster(lsid) {
            // The connection ends once its last frames are committed and written.
        } else if let Some(conn) = self
            .streams
            .stream_mut(&lsid)
            .and_then(|l| l.connection.take())
        {
            self.end_exchange(conn);
        }
        if keep {
            let Some(ls) = self.streams.stream_mut(&lsid) else {
                return;
            };
            let at = self.now + retention;
            self.timers
                .set(&mut ls.retention, Timer::Retention(lsid), at);
        } else {
            self.drop_stream(lsid);
        }
    }

    /// Opens (or takes over) the session's GET stream: the priming event, then what was
    /// stored since its last connection went away (the client cannot have seen it), then the
    /// session's queue (messages from before any GET).
    pub(crate) fn open_listen(
        &mut self,
        conn: ExchangeId,
        session: SessionHandle,
        origin: Option<Box<str>>,
    ) {
        self.open_listen_from(conn, session, origin, FollowFrom::Cursor);
    }

    /// [`open_listen`](Router::open_listen); in a cluster the stream follows the session's
    /// listen log from `from` (the log's cursor for a plain GET).
    pub(crate) fn open_listen_from(
        &mut self,
        conn: ExchangeId,
        session: SessionHandle,
        origin: Option<Box<str>>,
        from: FollowFrom,
    ) {
        let Some(s) = self.sessions.get(&session) else {
            return;
        };
        let version = s.version;
        let existing = s.listen.filter(|l| self.streams.has_stream(l));
        let lsid = match existing {
            Some(l) => l,
            None => {
                let l = self.next();
                let ls = LogicalStream::new(
                    Some(session),
                    StreamKind::Listen,
                    Phase::Detached,
                    self.config.streams.resumability,
                    version,
                );
                self.streams.insert_stream(l, ls);
                if let Some(s) = self.sessions.get_mut(&session) {
                    s.listen = Some(l);
                    s.work.streams.push(l);
                }
                l
            }
        };
        if self.is_clustered() {
            self.attach(conn, session, lsid, origin);
            return self.follow_listen(session, lsid, from);
        }
        let unseen = self
            .streams
            .stream(&lsid)
            .filter(|ls| ls.resumable && ls.connection.is_none() && ls.last_seq > ls.detached_seq)
            .map(|ls| ls.detached_seq);
        self.attach(conn, session, lsid, origin);
        self.prime(lsid);
        if let Some(after) = unseen {
            self.replay(conn, session, lsid, after);
        }
        self.flush_queue(session);
    }

    /// GET + `Last-Event-ID`: attach `conn` to `lsid` and replay what followed `seq`.
    pub(crate) fn resume(
        &mut self,
        conn: ExchangeId,
        session: SessionHandle,
        lsid: u64,
        seq: u64,
        origin: Option<Box<str>>,
    ) {
        self.attach(conn, session, lsid, origin);
        self.replay(conn, session, lsid, seq);
        let Some(ls) = self.streams.stream_mut(&lsid) else {
            return;
        };
        if ls.phase() == Phase::Finished {
            ls.connection = None;
            self.end_exchange(conn);
        } else if matches!(ls.kind, StreamKind::Listen) {
            self.flush_queue(session);
        }
    }

    /// Writes the stored events of `lsid` after `seq` on `conn`, paced by the client's
    /// reading. When some were evicted, an `events-lost` event (no id, so the client's
    /// `Last-Event-ID` stays where it is) comes first, naming the id the client gave, so it
    /// can tell that messages are missing (ordinary clients ignore the event type).
    fn replay(&mut self, conn: ExchangeId, session: SessionHandle, lsid: u64, seq: u64) {
        let Some(sid) = self.sessions.get(&session).map(|s| s.id.clone()) else {
            return;
        };
        let (events, gap) = match self.config.event_store.replay_after(&sid, lsid, seq) {
            Replay::Complete(e) => (e, false),
            Replay::Gap(e) => (e, true),
            Replay::Unknown => (Vec::new(), false),
        };
        self.out
            .push_back(ServerOutput::Event(ServerEvent::Resumed {
                stream: conn,
                replayed: events.len(),
                gap,
            }));
        if gap {
            let id = self.config.stream_event_id(lsid, seq);
            self.send_chunk(conn, events_lost_frame(&id), false);
        }
        for e in events {
            self.send_chunk(conn, e.frame, false);
        }
    }

    /// Binds `conn` to the logical stream, ending a previous connection (takeover).
    fn attach(
        &mut self,
        conn: ExchangeId,
        session: SessionHandle,
        lsid: u64,
        origin: Option<Box<str>>,
    ) {
        let Some(ls) = self.streams.stream_mut(&lsid) else {
            return;
        };
        let old = ls.connection.replace(conn);
        ls.step(StreamEvent::Attach);
        ls.origin = origin;
        self.timers.clear(&mut ls.grace, Timer::ResumeGrace(lsid));
        self.streams.insert_exchange(
            conn,
            Exchange::new(ExchangeState::Attached(lsid), Some(session)),
        );
        if let Some(s) = self.sessions.get_mut(&session) {
            s.open_connections += 1;
        }
        if let Some(old) = old {
            self.out
                .push_back(ServerOutput::ResponseEnd { stream: old });
            self.remove_exchange(old);
            self.out
                .push_back(ServerOutput::Event(ServerEvent::ConnectionReplaced {
                    session,
                    old,
                    new: conn,
                }));
        }
        let Some(ls) = self.streams.stream(&lsid) else {
            return;
        };
        let headers = self.sse_head(ls);
        self.out.push_back(ServerOutput::ResponseHead {
            stream: conn,
            status: StatusCode::OK,
            headers,
        });
        self.arm_heartbeat(conn);
    }

    fn flush_queue(&mut self, session: SessionHandle) {
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        let Some(lsid) = s.listen else { return };
        if s.work.queue.is_empty() {
            return;
        }
        let queue = std::mem::take(&mut s.work.queue);
        s.shrink();
        for q in queue {
            self.write_event(lsid, q.payload);
        }
    }

    /// Forgets an exchange (its heartbeat too); the session is no longer busy with it.
    pub(crate) fn remove_exchange(&mut self, conn: ExchangeId) {
        if let Some(ex) = self.streams.remove_exchange(conn, &mut self.timers)
            && let Some(h) = ex.session
        {
            if let Some(s) = self.sessions.get_mut(&h) {
                s.open_connections = s.open_connections.saturating_sub(1);
            }
            self.session_step(h, SessionEvent::Activity);
        }
    }

    /// Forgets a logical stream, its connection, timers and stored events.
    pub(crate) fn drop_stream(&mut self, lsid: u64) {
        let Some(mut ls) = self.streams.remove_stream(lsid, &mut self.timers) else {
            return;
        };
        if let Some(conn) = ls.connection.take() {
            self.end_exchange(conn);
        }
        if let Some(s) = ls.session.and_then(|s| self.sessions.get_mut(&s)) {
            if let Some(w) = s.work.get_mut() {
                w.streams.retain(|x| *x != lsid);
            }
            if s.listen == Some(lsid) {
                s.listen = None;
            }
            if ls.resumable && ls.last_seq > 0 {
                self.config.event_store.remove_stream(&s.id, lsid);
            }
            s.shrink();
        }
    }

    /// Cancels every request still owed on a stream.
    pub(crate) fn cancel_stream_handlers(&mut self, lsid: u64, reason: CancelReason) {
        let pending = match self.streams.stream(&lsid).map(|l| &l.kind) {
            Some(StreamKind::Request { pending, .. }) => pending.clone(),
            _ => return,
        };
        for h in pending {
            self.cancel_handle(h, reason);
        }
    }

    // S-CANCEL-3.
    /// Cancels one handler; its exchange ends without a JSON-RPC response.
    pub(crate) fn cancel_handle(&mut self, handle: RequestHandle, reason: CancelReason) {
        let Some(f) = self.inflight.remove(&handle) else {
            return;
        };
        if let Some(s) = f.session.and_then(|s| self.sessions.get_mut(&s)) {
            if let Some(w) = s.work.get_mut() {
                w.inflight.remove(&f.client_id);
            }
            s.shrink();
        }
        self.out
            .push_back(ServerOutput::Cancelled { handle, reason });
        let Some(ls) = self.streams.stream_mut(&f.stream) else {
            return;
        };
        if let StreamKind::Request { pending, .. } = &mut ls.kind {
            pending.retain(|h| *h != handle);
        }
        if !ls.all_answered() || reason == CancelReason::SessionClosed {
            return;
        }
        match ls.phase() {
            Phase::Pending => {
                let has_kept =
                    matches!(&ls.kind, StreamKind::Request { kept, .. } if !kept.is_empty());
                if has_kept {
                    self.finish_json(f.stream);
                } else if ls.accept_sse {
                    self.upgrade(f.stream);
                    self.finish_sse(f.stream);
                } else {
                    let body = error_body(Some(f.client_id), -32800, "request cancelled");
                    if let StreamKind::Request { kept, .. } = &mut ls.kind {
                        kept.push(body);
                    }
                    self.finish_json(f.stream);
                }
            }
            Phase::Open | Phase::Detached => self.finish_sse(f.stream),
            Phase::Finished | Phase::Done => {}
        }
    }

    /// Removes a pending server→client request from every table.
    pub(crate) fn forget_outbound(&mut self, id: OutboundId) {
        if let Some(mut o) = self.outbound.remove(&id) {
            self.timers
                .clear(&mut o.deadline, Timer::RequestDeadline(id));
            if let Some(s) = self.sessions.get_mut(&o.session) {
                if let Some(w) = s.work.get_mut() {
                    w.outbound.retain(|x| *x != id);
                }
                s.shrink();
            }
        }
    }

    // S-CANCEL-1, S-LIFE-12.
    /// Forgets a request we give up on: unsent ones leave the queue, sent ones get
    /// `notifications/cancelled`.
    pub(super) fn abandon_outbound(&mut self, id: OutboundId, reason: &str) {
        let Some(session) = self.outbound.get(&id).map(|o| o.session) else {
            return;
        };
        self.forget_outbound(id);
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        let before = s.work.queue.len();
        if let Some(w) = s.work.get_mut() {
            w.queue.retain(|q| q.request != Some(id));
        }
        if s.work.queue.len() != before {
            s.shrink();
            return;
        }
        let Some(wire_id) = self.config.outbound_wire_id(id.0) else {
            return;
        };
        let params = serde_json::json!({ "requestId": wire_id, "reason": reason });
        let params = serde_json::value::to_raw_value(&params).ok();
        let payload = Message::Notification(Notification {
            method: "notifications/cancelled".into(),
            params,
        })
        .to_bytes();
        let _ = self.send_unrelated(session, payload, None);
    }

    /// Ends a session and frees everything it held.
    pub(crate) fn end_session(&mut self, handle: SessionHandle, reason: CloseReason) {
        self.end_session_as(handle, Some(reason));
    }

    /// Ends a session (`Some(reason)`) or, in a cluster, only forgets this instance's copy of
    /// it (`None`: it lives on in the store), freeing everything it held here.
    pub(crate) fn end_session_as(&mut self, handle: SessionHandle, reason: Option<CloseReason>) {
        let Some(mut s) = self.sessions.remove(handle, &mut self.timers) else {
            return;
        };
        self.forget_session_rate(handle);
        let work = s.work.take();
        for (_, h) in work.inflight {
            if self.inflight.remove(&h).is_some() {
                self.out.push_back(ServerOutput::Cancelled {
                    handle: h,
                    reason: CancelReason::SessionClosed,
                });
            }
        }
        for id in work.outbound {
            if let Some(mut o) = self.outbound.remove(&id) {
                self.timers
                    .clear(&mut o.deadline, Timer::RequestDeadline(id));
                self.out.push_back(ServerOutput::ServerRequestFailed {
                    request: id,
                    error: ServerRequestError::SessionClosed,
                });
            }
        }
        for lsid in work.streams {
            if let Some(mut ls) = self.streams.remove_stream(lsid, &mut self.timers) {
                if let Some(follow) = ls.follow.take() {
                    self.forget_follow(follow);
                }
                if let Some(conn) = ls.connection
                    && self
                        .streams
                        .remove_exchange(conn, &mut self.timers)
                        .is_some()
                {
                    self.end_connection(conn, &ls);
                }
            }
        }
        // Exchanges still reading a body for this session answer 404 at their end.
        let reading: Vec<ExchangeId> = self
            .streams
            .iter_exchanges()
            .filter(|(_, e)| e.session == Some(handle))
            .map(|(k, _)| *k)
            .collect();
        for conn in reading {
            if let Some(ex) = self.streams.exchange_mut(&conn) {
                ex.session = None;
            }
        }
        self.config.event_store.remove_session(&s.id);
        self.out.push_back(match reason {
            Some(reason) => ServerOutput::SessionClosed {
                session: handle,
                reason,
            },
            None => ServerOutput::SessionUnloaded { session: handle },
        });
        self.shrink_tables();
    }

    // S-POST-14.
    /// Ends a connection whose session just closed: a pending JSON answer still gets a
    /// well-formed (error) response; an SSE stream just ends.
    fn end_connection(&mut self, conn: ExchangeId, ls: &LogicalStream) {
        if ls.phase() == Phase::Pending {
            let mut headers = HeaderMap::new();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(mime::APPLICATION_JSON),
            );
            let body = error_body(None, -32000, "the session was closed");
            self.answer(conn, StatusCode::NOT_FOUND, headers, Some(body));
        } else {
            self.out
                .push_back(ServerOutput::ResponseEnd { stream: conn });
        }
    }
}
