//! The small types every area uses: identifiers, `_meta`, roles, icons, base params and
//! results, pagination.

use serde::{Deserialize, Serialize};

use super::tags::{open_enum, string_or_int};

/// A JSON object kept as is (`serde_json::Map`; in insertion order, as this crate enables
/// serde_json's `preserve_order`).
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

/// The contents of a `_meta` field: a JSON object whose keys follow the spec's naming rules
/// (an optional reverse-DNS prefix and a name, e.g. `io.modelcontextprotocol/protocolVersion`).
///
/// Kept as a plain map so that every key survives; [`RequestMeta`](super::RequestMeta) and its
/// siblings give typed views of the keys the modern revision defines.
pub type Meta = JsonObject;

/// An opaque pagination position: `cursor` in a list request, `nextCursor` in its result.
pub type Cursor = String;

/// The identifier of a JSON-RPC request (`RequestId`): a string or an integer. The envelope's
/// own type, so an id read from a typed message goes back on the wire as is.
pub use mcp_proto::jsonrpc::RequestId;

string_or_int!(
    /// A token that ties progress notifications to their request (`ProgressToken`).
    ProgressToken
);

/// The sender or recipient of a message or piece of content (`Role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user (the human side of the conversation).
    User,
    /// The assistant (the model).
    Assistant,
}

/// The theme an [`Icon`] is designed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IconTheme {
    /// For a light background.
    Light,
    /// For a dark background.
    Dark,
}

/// An icon for display in a user interface (`Icon`, 2025-11-25 on).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Icon {
    /// An `https:` or `data:` URI of the image.
    pub src: String,
    /// The MIME type of the image, when `src` does not make it plain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The sizes the image is available in, as `"48x48"` or `"any"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<Vec<String>>,
    /// The theme the icon is meant for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theme: Option<IconTheme>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

open_enum!(
    /// How to read a result object (`resultType`, 2026-07-28). Absent in earlier revisions,
    /// where a client treats the result as [`ResultType::Complete`].
    ResultType {
        /// `"complete"`: the request finished; the result is final.
        Complete = "complete",
        /// `"input_required"`: the server needs input first (an
        /// [`InputRequiredResult`](super::InputRequiredResult)).
        InputRequired = "input_required",
        /// `"task"`: the request goes on as a task (a
        /// [`CreateTaskResult`](super::CreateTaskResult), the Tasks extension).
        Task = "task",
    }
);

// `open_enum!` is shared with enums that have no default, so this one is written out.
#[allow(clippy::derivable_impls)]
impl Default for ResultType {
    fn default() -> Self {
        Self::Complete
    }
}

/// Who may cache a cacheable result (`cacheScope`, 2026-07-28).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// No user-specific data: any client or intermediary may cache it.
    Public,
    /// Cacheable only within the same authorization context.
    Private,
}

/// The params of a request that carries nothing but `_meta` (`RequestParams`): `ping`,
/// `roots/list`, `server/discover`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RequestParams {
    /// Request metadata (`progressToken`; in 2026-07-28 the protocol version, client info and
    /// capabilities, see [`RequestMeta`](super::RequestMeta)).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The params of a notification that carries nothing but `_meta` (`NotificationParams`): the
/// `list_changed` notifications and `notifications/initialized`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NotificationParams {
    /// Notification metadata (in 2026-07-28 the subscription id, see
    /// [`NotificationMeta`](super::NotificationMeta)).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The params of a list request (`PaginatedRequestParams`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PaginatedRequestParams {
    /// Where to continue: the `nextCursor` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A result with no content of its own (`EmptyResult`, the base `Result`): the answer to
/// `ping`, `logging/setLevel`, `resources/subscribe` and `resources/unsubscribe`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmptyResult {
    /// How to read the result (2026-07-28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}
