//! # The service layer: typed MCP servers and clients
//!
//! What applications write against, on top of the transport: a [`Server`] with tools,
//! resources, resource templates, prompts and completions, each an async handler; a
//! [`Client`](client::Client) with typed methods for every request. Runtime-agnostic: plain
//! `std` futures (plus `futures-channel`'s oneshot and mpsc), no runtime, no threads, no clock
//! reads. Adapters spawn the futures and move the messages.
//!
//! ## Modules
//!
//! - [`server`]: [`Server`] (builder and registry), [`ServerSession`] (one client's
//!   connection), [`RequestContext`] (progress, logging, sampling, elicitation, roots,
//!   cancellation), and the [`Peer`] trait a transport implements.
//! - [`client`]: [`Client`](client::Client), its builder and handlers, and the
//!   [`ClientTransport`](client::ClientTransport) trait.
//! - `tool_schema`: the tool schema builder ([`Tool::string`], [`required`], [`min`],
//!   [`default`], …). `args`: [`ToolArgs`] and [`PromptArgs`], typed argument access.
//! - [`typed`]: typed tools and prompts ([`Server::typed_tool`], [`Server::typed_prompt`],
//!   [`Json`]): the schema generated from the handler's Rust types (schemars), the arguments
//!   deserialized for it, the result's `structuredContent` matching the `outputSchema`.
//! - [`skills`]: the Skills extension (SEP-2640): [`Skill`] to serve from memory or a
//!   directory, and the client's verified loading of skills.
//! - [`uri_template`]: RFC 6570 templates (level 1 and `{+var}`), expanded and matched.
//! - `defs`: builder methods for [`Resource`], [`ResourceTemplate`], [`Prompt`] and content.
//! - [`bind`]: [`ServerBinding`](bind::ServerBinding) and
//!   [`ClientBinding`](bind::ClientBinding), the service on the sans-IO `Router` and
//!   `ClientSession`: what an adapter's driver loop calls.
//! - [`PendingRequests`], [`CancellationToken`]: the runtime-free plumbing drivers reuse.
//!
//! ## Tasks (the `io.modelcontextprotocol/tasks` extension)
//!
//! A tool that may take long goes on as a task for the clients that declare the extension
//! (they poll it), and answers at once for the others — one handler for both
//! ([`server::tasks`] has the lifecycle and its table, [`client::TaskHandle`] the client's
//! side):
//!
//! ```no_run
//! use std::time::Duration;
//! use mcp_service::*;
//! use mcp_service::client::{Client, ToolCall};
//!
//! let server = Server::new("reports", "1.0.0").task_tool(
//!     Tool::new("render").description("Renders the quarterly report"),
//!     |ctx: RequestContext, _args: ToolArgs| async move {
//!         ctx.sleep(Duration::from_secs(30)).await; // the work; `tasks/cancel` drops it
//!         Ok(CallToolResult::text("report.pdf rendered"))
//!     },
//! );
//!
//! # async fn client_side(client: Client) -> Result<(), mcp_service::client::RequestError> {
//! // A client built with `Client::builder(..).tasks()`: `call_tool` waits for the task
//! // (polling at the server's interval); `start_tool` hands the task over instead.
//! let result = client.call_tool("render", ()).await?;
//! if let ToolCall::Task(mut task) = client.start_tool("render", ()).await? {
//!     let status = task.get().await?.task.status;
//!     println!("task {} is {status:?}", task.id());
//!     task.cancel().await?;
//! }
//! # Ok(()) }
//! ```
//!
//! On a server bound to a clustered router the tasks are shared by every instance: a task
//! created on one is polled, answered and cancelled on the others, and one whose instance
//! died ends `failed` on the next poll, once (see [`server::tasks`], "Theory of operation").
//!
//! ## The user server of mcp-go's server guide
//!
//! The guide's `get_user`, `create_user`, `search_users` and `users://{user_id}`, on an
//! in-memory store: about 50 lines, where the Go original needs about 200 with placeholders.
//! (A transport adapter serves `server`; `mcp-tests`' `users` module has the tested version.)
//!
//! ```
//! use std::sync::Mutex;
//! use mcp_service::*;
//! use serde_json::json;
//!
//! #[derive(Clone, serde::Serialize)]
//! struct User { id: String, name: String, email: String, age: i64 }
//! static USERS: Mutex<Vec<User>> = Mutex::new(Vec::new());
//!
//! let server = Server::new("StreamableHTTP API Server", "1.0.0")
//!     .tool(Tool::new("get_user").description("Get user information")
//!         .string("user_id", required()), get_user)
//!     .tool(Tool::new("create_user").description("Create a new user")
//!         .string("name", required()).string("email", required())
//!         .number("age", min(0)), create_user)
//!     .tool(Tool::new("search_users").description("Search users with filters")
//!         .string("query", description("Search query"))
//!         .number("limit", default(10).max(100))
//!         .number("offset", default(0).min(0)), search_users)
//!     .resource_template(ResourceTemplate::new("users://{user_id}", "User Profile")
//!         .description("User profile data").mime_type("application/json"), user_resource);
//! assert_eq!(server.tools().len(), 3);
//!
//! async fn get_user(_ctx: RequestContext, req: ToolArgs) -> ToolResult {
//!     let id = req.get_string("user_id", "");
//!     let user = find(&id).ok_or_else(|| Error::new(format!("user not found: {id}")))?;
//!     Ok(CallToolResult::text(serde_json::to_string(&user)?))
//! }
//!
//! async fn create_user(_ctx: RequestContext, req: ToolArgs) -> ToolResult {
//!     let (name, email) = (req.get_string("name", ""), req.get_string("email", ""));
//!     if !email.contains('@') || !email.contains('.') {
//!         return Err(Error::new(format!("invalid email format: {email}")));
//!     }
//!     let mut users = USERS.lock().unwrap();
//!     let id = format!("user_{}", users.len() + 1);
//!     let user = User { id: id.clone(), name, email, age: req.get_int("age", 0) };
//!     users.push(user.clone());
//!     let reply = json!({"id": id, "message": "User created successfully", "user": user});
//!     Ok(CallToolResult::text(reply.to_string()))
//! }
//!
//! async fn search_users(_ctx: RequestContext, req: ToolArgs) -> ToolResult {
//!     let query = req.get_string("query", "");
//!     let (limit, offset) = (req.get_int("limit", 10), req.get_int("offset", 0));
//!     let found: Vec<User> = USERS.lock().unwrap().iter()
//!         .filter(|u| u.name.contains(&query)).cloned().collect();
//!     let page: Vec<_> = found.iter().skip(offset as usize).take(limit as usize).collect();
//!     let reply = json!({"users": page, "total": found.len(), "limit": limit,
//!                        "offset": offset, "query": query});
//!     Ok(CallToolResult::text(reply.to_string()))
//! }
//!
//! async fn user_resource(_ctx: RequestContext, req: ResourceRequest) -> ResourceResult {
//!     let user = find(req.param("user_id").unwrap_or(""))
//!         .ok_or_else(|| Error::resource_not_found(&req.uri))?;
//!     let text = serde_json::to_string(&user)?;
//!     Ok(vec![ResourceContents::text(&req.uri, text).with_mime_type("application/json")])
//! }
//!
//! fn find(id: &str) -> Option<User> {
//!     USERS.lock().unwrap().iter().find(|u| u.id == id).cloned()
//! }
//! ```
//!
//! ## Decisions
//!
//! - **One core entry point per side.** The server answers a `jsonrpc::Request` with a
//!   future of a `jsonrpc::Response` ([`ServerSession::handle_request`]); the client takes
//!   incoming messages ([`Client::handle_message`](client::Client::handle_message)) and
//!   sends through a trait. Binding to the sans-IO `Router` and `ClientSession` (or to a
//!   loopback in tests) is a small driver outside this module.
//! - **Handlers take owned, `'static` arguments** (`RequestContext`, `ToolArgs`, …) and
//!   return `Send` futures, so `async fn` items and `move` closures both fit, and every
//!   runtime can spawn them.
//! - **Tool failures are results.** A handler's [`Error`] becomes `isError: true` with its
//!   message; only [`Error::protocol`] and friends become JSON-RPC errors. Unknown tools and
//!   prompts, missing prompt arguments and bad params are `-32602`; unknown resources
//!   `-32002` (`-32602` in 2026-07-28); unknown methods `-32601`.
//! - **Arguments are checked before the handler runs**: schema defaults filled in, then the
//!   keywords the builder writes validated (see `validate`); a call that fails gets one tool
//!   error listing every problem.
//! - **Cancellation drops the handler** at its next `await` and the request is not answered
//!   (as the spec requires); [`RequestContext::is_cancelled`] serves handlers that compute
//!   between awaits.
//! - **Notifications are fire-and-forget** from handlers (progress and logs return nothing);
//!   order is the [`Peer`]'s obligation: everything a handler sends precedes its response.
//! - **Time comes from the transport** ([`Peer::sleep`]), never from a clock read here —
//!   except the replaceable clocks that sealed MRTR state and tasks measure expiry on
//!   ([`server::seal::StateKeys::clock`], [`TaskConfig::clock`]), which default to the
//!   system's.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod args;
pub mod bind;
pub(crate) mod cancel;
pub mod client;
mod defs;
mod error;
mod pending;
pub mod schema;
pub mod server;
pub mod skills;
pub mod telemetry;
mod tool_schema;
pub mod typed;
pub mod uri_template;
mod validate;

pub use args::{PromptArgs, ToolArgs};
pub use cancel::{CancellationToken, WaitForCancellation};
pub use error::{Error, PeerError};
pub use pending::{PeerResult, PendingRequests, ResponseFuture};
pub use server::{
    BoxFuture, CompletionResult, Peer, PromptResult, RequestContext, ResourceRequest,
    ResourceResult, Server, ServerSession, SessionState, TaskConfig, ToolResult,
};
pub use skills::Skill;
pub use tool_schema::{
    IntoNumber, Prop, default, description, items, max, min, prop, required, title,
};
pub use typed::{Json, ToolInput, ToolOutput};
pub use uri_template::UriTemplate;

/// The JSON Schema generator behind typed tools and prompts, re-exported: `use
/// mcp_service::schemars;` lets `#[derive(JsonSchema)]` expand without a direct
/// dependency.
pub use schemars;
pub use schemars::JsonSchema;

pub use crate::schema::{
    CallToolResult, ContentBlock, GetPromptResult, Prompt, PromptMessage, Resource,
    ResourceContents, ResourceTemplate, Role, Tool,
};
