//! [`Server::handle_request`]: one client request to one response, by method.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{RequestContext, ResourceRequest, Server};
use crate::cancel::lock;
use crate::error::to_raw;
use crate::schema::{
    CallToolRequestParams, CallToolResult, CancelTaskRequestParams, CompleteRequestParams,
    CompleteResult, Completion, CreateTaskResult, DiscoverResult, EmptyResult,
    GetPromptRequestParams, GetTaskRequestParams, GetTaskResult, InitializeRequestParams,
    InitializeResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResult,
    ResultMeta, ResultType, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter,
    SubscriptionsListenRequestParams, SubscriptionsListenResult, UpdateTaskRequestParams, methods,
};
use crate::schema::{
    DIRECTORY_MIME_TYPE, GetSkillRequestParams, GetSkillResult, ListSkillsResult,
    ReadDirectoryRequestParams, ReadDirectoryResult, Resource,
};
use crate::skills::Skill;
use crate::validate::{apply_defaults, validate};
use crate::{Error, PromptArgs, ToolArgs};
use mcp_proto::ProtocolVersion;
use mcp_proto::jsonrpc::Notification;
use mcp_proto::jsonrpc::{Request, Response};

/// `MissingRequiredClientCapabilityError` (-32021) naming the Tasks extension: `what` can
/// only be served as a task, and the client did not declare the extension.
fn tasks_required(what: &str) -> Error {
    let extensions = BTreeMap::from([(
        crate::schema::TASKS_EXTENSION.to_owned(),
        crate::schema::JsonObject::new(),
    )]);
    let required = crate::schema::ClientCapabilities {
        extensions: Some(extensions),
        ..Default::default()
    };
    super::context::missing_capability(&format!("the Tasks extension ({what})"), required)
}

/// At most this many completion values go in one answer (the spec's limit).
const MAX_COMPLETION_VALUES: usize = 100;

/// Reads `params` as `T`; absent params read as `{}` (so a `T` with required fields fails
/// with a message naming them).
fn params<T: DeserializeOwned>(request: &Request) -> Result<T, Error> {
    let text = request.params.as_deref().map_or("{}", |p| p.get());
    serde_json::from_str(text).map_err(|e| {
        Error::invalid_params(format_args!("invalid params for {}: {e}", request.method))
    })
}

fn answer<T: Serialize>(request: &Request, result: Result<T, Error>) -> Response {
    let id = request.id.clone();
    match result.and_then(|r| to_raw(&r).map_err(Error::internal)) {
        Ok(raw) => Response::result(id, raw),
        Err(e) => Response::error(Some(id), e.to_error_object()),
    }
}

/// The methods whose results are cacheable in 2026-07-28 (`CacheableResult`, SEP-2549).
/// `skills/list` and `skills/get` (the Skills extension) carry the same attributes.
const CACHEABLE: [&str; 8] = [
    methods::TOOLS_LIST,
    methods::PROMPTS_LIST,
    methods::RESOURCES_LIST,
    methods::RESOURCES_TEMPLATES_LIST,
    methods::RESOURCES_READ,
    methods::SERVER_DISCOVER,
    methods::SKILLS_LIST,
    methods::SKILLS_GET,
];

/// The top-level members of a result that [`stamp_modern`] may add, if present. Everything
/// else is skipped without being built (no value tree, nothing re-serialized).
#[derive(serde::Deserialize)]
struct Stamped {
    #[serde(rename = "resultType")]
    result_type: Option<String>,
    #[serde(rename = "cacheScope")]
    cache_scope: Option<serde::de::IgnoredAny>,
    #[serde(rename = "ttlMs")]
    ttl_ms: Option<serde::de::IgnoredAny>,
}

/// Gives an error answer for a modern client the code 2026-07-28 assigns: a resource that
/// does not exist is `-32602` Invalid Params there (the `-32002` of the earlier revisions is
/// retired and never reused). Whoever produced the error (the registry, or a handler's own
/// [`Error::resource_not_found`]) speaks the era of its request this way.
fn modern_error_code(mut response: Response) -> Response {
    if let mcp_proto::jsonrpc::Outcome::Error(e) = &mut response.outcome
        && e.code == mcp_proto::jsonrpc::error_codes::RESOURCE_NOT_FOUND
    {
        e.code = mcp_proto::jsonrpc::error_codes::INVALID_PARAMS;
    }
    response
}

/// Completes a result for a modern client with the fields 2026-07-28 requires of it and the
/// legacy shapes lack: `resultType` (`"complete"` unless the result says otherwise, e.g. an
/// MRTR `"input_required"`), and for a cacheable result `cacheScope` and `ttlMs` from the
/// server's [`cache_hint`](Server::cache_hint) unless the result carries its own. Errors and
/// non-object results pass unchanged. The result text is only scanned for those three
/// members; what is missing is spliced in after the opening brace.
fn stamp_modern(
    response: Response,
    method: &str,
    (scope, ttl_ms): (crate::schema::CacheScope, u64),
) -> Response {
    let mcp_proto::jsonrpc::Outcome::Result(raw) = &response.outcome else {
        return response;
    };
    let text = raw.get();
    let Some(body) = text.trim_start().strip_prefix('{') else {
        return response;
    };
    let Ok(present) = serde_json::from_str::<Stamped>(text) else {
        return response;
    };
    let mut added = String::new();
    let result_type = present.result_type.as_deref().unwrap_or("complete");
    if present.result_type.is_none() {
        added.push_str(r#""resultType":"complete","#);
    }
    if result_type == "complete" && CACHEABLE.contains(&method) {
        if present.cache_scope.is_none() {
            let scope = match scope {
                crate::schema::CacheScope::Public => "public",
                crate::schema::CacheScope::Private => "private",
            };
            added.push_str(&format!(r#""cacheScope":"{scope}","#));
        }
        if present.ttl_ms.is_none() {
            added.push_str(&format!(r#""ttlMs":{ttl_ms},"#));
        }
    }
    if added.is_empty() {
        return response;
    }
    // `{}` takes the members without their last comma.
    let rest = body.trim_start();
    if rest.starts_with('}') {
        added.pop();
    }
    match serde_json::value::RawValue::from_string(format!("{{{added}{body}")) {
        Ok(raw) => Response {
            id: response.id,
            outcome: mcp_proto::jsonrpc::Outcome::Result(raw),
        },
        Err(_) => response,
    }
}

/// The page of `items` that starts at `cursor`, and the next cursor.
fn page<T: Clone>(
    items: &[T],
    cursor: Option<&str>,
    size: Option<usize>,
) -> Result<(Vec<T>, Option<String>), Error> {
    let start = match cursor {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|n| *n <= items.len())
            .ok_or_else(|| Error::invalid_params(format_args!("invalid cursor {c:?}")))?,
    };
    let end = size.map_or(items.len(), |s| start.saturating_add(s).min(items.len()));
    let next = (end < items.len()).then(|| end.to_string());
    Ok((items[start..end].to_vec(), next))
}

impl Server {
    /// Answers one client request (the transport-agnostic core; [`ServerSession`] wraps it
    /// with cancellation). Protocol failures become JSON-RPC errors; see the module docs for
    /// the methods answered.
    ///
    /// [`ServerSession`]: super::ServerSession
    pub fn handle_request(
        &self,
        ctx: RequestContext,
        request: Request,
    ) -> impl Future<Output = Response> + Send + 'static {
        let server = self.clone();
        async move {
            let modern = ctx.is_modern();
            let cache_hint = server
                .config()
                .cache_hint
                .unwrap_or((crate::schema::CacheScope::Private, 0));
            let method = request.method.clone();
            let response = server.dispatch(ctx, request).await;
            // `ping` (gone from 2026-07-28, still sent by SDKs) answers a bare `{}`.
            if modern && &*method != methods::PING {
                stamp_modern(modern_error_code(response), &method, cache_hint)
            } else {
                response
            }
        }
    }

    async fn dispatch(self, ctx: RequestContext, request: Request) -> Response {
        let server = self;
        {
            match &*request.method {
                methods::INITIALIZE => answer(&request, server.initialize(&ctx, &request)),
                methods::PING => answer(&request, Ok(EmptyResult::default())),
                methods::SERVER_DISCOVER => answer(&request, Ok(server.discover())),
                methods::LOGGING_SET_LEVEL => answer(&request, server.set_level(&ctx, &request)),
                methods::TOOLS_LIST => answer(&request, server.list_tools(&request)),
                methods::TOOLS_CALL => {
                    // Only a server with tasks on gives its handlers a place for one.
                    let created = server
                        .config()
                        .tasks
                        .is_some()
                        .then(|| Arc::new(std::sync::Mutex::new(None)));
                    let mut ctx = ctx;
                    ctx.created.clone_from(&created);
                    let result = server.call_tool(ctx, &request).await;
                    // A handler that went on as a task answers with the task, whatever it
                    // returned after (the client learns of the task only this way).
                    match created.and_then(|c| lock(&c).take()) {
                        Some(task) => answer(
                            &request,
                            Ok(CreateTaskResult {
                                result_type: ResultType::Task,
                                task,
                                meta: None,
                            }),
                        ),
                        None => answer(&request, result),
                    }
                }
                methods::TASKS_GET | methods::TASKS_UPDATE | methods::TASKS_CANCEL => {
                    server.task_method(&ctx, &request).await
                }
                methods::RESOURCES_LIST => answer(&request, server.list_resources(&request)),
                methods::RESOURCES_TEMPLATES_LIST => {
                    answer(&request, server.list_templates(&request))
                }
                methods::RESOURCES_READ => {
                    let result = server.read_resource(ctx, &request).await;
                    answer(&request, result)
                }
                methods::RESOURCES_SUBSCRIBE => {
                    answer(&request, server.subscribe(&ctx, &request, true))
                }
                methods::RESOURCES_UNSUBSCRIBE => {
                    answer(&request, server.subscribe(&ctx, &request, false))
                }
                methods::PROMPTS_LIST => answer(&request, server.list_prompts(&request)),
                methods::PROMPTS_GET => {
                    let result = server.get_prompt(ctx, &request).await;
                    answer(&request, result)
                }
                methods::SUBSCRIPTIONS_LISTEN if ctx.is_modern() => {
                    let result = server.listen(ctx, &request).await;
                    answer(&request, result)
                }
                methods::COMPLETION_COMPLETE => {
                    let result = server.complete(ctx, &request).await;
                    answer(&request, result)
                }
                methods::SKILLS_LIST => answer(&request, server.list_skills(&request)),
                methods::SKILLS_GET => answer(&request, server.get_skill(&request)),
                methods::RESOURCES_DIRECTORY_READ => {
                    answer(&request, server.read_directory(&request))
                }
                other => answer::<EmptyResult>(&request, Err(Error::method_not_found(other))),
            }
        }
    }

    /// `tasks/get`, `tasks/update`, `tasks/cancel` (the Tasks extension; see [`super::tasks`]):
    /// unknown methods (-32601) without it, refused with -32021 to a client that did not
    /// declare it; update and cancel are acknowledged whatever the task. In a cluster the
    /// task may run on another instance: it is read and changed in the store, and its
    /// instance is told of a change.
    async fn task_method(&self, ctx: &RequestContext, request: &Request) -> Response {
        let Some(tasks) = self.config().tasks.clone() else {
            return answer::<EmptyResult>(request, Err(Error::method_not_found(&request.method)));
        };
        if !ctx.accepts_tasks() {
            return answer::<EmptyResult>(request, Err(tasks_required(&request.method)));
        }
        let voice = self.cluster_voice();
        let principal = ctx.principal();
        match &*request.method {
            methods::TASKS_GET => {
                let got = match params::<GetTaskRequestParams>(request) {
                    Ok(p) => tasks.get(&voice, &p.task_id, principal).await,
                    Err(e) => Err(e),
                };
                answer(
                    request,
                    got.map(|task| GetTaskResult {
                        result_type: None,
                        task,
                        meta: None,
                    }),
                )
            }
            methods::TASKS_UPDATE => {
                let done = match params::<UpdateTaskRequestParams>(request) {
                    Ok(p) => tasks
                        .update(&voice, &p.task_id, principal, p.input_responses)
                        .await
                        .map(|tell| self.tell_task(tell, &p.task_id)),
                    Err(e) => Err(e),
                };
                answer(request, done.map(|()| EmptyResult::default()))
            }
            _ => {
                let done = match params::<CancelTaskRequestParams>(request) {
                    Ok(p) => tasks
                        .cancel(&voice, &p.task_id, principal)
                        .await
                        .map(|tell| self.tell_task(tell, &p.task_id)),
                    Err(e) => Err(e),
                };
                answer(request, done.map(|()| EmptyResult::default()))
            }
        }
    }

    /// Tells the cluster that task `id` changed, when `tell` (it does not run here).
    fn tell_task(&self, tell: bool, id: &str) {
        if tell {
            self.broadcast_task(id);
        }
    }

    /// Version negotiation: the client's revision when it is a legacy one we speak, else the
    /// newest legacy one (`initialize` does not exist in the modern era).
    fn initialize(
        &self,
        ctx: &RequestContext,
        request: &Request,
    ) -> Result<InitializeResult, Error> {
        let p: InitializeRequestParams = params(request)?;
        let version = ProtocolVersion::parse(&p.protocol_version)
            .filter(|v| ProtocolVersion::LEGACY.contains(v))
            .unwrap_or(ProtocolVersion::LATEST_LEGACY);
        {
            let session = ctx.session();
            let mut state = lock(&session.shared.state);
            state.protocol_version = Some(version);
            state.set_client_info(&p.client_info);
            state.set_client_capabilities(&p.capabilities);
        }
        // Capabilities first: they read the configuration lock themselves.
        let capabilities = self.server_capabilities();
        let config = self.config();
        Ok(InitializeResult {
            protocol_version: version.as_str().to_owned(),
            capabilities,
            server_info: config.info.clone(),
            instructions: config.instructions.clone(),
            ..InitializeResult::default()
        })
    }

    fn discover(&self) -> DiscoverResult {
        let capabilities = self.server_capabilities();
        let config = self.config();
        let meta = ResultMeta {
            server_info: Some(config.info.clone()),
            ..ResultMeta::default()
        };
        DiscoverResult {
            supported_versions: ProtocolVersion::ALL
                .iter()
                .map(|v| v.as_str().to_owned())
                .collect(),
            capabilities,
            instructions: config.instructions.clone(),
            meta: Some(meta.to_meta()),
            ..DiscoverResult::default()
        }
    }

    /// What a `subscriptions/listen` may have: what it asked for, within what the server's
    /// capabilities announce.
    fn grant(&self, asked: &SubscriptionFilter) -> SubscriptionFilter {
        let caps = self.server_capabilities();
        let on = |asked: Option<bool>, cap: Option<bool>| {
            (asked == Some(true) && cap == Some(true)).then_some(true)
        };
        SubscriptionFilter {
            tools_list_changed: on(
                asked.tools_list_changed,
                caps.tools.as_ref().and_then(|c| c.list_changed),
            ),
            prompts_list_changed: on(
                asked.prompts_list_changed,
                caps.prompts.as_ref().and_then(|c| c.list_changed),
            ),
            resources_list_changed: on(
                asked.resources_list_changed,
                caps.resources.as_ref().and_then(|c| c.list_changed),
            ),
            resource_subscriptions: asked
                .resource_subscriptions
                .clone()
                .filter(|_| caps.resources.as_ref().and_then(|c| c.subscribe) == Some(true)),
            ..SubscriptionFilter::default()
        }
    }

    /// `subscriptions/listen` (2026-07-28): acknowledges what is granted, then keeps the
    /// stream open and registered until the client closes it (which cancels this handler and
    /// unregisters it). The server's change notifications reach it with the subscription id.
    async fn listen(
        &self,
        ctx: RequestContext,
        request: &Request,
    ) -> Result<SubscriptionsListenResult, Error> {
        let p: SubscriptionsListenRequestParams = params(request)?;
        let granted = self.grant(&p.notifications);
        let ack = serde_json::json!({
            "notifications": granted,
            "_meta": super::listener_meta(&ctx),
        });
        let raw = to_raw(&ack).map_err(Error::internal)?;
        ctx.notify(Notification::new(
            methods::NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED,
            Some(raw),
        ))
        .map_err(|e| Error::internal(e.to_string()))?;
        let id = self
            .inner
            .next_listener
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.inner.listeners).push(super::Listener {
            id,
            filter: granted,
            ctx: ctx.clone(),
        });
        let _registered = ListenerGuard {
            server: self.clone(),
            id,
        };
        ctx.cancelled().await;
        let meta = serde_json::json!({ "_meta": super::listener_meta(&ctx) });
        serde_json::from_value(meta).map_err(Error::internal)
    }

    fn set_level(&self, ctx: &RequestContext, request: &Request) -> Result<EmptyResult, Error> {
        let p: SetLevelRequestParams = params(request)?;
        lock(&ctx.session().shared.state).log_level = Some(p.level);
        Ok(EmptyResult::default())
    }

    fn list_tools(&self, request: &Request) -> Result<ListToolsResult, Error> {
        let p: PaginatedRequestParams = params(request)?;
        let tools: Vec<_> = self
            .registry()
            .tools
            .iter()
            .map(|t| t.tool.clone())
            .collect();
        let (tools, next_cursor) = page(&tools, p.cursor.as_deref(), self.config().page_size)?;
        Ok(ListToolsResult {
            tools,
            next_cursor,
            ..ListToolsResult::default()
        })
    }

    async fn call_tool(
        &self,
        ctx: RequestContext,
        request: &Request,
    ) -> Result<CallToolResult, Error> {
        let p: CallToolRequestParams = params(request)?;
        let entry = self
            .registry()
            .tools
            .iter()
            .find(|t| t.tool.name == p.name)
            .cloned()
            .ok_or_else(|| Error::invalid_params(format_args!("Unknown tool: {}", p.name)))?;
        let required = entry.tool.execution.as_ref().and_then(|e| e.task_support)
            == Some(crate::schema::TaskSupport::Required);
        if required && !ctx.accepts_tasks() {
            return Err(tasks_required(&format!("the tool `{}`", p.name)));
        }
        let mut args = p.arguments.unwrap_or_default();
        if self.config().validate_arguments {
            apply_defaults(&entry.tool.input_schema, &mut args);
            if let Err(problems) = validate(&entry.tool.input_schema, &args) {
                return Ok(CallToolResult::error(format!(
                    "Invalid arguments for tool `{}`: {problems}",
                    p.name
                )));
            }
        }
        let result =
            tool_outcome((entry.handler)(ctx, ToolArgs::new(args)).await).inspect_err(|e| {
                tracing::debug!(
                    tool = p.name.as_str(),
                    error = e.message(),
                    "tool refused the call"
                )
            })?;
        if result.is_error == Some(true) {
            tracing::warn!(tool = p.name.as_str(), error = %tool_error_text(&result), "tool failed");
        }
        Ok(result)
    }

    fn list_resources(&self, request: &Request) -> Result<ListResourcesResult, Error> {
        let p: PaginatedRequestParams = params(request)?;
        let all: Vec<_> = self
            .registry()
            .resources
            .iter()
            .map(|r| r.resource.clone())
            .collect();
        let (resources, next_cursor) = page(&all, p.cursor.as_deref(), self.config().page_size)?;
        Ok(ListResourcesResult {
            resources,
            next_cursor,
            ..ListResourcesResult::default()
        })
    }

    fn list_templates(&self, request: &Request) -> Result<ListResourceTemplatesResult, Error> {
        let p: PaginatedRequestParams = params(request)?;
        let all: Vec<_> = self
            .registry()
            .templates
            .iter()
            .map(|t| t.template.clone())
            .collect();
        let (resource_templates, next_cursor) =
            page(&all, p.cursor.as_deref(), self.config().page_size)?;
        Ok(ListResourceTemplatesResult {
            resource_templates,
            next_cursor,
            ..ListResourceTemplatesResult::default()
        })
    }

    /// Whether some resource or template serves `uri`.
    fn knows_uri(&self, uri: &str) -> bool {
        let registry = self.registry();
        registry.resources.iter().any(|r| r.resource.uri == uri)
            || registry
                .templates
                .iter()
                .any(|t| t.parsed.matches(uri).is_some())
    }

    async fn read_resource(
        &self,
        ctx: RequestContext,
        request: &Request,
    ) -> Result<ReadResourceResult, Error> {
        let p: ReadResourceRequestParams = params(request)?;
        let (handler, params, mime) = {
            let registry = self.registry();
            if let Some(r) = registry.resources.iter().find(|r| r.resource.uri == p.uri) {
                let mime = r.resource.mime_type.clone();
                (Arc::clone(&r.handler), Default::default(), mime)
            } else if let Some((t, vars)) = registry
                .templates
                .iter()
                .find_map(|t| t.parsed.matches(&p.uri).map(|vars| (t, vars)))
            {
                (Arc::clone(&t.handler), vars, t.template.mime_type.clone())
            } else {
                return Err(Error::resource_not_found(&p.uri));
            }
        };
        let uri = p.uri.clone();
        let req = ResourceRequest { uri: p.uri, params };
        match handler(ctx, req).await {
            Ok(mut contents) => {
                // The declared MIME type, on the contents of the URI read that name none.
                for c in &mut contents {
                    let (c_uri, c_mime) = match c {
                        crate::schema::ResourceContents::Text(t) => (&t.uri, &mut t.mime_type),
                        crate::schema::ResourceContents::Blob(b) => (&b.uri, &mut b.mime_type),
                    };
                    if *c_uri == uri && c_mime.is_none() {
                        c_mime.clone_from(&mime);
                    }
                }
                Ok(ReadResourceResult {
                    contents,
                    ..ReadResourceResult::default()
                })
            }
            Err(e) if e.is_protocol() => Err(e),
            Err(e) => Err(Error::internal(e.message())),
        }
    }

    /// The skills, or `-32601` when there are none (the extension is then not declared).
    fn served_skills(&self, method: &str) -> Result<Vec<Skill>, Error> {
        let skills = self.registry().skills.clone();
        if skills.is_empty() {
            return Err(Error::method_not_found(method));
        }
        Ok(skills)
    }

    fn list_skills(&self, request: &Request) -> Result<ListSkillsResult, Error> {
        let p: PaginatedRequestParams = params(request)?;
        let entries: Vec<_> = self
            .served_skills(&request.method)?
            .iter()
            .map(|s| s.entry().clone())
            .collect();
        let (skills, next_cursor) = page(&entries, p.cursor.as_deref(), self.config().page_size)?;
        Ok(ListSkillsResult {
            skills,
            next_cursor,
            ..ListSkillsResult::default()
        })
    }

    fn get_skill(&self, request: &Request) -> Result<GetSkillResult, Error> {
        let skills = self.served_skills(&request.method)?;
        let p: GetSkillRequestParams = params(request)?;
        let skill = skills.iter().find(|s| s.uri() == p.uri).ok_or_else(|| {
            Error::invalid_params(format_args!("Unknown skill: {}", p.uri))
                .with_data(serde_json::json!({ "uri": p.uri }))
        })?;
        Ok(GetSkillResult {
            skill: skill.entry().clone(),
            ..GetSkillResult::default()
        })
    }

    /// `resources/directory/read` over the skills' files: the direct children of a
    /// directory their URIs pass through.
    fn read_directory(&self, request: &Request) -> Result<ReadDirectoryResult, Error> {
        let skills = self.served_skills(&request.method)?;
        if self.config().skill_directory_read == Some(false) {
            return Err(Error::method_not_found(&request.method));
        }
        let p: ReadDirectoryRequestParams = params(request)?;
        let children = directory_children(&skills, &p.uri).ok_or_else(|| {
            Error::invalid_params(format_args!("Not a directory: {}", p.uri))
                .with_data(serde_json::json!({ "uri": p.uri }))
        })?;
        let (resources, next_cursor) =
            page(&children, p.cursor.as_deref(), self.config().page_size)?;
        Ok(ReadDirectoryResult {
            resources,
            next_cursor,
            ..ReadDirectoryResult::default()
        })
    }

    fn subscribe(
        &self,
        ctx: &RequestContext,
        request: &Request,
        on: bool,
    ) -> Result<EmptyResult, Error> {
        let p: SubscribeRequestParams = params(request)?;
        if on && !self.knows_uri(&p.uri) {
            return Err(Error::resource_not_found(&p.uri));
        }
        let session = ctx.session();
        let mut state = lock(&session.shared.state);
        if on {
            state.subscriptions.insert(p.uri);
        } else {
            state.subscriptions.remove(&p.uri);
        }
        Ok(EmptyResult::default())
    }

    fn list_prompts(&self, request: &Request) -> Result<ListPromptsResult, Error> {
        let p: PaginatedRequestParams = params(request)?;
        let all: Vec<_> = self
            .registry()
            .prompts
            .iter()
            .map(|e| e.prompt.clone())
            .collect();
        let (prompts, next_cursor) = page(&all, p.cursor.as_deref(), self.config().page_size)?;
        Ok(ListPromptsResult {
            prompts,
            next_cursor,
            ..ListPromptsResult::default()
        })
    }

    async fn get_prompt(
        &self,
        ctx: RequestContext,
        request: &Request,
    ) -> Result<crate::schema::GetPromptResult, Error> {
        let p: GetPromptRequestParams = params(request)?;
        let entry = self
            .registry()
            .prompts
            .iter()
            .find(|e| e.prompt.name == p.name)
            .cloned()
            .ok_or_else(|| Error::invalid_params(format_args!("Unknown prompt: {}", p.name)))?;
        let args = p.arguments.unwrap_or_default();
        let missing: Vec<&str> = entry
            .prompt
            .arguments
            .iter()
            .flatten()
            .filter(|a| a.required == Some(true) && !args.contains_key(&a.name))
            .map(|a| a.name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(Error::invalid_params(format_args!(
                "missing required arguments for prompt `{}`: {}",
                p.name,
                missing.join(", ")
            )));
        }
        match (entry.handler)(ctx, PromptArgs::new(args)).await {
            Ok(result) => Ok(result),
            Err(e) if e.is_protocol() => Err(e),
            Err(e) => Err(Error::internal(e.message())),
        }
    }

    async fn complete(
        &self,
        ctx: RequestContext,
        request: &Request,
    ) -> Result<CompleteResult, Error> {
        let p: CompleteRequestParams = params(request)?;
        let handler = self
            .registry()
            .completion
            .clone()
            .ok_or_else(|| Error::method_not_found(methods::COMPLETION_COMPLETE))?;
        let mut values = match handler(ctx, p).await {
            Ok(values) => values,
            Err(e) if e.is_protocol() => return Err(e),
            Err(e) => return Err(Error::internal(e.message())),
        };
        let total = values.len() as u64;
        let has_more = values.len() > MAX_COMPLETION_VALUES;
        values.truncate(MAX_COMPLETION_VALUES);
        Ok(CompleteResult {
            completion: Completion {
                values,
                total: Some(total),
                has_more: Some(has_more),
                ..Completion::default()
            },
            ..CompleteResult::default()
        })
    }
}

/// The direct children of the directory `dir` among the skills' files, sorted by URI: files
/// as the resources they are served as, subdirectories as directory resources. `None` when
/// `dir` is no directory of theirs (a file, or nothing served).
fn directory_children(skills: &[Skill], dir: &str) -> Option<Vec<Resource>> {
    // `scheme://` followed by at least one segment, no trailing slash.
    let (_, path) = dir.split_once("://")?;
    if path.is_empty() || dir.ends_with('/') {
        return None;
    }
    let prefix = format!("{dir}/");
    let mut children = BTreeMap::new();
    for resource in skills.iter().flat_map(Skill::resources) {
        if resource.uri == dir {
            return None;
        }
        let Some(rest) = resource.uri.strip_prefix(&prefix) else {
            continue;
        };
        match rest.split_once('/') {
            None => {
                children.insert(resource.uri.clone(), resource.clone());
            }
            Some((sub, _)) => {
                let uri = format!("{prefix}{sub}");
                children
                    .entry(uri.clone())
                    .or_insert_with(|| Resource::new(uri, sub).mime_type(DIRECTORY_MIME_TYPE));
            }
        }
    }
    (!children.is_empty()).then(|| children.into_values().collect())
}

/// What a tool handler's outcome answers: its result; a protocol error ([`Error::protocol`]
/// and friends) as the JSON-RPC error; any other error as a tool error (`isError: true`)
/// with its message. Shared by `tools/call` and a task's work.
pub(crate) fn tool_outcome(
    outcome: Result<CallToolResult, Error>,
) -> Result<CallToolResult, Error> {
    match outcome {
        Err(e) if !e.is_protocol() => Ok(CallToolResult::error(e.message())),
        other => other,
    }
}

/// The text of a failed tool result, for the log: its text blocks, joined.
fn tool_error_text(result: &CallToolResult) -> String {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| match c {
            crate::schema::ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    texts.join(" ")
}

/// Unregisters a listen stream when its handler ends or is dropped.
struct ListenerGuard {
    server: Server,
    id: u64,
}

impl Drop for ListenerGuard {
    fn drop(&mut self) {
        lock(&self.server.inner.listeners).retain(|l| l.id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::page;

    #[test]
    fn pages_and_cursors() {
        let items = [1, 2, 3, 4, 5];
        assert_eq!(page(&items, None, None).unwrap(), (items.to_vec(), None));
        assert_eq!(
            page(&items, None, Some(2)).unwrap(),
            (vec![1, 2], Some("2".into()))
        );
        assert_eq!(
            page(&items, Some("2"), Some(2)).unwrap(),
            (vec![3, 4], Some("4".into()))
        );
        assert_eq!(page(&items, Some("4"), Some(2)).unwrap(), (vec![5], None));
        assert_eq!(page(&items, Some("5"), Some(2)).unwrap(), (vec![], None));
        assert!(page(&items, Some("6"), Some(2)).is_err());
        assert!(page(&items, Some("x"), None).is_err());
    }
}

#[cfg(test)]
mod stamp_tests {
    use super::stamp_modern;
    use crate::schema::CacheScope;
    use mcp_proto::jsonrpc::{Outcome, RequestId, Response};

    fn stamp(result: &str, method: &str) -> serde_json::Value {
        let raw = serde_json::value::RawValue::from_string(result.to_owned()).unwrap();
        let out = stamp_modern(
            Response::result(RequestId::Number(1), raw),
            method,
            (CacheScope::Public, 5),
        );
        match out.outcome {
            Outcome::Result(raw) => serde_json::from_str(raw.get()).unwrap(),
            Outcome::Error(e) => panic!("{e:?}"),
        }
    }

    #[test]
    fn modern_results_get_only_what_they_lack() {
        let v = stamp("{}", "tools/list");
        assert_eq!(
            v,
            serde_json::json!({"resultType": "complete", "cacheScope": "public", "ttlMs": 5})
        );
        let v = stamp(r#" {"content":[{"resultType":"x"}]} "#, "tools/call");
        assert_eq!(v["resultType"], "complete", "a nested key does not count");
        assert!(v.get("ttlMs").is_none(), "tools/call is not cacheable");
        let v = stamp(
            r#"{"resultType":"input_required","inputRequests":{}}"#,
            "prompts/list",
        );
        assert_eq!(v["resultType"], "input_required");
        assert!(
            v.get("cacheScope").is_none(),
            "only complete results are cacheable"
        );
        let v = stamp(
            r#"{"tools":[],"ttlMs":60,"cacheScope":"private"}"#,
            "tools/list",
        );
        assert_eq!(
            (&v["ttlMs"], &v["cacheScope"]),
            (&serde_json::json!(60), &serde_json::json!("private"))
        );
        assert_eq!(
            stamp("[1]", "tools/list"),
            serde_json::json!([1]),
            "not an object: unchanged"
        );
    }
}
