//! The server side of the service layer: [`Server`], the registry of tools, resources,
//! resource templates, prompts and the completion handler, and [`ServerSession`], one
//! client's connection to it.
//!
//! # Theory of operation
//!
//! A [`Server`] is a cheaply cloneable handle (an `Arc` inside) to its definition and
//! registry. The definition can change at runtime ([`Server::add_tool`],
//! [`Server::remove_tool`], …): each change sends the matching `list_changed` notification to
//! every initialized session when the capability says so, and to every `subscriptions/listen`
//! stream (2026-07-28) that asked for it. Bound to a clustered router, the server also tells
//! the listen streams of the other instances: the change leaves as a notice on the cluster's
//! bus, and the notices of the others come back to this server's listen streams (see the
//! cluster module, `mcp_proto::server::ClusterConfig`).
//!
//! A transport driver binds it to a connection in four moves:
//!
//! 1. [`Server::session`] with a [`Peer`] — the driver's way to send notifications and
//!    server→client requests to that client — makes a [`ServerSession`];
//! 2. each client request goes to [`ServerSession::handle_request`], whose future the driver
//!    spawns and whose output (the response, or `None` when the request was cancelled and
//!    must not be answered) it sends back;
//! 3. each client notification goes to [`ServerSession::handle_notification`]
//!    (`notifications/cancelled` cancels the matching request; a transport that learns of a
//!    cancellation otherwise calls [`ServerSession::cancel`]);
//! 4. the answers to server→client requests complete the futures the [`Peer`] handed out
//!    ([`PendingRequests`](super::PendingRequests) does the bookkeeping).
//!
//! When the connection ends, [`ServerSession::close`] cancels what is still running.
//!
//! Everything is plain `std` futures: no runtime, no threads, no clock. Time enters through
//! [`Peer::sleep`], so a handler that waits ([`RequestContext::sleep`]) waits on the
//! transport's clock (a real one in the adapters, a virtual one in tests).
//!
//! # What the core answers itself
//!
//! `initialize` (version negotiation: the client's revision when we speak it, else our
//! latest; capabilities; server info; instructions), `ping`, `logging/setLevel`,
//! `resources/subscribe` and `resources/unsubscribe`, `server/discover`, the list methods
//! (with pagination when a page size is set), argument validation for `tools/call`, URI
//! template matching for `resources/read`, required prompt arguments for `prompts/get`,
//! `skills/list`, `skills/get` and `resources/directory/read` over the registered skills (the
//! Skills extension), and `-32601` for methods it does not know.

mod context;
mod dispatch;
pub mod mrtr;
pub mod seal;
mod session;
pub mod tasks;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock, Weak};

pub use context::RequestContext;
pub use session::{Peer, ServerSession, SessionState};
pub use tasks::{TaskClock, TaskConfig};

use super::cancel::lock;
use super::error::to_raw;
use super::uri_template::{TemplateError, UriTemplate};
use super::{Error, PromptArgs, ToolArgs};
use crate::schema::{
    CallToolResult, CompleteRequestParams, GetPromptResult, Implementation, JsonObject,
    ListChangedCapability, Prompt, Resource, ResourceContents, ResourceTemplate,
    ResourceUpdatedNotificationParams, ResourcesCapability, SKILLS_EXTENSION, ServerCapabilities,
    SkillsCapability, Tool, methods,
};
use crate::skills::Skill;
use mcp_proto::jsonrpc::Notification;
use session::SessionShared;

/// A boxed, sendable future: what handlers are stored as.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a tool handler returns: a result (with `isError` for failures the model should see),
/// or an [`Error`] (an application failure becomes an `isError` result too; a protocol error
/// a JSON-RPC error). A typed tool's handler may return `ToolResult<Json<T>>` instead (see
/// [`Server::typed_tool`] and [`ToolOutput`](super::ToolOutput)).
pub type ToolResult<T = CallToolResult> = Result<T, Error>;

/// What a resource handler returns: the contents of the resource.
pub type ResourceResult = Result<Vec<ResourceContents>, Error>;

/// What a prompt handler returns.
pub type PromptResult = Result<GetPromptResult, Error>;

/// What a completion handler returns: the candidate values (the server sends the first 100
/// and says whether there are more).
pub type CompletionResult = Result<Vec<String>, Error>;

type ToolHandler =
    Arc<dyn Fn(RequestContext, ToolArgs) -> BoxFuture<'static, ToolResult> + Send + Sync>;
type ResourceHandler = Arc<
    dyn Fn(RequestContext, ResourceRequest) -> BoxFuture<'static, ResourceResult> + Send + Sync,
>;
type PromptHandler =
    Arc<dyn Fn(RequestContext, PromptArgs) -> BoxFuture<'static, PromptResult> + Send + Sync>;
type CompletionHandler = Arc<
    dyn Fn(RequestContext, CompleteRequestParams) -> BoxFuture<'static, CompletionResult>
        + Send
        + Sync,
>;

/// A `resources/read` for a resource or a resource template: the URI, and the template's
/// variables when it matched one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceRequest {
    /// The URI asked for.
    pub uri: String,
    /// The template's variables, decoded (empty for a plain resource).
    pub params: BTreeMap<String, String>,
}

impl ResourceRequest {
    /// The template variable `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.get(name).map(String::as_str)
    }
}

pub(crate) struct ToolEntry {
    pub(crate) tool: Tool,
    pub(crate) handler: ToolHandler,
}

pub(crate) struct ResourceEntry {
    pub(crate) resource: Resource,
    pub(crate) handler: ResourceHandler,
}

pub(crate) struct TemplateEntry {
    pub(crate) template: ResourceTemplate,
    pub(crate) parsed: UriTemplate,
    pub(crate) handler: ResourceHandler,
}

pub(crate) struct PromptEntry {
    pub(crate) prompt: Prompt,
    pub(crate) handler: PromptHandler,
}

#[derive(Default)]
pub(crate) struct Registry {
    pub(crate) tools: Vec<Arc<ToolEntry>>,
    pub(crate) resources: Vec<Arc<ResourceEntry>>,
    pub(crate) templates: Vec<Arc<TemplateEntry>>,
    pub(crate) prompts: Vec<Arc<PromptEntry>>,
    pub(crate) completion: Option<CompletionHandler>,
    /// The skills (the Skills extension), in registration order; their files are in
    /// `resources`.
    pub(crate) skills: Vec<Skill>,
}

impl Registry {
    /// Removes the skill at `uri` and the resources of its files; whether there was one.
    fn remove_skill(&mut self, uri: &str) -> bool {
        let Some(i) = self.skills.iter().position(|s| s.uri() == uri) else {
            return false;
        };
        let old = self.skills.remove(i);
        let gone: std::collections::HashSet<&str> =
            old.resources().map(|r| r.uri.as_str()).collect();
        self.resources
            .retain(|r| !gone.contains(r.resource.uri.as_str()));
        true
    }
}

/// Explicit capability choices; `None` means "declared when something is registered, with
/// `listChanged` (and `subscribe`) on".
#[derive(Debug, Clone, Default)]
pub(crate) struct Config {
    pub(crate) info: Implementation,
    pub(crate) instructions: Option<String>,
    pub(crate) capabilities: Option<ServerCapabilities>,
    pub(crate) tools_list_changed: Option<bool>,
    pub(crate) resources: Option<(bool, bool)>,
    pub(crate) prompts_list_changed: Option<bool>,
    pub(crate) page_size: Option<usize>,
    pub(crate) validate_arguments: bool,
    pub(crate) max_input_rounds: u32,
    /// The keys sealing MRTR `requestState`.
    pub(crate) state_keys: Arc<seal::StateKeys>,
    /// `cacheScope` and `ttlMs` of cacheable results to modern clients (2026-07-28); `None`:
    /// `private`, 0 ms.
    pub(crate) cache_hint: Option<(crate::schema::CacheScope, u64)>,
    /// The server's tasks, when the Tasks extension is on ([`Server::tasks`]).
    pub(crate) tasks: Option<Arc<tasks::Tasks>>,
    /// Whether `resources/directory/read` is served (and `directoryRead` declared) when
    /// there are skills; `None`: yes.
    pub(crate) skill_directory_read: Option<bool>,
    /// The observer of operations and sessions ([`Server::telemetry`]).
    pub(crate) telemetry: Option<crate::telemetry::Hook>,
}

pub(crate) struct Inner {
    pub(crate) config: RwLock<Config>,
    pub(crate) registry: RwLock<Registry>,
    /// Bumped at every change of `registry`: who derives data from it (the binding's table of
    /// parameter headers) knows when to derive again.
    registry_generation: std::sync::atomic::AtomicU64,
    sessions: Mutex<SessionList>,
    /// Open `subscriptions/listen` streams (2026-07-28).
    pub(crate) listeners: Mutex<Vec<Listener>>,
    pub(crate) next_listener: std::sync::atomic::AtomicU64,
    /// The clustered routers this server is bound to (see [`ClusterVoice`]).
    voices: Mutex<Voices>,
}

/// Where a [`Server`]'s changes leave for the other instances of its cluster: the binding of
/// a clustered router (`service::bind::ServerBinding`), which broadcasts them through its
/// router ([`Router::broadcast_notice`](mcp_proto::server::Router::broadcast_notice)).
pub(crate) trait ClusterVoice: Send + Sync {
    /// Queues `notice` for the bus.
    fn broadcast(&self, notice: bytes::Bytes);
    /// Runs a service record operation on the cluster store (a task's state): the store's
    /// answer, or `Failed` when it did not come in time or the transport stopped.
    fn record(
        &self,
        op: mcp_proto::server::RecordOp,
    ) -> BoxFuture<'static, mcp_proto::server::StoreReply>;
}

/// A notice to the instance running task `task`: its record changed (answers arrived, or it
/// was cancelled elsewhere). `{"task": …}` (JSON) on the bus.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WireTaskNotice {
    task: String,
}

/// The clustered bindings of a server, weakly held, in the order they joined. The first
/// live one is the server's voice *and* ear in the cluster: its changes are broadcast
/// through that one binding only, and only the notices that binding's router receives are
/// handed to the listeners (a server bound to several routers of one cluster, in one
/// process, tells every listener of each of them itself, and hears each notice once).
#[derive(Default)]
struct Voices {
    next: u64,
    list: Vec<(u64, Weak<dyn ClusterVoice>)>,
}

/// What a listen stream can be told: the notice instances of a cluster exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    /// `notifications/{tools,prompts,resources}/list_changed`.
    ListChanged(&'static str),
    /// `notifications/resources/updated` for this URI.
    ResourceUpdated(String),
}

/// A [`Change`] on the bus: `{"method": …, "uri": …}` (JSON).
#[derive(serde::Serialize, serde::Deserialize)]
struct WireNotice {
    method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    uri: Option<String>,
}

impl Change {
    fn encode(&self) -> Option<bytes::Bytes> {
        let wire = match self {
            Change::ListChanged(method) => WireNotice {
                method: (*method).to_owned(),
                uri: None,
            },
            Change::ResourceUpdated(uri) => WireNotice {
                method: methods::NOTIFICATION_RESOURCES_UPDATED.to_owned(),
                uri: Some(uri.clone()),
            },
        };
        serde_json::to_vec(&wire).ok().map(bytes::Bytes::from)
    }

    /// `None`: not a notice this version knows.
    fn decode(payload: &[u8]) -> Option<Change> {
        let wire: WireNotice = serde_json::from_slice(payload).ok()?;
        let list = [
            methods::NOTIFICATION_TOOLS_LIST_CHANGED,
            methods::NOTIFICATION_PROMPTS_LIST_CHANGED,
            methods::NOTIFICATION_RESOURCES_LIST_CHANGED,
        ];
        if let Some(method) = list.into_iter().find(|m| *m == wire.method) {
            return wire.uri.is_none().then_some(Change::ListChanged(method));
        }
        if wire.method == methods::NOTIFICATION_RESOURCES_UPDATED {
            return wire.uri.map(Change::ResourceUpdated);
        }
        None
    }
}

/// One open `subscriptions/listen` request: what it was granted, and its context (its
/// notifications go on its own response stream).
pub(crate) struct Listener {
    pub(crate) id: u64,
    pub(crate) filter: crate::schema::SubscriptionFilter,
    pub(crate) ctx: RequestContext,
}

/// The sessions of a server, weakly held. Dead entries are pruned when the list has doubled
/// since the last prune, so connecting a session costs amortized O(1) instead of a scan of
/// every session (which made opening N sessions O(N²)).
#[derive(Default)]
struct SessionList {
    list: Vec<Weak<SessionShared>>,
    prune_at: usize,
}

impl SessionList {
    fn prune(&mut self) {
        self.list.retain(|w| w.strong_count() > 0);
        self.prune_at = (self.list.len() * 2).max(64);
    }
}

/// An MCP server definition: identity, capabilities, and the registry of tools, resources,
/// resource templates, prompts and completions with their async handlers.
///
/// Cheap to clone; clones share everything. Build it with the chained methods
/// ([`tool`](Self::tool), [`resource`](Self::resource), …), change it at runtime with the
/// `add_*`/`remove_*` methods, and connect clients with [`session`](Self::session). See the
/// [service module](super) for a complete example.
#[derive(Clone)]
pub struct Server {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let config = self.config();
        let registry = self.registry();
        f.debug_struct("Server")
            .field("name", &config.info.name)
            .field("version", &config.info.version)
            .field("tools", &registry.tools.len())
            .field("resources", &registry.resources.len())
            .field("templates", &registry.templates.len())
            .field("prompts", &registry.prompts.len())
            .field("skills", &registry.skills.len())
            .finish_non_exhaustive()
    }
}

fn boxed<F, T>(future: F) -> BoxFuture<'static, T>
where
    F: Future<Output = T> + Send + 'static,
{
    Box::pin(future)
}

impl Server {
    /// A server called `name` at `version`, with nothing registered (mcp-go's
    /// `NewMCPServer`).
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Server {
            inner: Arc::new(Inner {
                config: RwLock::new(Config {
                    info: Implementation::new(name, version),
                    validate_arguments: true,
                    max_input_rounds: mrtr::DEFAULT_MAX_INPUT_ROUNDS,
                    ..Config::default()
                }),
                registry: RwLock::new(Registry::default()),
                registry_generation: std::sync::atomic::AtomicU64::new(0),
                sessions: Mutex::new(SessionList::default()),
                listeners: Mutex::new(Vec::new()),
                next_listener: std::sync::atomic::AtomicU64::new(1),
                voices: Mutex::new(Voices::default()),
            }),
        }
    }

    pub(crate) fn config(&self) -> std::sync::RwLockReadGuard<'_, Config> {
        self.inner
            .config
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn config_mut(&self) -> std::sync::RwLockWriteGuard<'_, Config> {
        self.inner
            .config
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Installs an observer of the server's operations and sessions (OpenTelemetry's MCP
    /// conventions: the `mcp-otel` crate). See [`telemetry`](crate::telemetry). None by
    /// default.
    pub fn telemetry(self, telemetry: impl crate::telemetry::Telemetry) -> Self {
        self.config_mut().telemetry = Some(crate::telemetry::Hook(Arc::new(telemetry)));
        self
    }

    /// The installed observer.
    pub(crate) fn telemetry_hook(&self) -> Option<Arc<dyn crate::telemetry::Telemetry>> {
        self.config().telemetry.as_ref().map(|h| h.0.clone())
    }

    pub(crate) fn registry(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        self.inner
            .registry
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Changes at every change of the registry (tools, resources, prompts, templates).
    pub(crate) fn registry_generation(&self) -> u64 {
        self.inner
            .registry_generation
            .load(std::sync::atomic::Ordering::Acquire)
    }

    fn registry_mut(&self) -> std::sync::RwLockWriteGuard<'_, Registry> {
        // Bumped before the write: a reader that sees the new generation reads the registry
        // after this guard is released (the read lock waits for it), never a stale one.
        self.inner
            .registry_generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        self.inner
            .registry
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets the instructions sent in the `initialize` result (how to use the server, for the
    /// model).
    pub fn instructions(self, text: impl Into<String>) -> Self {
        self.config_mut().instructions = Some(text.into());
        self
    }

    /// Sets the server's [`Implementation`] (title, description, icons, website).
    pub fn info(self, info: Implementation) -> Self {
        self.config_mut().info = info;
        self
    }

    /// Declares these capabilities exactly, instead of deriving them from what is registered.
    pub fn capabilities(self, capabilities: ServerCapabilities) -> Self {
        self.config_mut().capabilities = Some(capabilities);
        self
    }

    /// Declares the `tools` capability even before a tool is registered (mcp-go's
    /// `WithToolCapabilities`), with `listChanged` as given.
    pub fn tool_capabilities(self, list_changed: bool) -> Self {
        self.config_mut().tools_list_changed = Some(list_changed);
        self
    }

    /// Declares the `resources` capability (mcp-go's `WithResourceCapabilities`).
    pub fn resource_capabilities(self, subscribe: bool, list_changed: bool) -> Self {
        self.config_mut().resources = Some((subscribe, list_changed));
        self
    }

    /// Declares the `prompts` capability (mcp-go's `WithPromptCapabilities`).
    pub fn prompt_capabilities(self, list_changed: bool) -> Self {
        self.config_mut().prompts_list_changed = Some(list_changed);
        self
    }

    /// Splits list results into pages of `size` items (`nextCursor`); by default every list
    /// is one page.
    pub fn page_size(self, size: usize) -> Self {
        self.config_mut().page_size = Some(size.max(1));
        self
    }

    /// Whether `tools/call` checks arguments against the tool's input schema before calling
    /// the handler (on by default; see the `validate` module for what is checked). A call
    /// that fails the check gets a tool error listing every problem.
    pub fn validate_arguments(self, on: bool) -> Self {
        self.config_mut().validate_arguments = on;
        self
    }

    /// At most this many MRTR input rounds per modern request (default
    /// [`mrtr::DEFAULT_MAX_INPUT_ROUNDS`]); a handler asking for more input after that gets an
    /// error from its `send_request` instead of another round.
    pub fn max_input_rounds(self, rounds: u32) -> Self {
        self.config_mut().max_input_rounds = rounds;
        self
    }

    /// The keys that seal the `requestState` of multi round-trip requests (2026-07-28): by
    /// default one random key per process ([`seal::StateKeys::random`]). Instances behind a
    /// load balancer, where a retry may land on another one, share a key
    /// ([`seal::StateKeys::new`]); rotation accepts the old keys for a while
    /// ([`seal::StateKeys::accept`]). A state that fails verification, has expired, or comes
    /// back on another request or from another principal is refused with -32602.
    pub fn request_state_keys(self, keys: seal::StateKeys) -> Self {
        self.config_mut().state_keys = Arc::new(keys);
        self
    }

    /// The caching hint of the cacheable results sent to modern clients (2026-07-28, SEP-2549:
    /// `tools/list`, `prompts/list`, `resources/list`, `resources/templates/list`,
    /// `resources/read`, `server/discover`): who may cache them and for how long. Default
    /// `private` and 0 ms (immediately stale: nothing is promised), the safe choice for a
    /// server whose lists can change or depend on the caller. A result whose handler set its
    /// own `cacheScope`/`ttlMs` keeps them.
    pub fn cache_hint(self, scope: crate::schema::CacheScope, ttl: std::time::Duration) -> Self {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self.config_mut().cache_hint = Some((scope, ms));
        self
    }

    /// Turns the Tasks extension on (`io.modelcontextprotocol/tasks`, SEP-2663) with these
    /// limits: the server declares it, answers `tasks/get`, `tasks/update` and
    /// `tasks/cancel`, and a handler's [`RequestContext::run_as_task`] goes on as a task for
    /// the clients that declare it. See [`tasks`] for the lifecycle.
    pub fn tasks(self, config: TaskConfig) -> Self {
        self.config_mut().tasks = Some(Arc::new(tasks::Tasks::new(config)));
        self
    }

    /// Registers a tool whose every call runs as a task for a client that declared the Tasks
    /// extension (and inline for others): [`tool`](Self::tool) with the handler wrapped in
    /// [`RequestContext::run_as_task`]. The tool says so in `execution.taskSupport`
    /// (`optional` unless it already says `required`; a `required` tool is refused, -32021,
    /// to a client without the extension). Turns tasks on with the default limits unless
    /// [`tasks`](Self::tasks) was called.
    pub fn task_tool<F, Fut>(self, mut tool: Tool, handler: F) -> Self
    where
        F: Fn(RequestContext, ToolArgs) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolResult> + Send + 'static,
    {
        if self.config().tasks.is_none() {
            self.config_mut().tasks = Some(Arc::new(tasks::Tasks::new(TaskConfig::default())));
        }
        let execution = tool.execution.get_or_insert_with(Default::default);
        if execution.task_support != Some(crate::schema::TaskSupport::Required) {
            execution.task_support = Some(crate::schema::TaskSupport::Optional);
        }
        let handler = Arc::new(handler);
        self.tool(tool, move |ctx: RequestContext, args: ToolArgs| {
            let handler = handler.clone();
            async move { ctx.run_as_task(move |ctx| handler(ctx, args)).await }
        })
    }

    /// Registers a tool and its handler (mcp-go's `AddTool`). A tool of the same name is
    /// replaced.
    pub fn tool<F, Fut>(self, tool: Tool, handler: F) -> Self
    where
        F: Fn(RequestContext, ToolArgs) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolResult> + Send + 'static,
    {
        self.add_tool(tool, handler);
        self
    }

    /// Registers a static resource and its handler (mcp-go's `AddResource`).
    pub fn resource<F, Fut>(self, resource: Resource, handler: F) -> Self
    where
        F: Fn(RequestContext, ResourceRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ResourceResult> + Send + 'static,
    {
        self.add_resource(resource, handler);
        self
    }

    /// Registers a resource template and its handler (mcp-go's `AddResourceTemplate`),
    /// which serves every URI the template matches.
    ///
    /// # Panics
    ///
    /// When the template is not valid (see [`UriTemplate`]): a definition error, caught the
    /// first time the server is built. [`add_resource_template`](Self::add_resource_template)
    /// returns the error instead.
    pub fn resource_template<F, Fut>(self, template: ResourceTemplate, handler: F) -> Self
    where
        F: Fn(RequestContext, ResourceRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ResourceResult> + Send + 'static,
    {
        if let Err(e) = self.add_resource_template(template, handler) {
            panic!("{e}");
        }
        self
    }

    /// Registers a prompt and its handler (mcp-go's `AddPrompt`).
    pub fn prompt<F, Fut>(self, prompt: Prompt, handler: F) -> Self
    where
        F: Fn(RequestContext, PromptArgs) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = PromptResult> + Send + 'static,
    {
        self.add_prompt(prompt, handler);
        self
    }

    /// Sets the `completion/complete` handler (and declares the `completions` capability).
    pub fn completion<F, Fut>(self, handler: F) -> Self
    where
        F: Fn(RequestContext, CompleteRequestParams) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = CompletionResult> + Send + 'static,
    {
        self.registry_mut().completion =
            Some(Arc::new(move |ctx, params| boxed(handler(ctx, params))));
        self
    }

    /// Serves a skill (the Skills extension, see the [`skills`](crate::skills) module): each of
    /// its files becomes a resource, and the server declares the extension (with
    /// `directoryRead`, see [`skill_directory_read`](Self::skill_directory_read)) and the
    /// `resources` capability, and answers `skills/list`, `skills/get` and
    /// `resources/directory/read`. A skill at the same URI is replaced.
    pub fn skill(self, skill: Skill) -> Self {
        self.add_skill(skill);
        self
    }

    /// Serves each of these skills ([`skill`](Self::skill)).
    pub fn skills(self, skills: impl IntoIterator<Item = Skill>) -> Self {
        for skill in skills {
            self.add_skill(skill);
        }
        self
    }

    /// Whether `resources/directory/read` is served over the skills' files, and declared
    /// (`directoryRead: true` in the extension's settings). On by default; off, the method is
    /// unknown (`-32601`) and the extension is declared with `{}`.
    pub fn skill_directory_read(self, on: bool) -> Self {
        self.config_mut().skill_directory_read = Some(on);
        self
    }

    /// Serves a skill at runtime (or replaces the one at its URI, files included); sessions
    /// get `notifications/resources/list_changed` once.
    pub fn add_skill(&self, skill: Skill) {
        {
            let mut registry = self.registry_mut();
            let registry = &mut *registry;
            registry.remove_skill(skill.uri());
            for file in skill.files() {
                let bytes = file.bytes.clone();
                let mime = file.resource.mime_type.clone();
                let entry = Arc::new(ResourceEntry {
                    resource: file.resource.clone(),
                    handler: Arc::new(move |_ctx, req: ResourceRequest| {
                        let (bytes, mime) = (bytes.clone(), mime.clone());
                        boxed(async move { Ok(vec![skill_file_contents(req.uri, &bytes, mime)]) })
                    }),
                });
                let list = &mut registry.resources;
                match list
                    .iter()
                    .position(|r| r.resource.uri == entry.resource.uri)
                {
                    Some(i) => list[i] = entry,
                    None => list.push(entry),
                }
            }
            registry.skills.push(skill);
        }
        self.list_changed(methods::NOTIFICATION_RESOURCES_LIST_CHANGED);
    }

    /// Stops serving the skill whose URI (its `SKILL.md`'s) is `uri`, and its files; `false`
    /// when there was none.
    pub fn remove_skill(&self, uri: &str) -> bool {
        let removed = self.registry_mut().remove_skill(uri);
        if removed {
            self.list_changed(methods::NOTIFICATION_RESOURCES_LIST_CHANGED);
        }
        removed
    }

    /// The entries of the skills served, in registration order (what `skills/list` gives).
    pub fn skill_entries(&self) -> Vec<crate::schema::SkillEntry> {
        self.registry()
            .skills
            .iter()
            .map(|s| s.entry().clone())
            .collect()
    }

    /// Adds (or replaces) a tool at runtime; sessions get `notifications/tools/list_changed`.
    pub fn add_tool<F, Fut>(&self, tool: Tool, handler: F)
    where
        F: Fn(RequestContext, ToolArgs) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolResult> + Send + 'static,
    {
        let entry = Arc::new(ToolEntry {
            tool,
            handler: Arc::new(move |ctx, args| boxed(handler(ctx, args))),
        });
        {
            let mut registry = self.registry_mut();
            let tools = &mut registry.tools;
            match tools.iter().position(|t| t.tool.name == entry.tool.name) {
                Some(i) => tools[i] = entry,
                None => tools.push(entry),
            }
        }
        self.list_changed(methods::NOTIFICATION_TOOLS_LIST_CHANGED);
    }

    /// Removes a tool at runtime; `false` when there was none of that name.
    pub fn remove_tool(&self, name: &str) -> bool {
        let removed = {
            let mut registry = self.registry_mut();
            let before = registry.tools.len();
            registry.tools.retain(|t| t.tool.name != name);
            registry.tools.len() != before
        };
        if removed {
            self.list_changed(methods::NOTIFICATION_TOOLS_LIST_CHANGED);
        }
        removed
    }

    /// Adds (or replaces, by URI) a resource at runtime; sessions get
    /// `notifications/resources/list_changed`.
    pub fn add_resource<F, Fut>(&self, resource: Resource, handler: F)
    where
        F: Fn(RequestContext, ResourceRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ResourceResult> + Send + 'static,
    {
        let entry = Arc::new(ResourceEntry {
            resource,
            handler: Arc::new(move |ctx, req| boxed(handler(ctx, req))),
        });
        {
            let mut registry = self.registry_mut();
            let list = &mut registry.resources;
            match list
                .iter()
                .position(|r| r.resource.uri == entry.resource.uri)
            {
                Some(i) => list[i] = entry,
                None => list.push(entry),
            }
        }
        self.list_changed(methods::NOTIFICATION_RESOURCES_LIST_CHANGED);
    }

    /// Removes a resource at runtime; `false` when there was none at that URI.
    pub fn remove_resource(&self, uri: &str) -> bool {
        let removed = {
            let mut registry = self.registry_mut();
            let before = registry.resources.len();
            registry.resources.retain(|r| r.resource.uri != uri);
            registry.resources.len() != before
        };
        if removed {
            self.list_changed(methods::NOTIFICATION_RESOURCES_LIST_CHANGED);
        }
        removed
    }

    /// Adds (or replaces, by template text) a resource template at runtime.
    pub fn add_resource_template<F, Fut>(
        &self,
        template: ResourceTemplate,
        handler: F,
    ) -> Result<(), TemplateError>
    where
        F: Fn(RequestContext, ResourceRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ResourceResult> + Send + 'static,
    {
        let parsed = UriTemplate::parse(&template.uri_template)?;
        let entry = Arc::new(TemplateEntry {
            template,
            parsed,
            handler: Arc::new(move |ctx, req| boxed(handler(ctx, req))),
        });
        {
            let mut registry = self.registry_mut();
            let list = &mut registry.templates;
            match list
                .iter()
                .position(|t| t.template.uri_template == entry.template.uri_template)
            {
                Some(i) => list[i] = entry,
                None => list.push(entry),
            }
        }
        self.list_changed(methods::NOTIFICATION_RESOURCES_LIST_CHANGED);
        Ok(())
    }

    /// Removes a resource template at runtime, by its template text.
    pub fn remove_resource_template(&self, uri_template: &str) -> bool {
        let removed = {
            let mut registry = self.registry_mut();
            let before = registry.templates.len();
            registry
                .templates
                .retain(|t| t.template.uri_template != uri_template);
            registry.templates.len() != before
        };
        if removed {
            self.list_changed(methods::NOTIFICATION_RESOURCES_LIST_CHANGED);
        }
        removed
    }

    /// Adds (or replaces) a prompt at runtime; sessions get
    /// `notifications/prompts/list_changed`.
    pub fn add_prompt<F, Fut>(&self, prompt: Prompt, handler: F)
    where
        F: Fn(RequestContext, PromptArgs) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = PromptResult> + Send + 'static,
    {
        let entry = Arc::new(PromptEntry {
            prompt,
            handler: Arc::new(move |ctx, args| boxed(handler(ctx, args))),
        });
        {
            let mut registry = self.registry_mut();
            let list = &mut registry.prompts;
            match list.iter().position(|p| p.prompt.name == entry.prompt.name) {
                Some(i) => list[i] = entry,
                None => list.push(entry),
            }
        }
        self.list_changed(methods::NOTIFICATION_PROMPTS_LIST_CHANGED);
    }

    /// Removes a prompt at runtime; `false` when there was none of that name.
    pub fn remove_prompt(&self, name: &str) -> bool {
        let removed = {
            let mut registry = self.registry_mut();
            let before = registry.prompts.len();
            registry.prompts.retain(|p| p.prompt.name != name);
            registry.prompts.len() != before
        };
        if removed {
            self.list_changed(methods::NOTIFICATION_PROMPTS_LIST_CHANGED);
        }
        removed
    }

    /// The server's name and version.
    pub fn implementation(&self) -> Implementation {
        self.config().info.clone()
    }

    /// The tools, in registration order.
    pub fn tools(&self) -> Vec<Tool> {
        self.registry()
            .tools
            .iter()
            .map(|t| t.tool.clone())
            .collect()
    }

    /// The capabilities sent in the `initialize` result: the explicit ones when set, else
    /// derived from the registry (`logging` always, since `logging/setLevel` is honoured).
    pub fn server_capabilities(&self) -> ServerCapabilities {
        let config = self.config();
        if let Some(caps) = &config.capabilities {
            return caps.clone();
        }
        let registry = self.registry();
        let flag = |explicit: Option<bool>, any: bool| match explicit {
            Some(list_changed) => Some(ListChangedCapability {
                list_changed: Some(list_changed),
                ..ListChangedCapability::default()
            }),
            None if any => Some(ListChangedCapability {
                list_changed: Some(true),
                ..ListChangedCapability::default()
            }),
            None => None,
        };
        let any_resources = !registry.resources.is_empty() || !registry.templates.is_empty();
        // The extensions, inline under their identifiers: Skills (its files are resources, so
        // `resources` is declared with it) and Tasks.
        let mut extensions = BTreeMap::new();
        if !registry.skills.is_empty() {
            let settings = SkillsCapability {
                directory_read: config.skill_directory_read.unwrap_or(true).then_some(true),
                ..SkillsCapability::default()
            };
            extensions.insert(SKILLS_EXTENSION.to_owned(), settings.to_object());
        }
        if config.tasks.is_some() {
            extensions.insert(crate::schema::TASKS_EXTENSION.to_owned(), JsonObject::new());
        }
        let extensions = (!extensions.is_empty()).then_some(extensions);
        ServerCapabilities {
            extensions,
            tools: flag(config.tools_list_changed, !registry.tools.is_empty()),
            prompts: flag(config.prompts_list_changed, !registry.prompts.is_empty()),
            resources: match config.resources {
                Some((subscribe, list_changed)) => Some((subscribe, list_changed)),
                None if any_resources => Some((true, true)),
                None => None,
            }
            .map(|(subscribe, list_changed)| ResourcesCapability {
                subscribe: Some(subscribe),
                list_changed: Some(list_changed),
                ..ResourcesCapability::default()
            }),
            logging: Some(JsonObject::new()),
            completions: registry.completion.as_ref().map(|_| JsonObject::new()),
            ..ServerCapabilities::default()
        }
    }

    /// Connects a client: a new session that talks to it through `peer`.
    pub fn session(&self, peer: Arc<dyn Peer>) -> ServerSession {
        let session = ServerSession::new(self.clone(), peer);
        let mut sessions = lock(&self.inner.sessions);
        if sessions.list.len() >= sessions.prune_at {
            sessions.prune();
        }
        sessions.list.push(Arc::downgrade(&session.shared));
        session
    }

    /// The live sessions.
    fn live_sessions(&self) -> Vec<ServerSession> {
        let mut sessions = lock(&self.inner.sessions);
        sessions.prune();
        sessions
            .list
            .iter()
            .filter_map(Weak::upgrade)
            .map(|shared| ServerSession { shared })
            .filter(|s| !s.is_closed())
            .collect()
    }

    /// How many sessions are connected.
    pub fn session_count(&self) -> usize {
        self.live_sessions().len()
    }

    /// A list changed: every initialized session is told, and every listen stream that
    /// asked for it, here and (in a cluster) on the other instances.
    fn list_changed(&self, method: &'static str) {
        if !self.announces(method) {
            return;
        }
        let change = Change::ListChanged(method);
        self.tell_sessions(&change);
        self.tell_listeners(&change);
        self.broadcast(&change);
    }

    /// Whether the capabilities announce the `list_changed` notification `method`.
    fn announces(&self, method: &str) -> bool {
        let caps = self.server_capabilities();
        let on = match method {
            methods::NOTIFICATION_TOOLS_LIST_CHANGED => caps.tools.and_then(|c| c.list_changed),
            methods::NOTIFICATION_PROMPTS_LIST_CHANGED => caps.prompts.and_then(|c| c.list_changed),
            _ => caps.resources.and_then(|c| c.list_changed),
        };
        on == Some(true)
    }

    /// Tells the sessions (2025 revisions) of this instance about `change`: every
    /// initialized one of a list change, every one subscribed to the URI of a resource
    /// update. Each goes out as a change notification ([`ServerSession::notify_change`]):
    /// in a cluster, only the instance holding a session's GET stream writes it, so that a
    /// change told to every instance reaches each session once. Returns how many sessions
    /// were handed one.
    fn tell_sessions(&self, change: &Change) -> usize {
        let n = match change {
            Change::ListChanged(method) => Notification::new(*method, None),
            Change::ResourceUpdated(uri) => {
                let params = ResourceUpdatedNotificationParams {
                    uri: uri.clone(),
                    ..ResourceUpdatedNotificationParams::default()
                };
                let Ok(raw) = to_raw(&params) else { return 0 };
                Notification::new(methods::NOTIFICATION_RESOURCES_UPDATED, Some(raw))
            }
        };
        let mut told = 0;
        for session in self.live_sessions() {
            let wanted = match change {
                Change::ListChanged(_) => session.is_initialized(),
                Change::ResourceUpdated(uri) => session.is_subscribed(uri),
            };
            // A session whose transport is gone is dropped by its driver; nothing to do.
            if wanted && session.notify_change(n.clone()).is_ok() {
                told += 1;
            }
        }
        told
    }

    /// Tells every session subscribed to `uri` that the resource changed
    /// (`notifications/resources/updated`), and every listen stream (2026-07-28) that asked
    /// for `uri`. Returns how many sessions and listen streams of this instance were told.
    ///
    /// In a cluster, the listen streams held by the other instances are told too, through
    /// the bus, each exactly once while the bus is up (see the cluster module's consistency
    /// model), and so are the sessions of the 2025 revisions, on the instance that holds each
    /// one's GET stream (once per session; not at all while it has none open).
    pub fn notify_resource_updated(&self, uri: &str) -> usize {
        let change = Change::ResourceUpdated(uri.to_owned());
        let mut told = self.tell_sessions(&change);
        told += self.tell_listeners(&change);
        self.broadcast(&change);
        told
    }

    /// Writes `change` on every listen stream of this instance whose filter asked for it,
    /// with that stream's subscription id; how many were told.
    fn tell_listeners(&self, change: &Change) -> usize {
        let mut told = 0;
        for l in lock(&self.inner.listeners).iter() {
            let (method, params) = match change {
                Change::ListChanged(method) => {
                    let wanted = match *method {
                        methods::NOTIFICATION_TOOLS_LIST_CHANGED => l.filter.tools_list_changed,
                        methods::NOTIFICATION_PROMPTS_LIST_CHANGED => l.filter.prompts_list_changed,
                        _ => l.filter.resources_list_changed,
                    };
                    if wanted != Some(true) {
                        continue;
                    }
                    let params = serde_json::json!({ "_meta": listener_meta(&l.ctx) });
                    (*method, params)
                }
                Change::ResourceUpdated(uri) => {
                    let wanted = l
                        .filter
                        .resource_subscriptions
                        .as_ref()
                        .is_some_and(|uris| uris.iter().any(|u| u == uri));
                    if !wanted {
                        continue;
                    }
                    let params = serde_json::json!({ "uri": uri, "_meta": listener_meta(&l.ctx) });
                    (methods::NOTIFICATION_RESOURCES_UPDATED, params)
                }
            };
            if let Ok(raw) = to_raw(&params)
                && l.ctx.notify(Notification::new(method, Some(raw))).is_ok()
            {
                told += 1;
            }
        }
        told
    }

    /// In a cluster: hands `change` to the server's voice, for the other instances.
    fn broadcast(&self, change: &Change) {
        let Some((_, voice)) = self.voice() else {
            return;
        };
        if let Some(notice) = change.encode() {
            voice.broadcast(notice);
        }
    }

    /// The server's voice in its cluster, when it is bound to a clustered router.
    pub(crate) fn cluster_voice(&self) -> Option<Arc<dyn ClusterVoice>> {
        self.voice().map(|(_, v)| v)
    }

    /// In a cluster: tells the other instances that task `id`'s record changed (the one
    /// running it reads it again).
    pub(crate) fn broadcast_task(&self, id: &str) {
        if let Some((_, voice)) = self.voice()
            && let Ok(wire) = serde_json::to_vec(&WireTaskNotice {
                task: id.to_owned(),
            })
        {
            voice.broadcast(bytes::Bytes::from(wire));
        }
    }

    /// The first live clustered binding (dead ones are pruned).
    fn voice(&self) -> Option<(u64, Arc<dyn ClusterVoice>)> {
        let mut voices = lock(&self.inner.voices);
        voices.list.retain(|(_, w)| w.strong_count() > 0);
        voices
            .list
            .iter()
            .find_map(|(id, w)| w.upgrade().map(|v| (*id, v)))
    }

    /// A clustered binding joins: the server's changes may leave through it from now on.
    /// Returns the id it hears the cluster by ([`Server::cluster_notice`]).
    pub(crate) fn join_cluster(&self, voice: Weak<dyn ClusterVoice>) -> u64 {
        let mut voices = lock(&self.inner.voices);
        voices.next += 1;
        let id = voices.next;
        voices.list.push((id, voice));
        id
    }

    /// A notice another instance broadcast, as the router of binding `link` received it:
    /// told to this instance's listen streams (once: only the server's voice hears; see
    /// [`Voices`]). A notice this version does not know is logged and dropped. Returns how
    /// many listen streams were told.
    pub(crate) fn cluster_notice(&self, link: u64, payload: &[u8]) -> usize {
        if self.voice().map(|(id, _)| id) != Some(link) {
            return 0;
        }
        if let Ok(WireTaskNotice { task }) = serde_json::from_slice(payload) {
            if let Some(tasks) = self.config().tasks.clone() {
                tasks.wake(&task);
            }
            return 0;
        }
        match Change::decode(payload) {
            Some(change) => {
                // The sessions whose GET stream is here (see `tell_sessions`), if this
                // instance announces the change too.
                let sessions = match &change {
                    Change::ListChanged(method) if !self.announces(method) => 0,
                    _ => self.tell_sessions(&change),
                };
                sessions + self.tell_listeners(&change)
            }
            None => {
                tracing::warn!(
                    len = payload.len(),
                    "a cluster notice this version does not know is ignored"
                );
                0
            }
        }
    }

    /// How many `subscriptions/listen` streams are open.
    pub fn listener_count(&self) -> usize {
        lock(&self.inner.listeners).len()
    }
}

/// What `resources/read` gives for a skill file: text when the bytes are UTF-8, else a base64
/// blob.
fn skill_file_contents(uri: String, bytes: &[u8], mime: Option<String>) -> ResourceContents {
    use base64::Engine as _;
    let contents = match std::str::from_utf8(bytes) {
        Ok(text) => ResourceContents::text(uri, text),
        Err(_) => {
            ResourceContents::blob(uri, base64::engine::general_purpose::STANDARD.encode(bytes))
        }
    };
    match mime {
        Some(mime) => contents.with_mime_type(mime),
        None => contents,
    }
}

/// The `_meta` of a notification on a listen stream: the subscription it belongs to.
pub(crate) fn listener_meta(ctx: &RequestContext) -> serde_json::Value {
    serde_json::json!({
        crate::schema::meta_keys::SUBSCRIPTION_ID: ctx.request_id()
    })
}

#[cfg(test)]
mod tests {
    use super::{Change, methods};

    #[test]
    fn cluster_notices_round_trip_and_unknown_ones_are_refused() {
        for change in [
            Change::ListChanged(methods::NOTIFICATION_TOOLS_LIST_CHANGED),
            Change::ListChanged(methods::NOTIFICATION_PROMPTS_LIST_CHANGED),
            Change::ListChanged(methods::NOTIFICATION_RESOURCES_LIST_CHANGED),
            Change::ResourceUpdated("x://1".into()),
        ] {
            let wire = change.encode().expect("encodes");
            assert_eq!(Change::decode(&wire), Some(change));
        }
        for garbage in [
            &b""[..],
            b"\xff\x00",
            b"[]",
            br#"{"method":"notifications/message"}"#,
            br#"{"method":"notifications/resources/updated"}"#,
            br#"{"method":"notifications/tools/list_changed","uri":"x://1"}"#,
            br#"{"method":7}"#,
        ] {
            assert_eq!(Change::decode(garbage), None, "{garbage:?}");
        }
    }
}
