//! The additions of revision 2026-07-28: `server/discover`, per-request metadata, multi
//! round-trip requests (input requests and responses), and `subscriptions/listen`.

use std::collections::BTreeMap;

use serde::de::{self, DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};

use super::tags;
use super::{
    CacheScope, ClientCapabilities, CreateMessage, CreateMessageResult, Elicit, ElicitResult,
    Implementation, JsonObject, ListRoots, ListRootsResult, LoggingLevel, Meta, MethodCall,
    ProgressToken, RequestId, RequestKind, ResultType, ServerCapabilities,
};

/// The `_meta` keys the 2026-07-28 revision reserves (defined by the transport core).
pub use mcp_proto::jsonrpc::meta_keys;

/// Reads a typed `_meta` view from a [`Meta`] map.
fn view<T: DeserializeOwned>(meta: &Meta) -> Result<T, serde_json::Error> {
    serde_json::from_value(serde_json::Value::Object(meta.clone()))
}

/// Writes a typed `_meta` view back to a [`Meta`] map.
fn unview<T: Serialize>(value: &T) -> Meta {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => Meta::new(),
    }
}

/// A typed view of a request's `_meta` (`RequestMetaObject`, 2026-07-28).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RequestMeta {
    /// The protocol version; must match the `MCP-Protocol-Version` header over HTTP.
    #[serde(
        rename = "io.modelcontextprotocol/protocolVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub protocol_version: Option<String>,
    /// Who the client is.
    #[serde(
        rename = "io.modelcontextprotocol/clientInfo",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_info: Option<Implementation>,
    /// What the client supports, for this request.
    #[serde(
        rename = "io.modelcontextprotocol/clientCapabilities",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_capabilities: Option<ClientCapabilities>,
    /// The least severe log level the client wants; no log messages when absent.
    #[serde(
        rename = "io.modelcontextprotocol/logLevel",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub log_level: Option<LoggingLevel>,
    /// The progress token, if the client wants progress notifications.
    #[serde(
        rename = "progressToken",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub progress_token: Option<ProgressToken>,
    /// Other keys, kept.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl RequestMeta {
    /// Reads the view from a `_meta` map.
    pub fn from_meta(meta: &Meta) -> Result<Self, serde_json::Error> {
        view(meta)
    }

    /// Writes the view as a `_meta` map.
    pub fn to_meta(&self) -> Meta {
        unview(self)
    }
}

/// A typed view of a result's `_meta` (`ResultMetaObject` and
/// `SubscriptionsListenResultMetaObject`, 2026-07-28).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ResultMeta {
    /// Who the server is.
    #[serde(
        rename = "io.modelcontextprotocol/serverInfo",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub server_info: Option<Implementation>,
    /// The subscription this result ends (the result of `subscriptions/listen`).
    #[serde(
        rename = "io.modelcontextprotocol/subscriptionId",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub subscription_id: Option<RequestId>,
    /// Other keys, kept.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ResultMeta {
    /// Reads the view from a `_meta` map.
    pub fn from_meta(meta: &Meta) -> Result<Self, serde_json::Error> {
        view(meta)
    }

    /// Writes the view as a `_meta` map.
    pub fn to_meta(&self) -> Meta {
        unview(self)
    }
}

/// A typed view of a notification's `_meta` (`NotificationMetaObject`, 2026-07-28).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NotificationMeta {
    /// The `subscriptions/listen` request this notification belongs to.
    #[serde(
        rename = "io.modelcontextprotocol/subscriptionId",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub subscription_id: Option<RequestId>,
    /// Other keys, kept.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl NotificationMeta {
    /// Reads the view from a `_meta` map.
    pub fn from_meta(meta: &Meta) -> Result<Self, serde_json::Error> {
        view(meta)
    }

    /// Writes the view as a `_meta` map.
    pub fn to_meta(&self) -> Meta {
        unview(self)
    }
}

/// The result of `server/discover` (`DiscoverResult`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    /// How to read the result (`"complete"`).
    #[serde(default)]
    pub result_type: ResultType,
    /// The protocol versions the server supports.
    pub supported_versions: Vec<String>,
    /// What the server supports.
    pub capabilities: ServerCapabilities,
    /// How to use the server, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// How long the client may cache this result, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Who may cache this result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// Result metadata (the server's info under [`meta_keys::SERVER_INFO`]).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The notifications a client opts in to on `subscriptions/listen` (`SubscriptionFilter`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionFilter {
    /// `notifications/tools/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_list_changed: Option<bool>,
    /// `notifications/prompts/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts_list_changed: Option<bool>,
    /// `notifications/resources/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources_list_changed: Option<bool>,
    /// `notifications/resources/updated` for these URIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_subscriptions: Option<Vec<String>>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The params of `subscriptions/listen` (`SubscriptionsListenRequestParams`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SubscriptionsListenRequestParams {
    /// What to listen for.
    pub notifications: SubscriptionFilter,
    /// RequestKind metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The result of `subscriptions/listen`, sent when the subscription ends
/// (`SubscriptionsListenResult`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionsListenResult {
    /// How to read the result (`"complete"`).
    #[serde(default)]
    pub result_type: ResultType,
    /// Result metadata (the subscription id under [`meta_keys::SUBSCRIPTION_ID`]).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The params of `notifications/subscriptions/acknowledged`
/// (`SubscriptionsAcknowledgedNotificationParams`): what the server agreed to send.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SubscriptionsAcknowledgedNotificationParams {
    /// The notifications the server will send.
    pub notifications: SubscriptionFilter,
    /// Notification metadata (the subscription id).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A request the server needs the client to fulfil before it can finish (`InputRequest`):
/// sampling, roots or elicitation, chosen by `method`.
// Messages, not hot-path data: boxing would only make them clumsier to build and match.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum InputRequest {
    /// `sampling/createMessage`.
    CreateMessage(MethodCall<CreateMessage>),
    /// `roots/list`.
    ListRoots(MethodCall<ListRoots>),
    /// `elicitation/create`.
    Elicit(MethodCall<Elicit>),
    /// A method this crate does not know, kept verbatim.
    Other(JsonObject),
}

impl<'de> Deserialize<'de> for InputRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = tags::object(deserializer)?;
        Ok(match tags::str_at(&map, "method") {
            Some(CreateMessage::METHOD) => Self::CreateMessage(tags::decode(map)?),
            Some(ListRoots::METHOD) => Self::ListRoots(tags::decode(map)?),
            Some(Elicit::METHOD) => Self::Elicit(tags::decode(map)?),
            Some(_) => Self::Other(map),
            None => return Err(de::Error::missing_field("method")),
        })
    }
}

/// The input requests of an [`InputRequiredResult`], by the key the client answers under
/// (`InputRequests`).
pub type InputRequests = BTreeMap<String, InputRequest>;

/// The client's answer to one [`InputRequest`] (`InputResponse`): told apart by shape
/// (`action` for elicitation, `roots` for roots, `model` or `role` for sampling).
// Messages, not hot-path data: boxing would only make them clumsier to build and match.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum InputResponse {
    /// The answer to `sampling/createMessage`.
    CreateMessage(CreateMessageResult),
    /// The answer to `roots/list`.
    ListRoots(ListRootsResult),
    /// The answer to `elicitation/create`.
    Elicit(ElicitResult),
    /// A shape this crate does not know, kept verbatim.
    Other(JsonObject),
}

impl<'de> Deserialize<'de> for InputResponse {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = tags::object(deserializer)?;
        Ok(if map.contains_key("action") {
            Self::Elicit(tags::decode(map)?)
        } else if map.contains_key("roots") {
            Self::ListRoots(tags::decode(map)?)
        } else if map.contains_key("model") || map.contains_key("role") {
            Self::CreateMessage(tags::decode(map)?)
        } else {
            Self::Other(map)
        })
    }
}

/// The client's answers, by the keys of the [`InputRequests`] (`InputResponses`).
pub type InputResponses = BTreeMap<String, InputResponse>;

/// The server needs input before it can finish the request (`InputRequiredResult`,
/// `"resultType": "input_required"`). The client fulfils `input_requests` and retries the
/// original request with `inputResponses` and this `requestState`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputRequiredResult {
    /// `"input_required"`.
    #[serde(default = "input_required")]
    pub result_type: ResultType,
    /// What the server needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<InputRequests>,
    /// Opaque state to send back on the retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

fn input_required() -> ResultType {
    ResultType::InputRequired
}

impl Default for InputRequiredResult {
    fn default() -> Self {
        Self {
            result_type: ResultType::InputRequired,
            input_requests: None,
            request_state: None,
            meta: None,
            extra: JsonObject::new(),
        }
    }
}

/// A result that is either final (`T`) or an [`InputRequiredResult`], told apart by
/// `"resultType": "input_required"` (2026-07-28: `tools/call`, `prompts/get`,
/// `resources/read`).
// Messages, not hot-path data: boxing would only make them clumsier to build and match.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum MaybeInputRequired<T> {
    /// The final result (`resultType` `"complete"` or absent).
    Complete(T),
    /// The server needs input first.
    InputRequired(InputRequiredResult),
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for MaybeInputRequired<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = tags::object(deserializer)?;
        if tags::str_at(&map, "resultType") == Some(ResultType::InputRequired.as_str()) {
            Ok(Self::InputRequired(tags::decode(map)?))
        } else {
            Ok(Self::Complete(tags::decode(map)?))
        }
    }
}
