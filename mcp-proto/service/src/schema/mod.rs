//! # The MCP schema: typed params, results and notifications
//!
//! Every method of revision 2025-11-25, with the fields the earlier legacy revisions
//! (2025-06-18, 2025-03-26) need, and the additions of the modern revision 2026-07-28
//! (`server/discover`, per-request `_meta`, input-required results, `subscriptions/listen`,
//! the new error shapes). Names follow the spec's (`CallToolRequestParams`,
//! `ListToolsResult`, …); fields are `snake_case` in Rust and the spec's `camelCase` on the
//! wire.
//!
//! ## Areas
//!
//! | module | what |
//! |---|---|
//! | `common` | ids, `_meta`, roles, icons, base params and results, pagination |
//! | `lifecycle` | `initialize`, capabilities, [`Implementation`] |
//! | `tools` | [`Tool`], `tools/list`, `tools/call` |
//! | `resources` | [`Resource`], templates, `resources/read`, subscriptions |
//! | `prompts` | [`Prompt`], `prompts/get` |
//! | `content` | [`ContentBlock`] and its variants, [`Annotations`] |
//! | `logging` | [`LoggingLevel`], `logging/setLevel`, `notifications/message` |
//! | `completion` | `completion/complete` |
//! | `sampling` | `sampling/createMessage` |
//! | `elicitation` | `elicitation/create`, form field schemas |
//! | `roots` | [`Root`], `roots/list` |
//! | `skills` | the Skills extension: [`SkillEntry`], `skills/list`, `skills/get`, `resources/directory/read` |
//! | `notifications` | progress and cancellation |
//! | `modern` | 2026-07-28 additions |
//! | `errors` | [`ErrorObject`], [`error_codes`], typed error `data` |
//! | `envelope` | [`JsonRpcRequest`] and friends: typed framed messages |
//! | [`methods`], `rpc` | method names; the [`RequestKind`] and [`NotificationKind`] traits |
//! | [`tags`] | the zero-sized `type`/`mode`/`jsonrpc` markers |
//!
//! Everything is re-exported here, so `crate::schema::CallToolResult` is the path.
//!
//! ## Typed requests
//!
//! Each method has a zero-sized marker implementing [`RequestKind`] (or [`NotificationKind`]):
//! `CallTool::METHOD == "tools/call"`, `<CallTool as RequestKind>::Params == CallToolRequestParams`,
//! `<CallTool as RequestKind>::Result == CallToolResult`. [`JsonRpcRequest<CallTool>`] (alias
//! [`CallToolRequest`]) is the framed message.
//!
//! ```
//! use mcp_service::schema::{CallTool, CallToolRequest, CallToolRequestParams, CallToolResult, RequestKind};
//! use serde_json::json;
//!
//! let request = CallToolRequest::new(1, CallToolRequestParams {
//!     name: "get_weather".into(),
//!     arguments: Some(json!({ "city": "Paris" }).as_object().cloned().unwrap_or_default()),
//!     ..Default::default()
//! });
//! assert_eq!(
//!     serde_json::to_value(&request).unwrap(),
//!     json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
//!             "params": { "name": "get_weather", "arguments": { "city": "Paris" } } })
//! );
//!
//! // The result type follows from the method.
//! let result: <CallTool as RequestKind>::Result =
//!     serde_json::from_value(json!({ "content": [{ "type": "text", "text": "18°C" }] })).unwrap();
//! assert_eq!(result, CallToolResult::text("18°C"));
//! ```
//!
//! ## Decisions
//!
//! - **Unknown fields are tolerated and kept.** No type denies unknown fields. The objects a
//!   peer may extend carry `#[serde(flatten)] extra: JsonObject`, which collects every member
//!   this crate does not model and writes it back, so a message read and written again is the
//!   same JSON value (the spec's examples are tested to be). The 2025-11-25 task fields
//!   (`task`, `execution`'s siblings, the `tasks` capability) live in `extra` or raw JSON.
//! - **JSON Schemas are raw.** A tool's `inputSchema`/`outputSchema` is a [`JsonObject`]
//!   (`serde_json::Map`), so `$schema`, `$defs`, `additionalProperties` and everything else
//!   survive as given. This crate enables serde_json's `preserve_order`, so key order survives
//!   too; an elicitation form's fields keep their order in a `Vec`.
//! - **Numbers that may be integers or not** (progress, priorities, temperature, number-field
//!   bounds) are [`serde_json::Number`], so `50` comes back as `50`, not `50.0`.
//! - **Discriminators are tag fields.** A content block's `type`, an elicitation's `mode`,
//!   `jsonrpc` are zero-sized [`tags`] that write their one string and reject any other, so
//!   every type serializes completely on its own; the enums over them dispatch on the
//!   discriminator and keep an unknown one in an `Other` variant where the spec's set is open.
//! - **Optional fields are `Option` and skipped when `None`.** Fields the modern revision
//!   requires but the legacy ones lack (`resultType`, `ttlMs`, `cacheScope`, `_meta`) are
//!   optional, so one type reads both.
//! - **Open string sets** (`resultType`, `stopReason`, string `format`) keep unknown values in
//!   an `Other(String)` variant.

mod common;
mod completion;
mod content;
mod elicitation;
mod envelope;
mod errors;
mod lifecycle;
mod logging;
mod modern;
mod notifications;
mod prompts;
mod resources;
mod roots;
mod rpc;
mod sampling;
mod skills;
pub mod tags;
mod tasks;
mod tools;

pub use common::*;
pub use completion::*;
pub use content::*;
pub use elicitation::*;
pub use envelope::*;
pub use errors::*;
pub use lifecycle::*;
pub use logging::*;
pub use modern::*;
pub use notifications::*;
pub use prompts::*;
pub use resources::*;
pub use roots::*;
pub use rpc::*;
pub use sampling::*;
pub use skills::*;
pub use tasks::*;
pub use tools::*;

/// Protocol revisions are [`mcp_proto::ProtocolVersion`] values: one type for the whole crate, so
/// that every behaviour a revision selects is asked of it rather than of a string.
pub use mcp_proto::version::ProtocolVersion;
