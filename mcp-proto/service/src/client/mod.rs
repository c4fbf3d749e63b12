// S-NEW-5.
//! The client side of the service layer: [`Client`], typed methods for every request a
//! client sends, handlers for the requests a server sends (sampling, elicitation, roots),
//! per-request progress callbacks, and the stream of server notifications.
//!
//! # Theory of operation
//!
//! A [`Client`] talks to the transport through the [`ClientTransport`] trait (send a
//! message; cancel a request) and is fed by the driver:
//!
//! - every message from the server goes to [`Client::handle_message`]: responses complete
//!   the waiting calls, notifications reach progress callbacks and the [`Notifications`]
//!   streams, and a server request yields a future that the driver spawns and whose response
//!   it sends back;
//! - when the transport fails a request on its own (timeout, session gone), the driver calls
//!   [`Client::fail_request`]; when the connection ends, [`Client::close`].
//!
//! A call is an `async` method: it registers the request, sends it, and waits for the
//! answer. **Dropping the future cancels the request**: the entry is forgotten and the
//! transport is asked to tell the server ([`ClientTransport::cancel`], by default
//! `notifications/cancelled`). There is no clock here: put a timeout around a call with your
//! runtime's timer (dropping it on expiry cancels it) or rely on the transport's.
//!
//! # Decisions
//!
//! - **Ids** are integers from 1, unique per client.
//! - **Progress**: a call with a progress callback gets `_meta.progressToken` equal to its
//!   id; notifications with that token go to the callback (before the call's result, when the
//!   transport keeps order) and to the notification streams.
//! - **`list_*` fetch every page**, following `nextCursor`; a server that repeats a cursor,
//!   or hands out more than [`ClientBuilder::max_list_pages`] pages (100), gets an error
//!   instead of an endless loop. `*_page` methods fetch one.
//! - **Version**: `initialize` offers [`ProtocolVersion::LATEST_LEGACY`] (or the configured
//!   one) and accepts any revision this crate speaks; another answer is
//!   [`RequestError::UnsupportedVersion`]. Over a dual-era `ClientSession`
//!   (`EraMode::Auto`), `initialize` works in both eras: against a modern server the session
//!   answers it from `server/discover` with `protocolVersion` `2026-07-28`, and
//!   `notifications/initialized` is absorbed.
//! - **Multi round-trip requests** (2026-07-28): the session hands each input
//!   request of an `InputRequiredResult` to the client as a server request, so the same
//!   sampling / elicitation / roots handlers answer it; the session retries the call with
//!   the answers. A call's future resolves only with the final result.
//! - **Server requests without a handler** are answered `-32601`, and the matching
//!   capability is not declared.

mod notifications;
mod skills;
mod tasks;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use futures_channel::mpsc;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use notifications::{Events, Notifications, ServerNotification};
pub use tasks::{DEFAULT_TASK_POLL_BOUNDS, TaskHandle, ToolCall};

/// The default bound on the pages one listing follows ([`ClientBuilder::max_list_pages`]).
pub const DEFAULT_MAX_LIST_PAGES: usize = 100;

use super::cancel::{CancellationToken, lock, until_cancelled};
use super::error::to_raw;
use super::server::BoxFuture;
use super::skills::SkillLimits;
use super::{Error, PeerError, PendingRequests};
use crate::schema::{
    self, CallToolRequestParams, CallToolResult, CancelledNotificationParams, ClientCapabilities,
    Complete, CompleteRequestParams, CompleteResult, CompletionArgument, CompletionReference,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationCapability, EmptyResult, GetPrompt, GetPromptRequestParams, GetPromptResult,
    Implementation, Initialize, InitializeRequestParams, InitializeResult, JsonObject, ListPrompts,
    ListPromptsResult, ListResourceTemplates, ListResourceTemplatesResult, ListResources,
    ListResourcesResult, ListRootsResult, ListTools, ListToolsResult, LoggingLevel,
    PaginatedRequestParams, Ping, ProgressNotificationParams, ProgressToken, Prompt,
    PromptReference, ReadResource, ReadResourceRequestParams, ReadResourceResult, RequestParams,
    Resource, ResourceTemplate, Root, RootsCapability, SamplingCapability, SetLevel,
    SetLevelRequestParams, Subscribe, SubscribeRequestParams, Tool, Unsubscribe, methods,
};
use mcp_proto::ProtocolVersion;
use mcp_proto::jsonrpc::{
    ErrorObject, Message, Notification, Outcome, Request, RequestId, Response,
};

/// How a [`Client`] sends messages: implemented by the transport driver (and test
/// loopbacks).
///
/// Messages MUST be sent in the order of the calls.
pub trait ClientTransport: Send + Sync + 'static {
    /// Sends a message to the server.
    fn send(&self, message: Message) -> Result<(), PeerError>;

    /// Tells the server to stop working on request `id`, which the client no longer waits
    /// for. The default sends `notifications/cancelled`; a transport whose revision cancels
    /// by closing the request's stream (2026-07-28) does that instead.
    fn cancel(&self, id: &RequestId, reason: &str) -> Result<(), PeerError> {
        let params = CancelledNotificationParams::new(id.clone(), Some(reason.to_owned()));
        let raw = to_raw(&params).map_err(|e| PeerError::Failed(e.to_string()))?;
        self.send(Message::Notification(Notification::new(
            methods::NOTIFICATION_CANCELLED,
            Some(raw),
        )))
    }
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The server answered with a JSON-RPC error.
    #[error("the server answered {code}: {message}")]
    Rpc {
        /// The error code.
        code: i64,
        /// The message.
        message: String,
        /// The data, if any.
        data: Option<Value>,
    },
    /// The transport could not send the request or lost its answer; the [`PeerError`] says
    /// why, typed: [`PeerError::Timeout`], [`PeerError::Closed`], [`PeerError::Interrupted`],
    /// [`PeerError::Client`] (an HTTP status, authorization required, session expired …).
    #[error(transparent)]
    Transport(#[from] PeerError),
    /// The server's result did not have the expected shape.
    #[error("the server's result is malformed: {0}")]
    Malformed(String),
    /// The request could not be encoded (arguments that are not a JSON object, say).
    #[error("the request cannot be encoded: {0}")]
    Encode(String),
    /// The server chose a protocol revision this client does not speak.
    #[error("the server chose protocol version {0:?}, which this client does not speak")]
    UnsupportedVersion(String),
    /// A paginated list repeated a cursor.
    #[error("the server repeated the cursor {0:?}")]
    CursorLoop(String),
    /// The task the call went on as was cancelled (its status message, if any).
    #[error("the task was cancelled: {0}")]
    TaskCancelled(String),
    /// A paginated list went on for more pages than the client follows (the limit).
    #[error("the listing has more than {0} pages")]
    TooManyPages(usize),
    /// The server did not declare what the call needs (the capability or extension named),
    /// so the request was not sent.
    #[error("the server did not declare {0}")]
    NotDeclared(String),
}

impl RequestError {
    /// The JSON-RPC error code, for [`RequestError::Rpc`].
    pub fn code(&self) -> Option<i64> {
        match self {
            RequestError::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }

    fn from_object(e: &ErrorObject) -> Self {
        RequestError::Rpc {
            code: e.code,
            message: e.message.clone(),
            data: e.data_as().and_then(Result::ok),
        }
    }
}

/// A progress callback: called with each `notifications/progress` of its request.
pub type ProgressCallback = Arc<dyn Fn(ProgressNotificationParams) + Send + Sync>;

/// Options of one call.
#[derive(Clone, Default)]
pub struct RequestOptions {
    progress: Option<ProgressCallback>,
}

impl std::fmt::Debug for RequestOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestOptions")
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

impl RequestOptions {
    /// No options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks for progress (`_meta.progressToken`) and calls `callback` with each
    /// notification.
    pub fn on_progress(
        mut self,
        callback: impl Fn(ProgressNotificationParams) + Send + Sync + 'static,
    ) -> Self {
        self.progress = Some(Arc::new(callback));
        self
    }
}

type SamplingHandler = Arc<
    dyn Fn(CreateMessageRequestParams) -> BoxFuture<'static, Result<CreateMessageResult, Error>>
        + Send
        + Sync,
>;
type ElicitationHandler = Arc<
    dyn Fn(ElicitRequestParams) -> BoxFuture<'static, Result<ElicitResult, Error>> + Send + Sync,
>;
type RootsHandler =
    Arc<dyn Fn() -> BoxFuture<'static, Result<ListRootsResult, Error>> + Send + Sync>;

/// Builds a [`Client`]: identity, capabilities, and handlers for the server's requests.
#[must_use]
pub struct ClientBuilder {
    info: Implementation,
    capabilities: ClientCapabilities,
    version: ProtocolVersion,
    sampling: Option<SamplingHandler>,
    elicitation: Option<ElicitationHandler>,
    roots: Option<RootsHandler>,
    timer: Option<crate::bind::Sleep>,
    task_poll_bounds: (std::time::Duration, std::time::Duration),
    skill_limits: SkillLimits,
    max_list_pages: usize,
    telemetry: Option<Arc<dyn crate::telemetry::Telemetry>>,
    server_address: Option<(String, Option<u16>)>,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("info", &self.info)
            .field("capabilities", &self.capabilities)
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// A client called `name` at `version`.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        ClientBuilder {
            info: Implementation::new(name, version),
            capabilities: ClientCapabilities::default(),
            version: ProtocolVersion::LATEST_LEGACY,
            sampling: None,
            elicitation: None,
            roots: None,
            timer: None,
            task_poll_bounds: DEFAULT_TASK_POLL_BOUNDS,
            skill_limits: SkillLimits::default(),
            max_list_pages: DEFAULT_MAX_LIST_PAGES,
            telemetry: None,
            server_address: None,
        }
    }

    /// Installs an observer of the client's operations and sessions (OpenTelemetry's MCP
    /// conventions: the `mcp-otel` crate). See [`telemetry`](crate::telemetry). None by
    /// default.
    pub fn telemetry(mut self, telemetry: impl crate::telemetry::Telemetry) -> Self {
        self.telemetry = Some(Arc::new(telemetry));
        self
    }

    /// The server's host and port, as the telemetry reports them (`server.address`,
    /// `server.port`). The drivers' `Connect` sets them from the URL unless they are set.
    pub fn server_address(mut self, host: impl Into<String>, port: Option<u16>) -> Self {
        self.server_address = Some((host.into(), port));
        self
    }

    /// Whether [`server_address`](Self::server_address) was set.
    pub fn has_server_address(&self) -> bool {
        self.server_address.is_some()
    }

    /// Declares the Tasks extension (`io.modelcontextprotocol/tasks`): the server may then
    /// answer a `tools/call` with a task ([`Client::start_tool`]; [`Client::call_tool`]
    /// waits for it). See [`TaskHandle`].
    pub fn tasks(mut self) -> Self {
        self.capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(crate::schema::TASKS_EXTENSION.to_owned(), JsonObject::new());
        self
    }

    /// The runtime's timer, for waiting between a task's polls. The adapters set it; a
    /// client without one cannot [`wait`](TaskHandle::wait).
    pub fn timer(mut self, sleep: crate::bind::Sleep) -> Self {
        self.timer = Some(sleep);
        self
    }

    /// Whether a timer was set ([`timer`](Self::timer)).
    pub fn has_timer(&self) -> bool {
        self.timer.is_some()
    }

    /// Keeps the poll interval a server asks for (`pollIntervalMs`) within `min..=max`
    /// (default [`DEFAULT_TASK_POLL_BOUNDS`]: 100 ms to 30 s). `min` is raised to 1 ms and
    /// `max` to `min`.
    pub fn task_poll_interval(
        mut self,
        min: std::time::Duration,
        max: std::time::Duration,
    ) -> Self {
        let min = min.max(std::time::Duration::from_millis(1));
        self.task_poll_bounds = (min, max.max(min));
        self
    }

    /// Sets the client's [`Implementation`].
    pub fn info(mut self, info: Implementation) -> Self {
        self.info = info;
        self
    }

    /// Declares these capabilities; the handlers below add theirs.
    pub fn capabilities(mut self, capabilities: ClientCapabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// The revision `initialize` offers (default [`ProtocolVersion::LATEST_LEGACY`]).
    pub fn protocol_version(mut self, version: ProtocolVersion) -> Self {
        self.version = version;
        self
    }

    /// How many pages a listing follows (`list_tools`, `list_resources`,
    /// `list_resource_templates`, `list_prompts`, `list_skills`, `read_directory`) before it
    /// gives up with [`RequestError::TooManyPages`]: a server that hands out cursors forever
    /// cannot keep a call busy. Default [`DEFAULT_MAX_LIST_PAGES`]; at least 1.
    pub fn max_list_pages(mut self, pages: usize) -> Self {
        self.max_list_pages = pages.max(1);
        self
    }

    /// The limits the Skills calls hold a server to (default [`SkillLimits::default`]): the
    /// files and bytes of a skill [`Client::load_skill`] accepts.
    pub fn skill_limits(mut self, limits: SkillLimits) -> Self {
        self.skill_limits = limits;
        self
    }

    /// Answers `sampling/createMessage` (and declares `sampling`).
    pub fn sampling_handler<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(CreateMessageRequestParams) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<CreateMessageResult, Error>> + Send + 'static,
    {
        self.sampling = Some(Arc::new(move |p| Box::pin(handler(p))));
        self.capabilities
            .sampling
            .get_or_insert_with(SamplingCapability::default);
        self
    }

    /// Answers `elicitation/create` (and declares `elicitation`, form mode).
    pub fn elicitation_handler<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(ElicitRequestParams) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ElicitResult, Error>> + Send + 'static,
    {
        self.elicitation = Some(Arc::new(move |p| Box::pin(handler(p))));
        self.capabilities
            .elicitation
            .get_or_insert_with(ElicitationCapability::default);
        self
    }

    /// Answers `roots/list` with `handler` (and declares `roots` with `listChanged`).
    pub fn roots_handler<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ListRootsResult, Error>> + Send + 'static,
    {
        self.roots = Some(Arc::new(move || Box::pin(handler())));
        self.capabilities
            .roots
            .get_or_insert_with(|| RootsCapability {
                list_changed: Some(true),
                ..RootsCapability::default()
            });
        self
    }

    /// Answers `roots/list` with these roots.
    pub fn roots(self, roots: Vec<Root>) -> Self {
        self.roots_handler(move || {
            let roots = roots.clone();
            async move {
                Ok(ListRootsResult {
                    roots,
                    ..ListRootsResult::default()
                })
            }
        })
    }

    /// The client, sending through `transport`.
    pub fn build(self, transport: Arc<dyn ClientTransport>) -> Client {
        Client {
            inner: Arc::new(ClientInner {
                transport,
                info: self.info,
                capabilities: self.capabilities,
                version: self.version,
                sampling: self.sampling,
                elicitation: self.elicitation,
                roots: self.roots,
                timer: self.timer,
                task_poll_bounds: self.task_poll_bounds,
                skill_limits: self.skill_limits,
                max_list_pages: self.max_list_pages,
                telemetry: self.telemetry,
                facts: Mutex::new(ConnectionFacts {
                    network: crate::telemetry::Network {
                        peer_address: self.server_address.as_ref().map(|(h, _)| h.clone()),
                        peer_port: self.server_address.and_then(|(_, p)| p),
                        http_version: None,
                    },
                    ..ConnectionFacts::default()
                }),
                next_id: AtomicI64::new(1),
                closed: AtomicBool::new(false),
                pending: PendingRequests::new(),
                progress: Mutex::new(HashMap::new()),
                subscribers: Mutex::new(Vec::new()),
                event_subscribers: Mutex::new(Vec::new()),
                listen_opened: AtomicBool::new(false),
                server: Mutex::new(None),
                serving: Mutex::new(HashMap::new()),
            }),
        }
    }
}

struct ClientInner {
    transport: Arc<dyn ClientTransport>,
    info: Implementation,
    capabilities: ClientCapabilities,
    version: ProtocolVersion,
    sampling: Option<SamplingHandler>,
    elicitation: Option<ElicitationHandler>,
    roots: Option<RootsHandler>,
    /// The runtime's timer (task polling).
    timer: Option<crate::bind::Sleep>,
    task_poll_bounds: (std::time::Duration, std::time::Duration),
    skill_limits: SkillLimits,
    /// The most pages a listing follows.
    max_list_pages: usize,
    /// The observer ([`ClientBuilder::telemetry`]) and what it is told of the connection.
    telemetry: Option<Arc<dyn crate::telemetry::Telemetry>>,
    facts: Mutex<ConnectionFacts>,
    next_id: AtomicI64,
    /// Set by [`Client::close`]: later calls fail at once instead of waiting for a
    /// connection that will never answer them.
    closed: AtomicBool,
    pending: PendingRequests<RequestId>,
    progress: Mutex<HashMap<ProgressToken, ProgressCallback>>,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<ServerNotification>>>,
    /// Subscribers of the transport's events (see [`Client::events`]).
    event_subscribers: Mutex<Vec<mpsc::UnboundedSender<mcp_proto::client::ClientEvent>>>,
    /// Whether a listening stream has opened at least once (see [`Client::listen_opened`]).
    listen_opened: AtomicBool,
    server: Mutex<Option<InitializeResult>>,
    /// Server requests being answered, cancellable by `notifications/cancelled`.
    serving: Mutex<HashMap<RequestId, CancellationToken>>,
}

/// What the transport knows of the connection, for the telemetry (kept by the binding).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ConnectionFacts {
    pub(crate) session_id: Option<String>,
    pub(crate) protocol_version: Option<String>,
    pub(crate) network: crate::telemetry::Network,
}

/// A typed MCP client. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("info", &self.inner.info)
            .field("pending", &self.inner.pending.len())
            .finish_non_exhaustive()
    }
}

/// Forgets a call whose future was dropped before its answer, and cancels it.
struct CallGuard {
    inner: Arc<ClientInner>,
    id: RequestId,
    token: Option<ProgressToken>,
    done: bool,
    /// The call's telemetry, ended here when the call is dropped unanswered.
    scope: Option<Arc<dyn crate::telemetry::OperationScope>>,
}

impl CallGuard {
    /// The call ended: tells the telemetry how.
    fn end(&mut self, end: crate::telemetry::End<'_>) {
        self.done = true;
        if let Some(scope) = self.scope.take() {
            scope.end(end);
        }
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if let Some(scope) = self.scope.take() {
            scope.end(crate::telemetry::End::Failed {
                error_type: "cancelled",
                message: "the client stopped waiting",
            });
        }
        if let Some(token) = &self.token {
            lock(&self.inner.progress).remove(token);
        }
        if !self.done && self.inner.pending.remove(&self.id) {
            // The connection may be gone; then there is nobody to tell.
            let _ = self
                .inner
                .transport
                .cancel(&self.id, "the client stopped waiting");
        }
    }
}

/// Puts `_meta.progressToken` into serialized params.
fn with_progress_token(params: &mut Value, token: &ProgressToken) {
    if !params.is_object() {
        *params = Value::Object(JsonObject::new());
    }
    if let Value::Object(map) = params {
        let meta = map
            .entry("_meta")
            .or_insert_with(|| Value::Object(JsonObject::new()));
        if !meta.is_object() {
            *meta = Value::Object(JsonObject::new());
        }
        if let (Value::Object(meta), Ok(token)) = (meta, serde_json::to_value(token)) {
            meta.insert(schema::meta_keys::PROGRESS_TOKEN.to_owned(), token);
        }
    }
}

/// Collects every page: `fetch(cursor)` gives one page and the next cursor; a repeated
/// cursor is an error rather than an endless loop, and so is a page beyond `max_pages`.
async fn all_pages<T, F, Fut>(max_pages: usize, mut fetch: F) -> Result<Vec<T>, RequestError>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<String>), RequestError>>,
{
    let mut all = Vec::new();
    let mut seen = HashSet::new();
    let mut cursor = None;
    for _ in 0..max_pages {
        let (items, next) = fetch(cursor).await?;
        all.extend(items);
        match next {
            Some(c) if !seen.insert(c.clone()) => return Err(RequestError::CursorLoop(c)),
            Some(c) => cursor = Some(c),
            None => return Ok(all),
        }
    }
    Err(RequestError::TooManyPages(max_pages))
}

impl Client {
    /// A builder for a client called `name` at `version`.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(name, version)
    }

    /// The capabilities `initialize` declares.
    pub fn capabilities(&self) -> &ClientCapabilities {
        &self.inner.capabilities
    }

    /// The server's `initialize` result, once initialized.
    pub fn server_info(&self) -> Option<InitializeResult> {
        lock(&self.inner.server).clone()
    }

    /// The revision agreed in `initialize`.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        lock(&self.inner.server)
            .as_ref()
            .and_then(|r| ProtocolVersion::parse(&r.protocol_version))
    }

    /// How many calls wait for an answer.
    pub fn pending(&self) -> usize {
        self.inner.pending.len()
    }

    // ---- driver side -------------------------------------------------------------------

    /// Feeds a message from the server. A server request yields the future of its answer:
    /// spawn it and send its output (`None`: the server cancelled it; send nothing).
    pub fn handle_message(&self, message: Message) -> Option<BoxFuture<'static, Option<Response>>> {
        match message {
            Message::Request(r) => Some(Box::pin(self.handle_request(r))),
            Message::Notification(n) => {
                self.handle_notification(n);
                None
            }
            Message::Response(r) => {
                self.handle_response(r);
                None
            }
        }
    }

    /// Completes the call `response` answers. Returns `false` for an unknown or late answer.
    pub fn handle_response(&self, response: Response) -> bool {
        match response.id.clone() {
            Some(id) => self.inner.pending.complete(&id, Ok(response)),
            None => false,
        }
    }

    /// Fails the call `id` with `error` (the transport gave up on it).
    pub fn fail_request(&self, id: &RequestId, error: PeerError) -> bool {
        self.inner.pending.complete(id, Err(error))
    }

    /// The connection ended: every waiting call fails with [`PeerError::Closed`], requests
    /// being answered are cancelled, and the notification streams end.
    pub fn close(&self) {
        // The flag first: a call registering concurrently either sees it or is failed below.
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.pending.fail_all(PeerError::Closed);
        let serving: Vec<_> = lock(&self.inner.serving).drain().map(|(_, t)| t).collect();
        for token in serving {
            token.cancel();
        }
        lock(&self.inner.subscribers).clear();
        lock(&self.inner.event_subscribers).clear();
    }

    /// Feeds a notification from the server: progress goes to its call's callback, and
    /// everything to the notification streams; `notifications/cancelled` also cancels the
    /// server request it names.
    pub fn handle_notification(&self, notification: Notification) {
        let typed = ServerNotification::from_notification(notification);
        match &typed {
            ServerNotification::Progress(p) => {
                let callback = lock(&self.inner.progress).get(&p.progress_token).cloned();
                if let Some(callback) = callback {
                    callback(p.clone());
                }
            }
            ServerNotification::Cancelled(c) => {
                if let Some(id) = &c.request_id {
                    let token = lock(&self.inner.serving).remove(id);
                    if let Some(token) = token {
                        token.cancel();
                    }
                }
            }
            _ => {}
        }
        lock(&self.inner.subscribers).retain(|tx| tx.unbounded_send(typed.clone()).is_ok());
    }

    /// Answers a server request with the registered handler: the future resolves to the
    /// response, or `None` when the server cancelled the request.
    pub fn handle_request(
        &self,
        request: Request,
    ) -> impl Future<Output = Option<Response>> + Send + 'static {
        let token = CancellationToken::new();
        lock(&self.inner.serving).insert(request.id.clone(), token.clone());
        let inner = self.inner.clone();
        async move {
            let id = request.id.clone();
            let answer = until_cancelled(token, Self::serve(inner.clone(), request)).await;
            lock(&inner.serving).remove(&id);
            answer
        }
    }

    async fn serve(inner: Arc<ClientInner>, request: Request) -> Response {
        fn parse<T: DeserializeOwned>(request: &Request) -> Result<T, Error> {
            serde_json::from_str(request.params.as_deref().map_or("{}", |p| p.get()))
                .map_err(|e| Error::invalid_params(format_args!("invalid params: {e}")))
        }
        fn out<T: Serialize>(
            r: Result<T, Error>,
        ) -> Result<Box<serde_json::value::RawValue>, Error> {
            r.and_then(|v| to_raw(&v).map_err(Error::internal))
        }
        let result = match &*request.method {
            methods::PING => out(Ok(EmptyResult::default())),
            methods::SAMPLING_CREATE_MESSAGE if inner.sampling.is_some() => {
                match (parse(&request), &inner.sampling) {
                    (Ok(p), Some(h)) => out(h(p).await),
                    (Err(e), _) => Err(e),
                    (Ok(_), None) => Err(Error::method_not_found(&request.method)),
                }
            }
            methods::ELICITATION_CREATE if inner.elicitation.is_some() => {
                match (parse(&request), &inner.elicitation) {
                    (Ok(p), Some(h)) => out(h(p).await),
                    (Err(e), _) => Err(e),
                    (Ok(_), None) => Err(Error::method_not_found(&request.method)),
                }
            }
            methods::ROOTS_LIST if inner.roots.is_some() => match &inner.roots {
                Some(h) => out(h().await),
                None => Err(Error::method_not_found(&request.method)),
            },
            other => Err(Error::method_not_found(other)),
        };
        match result {
            Ok(raw) => Response::result(request.id, raw),
            Err(e) => Response::error(Some(request.id), e.to_error_object()),
        }
    }

    /// A new stream of the server's notifications, from now on.
    pub fn notifications(&self) -> Notifications {
        let (tx, rx) = mpsc::unbounded();
        lock(&self.inner.subscribers).push(tx);
        Notifications { rx }
    }

    /// A stream of the transport's events (what [`ClientSession`](mcp_proto::client::ClientSession)
    /// reports: ready, listening opened or given up, reconnects, expiry, limits, …) from now on,
    /// as the binding ([`ClientBinding`](crate::bind::ClientBinding)) sees them. Ends
    /// when the client closes. Each subscriber gets every event.
    pub fn events(&self) -> Events {
        let (tx, rx) = mpsc::unbounded();
        lock(&self.inner.event_subscribers).push(tx);
        Events { rx }
    }

    /// Resolves once a listening stream (the legacy GET stream, or 2026-07-28
    /// `subscriptions/listen`) has opened, at any time since the client was built; at once if
    /// it already has. Resolves to `false` when the client closes first. For an app that
    /// needs what the server sends unasked before it calls a tool that triggers it.
    pub async fn listen_opened(&self) -> bool {
        let mut events = self.events();
        if self.inner.listen_opened.load(Ordering::SeqCst) {
            return true;
        }
        while let Some(event) = events.next().await {
            if Self::opens_listening(&event) {
                return true;
            }
        }
        self.inner.listen_opened.load(Ordering::SeqCst)
    }

    fn opens_listening(event: &mcp_proto::client::ClientEvent) -> bool {
        matches!(
            event,
            mcp_proto::client::ClientEvent::ListenOpened { .. }
                | mcp_proto::client::ClientEvent::Resumed {
                    role: mcp_proto::client::StreamRole::Listen,
                    ..
                }
        )
    }

    /// Feeds a transport event (the binding calls it for every
    /// [`ClientEvent`](mcp_proto::client::ClientEvent) the session reports): it goes to every
    /// [`events`](Self::events) stream.
    pub fn handle_event(&self, event: &mcp_proto::client::ClientEvent) {
        if Self::opens_listening(event) {
            self.inner.listen_opened.store(true, Ordering::SeqCst);
        }
        lock(&self.inner.event_subscribers).retain(|tx| tx.unbounded_send(event.clone()).is_ok());
    }

    // ---- calls -------------------------------------------------------------------------

    /// Sends request `R` and waits for its result.
    pub async fn request<R: schema::RequestKind>(
        &self,
        params: R::Params,
    ) -> Result<R::Result, RequestError> {
        self.request_with::<R>(params, RequestOptions::default())
            .await
    }

    /// [`request`](Self::request) with options (a progress callback).
    pub async fn request_with<R: schema::RequestKind>(
        &self,
        params: R::Params,
        options: RequestOptions,
    ) -> Result<R::Result, RequestError> {
        let raw = self.call_raw(R::METHOD, &params, options).await?;
        serde_json::from_str(raw.get()).map_err(|e| RequestError::Malformed(e.to_string()))
    }

    async fn call_raw<P: Serialize>(
        &self,
        method: &str,
        params: &P,
        options: RequestOptions,
    ) -> Result<Box<serde_json::value::RawValue>, RequestError> {
        use crate::telemetry::End;
        let n = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let id = RequestId::Number(n);
        let mut value =
            serde_json::to_value(params).map_err(|e| RequestError::Encode(e.to_string()))?;
        let token = options.progress.map(|callback| {
            let token = ProgressToken::Number(n);
            with_progress_token(&mut value, &token);
            lock(&self.inner.progress).insert(token.clone(), callback);
            token
        });
        let scope = self
            .inner
            .telemetry
            .as_ref()
            .map(|t| self.start_outgoing(&**t, method, Some(&id), &mut value));
        let raw = to_raw(&value).map_err(|e| RequestError::Encode(e.to_string()))?;
        let mut guard = CallGuard {
            inner: self.inner.clone(),
            id: id.clone(),
            token,
            done: false,
            scope,
        };
        let answer = self.inner.pending.register(id.clone());
        if self.inner.closed.load(Ordering::SeqCst) {
            // Closed before this call registered: nothing would ever answer it.
            guard.end(End::Failed {
                error_type: "closed",
                message: "the client is closed",
            });
            self.inner.pending.remove(&guard.id);
            return Err(PeerError::Closed.into());
        }
        if let Err(e) =
            self.inner
                .transport
                .send(Message::Request(Request::new(id, method, Some(raw))))
        {
            guard.end(End::Failed {
                error_type: crate::telemetry::failure_class(&e),
                message: &e.to_string(),
            });
            self.inner.pending.remove(&guard.id);
            return Err(e.into());
        }
        let response = answer.await;
        match response {
            Ok(response) => {
                guard.end(crate::telemetry::end_of(method, &response.outcome));
                match response.outcome {
                    Outcome::Result(raw) => Ok(raw),
                    Outcome::Error(e) => Err(RequestError::from_object(&e)),
                }
            }
            Err(e) => {
                guard.end(End::Failed {
                    error_type: crate::telemetry::failure_class(&e),
                    message: &e.to_string(),
                });
                Err(e.into())
            }
        }
    }

    /// Starts a call's outgoing operation, which may write trace context into its
    /// `params._meta`.
    fn start_outgoing(
        &self,
        telemetry: &dyn crate::telemetry::Telemetry,
        method: &str,
        id: Option<&RequestId>,
        params: &mut Value,
    ) -> Arc<dyn crate::telemetry::OperationScope> {
        use crate::telemetry::{Direction, Operation, Side};
        let mut op = Operation::new(Side::Client, Direction::Outgoing, method, None);
        if op.has_subject() {
            let subject = params
                .get("name")
                .or_else(|| params.get("uri"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            op.set_subject(subject);
        }
        op.request_id = id.map(crate::telemetry::id_string);
        {
            let facts = lock(&self.inner.facts);
            op.session_id = facts.session_id.clone();
            op.protocol_version = facts.protocol_version.clone();
            op.network = facts.network.clone();
        }
        let mut meta = match params.as_object_mut().and_then(|m| m.remove("_meta")) {
            Some(Value::Object(meta)) => meta,
            _ => JsonObject::new(),
        };
        let scope = telemetry.outgoing(&op, &mut meta);
        if !meta.is_empty() {
            if !params.is_object() {
                *params = Value::Object(JsonObject::new());
            }
            if let Some(map) = params.as_object_mut() {
                map.insert("_meta".to_owned(), Value::Object(meta));
            }
        }
        scope
    }

    /// The binding's view of the connection, for the telemetry: updated when it changed.
    pub(crate) fn note_connection(&self, session_id: Option<&str>, version: Option<&str>) {
        let mut facts = lock(&self.inner.facts);
        if facts.session_id.as_deref() != session_id {
            facts.session_id = session_id.map(str::to_owned);
        }
        if facts.protocol_version.as_deref() != version {
            facts.protocol_version = version.map(str::to_owned);
        }
    }

    /// The installed telemetry.
    pub(crate) fn telemetry(&self) -> Option<&Arc<dyn crate::telemetry::Telemetry>> {
        self.inner.telemetry.as_ref()
    }

    /// The connection's facts, for the telemetry.
    pub(crate) fn connection_facts(&self) -> ConnectionFacts {
        lock(&self.inner.facts).clone()
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Option<Value>) -> Result<(), RequestError> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(PeerError::Closed.into());
        }
        // The session absorbs the app's `notifications/initialized` and sends its own: no
        // operation of ours goes on the wire.
        let (params, scope) = match &self.inner.telemetry {
            Some(t) if method != methods::NOTIFICATION_INITIALIZED => {
                let mut value = params.unwrap_or(Value::Null);
                let scope = self.start_outgoing(&**t, method, None, &mut value);
                ((!value.is_null()).then_some(value), Some(scope))
            }
            _ => (params, None),
        };
        let raw = params
            .map(|p| to_raw(&p))
            .transpose()
            .map_err(|e| RequestError::Encode(e.to_string()))?;
        let sent = self
            .inner
            .transport
            .send(Message::Notification(Notification::new(method, raw)));
        if let Some(scope) = scope {
            match &sent {
                Ok(()) => scope.end(crate::telemetry::End::Ok),
                Err(e) => scope.end(crate::telemetry::End::Failed {
                    error_type: crate::telemetry::failure_class(e),
                    message: &e.to_string(),
                }),
            }
        }
        sent.map_err(Into::into)
    }

    /// `initialize`, then `notifications/initialized`: declares the client's capabilities
    /// and info, and learns the server's.
    pub async fn initialize(&self) -> Result<InitializeResult, RequestError> {
        let params = InitializeRequestParams {
            protocol_version: self.inner.version.as_str().to_owned(),
            capabilities: self.inner.capabilities.clone(),
            client_info: self.inner.info.clone(),
            ..InitializeRequestParams::default()
        };
        let result = self.request::<Initialize>(params).await?;
        // A legacy revision the server negotiated, or — on a `ClientSession` that probed a
        // modern server (`EraMode::Auto`/`Modern`) — the modern revision, with the answer the
        // session built from `server/discover` (S-NEW-4, S-NEW-10).
        if ProtocolVersion::parse(&result.protocol_version).is_none() {
            return Err(RequestError::UnsupportedVersion(result.protocol_version));
        }
        *lock(&self.inner.server) = Some(result.clone());
        self.notify(methods::NOTIFICATION_INITIALIZED, None)?;
        Ok(result)
    }

    /// `ping`.
    pub async fn ping(&self) -> Result<(), RequestError> {
        self.request::<Ping>(RequestParams::default())
            .await
            .map(drop)
    }

    /// One page of `tools/list`.
    pub async fn list_tools_page(
        &self,
        cursor: Option<String>,
    ) -> Result<ListToolsResult, RequestError> {
        self.request::<ListTools>(PaginatedRequestParams {
            cursor,
            ..PaginatedRequestParams::default()
        })
        .await
    }

    /// Every tool, following `nextCursor`.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, RequestError> {
        all_pages(self.inner.max_list_pages, |cursor| async move {
            self.list_tools_page(cursor)
                .await
                .map(|p| (p.tools, p.next_cursor))
        })
        .await
    }

    /// Calls the tool `name` with `arguments` (anything that serializes to a JSON object,
    /// e.g. `json!({...})`, or `()` for none).
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: impl Serialize,
    ) -> Result<CallToolResult, RequestError> {
        self.call_tool_with(name, arguments, RequestOptions::default())
            .await
    }

    /// [`call_tool`](Self::call_tool) with options (a progress callback).
    pub async fn call_tool_with(
        &self,
        name: &str,
        arguments: impl Serialize,
        options: RequestOptions,
    ) -> Result<CallToolResult, RequestError> {
        let params = Self::tool_params(name, arguments)?;
        let raw = self.call_raw(methods::TOOLS_CALL, &params, options).await?;
        // A task (only to a client that declared the extension) is waited for.
        match self.tool_call(&raw)? {
            ToolCall::Done(result) => Ok(result),
            ToolCall::Task(mut task) => task.wait().await,
        }
    }

    fn tool_params(
        name: &str,
        arguments: impl Serialize,
    ) -> Result<CallToolRequestParams, RequestError> {
        let arguments = match serde_json::to_value(arguments) {
            Ok(Value::Object(o)) => Some(o),
            Ok(Value::Null) => None,
            Ok(other) => {
                return Err(RequestError::Encode(format!(
                    "tool arguments must be a JSON object, not {other}"
                )));
            }
            Err(e) => return Err(RequestError::Encode(e.to_string())),
        };
        Ok(CallToolRequestParams {
            name: name.to_owned(),
            arguments,
            ..CallToolRequestParams::default()
        })
    }

    /// One page of `resources/list`.
    pub async fn list_resources_page(
        &self,
        cursor: Option<String>,
    ) -> Result<ListResourcesResult, RequestError> {
        self.request::<ListResources>(PaginatedRequestParams {
            cursor,
            ..PaginatedRequestParams::default()
        })
        .await
    }

    /// Every resource, following `nextCursor`.
    pub async fn list_resources(&self) -> Result<Vec<Resource>, RequestError> {
        all_pages(self.inner.max_list_pages, |cursor| async move {
            self.list_resources_page(cursor)
                .await
                .map(|p| (p.resources, p.next_cursor))
        })
        .await
    }

    /// One page of `resources/templates/list`.
    pub async fn list_resource_templates_page(
        &self,
        cursor: Option<String>,
    ) -> Result<ListResourceTemplatesResult, RequestError> {
        self.request::<ListResourceTemplates>(PaginatedRequestParams {
            cursor,
            ..PaginatedRequestParams::default()
        })
        .await
    }

    /// Every resource template, following `nextCursor`.
    pub async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, RequestError> {
        all_pages(self.inner.max_list_pages, |cursor| async move {
            self.list_resource_templates_page(cursor)
                .await
                .map(|p| (p.resource_templates, p.next_cursor))
        })
        .await
    }

    /// `resources/read`.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, RequestError> {
        self.request::<ReadResource>(ReadResourceRequestParams {
            uri: uri.to_owned(),
            ..ReadResourceRequestParams::default()
        })
        .await
    }

    /// `resources/subscribe`.
    pub async fn subscribe(&self, uri: &str) -> Result<(), RequestError> {
        self.request::<Subscribe>(SubscribeRequestParams {
            uri: uri.to_owned(),
            ..SubscribeRequestParams::default()
        })
        .await
        .map(drop)
    }

    /// `resources/unsubscribe`.
    pub async fn unsubscribe(&self, uri: &str) -> Result<(), RequestError> {
        self.request::<Unsubscribe>(SubscribeRequestParams {
            uri: uri.to_owned(),
            ..SubscribeRequestParams::default()
        })
        .await
        .map(drop)
    }

    /// One page of `prompts/list`.
    pub async fn list_prompts_page(
        &self,
        cursor: Option<String>,
    ) -> Result<ListPromptsResult, RequestError> {
        self.request::<ListPrompts>(PaginatedRequestParams {
            cursor,
            ..PaginatedRequestParams::default()
        })
        .await
    }

    /// Every prompt, following `nextCursor`.
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, RequestError> {
        all_pages(self.inner.max_list_pages, |cursor| async move {
            self.list_prompts_page(cursor)
                .await
                .map(|p| (p.prompts, p.next_cursor))
        })
        .await
    }

    /// `prompts/get` with string arguments.
    pub async fn get_prompt<K: Into<String>, V: Into<String>>(
        &self,
        name: &str,
        arguments: impl IntoIterator<Item = (K, V)>,
    ) -> Result<GetPromptResult, RequestError> {
        let arguments: BTreeMap<String, String> = arguments
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        self.request::<GetPrompt>(GetPromptRequestParams {
            name: name.to_owned(),
            arguments: (!arguments.is_empty()).then_some(arguments),
            ..GetPromptRequestParams::default()
        })
        .await
    }

    /// `completion/complete`.
    pub async fn complete(
        &self,
        params: CompleteRequestParams,
    ) -> Result<CompleteResult, RequestError> {
        self.request::<Complete>(params).await
    }

    /// `completion/complete` for argument `argument` of prompt `prompt`, typed so far as
    /// `value`.
    pub async fn complete_prompt_argument(
        &self,
        prompt: &str,
        argument: &str,
        value: &str,
    ) -> Result<CompleteResult, RequestError> {
        self.complete(CompleteRequestParams {
            reference: CompletionReference::Prompt(PromptReference {
                name: prompt.to_owned(),
                ..PromptReference::default()
            }),
            argument: CompletionArgument {
                name: argument.to_owned(),
                value: value.to_owned(),
                ..CompletionArgument::default()
            },
            context: None,
            meta: None,
            extra: JsonObject::new(),
        })
        .await
    }

    /// `logging/setLevel`.
    pub async fn set_level(&self, level: LoggingLevel) -> Result<(), RequestError> {
        self.request::<SetLevel>(SetLevelRequestParams::new(level))
            .await
            .map(drop)
    }

    /// `notifications/roots/list_changed`.
    pub fn notify_roots_changed(&self) -> Result<(), RequestError> {
        self.notify(methods::NOTIFICATION_ROOTS_LIST_CHANGED, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_token_goes_into_meta() {
        let mut v = serde_json::json!({"name": "t"});
        with_progress_token(&mut v, &ProgressToken::Number(7));
        assert_eq!(
            v,
            serde_json::json!({"name": "t", "_meta": {"progressToken": 7}})
        );
        let mut v = serde_json::json!({"_meta": {"x": 1}});
        with_progress_token(&mut v, &ProgressToken::String("a".into()));
        assert_eq!(
            v,
            serde_json::json!({"_meta": {"x": 1, "progressToken": "a"}})
        );
        let mut v = Value::Null;
        with_progress_token(&mut v, &ProgressToken::Number(1));
        assert_eq!(v, serde_json::json!({"_meta": {"progressToken": 1}}));
    }
}
