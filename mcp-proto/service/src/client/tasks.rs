//! Tasks on the client (the `io.modelcontextprotocol/tasks` extension, SEP-2663).
//!
//! A client that declares the extension ([`ClientBuilder::tasks`]) lets the server answer a
//! `tools/call` with a task instead of a result. [`Client::call_tool`] hides that: it waits
//! for the task and returns its result. [`Client::start_tool`] shows it: a
//! [`ToolCall::Task`] is a [`TaskHandle`] to poll ([`get`](TaskHandle::get)), wait for
//! ([`wait`](TaskHandle::wait)), feed ([`update`](TaskHandle::update)) or stop
//! ([`cancel`](TaskHandle::cancel)); [`Client::resume_task`] picks a task up again by its
//! id (after a restart, say).
//!
//! # Waiting
//!
//! [`TaskHandle::wait`] polls `tasks/get` at the interval the server asks for
//! (`pollIntervalMs`, read again at every poll), kept within the client's bounds
//! ([`ClientBuilder::task_poll_interval`]: 100 ms to 30 s by default) so that no server can
//! make it spin or stall. A task that needs input (`input_required`) has each input request
//! answered once, by the same sampling / elicitation / roots handlers that answer a server's
//! requests, and the answers sent with `tasks/update`; a handler's error cancels the task
//! and is the wait's error. The wait ends with the result (`completed`), the JSON-RPC error
//! (`failed`), [`RequestError::TaskCancelled`] (`cancelled`), or the error of a poll (a task
//! the server no longer knows, after its TTL, is `-32602`). Waiting needs the runtime's timer
//! ([`ClientBuilder::timer`]; the adapters set it); dropping a wait leaves the task running —
//! cancel it to stop it.
//!
//! There is no `tasks/list` and no `tasks/result`: the extension removed both (a task's
//! result comes inlined in `tasks/get`, and a task is known only to whoever holds its id).

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::{Client, RequestError};
use crate::PeerError;
use crate::schema::{
    CallToolResult, CancelTask, CancelTaskRequestParams, CreateTaskResult, DetailedTask, GetTask,
    GetTaskRequestParams, InputResponse, InputResponses, ResultType, TaskStatus, UpdateTask,
    UpdateTaskRequestParams,
};
use mcp_proto::jsonrpc::{Outcome, Request, RequestId};

/// The default bounds on the poll interval: `pollIntervalMs` is kept within them.
pub const DEFAULT_TASK_POLL_BOUNDS: (Duration, Duration) =
    (Duration::from_millis(100), Duration::from_secs(30));

/// What a `tools/call` answered: its result, or a task that will have it.
#[derive(Debug)]
pub enum ToolCall {
    /// The tool's result, at once.
    Done(CallToolResult),
    /// The server goes on with the call as a task.
    Task(TaskHandle),
}

/// A task the server runs for this client: its id and what was last heard of it.
#[derive(Debug, Clone)]
pub struct TaskHandle {
    client: Client,
    id: String,
    last: Option<DetailedTask>,
    /// Input request keys already answered (keys are unique over a task's life).
    answered: BTreeSet<String>,
}

impl TaskHandle {
    pub(super) fn new(client: Client, id: String, last: Option<DetailedTask>) -> Self {
        TaskHandle {
            client,
            id,
            last,
            answered: BTreeSet::new(),
        }
    }

    /// The task's id (persist it to resume with [`Client::resume_task`]).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The task as last heard of (from its creation or the last [`get`](Self::get)).
    pub fn last(&self) -> Option<&DetailedTask> {
        self.last.as_ref()
    }

    /// `tasks/get`: the task as it is now.
    pub async fn get(&mut self) -> Result<DetailedTask, RequestError> {
        let params = GetTaskRequestParams {
            task_id: self.id.clone(),
            meta: None,
        };
        let got = self.client.request::<GetTask>(params).await?.task;
        if got.task.task_id != self.id {
            return Err(RequestError::Malformed(format!(
                "tasks/get for {} answered task {}",
                self.id, got.task.task_id
            )));
        }
        self.last = Some(got.clone());
        Ok(got)
    }

    /// `tasks/update`: answers to the task's input requests, by their keys.
    pub async fn update(&self, responses: InputResponses) -> Result<(), RequestError> {
        let params = UpdateTaskRequestParams {
            task_id: self.id.clone(),
            input_responses: responses,
            meta: None,
        };
        self.client.request::<UpdateTask>(params).await.map(drop)
    }

    /// `tasks/cancel`: asks the server to stop the task (it may still finish otherwise).
    pub async fn cancel(&self) -> Result<(), RequestError> {
        let params = CancelTaskRequestParams {
            task_id: self.id.clone(),
            meta: None,
        };
        self.client.request::<CancelTask>(params).await.map(drop)
    }

    /// Polls until the task ends and returns its result (see the module docs).
    pub async fn wait(&mut self) -> Result<CallToolResult, RequestError> {
        let Some(sleep) = self.client.inner.timer.clone() else {
            return Err(RequestError::Transport(PeerError::Unsupported(
                "waiting for a task needs a timer (ClientBuilder::timer)".into(),
            )));
        };
        let (min, max) = self.client.inner.task_poll_bounds;
        loop {
            let task = self.get().await?;
            match task.task.status {
                TaskStatus::Completed => {
                    let result = task.result.ok_or_else(|| {
                        RequestError::Malformed("a completed task without its result".into())
                    })?;
                    return serde_json::from_value(Value::Object(result))
                        .map_err(|e| RequestError::Malformed(e.to_string()));
                }
                TaskStatus::Failed => {
                    let e = task.error.ok_or_else(|| {
                        RequestError::Malformed("a failed task without its error".into())
                    })?;
                    return Err(RequestError::from_object(&e));
                }
                TaskStatus::Cancelled => {
                    return Err(RequestError::TaskCancelled(
                        task.task.status_message.unwrap_or_default(),
                    ));
                }
                TaskStatus::InputRequired => self.answer(&task).await?,
                TaskStatus::Working => {}
            }
            let asked = task
                .task
                .poll_interval_ms
                .map_or(min, Duration::from_millis);
            sleep(asked.clamp(min, max)).await;
        }
    }

    /// Answers the input requests not answered yet, with the client's handlers.
    async fn answer(&mut self, task: &DetailedTask) -> Result<(), RequestError> {
        let mut responses = InputResponses::new();
        for (key, ask) in task.input_requests.iter().flatten() {
            if self.answered.contains(key) {
                continue;
            }
            let value =
                serde_json::to_value(ask).map_err(|e| RequestError::Encode(e.to_string()))?;
            let method = value
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let params = value
                .get("params")
                .map(serde_json::value::to_raw_value)
                .transpose()
                .map_err(|e| RequestError::Encode(e.to_string()))?;
            let request = Request::new(
                RequestId::String(format!("task-input:{key}").into()),
                method,
                params,
            );
            let response = Client::serve(self.client.inner.clone(), request).await;
            match response.outcome {
                Outcome::Result(raw) => {
                    let answer: InputResponse = serde_json::from_str(raw.get())
                        .map_err(|e| RequestError::Malformed(e.to_string()))?;
                    responses.insert(key.clone(), answer);
                }
                Outcome::Error(e) => {
                    // The task cannot go on without it: stop it, and say why.
                    let _ = self.cancel().await;
                    return Err(RequestError::from_object(&e));
                }
            }
        }
        if responses.is_empty() {
            return Ok(());
        }
        self.answered.extend(responses.keys().cloned());
        self.update(responses).await
    }
}

impl Client {
    /// Calls the tool `name` and returns what the server chose: the result, or a task
    /// (only to a client that declared the Tasks extension, [`ClientBuilder::tasks`]).
    ///
    /// [`ClientBuilder::tasks`]: super::ClientBuilder::tasks
    pub async fn start_tool(
        &self,
        name: &str,
        arguments: impl Serialize,
    ) -> Result<ToolCall, RequestError> {
        let params = Self::tool_params(name, arguments)?;
        let raw = self
            .call_raw(
                crate::schema::methods::TOOLS_CALL,
                &params,
                Default::default(),
            )
            .await?;
        self.tool_call(&raw)
    }

    /// Reads a `tools/call` answer: a `CreateTaskResult` (`resultType: "task"`) or a result.
    pub(super) fn tool_call(
        &self,
        raw: &serde_json::value::RawValue,
    ) -> Result<ToolCall, RequestError> {
        #[derive(serde::Deserialize)]
        struct Kind {
            #[serde(rename = "resultType")]
            result_type: Option<ResultType>,
        }
        let malformed = |e: serde_json::Error| RequestError::Malformed(e.to_string());
        if !self.declares_tasks() {
            // One pass, as any result. A task answered to a client that did not ask for one
            // is an invalid response (the extension), said so when the result does not read.
            return serde_json::from_str(raw.get())
                .map(ToolCall::Done)
                .map_err(|e| match serde_json::from_str::<Kind>(raw.get()) {
                    Ok(k) if k.result_type == Some(ResultType::Task) => RequestError::Malformed(
                        "the server answered a task, but this client did not declare the Tasks \
                         extension"
                            .into(),
                    ),
                    _ => malformed(e),
                });
        }
        let kind: Kind = serde_json::from_str(raw.get()).map_err(malformed)?;
        if kind.result_type != Some(ResultType::Task) {
            return serde_json::from_str(raw.get())
                .map(ToolCall::Done)
                .map_err(malformed);
        }
        let created: CreateTaskResult = serde_json::from_str(raw.get()).map_err(malformed)?;
        let id = created.task.task_id.clone();
        let last = DetailedTask {
            task: created.task,
            result: None,
            error: None,
            input_requests: None,
        };
        Ok(ToolCall::Task(TaskHandle::new(
            self.clone(),
            id,
            Some(last),
        )))
    }

    /// A handle on the task `id`, to poll, wait for or cancel it (a task started earlier,
    /// whose id was kept).
    pub fn resume_task(&self, id: impl Into<String>) -> TaskHandle {
        TaskHandle::new(self.clone(), id.into(), None)
    }

    /// Whether this client declared the Tasks extension.
    pub fn declares_tasks(&self) -> bool {
        self.inner
            .capabilities
            .extensions
            .as_ref()
            .is_some_and(|e| e.contains_key(crate::schema::TASKS_EXTENSION))
    }
}
