//! [`RequestContext`]: what a handler can do besides computing its answer.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::mrtr::Mrtr;
use super::session::{SessionShared, log_notification};
use super::tasks::{TaskOutcome, TaskRef};
use super::{Server, ServerSession};
use crate::Error;
use crate::cancel::{CancellationToken, WaitForCancellation, lock};
use crate::error::{PeerError, to_raw};
use crate::schema::{
    self, ClientCapabilities, CreateMessage, CreateMessageRequestParams, CreateMessageResult,
    Elicit, ElicitRequestFormParams, ElicitRequestParams, ElicitResult, Implementation, ListRoots,
    ListRootsResult, LoggingLevel, Meta, ProgressNotificationParams, ProgressToken, RequestMeta,
    RequestParams, RequestedSchema, methods,
};
use mcp_proto::ProtocolVersion;
use mcp_proto::jsonrpc::{Notification, Outcome, Request, RequestId};

/// `MissingRequiredClientCapabilityError` (-32021): the request needs `needs` ("the
/// elicitation capability", …), which the client did not declare; `required` is the
/// `ClientCapabilities` object naming it (`data.requiredCapabilities`).
pub(crate) fn missing_capability(needs: &str, required: ClientCapabilities) -> Error {
    let data = crate::schema::MissingRequiredClientCapabilityData {
        required_capabilities: required,
        extra: Default::default(),
    };
    Error::protocol(
        crate::schema::error_codes::MISSING_REQUIRED_CLIENT_CAPABILITY,
        format_args!("Server requires {needs} for this request"),
    )
    .with_data(serde_json::to_value(data).unwrap_or_default())
}

/// [`missing_capability`] for one of the capabilities a server asks through (`elicitation`,
/// `sampling`, `roots`).
fn missing_named(what: &str) -> Error {
    let mut required = ClientCapabilities::default();
    match what {
        "elicitation" => required.elicitation = Some(Default::default()),
        "sampling" => required.sampling = Some(Default::default()),
        _ => required.roots = Some(Default::default()),
    }
    missing_capability(&format!("the {what} capability"), required)
}

/// The `_meta` of a request's params, read without touching the rest.
#[derive(Deserialize, Default)]
struct MetaOnly {
    #[serde(rename = "_meta", default)]
    meta: Option<Meta>,
}

/// The context of one client request, given to its handler: progress, logging,
/// server→client requests (sampling, elicitation, roots), cancellation, and what the session
/// knows about the client.
///
/// Cheap to clone and `'static`, so a handler can move it into its future.
///
/// Notifications (progress, logs) are fire-and-forget: a transport that cannot send them any
/// more is closing, and the handler will be cancelled.
#[derive(Clone)]
pub struct RequestContext {
    session: Arc<SessionShared>,
    id: RequestId,
    meta: Option<Meta>,
    /// Boxed: a context moves with its handler's future, and this is 1 KB inline.
    modern: Option<Box<RequestMeta>>,
    cancel: CancellationToken,
    /// The MRTR round of a modern `tools/call` / `prompts/get` / `resources/read` (or why its
    /// `requestState` was refused).
    pub(crate) mrtr: Option<Result<Arc<Mrtr>, Error>>,
    /// The task this context's work runs as (its asks become the task's input requests).
    pub(crate) task: Option<TaskRef>,
    /// Where a `tools/call` handler's task goes when it goes on as one
    /// ([`Self::run_as_task`]): shared by the handler's clones of the context, read by the
    /// dispatcher. `None` for other requests (nothing allocated), which cannot be tasks.
    pub(crate) created: Option<Arc<std::sync::Mutex<Option<crate::schema::Task>>>>,
}

impl std::fmt::Debug for RequestContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestContext")
            .field("id", &self.id)
            .field("meta", &self.meta)
            .field("cancelled", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl RequestContext {
    pub(crate) fn new(
        session: Arc<SessionShared>,
        request: &Request,
        cancel: CancellationToken,
    ) -> Self {
        let meta = request
            .params
            .as_deref()
            .filter(|p| mcp_proto::jsonrpc::may_have_member(p.get(), "_meta"))
            .and_then(|p| serde_json::from_str::<MetaOnly>(p.get()).ok())
            .unwrap_or_default()
            .meta;
        let modern = meta
            .as_ref()
            .filter(|m| m.contains_key(schema::meta_keys::PROTOCOL_VERSION))
            .and_then(|m| RequestMeta::from_meta(m).ok())
            .map(Box::new);
        let mrtr = modern.as_ref().and_then(|_| {
            let config = session.server.config();
            let principal = session.principal.get().map(|p| &**p);
            Mrtr::for_request(
                request,
                config.max_input_rounds,
                &config.state_keys,
                principal,
            )
            .map(|r| r.map(Arc::new))
        });
        RequestContext {
            session,
            id: request.id.clone(),
            meta,
            modern,
            cancel,
            mrtr,
            task: None,
            created: None,
        }
    }

    /// The id of the request being handled.
    pub fn request_id(&self) -> &RequestId {
        &self.id
    }

    /// The request's `_meta`, if it had one.
    pub fn meta(&self) -> Option<&Meta> {
        self.meta.as_ref()
    }

    /// The progress token the client sent (`_meta.progressToken`), if any.
    pub fn progress_token(&self) -> Option<ProgressToken> {
        let token = self.meta.as_ref()?.get(schema::meta_keys::PROGRESS_TOKEN)?;
        ProgressToken::deserialize(token).ok()
    }

    /// Who sent the request, as the server's authentication named them (`None` without
    /// authentication, or when it names nobody).
    pub fn principal(&self) -> Option<&str> {
        self.session.principal.get().map(|p| &**p)
    }

    /// The server.
    pub fn server(&self) -> &Server {
        &self.session.server
    }

    /// The session this request arrived on.
    pub fn session(&self) -> ServerSession {
        ServerSession {
            shared: self.session.clone(),
        }
    }

    /// The revision in use: the request's own (2026-07-28 `_meta`), else the session's.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.modern
            .as_ref()
            .and_then(|m| m.protocol_version.as_deref())
            .and_then(ProtocolVersion::parse)
            .or(lock(&self.session.state).protocol_version)
    }

    /// Who the client is: from the request's `_meta` (2026-07-28), else from `initialize`.
    pub fn client_info(&self) -> Option<Implementation> {
        self.modern
            .as_ref()
            .and_then(|m| m.client_info.clone())
            .or_else(|| lock(&self.session.state).client_info())
    }

    /// What the client supports: from the request's `_meta` (2026-07-28), else from
    /// `initialize`.
    pub fn client_capabilities(&self) -> Option<ClientCapabilities> {
        self.modern
            .as_ref()
            .and_then(|m| m.client_capabilities.clone())
            .or_else(|| lock(&self.session.state).client_capabilities())
    }

    /// The least severe level the client wants, `None` for "no log messages". A 2026-07-28
    /// request says so in its `_meta` (absent: none); otherwise the session's
    /// `logging/setLevel` applies (never set: everything, from `debug`).
    pub fn log_level(&self) -> Option<LoggingLevel> {
        match &self.modern {
            Some(m) => m.log_level,
            None => Some(
                lock(&self.session.state)
                    .log_level
                    .unwrap_or(LoggingLevel::Debug),
            ),
        }
    }

    /// Whether the client cancelled this request (or the session closed).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// A future that completes when the request is cancelled.
    pub fn cancelled(&self) -> WaitForCancellation {
        self.cancel.cancelled()
    }

    /// The request's cancellation token (to hand to work that outlives an `await`).
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Waits `duration` on the transport's clock (see [`Peer::sleep`](super::Peer::sleep)).
    pub async fn sleep(&self, duration: Duration) {
        self.session.peer.sleep(duration).await;
    }

    /// Sends a notification related to this request (on its stream).
    pub fn notify(&self, notification: Notification) -> Result<(), PeerError> {
        if self.cancel.is_cancelled() {
            return Err(PeerError::Cancelled);
        }
        self.session.peer.notify(Some(&self.id), notification)
    }

    /// Closes this request's stream without answering, so the client reconnects and polls
    /// for the answer (see [`Peer::close_stream`](super::Peer::close_stream)); the handler
    /// goes on and its result is delivered on the resumed stream.
    pub fn close_stream(&self) -> Result<(), PeerError> {
        self.session.peer.close_stream(&self.id)
    }

    /// Reports progress, when the client asked for it (a `progressToken`); otherwise does
    /// nothing.
    pub fn progress(&self, progress: u64, total: Option<u64>) {
        self.progress_message(progress, total, None::<String>);
    }

    /// Reports progress with a message, when the client asked for it.
    pub fn progress_message(
        &self,
        progress: u64,
        total: Option<u64>,
        message: Option<impl Into<String>>,
    ) {
        let Some(token) = self.progress_token() else {
            return;
        };
        let mut params = ProgressNotificationParams::new(token, progress, total);
        params.message = message.map(Into::into);
        if let Ok(raw) = to_raw(&params) {
            let _ = self.notify(Notification::new(methods::NOTIFICATION_PROGRESS, Some(raw)));
        }
    }

    /// Sends a log message (`notifications/message`) related to this request, if the
    /// client's level lets it through.
    pub fn log(&self, level: LoggingLevel, data: impl Into<Value>) {
        self.log_to(level, None, data);
    }

    /// [`log`](Self::log) with a logger name.
    pub fn log_to(&self, level: LoggingLevel, logger: Option<&str>, data: impl Into<Value>) {
        if self.log_level().is_none_or(|min| level < min) {
            return;
        }
        if let Some(n) = log_notification(level, logger, data.into()) {
            let _ = self.notify(n);
        }
    }

    /// [`log`](Self::log) at `debug`.
    pub fn debug(&self, data: impl Into<Value>) {
        self.log(LoggingLevel::Debug, data);
    }

    /// [`log`](Self::log) at `info`.
    pub fn info(&self, data: impl Into<Value>) {
        self.log(LoggingLevel::Info, data);
    }

    /// [`log`](Self::log) at `warning`.
    pub fn warning(&self, data: impl Into<Value>) {
        self.log(LoggingLevel::Warning, data);
    }

    /// [`log`](Self::log) at `error`.
    pub fn error(&self, data: impl Into<Value>) {
        self.log(LoggingLevel::Error, data);
    }

    /// Whether this request speaks the modern era (its `_meta` carries a protocol version).
    pub fn is_modern(&self) -> bool {
        self.modern.is_some()
    }

    // S-NEW-5.
    /// Sends a request of method `R` to the client, related to this request, and waits for
    /// its answer. A JSON-RPC error from the client becomes an [`Error`] that keeps its code
    /// (an application failure: in a tool, a tool error).
    ///
    /// The same call serves both eras: to a legacy client it is a JSON-RPC request on the
    /// request's stream; to a modern one (2026-07-28) it is an input request of an MRTR round
    /// — the handler is parked here, the client gets an `InputRequiredResult`, and when it
    /// retries with `inputResponses` the handler runs again and this call resolves with the
    /// answer (see [`mrtr`](super::mrtr) for the re-run rule and its bound). A modern request
    /// of another method cannot ask (no server→client requests).
    pub async fn send_request<R: schema::RequestKind>(
        &self,
        params: R::Params,
    ) -> Result<R::Result, Error> {
        self.ask::<R>(None, params).await
    }

    /// [`send_request`](Self::send_request), naming the input request `key` in a modern
    /// client's `InputRequiredResult` (`inputRequests`: `{key: {method, params}}`) instead of
    /// the default `"{n}:{method}"`. Keys must be unique within the request: asking a key
    /// twice in one run fails. A legacy client gets the same JSON-RPC request as ever (the
    /// key has no meaning there).
    pub async fn send_request_keyed<R: schema::RequestKind>(
        &self,
        key: &str,
        params: R::Params,
    ) -> Result<R::Result, Error> {
        self.ask::<R>(Some(key), params).await
    }

    async fn ask<R: schema::RequestKind>(
        &self,
        key: Option<&str>,
        params: R::Params,
    ) -> Result<R::Result, Error> {
        if let Some(task) = &self.task {
            return self.ask_in_task::<R>(task, key, params).await;
        }
        let raw = to_raw(&params).map_err(Error::internal)?;
        if self.modern.is_some() {
            let Some(Ok(mrtr)) = &self.mrtr else {
                return Err(Error::new(format_args!(
                    "{}: 2026-07-28 allows input requests only in tools/call, prompts/get and resources/read",
                    R::METHOD
                )));
            };
            // MRTR: never an input request the client did not declare support for; the
            // request fails with `MissingRequiredClientCapabilityError` (-32021, HTTP 400).
            let caps = self.client_capabilities();
            let declared = |has: fn(&ClientCapabilities) -> bool| caps.as_ref().is_none_or(has);
            let missing = match R::METHOD {
                methods::ELICITATION_CREATE => {
                    (!declared(|c| c.elicitation.is_some())).then_some("elicitation")
                }
                methods::SAMPLING_CREATE_MESSAGE => {
                    (!declared(|c| c.sampling.is_some())).then_some("sampling")
                }
                methods::ROOTS_LIST => (!declared(|c| c.roots.is_some())).then_some("roots"),
                _ => None,
            };
            if let Some(what) = missing {
                return Err(missing_named(what));
            }
            return match mrtr.ask(key, R::METHOD, &raw)? {
                Some(answer) => serde_json::from_value(answer).map_err(|e| {
                    Error::invalid_params(format_args!(
                        "the client's input response to {} is malformed: {e}",
                        R::METHOD
                    ))
                }),
                None => {
                    // Parked: the round ends with an InputRequiredResult and this future is
                    // dropped (mrtr::RaceInput).
                    std::future::pending::<()>().await;
                    Err(Error::internal("unreachable: an MRTR round was not ended"))
                }
            };
        }
        let response = self
            .session
            .peer
            .request(Some(&self.id), R::METHOD, Some(raw))
            .await?;
        match response.outcome {
            Outcome::Result(raw) => serde_json::from_str(raw.get()).map_err(|e| {
                Error::new(format_args!(
                    "the client's answer to {} is malformed: {e}",
                    R::METHOD
                ))
            }),
            Outcome::Error(e) => Err(Error::from_peer(&e)),
        }
    }

    /// Fails when the client did not declare `what`: in 2026-07-28 with the protocol error
    /// the revision prescribes (`MissingRequiredClientCapabilityError`, -32021, answered as
    /// such even by a tool), before it with an application failure (a tool error).
    fn require(&self, what: &str, has: impl Fn(&ClientCapabilities) -> bool) -> Result<(), Error> {
        match self.client_capabilities() {
            Some(caps) if !has(&caps) => Err(if self.modern.is_some() {
                missing_named(what)
            } else {
                Error::new(format_args!(
                    "the client does not support {what} (it did not declare the capability)"
                ))
            }),
            _ => Ok(()),
        }
    }

    /// Whether this request's client declared the Tasks extension
    /// (`io.modelcontextprotocol/tasks`), in the request's `_meta` (2026-07-28) or at
    /// `initialize`.
    pub fn accepts_tasks(&self) -> bool {
        self.client_capabilities()
            .and_then(|c| c.extensions)
            .is_some_and(|e| e.contains_key(schema::TASKS_EXTENSION))
    }

    /// Goes on as a task (the Tasks extension, SEP-2663): when this `tools/call`'s client
    /// declared the extension and the server has tasks on ([`Server::tasks`]), records a
    /// task, runs `work` in the background and makes the call answer `resultType: "task"`;
    /// the client then polls the task for `work`'s result. Otherwise `work` runs here and
    /// its result is the call's, so one handler serves every client. Return what this
    /// returns.
    ///
    /// `work` gets a context of its own: its asks ([`elicit`](Self::elicit),
    /// [`create_message`](Self::create_message), …) park the task in `input_required` until
    /// the client answers them with `tasks/update`, and its
    /// [`cancellation_token`](Self::cancellation_token) fires on `tasks/cancel` or when the
    /// task's TTL passes. Call it at most once per request, from a `tools/call` handler.
    ///
    /// ```no_run
    /// # use mcp_service::{RequestContext, ToolArgs, Error};
    /// # use mcp_service::schema::CallToolResult;
    /// async fn render(ctx: RequestContext, args: ToolArgs) -> Result<CallToolResult, Error> {
    ///     let pages = args.get_int("pages", 1);
    ///     ctx.run_as_task(move |ctx| async move {
    ///         for _ in 0..pages {
    ///             ctx.sleep(std::time::Duration::from_secs(1)).await;
    ///             if ctx.is_cancelled() { return Err(Error::new("cancelled")); }
    ///         }
    ///         Ok(CallToolResult::text(format!("{pages} pages rendered")))
    ///     })
    ///     .await
    /// }
    /// ```
    ///
    /// [`Server::tasks`]: super::Server::tasks
    pub async fn run_as_task<F, Fut>(&self, work: F) -> Result<schema::CallToolResult, Error>
    where
        F: FnOnce(RequestContext) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<schema::CallToolResult, Error>> + Send + 'static,
    {
        let tasks = self.session.server.config().tasks.clone();
        let (Some(tasks), Some(created)) = (tasks, &self.created) else {
            return work(self.clone()).await;
        };
        if self.task.is_some() || !self.accepts_tasks() {
            return work(self.clone()).await;
        }
        let cancel = CancellationToken::new();
        let server = self.session.server.clone();
        let voice = server.cluster_voice();
        // In a cluster, a watcher reads the record again when another instance changes it.
        let (poke, pokes) = match voice {
            Some(_) => {
                let (tx, rx) = futures_channel::mpsc::unbounded();
                (Some(tx), Some(rx))
            }
            None => (None, None),
        };
        let task = tasks
            .create(&voice, self.principal(), cancel.clone(), poke)
            .await?;
        let id = task.task_id.clone();
        let ctx = RequestContext {
            cancel,
            mrtr: None,
            task: Some(TaskRef {
                tasks: tasks.clone(),
                id: id.clone(),
                asked: Arc::default(),
            }),
            created: None,
            ..self.clone()
        };
        let peer = self.session.peer.clone();
        // The work, dropped at its next await when the task ends otherwise (cancelled, or
        // past its TTL): whatever it would return then is not wanted. Its outcome is stored
        // again after a pause while the store refuses it, until the task's TTL.
        let run = {
            let tasks = tasks.clone();
            let id = id.clone();
            let token = ctx.cancel.clone();
            let server = server.clone();
            let peer = peer.clone();
            async move {
                let Some(result) = crate::cancel::until_cancelled(token, work(ctx)).await else {
                    return;
                };
                let outcome = TaskOutcome::of_tool(result);
                while tasks.runs(&id) {
                    match tasks
                        .finish(&server.cluster_voice(), &id, outcome.clone())
                        .await
                    {
                        Ok(()) => break,
                        Err(e) => {
                            tracing::warn!(error = %e, "a task's outcome could not be stored; retrying");
                            peer.sleep(tasks.recheck()).await;
                        }
                    }
                }
            }
        };
        // The TTL, on the transport's timer: the record goes (and its work is stopped) on
        // time, not only at the next operation on the server's tasks.
        let ttl = tasks.ttl().map(|ttl| {
            let tasks = tasks.clone();
            let sleep = peer.sleep(ttl);
            Box::pin(async move {
                sleep.await;
                tasks.expire();
            }) as super::BoxFuture<'static, ()>
        });
        if let Err(e) = peer.spawn(Box::pin(run)) {
            // No background work on this transport: the task fails where it is stored, and
            // goes from here (nothing was announced to the client yet); the call says why.
            let why = Error::internal(format_args!("cannot run a task here: {e}"));
            let failed = TaskOutcome::Error(why.to_error_object());
            let _ = tasks.finish(&voice, &id, failed).await;
            tasks.forget(&id);
            return Err(why);
        }
        if let Some(expiry) = ttl {
            // Without it the record still goes at the next operation after its TTL.
            let _ = peer.spawn(expiry);
        }
        if let Some(pokes) = pokes {
            let watcher = tasks.clone().watch(
                id.clone(),
                move || server.cluster_voice(),
                move |d| peer.sleep(d),
                pokes,
            );
            let _ = self.session.peer.spawn(Box::pin(watcher));
        }
        *lock(created) = Some(task);
        Ok(schema::CallToolResult::default())
    }

    /// An ask of a task's work: listed in the task's `inputRequests` until `tasks/update`
    /// answers it.
    async fn ask_in_task<R: schema::RequestKind>(
        &self,
        task: &TaskRef,
        key: Option<&str>,
        params: R::Params,
    ) -> Result<R::Result, Error> {
        let n = task
            .asked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let key = key.map_or_else(|| format!("{n}:{}", R::METHOD), str::to_owned);
        // Typed once, here: `tasks/get` serves it as it is on every poll.
        let params = serde_json::to_value(params).map_err(Error::internal)?;
        let request: schema::InputRequest =
            serde_json::from_value(serde_json::json!({"method": R::METHOD, "params": params}))
                .map_err(Error::internal)?;
        let voice = self.session.server.cluster_voice();
        let answer = task.tasks.ask(&voice, &task.id, key, request).await?;
        let answer = answer
            .await
            .map_err(|_| Error::new("the task ended before the client answered"))?;
        serde_json::from_value(answer).map_err(|e| {
            Error::invalid_params(format_args!(
                "the client's input response to {} is malformed: {e}",
                R::METHOD
            ))
        })
    }

    /// Asks the client's model for a message (`sampling/createMessage`). Fails without
    /// sending when the client did not declare `sampling`.
    pub async fn create_message(
        &self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, Error> {
        self.require("sampling", |c| c.sampling.is_some())?;
        self.send_request::<CreateMessage>(params).await
    }

    /// Asks the user, through the client, to fill in a form or visit a URL
    /// (`elicitation/create`). Fails without sending when the client did not declare
    /// `elicitation`.
    pub async fn elicit(
        &self,
        params: impl Into<ElicitRequestParams>,
    ) -> Result<ElicitResult, Error> {
        self.require("elicitation", |c| c.elicitation.is_some())?;
        self.send_request::<Elicit>(params.into()).await
    }

    /// [`elicit`](Self::elicit) with a form: `message` and the fields of `schema`.
    pub async fn elicit_form(
        &self,
        message: impl Into<String>,
        schema: RequestedSchema,
    ) -> Result<ElicitResult, Error> {
        self.elicit(ElicitRequestFormParams {
            message: message.into(),
            requested_schema: schema,
            ..ElicitRequestFormParams::default()
        })
        .await
    }

    /// Asks the client for its roots (`roots/list`). Fails without sending when the client
    /// did not declare `roots`.
    pub async fn list_roots(&self) -> Result<ListRootsResult, Error> {
        self.require("roots", |c| c.roots.is_some())?;
        self.send_request::<ListRoots>(RequestParams::default())
            .await
    }
}
