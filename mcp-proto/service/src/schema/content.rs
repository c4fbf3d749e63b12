//! Content blocks: what prompts, tool results and sampling messages are made of.

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

use super::tags::{
    self, AudioTag, ImageTag, ResourceLinkTag, ResourceTag, TextTag, ToolResultTag, ToolUseTag,
};
use super::{Icon, JsonObject, Meta, ResourceContents, Role};

/// Hints to the client on how to use or show an object (`Annotations`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    /// Who the object is meant for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<Vec<Role>>,
    /// How important the object is, from 0 (optional) to 1 (required). A
    /// [`serde_json::Number`] so that an integer stays an integer on a round trip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<serde_json::Number>,
    /// When the object was last modified, as an ISO 8601 timestamp (2025-06-18 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Text (`TextContent`, `"type": "text"`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TextContent {
    /// The `"type": "text"` discriminator.
    #[serde(rename = "type")]
    pub kind: TextTag,
    /// The text.
    pub text: String,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl TextContent {
    /// Plain text with nothing else set.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }
}

/// An image (`ImageContent`, `"type": "image"`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageContent {
    /// The `"type": "image"` discriminator.
    #[serde(rename = "type")]
    pub kind: ImageTag,
    /// The image bytes, base64-encoded.
    pub data: String,
    /// The MIME type of the image.
    pub mime_type: String,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Audio (`AudioContent`, `"type": "audio"`, 2025-03-26 on).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AudioContent {
    /// The `"type": "audio"` discriminator.
    #[serde(rename = "type")]
    pub kind: AudioTag,
    /// The audio bytes, base64-encoded.
    pub data: String,
    /// The MIME type of the audio.
    pub mime_type: String,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A link to a resource the server can read (`ResourceLink`, `"type": "resource_link"`,
/// 2025-06-18 on). The fields are those of [`Resource`](super::Resource).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceLink {
    /// The `"type": "resource_link"` discriminator.
    #[serde(rename = "type")]
    pub kind: ResourceLinkTag,
    /// The URI of the resource.
    pub uri: String,
    /// The programmatic name of the resource.
    pub name: String,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the resource is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The MIME type, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The size in bytes of the raw content, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Icons for the resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The contents of a resource, embedded (`EmbeddedResource`, `"type": "resource"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddedResource {
    /// The `"type": "resource"` discriminator.
    #[serde(rename = "type")]
    pub kind: ResourceTag,
    /// The contents: text or a blob.
    pub resource: ResourceContents,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl EmbeddedResource {
    /// The given contents with nothing else set.
    pub fn new(resource: impl Into<ResourceContents>) -> Self {
        Self {
            kind: ResourceTag,
            resource: resource.into(),
            annotations: None,
            meta: None,
            extra: JsonObject::new(),
        }
    }
}

/// A request from the model to call a tool, in sampling (`ToolUseContent`,
/// `"type": "tool_use"`, 2025-11-25 on).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolUseContent {
    /// The `"type": "tool_use"` discriminator.
    #[serde(rename = "type")]
    pub kind: ToolUseTag,
    /// The identifier of this use, echoed by the matching [`ToolResultContent`].
    pub id: String,
    /// The name of the tool.
    pub name: String,
    /// The arguments, matching the tool's input schema.
    pub input: JsonObject,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The result of a tool use, in sampling (`ToolResultContent`, `"type": "tool_result"`,
/// 2025-11-25 on).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultContent {
    /// The `"type": "tool_result"` discriminator.
    #[serde(rename = "type")]
    pub kind: ToolResultTag,
    /// The `id` of the [`ToolUseContent`] this answers.
    pub tool_use_id: String,
    /// Unstructured result content.
    pub content: Vec<ContentBlock>,
    /// Structured result (an object in 2025-11-25; any JSON value in 2026-07-28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<serde_json::Value>,
    /// Whether the tool use ended in an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A piece of content of a prompt message, a tool result or a resource (`ContentBlock`),
/// chosen by its `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ContentBlock {
    /// `"type": "text"`.
    Text(TextContent),
    /// `"type": "image"`.
    Image(ImageContent),
    /// `"type": "audio"`.
    Audio(AudioContent),
    /// `"type": "resource_link"`.
    ResourceLink(ResourceLink),
    /// `"type": "resource"`.
    Resource(EmbeddedResource),
    /// A `type` this crate does not know (from a newer revision), kept verbatim.
    Other(JsonObject),
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = tags::object(deserializer)?;
        Ok(match tags::str_at(&map, "type") {
            Some(TextTag::VALUE) => Self::Text(tags::decode(map)?),
            Some(ImageTag::VALUE) => Self::Image(tags::decode(map)?),
            Some(AudioTag::VALUE) => Self::Audio(tags::decode(map)?),
            Some(ResourceLinkTag::VALUE) => Self::ResourceLink(tags::decode(map)?),
            Some(ResourceTag::VALUE) => Self::Resource(tags::decode(map)?),
            Some(_) => Self::Other(map),
            None => return Err(de::Error::missing_field("type")),
        })
    }
}

impl From<TextContent> for ContentBlock {
    fn from(c: TextContent) -> Self {
        Self::Text(c)
    }
}

impl From<ImageContent> for ContentBlock {
    fn from(c: ImageContent) -> Self {
        Self::Image(c)
    }
}

impl From<AudioContent> for ContentBlock {
    fn from(c: AudioContent) -> Self {
        Self::Audio(c)
    }
}

impl From<ResourceLink> for ContentBlock {
    fn from(c: ResourceLink) -> Self {
        Self::ResourceLink(c)
    }
}

impl From<EmbeddedResource> for ContentBlock {
    fn from(c: EmbeddedResource) -> Self {
        Self::Resource(c)
    }
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(TextContent::new(text))
    }
}
