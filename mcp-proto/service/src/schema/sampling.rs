//! Sampling: the server asks the client's model for a message.

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

use super::tags::{self, AudioTag, ImageTag, TextTag, ToolResultTag, ToolUseTag, open_enum};
use super::{
    AudioContent, ImageContent, JsonObject, Meta, Role, TextContent, Tool, ToolResultContent,
    ToolUseContent,
};

/// A piece of content of a sampling message (`SamplingMessageContentBlock`), chosen by its
/// `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SamplingMessageContentBlock {
    /// `"type": "text"`.
    Text(TextContent),
    /// `"type": "image"`.
    Image(ImageContent),
    /// `"type": "audio"`.
    Audio(AudioContent),
    /// `"type": "tool_use"` (2025-11-25 on).
    ToolUse(ToolUseContent),
    /// `"type": "tool_result"` (2025-11-25 on).
    ToolResult(ToolResultContent),
    /// A `type` this crate does not know, kept verbatim.
    Other(JsonObject),
}

impl<'de> Deserialize<'de> for SamplingMessageContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = tags::object(deserializer)?;
        Ok(match tags::str_at(&map, "type") {
            Some(TextTag::VALUE) => Self::Text(tags::decode(map)?),
            Some(ImageTag::VALUE) => Self::Image(tags::decode(map)?),
            Some(AudioTag::VALUE) => Self::Audio(tags::decode(map)?),
            Some(ToolUseTag::VALUE) => Self::ToolUse(tags::decode(map)?),
            Some(ToolResultTag::VALUE) => Self::ToolResult(tags::decode(map)?),
            Some(_) => Self::Other(map),
            None => return Err(de::Error::missing_field("type")),
        })
    }
}

impl From<TextContent> for SamplingMessageContentBlock {
    fn from(c: TextContent) -> Self {
        Self::Text(c)
    }
}

impl From<ToolUseContent> for SamplingMessageContentBlock {
    fn from(c: ToolUseContent) -> Self {
        Self::ToolUse(c)
    }
}

impl From<ToolResultContent> for SamplingMessageContentBlock {
    fn from(c: ToolResultContent) -> Self {
        Self::ToolResult(c)
    }
}

/// The content of a sampling message or result: one block, or (2025-11-25 on) an array.
// Messages, not hot-path data: boxing would only make them clumsier to build and match.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SamplingContent {
    /// One block, as every revision allows.
    Single(SamplingMessageContentBlock),
    /// Several blocks (2025-11-25 on; e.g. parallel tool uses).
    Multiple(Vec<SamplingMessageContentBlock>),
}

impl<'de> Deserialize<'de> for SamplingContent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::Array(items) => items
                .into_iter()
                .map(serde_json::from_value)
                .collect::<Result<Vec<_>, _>>()
                .map(Self::Multiple)
                .map_err(de::Error::custom),
            other => serde_json::from_value(other)
                .map(Self::Single)
                .map_err(de::Error::custom),
        }
    }
}

impl SamplingContent {
    /// The blocks, one or many, as a slice.
    pub fn blocks(&self) -> &[SamplingMessageContentBlock] {
        match self {
            Self::Single(block) => std::slice::from_ref(block),
            Self::Multiple(blocks) => blocks,
        }
    }
}

impl<T: Into<SamplingMessageContentBlock>> From<T> for SamplingContent {
    fn from(block: T) -> Self {
        Self::Single(block.into())
    }
}

/// A message of a sampling conversation (`SamplingMessage`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingMessage {
    /// Who says it.
    pub role: Role,
    /// What is said.
    pub content: SamplingContent,
    /// Metadata (2025-11-25 on).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl SamplingMessage {
    /// A message of the given role and content.
    pub fn new(role: Role, content: impl Into<SamplingContent>) -> Self {
        Self {
            role,
            content: content.into(),
            meta: None,
            extra: JsonObject::new(),
        }
    }
}

/// A hint for choosing a model (`ModelHint`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelHint {
    /// A full or partial model name, e.g. `"claude-3-5-sonnet"` or `"sonnet"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The server's preferences for the model the client picks (`ModelPreferences`).
///
/// The priorities are numbers from 0 to 1, as [`serde_json::Number`] so that an integer
/// (`0`, `1`) stays an integer on a round trip.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelPreferences {
    /// Model hints, in order of preference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hints: Option<Vec<ModelHint>>,
    /// How much cost matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_priority: Option<serde_json::Number>,
    /// How much speed matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_priority: Option<serde_json::Number>,
    /// How much capability matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intelligence_priority: Option<serde_json::Number>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Which MCP servers' context to include in the prompt (`includeContext`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum IncludeContext {
    /// None.
    None,
    /// The requesting server's.
    ThisServer,
    /// Every connected server's.
    AllServers,
}

/// How the model may use the offered tools (`ToolChoice.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoiceMode {
    /// The model decides.
    Auto,
    /// The model must use at least one tool.
    Required,
    /// The model must not use tools.
    None,
}

/// Tool selection in sampling (`ToolChoice`, 2025-11-25 on).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolChoice {
    /// How the model may use the tools; `auto` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ToolChoiceMode>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The params of `sampling/createMessage` (`CreateMessageRequestParams`).
///
/// The 2025-11-25 `task` field is not modelled; it is kept in `extra`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageRequestParams {
    /// The conversation so far.
    pub messages: Vec<SamplingMessage>,
    /// Preferences for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_preferences: Option<ModelPreferences>,
    /// A system prompt the client may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Which servers' context to include (soft-deprecated in 2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_context: Option<IncludeContext>,
    /// The sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<serde_json::Number>,
    /// The most tokens to sample.
    pub max_tokens: u64,
    /// Sequences that stop sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    /// Provider-specific metadata to pass through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
    /// Tools the model may use (2025-11-25 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// How the model may use them (2025-11-25 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

open_enum!(
    /// Why sampling stopped (`stopReason`): an open set.
    StopReason {
        /// `"endTurn"`: the model ended its turn.
        EndTurn = "endTurn",
        /// `"stopSequence"`: a stop sequence was met.
        StopSequence = "stopSequence",
        /// `"maxTokens"`: the token limit was reached.
        MaxTokens = "maxTokens",
        /// `"toolUse"`: the model wants to use tools (2025-11-25 on).
        ToolUse = "toolUse",
    }
);

/// The result of `sampling/createMessage` (`CreateMessageResult`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageResult {
    /// Who says it (the assistant, as a rule).
    pub role: Role,
    /// What the model produced.
    pub content: SamplingContent,
    /// The name of the model that produced it.
    pub model: String,
    /// Why sampling stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}
