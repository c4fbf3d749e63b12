//! [`ServerBinding`]: a [`Server`] behind a [`Router`].

use mcp_proto::HandleMap;
use mcp_proto::mirror::ParamHeaderTable;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use super::{Queue, Routed, Wake};
use crate::server::{BoxFuture, ClusterVoice};
use crate::telemetry::{
    self, Direction, End, Network, Operation, OperationScope, SessionInfo, SessionScope, Side,
    Telemetry,
};
use crate::{Peer, PeerError, PeerResult, PendingRequests, ResponseFuture, Server, ServerSession};
use mcp_proto::jsonrpc::{
    ErrorObject, Notification, Outcome, RawValue, Request, RequestId, error_codes,
};
use mcp_proto::server::{
    CloseReason, OutboundId, RecordOp, RequestHandle, Router, SendError, ServerOutput,
    ServerRequestError, SessionHandle, StoreError, StoreReply, Target, Ticket,
};

/// The runtime's timer: a future that completes after the duration.
pub type Sleep = Arc<dyn Fn(Duration) -> BoxFuture<'static, ()> + Send + Sync>;

/// The runtime's spawner as the binding holds it: runs a future to its end in the background.
pub type Spawn = Arc<dyn Fn(BoxFuture<'static, ()>) + Send + Sync>;

/// Who a peer speaks for: a router session, or one sessionless request (stateless mode, or
/// a 2026-07-28 request), addressed by its handle so that two clients using the same request
/// id never see each other's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Owner {
    Session(SessionHandle),
    Request(RequestHandle),
}

enum Command {
    Notify(Owner, Option<RequestId>, Notification),
    /// A change of the server's for a session: in a cluster, written only where the
    /// session's GET stream is (`Router::holds_listen_stream`).
    NotifyChange(Owner, Notification),
    Request(Owner, Option<RequestId>, String, Option<Box<RawValue>>, u64),
    CloseStream(Owner, RequestId),
    Respond(RequestHandle, Option<Outcome>),
    /// A change of the server's for the other cluster instances' listen streams.
    Notice(bytes::Bytes),
    /// A service record operation (a task's state), answered to the pending key.
    Record(u64, RecordOp),
}

/// The binding as the server's voice in its cluster: a change goes to the queue, and from
/// there to [`Router::broadcast_notice`]; a record operation to [`Router::record_op`], its
/// answer back through [`ServerOutput::RecordAnswer`].
struct Voice(Arc<PeerLink>);

impl ClusterVoice for Voice {
    fn broadcast(&self, notice: bytes::Bytes) {
        self.0.queue.push(Command::Notice(notice));
    }

    fn record(&self, op: RecordOp) -> BoxFuture<'static, StoreReply> {
        let key = self.0.keys.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = futures_channel::oneshot::channel();
        crate::cancel::lock(&self.0.records).insert(key, tx);
        self.0.queue.push(Command::Record(key, op));
        Box::pin(async move {
            rx.await
                .unwrap_or_else(|_| StoreReply::Failed(StoreError("the transport stopped".into())))
        })
    }
}

/// What every peer of a binding shares (one allocation for all, so that a session's peer is
/// its owner and one pointer).
struct PeerLink {
    queue: Arc<Queue<Command>>,
    outbound: PendingRequests<u64>,
    keys: AtomicU64,
    sleep: Sleep,
    /// The runtime's spawner, for work that outlives its request (a task's).
    spawn: std::sync::OnceLock<Spawn>,
    /// The server's record operations waiting for the store, by key.
    records: std::sync::Mutex<HashMap<u64, futures_channel::oneshot::Sender<StoreReply>>>,
    /// The server's observer ([`Server::telemetry`]), what it is told of each owner (session
    /// id, revision), and its server→client requests in flight (method, scope) by key.
    telemetry: Option<Arc<dyn Telemetry>>,
    owners: std::sync::Mutex<HashMap<Owner, OwnerFacts>>,
    outgoing: std::sync::Mutex<HashMap<u64, Outgoing>>,
}

/// What the telemetry is told of an owner: its session id and protocol revision.
type OwnerFacts = (Option<String>, Option<String>);

/// A server→client request in flight, for the telemetry: its method and scope.
type Outgoing = (String, Arc<dyn OperationScope>);

impl PeerLink {
    /// A server→client message starts: its outgoing operation, with the trace context
    /// written into its `params._meta`.
    fn start_outgoing(
        &self,
        telemetry: &dyn Telemetry,
        owner: Owner,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> (Option<Box<RawValue>>, Arc<dyn OperationScope>) {
        let mut op = Operation::new(Side::Server, Direction::Outgoing, method, params.as_deref());
        if let Some((session, version)) = crate::cancel::lock(&self.owners).get(&owner) {
            op.session_id = session.clone();
            op.protocol_version = version.clone();
        }
        telemetry::start_outgoing_raw(telemetry, &op, params)
    }

    /// A server→client notification: its operation ends once it is queued.
    fn traced_notification(&self, owner: Owner, n: Notification) -> Notification {
        let Some(t) = &self.telemetry else {
            return n;
        };
        let (params, scope) = self.start_outgoing(&**t, owner, &n.method, n.params);
        scope.end(End::Ok);
        Notification {
            method: n.method,
            params,
        }
    }

    /// A server→client request ended.
    fn end_outgoing(&self, key: u64, result: &PeerResult) {
        let Some((method, scope)) = crate::cancel::lock(&self.outgoing).remove(&key) else {
            return;
        };
        match result {
            Ok(response) => scope.end(telemetry::end_of(&method, &response.outcome)),
            Err(e) => scope.end(End::Failed {
                error_type: telemetry::failure_class(e),
                message: &e.to_string(),
            }),
        }
    }
}

struct BoundPeer {
    link: Arc<PeerLink>,
    owner: Owner,
}

impl Peer for BoundPeer {
    fn notify(&self, related: Option<&RequestId>, n: Notification) -> Result<(), PeerError> {
        let n = self.link.traced_notification(self.owner, n);
        self.link
            .queue
            .push(Command::Notify(self.owner, related.cloned(), n));
        Ok(())
    }

    fn notify_change(&self, n: Notification) -> Result<(), PeerError> {
        let n = self.link.traced_notification(self.owner, n);
        self.link.queue.push(Command::NotifyChange(self.owner, n));
        Ok(())
    }

    fn request(
        &self,
        related: Option<&RequestId>,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> ResponseFuture {
        let key = self.link.keys.fetch_add(1, Ordering::Relaxed);
        let params = match &self.link.telemetry {
            Some(t) => {
                let (params, scope) = self.link.start_outgoing(&**t, self.owner, method, params);
                crate::cancel::lock(&self.link.outgoing).insert(key, (method.to_owned(), scope));
                params
            }
            None => params,
        };
        let answer = self.link.outbound.register(key);
        self.link.queue.push(Command::Request(
            self.owner,
            related.cloned(),
            method.to_owned(),
            params,
            key,
        ));
        answer
    }

    fn close_stream(&self, related: &RequestId) -> Result<(), PeerError> {
        self.link
            .queue
            .push(Command::CloseStream(self.owner, related.clone()));
        Ok(())
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        (self.link.sleep)(duration)
    }

    fn spawn(&self, work: BoxFuture<'static, ()>) -> Result<(), PeerError> {
        match self.link.spawn.get() {
            Some(spawn) => {
                spawn(work);
                Ok(())
            }
            None => Err(PeerError::Unsupported(
                "no spawner was given to this binding (ServerBinding::with_spawn)".into(),
            )),
        }
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
    /// The command queue, the pending server→client requests and the peers' key counter.
    link: Arc<PeerLink>,
    key_to_oid: HandleMap<u64, OutboundId>,
    oid_to_key: HandleMap<OutboundId, u64>,
    handles: HandleMap<RequestHandle, (Option<SessionHandle>, RequestId)>,
    by_id: HashMap<(SessionHandle, RequestId), RequestHandle>,
    sessions: HandleMap<SessionHandle, ServerSession>,
    /// The one-request service sessions of sessionless requests, until they end.
    requests: HandleMap<RequestHandle, ServerSession>,
    /// The router's table of parameter headers: whose it is, and for which generation of the
    /// server's registry it was built.
    param_headers: ParamHeaders,
    /// In a cluster: each session's state as last handed to the router.
    exported: HandleMap<SessionHandle, bytes::Bytes>,
    /// Whether the first [`apply`](Self::apply) looked at the router yet.
    router_seen: bool,
    /// A clustered router's: the server's link to the other instances (its id with the
    /// server; holding the voice keeps the link alive).
    voice: Option<(u64, Arc<dyn ClusterVoice>)>,
    /// The server's record operations sent to the store: ticket → pending key.
    record_tickets: HandleMap<Ticket, u64>,
    /// The server's observer ([`Server::telemetry`]), and the sessions it is told about.
    telemetry: Option<Arc<dyn Telemetry>>,
    session_scopes: HandleMap<SessionHandle, Box<dyn SessionScope>>,
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
    /// [`RequestContext::sleep`]: crate::RequestContext::sleep
    pub fn new(server: Server, sleep: Sleep, wake: Wake) -> Self {
        let link = Arc::new(PeerLink {
            queue: Arc::new(Queue::new(wake)),
            outbound: PendingRequests::new(),
            keys: AtomicU64::new(1),
            sleep,
            spawn: std::sync::OnceLock::new(),
            records: std::sync::Mutex::new(HashMap::new()),
            telemetry: server.telemetry_hook(),
            owners: std::sync::Mutex::new(HashMap::new()),
            outgoing: std::sync::Mutex::new(HashMap::new()),
        });
        ServerBinding {
            key_to_oid: HandleMap::default(),
            oid_to_key: HandleMap::default(),
            handles: HandleMap::default(),
            by_id: HashMap::new(),
            sessions: HandleMap::default(),
            requests: HandleMap::default(),
            param_headers: ParamHeaders::Unknown,
            exported: HandleMap::default(),
            router_seen: false,
            voice: None,
            record_tickets: HandleMap::default(),
            telemetry: link.telemetry.clone(),
            session_scopes: HandleMap::default(),
            link,
            server,
        }
    }

    /// Gives the binding the runtime's spawner: work that outlives its request (a task's,
    /// [`RequestContext::run_as_task`](crate::RequestContext::run_as_task)) runs on it.
    /// Without one, such work is refused.
    pub fn with_spawn(self, spawn: Spawn) -> Self {
        let _ = self.link.spawn.set(spawn);
        self
    }

    // S-NEW-8.
    /// The `x-mcp-header` declarations of the server's tools, for the router's check
    /// of `Mcp-Param-*` headers ([`ServerConfig::param_headers`]). [`apply`](Self::apply)
    /// hands it to the router, and again whenever the tools change, unless the router's
    /// configuration came with a table of its own.
    ///
    /// [`ServerConfig::param_headers`]: mcp_proto::server::ServerConfig::param_headers
    pub fn param_header_table(&self) -> ParamHeaderTable {
        Self::param_headers_of(&self.server)
    }

    /// [`param_header_table`](Self::param_header_table) for a server not bound yet. A tool
    /// whose declarations are invalid has none checked (a conforming client drops such a
    /// tool).
    pub fn param_headers_of(server: &Server) -> ParamHeaderTable {
        let registry = server.registry();
        let schemas: Vec<_> = registry
            .tools
            .iter()
            .map(|t| {
                (
                    t.tool.name.as_str(),
                    serde_json::Value::Object(t.tool.input_schema.clone()),
                )
            })
            .collect();
        ParamHeaderTable::from_input_schemas(schemas.iter().map(|(n, s)| (*n, s)))
    }

    /// The server.
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// The service sessions, one per live router session.
    pub fn sessions(&self) -> impl Iterator<Item = &ServerSession> {
        self.sessions.values()
    }

    fn peer(&self, owner: Owner) -> Arc<BoundPeer> {
        Arc::new(BoundPeer {
            link: self.link.clone(),
            owner,
        })
    }

    fn session(&mut self, h: SessionHandle) -> ServerSession {
        if let Some(s) = self.sessions.get(&h) {
            return s.clone();
        }
        let s = self.server.session(self.peer(Owner::Session(h)));
        self.sessions.insert(h, s.clone());
        s
    }

    /// Where a message of `owner` related to `related` goes: that request's stream when it is
    /// in flight, else the session's GET stream; a sessionless request has only its own
    /// stream.
    fn target(&self, owner: Owner, related: Option<&RequestId>) -> Option<Target> {
        match owner {
            Owner::Request(h) => related.map(|_| Target::Request(h)),
            Owner::Session(s) => related
                .and_then(|id| self.by_id.get(&(s, id.clone())))
                .map(|h| Target::Request(*h))
                .or(Some(Target::Session(s))),
        }
    }

    /// Forgets a request (answered or cancelled).
    fn forget(&mut self, handle: RequestHandle) -> Option<(Option<SessionHandle>, RequestId)> {
        self.requests.remove(&handle);
        if self.telemetry.is_some() {
            crate::cancel::lock(&self.link.owners).remove(&Owner::Request(handle));
        }
        let (session, id) = self.handles.remove(&handle)?;
        if let Some(s) = session {
            self.by_id.remove(&(s, id.clone()));
        }
        Some((session, id))
    }

    /// Applies what the service queued, in order; then tells the client about server→client
    /// requests nobody waits for any more. Returns whether anything was applied.
    ///
    /// The first call also joins a clustered router to the server's cluster links: from then
    /// on the server's changes (a list changed, a resource updated) reach the
    /// `subscriptions/listen` streams of the other instances through this router, and theirs
    /// the ones here ([`ServerOutput::ClusterNotice`]).
    pub fn apply(&mut self, router: &mut Router, now: Instant) -> bool {
        // S-NEW-8: the router checks against data; it is rebuilt when the tools change.
        let generation = self.server.registry_generation();
        match self.param_headers {
            ParamHeaders::Unknown if router.config().param_headers.is_some() => {
                self.param_headers = ParamHeaders::Configured;
            }
            ParamHeaders::Configured => {}
            ParamHeaders::Ours(built) if built == generation => {}
            ParamHeaders::Unknown | ParamHeaders::Ours(_) => {
                router.set_param_headers(self.param_header_table());
                self.param_headers = ParamHeaders::Ours(generation);
            }
        }
        if !self.router_seen {
            self.router_seen = true;
            if router.is_clustered() {
                let voice: Arc<dyn ClusterVoice> = Arc::new(Voice(self.link.clone()));
                let id = self.server.join_cluster(Arc::downgrade(&voice));
                self.voice = Some((id, voice));
            }
        }
        let mut commands = self.link.queue.drain();
        let carried = commands.len();
        let any = carried > 0;
        for command in commands.drain(..) {
            match command {
                Command::Notify(owner, related, n) => {
                    if let Some(target) = self.target(owner, related.as_ref()) {
                        // A closed session or cancelled request drops it; nothing to do.
                        let _ = router.notify(now, target, n);
                    }
                }
                Command::NotifyChange(owner, n) => {
                    // A request's own session has no GET stream: nothing to tell it.
                    if let Some(Target::Session(s)) = self.target(owner, None)
                        && (!router.is_clustered() || router.holds_listen_stream(s))
                    {
                        let _ = router.notify(now, Target::Session(s), n);
                    }
                }
                Command::Request(owner, related, method, params, key) => {
                    let sent = match self.target(owner, related.as_ref()) {
                        Some(target) => router.send_request(now, target, &method, params, None),
                        None => Err(SendError::Stateless),
                    };
                    match sent {
                        Ok(oid) => {
                            self.key_to_oid.insert(key, oid);
                            self.oid_to_key.insert(oid, key);
                        }
                        Err(e) => {
                            let result = Err(peer_error(e));
                            self.link.end_outgoing(key, &result);
                            self.link.outbound.complete(&key, result);
                        }
                    }
                }
                Command::CloseStream(owner, id) => {
                    if let Some(Target::Request(h)) = self.target(owner, Some(&id)) {
                        // Not resumable: the answer goes on the open stream as usual.
                        let _ = router.close_for_polling(now, Target::Request(h));
                    }
                }
                Command::Respond(handle, outcome) => {
                    let session = self.forget(handle).and_then(|(s, _)| s);
                    if let Some(s) = session
                        && router.is_clustered()
                    {
                        self.share_state(router, now, s);
                    }
                    if let Some(outcome) = outcome {
                        // Cancelled meanwhile: the router refuses, and nothing is sent.
                        let _ = router.respond(now, handle, outcome);
                    }
                }
                Command::Notice(notice) => {
                    router.broadcast_notice(now, notice);
                }
                Command::Record(key, op) => match router.record_op(now, op) {
                    Some(ticket) => {
                        self.record_tickets.insert(ticket, key);
                    }
                    None => self.record_answer(
                        key,
                        StoreReply::Failed(StoreError("not a cluster member".into())),
                    ),
                },
            }
        }
        self.link.queue.recycle(commands, carried);
        for key in self.link.outbound.abandoned() {
            self.link.end_outgoing(key, &Err(PeerError::Cancelled));
            if let Some(oid) = self.key_to_oid.remove(&key) {
                self.oid_to_key.remove(&oid);
                let _ = router.cancel_request(now, oid);
            }
        }
        any
    }

    /// [`handle_output`](Self::handle_output), with the router that produced `output` at
    /// hand: with a [`Telemetry`] installed ([`Server::telemetry`]), its operations and
    /// sessions get the session id and protocol version from it. The drivers call this one.
    pub fn handle_output_in(
        &mut self,
        router: &Router,
        output: ServerOutput,
    ) -> Routed<ServerOutput> {
        let Some(telemetry) = self.telemetry.clone() else {
            return self.handle_output(output);
        };
        match output {
            ServerOutput::Request {
                handle,
                session,
                request,
                principal,
            } => {
                let version = match session {
                    Some(s) => router.session_version(s),
                    None => router.request_version(handle),
                };
                let mut op = Operation::new(
                    Side::Server,
                    Direction::Incoming,
                    &request.method,
                    request.params.as_deref(),
                );
                op.request_id = Some(telemetry::id_string(&request.id));
                op.protocol_version = version.map(|v| v.as_str().to_owned());
                op.session_id = session
                    .and_then(|s| router.session_id(s))
                    .map(str::to_owned);
                op.network = Self::network(router.request_client(handle));
                let owner = match session {
                    Some(s) => Owner::Session(s),
                    None => Owner::Request(handle),
                };
                crate::cancel::lock(&self.link.owners)
                    .insert(owner, (op.session_id.clone(), op.protocol_version.clone()));
                if let Some(s) = session {
                    let network = op.network.clone();
                    self.session_started(&*telemetry, s, op.protocol_version.clone(), network);
                }
                let meta = telemetry::meta_of(request.params.as_deref());
                let scope = telemetry.incoming(&op, meta.as_ref());
                Routed::Spawn(self.handle_request(handle, session, request, principal, Some(scope)))
            }
            ServerOutput::Notification {
                session,
                notification,
            } => {
                let version = session
                    .and_then(|s| router.session_version(s))
                    .map(|v| v.as_str().to_owned());
                if let Some(s) = session {
                    self.session_started(&*telemetry, s, version.clone(), Self::network(None));
                }
                let mut op = Operation::new(
                    Side::Server,
                    Direction::Incoming,
                    &notification.method,
                    notification.params.as_deref(),
                );
                op.protocol_version = version;
                op.session_id = session
                    .and_then(|s| router.session_id(s))
                    .map(str::to_owned);
                op.network = Self::network(None);
                let meta = telemetry::meta_of(notification.params.as_deref());
                let scope = telemetry.incoming(&op, meta.as_ref());
                let routed = self.handle_output(ServerOutput::Notification {
                    session,
                    notification,
                });
                scope.end(End::Ok);
                routed
            }
            other => self.handle_output(other),
        }
    }

    /// Forgets what the telemetry was told of an owner.
    fn forget_owner(&self, owner: Owner) {
        if self.telemetry.is_some() {
            crate::cancel::lock(&self.link.owners).remove(&owner);
        }
    }

    /// The connection facts the binding knows of (HTTP, over TCP).
    fn network(client: Option<mcp_proto::server::RequestClient>) -> Network {
        let Some(client) = client else {
            return Network::default();
        };
        Network {
            http_version: client.http_version.and_then(telemetry::http_version),
            peer_address: client.address.map(|a| a.to_string()),
            peer_port: client.port,
        }
    }

    /// Tells the observer of a session the first time it is seen.
    fn session_started(
        &mut self,
        telemetry: &dyn Telemetry,
        session: SessionHandle,
        version: Option<String>,
        network: Network,
    ) {
        if self.session_scopes.contains_key(&session) {
            return;
        }
        let scope = telemetry.session(&SessionInfo {
            side: Side::Server,
            protocol_version: version,
            network,
        });
        self.session_scopes.insert(session, scope);
    }

    /// Takes one router output: application outputs are consumed (a request becomes a
    /// handler future to spawn), transport outputs are given back.
    pub fn handle_output(&mut self, output: ServerOutput) -> Routed<ServerOutput> {
        match output {
            ServerOutput::Request {
                handle,
                session,
                request,
                principal,
            } => Routed::Spawn(self.handle_request(handle, session, request, principal, None)),
            ServerOutput::Notification {
                session,
                notification,
            } => {
                // A sessionless notification has no session to affect (stateless and
                // 2026-07-28 clients send none that matter; S-NEW-6: closing cancels).
                if let Some(h) = session {
                    self.session(h).handle_notification(notification);
                }
                Routed::Done
            }
            ServerOutput::Cancelled { handle, .. } => {
                let one_off = self.requests.get(&handle).cloned();
                if let Some((session, id)) = self.forget(handle) {
                    let s = session
                        .and_then(|h| self.sessions.get(&h))
                        .cloned()
                        .or(one_off);
                    if let Some(s) = s {
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
            ServerOutput::SessionLoaded { session, state } => {
                // A session another cluster instance created: restore what it stored.
                let s = self.session(session);
                if let Some(state) = &state {
                    s.restore_state(state);
                    self.exported.insert(session, state.clone());
                }
                Routed::Transport(ServerOutput::SessionLoaded { session, state })
            }
            ServerOutput::RecordAnswer { ticket, reply } => {
                if let Some(key) = self.record_tickets.remove(&ticket) {
                    self.record_answer(key, reply);
                }
                Routed::Done
            }
            ServerOutput::ClusterNotice { payload, .. } => {
                // Another instance's change: for the listen streams held here.
                if let Some((link, _)) = &self.voice {
                    self.server.cluster_notice(*link, &payload);
                }
                Routed::Done
            }
            ServerOutput::SessionUnloaded { session } => {
                // It lives on at another instance: not ended here.
                self.session_scopes.remove(&session);
                self.forget_owner(Owner::Session(session));
                self.exported.remove(&session);
                if let Some(s) = self.sessions.remove(&session) {
                    s.close();
                }
                Routed::Transport(ServerOutput::SessionUnloaded { session })
            }
            ServerOutput::SessionClosed { session, reason } => {
                self.forget_owner(Owner::Session(session));
                if let Some(scope) = self.session_scopes.remove(&session) {
                    scope.end(match reason {
                        CloseReason::IdleExpired => Some("timeout"),
                        CloseReason::InitializeFailed => Some("initialize_failed"),
                        _ => None,
                    });
                }
                self.exported.remove(&session);
                if let Some(s) = self.sessions.remove(&session) {
                    s.close();
                }
                Routed::Transport(ServerOutput::SessionClosed { session, reason })
            }
            other => Routed::Transport(other),
        }
    }

    /// In a cluster, hands the router a session's state when it changed since it was last
    /// handed over (before the answer of the request that changed it).
    fn share_state(&mut self, router: &mut Router, now: Instant, session: SessionHandle) {
        let Some(s) = self.sessions.get(&session) else {
            return;
        };
        let state = s.export_state();
        if self.exported.get(&session) != Some(&state) {
            self.exported.insert(session, state.clone());
            router.set_session_state(now, session, state);
        }
    }

    /// The store's answer to the server's record operation `key`.
    fn record_answer(&self, key: u64, reply: StoreReply) {
        if let Some(to) = crate::cancel::lock(&self.link.records).remove(&key) {
            let _ = to.send(reply);
        }
    }

    fn complete(&mut self, oid: OutboundId, result: PeerResult) {
        if let Some(key) = self.oid_to_key.remove(&oid) {
            self.key_to_oid.remove(&key);
            self.link.end_outgoing(key, &result);
            self.link.outbound.complete(&key, result);
        }
    }

    fn handle_request(
        &mut self,
        handle: RequestHandle,
        session: Option<SessionHandle>,
        request: Request,
        principal: Option<Box<str>>,
        scope: Option<Arc<dyn OperationScope>>,
    ) -> BoxFuture<'static, ()> {
        self.handles.insert(handle, (session, request.id.clone()));
        let service_session = match session {
            Some(s) => {
                self.by_id.insert((s, request.id.clone()), handle);
                self.session(s)
            }
            None => {
                let s = self.server.session(self.peer(Owner::Request(handle)));
                self.requests.insert(handle, s.clone());
                s
            }
        };
        // The router binds a session to the principal that created it, so the first request
        // names it for all of them.
        service_session.bind_principal(principal);
        let span = tracing::debug_span!(
            "rpc",
            rpc.method = &*request.method,
            tool = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        // The tool, prompt or resource, for the span and a panic's error line: read from the
        // params only when something would log it.
        let subject = if span.is_disabled() && !tracing::enabled!(tracing::Level::ERROR) {
            None
        } else {
            Subject::of_params(request.params.as_deref())
        };
        span.record("tool", subject.as_deref());
        let method = request.method.clone();
        let answer = service_session.handle_request(request);
        let ender = scope.clone();
        let mut guard = AnswerGuard {
            queue: self.link.queue.clone(),
            handle,
            answered: false,
        };
        let handler = async move {
            let mut answer = std::pin::pin!(answer);
            // A panic is caught here, to be logged (the panic hook still prints it); the guard
            // then answers `-32603`.
            let polled = std::future::poll_fn(|cx| {
                let poll = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    answer.as_mut().poll(cx)
                }));
                match poll {
                    Ok(Poll::Ready(response)) => Poll::Ready(Ok(response)),
                    Ok(Poll::Pending) => Poll::Pending,
                    Err(payload) => Poll::Ready(Err(payload)),
                }
            })
            .await;
            let response = match polled {
                Ok(response) => response,
                Err(payload) => {
                    if let Some(scope) = &ender {
                        scope.end(End::RpcError {
                            code: error_codes::INTERNAL_ERROR,
                            message: "the request handler panicked",
                        });
                    }
                    tracing::Span::current().record("outcome", "panic");
                    tracing::error!(
                        rpc.method = &*method,
                        tool = subject.as_deref(),
                        panic = panic_message(&*payload),
                        "request handler panicked"
                    );
                    return;
                }
            };
            let outcome = match &response {
                Some(r) if matches!(r.outcome, Outcome::Error(_)) => "error",
                Some(_) => "result",
                None => "cancelled",
            };
            tracing::Span::current().record("outcome", outcome);
            if let Some(scope) = &ender {
                scope.end(match &response {
                    Some(r) => telemetry::end_of(&method, &r.outcome),
                    None => End::Failed {
                        error_type: "cancelled",
                        message: "the client cancelled the request",
                    },
                });
            }
            guard.answered = true;
            guard
                .queue
                .push(Command::Respond(handle, response.map(|r| r.outcome)));
        };
        let handler: BoxFuture<'static, ()> =
            Box::pin(tracing::Instrument::instrument(handler, span));
        match scope {
            Some(scope) => scope.instrument(handler),
            None => handler,
        }
    }
}

/// What a panic said (its `&str` or `String` payload).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// The tool, resource or prompt a request is about, for logs: `params.name` (`tools/call`,
/// `prompts/get`) or `params.uri` (`resources/read`).
#[derive(serde::Deserialize)]
pub(crate) struct Subject<'a> {
    #[serde(borrow, default)]
    name: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    uri: Option<std::borrow::Cow<'a, str>>,
}

impl Subject<'_> {
    /// The subject of a request's params, if it names one.
    pub(crate) fn of_params(params: Option<&RawValue>) -> Option<String> {
        let s: Subject<'_> = serde_json::from_str(params?.get()).ok()?;
        s.name.or(s.uri).map(std::borrow::Cow::into_owned)
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

/// Whose table of parameter headers the router holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ParamHeaders {
    /// Not looked at yet (before the first `apply`).
    Unknown,
    /// The application configured one: left as it is.
    Configured,
    /// Built by the binding from this generation of the server's registry.
    Ours(u64),
}
