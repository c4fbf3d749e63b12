//! Completion: argument autocompletion for prompts and resource templates.

use std::collections::BTreeMap;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

use super::tags::{self, PromptRefTag, ResourceRefTag};
use super::{JsonObject, Meta, ResultType};

/// A reference to a prompt (`PromptReference`, `"type": "ref/prompt"`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PromptReference {
    /// The `"type": "ref/prompt"` discriminator.
    #[serde(rename = "type")]
    pub kind: PromptRefTag,
    /// The name of the prompt.
    pub name: String,
    /// A human-readable name (2025-06-18 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A reference to a resource template (`ResourceTemplateReference`, called
/// `ResourceReference` in 2025-03-26; `"type": "ref/resource"`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ResourceTemplateReference {
    /// The `"type": "ref/resource"` discriminator.
    #[serde(rename = "type")]
    pub kind: ResourceRefTag,
    /// The URI or URI template of the resource.
    pub uri: String,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// What a completion is for: a prompt or a resource template, chosen by `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum CompletionReference {
    /// `"type": "ref/prompt"`.
    Prompt(PromptReference),
    /// `"type": "ref/resource"`.
    ResourceTemplate(ResourceTemplateReference),
}

impl<'de> Deserialize<'de> for CompletionReference {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = tags::object(deserializer)?;
        match tags::str_at(&map, "type") {
            Some(PromptRefTag::VALUE) => Ok(Self::Prompt(tags::decode(map)?)),
            Some(ResourceRefTag::VALUE) => Ok(Self::ResourceTemplate(tags::decode(map)?)),
            Some(other) => Err(de::Error::unknown_variant(
                other,
                &[PromptRefTag::VALUE, ResourceRefTag::VALUE],
            )),
            None => Err(de::Error::missing_field("type")),
        }
    }
}

/// The argument being completed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CompletionArgument {
    /// The name of the argument.
    pub name: String,
    /// What the user has typed so far.
    pub value: String,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Context for a completion (2025-06-18 on).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CompletionContext {
    /// Arguments already resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<BTreeMap<String, String>>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The params of `completion/complete` (`CompleteRequestParams`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompleteRequestParams {
    /// The prompt or resource template.
    #[serde(rename = "ref")]
    pub reference: CompletionReference,
    /// The argument being completed.
    pub argument: CompletionArgument,
    /// Context: arguments already resolved (2025-06-18 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<CompletionContext>,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The completion values of a [`CompleteResult`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    /// The values, at most 100.
    pub values: Vec<String>,
    /// How many values there are in all, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Whether there are more values than those given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The result of `completion/complete` (`CompleteResult`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompleteResult {
    /// How to read the result (2026-07-28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// The completion values.
    pub completion: Completion,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}
