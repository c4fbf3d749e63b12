//! The params of the notifications that are not tied to one area: progress and cancellation.
//! (The `list_changed` notifications carry [`NotificationParams`](super::NotificationParams).)

use serde::{Deserialize, Serialize};

use super::{JsonObject, Meta, ProgressToken, RequestId};

/// The params of `notifications/progress` (`ProgressNotificationParams`).
///
/// `progress` and `total` are [`serde_json::Number`] so that integers stay integers on a round
/// trip; [`serde_json::Number::as_f64`] reads them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressNotificationParams {
    /// The token the request carried in `_meta.progressToken`.
    pub progress_token: ProgressToken,
    /// How far along: increases with each notification.
    pub progress: serde_json::Number,
    /// The value `progress` will reach, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<serde_json::Number>,
    /// What is happening (2025-03-26 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Notification metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ProgressNotificationParams {
    /// Progress for `token`: `progress` out of `total`, if given.
    pub fn new(token: impl Into<ProgressToken>, progress: u64, total: Option<u64>) -> Self {
        Self {
            progress_token: token.into(),
            progress: progress.into(),
            total: total.map(Into::into),
            message: None,
            meta: None,
            extra: JsonObject::new(),
        }
    }
}

/// The params of `notifications/cancelled` (`CancelledNotificationParams`).
///
/// `requestId` is optional in 2025-11-25 (a task is cancelled by `tasks/cancel` instead) and
/// required in the other revisions.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelledNotificationParams {
    /// The id of the request to cancel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<RequestId>,
    /// Why, for logs or the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Notification metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl CancelledNotificationParams {
    /// Cancels `request_id`, for `reason` if given.
    pub fn new(request_id: impl Into<RequestId>, reason: Option<String>) -> Self {
        Self {
            request_id: Some(request_id.into()),
            reason,
            ..Self::default()
        }
    }
}
