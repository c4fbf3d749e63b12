//! [`ServerBinding`]: a [`Server`] behind a [`Router`].

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{Queue, Routed, Wake};
use crate::jsonrpc::{
    ErrorObject, Notification, Outcome, RawValue, Request, RequestId, error_codes,
};
use crate::server::{
    OutboundId, RequestHandle, Router, SendError, ServerOutput, ServerRequestError, SessionHandle,
    Target,
};
use crate::service::server::BoxFuture;
use crate::service::{
    Peer, PeerError, PeerResult, PendingRequests, ResponseFuture, Server, ServerSession,
};

/// The runtime's timer: a future that completes after the duration.
pub type Sleep = Arc<dyn Fn(Duration) -> BoxFuture<'static, ()> + Send + Sync>;

enum Command {
    Notify(Option<SessionHandle>, Option<RequestId>, Notification),
    Request(
        Option<SessionHandle>,
        Option<RequestId>,
        String,
        Option<Box<RawValue>>,
        u64,
    ),
    CloseStream(Option<SessionHandle>, RequestId),
    Respond(RequestHandle, Option<Outcome>),
}

struct BoundPeer {
    queue: Arc<Queue<Command>>,
    outbound: Arc<PendingRequests<u64>>,
    keys: Arc<AtomicU64>,
    session: Option<SessionHandle>,
    sleep: Sleep,
}

impl Peer for BoundPeer {
    fn notify(&self, related: Option<&RequestId>, n: Notification) -> Result<(), PeerError> {
        self.queue
            .push(Command::Notify(self.session, related.cloned(), n));
        Ok(())
    }

    fn request(
        &self,
        related: Option<&RequestId>,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> ResponseFuture {
        let key = self.keys.fetch_add(1, Ordering::Relaxed);
        let answer = self.outbound.register(key);
        self.queue.push(Command::Request(
            self.session,
            related.cloned(),
            method.to_owned(),
            params,
            key,
        ));
        answer
    }

    fn close_stream(&self, related: &RequestId) -> Result<(), PeerError> {
        self.queue
            .push(Command::CloseStream(self.session, related.clone()));
        Ok(())
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        (self.sleep)(duration)
    }
}

fn peer_error(e: SendError) -> PeerError {
    match e {
        SendError::Stateless => PeerError::Unsupported(e.to_string()),
        SendError::UnknownSession => PeerError::Closed,
        SendError::Cancelled => PeerError::Cancelled,
        other => PeerError::Failed(other.to_string()),
    }
}

/// A [`Server`] behind a [`Router`]: one [`ServerSession`] per router session (and one per
/// request in stateless mode), handlers returned as futures to spawn, and everything they
/// send applied to the router in order. See the [module docs](super).
pub struct ServerBinding {
    server: Server,
    queue: Arc<Queue<Command>>,
    outbound: Arc<PendingRequests<u64>>,
    keys: Arc<AtomicU64>,
    sleep: Sleep,
    key_to_oid: HashMap<u64, OutboundId>,
    oid_to_key: HashMap<OutboundId, u64>,
    handles: HashMap<RequestHandle, (Option<SessionHandle>, RequestId)>,
    by_id: HashMap<(Option<SessionHandle>, RequestId), RequestHandle>,
    sessions: HashMap<SessionHandle, ServerSession>,
}

impl std::fmt::Debug for ServerBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBinding")
            .field("server", &self.server)
            .field("sessions", &self.sessions.len())
            .field("in_flight", &self.handles.len())
            .finish_non_exhaustive()
    }
}

impl ServerBinding {
    /// Binds `server`. `sleep` is the runtime's timer (for [`RequestContext::sleep`]); `wake`
    /// is called whenever a handler queues something for the router.
    ///
    /// [`RequestContext::sleep`]: crate::service::RequestContext::sleep
    pub fn new(server: Server, sleep: Sleep, wake: Wake) -> Self {
        ServerBinding {
            server,
            queue: Arc::new(Queue::new(wake)),
            outbound: Arc::new(PendingRequests::new()),
            keys: Arc::new(AtomicU64::new(1)),
            sleep,
            key_to_oid: HashMap::new(),
            oid_to_key: HashMap::new(),
            handles: HashMap::new(),
            by_id: HashMap::new(),
            sessions: HashMap::new(),
        }
    }

    /// The server.
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// The service sessions, one per live router session.
    pub fn sessions(&self) -> impl Iterator<Item = &ServerSession> {
        self.sessions.values()
    }

    fn session(&mut self, session: Option<SessionHandle>) -> ServerSession {
        // The common case (every request of a live session): no new peer to allocate.
        if let Some(existing) = session.and_then(|h| self.sessions.get(&h)) {
            return existing.clone();
        }
        let peer = Arc::new(BoundPeer {
            queue: self.queue.clone(),
            outbound: self.outbound.clone(),
            keys: self.keys.clone(),
            session,
            sleep: self.sleep.clone(),
        });
        match session {
            Some(h) => self
                .sessions
                .entry(h)
                .or_insert_with(|| self.server.session(peer))
                .clone(),
            None => self.server.session(peer),
        }
    }

    fn target(
        &self,
        session: Option<SessionHandle>,
        related: Option<&RequestId>,
    ) -> Option<Target> {
        related
            .and_then(|id| self.by_id.get(&(session, id.clone())))
            .map(|h| Target::Request(*h))
            .or(session.map(Target::Session))
    }

    /// Applies what the service queued, in order; then tells the client about server→client
    /// requests nobody waits for any more. Returns whether anything was applied.
    pub fn apply(&mut self, router: &mut Router, now: Instant) -> bool {
        let commands = self.queue.drain();
        let any = !commands.is_empty();
        for command in commands {
            match command {
                Command::Notify(session, related, n) => {
                    if let Some(target) = self.target(session, related.as_ref()) {
                        // A closed session or cancelled request drops it; nothing to do.
                        let _ = router.notify(now, target, n);
                    }
                }
                Command::Request(session, related, method, params, key) => {
                    let sent = match self.target(session, related.as_ref()) {
                        Some(target) => router.send_request(now, target, &method, params, None),
                        None => Err(SendError::Stateless),
                    };
                    match sent {
                        Ok(oid) => {
                            self.key_to_oid.insert(key, oid);
                            self.oid_to_key.insert(oid, key);
                        }
                        Err(e) => {
                            self.outbound.complete(&key, Err(peer_error(e)));
                        }
                    }
                }
                Command::CloseStream(session, id) => {
                    if let Some(&h) = self.by_id.get(&(session, id)) {
                        // Not resumable: the answer goes on the open stream as usual.
                        let _ = router.close_for_polling(now, Target::Request(h));
                    }
                }
                Command::Respond(handle, outcome) => {
                    if let Some((s, id)) = self.handles.remove(&handle) {
                        self.by_id.remove(&(s, id));
                    }
                    if let Some(outcome) = outcome {
                        // Cancelled meanwhile: the router refuses, and nothing is sent.
                        let _ = router.respond(now, handle, outcome);
                    }
                }
            }
        }
        for key in self.outbound.abandoned() {
            if let Some(oid) = self.key_to_oid.remove(&key) {
                self.oid_to_key.remove(&oid);
                let _ = router.cancel_request(now, oid);
            }
        }
        any
    }

    /// Takes one router output: application outputs are consumed (a request becomes a
    /// handler future to spawn), transport outputs are given back.
    pub fn handle_output(&mut self, output: ServerOutput) -> Routed<ServerOutput> {
        match output {
            ServerOutput::Request {
                handle,
                session,
                request,
            } => Routed::Spawn(self.handle_request(handle, session, request)),
            ServerOutput::Notification {
                session,
                notification,
            } => {
                self.session(session).handle_notification(notification);
                Routed::Done
            }
            ServerOutput::Cancelled { handle, .. } => {
                if let Some((session, id)) = self.handles.remove(&handle) {
                    self.by_id.remove(&(session, id.clone()));
                    if let Some(s) = session.and_then(|h| self.sessions.get(&h)) {
                        s.cancel(&id);
                    }
                }
                Routed::Done
            }
            ServerOutput::ClientResponse {
                request, response, ..
            } => {
                self.complete(request, Ok(response));
                Routed::Done
            }
            ServerOutput::ServerRequestFailed { request, error } => {
                let error = match error {
                    ServerRequestError::Timeout => PeerError::Timeout,
                    ServerRequestError::SessionClosed => PeerError::Closed,
                    ServerRequestError::Cancelled => PeerError::Cancelled,
                    other => PeerError::Failed(other.to_string()),
                };
                self.complete(request, Err(error));
                Routed::Done
            }
            ServerOutput::SessionClosed { session, reason } => {
                if let Some(s) = self.sessions.remove(&session) {
                    s.close();
                }
                Routed::Transport(ServerOutput::SessionClosed { session, reason })
            }
            other => Routed::Transport(other),
        }
    }

    fn complete(&mut self, oid: OutboundId, result: PeerResult) {
        if let Some(key) = self.oid_to_key.remove(&oid) {
            self.key_to_oid.remove(&key);
            self.outbound.complete(&key, result);
        }
    }

    fn handle_request(
        &mut self,
        handle: RequestHandle,
        session: Option<SessionHandle>,
        request: Request,
    ) -> BoxFuture<'static, ()> {
        self.handles.insert(handle, (session, request.id.clone()));
        self.by_id.insert((session, request.id.clone()), handle);
        let answer = self.session(session).handle_request(request);
        let mut guard = AnswerGuard {
            queue: self.queue.clone(),
            handle,
            answered: false,
        };
        Box::pin(async move {
            let response = answer.await;
            guard.answered = true;
            guard
                .queue
                .push(Command::Respond(handle, response.map(|r| r.outcome)));
        })
    }
}

/// Makes sure every request handed to a handler gets exactly one answer: if the handler's
/// future is dropped before it finished — it panicked (the runtime drops a panicking task),
/// or the runtime is shutting down — the request is answered with `-32603` instead of being
/// left hanging. A handler that observed cancellation finishes normally (with no response),
/// so this guard never answers a cancelled request.
struct AnswerGuard {
    queue: Arc<Queue<Command>>,
    handle: RequestHandle,
    answered: bool,
}

impl Drop for AnswerGuard {
    fn drop(&mut self) {
        if !self.answered {
            self.queue.push(Command::Respond(
                self.handle,
                Some(Outcome::Error(ErrorObject::new(
                    error_codes::INTERNAL_ERROR,
                    "the request handler ended without an answer (it panicked or was dropped)",
                ))),
            ));
        }
    }
}
