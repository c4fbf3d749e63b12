//! Roots: the directories and files a client lets a server work in.

use serde::{Deserialize, Serialize};

use super::{JsonObject, Meta};

/// A root directory or file (`Root`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Root {
    /// The URI of the root (a `file://` URI in the current revisions).
    pub uri: String,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Metadata (2025-06-18 on).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The result of `roots/list` (`ListRootsResult`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ListRootsResult {
    /// The roots.
    pub roots: Vec<Root>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}
