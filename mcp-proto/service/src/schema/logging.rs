//! Logging: the level a client asks for and the log messages a server sends.

use serde::{Deserialize, Serialize};

use super::{JsonObject, Meta};

/// The severity of a log message (`LoggingLevel`): the eight syslog levels of RFC 5424.
///
/// Ordered from least to most severe, so `level >= LoggingLevel::Warning` reads as expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoggingLevel {
    /// Debug-level detail.
    Debug,
    /// Informational.
    Info,
    /// Normal but significant.
    Notice,
    /// A warning.
    Warning,
    /// An error.
    Error,
    /// A critical condition.
    Critical,
    /// Action must be taken at once.
    Alert,
    /// The system is unusable.
    Emergency,
}

impl LoggingLevel {
    /// Every level, least severe first.
    pub const ALL: [LoggingLevel; 8] = [
        Self::Debug,
        Self::Info,
        Self::Notice,
        Self::Warning,
        Self::Error,
        Self::Critical,
        Self::Alert,
        Self::Emergency,
    ];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Notice => "notice",
            Self::Warning => "warning",
            Self::Error => "error",
            Self::Critical => "critical",
            Self::Alert => "alert",
            Self::Emergency => "emergency",
        }
    }
}

/// The params of `logging/setLevel` (`SetLevelRequestParams`; legacy revisions, replaced by
/// the per-request `io.modelcontextprotocol/logLevel` meta key in 2026-07-28).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetLevelRequestParams {
    /// The least severe level the client wants to receive.
    pub level: LoggingLevel,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl SetLevelRequestParams {
    /// Params for the given level.
    pub fn new(level: LoggingLevel) -> Self {
        Self {
            level,
            meta: None,
            extra: JsonObject::new(),
        }
    }
}

/// The params of `notifications/message` (`LoggingMessageNotificationParams`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggingMessageNotificationParams {
    /// The severity.
    pub level: LoggingLevel,
    /// The name of the logger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logger: Option<String>,
    /// The message: any JSON value.
    pub data: serde_json::Value,
    /// Notification metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}
