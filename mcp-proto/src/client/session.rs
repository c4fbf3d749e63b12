//! The facade's internals: building intents, running the sub-machines and applying their
//! effects, routing server messages, and the session's lifecycle (initialize, expiry,
//! re-initialization, close). The phase table is in the parent module's docs.

use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method};

use super::lifecycle::PhaseEvent;
use super::*;

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

    /// POSTs now if ready, queues otherwise (G-9).
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
        let (headers, carried) = self.build_headers(
            HttpRequestKind::Post,
            &Method::POST,
            rpc_method.as_deref(),
            !is_init,
            None,
        );
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
            r.state = ReqState::Sent { stream };
            r.epoch = self.epoch;
        }
        let resumable = self.legacy();
        self.posts.insert(
            stream,
            PostStream::new(purpose, carried, self.epoch, is_init, resumable),
        );
        stream
    }

    /// Every header of a request. Protocol headers are set last and win over static and
    /// callback headers. `with_session` is false only for `initialize` (G-6).
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
            HttpRequestKind::Delete => {}
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
                    self.fail_from_stream(now, stream, &id, ProtocolError::MissingResponse.into());
                }
            }
            PostEffect::Failed(err) => self.on_post_failed(now, stream, err),
            PostEffect::SessionNotFound => self.on_post_not_found(now, stream),
            PostEffect::AuthRequired { status, challenge } => {
                self.event(ClientEvent::AuthorizationRequired {
                    stream,
                    status,
                    challenge,
                });
            }
            PostEffect::Limit(limit) => self.event(ClientEvent::LimitExceeded {
                stream: Some(stream),
                limit,
            }),
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
            self.requests.remove(id);
            self.step(now, PhaseEvent::ReinitFailed(err));
            return;
        }
        let was_init = &*req.method == INITIALIZE;
        self.end_request(id, RequestResult::Failed(err), false);
        if was_init {
            self.step(now, PhaseEvent::InitializeFailed);
        }
    }

    fn on_post_failed(&mut self, now: Instant, stream: StreamId, err: ClientError) {
        let Some(p) = self.posts.get(&stream) else {
            return;
        };
        match p.purpose.clone() {
            Purpose::Request(id) => {
                if !p.answered {
                    self.fail_from_stream(now, stream, &id, err);
                }
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
                req.state = ReqState::Queued;
                let bytes = req.bytes.clone();
                let method = req.method.clone();
                if self.phase == Phase::Ready {
                    self.post_message(bytes, Purpose::Request(id), Some(method));
                } else {
                    self.pending.push_back(Pending {
                        bytes,
                        purpose: Purpose::Request(id),
                        rpc_method: Some(method),
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
            r.state = ReqState::Sent { stream };
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
                self.requests.remove(id);
                self.step(now, PhaseEvent::ReinitFailed(err));
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
        for item in items {
            match item {
                Err(error) => self.event(ClientEvent::InvalidMessage { stream, error }),
                Ok(Message::Response(r)) => {
                    let id = match &r.id {
                        Some(id) => Some(id.clone()),
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
    fn complete(&mut self, now: Instant, stream: StreamId, id: RequestId, response: Response) {
        let Some(req) = self.requests.remove(&id) else {
            return;
        };
        let mut head_session = None;
        if let ReqState::Sent { stream: s } = req.state
            && let Some(p) = self.posts.get_mut(&s)
        {
            head_session = p.head_session_id.clone();
            if p.is_live() {
                p.answered = true;
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
                    ProtocolError::InvalidJsonRpc {
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

    fn outcome(&mut self, id: RequestId, result: RequestResult) {
        self.out
            .push_back(Output::Outcome(RequestOutcome { id, result }));
    }

    /// Ends a request with `result` (no outcome for the session's own). With `abort`, its live
    /// exchange is dropped.
    pub(super) fn end_request(&mut self, id: &RequestId, result: RequestResult, abort: bool) {
        let Some(req) = self.requests.remove(id) else {
            return;
        };
        match req.state {
            ReqState::Queued => self
                .pending
                .retain(|p| !matches!(&p.purpose, Purpose::Request(q) if q == id)),
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

    /// Cancel or time out: outcome, abort, and `notifications/cancelled` if the server saw the
    /// request in this session (legacy era; the modern era cancels by dropping, S-NEW-6).
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
            let supported = self.legacy();
            self.run_listen(now, ListenInput::Start { supported });
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
            } => self.event(ClientEvent::AuthorizationRequired {
                stream,
                status,
                challenge,
            }),
        }
    }
}
