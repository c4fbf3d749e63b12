//! The facade's internals: building intents, running the sub-machines and applying their
//! effects, routing server messages, and the session's lifecycle (initialize, expiry,
//! re-initialization, close). The machines' tables are in their own modules: `lifecycle.rs`
//! (the phase), `request.rs`, `post.rs` and `listen.rs`.

use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method};

use super::lifecycle::PhaseEvent;
use super::per_request::{self, DISCOVER, SUBSCRIPTIONS_LISTEN, Verdict};
use super::*;
use crate::jsonrpc::{Notification, Outcome, Request};

impl ClientSession {
    pub(super) fn event(&mut self, e: ClientEvent) {
        self.out.push_back(Output::Event(e));
    }

    pub(super) fn alloc(&mut self) -> StreamId {
        let s = StreamId(self.next_stream);
        self.next_stream += 1;
        s
    }

    pub(super) fn check_queue(&mut self) -> Result<(), ApiMisuse> {
        let limit = self.limits.max_queued_messages;
        if self.pending.len() >= limit {
            self.event(ClientEvent::LimitExceeded {
                stream: None,
                limit: Limit::QueuedMessages,
            });
            return Err(ApiMisuse::QueueFull { limit });
        }
        Ok(())
    }

    // G-9.
    /// POSTs now if ready, queues otherwise.
    pub(super) fn dispatch(
        &mut self,
        bytes: Bytes,
        purpose: Purpose,
        rpc_method: Option<Box<str>>,
    ) -> Result<SendReceipt, ApiMisuse> {
        if self.phase == Phase::Ready {
            return Ok(SendReceipt::Posted(
                self.post_message(bytes, purpose, rpc_method),
            ));
        }
        if let Err(e) = self.check_queue() {
            if let Purpose::Request(id) = &purpose {
                self.requests.remove(id);
            }
            return Err(e);
        }
        self.pending.push_back(Pending {
            bytes,
            purpose,
            rpc_method,
            auth_tries: 0,
        });
        Ok(SendReceipt::Queued)
    }

    /// Emits the POST of one message and starts its sub-machine.
    pub(super) fn post_message(
        &mut self,
        bytes: Bytes,
        purpose: Purpose,
        rpc_method: Option<Box<str>>,
    ) -> StreamId {
        let is_init =
            matches!(purpose, Purpose::Request(_)) && rpc_method.as_deref() == Some(INITIALIZE);
        let original = bytes.clone();
        let (mut headers, carried) = self.build_headers(
            HttpRequestKind::Post,
            &Method::POST,
            rpc_method.as_deref(),
            !is_init,
            None,
        );
        let bytes = match self.version.filter(|v| !v.has_sessions()) {
            Some(v) => {
                let bytes = per_request::with_meta(&bytes, v, &self.identity).unwrap_or(bytes);
                self.mirror(&bytes, &mut headers);
                bytes
            }
            None => bytes,
        };
        let stream = self.alloc();
        self.out.push_back(Output::Http(HttpRequest {
            stream,
            kind: HttpRequestKind::Post,
            method: Method::POST,
            headers,
            body: bytes,
        }));
        if let Purpose::Request(id) = &purpose
            && let Some(r) = self.requests.get_mut(id)
        {
            r.step(ReqEvent::Posted { stream });
            r.epoch = self.epoch;
        }
        let resumable = self.legacy();
        let mut p = PostStream::new(purpose, carried, self.epoch, is_init, resumable);
        // Kept for a re-send: after an authorization (the hold) or a 429.
        p.sent = Some((original, rpc_method, 0));
        self.posts.insert(stream, Box::new(p));
        stream
    }

    /// POSTs a queued message, keeping its count of re-sends after authorization.
    pub(super) fn post_pending(&mut self, p: Pending) {
        let s = self.post_message(p.bytes, p.purpose, p.rpc_method);
        if let Some((_, _, tries)) = self.posts.get_mut(&s).and_then(|p| p.sent.as_mut()) {
            *tries = p.auth_tries;
        }
    }

    // G-6.
    /// Every header of a request. Protocol headers are set last and win over static and
    /// callback headers. `with_session` is false only for `initialize`.
    pub(super) fn build_headers(
        &mut self,
        kind: HttpRequestKind,
        method: &Method,
        rpc_method: Option<&str>,
        with_session: bool,
        last_event_id: Option<&str>,
    ) -> (HeaderMap, Option<Box<str>>) {
        let mut h = self.static_headers.clone();
        let session = if with_session {
            self.session.clone()
        } else {
            None
        };
        if let Some(f) = self.header_fn.as_mut() {
            f(
                &HeaderContext {
                    kind,
                    method,
                    rpc_method,
                    session_id: session.as_deref(),
                },
                &mut h,
            );
        }
        let provided = self.bearer.as_mut().and_then(|p| p());
        let token = match provided {
            Some(t) => match HeaderValue::try_from(format!("Bearer {t}")) {
                Ok(v) => Some(v),
                Err(_) => {
                    self.event(ClientEvent::InvalidBearerToken);
                    self.token.clone()
                }
            },
            None => self.token.clone(),
        };
        if let Some(t) = token {
            h.insert(AUTHORIZATION, t);
        }
        if let Some(d) = &self.dpop {
            // RFC 9449 §7.1: the DPoP scheme and a fresh proof for this request.
            let request = crate::dpop::DpopRequest {
                method: method.as_str(),
                url: &d.url,
                access_token: Some(&d.token),
                nonce: d.nonce.as_deref(),
            };
            match d.signer.proof(&request).map(HeaderValue::try_from) {
                Ok(Ok(proof)) => {
                    h.insert(AUTHORIZATION, d.header.clone());
                    h.insert(http::HeaderName::from_static("dpop"), proof);
                }
                _ => self.event(ClientEvent::InvalidBearerToken),
            }
        }
        match kind {
            HttpRequestKind::Post => {
                h.insert(ACCEPT, HeaderValue::from_static(mime::POST_ACCEPT));
                h.insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static(mime::APPLICATION_JSON),
                );
            }
            HttpRequestKind::Listen | HttpRequestKind::Resume => {
                h.insert(ACCEPT, HeaderValue::from_static(mime::TEXT_EVENT_STREAM));
                h.remove(CONTENT_TYPE);
            }
            HttpRequestKind::Delete | HttpRequestKind::Authorization => {}
        }
        let sid = HeaderName::from_static(header::MCP_SESSION_ID);
        let ver = HeaderName::from_static(header::MCP_PROTOCOL_VERSION);
        let lei = HeaderName::from_static(header::LAST_EVENT_ID);
        h.remove(&sid);
        h.remove(&ver);
        h.remove(&lei);
        let mut carried = None;
        if let Some(s) = session
            && let Ok(v) = HeaderValue::from_str(&s)
        {
            h.insert(sid, v);
            carried = Some(s);
        }
        if with_session && let Some(v) = self.version {
            h.insert(ver, HeaderValue::from_static(v.as_str()));
        }
        if let Some(id) = last_event_id.and_then(|i| HeaderValue::from_str(i).ok()) {
            h.insert(lei, id);
        }
        (h, carried)
    }

    // ------------------------------------------------------------------ POST machines

    pub(super) fn run_post(&mut self, now: Instant, stream: StreamId, input: PostInput<'_>) {
        let Some(p) = self.posts.get_mut(&stream) else {
            return;
        };
        let mut fx = Vec::new();
        let mut ctx = PostCtx {
            now,
            limits: &self.limits,
            backoff: &mut self.backoff,
            max_resume_failures: self.max_resume_failures,
            rate_retry: self.rate_limit_retry,
        };
        p.handle(input, &mut ctx, &mut fx);
        for e in fx {
            self.apply_post(now, stream, e);
        }
    }

    fn apply_post(&mut self, now: Instant, stream: StreamId, effect: PostEffect) {
        match effect {
            PostEffect::Accepted => {
                if self.posts.get(&stream).map(|p| &p.purpose) == Some(&Purpose::Initialized) {
                    self.step(now, PhaseEvent::Acknowledged(Ok(())));
                }
            }
            PostEffect::Payloads(list) => {
                for b in list {
                    self.route(now, stream, &b, false);
                }
            }
            PostEffect::JsonBody(b) => {
                self.route(now, stream, &b, true);
                if let Some(id) = self.own_request(stream) {
                    self.fail_from_stream(now, stream, &id, ServerFault::MissingResponse.into());
                }
            }
            PostEffect::Failed(err) => self.on_post_failed(now, stream, err),
            PostEffect::SessionNotFound => self.on_post_not_found(now, stream),
            PostEffect::AuthRequired { status, challenge } => {
                self.event(ClientEvent::AuthorizationRequired {
                    stream,
                    status,
                    challenge: challenge.clone(),
                });
                self.hold_for_authorization(stream, status, challenge);
            }
            PostEffect::Limit(limit) => self.event(ClientEvent::LimitExceeded {
                stream: Some(stream),
                limit,
            }),
            PostEffect::EventsLost => {
                if let Some(id) = self.posts.get(&stream).and_then(|p| p.request_id()) {
                    let e = ClientEvent::EventsLost {
                        role: StreamRole::Request(id.clone()),
                        stream,
                    };
                    self.event(e);
                }
            }
            PostEffect::ScheduleResume {
                at,
                delay,
                attempt,
                server_retry,
            } => {
                if let Some(id) = self
                    .posts
                    .get(&stream)
                    .and_then(|p| p.request_id())
                    .cloned()
                {
                    self.event(ClientEvent::Reconnecting {
                        role: StreamRole::Request(id),
                        at,
                        delay,
                        attempt,
                        server_retry,
                    });
                }
            }
            PostEffect::Resume => self.resume_post(now, stream),
            PostEffect::RateLimited {
                at,
                delay,
                attempt,
                retry_after,
            } => {
                let request = self
                    .posts
                    .get(&stream)
                    .and_then(|p| p.request_id())
                    .cloned();
                // Not processed by the server: the request waits as queued, so a cancel or a
                // timeout in the meantime ends it without a `notifications/cancelled`.
                if let Some(r) = request.as_ref().and_then(|id| self.requests.get_mut(id))
                    && r.state == (ReqState::Sent { stream })
                {
                    r.step(ReqEvent::Requeued);
                }
                self.event(ClientEvent::RateLimited {
                    stream,
                    request,
                    at,
                    delay,
                    attempt,
                    retry_after,
                });
            }
            PostEffect::Resend => self.resend_rate_limited(stream),
            PostEffect::Resumed => {
                if let Some(p) = self.posts.get(&stream)
                    && let (Some(id), Some(last)) = (p.request_id(), p.last_event_id.as_ref())
                {
                    let e = ClientEvent::Resumed {
                        role: StreamRole::Request(id.clone()),
                        stream,
                        last_event_id: last.clone(),
                    };
                    self.event(e);
                }
            }
            PostEffect::Abort => self.out.push_back(Output::Abort(stream)),
            PostEffect::Finished => {
                self.posts.remove(&stream);
            }
        }
    }

    /// The 429 wait of `stream` is over: its message goes out again (same bytes, same JSON-RPC
    /// id), unless its request ended meanwhile or the session is closing.
    fn resend_rate_limited(&mut self, stream: StreamId) {
        let Some(p) = self.posts.get(&stream) else {
            return;
        };
        let Some((bytes, rpc_method, auth_tries)) = p.sent.clone() else {
            return;
        };
        let purpose = p.purpose.clone();
        let retries = p.rate_retries.saturating_add(1);
        if self.closing() {
            return;
        }
        if let Purpose::Request(id) = &purpose
            && self.requests.get(id).map(|r| r.state) != Some(ReqState::Queued)
        {
            return;
        }
        let handshake = matches!(purpose, Purpose::Initialized)
            || (matches!(purpose, Purpose::Request(_))
                && matches!(
                    rpc_method.as_deref(),
                    Some(INITIALIZE) | Some(per_request::DISCOVER)
                ));
        if self.phase != Phase::Ready && !handshake {
            self.pending.push_back(Pending {
                bytes,
                purpose,
                rpc_method,
                auth_tries,
            });
            return;
        }
        let s = self.post_message(bytes, purpose, rpc_method);
        if let Some(p) = self.posts.get_mut(&s) {
            p.rate_retries = retries;
            if let Some(sent) = p.sent.as_mut() {
                sent.2 = auth_tries;
            }
        }
    }

    /// The request served by `stream`, if it is still waiting on it.
    fn own_request(&self, stream: StreamId) -> Option<RequestId> {
        let id = self.posts.get(&stream)?.request_id()?;
        match self.requests.get(id)?.state {
            ReqState::Sent { stream: s } if s == stream => Some(id.clone()),
            _ => None,
        }
    }

    /// A request fails because of what happened on its stream (no abort: the machine owns the
    /// exchange's end).
    fn fail_from_stream(
        &mut self,
        now: Instant,
        stream: StreamId,
        id: &RequestId,
        err: ClientError,
    ) {
        let Some(req) = self.requests.get(id) else {
            return;
        };
        if req.state != (ReqState::Sent { stream }) {
            return;
        }
        if req.internal {
            self.internal_failed(now, id, err, false);
            return;
        }
        let was_init = &*req.method == INITIALIZE;
        let err = match err {
            // S-NEW-10: the probe said "not modern" and initialize has no endpoint either.
            ClientError::HttpStatus { status, .. }
                if was_init && self.fell_back && matches!(status.as_u16(), 400 | 404 | 405) =>
            {
                ClientError::LegacySseTransport { status }
            }
            ClientError::EndpointNotFound if was_init && self.fell_back => {
                ClientError::LegacySseTransport {
                    status: http::StatusCode::NOT_FOUND,
                }
            }
            other => other,
        };
        self.end_request(id, RequestResult::Failed(err), false);
        if was_init {
            self.step(now, PhaseEvent::InitializeFailed);
        }
    }

    fn on_post_failed(&mut self, now: Instant, stream: StreamId, err: ClientError) {
        let Some(p) = self.posts.get(&stream) else {
            return;
        };
        if p.held {
            return;
        }
        let err = match (p.auth_exhausted, err) {
            (Some(limit), ClientError::AuthorizationRequired { .. }) => {
                ClientError::Authorization(crate::auth::AuthError::RetryLimit { limit })
            }
            (_, err) => err,
        };
        match p.purpose.clone() {
            Purpose::Request(id) => {
                if p.answered {
                    return;
                }
                // A modern server explains a 4xx with a JSON-RPC error (S-NEW-7, S-NEW-9):
                // it is the request's response. The body is parsed once.
                let answer = match &err {
                    ClientError::HttpStatus { body, .. }
                        if !self.legacy() && self.probe.as_ref() != Some(&id) =>
                    {
                        per_request::error_response(body)
                    }
                    _ => None,
                };
                let answered = answer.is_some();
                if let Some(r) = answer {
                    self.route_items(now, stream, vec![Ok(Message::Response(r))], true);
                    if self.own_request(stream).is_none() {
                        return;
                    }
                }
                // A modern session whose server now answers like a legacy one (a 400, 404 or
                // 405 without a JSON-RPC error): the cached era no longer holds; the next
                // session for the origin probes again (versioning.mdx: "re-probing if the
                // cached assumption later fails").
                if !self.legacy()
                    && self.probe.as_ref() != Some(&id)
                    && let ClientError::HttpStatus { status, .. } = &err
                    && matches!(status.as_u16(), 400 | 404 | 405)
                    && !answered
                    && matches!(self.known_era, Some(KnownEra::Modern(_)))
                {
                    self.set_known_era(None);
                }
                self.fail_from_stream(now, stream, &id, err);
            }
            Purpose::Notification(m) => self.event(ClientEvent::PostRejected {
                stream,
                method: Some(m),
                error: err,
            }),
            Purpose::Response => self.event(ClientEvent::PostRejected {
                stream,
                method: None,
                error: err,
            }),
            Purpose::Cancelled => self.event(ClientEvent::PostRejected {
                stream,
                method: Some("notifications/cancelled".into()),
                error: err,
            }),
            Purpose::Initialized => self.step(now, PhaseEvent::Acknowledged(Err(err))),
        }
    }

    fn on_post_not_found(&mut self, now: Instant, stream: StreamId) {
        let Some(p) = self.posts.get(&stream) else {
            return;
        };
        let purpose = p.purpose.clone();
        let resuming = p.is_resuming();
        let current = p.carried_session.is_some() && p.carried_session == self.session;
        if current {
            self.step(now, PhaseEvent::Expired);
        }
        match purpose {
            Purpose::Request(id) => {
                let Some(req) = self.requests.get_mut(&id) else {
                    return;
                };
                if req.state != (ReqState::Sent { stream }) {
                    return;
                }
                let can_retry = !matches!(
                    self.phase,
                    Phase::Uninitialized | Phase::Closing { .. } | Phase::Closed
                );
                if resuming || req.retried || req.internal || !can_retry {
                    self.fail_from_stream(now, stream, &id, ClientError::SessionExpired);
                    return;
                }
                req.retried = true;
                req.step(ReqEvent::Requeued);
                let bytes = req.bytes.clone();
                let method = req.method.clone();
                if self.phase == Phase::Ready {
                    self.post_message(bytes, Purpose::Request(id), Some(method));
                } else {
                    self.pending.push_back(Pending {
                        bytes,
                        purpose: Purpose::Request(id),
                        rpc_method: Some(method),
                        auth_tries: 0,
                    });
                }
            }
            Purpose::Notification(m) => self.event(ClientEvent::PostRejected {
                stream,
                method: Some(m),
                error: ClientError::SessionExpired,
            }),
            Purpose::Response => self.event(ClientEvent::PostRejected {
                stream,
                method: None,
                error: ClientError::SessionExpired,
            }),
            Purpose::Initialized | Purpose::Cancelled => {}
        }
    }

    fn resume_post(&mut self, now: Instant, old: StreamId) {
        let Some(mut p) = self.posts.remove(&old) else {
            return;
        };
        let Some(id) = p.request_id().cloned() else {
            return;
        };
        let waiting = matches!(
            self.requests.get(&id).map(|r| r.state),
            Some(ReqState::Sent { stream }) if stream == old
        );
        if !waiting {
            return;
        }
        if p.epoch != self.epoch {
            // The session this stream belonged to is gone: its events cannot be resumed.
            self.fail_from_stream_at(now, &id, old, ClientError::SessionExpired);
            return;
        }
        let stream = self.alloc();
        let (headers, carried) = self.build_headers(
            HttpRequestKind::Resume,
            &Method::GET,
            None,
            true,
            p.last_event_id.as_deref(),
        );
        p.carried_session = carried;
        self.out.push_back(Output::Http(HttpRequest {
            stream,
            kind: HttpRequestKind::Resume,
            method: Method::GET,
            headers,
            body: Bytes::new(),
        }));
        if let Some(r) = self.requests.get_mut(&id) {
            r.step(ReqEvent::Posted { stream });
        }
        self.posts.insert(stream, p);
    }

    fn fail_from_stream_at(
        &mut self,
        now: Instant,
        id: &RequestId,
        stream: StreamId,
        err: ClientError,
    ) {
        // The machine was already removed; fail as if it were still there.
        if let Some(r) = self.requests.get(id)
            && r.state == (ReqState::Sent { stream })
        {
            if r.internal {
                self.internal_failed(now, id, err, false);
            } else {
                self.end_request(id, RequestResult::Failed(err), false);
            }
        }
    }

    // ------------------------------------------------------------------ routing

    /// Parses one payload and routes every message in it.
    pub(super) fn route(&mut self, now: Instant, stream: StreamId, bytes: &[u8], json_post: bool) {
        let items = match wire::parse_incoming(bytes, self.version) {
            Ok(items) => items,
            Err(e) => {
                if json_post && let Some(id) = self.own_request(stream) {
                    self.fail_from_stream(now, stream, &id, e.into());
                    return;
                }
                self.event(ClientEvent::InvalidMessage {
                    stream,
                    error: e.into(),
                });
                return;
            }
        };
        self.route_items(now, stream, items, json_post);
    }

    /// Routes the messages of one parsed payload.
    fn route_items(
        &mut self,
        now: Instant,
        stream: StreamId,
        items: Vec<wire::Parsed>,
        json_post: bool,
    ) {
        for item in items {
            match item {
                Err(error) => self.event(ClientEvent::InvalidMessage { stream, error }),
                Ok(Message::Response(r)) => {
                    if r.id.is_some() && r.id == self.listen_rpc {
                        // The graceful end of the modern listening stream.
                        self.event(ClientEvent::SubscriptionEnded { stream });
                        continue;
                    }
                    let id = match &r.id {
                        Some(id) => Some(self.aliases.get(id).cloned().unwrap_or(id.clone())),
                        // S-RPC-7: an id-less error answers the request of its own POST.
                        None if json_post || self.own_request(stream).is_some() => {
                            self.own_request(stream)
                        }
                        None => None,
                    };
                    let sent = id.as_ref().is_some_and(|id| {
                        matches!(
                            self.requests.get(id).map(|q| q.state),
                            Some(ReqState::Sent { .. })
                        )
                    });
                    match id {
                        Some(id) if sent => self.complete(now, stream, id, r),
                        _ => self.event(ClientEvent::UnmatchedResponse { stream, id: r.id }),
                    }
                }
                Ok(m) => self
                    .out
                    .push_back(Output::Message(Delivered { stream, message: m })),
            }
        }
    }

    /// The response to request `id` arrived on `stream`.
    fn complete(&mut self, now: Instant, stream: StreamId, id: RequestId, mut response: Response) {
        let Some(req) = self.requests.get(&id) else {
            return;
        };
        if req.internal && &*req.method == DISCOVER {
            self.requests.remove(&id);
            self.mark_answered(now, stream);
            if self.probe.as_ref() == Some(&id) {
                self.on_probe_response(now, stream, response);
            }
            return;
        }
        if !self.legacy()
            && !req.internal
            && let Outcome::Result(raw) = &response.outcome
            && let Some(parsed) = per_request::input_required(raw)
        {
            if let ReqState::Sent { stream: s } = req.state {
                self.mark_answered(now, s);
            }
            self.on_input_required(now, stream, id, parsed);
            return;
        }
        let Some(req) = self.requests.remove(&id) else {
            return;
        };
        if let Some(w) = &req.wire {
            self.aliases.remove(w);
        }
        // The app sees its own id, whatever id the wire carried (MRTR retries).
        response.id = Some(id.clone());
        if !self.legacy() && &*req.method == "tools/list" {
            response = self.learn_tools(response);
        }
        let mut head_session = None;
        if let ReqState::Sent { stream: s } = req.state
            && let Some(p) = self.posts.get_mut(&s)
        {
            head_session = p.head_session_id.clone();
            if p.is_live() {
                p.answer(now, self.answered_stream_grace);
            } else {
                self.posts.remove(&s);
            }
        }
        if &*req.method == INITIALIZE {
            let accepted = self.accept_initialize(&response, head_session);
            let replay = req.internal;
            let ev = match accepted {
                Ok(Some((session, version))) => PhaseEvent::InitializeAccepted {
                    session,
                    version,
                    replay,
                },
                Ok(None) if replay => PhaseEvent::ReinitFailed(
                    ServerFault::InvalidJsonRpc {
                        detail: "initialize answered with an error".into(),
                    }
                    .into(),
                ),
                Ok(None) => PhaseEvent::InitializeFailed,
                Err(e) if replay => PhaseEvent::ReinitFailed(e.into()),
                Err(e) => {
                    self.outcome(id, RequestResult::Failed(e.into()));
                    self.step(now, PhaseEvent::InitializeFailed);
                    return;
                }
            };
            if !replay {
                // The app's initialize: it gets the response (a result or a JSON-RPC error).
                self.outcome(id, RequestResult::Response { stream, response });
            }
            self.step(now, ev);
            return;
        }
        self.outcome(id, RequestResult::Response { stream, response });
    }

    /// The request on `stream` has its answer: the machine only drains what follows.
    fn mark_answered(&mut self, now: Instant, stream: StreamId) {
        if let Some(p) = self.posts.get_mut(&stream) {
            if p.is_live() {
                p.answer(now, self.answered_stream_grace);
            } else {
                self.posts.remove(&stream);
            }
        }
    }

    pub(super) fn outcome(&mut self, id: RequestId, result: RequestResult) {
        self.out
            .push_back(Output::Outcome(RequestOutcome { id, result }));
    }

    /// Ends a request with `result` (no outcome for the session's own). With `abort`, its live
    /// exchange is dropped.
    pub(super) fn end_request(&mut self, id: &RequestId, result: RequestResult, abort: bool) {
        let Some(req) = self.requests.remove(id) else {
            return;
        };
        if let Some(w) = &req.wire {
            self.aliases.remove(w);
        }
        match req.state {
            ReqState::Queued => {
                self.pending
                    .retain(|p| !matches!(&p.purpose, Purpose::Request(q) if q == id));
                self.held
                    .retain(|h| !matches!(&h.message.purpose, Purpose::Request(q) if q == id));
            }
            ReqState::AwaitingInput => {
                // Tell the app's input handlers to stop, as a server cancels its requests.
                let stream = req.inputs.as_ref().map_or(StreamId(0), |i| i.stream);
                let ids: Vec<RequestId> = self
                    .input_ids
                    .iter()
                    .filter(|(_, (r, _))| r == id)
                    .map(|(i, _)| i.clone())
                    .collect();
                for i in ids {
                    self.input_ids.remove(&i);
                    let params = serde_json::json!({
                        "requestId": serde_json::to_value(&i).unwrap_or_default(),
                        "reason": "the request ended",
                    });
                    let params = serde_json::value::to_raw_value(&params).ok();
                    self.out.push_back(Output::Message(Delivered {
                        stream,
                        message: Message::Notification(Notification::new(
                            "notifications/cancelled",
                            params,
                        )),
                    }));
                }
            }
            ReqState::Sent { stream } => {
                if abort
                    && let Some(p) = self.posts.remove(&stream)
                    && p.is_live()
                {
                    self.out.push_back(Output::Abort(stream));
                }
            }
        }
        if !req.internal {
            self.outcome(id.clone(), result);
        }
    }

    // S-NEW-6.
    /// Cancel or time out: outcome, abort, and `notifications/cancelled` if the server saw the
    /// request in this session (legacy era; the modern era cancels by dropping).
    pub(super) fn abandon(&mut self, id: &RequestId, result: RequestResult, reason: Option<&str>) {
        let notify = self
            .requests
            .get(id)
            .is_some_and(|r| matches!(r.state, ReqState::Sent { .. }) && r.epoch == self.epoch)
            && self.legacy();
        self.end_request(id, result, true);
        if notify {
            let b = wire::cancelled_notification(id, reason);
            // A full queue drops the notification: cancellation is advisory (S-CANCEL-3).
            let _ = self.dispatch(
                b,
                Purpose::Cancelled,
                Some("notifications/cancelled".into()),
            );
        }
    }

    // ------------------------------------------------------------------ listening

    pub(super) fn maybe_start_listen(&mut self, now: Instant) {
        if self.phase == Phase::Ready && self.listen.wanted && self.listen.is_idle() {
            // The modern era has no GET (S-NEW-1); it listens with `subscriptions/listen`
            // when the app gave a filter (S-NEW-9).
            let modern = !self.legacy();
            let supported = !modern || self.subscription.is_some();
            self.run_listen(now, ListenInput::Start { supported, modern });
        }
    }

    pub(super) fn run_listen(&mut self, now: Instant, input: ListenInput<'_>) {
        let mut fx = Vec::new();
        let mut ctx = ListenCtx {
            now,
            backoff: &mut self.backoff,
            next_stream: &mut self.next_stream,
            max_sse_event_bytes: self.limits.max_sse_event_bytes,
        };
        self.listen.handle(input, &mut ctx, &mut fx);
        for e in fx {
            self.apply_listen(now, e);
        }
    }

    fn apply_listen(&mut self, now: Instant, effect: ListenEffect) {
        match effect {
            ListenEffect::Open { stream, .. } if !self.legacy() => {
                let body = self.listen_request();
                let (mut headers, _) = self.build_headers(
                    HttpRequestKind::Listen,
                    &Method::POST,
                    Some(SUBSCRIPTIONS_LISTEN),
                    true,
                    None,
                );
                headers.insert(
                    http::header::ACCEPT,
                    HeaderValue::from_static(crate::http::mime::POST_ACCEPT),
                );
                headers.insert(
                    http::header::CONTENT_TYPE,
                    HeaderValue::from_static(crate::http::mime::APPLICATION_JSON),
                );
                self.mirror(&body, &mut headers);
                self.listen.carried_session = None;
                self.out.push_back(Output::Http(HttpRequest {
                    stream,
                    kind: HttpRequestKind::Listen,
                    method: Method::POST,
                    headers,
                    body,
                }));
            }
            ListenEffect::Open {
                stream,
                last_event_id,
            } => {
                let (headers, carried) = self.build_headers(
                    HttpRequestKind::Listen,
                    &Method::GET,
                    None,
                    true,
                    last_event_id.as_deref(),
                );
                self.listen.carried_session = carried;
                self.out.push_back(Output::Http(HttpRequest {
                    stream,
                    kind: HttpRequestKind::Listen,
                    method: Method::GET,
                    headers,
                    body: Bytes::new(),
                }));
            }
            ListenEffect::Abort(s) => self.out.push_back(Output::Abort(s)),
            ListenEffect::Payloads(stream, list) => {
                for b in list {
                    self.route(now, stream, &b, false);
                }
            }
            ListenEffect::Event(e) => self.event(e),
            ListenEffect::SessionNotFound => {
                if self.listen.carried_session.is_some()
                    && self.listen.carried_session == self.session
                {
                    self.step(now, PhaseEvent::Expired);
                } else {
                    self.maybe_start_listen(now);
                }
            }
            ListenEffect::AuthRequired {
                stream,
                status,
                challenge,
            } => {
                self.event(ClientEvent::AuthorizationRequired {
                    stream,
                    status,
                    challenge: challenge.clone(),
                });
                if self.auth_retries.is_some() {
                    self.listen_held = true;
                    self.event(ClientEvent::AwaitingAuthorization { status, challenge });
                }
            }
        }
    }
    // ------------------------------------------------------------------ the modern era

    // S-NEW-8.
    /// The request headers that mirror the body: `Mcp-Method`, `Mcp-Name`,
    /// `Mcp-Param-*`, via [`crate::mirror`].
    pub(super) fn mirror(&self, body: &[u8], headers: &mut HeaderMap) {
        let Some((method, params)) = per_request::method_and_params(body) else {
            return;
        };
        let raw = serde_json::value::to_raw_value(&params).ok();
        for (name, value) in crate::mirror::mirror_headers(&method, raw.as_deref()) {
            headers.insert(name, value);
        }
        if method == "tools/call"
            && let Some(name) = params.get("name").and_then(serde_json::Value::as_str)
            && let Some(decls) = self.tool_headers.get(name)
        {
            for (name, value) in crate::mirror::param_headers(decls, params.get("arguments")) {
                headers.insert(name, value);
            }
        }
    }

    // S-NEW-8.
    /// Learns the `x-mcp-header` declarations of the tools in a `tools/list` result and drops
    /// the tools whose declarations are invalid (a client MUST exclude them), with a
    /// [`ClientEvent::InvalidToolDefinition`] each. Returns the result to give the app.
    fn learn_tools(&mut self, response: Response) -> Response {
        let Outcome::Result(raw) = &response.outcome else {
            return response;
        };
        let Ok(mut v) = serde_json::from_str::<serde_json::Value>(raw.get()) else {
            return response;
        };
        let Some(tools) = v.get_mut("tools").and_then(serde_json::Value::as_array_mut) else {
            return response;
        };
        let mut dropped = false;
        let mut learned = Vec::new();
        let mut rejected = Vec::new();
        tools.retain(|t| {
            let name = t
                .get("name")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("");
            let schema = t.get("inputSchema").cloned().unwrap_or_default();
            match crate::mirror::ParamHeader::from_input_schema(&schema) {
                Ok(decls) => {
                    learned.push((name.to_owned(), decls));
                    true
                }
                Err(e) => {
                    rejected.push((name.to_owned(), e.to_string()));
                    dropped = true;
                    false
                }
            }
        });
        for (name, decls) in learned {
            if decls.is_empty() {
                self.tool_headers.remove(&name);
            } else if self.tool_headers.len() < self.max_known_tools
                || self.tool_headers.contains_key(&name)
            {
                self.tool_headers.insert(name, decls);
            }
        }
        for (tool, reason) in rejected {
            self.event(ClientEvent::InvalidToolDefinition { tool, reason });
        }
        if !dropped {
            return response;
        }
        match serde_json::value::to_raw_value(&v) {
            Ok(raw) => Response {
                id: response.id,
                outcome: Outcome::Result(raw),
            },
            Err(_) => response,
        }
    }

    /// A fresh id the session owns (`mcp-proto-<what>-N`), not used by any request.
    pub(super) fn own_id(&mut self, what: &str) -> RequestId {
        loop {
            self.own_seq += 1;
            let id = RequestId::String(format!("mcp-proto-{what}-{}", self.own_seq).into());
            if !self.requests.contains_key(&id)
                && !self.aliases.contains_key(&id)
                && !self.input_ids.contains_key(&id)
            {
                return id;
            }
        }
    }

    /// The modern version to probe with, or `None` to go straight to `initialize`.
    pub(super) fn probe_version(&mut self) -> Option<ProtocolVersion> {
        if self.era_mode == EraMode::Legacy {
            return None;
        }
        self.probe_tried.clear();
        let cached = self.known_era;
        match cached {
            Some(KnownEra::Legacy) if self.era_mode == EraMode::Auto => {
                self.event(ClientEvent::EraDetected {
                    era: crate::version::Era::Legacy,
                    version: None,
                    cached: true,
                });
                None
            }
            Some(KnownEra::Modern(v)) if !v.has_sessions() => Some(v),
            _ => Some(ProtocolVersion::V2026_07_28),
        }
    }

    /// POSTs `server/discover` at `version` as the session's own request.
    pub(super) fn send_probe(&mut self, now: Instant, version: ProtocolVersion) {
        let id = self.own_id("discover");
        self.probe_tried.push(version);
        self.version = Some(version);
        let bytes = per_request::request(&id, DISCOVER, serde_json::json!({}));
        self.requests.insert(
            id.clone(),
            Req {
                method: DISCOVER.into(),
                bytes: bytes.clone(),
                state: ReqState::Queued,
                retried: false,
                deadline: Some(after(now, self.handshake_timeout())),
                internal: true,
                epoch: self.epoch,
                rounds: 0,
                wire: None,
                inputs: None,
            },
        );
        self.probe = Some(id.clone());
        self.post_message(bytes, Purpose::Request(id), Some(DISCOVER.into()));
    }

    /// One of the session's own requests failed (re-initialization or the probe).
    pub(super) fn internal_failed(
        &mut self,
        now: Instant,
        id: &RequestId,
        err: ClientError,
        abort: bool,
    ) {
        let Some(req) = self.requests.get(id) else {
            return;
        };
        if &*req.method == DISCOVER {
            let stream = match req.state {
                ReqState::Sent { stream } => stream,
                _ => StreamId(0),
            };
            self.end_request(id, RequestResult::Cancelled, abort);
            if self.probe.as_ref() == Some(id) {
                self.probe = None;
                self.on_probe_failed(now, stream, err);
            }
            return;
        }
        self.end_request(id, RequestResult::Failed(err.clone()), abort);
        self.step(now, PhaseEvent::ReinitFailed(err));
    }

    /// Records what is known of the endpoint's era; a change goes out to the app.
    pub(super) fn set_known_era(&mut self, era: Option<KnownEra>) {
        if self.known_era != era {
            self.known_era = era;
            self.event(ClientEvent::KnownEraChanged { era });
        }
    }

    // S-NEW-10, G-11.
    /// The probe's answer (a result or a JSON-RPC error).
    fn on_probe_response(&mut self, now: Instant, stream: StreamId, response: Response) {
        self.probe = None;
        match per_request::verdict(&response, &self.probe_tried) {
            Verdict::Modern => {
                let v = self.version.unwrap_or(ProtocolVersion::V2026_07_28);
                if let Outcome::Result(raw) = response.outcome {
                    self.discovered = Some(raw);
                }
                self.set_known_era(Some(KnownEra::Modern(v)));
                self.step(now, PhaseEvent::ProbeModern { stream });
            }
            Verdict::Retry(v) => self.send_probe(now, v),
            Verdict::ModernRefused(mut response) => {
                // A modern server refused the probe: stay modern, give the app the error.
                let v = self.version.unwrap_or(ProtocolVersion::V2026_07_28);
                self.set_known_era(Some(KnownEra::Modern(v)));
                self.event(ClientEvent::EraDetected {
                    era: crate::version::Era::Modern,
                    version: Some(v),
                    cached: false,
                });
                if let Some(id) = self.app_init.take() {
                    response.id = Some(id.clone());
                    self.requests.remove(&id);
                    self.outcome(id, RequestResult::Response { stream, response });
                }
                self.step(now, PhaseEvent::ProbeFailed);
            }
            Verdict::Legacy | Verdict::NotModern => self.probe_not_modern(now),
        }
    }

    /// The probe failed without a JSON-RPC answer: a 4xx means "not modern" (fall back), a
    /// 5xx, a transport failure or a timeout fails the app's `initialize`.
    fn on_probe_failed(&mut self, now: Instant, stream: StreamId, err: ClientError) {
        // G-11: a recognised modern error in the body decides, whatever its id.
        if let ClientError::HttpStatus { body, .. } = &err
            && let Some(r) = per_request::error_response(body)
            && let Outcome::Error(e) = &r.outcome
            && per_request::is_modern_error(e.code)
        {
            self.on_probe_response(now, stream, r);
            return;
        }
        match &err {
            ClientError::HttpStatus { status, .. } if status.is_client_error() => {
                self.probe_not_modern(now)
            }
            ClientError::EndpointNotFound => self.probe_not_modern(now),
            _ => self.fail_app_init(now, err),
        }
    }

    fn fail_app_init(&mut self, now: Instant, err: ClientError) {
        if let Some(id) = self.app_init.take() {
            self.end_request(&id, RequestResult::Failed(err), true);
        }
        self.step(now, PhaseEvent::ProbeFailed);
    }

    fn probe_not_modern(&mut self, now: Instant) {
        if self.era_mode == EraMode::Modern {
            self.fail_app_init(now, ClientError::ModernUnsupported);
            return;
        }
        self.set_known_era(None);
        self.step(now, PhaseEvent::ProbeLegacy);
    }

    // S-NEW-5.
    /// An `InputRequiredResult` for request `id` (MRTR): hand its input requests to
    /// the app as server requests, or retry at once when there are none.
    fn on_input_required(
        &mut self,
        now: Instant,
        stream: StreamId,
        id: RequestId,
        parsed: Result<per_request::InputRequired, ClientError>,
    ) {
        let ir = match parsed {
            Ok(ir) if ir.requests.len() > self.max_input_requests => {
                let limit = Limit::InputRequests;
                self.event(ClientEvent::LimitExceeded {
                    stream: Some(stream),
                    limit,
                });
                let err = ServerFault::LimitExceeded { limit }.into();
                self.end_request(&id, RequestResult::Failed(err), false);
                return;
            }
            Ok(ir) => ir,
            Err(e) => {
                self.end_request(&id, RequestResult::Failed(e), false);
                return;
            }
        };
        let limit = self.max_input_rounds;
        let Some(req) = self.requests.get_mut(&id) else {
            return;
        };
        req.rounds += 1;
        if req.rounds > limit {
            self.event(ClientEvent::LimitExceeded {
                stream: Some(stream),
                limit: Limit::InputRounds,
            });
            self.end_request(
                &id,
                RequestResult::Failed(ClientError::TooManyInputRounds { limit }),
                false,
            );
            return;
        }
        let round = req.rounds;
        req.step(ReqEvent::InputRequired);
        req.inputs = Some(Box::new(Inputs {
            answers: ir.requests.iter().map(|r| (r.key.clone(), None)).collect(),
            state: ir.state,
            stream,
        }));
        if ir.requests.is_empty() {
            self.retry_request(now, &id);
            return;
        }
        for r in ir.requests {
            let iid = RequestId::String(
                format!("mcp-proto-input/{}/{round}/{}", plain(&id), r.key).into(),
            );
            self.input_ids.insert(iid.clone(), (id.clone(), r.key));
            self.out.push_back(Output::Message(Delivered {
                stream,
                message: Message::Request(Request::new(iid, r.method, r.params)),
            }));
        }
    }

    /// The app answered one input request.
    pub(super) fn input_answer(&mut self, now: Instant, response: Response) {
        let Some((id, key)) = response.id.as_ref().and_then(|i| self.input_ids.remove(i)) else {
            return;
        };
        match response.outcome {
            Outcome::Result(raw) => {
                let Some(inputs) = self.requests.get_mut(&id).and_then(|r| r.inputs.as_mut())
                else {
                    return;
                };
                if let Some(slot) = inputs.answers.iter_mut().find(|(k, _)| *k == key) {
                    slot.1 = Some(raw);
                }
                if inputs.answers.iter().all(|(_, a)| a.is_some()) {
                    self.retry_request(now, &id);
                }
            }
            Outcome::Error(e) => {
                let err = ClientError::InputRequestFailed {
                    key,
                    code: e.code,
                    message: e.message.to_string(),
                };
                self.end_request(&id, RequestResult::Failed(err), false);
            }
        }
    }

    /// Re-POSTs request `id` with this round's answers under a new wire id.
    fn retry_request(&mut self, _now: Instant, id: &RequestId) {
        let Some(req) = self.requests.get(id) else {
            return;
        };
        let round = req.rounds;
        let mut wire = RequestId::String(format!("{}#input-{round}", plain(id)).into());
        while self.requests.contains_key(&wire) || self.aliases.contains_key(&wire) {
            wire = RequestId::String(format!("{wire}'").into());
        }
        let Some(req) = self.requests.get_mut(id) else {
            return;
        };
        let inputs = req.inputs.take();
        let (answers, state) = match inputs {
            Some(i) => (
                i.answers
                    .into_iter()
                    .filter_map(|(k, a)| a.map(|a| (k, a)))
                    .collect::<Vec<_>>(),
                i.state,
            ),
            None => (Vec::new(), None),
        };
        let Some(bytes) = per_request::retry(&req.bytes, &wire, &answers, state.as_deref()) else {
            let err = ClientError::MalformedInputRequest {
                detail: "the request cannot be retried".into(),
            };
            self.end_request(id, RequestResult::Failed(err), false);
            return;
        };
        if let Some(old) = req.wire.replace(wire.clone()) {
            self.aliases.remove(&old);
        }
        req.step(ReqEvent::Requeued);
        let method = req.method.clone();
        self.aliases.insert(wire, id.clone());
        self.post_message(bytes, Purpose::Request(id.clone()), Some(method));
    }

    /// The `subscriptions/listen` request of the modern listening stream.
    fn listen_request(&mut self) -> Bytes {
        let id = self.own_id("listen");
        self.listen_rpc = Some(id.clone());
        let filter = self
            .subscription
            .clone()
            .unwrap_or_else(|| serde_json::json!({}));
        let bytes = per_request::request(
            &id,
            SUBSCRIPTIONS_LISTEN,
            serde_json::json!({ "notifications": filter }),
        );
        match self.version {
            Some(v) => per_request::with_meta(&bytes, v, &self.identity).unwrap_or(bytes),
            None => bytes,
        }
    }
}

/// An id as plain text (no quotes around strings), for the session's derived ids.
fn plain(id: &RequestId) -> String {
    match id {
        RequestId::Number(n) => n.to_string(),
        RequestId::String(s) => s.to_string(),
    }
}
