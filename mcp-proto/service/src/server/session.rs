//! [`ServerSession`]: one client's connection to a [`Server`], its [`SessionState`], and the
//! [`Peer`] trait through which the service talks to the transport.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::mrtr::RaceInput;
use super::{BoxFuture, RequestContext, Server};
use crate::cancel::{CancellationToken, lock, until_cancelled};
use crate::error::{PeerError, to_raw};
use crate::pending::ResponseFuture;
use crate::schema::{
    CancelledNotificationParams, ClientCapabilities, Implementation, LoggingLevel,
    LoggingMessageNotificationParams, methods,
};
use mcp_proto::ProtocolVersion;
use mcp_proto::jsonrpc::{
    ErrorObject, Notification, RawValue, Request, RequestId, Response, error_codes,
};

/// The service's link to one client, implemented by the transport driver (and by test
/// loopbacks).
///
/// # Obligations
///
/// - Messages MUST reach the client in the order the methods are called, and a notification
///   sent while a request is being handled MUST be sent before that request's response, so
///   that progress and log messages precede the result they belong to.
/// - `related` is the id of the client request the message belongs to (progress, logs,
///   sampling for a tool call): a Streamable HTTP transport puts such messages on that
///   request's stream. `None` means "not tied to a request" (the session's GET stream).
/// - The future [`request`](Self::request) returns MUST resolve once: with the client's
///   response, or with a [`PeerError`] (timeout, session closed, unsupported). When the
///   future is dropped first, the transport SHOULD tell the client to stop
///   ([`PendingRequests::abandoned`](crate::PendingRequests::abandoned) finds them).
pub trait Peer: Send + Sync + 'static {
    /// Sends a notification.
    fn notify(
        &self,
        related: Option<&RequestId>,
        notification: Notification,
    ) -> Result<(), PeerError>;

    /// Sends a request and returns the future of its response.
    fn request(
        &self,
        related: Option<&RequestId>,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> ResponseFuture;

    /// Sends a notification of a change of the server's (a list changed, a resource
    /// updated), not tied to a request. The server tells every instance of a cluster about
    /// such a change, so a clustered transport writes it only where the session's GET stream
    /// is held (once per session); the default sends it as [`notify`](Self::notify) does.
    fn notify_change(&self, notification: Notification) -> Result<(), PeerError> {
        self.notify(None, notification)
    }

    /// Closes the stream of the request `related` without answering it, so that the client
    /// reconnects and gets the answer on the resumed stream (SEP-1699 polling, 2025-11-25).
    /// The default refuses: not every transport can.
    fn close_stream(&self, related: &RequestId) -> Result<(), PeerError> {
        let _ = related;
        Err(PeerError::Unsupported(
            "this transport cannot close a request's stream".into(),
        ))
    }

    /// A future that completes after `duration` on the transport's clock. The default
    /// completes at once, for transports without timers.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        let _ = duration;
        Box::pin(std::future::ready(()))
    }

    /// Runs `work` in the background, beyond the request that started it (a task's work,
    /// see [`RequestContext::run_as_task`](super::RequestContext::run_as_task)). The default
    /// refuses: not every transport has a runtime to run it on.
    fn spawn(&self, work: BoxFuture<'static, ()>) -> Result<(), PeerError> {
        drop(work);
        Err(PeerError::Unsupported(
            "this transport cannot run work in the background".into(),
        ))
    }
}

/// What the server knows about a session: negotiated version, the client, its log level and
/// subscriptions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionState {
    /// The revision agreed in `initialize`.
    pub protocol_version: Option<ProtocolVersion>,
    /// The client's name and version, from `initialize`.
    pub client_info: Option<Implementation>,
    /// The client's capabilities, from `initialize`.
    pub client_capabilities: Option<ClientCapabilities>,
    /// The level set with `logging/setLevel`; `None` sends every message.
    pub log_level: Option<LoggingLevel>,
    /// The URIs subscribed to with `resources/subscribe`.
    pub subscriptions: BTreeSet<String>,
    /// Whether `notifications/initialized` arrived.
    pub initialized: bool,
}

/// What a session keeps of its [`SessionState`]: the same, except that the client's
/// identity and capabilities are kept as their compact JSON text (written by us, so never
/// validated again: the cluster store's bytes embed it as is) and parsed when asked for.
/// The parsed forms are 216 and 720 bytes inline (mostly `None`s) plus a string per field,
/// while most clients send `{"name":…,"version":…}` and `{}`: kept parsed, they made up half
/// of an idle session's memory.
#[derive(Debug, Default)]
pub(crate) struct StoredState {
    pub(crate) protocol_version: Option<ProtocolVersion>,
    client_info: Option<Box<RawValue>>,
    client_capabilities: Option<Box<RawValue>>,
    pub(crate) log_level: Option<LoggingLevel>,
    pub(crate) subscriptions: BTreeSet<String>,
    pub(crate) initialized: bool,
}

impl StoredState {
    /// Keeps the capabilities from `initialize`.
    pub(crate) fn set_client_capabilities(&mut self, caps: &ClientCapabilities) {
        // Serializing a schema type cannot fail (string keys only); if it ever did, the
        // capabilities read as absent, the conservative answer.
        self.client_capabilities = serde_json::value::to_raw_value(caps).ok();
    }

    /// Keeps the client's identity from `initialize`.
    pub(crate) fn set_client_info(&mut self, info: &Implementation) {
        // As for the capabilities: cannot fail, and would read as absent.
        self.client_info = serde_json::value::to_raw_value(info).ok();
    }

    /// The client's identity from `initialize`, if any.
    pub(crate) fn client_info(&self) -> Option<Implementation> {
        self.client_info
            .as_deref()
            .and_then(|json| serde_json::from_str(json.get()).ok())
    }

    /// The capabilities from `initialize`, if any.
    pub(crate) fn client_capabilities(&self) -> Option<ClientCapabilities> {
        self.client_capabilities
            .as_deref()
            .and_then(|json| serde_json::from_str(json.get()).ok())
    }

    /// The state as bytes a cluster store keeps (compact JSON).
    pub(crate) fn to_bytes(&self) -> bytes::Bytes {
        let wire = WireState {
            protocol_version: self.protocol_version.map(|v| v.as_str()),
            client_info: self.client_info.as_deref(),
            client_capabilities: self.client_capabilities.as_deref(),
            log_level: self.log_level,
            subscriptions: &self.subscriptions,
            initialized: self.initialized,
        };
        serde_json::to_vec(&wire)
            .map(Into::into)
            .unwrap_or_default()
    }

    /// The state [`to_bytes`](Self::to_bytes) wrote; `None` for bytes it did not write.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Option<StoredState> {
        let wire: WireStateOwned = serde_json::from_slice(bytes).ok()?;
        Some(StoredState {
            protocol_version: wire
                .protocol_version
                .as_deref()
                .and_then(ProtocolVersion::parse),
            client_info: wire.client_info,
            client_capabilities: wire.client_capabilities,
            log_level: wire.log_level,
            subscriptions: wire.subscriptions,
            initialized: wire.initialized,
        })
    }

    /// The public snapshot.
    pub(crate) fn snapshot(&self) -> SessionState {
        SessionState {
            protocol_version: self.protocol_version,
            client_info: self.client_info(),
            client_capabilities: self.client_capabilities(),
            log_level: self.log_level,
            subscriptions: self.subscriptions.clone(),
            initialized: self.initialized,
        }
    }
}

/// [`StoredState`] as the cluster store keeps it.
#[derive(serde::Serialize)]
struct WireState<'a> {
    #[serde(rename = "v", skip_serializing_if = "Option::is_none")]
    protocol_version: Option<&'static str>,
    #[serde(rename = "info", skip_serializing_if = "Option::is_none")]
    client_info: Option<&'a RawValue>,
    #[serde(rename = "caps", skip_serializing_if = "Option::is_none")]
    client_capabilities: Option<&'a RawValue>,
    #[serde(rename = "log", skip_serializing_if = "Option::is_none")]
    log_level: Option<LoggingLevel>,
    #[serde(rename = "subs", skip_serializing_if = "BTreeSet::is_empty")]
    subscriptions: &'a BTreeSet<String>,
    #[serde(rename = "init")]
    initialized: bool,
}

#[derive(serde::Deserialize)]
struct WireStateOwned {
    #[serde(rename = "v", default)]
    protocol_version: Option<String>,
    #[serde(rename = "info", default)]
    client_info: Option<Box<RawValue>>,
    #[serde(rename = "caps", default)]
    client_capabilities: Option<Box<RawValue>>,
    #[serde(rename = "log", default)]
    log_level: Option<LoggingLevel>,
    #[serde(rename = "subs", default)]
    subscriptions: BTreeSet<String>,
    #[serde(rename = "init", default)]
    initialized: bool,
}

pub(crate) struct SessionShared {
    pub(crate) server: Server,
    pub(crate) peer: Arc<dyn Peer>,
    pub(crate) state: Mutex<StoredState>,
    /// Ordered: no allocation while empty (an idle session: [`forget_inflight`] frees the
    /// node a `BTreeMap` keeps when its last entry goes), no hashing of client ids.
    inflight: Mutex<BTreeMap<RequestId, CancellationToken>>,
    closed: AtomicBool,
    /// Who the session's requests come from (set once, by the binding).
    pub(crate) principal: std::sync::OnceLock<Box<str>>,
}

/// One client's connection to a [`Server`]. Cheap to clone; clones share the session.
#[derive(Clone)]
pub struct ServerSession {
    pub(crate) shared: Arc<SessionShared>,
}

impl std::fmt::Debug for ServerSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSession")
            .field("state", &*lock(&self.shared.state))
            .field("inflight", &lock(&self.shared.inflight).len())
            .finish_non_exhaustive()
    }
}

/// Removes a request from the in-flight table when its future ends or is dropped.
struct InflightGuard {
    shared: Arc<SessionShared>,
    id: RequestId,
    token: CancellationToken,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        let mut inflight = lock(&self.shared.inflight);
        if inflight
            .get(&self.id)
            .is_some_and(|t| t.ptr_eq(&self.token))
        {
            forget_inflight(&mut inflight, &self.id);
        }
    }
}

/// Removes `id` from `inflight`; the last one out frees the map's node (a `BTreeMap` keeps
/// its root leaf, ≈ 300 bytes here, when emptied by removals: an idle session would hold it).
fn forget_inflight(
    inflight: &mut BTreeMap<RequestId, CancellationToken>,
    id: &RequestId,
) -> Option<CancellationToken> {
    let token = inflight.remove(id);
    if inflight.is_empty() {
        *inflight = BTreeMap::new();
    }
    token
}

impl ServerSession {
    pub(crate) fn new(server: Server, peer: Arc<dyn Peer>) -> Self {
        ServerSession {
            shared: Arc::new(SessionShared {
                server,
                peer,
                state: Mutex::new(StoredState::default()),
                inflight: Mutex::new(BTreeMap::new()),
                closed: AtomicBool::new(false),
                principal: std::sync::OnceLock::new(),
            }),
        }
    }

    /// The session's state as bytes for a cluster store ([`Router::set_session_state`]).
    ///
    /// [`Router::set_session_state`]: mcp_proto::server::Router::set_session_state
    pub fn export_state(&self) -> bytes::Bytes {
        lock(&self.shared.state).to_bytes()
    }

    /// Restores what [`export_state`](Self::export_state) wrote (on another instance);
    /// `false`, and nothing changed, for bytes it did not write.
    pub fn restore_state(&self, bytes: &[u8]) -> bool {
        match StoredState::from_bytes(bytes) {
            Some(state) => {
                *lock(&self.shared.state) = state;
                true
            }
            None => false,
        }
    }

    /// Binds the session to the principal its requests come from (the first binding wins:
    /// the router never hands one session requests of two principals).
    pub fn bind_principal(&self, principal: Option<Box<str>>) {
        if let Some(p) = principal {
            let _ = self.shared.principal.set(p);
        }
    }

    /// The principal the session is bound to, if authentication named one.
    pub fn principal(&self) -> Option<&str> {
        self.shared.principal.get().map(|p| &**p)
    }

    /// The server this session belongs to.
    pub fn server(&self) -> &Server {
        &self.shared.server
    }

    /// A snapshot of the session's state.
    pub fn state(&self) -> SessionState {
        lock(&self.shared.state).snapshot()
    }

    pub(crate) fn is_initialized(&self) -> bool {
        let state = lock(&self.shared.state);
        state.initialized || state.protocol_version.is_some()
    }

    pub(crate) fn is_subscribed(&self, uri: &str) -> bool {
        lock(&self.shared.state).subscriptions.contains(uri)
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// The context a handler of `request` gets, with a fresh cancellation token. (Used by
    /// [`handle_request`](Self::handle_request); a driver calling
    /// [`Server::handle_request`] directly builds contexts with it.)
    pub fn context(&self, request: &Request) -> RequestContext {
        RequestContext::new(self.shared.clone(), request, CancellationToken::new())
    }

    /// Handles a client request: the future resolves to the response to send, or to `None`
    /// when the request was cancelled (a cancelled request is not answered). The handler is
    /// dropped at its next `await` once cancelled.
    ///
    /// A request whose id is already in flight in this session gets an `-32600` error at
    /// once (the first one is untouched).
    pub fn handle_request(
        &self,
        request: Request,
    ) -> impl Future<Output = Option<Response>> + Send + 'static {
        let token = CancellationToken::new();
        let duplicate = {
            let mut inflight = lock(&self.shared.inflight);
            if inflight.contains_key(&request.id) {
                true
            } else {
                inflight.insert(request.id.clone(), token.clone());
                false
            }
        };
        let ctx = RequestContext::new(self.shared.clone(), &request, token.clone());
        let guard = (!duplicate).then(|| InflightGuard {
            shared: self.shared.clone(),
            id: request.id.clone(),
            token: token.clone(),
        });
        let server = self.shared.server.clone();
        async move {
            let _guard = guard;
            if duplicate {
                return Some(Response::error(
                    Some(request.id),
                    ErrorObject::new(
                        error_codes::INVALID_REQUEST,
                        "a request with this id is already in flight",
                    ),
                ));
            }
            match ctx.mrtr.clone() {
                None => until_cancelled(token, server.handle_request(ctx, request)).await,
                Some(Err(e)) => Some(Response::error(Some(request.id), e.to_error_object())),
                Some(Ok(mrtr)) => {
                    let id = request.id.clone();
                    let work = server.handle_request(ctx, request);
                    until_cancelled(token, RaceInput::new(work, mrtr, id)).await
                }
            }
        }
    }

    /// Handles a client notification: `notifications/initialized` marks the session ready,
    /// `notifications/cancelled` cancels the request it names; others are ignored.
    pub fn handle_notification(&self, notification: Notification) {
        match &*notification.method {
            methods::NOTIFICATION_INITIALIZED => lock(&self.shared.state).initialized = true,
            methods::NOTIFICATION_CANCELLED => {
                let params: Option<CancelledNotificationParams> = notification
                    .params
                    .as_deref()
                    .and_then(|p| serde_json::from_str(p.get()).ok());
                if let Some(id) = params.and_then(|p| p.request_id) {
                    self.cancel(&id);
                }
            }
            _ => {}
        }
    }

    /// Cancels the request `id` if it is in flight (its handler is dropped, and its future
    /// resolves to `None`). Returns whether it was.
    pub fn cancel(&self, id: &RequestId) -> bool {
        let token = forget_inflight(&mut lock(&self.shared.inflight), id);
        match token {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// How many requests are being handled.
    pub fn in_flight(&self) -> usize {
        lock(&self.shared.inflight).len()
    }

    /// Ends the session: cancels every request in flight and stops broadcasts to it.
    pub fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
        let tokens: Vec<_> = std::mem::take(&mut *lock(&self.shared.inflight))
            .into_values()
            .collect();
        for token in tokens {
            token.cancel();
        }
    }

    /// Sends a notification not tied to a request.
    pub fn notify(&self, notification: Notification) -> Result<(), PeerError> {
        if self.is_closed() {
            return Err(PeerError::Closed);
        }
        self.shared.peer.notify(None, notification)
    }

    /// Sends the notification of a change of the server's (see [`Peer::notify_change`]).
    pub fn notify_change(&self, notification: Notification) -> Result<(), PeerError> {
        if self.is_closed() {
            return Err(PeerError::Closed);
        }
        self.shared.peer.notify_change(notification)
    }

    /// Sends a log message not tied to a request, if the session's level lets it through.
    pub fn log(&self, level: LoggingLevel, logger: Option<&str>, data: serde_json::Value) {
        let threshold = lock(&self.shared.state).log_level;
        if threshold.is_some_and(|t| level < t) {
            return;
        }
        if let Some(n) = log_notification(level, logger, data) {
            let _ = self.notify(n);
        }
    }
}

pub(crate) fn log_notification(
    level: LoggingLevel,
    logger: Option<&str>,
    data: serde_json::Value,
) -> Option<Notification> {
    let params = LoggingMessageNotificationParams {
        level,
        logger: logger.map(str::to_owned),
        data,
        meta: None,
        extra: Default::default(),
    };
    to_raw(&params)
        .ok()
        .map(|raw| Notification::new(methods::NOTIFICATION_MESSAGE, Some(raw)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(caps: ClientCapabilities) -> StoredState {
        let mut s = StoredState {
            protocol_version: Some(ProtocolVersion::LATEST_LEGACY),
            ..StoredState::default()
        };
        let mut info = Implementation::new("probe", "1.2.3");
        info.title = Some("Probe".into());
        s.set_client_info(&info);
        s.set_client_capabilities(&caps);
        s
    }

    #[test]
    fn identity_and_capabilities_kept_as_text_read_back_the_same() {
        let empty = ClientCapabilities::default();
        let rich = ClientCapabilities {
            experimental: Some(BTreeMap::from([("x".to_owned(), Default::default())])),
            ..ClientCapabilities::default()
        };
        for caps in [empty, rich] {
            let s = stored(caps.clone());
            let snap = s.snapshot();
            assert_eq!(snap.client_capabilities.as_ref(), Some(&caps));
            let info = snap.client_info.clone().expect("client info");
            assert_eq!((&*info.name, &*info.version), ("probe", "1.2.3"));
            assert_eq!(info.title.as_deref(), Some("Probe"));
            // Through the cluster store's bytes and back.
            let back = StoredState::from_bytes(&s.to_bytes()).expect("reads what it wrote");
            assert_eq!(back.snapshot(), snap);
        }
        // `{}` is kept, and written as is.
        let s = stored(ClientCapabilities::default());
        assert_eq!(
            s.client_capabilities.as_deref().map(RawValue::get),
            Some("{}")
        );
        assert!(String::from_utf8_lossy(&s.to_bytes()).contains(r#""caps":{}"#));
    }
}
