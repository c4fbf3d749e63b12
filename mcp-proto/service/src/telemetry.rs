//! Telemetry hooks: what an observer (an OpenTelemetry bridge such as the `mcp-otel` crate)
//! needs to report MCP operations and sessions as OpenTelemetry's semantic conventions for
//! MCP describe them, without this crate depending on OpenTelemetry.
//!
//! # Theory of operation
//!
//! A [`Telemetry`] is installed on a [`Server`](crate::Server) with
//! [`Server::telemetry`](crate::Server::telemetry) and on a client with
//! [`ClientBuilder::telemetry`](crate::client::ClientBuilder::telemetry). Without one
//! nothing here runs (no params are re-read, nothing is allocated).
//!
//! - **Operations.** Each request or notification this side sends starts an *outgoing* operation
//!   ([`Telemetry::outgoing`], a `CLIENT` span in the conventions), in the caller's context,
//!   just before the request leaves; the observer may write trace-context fields into the
//!   request's `params._meta` (W3C `traceparent`, `tracestate`, `baggage`, unprefixed, as
//!   SEP-414 says). Each request or notification this side receives starts an *incoming* operation
//!   ([`Telemetry::incoming`], a `SERVER` span) with the request's `params._meta`, from which
//!   the observer extracts the caller's context; the work that answers it runs inside
//!   [`OperationScope::instrument`]. Both end once with an [`End`]: the client's calls go to
//!   servers, and the server's requests (sampling, elicitation, roots) go to clients, so
//!   a server reports outgoing operations too, and a client incoming ones. A notification's
//!   operation ends as soon as it is queued (sent) or handled (received).
//! - **Sessions.** A legacy-era session (one with an `Mcp-Session-Id`) starts a
//!   [`SessionScope`] when it is first seen and ends it when it closes. The 2026-07-28 era
//!   has no session: nothing is reported for it, and no operation carries a session id.
//!
//! | event | who calls it | facts |
//! |---|---|---|
//! | outgoing request | `Client::request*`; a server handler's request to its client | [`Operation`], `_meta` to write |
//! | incoming request | the server binding; the client binding (a server's request) | [`Operation`], `_meta` read |
//! | its end | when the answer (or the failure) arrives, or the call is dropped | [`End`] |
//! | session start/end | the server binding (router session), the client binding | [`SessionInfo`], the error class |
//!
//! Errors, as the conventions define them: a JSON-RPC error answer is
//! [`End::RpcError`] (its code and message); a `tools/call` result with `isError: true` is
//! [`End::ToolError`]; a request that never got an answer is [`End::Failed`] with a short
//! class (`timeout`, `closed`, `cancelled`, `_OTHER`).

use std::sync::Arc;

use crate::schema::JsonObject;
use crate::server::BoxFuture;

/// Which side of a request this process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// It sent the request: the conventions' `CLIENT` span kind, and the sender's metric
    /// (`mcp.client.operation.duration`).
    Outgoing,
    /// It received the request and answers it: `SERVER` span kind, and the receiver's
    /// metric (`mcp.server.operation.duration`).
    Incoming,
}

/// Which MCP role this process plays: which session metric it records, and whether its
/// peer is the server (`server.address`) or the client (`client.address`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// An MCP client.
    Client,
    /// An MCP server.
    Server,
}

/// The facts of the connection an operation or session travels on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Network {
    /// The HTTP version (`1.1`, `2`), when known (`network.protocol.version`).
    pub http_version: Option<String>,
    /// The peer's address: the server's host (from the URL) on a client, the client's IP on
    /// a server (`server.address` / `client.address`), when known.
    pub peer_address: Option<String>,
    /// The peer's port (`server.port` / `client.port`), when known.
    pub peer_port: Option<u16>,
}

/// One MCP request or notification, as the conventions describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// This process's MCP role.
    pub side: Side,
    /// Whether this process sent or received it.
    pub direction: Direction,
    /// `mcp.method.name`.
    pub method: String,
    /// `gen_ai.tool.name`: the tool of a `tools/call`.
    pub tool: Option<String>,
    /// `gen_ai.prompt.name`: the prompt of a `prompts/get`.
    pub prompt: Option<String>,
    /// `mcp.resource.uri`: the resource of `resources/read`, `resources/subscribe`,
    /// `resources/unsubscribe`.
    pub resource_uri: Option<String>,
    /// `jsonrpc.request.id`: the id as a string (`None` for a notification).
    pub request_id: Option<String>,
    /// `mcp.protocol.version`, when known.
    pub protocol_version: Option<String>,
    /// `mcp.session.id`: only in a session (never in the 2026-07-28 era).
    pub session_id: Option<String>,
    /// The connection.
    pub network: Network,
}

impl Operation {
    /// An operation of `method` with the tool, prompt or resource its params name (read
    /// from `params` only for the methods that have one).
    pub fn new(
        side: Side,
        direction: Direction,
        method: &str,
        params: Option<&serde_json::value::RawValue>,
    ) -> Self {
        let mut op = Operation {
            side,
            direction,
            method: method.to_owned(),
            tool: None,
            prompt: None,
            resource_uri: None,
            request_id: None,
            protocol_version: None,
            session_id: None,
            network: Network::default(),
        };
        if op.has_subject() {
            op.set_subject(crate::bind::request_subject(params));
        }
        op
    }

    /// Whether the method's params name a tool, prompt or resource.
    pub(crate) fn has_subject(&self) -> bool {
        matches!(
            &*self.method,
            "tools/call"
                | "prompts/get"
                | "resources/read"
                | "resources/subscribe"
                | "resources/unsubscribe"
        )
    }

    /// Sets the tool, prompt or resource (`params.name` or `params.uri`), by method.
    pub(crate) fn set_subject(&mut self, subject: Option<String>) {
        match &*self.method {
            "tools/call" => self.tool = subject,
            "prompts/get" => self.prompt = subject,
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                self.resource_uri = subject;
            }
            _ => {}
        }
    }

    /// The conventions' span name: `{mcp.method.name} {target}`, the target being the tool
    /// or prompt name (the resource URI only if `resource_uri_as_target`), else the method.
    pub fn span_name(&self, resource_uri_as_target: bool) -> String {
        let target = self.tool.as_deref().or(self.prompt.as_deref()).or(self
            .resource_uri
            .as_deref()
            .filter(|_| resource_uri_as_target));
        match target {
            Some(t) => format!("{} {t}", self.method),
            None => self.method.clone(),
        }
    }
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End<'a> {
    /// Answered with a result.
    Ok,
    /// A `tools/call` answered with a result whose `isError` is `true` (`error.type`
    /// `tool_error`).
    ToolError,
    /// Answered with a JSON-RPC error (`error.type` and `rpc.response.status_code`: the code;
    /// the span's status description: the message).
    RpcError {
        /// The error's code.
        code: i64,
        /// The error's message.
        message: &'a str,
    },
    /// No answer: the transport gave up, the connection closed, or the call was dropped.
    Failed {
        /// A low-cardinality class: `timeout`, `closed`, `cancelled`, or `_OTHER`.
        error_type: &'a str,
        /// What happened.
        message: &'a str,
    },
}

/// A legacy-era session, as the session metrics describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// This process's MCP role.
    pub side: Side,
    /// `mcp.protocol.version`, when known.
    pub protocol_version: Option<String>,
    /// The connection.
    pub network: Network,
}

/// An observer of MCP operations and sessions. See the [module docs](self).
pub trait Telemetry: Send + Sync + 'static {
    /// A request this process sends starts (called in the caller's context). `meta` is the
    /// request's `params._meta` object, for the observer to write trace context into.
    fn outgoing(&self, operation: &Operation, meta: &mut JsonObject) -> Arc<dyn OperationScope>;

    /// A request this process received starts; `meta` is its `params._meta`, if any.
    fn incoming(&self, operation: &Operation, meta: Option<&JsonObject>)
    -> Arc<dyn OperationScope>;

    /// A session starts.
    fn session(&self, session: &SessionInfo) -> Box<dyn SessionScope>;
}

/// One operation in progress.
pub trait OperationScope: Send + Sync {
    /// Runs `work` (the handler answering an incoming request) inside the operation's
    /// context, so that what it does (its own spans, its requests back to the peer) is
    /// part of the operation. By default, `work` as it is.
    fn instrument(&self, work: BoxFuture<'static, ()>) -> BoxFuture<'static, ()> {
        work
    }

    /// The operation ended. Called at most once (a scope dropped without it was abandoned:
    /// the process stopped before the operation ended).
    fn end(&self, end: End<'_>);
}

/// One session in progress.
pub trait SessionScope: Send + Sync {
    /// The session ended; `error_type` when it ended with an error (`timeout`: its idle
    /// time ran out; `initialize_failed`).
    fn end(self: Box<Self>, error_type: Option<&str>);
}

/// An installed observer (cheap to clone).
#[derive(Clone)]
pub(crate) struct Hook(pub(crate) Arc<dyn Telemetry>);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Telemetry")
    }
}

/// What a `tools/call` result says of itself: `isError`.
pub(crate) fn is_tool_error(method: &str, result: &serde_json::value::RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct IsError {
        #[serde(rename = "isError", default)]
        is_error: Option<bool>,
    }
    method == "tools/call"
        && serde_json::from_str::<IsError>(result.get())
            .ok()
            .and_then(|r| r.is_error)
            .unwrap_or(false)
}

/// The `params._meta` object of a request's params, if it has one.
pub(crate) fn meta_of(params: Option<&serde_json::value::RawValue>) -> Option<JsonObject> {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "_meta", default)]
        meta: Option<JsonObject>,
    }
    serde_json::from_str::<Meta>(params?.get()).ok()?.meta
}

/// Starts an outgoing operation on raw params: the trace context goes into their `_meta`
/// (params that are not a JSON object are sent as they are).
pub(crate) fn start_outgoing_raw(
    telemetry: &dyn Telemetry,
    op: &Operation,
    params: Option<Box<serde_json::value::RawValue>>,
) -> (
    Option<Box<serde_json::value::RawValue>>,
    Arc<dyn OperationScope>,
) {
    let mut value: serde_json::Value = match &params {
        Some(p) => serde_json::from_str(p.get()).unwrap_or(serde_json::Value::Null),
        None => serde_json::Value::Object(JsonObject::new()),
    };
    let mut meta = match value.as_object_mut().and_then(|m| m.remove("_meta")) {
        Some(serde_json::Value::Object(meta)) => meta,
        _ => JsonObject::new(),
    };
    let scope = telemetry.outgoing(op, &mut meta);
    if meta.is_empty() {
        return (params, scope);
    }
    let Some(map) = value.as_object_mut() else {
        return (params, scope);
    };
    map.insert("_meta".to_owned(), serde_json::Value::Object(meta));
    match serde_json::value::to_raw_value(&value) {
        Ok(raw) => (Some(raw), scope),
        Err(_) => (params, scope),
    }
}

/// The `End` of an answer.
pub(crate) fn end_of<'a>(method: &str, outcome: &'a mcp_proto::jsonrpc::Outcome) -> End<'a> {
    match outcome {
        mcp_proto::jsonrpc::Outcome::Result(raw) if is_tool_error(method, raw) => End::ToolError,
        mcp_proto::jsonrpc::Outcome::Result(_) => End::Ok,
        mcp_proto::jsonrpc::Outcome::Error(e) => End::RpcError {
            code: e.code,
            message: &e.message,
        },
    }
}

/// The `error.type` class of a request that got no answer.
pub(crate) fn failure_class(e: &crate::PeerError) -> &'static str {
    match e {
        crate::PeerError::Timeout => "timeout",
        crate::PeerError::Closed => "closed",
        crate::PeerError::Cancelled => "cancelled",
        _ => "_OTHER",
    }
}

/// The request id as the conventions write it (`jsonrpc.request.id`).
pub(crate) fn id_string(id: &mcp_proto::jsonrpc::RequestId) -> String {
    match id {
        mcp_proto::jsonrpc::RequestId::Number(n) => n.to_string(),
        mcp_proto::jsonrpc::RequestId::String(s) => s.to_string(),
    }
}

/// `network.protocol.version` as the conventions write it (`1.0`, `1.1`, `2`, `3`).
pub(crate) fn http_version(version: http::Version) -> Option<String> {
    let v = match version {
        http::Version::HTTP_09 => "0.9",
        http::Version::HTTP_10 => "1.0",
        http::Version::HTTP_11 => "1.1",
        http::Version::HTTP_2 => "2",
        http::Version::HTTP_3 => "3",
        _ => return None,
    };
    Some(v.to_owned())
}
