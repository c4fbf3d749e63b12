//! The server side of the service layer: [`Server`], the registry of tools, resources,
//! resource templates, prompts and the completion handler, and [`ServerSession`], one
//! client's connection to it.
//!
//! # Theory of operation
//!
//! A [`Server`] is a cheaply cloneable handle (an `Arc` inside) to its definition and
//! registry. The definition can change at runtime ([`Server::add_tool`],
//! [`Server::remove_tool`], …): each change sends the matching `list_changed` notification to
//! every initialized session when the capability says so.
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
//! template matching for `resources/read`, required prompt arguments for `prompts/get`, and
//! `-32601` for methods it does not know.

mod context;
mod dispatch;
pub mod mrtr;
pub mod seal;
mod session;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock, Weak};

pub use context::RequestContext;
pub use session::{Peer, ServerSession, SessionState};

use super::cancel::lock;
use super::error::to_raw;
use super::uri_template::{TemplateError, UriTemplate};
use super::{Error, PromptArgs, ToolArgs};
use crate::jsonrpc::Notification;
use crate::schema::{
    CallToolResult, CompleteRequestParams, GetPromptResult, Implementation, JsonObject,
    ListChangedCapability, Prompt, Resource, ResourceContents, ResourceTemplate,
    ResourceUpdatedNotificationParams, ResourcesCapability, ServerCapabilities, Tool, methods,
};
use session::SessionShared;

/// A boxed, sendable future: what handlers are stored as.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a tool handler returns: a result (with `isError` for failures the model should see),
/// or an [`Error`] (an application failure becomes an `isError` result too; a protocol error
/// a JSON-RPC error).
pub type ToolResult = Result<CallToolResult, Error>;

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
}

pub(crate) struct Inner {
    pub(crate) config: RwLock<Config>,
    pub(crate) registry: RwLock<Registry>,
    sessions: Mutex<SessionList>,
    /// Open `subscriptions/listen` streams (2026-07-28).
    pub(crate) listeners: Mutex<Vec<Listener>>,
    pub(crate) next_listener: std::sync::atomic::AtomicU64,
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
    /// A server called `name` at `version`, with nothing registered (the seed's
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
                sessions: Mutex::new(SessionList::default()),
                listeners: Mutex::new(Vec::new()),
                next_listener: std::sync::atomic::AtomicU64::new(1),
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

    pub(crate) fn registry(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        self.inner
            .registry
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn registry_mut(&self) -> std::sync::RwLockWriteGuard<'_, Registry> {
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

    /// Declares the `tools` capability even before a tool is registered (the seed's
    /// `WithToolCapabilities`), with `listChanged` as given.
    pub fn tool_capabilities(self, list_changed: bool) -> Self {
        self.config_mut().tools_list_changed = Some(list_changed);
        self
    }

    /// Declares the `resources` capability (the seed's `WithResourceCapabilities`).
    pub fn resource_capabilities(self, subscribe: bool, list_changed: bool) -> Self {
        self.config_mut().resources = Some((subscribe, list_changed));
        self
    }

    /// Declares the `prompts` capability (the seed's `WithPromptCapabilities`).
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

    /// Registers a tool and its handler (the seed's `AddTool`). A tool of the same name is
    /// replaced.
    pub fn tool<F, Fut>(self, tool: Tool, handler: F) -> Self
    where
        F: Fn(RequestContext, ToolArgs) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolResult> + Send + 'static,
    {
        self.add_tool(tool, handler);
        self
    }

    /// Registers a static resource and its handler (the seed's `AddResource`).
    pub fn resource<F, Fut>(self, resource: Resource, handler: F) -> Self
    where
        F: Fn(RequestContext, ResourceRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ResourceResult> + Send + 'static,
    {
        self.add_resource(resource, handler);
        self
    }

    /// Registers a resource template and its handler (the seed's `AddResourceTemplate`),
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

    /// Registers a prompt and its handler (the seed's `AddPrompt`).
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
        ServerCapabilities {
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

    fn list_changed(&self, method: &'static str) {
        let caps = self.server_capabilities();
        let on = match method {
            methods::NOTIFICATION_TOOLS_LIST_CHANGED => caps.tools.and_then(|c| c.list_changed),
            methods::NOTIFICATION_PROMPTS_LIST_CHANGED => caps.prompts.and_then(|c| c.list_changed),
            _ => caps.resources.and_then(|c| c.list_changed),
        };
        if on != Some(true) {
            return;
        }
        for session in self.live_sessions() {
            if session.is_initialized() {
                // A session whose transport is gone is dropped by its driver; nothing to do.
                let _ = session.notify(Notification::new(method, None));
            }
        }
        for l in lock(&self.inner.listeners).iter() {
            let wanted = match method {
                methods::NOTIFICATION_TOOLS_LIST_CHANGED => l.filter.tools_list_changed,
                methods::NOTIFICATION_PROMPTS_LIST_CHANGED => l.filter.prompts_list_changed,
                _ => l.filter.resources_list_changed,
            };
            if wanted == Some(true) {
                let params = serde_json::json!({ "_meta": listener_meta(&l.ctx) });
                if let Ok(raw) = to_raw(&params) {
                    let _ = l.ctx.notify(Notification::new(method, Some(raw)));
                }
            }
        }
    }

    /// Tells every session subscribed to `uri` that the resource changed
    /// (`notifications/resources/updated`). Returns how many sessions were told.
    pub fn notify_resource_updated(&self, uri: &str) -> usize {
        let params = ResourceUpdatedNotificationParams {
            uri: uri.to_owned(),
            ..ResourceUpdatedNotificationParams::default()
        };
        let Ok(raw) = to_raw(&params) else { return 0 };
        let mut told = 0;
        for session in self.live_sessions() {
            if session.is_subscribed(uri) {
                let n =
                    Notification::new(methods::NOTIFICATION_RESOURCES_UPDATED, Some(raw.clone()));
                if session.notify(n).is_ok() {
                    told += 1;
                }
            }
        }
        for l in lock(&self.inner.listeners).iter() {
            let wanted = l
                .filter
                .resource_subscriptions
                .as_ref()
                .is_some_and(|uris| uris.iter().any(|u| u == uri));
            if wanted {
                let params = serde_json::json!({ "uri": uri, "_meta": listener_meta(&l.ctx) });
                if let Ok(raw) = to_raw(&params) {
                    let n = Notification::new(methods::NOTIFICATION_RESOURCES_UPDATED, Some(raw));
                    if l.ctx.notify(n).is_ok() {
                        told += 1;
                    }
                }
            }
        }
        told
    }

    /// How many `subscriptions/listen` streams are open.
    pub fn listener_count(&self) -> usize {
        lock(&self.inner.listeners).len()
    }
}

/// The `_meta` of a notification on a listen stream: the subscription it belongs to.
pub(crate) fn listener_meta(ctx: &RequestContext) -> serde_json::Value {
    serde_json::json!({
        crate::schema::meta_keys::SUBSCRIPTION_ID: ctx.request_id()
    })
}
