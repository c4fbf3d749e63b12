//! The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): a `tools/call` answered
//! with a task handle (`resultType: "task"`) that the client polls with `tasks/get`, feeds
//! with `tasks/update` and stops with `tasks/cancel`.
//!
//! A task's wire shape is flat: [`Task`]'s members sit at the top level of the
//! [`CreateTaskResult`], of the [`GetTaskResult`] (with the status's own member — `result`,
//! `error` or `inputRequests` — beside them) and of a `notifications/tasks/status`. Durations
//! carry their unit in their name (`ttlMs`, `pollIntervalMs`), in integer milliseconds.

use serde::{Deserialize, Serialize};

use super::{InputRequests, InputResponses, JsonObject, Meta, ResultType};
use mcp_proto::jsonrpc::ErrorObject;

/// The extension's identifier, the key under `capabilities.extensions` on both sides.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Where a task is (`status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// The request is being processed.
    Working,
    /// The server waits for the client's answers to the task's `inputRequests`.
    InputRequired,
    /// Finished with a result (a tool error, `isError: true`, included).
    Completed,
    /// Finished with a JSON-RPC error.
    Failed,
    /// Cancelled before it finished.
    Cancelled,
}

impl TaskStatus {
    /// `completed`, `failed` and `cancelled` are final.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// A task's metadata (`Task`), the members every task-bearing message carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The task's identifier (unguessable: it works like a bearer token).
    pub task_id: String,
    /// Where the task is.
    pub status: TaskStatus,
    /// What the task is doing or why it ended, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// When the task was created (RFC 3339).
    pub created_at: String,
    /// When the task last changed (RFC 3339).
    pub last_updated_at: String,
    /// How long after its creation the server keeps the task, in milliseconds; `None`
    /// (`null`) for no limit.
    pub ttl_ms: Option<u64>,
    /// How often the client should poll, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_ms: Option<u64>,
}

/// A task's status with what that status carries (`DetailedTask`): the result once
/// `completed`, the error once `failed`, the outstanding input requests while
/// `input_required`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DetailedTask {
    /// The task's metadata.
    #[serde(flatten)]
    pub task: Task,
    /// The result of the request the task runs (`completed`): what the request itself
    /// would have answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<JsonObject>,
    /// The JSON-RPC error the request ended with (`failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
    /// The requests the server needs the client to answer (`input_required`), by the key
    /// the client answers under in `tasks/update`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<InputRequests>,
}

/// The answer to a request the server runs as a task (`CreateTaskResult`): `resultType:
/// "task"` and the task's metadata, flat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateTaskResult {
    /// `"task"`.
    pub result_type: ResultType,
    /// The new task.
    #[serde(flatten)]
    pub task: Task,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The result of `tasks/get` (`GetTaskResult`): the task as it is now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskResult {
    /// `"complete"` (2026-07-28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// The task and what its status carries.
    #[serde(flatten)]
    pub task: DetailedTask,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The params of `tasks/get`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskRequestParams {
    /// The task.
    pub task_id: String,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The params of `tasks/update`: answers to the task's outstanding input requests.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTaskRequestParams {
    /// The task.
    pub task_id: String,
    /// The answers, by the keys of the task's `inputRequests`.
    #[serde(default)]
    pub input_responses: InputResponses,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The params of `tasks/cancel`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelTaskRequestParams {
    /// The task.
    pub task_id: String,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_task_result_is_flat_with_its_units_in_the_names() {
        let r = CreateTaskResult {
            result_type: ResultType::Task,
            task: Task {
                task_id: "t1".into(),
                status: TaskStatus::InputRequired,
                status_message: None,
                created_at: "2026-12-06T10:00:00Z".into(),
                last_updated_at: "2026-12-06T10:00:00Z".into(),
                ttl_ms: Some(60_000),
                poll_interval_ms: Some(500),
            },
            meta: None,
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["resultType"], "task");
        assert_eq!(v["taskId"], "t1");
        assert_eq!(v["status"], "input_required");
        assert_eq!(v["ttlMs"], 60_000);
        assert_eq!(v["pollIntervalMs"], 500);
        assert!(v.get("task").is_none() && v.get("ttl").is_none());
        let back: CreateTaskResult = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn an_unlimited_ttl_is_null_not_absent() {
        let t = Task {
            task_id: "t".into(),
            status: TaskStatus::Working,
            status_message: None,
            created_at: String::new(),
            last_updated_at: String::new(),
            ttl_ms: None,
            poll_interval_ms: None,
        };
        let v = serde_json::to_value(&t).unwrap();
        assert!(v.get("ttlMs").is_some_and(|t| t.is_null()));
    }
}
