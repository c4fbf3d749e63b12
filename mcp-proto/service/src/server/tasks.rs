//! Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663) on the server: a
//! `tools/call` that goes on in the background while the client polls it.
//!
//! # Theory of operation
//!
//! A tool handler decides, per call, to go on as a task:
//! [`RequestContext::run_as_task`](super::RequestContext::run_as_task). When the request's
//! client declared the extension (in its per-request capabilities, or at `initialize`) and
//! the transport can run work in the background ([`Peer::spawn`](super::Peer::spawn)), the
//! task is recorded here *before* the client hears of it (so a `tasks/get` right after the
//! `CreateTaskResult` finds it), the work is spawned, and the call answers
//! `resultType: "task"`. Otherwise the same work runs inline and the call answers its result,
//! so one handler serves clients with and without the extension.
//!
//! A task's asks (`ctx.elicit(..)`, `ctx.create_message(..)`, …) become its
//! `inputRequests`, each under a key unique over the task's life; `tasks/update` delivers
//! the answers to the parked asks, and the ones it does not name stay outstanding (answers
//! under a key not outstanding are ignored). `tasks/cancel` ends the task `cancelled` at once
//! and cancels the work's token; whatever the work returns later is dropped.
//!
//! Tasks are bound to the principal that created them: another principal is told the task
//! does not exist, as is anyone after the task's TTL (the record is then dropped and its
//! work cancelled). Identifiers are 128 random bits from the OS CSPRNG.
//!
//! # The status table
//!
//! Every status change goes through one function (`Record::step`, which applies `next`):
//!
//! ```text
//!  status          event        next            effect
//!  --------------  -----------  --------------  ----------------------------------------
//!  working         Ask          input_required  the ask is listed in inputRequests
//!  input_required  Ask          input_required  listed too
//!  input_required  Answered     working         when no ask is left outstanding
//!  working         Answered     —               (ignored)
//!  working|input_  Finish       completed       the result is kept for tasks/get
//!  working|input_  Fail         failed          the JSON-RPC error is kept
//!  working|input_  Cancel       cancelled       the work's token fires; asks fail
//!  terminal        any          —               (ignored: terminal statuses are final)
//! ```
//!
//! Limits ([`TaskConfig`]): tasks alive per server (new ones are refused with -32603 past
//! it), input requests outstanding per task, the TTL and the poll interval told to clients.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use futures_channel::oneshot;
use serde_json::Value;

use crate::Error;
use crate::cancel::{CancellationToken, lock};
use crate::schema::{
    CallToolResult, DetailedTask, InputRequest, InputResponses, JsonObject, Task, TaskStatus,
};
use mcp_proto::jsonrpc::ErrorObject;

/// Default TTL of a task: one hour.
pub const DEFAULT_TASK_TTL: Duration = Duration::from_secs(3600);
/// Default poll interval told to clients.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(500);
/// Default bound on tasks alive per server.
pub const DEFAULT_MAX_TASKS: usize = 1024;
/// Default bound on a task's outstanding input requests.
pub const DEFAULT_MAX_TASK_INPUTS: usize = 16;

/// The clocks a server's tasks read: the monotonic one (TTLs) and the wall clock
/// (`createdAt`, `lastUpdatedAt`).
pub type TaskClock = Arc<dyn Fn() -> (Instant, SystemTime) + Send + Sync>;

/// The limits of a server's tasks ([`Server::tasks`](super::Server::tasks)).
#[derive(Clone)]
pub struct TaskConfig {
    /// How long after its creation a task is kept (`ttlMs`); `None` for no limit (not
    /// advised: a task then lives until the server stops).
    pub ttl: Option<Duration>,
    /// The poll interval told to clients (`pollIntervalMs`).
    pub poll_interval: Duration,
    /// Tasks alive at once, per server; a call that would go past it is refused.
    pub max_tasks: usize,
    /// Input requests outstanding at once, per task; an ask past it fails.
    pub max_inputs: usize,
    /// Where time comes from: the system's clocks by default; a virtual clock in tests.
    pub clock: TaskClock,
}

impl std::fmt::Debug for TaskConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskConfig")
            .field("ttl", &self.ttl)
            .field("poll_interval", &self.poll_interval)
            .field("max_tasks", &self.max_tasks)
            .field("max_inputs", &self.max_inputs)
            .finish_non_exhaustive()
    }
}

impl Default for TaskConfig {
    fn default() -> Self {
        TaskConfig {
            ttl: Some(DEFAULT_TASK_TTL),
            poll_interval: DEFAULT_POLL_INTERVAL,
            max_tasks: DEFAULT_MAX_TASKS,
            max_inputs: DEFAULT_MAX_TASK_INPUTS,
            clock: Arc::new(|| (Instant::now(), SystemTime::now())),
        }
    }
}

/// What happens to a task (the module's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskEvent {
    /// The work asked the client something.
    Ask,
    /// Answers arrived and no ask is left outstanding.
    Answered,
    /// The work returned a result.
    Finish,
    /// The work ended with a JSON-RPC error.
    Fail,
    /// The client cancelled the task.
    Cancel,
}

/// The table: the next status, or `None` when the event does not apply (ignored).
pub(crate) fn next(status: TaskStatus, event: TaskEvent) -> Option<TaskStatus> {
    use TaskEvent as E;
    use TaskStatus as S;
    match (status, event) {
        (S::Completed | S::Failed | S::Cancelled, _) => None,
        (S::Working | S::InputRequired, E::Ask) => Some(S::InputRequired),
        (S::InputRequired, E::Answered) => Some(S::Working),
        (S::Working, E::Answered) => None,
        (_, E::Finish) => Some(S::Completed),
        (_, E::Fail) => Some(S::Failed),
        (_, E::Cancel) => Some(S::Cancelled),
    }
}

/// What a task's work ended with.
pub(crate) enum TaskOutcome {
    /// A result (a tool error included).
    Result(JsonObject),
    /// A JSON-RPC error.
    Error(ErrorObject),
}

impl TaskOutcome {
    /// A tool's outcome as `tools/call` would have answered it: a protocol error fails the
    /// task, any other error is a tool error (`isError: true`) in a completed one.
    pub(crate) fn of_tool(result: Result<CallToolResult, Error>) -> Self {
        let result = match super::dispatch::tool_outcome(result) {
            Ok(r) => r,
            Err(e) => return TaskOutcome::Error(e.to_error_object()),
        };
        match serde_json::to_value(result) {
            Ok(Value::Object(map)) => TaskOutcome::Result(map),
            Ok(_) => TaskOutcome::Error(
                Error::internal("a tool result is not an object").to_error_object(),
            ),
            Err(e) => TaskOutcome::Error(Error::internal(e).to_error_object()),
        }
    }
}

/// One task.
struct Record {
    status: TaskStatus,
    message: Option<String>,
    principal: Option<String>,
    created: SystemTime,
    updated: SystemTime,
    expires: Option<Instant>,
    /// Outstanding asks by key, and where their answers go.
    asks: BTreeMap<String, (InputRequest, oneshot::Sender<Value>)>,
    /// Every key ever asked (keys are unique over a task's life).
    used: BTreeSet<String>,
    result: Option<JsonObject>,
    error: Option<ErrorObject>,
    cancel: CancellationToken,
}

impl Record {
    /// The one place a task's status changes (the module's table). `true` when it did.
    fn step(&mut self, event: TaskEvent, wall: SystemTime) -> bool {
        let Some(status) = next(self.status, event) else {
            return false;
        };
        self.status = status;
        self.updated = wall;
        if status.is_terminal() {
            // Parked asks fail (their senders dropped); the work is told to stop.
            self.asks.clear();
            self.cancel.cancel();
        }
        true
    }

    fn task(&self, id: &str, config: &TaskConfig) -> Task {
        Task {
            task_id: id.to_owned(),
            status: self.status,
            status_message: self.message.clone(),
            created_at: rfc3339(self.created),
            last_updated_at: rfc3339(self.updated),
            ttl_ms: config.ttl.map(millis),
            poll_interval_ms: Some(millis(config.poll_interval).max(1)),
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

fn not_found(id: &str) -> Error {
    Error::invalid_params(format_args!(
        "Failed to retrieve task: Task not found ({})",
        id.chars().take(16).collect::<String>()
    ))
}

/// A server's tasks (see the module docs). Shared by its sessions; one lock, held only for
/// bookkeeping (never across an await).
pub(crate) struct Tasks {
    config: TaskConfig,
    records: Mutex<HashMap<String, Record>>,
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks")
            .field("config", &self.config)
            .field("alive", &lock(&self.records).len())
            .finish()
    }
}

impl Tasks {
    pub(crate) fn new(config: TaskConfig) -> Self {
        Tasks {
            config,
            records: Mutex::new(HashMap::new()),
        }
    }

    /// The TTL of new tasks.
    pub(crate) fn ttl(&self) -> Option<Duration> {
        self.config.ttl
    }

    /// Drops the tasks whose TTL has passed (their work is stopped).
    pub(crate) fn expire(&self) {
        let (now, _) = self.now();
        Self::purge(&mut lock(&self.records), now);
    }

    /// The time now, on the configured clocks.
    pub(crate) fn now(&self) -> (Instant, SystemTime) {
        (self.config.clock)()
    }

    /// Drops the tasks whose TTL has passed, cancelling their work.
    fn purge(records: &mut HashMap<String, Record>, now: Instant) {
        records.retain(|_, r| {
            let alive = r.expires.is_none_or(|e| now < e);
            if !alive {
                r.cancel.cancel();
            }
            alive
        });
    }

    /// Records a new `working` task for `principal`: its id, metadata and the token its work
    /// should watch.
    pub(crate) fn create(
        &self,
        now: Instant,
        wall: SystemTime,
        principal: Option<&str>,
        cancel: CancellationToken,
    ) -> Result<Task, Error> {
        let mut records = lock(&self.records);
        Self::purge(&mut records, now);
        if records.len() >= self.config.max_tasks {
            return Err(Error::protocol(
                mcp_proto::jsonrpc::error_codes::INTERNAL_ERROR,
                format_args!(
                    "too many tasks in progress (at most {}); retry later",
                    self.config.max_tasks
                ),
            ));
        }
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes)
            .map_err(|e| Error::internal(format_args!("no randomness: {e}")))?;
        let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let record = Record {
            status: TaskStatus::Working,
            message: None,
            principal: principal.map(str::to_owned),
            created: wall,
            updated: wall,
            expires: self.config.ttl.map(|ttl| now + ttl),
            asks: BTreeMap::new(),
            used: BTreeSet::new(),
            result: None,
            error: None,
            cancel,
        };
        let task = record.task(&id, &self.config);
        records.insert(id, record);
        Ok(task)
    }

    fn with<T>(
        &self,
        now: Instant,
        id: &str,
        principal: Option<&str>,
        f: impl FnOnce(&mut Record) -> T,
    ) -> Option<T> {
        let mut records = lock(&self.records);
        Self::purge(&mut records, now);
        let record = records.get_mut(id)?;
        (record.principal.as_deref() == principal).then(|| f(record))
    }

    /// `tasks/get`: the task as it is now; -32602 when it does not exist for `principal`.
    pub(crate) fn get(
        &self,
        now: Instant,
        id: &str,
        principal: Option<&str>,
    ) -> Result<DetailedTask, Error> {
        self.with(now, id, principal, |r| DetailedTask {
            task: r.task(id, &self.config),
            result: r.result.clone(),
            error: r.error.clone(),
            input_requests: (r.status == TaskStatus::InputRequired).then(|| {
                r.asks
                    .iter()
                    .map(|(k, (ask, _))| (k.clone(), ask.clone()))
                    .collect()
            }),
        })
        .ok_or_else(|| not_found(id))
    }

    /// `tasks/update`: delivers the answers to outstanding asks (others are ignored). Always
    /// acknowledged, whatever the task.
    pub(crate) fn update(
        &self,
        now: Instant,
        wall: SystemTime,
        id: &str,
        principal: Option<&str>,
        responses: InputResponses,
    ) {
        self.with(now, id, principal, |r| {
            for (key, answer) in responses {
                if let Some((_, to)) = r.asks.remove(&key) {
                    let _ = to.send(serde_json::to_value(answer).unwrap_or(Value::Null));
                }
            }
            if r.asks.is_empty() {
                r.step(TaskEvent::Answered, wall);
            }
        });
    }

    /// `tasks/cancel`: the task ends `cancelled` unless it already ended. Always
    /// acknowledged, whatever the task.
    pub(crate) fn cancel(&self, now: Instant, wall: SystemTime, id: &str, principal: Option<&str>) {
        self.with(now, id, principal, |r| {
            if r.step(TaskEvent::Cancel, wall) {
                r.message = Some("Cancelled by the client".into());
            }
        });
    }

    /// The work of task `id` asks the client `request` under `key`: the
    /// answer arrives on the receiver. Fails when the task ended or is gone, the key was used
    /// before, or too many asks are outstanding.
    pub(crate) fn ask(
        &self,
        now: Instant,
        wall: SystemTime,
        id: &str,
        key: String,
        request: InputRequest,
    ) -> Result<oneshot::Receiver<Value>, Error> {
        let mut records = lock(&self.records);
        Self::purge(&mut records, now);
        let r = records
            .get_mut(id)
            .ok_or_else(|| Error::new("the task is gone (expired)"))?;
        if r.status.is_terminal() {
            return Err(Error::new("the task has ended"));
        }
        if !r.used.insert(key.clone()) {
            return Err(Error::new(format_args!(
                "input request key `{key}` was used before in this task"
            )));
        }
        if r.asks.len() >= self.config.max_inputs {
            return Err(Error::new(format_args!(
                "too many input requests outstanding (at most {})",
                self.config.max_inputs
            )));
        }
        let (tx, rx) = oneshot::channel();
        r.asks.insert(key, (request, tx));
        r.step(TaskEvent::Ask, wall);
        Ok(rx)
    }

    /// Drops task `id` (one the client never heard of), stopping its work.
    pub(crate) fn forget(&self, id: &str) {
        if let Some(r) = lock(&self.records).remove(id) {
            r.cancel.cancel();
        }
    }

    /// The work of task `id` ended with `outcome` (dropped if the task already ended).
    pub(crate) fn finish(&self, wall: SystemTime, id: &str, outcome: TaskOutcome) {
        let mut records = lock(&self.records);
        let Some(r) = records.get_mut(id) else {
            return;
        };
        match outcome {
            TaskOutcome::Result(result) => {
                if r.step(TaskEvent::Finish, wall) {
                    r.result = Some(result);
                }
            }
            TaskOutcome::Error(error) => {
                if r.step(TaskEvent::Fail, wall) {
                    r.message = Some(error.message.to_string());
                    r.error = Some(error);
                }
            }
        }
    }

    /// Tasks alive now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.records).len()
    }
}

/// A running task's handle, held by its work's [`RequestContext`](super::RequestContext).
#[derive(Clone)]
pub(crate) struct TaskRef {
    pub(crate) tasks: Arc<Tasks>,
    pub(crate) id: String,
    /// Asks so far in this task (for default keys).
    pub(crate) asked: Arc<std::sync::atomic::AtomicUsize>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ALL: [TaskStatus; 5] = [
        TaskStatus::Working,
        TaskStatus::InputRequired,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
    ];
    const EVENTS: [TaskEvent; 5] = [
        TaskEvent::Ask,
        TaskEvent::Answered,
        TaskEvent::Finish,
        TaskEvent::Fail,
        TaskEvent::Cancel,
    ];

    /// An input request: an elicitation form asking `message`.
    fn elicit(message: &str) -> InputRequest {
        serde_json::from_value(serde_json::json!({"method": "elicitation/create", "params": {"message": message, "requestedSchema": {"type": "object", "properties": {}}}})).unwrap()
    }

    fn tasks() -> Tasks {
        Tasks::new(TaskConfig {
            ttl: Some(Duration::from_secs(10)),
            max_tasks: 2,
            max_inputs: 2,
            ..TaskConfig::default()
        })
    }

    #[test]
    fn terminal_statuses_are_final() {
        for s in ALL.into_iter().filter(|s| s.is_terminal()) {
            for e in EVENTS {
                assert_eq!(next(s, e), None, "{s:?} on {e:?}");
            }
        }
    }

    #[test]
    fn a_task_lives_through_asks_and_answers_to_its_result() {
        let t = tasks();
        let (now, wall) = (Instant::now(), SystemTime::now());
        let task = t
            .create(now, wall, Some("alice"), CancellationToken::new())
            .unwrap();
        let id = task.task_id.as_str();
        assert_eq!(task.status, TaskStatus::Working);
        assert_eq!(task.ttl_ms, Some(10_000));
        let mut a = t.ask(now, wall, id, "a".into(), elicit("a?")).unwrap();
        let _b = t.ask(now, wall, id, "b".into(), elicit("b?")).unwrap();
        // A third outstanding ask is over the bound; a key is never reused.
        assert!(t.ask(now, wall, id, "c".into(), elicit("?")).is_err());
        let got = t.get(now, id, Some("alice")).unwrap();
        assert_eq!(got.task.status, TaskStatus::InputRequired);
        assert_eq!(got.input_requests.as_ref().map(|m| m.len()), Some(2));
        // Another principal sees no such task.
        assert_eq!(
            t.get(now, id, Some("mallory")).unwrap_err().code(),
            Some(-32602)
        );
        // A partial answer leaves the other ask outstanding; unknown keys are ignored.
        let answers: InputResponses = serde_json::from_value(serde_json::json!({"a": {"action": "accept", "content": {}}, "zzz": {"action": "decline"}})).unwrap();
        t.update(now, wall, id, Some("alice"), answers);
        assert!(matches!(a.try_recv(), Ok(Some(_))));
        let got = t.get(now, id, Some("alice")).unwrap();
        assert_eq!(got.task.status, TaskStatus::InputRequired);
        assert_eq!(
            got.input_requests.unwrap().keys().collect::<Vec<_>>(),
            ["b"]
        );
        assert!(
            t.ask(now, wall, id, "a".into(), elicit("?")).is_err(),
            "key reused"
        );
        let answers: InputResponses =
            serde_json::from_value(serde_json::json!({"b": {"action": "accept", "content": {}}}))
                .unwrap();
        t.update(now, wall, id, Some("alice"), answers);
        assert_eq!(
            t.get(now, id, Some("alice")).unwrap().task.status,
            TaskStatus::Working
        );
        t.finish(
            wall,
            id,
            TaskOutcome::of_tool(Ok(CallToolResult::text("done"))),
        );
        let got = t.get(now, id, Some("alice")).unwrap();
        assert_eq!(got.task.status, TaskStatus::Completed);
        assert_eq!(got.result.unwrap()["content"][0]["text"], "done");
        assert!(got.input_requests.is_none() && got.error.is_none());
        // A cancel after the end changes nothing.
        t.cancel(now, wall, id, Some("alice"));
        assert_eq!(
            t.get(now, id, Some("alice")).unwrap().task.status,
            TaskStatus::Completed
        );
    }

    #[test]
    fn cancel_ends_a_task_its_work_cannot_revive_and_its_asks_fail() {
        let t = tasks();
        let (now, wall) = (Instant::now(), SystemTime::now());
        let token = CancellationToken::new();
        let id = t.create(now, wall, None, token.clone()).unwrap().task_id;
        let mut ask = t.ask(now, wall, &id, "k".into(), elicit("?")).unwrap();
        t.cancel(now, wall, &id, None);
        assert!(token.is_cancelled());
        assert!(ask.try_recv().is_err(), "the parked ask fails");
        t.finish(
            wall,
            &id,
            TaskOutcome::of_tool(Ok(CallToolResult::text("late"))),
        );
        let got = t.get(now, &id, None).unwrap();
        assert_eq!(got.task.status, TaskStatus::Cancelled);
        assert!(got.result.is_none());
    }

    #[test]
    fn a_protocol_error_fails_the_task_a_tool_error_completes_it() {
        let t = tasks();
        let (now, wall) = (Instant::now(), SystemTime::now());
        let a = t
            .create(now, wall, None, CancellationToken::new())
            .unwrap()
            .task_id;
        let b = t
            .create(now, wall, None, CancellationToken::new())
            .unwrap()
            .task_id;
        t.finish(wall, &a, TaskOutcome::of_tool(Err(Error::internal("boom"))));
        t.finish(
            wall,
            &b,
            TaskOutcome::of_tool(Err(Error::new("tool says no"))),
        );
        let a = t.get(now, &a, None).unwrap();
        assert_eq!(a.task.status, TaskStatus::Failed);
        assert_eq!(a.error.unwrap().code, -32603);
        assert!(a.result.is_none());
        let b = t.get(now, &b, None).unwrap();
        assert_eq!(b.task.status, TaskStatus::Completed);
        assert_eq!(b.result.unwrap()["isError"], true);
    }

    #[test]
    fn tasks_are_bounded_and_expire_with_their_ttl() {
        let t = tasks();
        let (now, wall) = (Instant::now(), SystemTime::now());
        let token = CancellationToken::new();
        let id = t.create(now, wall, None, token.clone()).unwrap().task_id;
        t.create(now, wall, None, CancellationToken::new()).unwrap();
        assert!(
            t.create(now, wall, None, CancellationToken::new()).is_err(),
            "over max_tasks"
        );
        assert!(t.get(now + Duration::from_secs(9), &id, None).is_ok());
        let later = now + Duration::from_secs(10);
        assert_eq!(t.get(later, &id, None).unwrap_err().code(), Some(-32602));
        assert!(
            token.is_cancelled(),
            "an expired task's work is told to stop"
        );
        assert_eq!(t.len(), 0);
        assert!(
            t.create(later, wall, None, CancellationToken::new())
                .is_ok()
        );
    }

    proptest! {
        /// Any sequence of events: the status only moves along the table, a terminal status
        /// never changes, and a task gets at most one outcome (result xor error).
        #[test]
        fn the_lifecycle_stays_in_the_table(events in proptest::collection::vec(0..6u8, 0..40)) {
            let t = tasks();
            let (now, wall) = (Instant::now(), SystemTime::now());
            let id = t.create(now, wall, None, CancellationToken::new()).unwrap().task_id;
            let mut keys = 0;
            let mut last = TaskStatus::Working;
            for e in events {
                match e {
                    0 => { keys += 1; let _ = t.ask(now, wall, &id, format!("k{keys}"), elicit("?")); }
                    1 => t.update(now, wall, &id, None, (1..=keys).map(|k| (format!("k{k}"), serde_json::from_value(serde_json::json!({"action": "accept"})).unwrap())).collect()),
                    2 => t.finish(wall, &id, TaskOutcome::of_tool(Ok(CallToolResult::text("r")))),
                    3 => t.finish(wall, &id, TaskOutcome::of_tool(Err(Error::internal("e")))),
                    4 => t.cancel(now, wall, &id, None),
                    _ => {}
                }
                let got = t.get(now, &id, None).unwrap();
                let s = got.task.status;
                prop_assert!(s == last || EVENTS.iter().any(|&ev| next(last, ev) == Some(s)), "{last:?} -> {s:?}");
                if last.is_terminal() { prop_assert_eq!(s, last); }
                prop_assert!(!(got.result.is_some() && got.error.is_some()));
                prop_assert_eq!(got.result.is_some(), s == TaskStatus::Completed);
                prop_assert_eq!(got.error.is_some(), s == TaskStatus::Failed);
                prop_assert_eq!(got.input_requests.is_some(), s == TaskStatus::InputRequired);
                last = s;
            }
        }
    }
}
