//! Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663) on the server: a
//! `tools/call` that goes on in the background while the client polls it, on this instance
//! or, behind a load balancer, on any instance of a cluster.
//!
//! # Theory of operation
//!
//! A tool handler decides, per call, to go on as a task:
//! [`RequestContext::run_as_task`](super::RequestContext::run_as_task). When the request's
//! client declared the extension (in its per-request capabilities, or at `initialize`) and
//! the transport can run work in the background ([`Peer::spawn`](super::Peer::spawn)), the
//! task is recorded *before* the client hears of it (so a `tasks/get` right after the
//! `CreateTaskResult` finds it, on any instance), the work is spawned, and the call answers
//! `resultType: "task"`. Otherwise the same work runs inline and the call answers its result,
//! so one handler serves clients with and without the extension.
//!
//! A task is two things:
//!
//! - its **state** (`TaskState`: status, inputs asked, answers given, result or error):
//!   what `tasks/get` reads. It lives in one versioned record per task: in this server's
//!   memory, or, when the server is bound to a clustered router, in the cluster store
//!   ([`RecordOp`]), where every instance reads and writes it. Every change is a
//!   compare-and-set of the whole state (read, change, write if the version is still the
//!   one read; else again), so two instances changing one task never lose a write, and a
//!   terminal status, once written, is the one every instance reports.
//! - its **run** (`Running`: the work's cancellation token, the asks parked for answers,
//!   the keys used): only on the instance that runs the work, its *owner*.
//!
//! A task's asks (`ctx.elicit(..)`, `ctx.create_message(..)`, …) become its `inputs`,
//! each under a key unique over the task's life. `tasks/update`, on any instance, moves the
//! answers to outstanding keys into the state's `answers` (others are ignored); the owner
//! then hands them to the parked asks and clears them. `tasks/cancel`, on any instance,
//! writes `cancelled`; the owner then drops the work at its next await. An instance that
//! changed a task it does not run tells the owner on the bus ([`Server::broadcast_task`]);
//! the owner also reads its running tasks' records every [`TaskConfig::recheck`], so a
//! notice the bus lost delays the owner by that much, no more.
//!
//! **An owner that dies** (killed, or cut from the store past its liveness delay) leaves
//! its records `working` with an owner the store reports gone ([`ServiceRecord::owner_alive`]).
//! The next `tasks/get` on any instance writes `failed` (error -32603, "the server instance
//! running this task stopped") by compare-and-set, so the task fails exactly once, whoever
//! polls first, and never hangs.
//!
//! Tasks are bound to the principal that created them: another principal is told the task
//! does not exist, as is anyone after the task's TTL (the record expires; the owner's timer
//! cancels the work). Identifiers are 128 random bits from the OS CSPRNG.
//!
//! # The status table
//!
//! Every status change goes through one function (`TaskState::step`, which applies `next`):
//!
//! ```text
//!  status          event        next            effect
//!  --------------  -----------  --------------  ----------------------------------------
//!  working         Ask          input_required  the ask is listed in inputs
//!  input_required  Ask          input_required  listed too
//!  input_required  Answered     working         when no ask is left outstanding
//!  working         Answered     —               (ignored)
//!  working|input_  Finish       completed       the result is kept for tasks/get
//!  working|input_  Fail         failed          the JSON-RPC error is kept
//!  working|input_  Cancel       cancelled       the owner stops the work; asks fail
//!  terminal        any          —               (ignored: terminal statuses are final)
//! ```
//!
//! Limits ([`TaskConfig`]): tasks per server (new ones are refused with -32603 past it:
//! every task kept, without a cluster; the tasks this instance runs, with one, the store
//! keeping the rest until their TTL), input requests outstanding per task, the TTL and the
//! poll interval told to clients, and how often an owner reads its tasks again.
//!
//! [`RecordOp`]: mcp_proto::server::RecordOp
//! [`ServiceRecord::owner_alive`]: mcp_proto::server::ServiceRecord::owner_alive
//! [`Server::broadcast_task`]: super::Server

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use futures_channel::{mpsc, oneshot};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{BoxFuture, ClusterVoice};
use crate::Error;
use crate::cancel::{CancellationToken, lock};
use crate::schema::{
    CallToolResult, DetailedTask, InputRequest, InputResponses, JsonObject, Task, TaskStatus,
};
use mcp_proto::jsonrpc::{ErrorObject, error_codes};
use mcp_proto::server::{RecordGuard, RecordOp, StoreReply};

/// Default TTL of a task: one hour.
pub const DEFAULT_TASK_TTL: Duration = Duration::from_secs(3600);
/// Default poll interval told to clients.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(500);
/// Default bound on tasks per server.
pub const DEFAULT_MAX_TASKS: usize = 1024;
/// Default bound on a task's outstanding input requests.
pub const DEFAULT_MAX_TASK_INPUTS: usize = 16;
/// Default interval at which, in a cluster, the instance running a task reads its record
/// again (for a change another instance made whose bus notice was lost).
pub const DEFAULT_TASK_RECHECK: Duration = Duration::from_secs(2);

/// The clocks a server's tasks read: the monotonic one (TTLs) and the wall clock
/// (`createdAt`, `lastUpdatedAt`).
pub type TaskClock = Arc<dyn Fn() -> (Instant, SystemTime) + Send + Sync>;

/// The limits of a server's tasks ([`Server::tasks`](super::Server::tasks)).
#[derive(Clone)]
pub struct TaskConfig {
    /// How long after its creation a task is kept (`ttlMs`); `None` for no limit (not
    /// advised: a task then lives until the server stops, or for ever in a cluster store).
    pub ttl: Option<Duration>,
    /// The poll interval told to clients (`pollIntervalMs`).
    pub poll_interval: Duration,
    /// Tasks at once: kept by this server without a cluster; run by this instance with one
    /// (the store keeps the others). A call that would go past it is refused.
    pub max_tasks: usize,
    /// Input requests outstanding at once, per task; an ask past it fails.
    pub max_inputs: usize,
    /// In a cluster: how often the instance running a task reads its record again, should
    /// the bus have lost another instance's notice of an answer or a cancellation (at least
    /// 10 ms). Also the pause between attempts to store a task's outcome.
    pub recheck: Duration,
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
            .field("recheck", &self.recheck)
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
            recheck: DEFAULT_TASK_RECHECK,
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
    /// The work ended with a JSON-RPC error (or its instance died).
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
#[derive(Clone)]
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

/// A task's state: what `tasks/get` reads, on any instance (JSON in a cluster store).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct TaskState {
    status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    principal: Option<String>,
    /// Wall clock, ms since the Unix epoch.
    created: u64,
    updated: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ttl_ms: Option<u64>,
    poll_ms: u64,
    /// Outstanding asks, by key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    inputs: BTreeMap<String, InputRequest>,
    /// Answers `tasks/update` delivered that the owner has not handed to its asks yet.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    answers: BTreeMap<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<JsonObject>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<ErrorObject>,
}

impl TaskState {
    /// The one place a task's status changes (the module's table). `true` when it did.
    fn step(&mut self, event: TaskEvent, wall: u64) -> bool {
        let Some(status) = next(self.status, event) else {
            return false;
        };
        self.status = status;
        self.updated = wall;
        if status.is_terminal() {
            // Nothing is asked of the client any more.
            self.inputs.clear();
            self.answers.clear();
        }
        true
    }

    /// Ends the task with `outcome` (nothing when it already ended).
    fn finish(&mut self, outcome: TaskOutcome, wall: u64) -> bool {
        match outcome {
            TaskOutcome::Result(result) => {
                let stepped = self.step(TaskEvent::Finish, wall);
                if stepped {
                    self.result = Some(result);
                }
                stepped
            }
            TaskOutcome::Error(error) => {
                let stepped = self.step(TaskEvent::Fail, wall);
                if stepped {
                    self.message = Some(error.message.to_string());
                    self.error = Some(error);
                }
                stepped
            }
        }
    }

    /// `tasks/update`'s answers to outstanding asks move to `answers`; the task works again
    /// when none is left. `true` when something changed.
    fn answer(&mut self, responses: &InputResponses, wall: u64) -> bool {
        let mut changed = false;
        for (key, answer) in responses {
            if self.inputs.remove(key).is_some() {
                let answer = serde_json::to_value(answer).unwrap_or(Value::Null);
                self.answers.insert(key.clone(), answer);
                changed = true;
            }
        }
        if changed && self.inputs.is_empty() {
            self.step(TaskEvent::Answered, wall);
        }
        changed
    }

    fn view(&self, id: &str) -> DetailedTask {
        DetailedTask {
            task: Task {
                task_id: id.to_owned(),
                status: self.status,
                status_message: self.message.clone(),
                created_at: rfc3339(self.created),
                last_updated_at: rfc3339(self.updated),
                ttl_ms: self.ttl_ms,
                poll_interval_ms: Some(self.poll_ms),
            },
            result: self.result.clone(),
            error: self.error.clone(),
            input_requests: (self.status == TaskStatus::InputRequired).then(|| {
                self.inputs
                    .iter()
                    .map(|(k, ask)| (k.clone(), ask.clone()))
                    .collect()
            }),
        }
    }
}

/// A task this instance runs (its owner's part).
struct Running {
    /// Parked asks by key: where their answers go.
    asks: BTreeMap<String, oneshot::Sender<Value>>,
    /// Every key ever asked (keys are unique over a task's life).
    used: BTreeSet<String>,
    cancel: CancellationToken,
    expires: Option<Instant>,
    /// The task's watcher, in a cluster: told to read the record again.
    poke: Option<mpsc::UnboundedSender<()>>,
}

/// A task's record in this server's memory (no cluster): version, state, expiry.
type Kept = (u64, TaskState, Option<Instant>);

/// A task's record as loaded.
struct Loaded {
    version: u64,
    state: TaskState,
    owner_alive: Option<bool>,
}

/// Where task records are: `None`, this server's memory; else the cluster store.
pub(crate) type Voice = Option<Arc<dyn ClusterVoice>>;

/// Compare-and-set attempts before a change gives up (each lost to another writer).
const CAS_ATTEMPTS: usize = 16;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn wall_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, millis)
}

fn rfc3339(ms: u64) -> String {
    let t = SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
    humantime::format_rfc3339_millis(t).to_string()
}

fn not_found(id: &str) -> Error {
    Error::invalid_params(format_args!(
        "Failed to retrieve task: Task not found ({})",
        id.chars().take(16).collect::<String>()
    ))
}

fn unavailable(why: impl std::fmt::Display) -> Error {
    Error::protocol(
        error_codes::INTERNAL_ERROR,
        format_args!("the task store is unavailable ({why}); retry later"),
    )
}

/// The error a task whose instance died ends with.
fn owner_gone() -> ErrorObject {
    Error::protocol(
        error_codes::INTERNAL_ERROR,
        "the server instance running this task stopped before it finished",
    )
    .to_error_object()
}

/// The store key of task `id`.
fn key(id: &str) -> Box<str> {
    format!("task:{id}").into()
}

/// A server's tasks (see the module docs). Shared by its sessions; its locks are held only
/// for bookkeeping (never across an await).
pub(crate) struct Tasks {
    config: TaskConfig,
    /// Without a cluster: every task's record (version, state, expiry).
    memory: Mutex<HashMap<String, Kept>>,
    /// The tasks this instance runs.
    running: Mutex<HashMap<String, Running>>,
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks")
            .field("config", &self.config)
            .field("running", &lock(&self.running).len())
            .finish()
    }
}

impl Tasks {
    pub(crate) fn new(config: TaskConfig) -> Self {
        Tasks {
            config,
            memory: Mutex::new(HashMap::new()),
            running: Mutex::new(HashMap::new()),
        }
    }

    /// The TTL of new tasks.
    pub(crate) fn ttl(&self) -> Option<Duration> {
        self.config.ttl
    }

    /// How often an owner reads its tasks again, and waits between attempts to store an
    /// outcome.
    pub(crate) fn recheck(&self) -> Duration {
        self.config.recheck.max(Duration::from_millis(10))
    }

    /// The time now, on the configured clocks.
    pub(crate) fn now(&self) -> (Instant, SystemTime) {
        (self.config.clock)()
    }

    /// Drops the tasks whose TTL has passed (their work is stopped).
    pub(crate) fn expire(&self) {
        let (now, _) = self.now();
        self.purge(now);
    }

    fn purge(&self, now: Instant) {
        lock(&self.running).retain(|_, r| {
            let alive = r.expires.is_none_or(|e| now < e);
            if !alive {
                r.cancel.cancel();
            }
            alive
        });
        lock(&self.memory).retain(|_, (_, _, exp)| exp.is_none_or(|e| now < e));
    }

    /// Task `id`'s record.
    async fn load(&self, voice: &Voice, id: &str) -> Result<Option<Loaded>, Error> {
        let Some(voice) = voice else {
            let (now, _) = self.now();
            self.purge(now);
            return Ok(lock(&self.memory).get(id).map(|(v, s, _)| Loaded {
                version: *v,
                state: s.clone(),
                owner_alive: None,
            }));
        };
        match voice.record(RecordOp::Load { key: key(id) }).await {
            StoreReply::Record(None) => Ok(None),
            StoreReply::Record(Some(r)) => {
                let state = serde_json::from_slice(&r.value)
                    .map_err(|e| Error::internal(format_args!("a malformed task record: {e}")))?;
                Ok(Some(Loaded {
                    version: r.version,
                    state,
                    owner_alive: r.owner_alive,
                }))
            }
            StoreReply::Failed(e) => Err(unavailable(e)),
            other => Err(unavailable(format_args!("unexpected answer {other:?}"))),
        }
    }

    /// Writes task `id`'s record if `guard` holds: `Ok(false)` when it did not (another
    /// writer came first). `owned`: this instance runs the task.
    async fn save(
        &self,
        voice: &Voice,
        id: &str,
        guard: RecordGuard,
        state: &TaskState,
        owned: bool,
    ) -> Result<bool, Error> {
        let Some(voice) = voice else {
            let (now, _) = self.now();
            let mut memory = lock(&self.memory);
            let version = memory.get(id).map(|(v, _, _)| *v);
            return Ok(match (guard, version) {
                (RecordGuard::Absent, None) => {
                    let expires = self.config.ttl.map(|t| now + t);
                    memory.insert(id.to_owned(), (1, state.clone(), expires));
                    true
                }
                (RecordGuard::Version(want), Some(at)) if want == at => {
                    if let Some(slot) = memory.get_mut(id) {
                        slot.0 += 1;
                        slot.1 = state.clone();
                    }
                    true
                }
                _ => false,
            });
        };
        let value = serde_json::to_vec(state).map_err(Error::internal)?;
        let op = RecordOp::Save {
            key: key(id),
            value: value.into(),
            guard,
            owned,
            ttl: self.config.ttl,
        };
        match voice.record(op).await {
            StoreReply::RecordSaved { .. } => Ok(true),
            StoreReply::RecordConflict(_) => Ok(false),
            StoreReply::Failed(e) => Err(unavailable(e)),
            other => Err(unavailable(format_args!("unexpected answer {other:?}"))),
        }
    }

    /// Changes task `id`'s state with `change` (`false`: leave it as it is), by
    /// compare-and-set until it sticks. The state after; `None`: no such task.
    async fn change(
        &self,
        voice: &Voice,
        id: &str,
        mut change: impl FnMut(&mut TaskState) -> bool + Send,
    ) -> Result<Option<TaskState>, Error> {
        for _ in 0..CAS_ATTEMPTS {
            let Some(mut loaded) = self.load(voice, id).await? else {
                return Ok(None);
            };
            if !change(&mut loaded.state) {
                return Ok(Some(loaded.state));
            }
            let guard = RecordGuard::Version(loaded.version);
            if self.save(voice, id, guard, &loaded.state, false).await? {
                return Ok(Some(loaded.state));
            }
        }
        Err(Error::protocol(
            error_codes::INTERNAL_ERROR,
            "the task changed too often at once; retry",
        ))
    }

    /// Records a new `working` task of `principal`, run here: its metadata. `cancel` is the
    /// token its work watches; `poke`, in a cluster, reaches its watcher.
    pub(crate) async fn create(
        &self,
        voice: &Voice,
        principal: Option<&str>,
        cancel: CancellationToken,
        poke: Option<mpsc::UnboundedSender<()>>,
    ) -> Result<Task, Error> {
        let (now, wall) = self.now();
        self.purge(now);
        let kept = match voice {
            None => lock(&self.memory).len(),
            Some(_) => lock(&self.running).len(),
        };
        if kept >= self.config.max_tasks {
            return Err(Error::protocol(
                error_codes::INTERNAL_ERROR,
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
        let wall = wall_ms(wall);
        let state = TaskState {
            status: TaskStatus::Working,
            message: None,
            principal: principal.map(str::to_owned),
            created: wall,
            updated: wall,
            ttl_ms: self.config.ttl.map(millis),
            poll_ms: millis(self.config.poll_interval).max(1),
            inputs: BTreeMap::new(),
            answers: BTreeMap::new(),
            result: None,
            error: None,
        };
        // Running first: a notice that comes before the save returns finds it.
        lock(&self.running).insert(
            id.clone(),
            Running {
                asks: BTreeMap::new(),
                used: BTreeSet::new(),
                cancel,
                expires: self.config.ttl.map(|ttl| now + ttl),
                poke,
            },
        );
        match self
            .save(voice, &id, RecordGuard::Absent, &state, true)
            .await
        {
            Ok(true) => Ok(state.view(&id).task),
            Ok(false) => {
                lock(&self.running).remove(&id);
                Err(Error::internal("a task id was drawn twice"))
            }
            Err(e) => {
                lock(&self.running).remove(&id);
                Err(e)
            }
        }
    }

    /// `tasks/get`: the task as it is now; -32602 when it does not exist for `principal`. A
    /// task whose owner died fails here, once (see the module docs).
    pub(crate) async fn get(
        &self,
        voice: &Voice,
        id: &str,
        principal: Option<&str>,
    ) -> Result<DetailedTask, Error> {
        let loaded = self
            .load(voice, id)
            .await?
            .filter(|l| l.state.principal.as_deref() == principal)
            .ok_or_else(|| not_found(id))?;
        if loaded.state.status.is_terminal() || loaded.owner_alive != Some(false) {
            return Ok(loaded.state.view(id));
        }
        let wall = wall_ms(self.now().1);
        let state = self
            .change(voice, id, |s| {
                s.finish(TaskOutcome::Error(owner_gone()), wall)
            })
            .await?
            .ok_or_else(|| not_found(id))?;
        Ok(state.view(id))
    }

    /// `tasks/update`: the answers to outstanding asks are stored (others are ignored) and
    /// handed to the work when it runs here. `true`: it runs elsewhere, or may (tell the
    /// cluster).
    pub(crate) async fn update(
        &self,
        voice: &Voice,
        id: &str,
        principal: Option<&str>,
        responses: InputResponses,
    ) -> Result<bool, Error> {
        let wall = wall_ms(self.now().1);
        let after = self
            .change(voice, id, |s| {
                s.principal.as_deref() == principal && s.answer(&responses, wall)
            })
            .await?;
        if after.is_none() {
            return Ok(false);
        }
        if lock(&self.running).contains_key(id) {
            self.deliver(voice, id).await?;
            return Ok(false);
        }
        Ok(voice.is_some())
    }

    /// `tasks/cancel`: the task ends `cancelled` unless it already ended, and its work stops
    /// when it runs here. `true`: it runs elsewhere, or may (tell the cluster).
    pub(crate) async fn cancel(
        &self,
        voice: &Voice,
        id: &str,
        principal: Option<&str>,
    ) -> Result<bool, Error> {
        let wall = wall_ms(self.now().1);
        let after = self
            .change(voice, id, |s| {
                let mine = s.principal.as_deref() == principal;
                let cancelled = mine && s.step(TaskEvent::Cancel, wall);
                if cancelled {
                    s.message = Some("Cancelled by the client".into());
                }
                cancelled
            })
            .await?;
        match after {
            Some(s) if s.status.is_terminal() && self.stop(id) => Ok(false),
            Some(_) => Ok(voice.is_some()),
            None => Ok(false),
        }
    }

    /// The work of task `id` asks the client `request` under `key`: the answer arrives on
    /// the receiver. Fails when the task ended or is gone, the key was used before, or too
    /// many asks are outstanding.
    pub(crate) async fn ask(
        &self,
        voice: &Voice,
        id: &str,
        key: String,
        request: InputRequest,
    ) -> Result<oneshot::Receiver<Value>, Error> {
        let (tx, rx) = oneshot::channel();
        {
            let mut running = lock(&self.running);
            let r = running
                .get_mut(id)
                .ok_or_else(|| Error::new("the task has ended (or expired)"))?;
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
            r.asks.insert(key.clone(), tx);
        }
        let wall = wall_ms(self.now().1);
        let after = self
            .change(voice, id, |s| {
                if s.status.is_terminal() {
                    return false;
                }
                s.inputs.insert(key.clone(), request.clone());
                s.step(TaskEvent::Ask, wall)
            })
            .await;
        match after {
            Ok(Some(s)) if s.inputs.contains_key(&key) => Ok(rx),
            Ok(_) => {
                self.stop(id);
                Err(Error::new("the task has ended"))
            }
            Err(e) => {
                if let Some(r) = lock(&self.running).get_mut(id) {
                    r.asks.remove(&key);
                }
                Err(e)
            }
        }
    }

    /// The instance running task `id` reads it again: stored answers go to the parked asks
    /// (and leave the record); a task that ended elsewhere (cancelled, expired) stops here.
    pub(crate) async fn deliver(&self, voice: &Voice, id: &str) -> Result<(), Error> {
        let loaded = self.load(voice, id).await?;
        let Some(loaded) = loaded.filter(|l| !l.state.status.is_terminal()) else {
            self.stop(id);
            return Ok(());
        };
        let left: BTreeSet<String> = {
            let mut running = lock(&self.running);
            let Some(r) = running.get_mut(id) else {
                return Ok(());
            };
            for (key, answer) in &loaded.state.answers {
                if let Some(to) = r.asks.remove(key) {
                    let _ = to.send(answer.clone());
                }
            }
            r.asks.keys().cloned().collect()
        };
        // An answer whose ask is not parked here any more was handed over (or its ask
        // dropped): it leaves the record.
        if loaded.state.answers.keys().any(|k| !left.contains(k)) {
            self.change(voice, id, |s| {
                let before = s.answers.len();
                s.answers.retain(|k, _| left.contains(k));
                s.answers.len() != before
            })
            .await?;
        }
        Ok(())
    }

    /// The work of task `id` ended with `outcome` (dropped if the task already ended); the
    /// task no longer runs here.
    pub(crate) async fn finish(
        &self,
        voice: &Voice,
        id: &str,
        outcome: TaskOutcome,
    ) -> Result<(), Error> {
        let wall = wall_ms(self.now().1);
        let stored = self
            .change(voice, id, |s| s.finish(outcome.clone(), wall))
            .await
            .map(|_| ());
        if stored.is_ok() {
            self.stop(id);
        }
        stored
    }

    /// Task `id` no longer runs here: its work is told to stop, its asks fail. `true` when
    /// it ran here.
    pub(crate) fn stop(&self, id: &str) -> bool {
        let Some(r) = lock(&self.running).remove(id) else {
            return false;
        };
        r.cancel.cancel();
        true
    }

    /// A notice for task `id` (another instance changed it): its watcher reads it again.
    pub(crate) fn wake(&self, id: &str) {
        if let Some(poke) = lock(&self.running).get(id).and_then(|r| r.poke.as_ref()) {
            let _ = poke.unbounded_send(());
        }
    }

    /// Whether task `id` runs here.
    pub(crate) fn runs(&self, id: &str) -> bool {
        lock(&self.running).contains_key(id)
    }

    /// Drops task `id` (one the client never heard of), stopping its work.
    pub(crate) fn forget(&self, id: &str) {
        self.stop(id);
        lock(&self.memory).remove(id);
    }

    /// In a cluster, the watcher of task `id` run here: reads its record again when poked
    /// or every [`TaskConfig::recheck`], until the task no longer runs here. `voice` finds
    /// the store each time (the server's binding may change); `sleep` is the runtime's timer.
    pub(crate) async fn watch(
        self: Arc<Self>,
        id: String,
        voice: impl Fn() -> Voice + Send,
        sleep: impl Fn(Duration) -> BoxFuture<'static, ()> + Send,
        mut pokes: mpsc::UnboundedReceiver<()>,
    ) {
        use futures_core::Stream;
        let mut open = true;
        while self.runs(&id) {
            let mut nap = sleep(self.recheck());
            std::future::poll_fn(|cx| {
                if open {
                    match std::pin::Pin::new(&mut pokes).poll_next(cx) {
                        std::task::Poll::Ready(Some(())) => return std::task::Poll::Ready(()),
                        std::task::Poll::Ready(None) => open = false,
                        std::task::Poll::Pending => {}
                    }
                }
                nap.as_mut().poll(cx)
            })
            .await;
            if !self.runs(&id) {
                break;
            }
            if let Err(e) = self.deliver(&voice(), &id).await {
                tracing::debug!(error = %e, "a task's record could not be read again");
            }
        }
    }

    /// Tasks kept now (without a cluster).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        let (now, _) = self.now();
        self.purge(now);
        lock(&self.memory).len()
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
    use mcp_proto::server::{ClusterDelivery, MemberId, MemoryCluster, StoreOp, Ticket};
    use proptest::prelude::*;
    use std::sync::atomic::{AtomicU64, Ordering};

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

    /// Runs a future that never waits (the in-memory records and the fake store answer at
    /// once).
    fn now<F: std::future::Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("the future waited"),
        }
    }

    /// An input request: an elicitation form asking `message`.
    fn elicit(message: &str) -> InputRequest {
        serde_json::from_value(serde_json::json!({"method": "elicitation/create", "params": {"message": message, "requestedSchema": {"type": "object", "properties": {}}}})).unwrap()
    }

    fn accept(keys: &[&str]) -> InputResponses {
        keys.iter()
            .map(|k| {
                let a = serde_json::json!({"action": "accept", "content": {}});
                ((*k).to_owned(), serde_json::from_value(a).unwrap())
            })
            .collect()
    }

    fn config() -> TaskConfig {
        TaskConfig {
            ttl: Some(Duration::from_secs(10)),
            max_tasks: 2,
            max_inputs: 2,
            ..TaskConfig::default()
        }
    }

    fn tasks() -> Tasks {
        Tasks::new(config())
    }

    /// Work another instance does at a chosen point (a hook of [`FakeVoice`]).
    type Hook = Box<dyn FnOnce() + Send>;

    /// One instance's link to a shared [`MemoryCluster`], as a server's voice: record
    /// operations answered at once; broadcasts kept for the test to deliver. A hook, when
    /// set, runs just before the next save reaches the store (another instance's write
    /// between this one's read and its compare-and-set).
    struct FakeVoice {
        store: Arc<Mutex<MemoryCluster>>,
        member: MemberId,
        tickets: AtomicU64,
        sent: Mutex<Vec<bytes::Bytes>>,
        before_save: Mutex<Option<Hook>>,
    }

    impl ClusterVoice for FakeVoice {
        fn broadcast(&self, notice: bytes::Bytes) {
            lock(&self.sent).push(notice);
        }
        fn record(&self, op: RecordOp) -> BoxFuture<'static, StoreReply> {
            if matches!(op, RecordOp::Save { .. }) {
                let hook = lock(&self.before_save).take();
                if let Some(hook) = hook {
                    hook();
                }
            }
            let ticket = Ticket::from_u64(self.tickets.fetch_add(1, Ordering::Relaxed));
            let mut store = lock(&self.store);
            store.execute(Instant::now(), self.member, ticket, StoreOp::Record(op));
            let reply = store
                .take(self.member)
                .into_iter()
                .find_map(|d| match d {
                    ClusterDelivery::Reply(t, r) if t == ticket => Some(r),
                    _ => None,
                })
                .expect("answered");
            Box::pin(std::future::ready(reply))
        }
    }

    type Instances = Vec<(Arc<Tasks>, Arc<FakeVoice>)>;

    /// Instances of one cluster: each a `Tasks` and its voice.
    fn cluster(n: usize) -> (Arc<Mutex<MemoryCluster>>, Instances) {
        let store = Arc::new(Mutex::new(MemoryCluster::new()));
        let members = (0..n)
            .map(|_| {
                let member = lock(&store).join();
                let voice = Arc::new(FakeVoice {
                    store: store.clone(),
                    member,
                    tickets: AtomicU64::new(1),
                    sent: Mutex::new(Vec::new()),
                    before_save: Mutex::new(None),
                });
                (Arc::new(Tasks::new(config())), voice)
            })
            .collect();
        (store, members)
    }

    fn voice(v: &Arc<FakeVoice>) -> Voice {
        Some(v.clone() as Arc<dyn ClusterVoice>)
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
        let task = now(t.create(&None, Some("alice"), CancellationToken::new(), None)).unwrap();
        let id = task.task_id.as_str();
        assert_eq!(task.status, TaskStatus::Working);
        assert_eq!(task.ttl_ms, Some(10_000));
        let mut a = now(t.ask(&None, id, "a".into(), elicit("a?"))).unwrap();
        let _b = now(t.ask(&None, id, "b".into(), elicit("b?"))).unwrap();
        // A third outstanding ask is over the bound; a key is never reused.
        assert!(now(t.ask(&None, id, "c".into(), elicit("?"))).is_err());
        let got = now(t.get(&None, id, Some("alice"))).unwrap();
        assert_eq!(got.task.status, TaskStatus::InputRequired);
        assert_eq!(got.input_requests.as_ref().map(|m| m.len()), Some(2));
        // Another principal sees no such task.
        let err = now(t.get(&None, id, Some("mallory"))).unwrap_err();
        assert_eq!(err.code(), Some(-32602));
        // A partial answer leaves the other ask outstanding; unknown keys are ignored.
        assert!(!now(t.update(&None, id, Some("alice"), accept(&["a", "zzz"]))).unwrap());
        assert!(matches!(a.try_recv(), Ok(Some(_))));
        let got = now(t.get(&None, id, Some("alice"))).unwrap();
        assert_eq!(got.task.status, TaskStatus::InputRequired);
        assert_eq!(
            got.input_requests.unwrap().keys().collect::<Vec<_>>(),
            ["b"]
        );
        assert!(
            now(t.ask(&None, id, "a".into(), elicit("?"))).is_err(),
            "key reused"
        );
        now(t.update(&None, id, Some("alice"), accept(&["b"]))).unwrap();
        let got = now(t.get(&None, id, Some("alice"))).unwrap();
        assert_eq!(got.task.status, TaskStatus::Working);
        let outcome = TaskOutcome::of_tool(Ok(CallToolResult::text("done")));
        now(t.finish(&None, id, outcome)).unwrap();
        let got = now(t.get(&None, id, Some("alice"))).unwrap();
        assert_eq!(got.task.status, TaskStatus::Completed);
        assert_eq!(got.result.unwrap()["content"][0]["text"], "done");
        assert!(got.input_requests.is_none() && got.error.is_none());
        // A cancel after the end changes nothing.
        now(t.cancel(&None, id, Some("alice"))).unwrap();
        let got = now(t.get(&None, id, Some("alice"))).unwrap();
        assert_eq!(got.task.status, TaskStatus::Completed);
    }

    #[test]
    fn cancel_ends_a_task_its_work_cannot_revive_and_its_asks_fail() {
        let t = tasks();
        let token = CancellationToken::new();
        let id = now(t.create(&None, None, token.clone(), None))
            .unwrap()
            .task_id;
        let mut ask = now(t.ask(&None, &id, "k".into(), elicit("?"))).unwrap();
        now(t.cancel(&None, &id, None)).unwrap();
        assert!(token.is_cancelled());
        assert!(ask.try_recv().is_err(), "the parked ask fails");
        let late = TaskOutcome::of_tool(Ok(CallToolResult::text("late")));
        now(t.finish(&None, &id, late)).unwrap();
        let got = now(t.get(&None, &id, None)).unwrap();
        assert_eq!(got.task.status, TaskStatus::Cancelled);
        assert!(got.result.is_none());
    }

    #[test]
    fn a_protocol_error_fails_the_task_a_tool_error_completes_it() {
        let t = tasks();
        let mut ids = Vec::new();
        for _ in 0..2 {
            let task = now(t.create(&None, None, CancellationToken::new(), None)).unwrap();
            ids.push(task.task_id);
        }
        let boom = TaskOutcome::of_tool(Err(Error::internal("boom")));
        now(t.finish(&None, &ids[0], boom)).unwrap();
        let no = TaskOutcome::of_tool(Err(Error::new("tool says no")));
        now(t.finish(&None, &ids[1], no)).unwrap();
        let a = now(t.get(&None, &ids[0], None)).unwrap();
        assert_eq!(a.task.status, TaskStatus::Failed);
        assert_eq!(a.error.unwrap().code, -32603);
        assert!(a.result.is_none());
        let b = now(t.get(&None, &ids[1], None)).unwrap();
        assert_eq!(b.task.status, TaskStatus::Completed);
        assert_eq!(b.result.unwrap()["isError"], true);
    }

    #[test]
    fn tasks_are_bounded_and_expire_with_their_ttl() {
        let start = Instant::now();
        let clock = Arc::new(Mutex::new(start));
        let read = clock.clone();
        let t = Tasks::new(TaskConfig {
            clock: Arc::new(move || (*lock(&read), SystemTime::now())),
            ..config()
        });
        let token = CancellationToken::new();
        let id = now(t.create(&None, None, token.clone(), None))
            .unwrap()
            .task_id;
        now(t.create(&None, None, CancellationToken::new(), None)).unwrap();
        assert!(
            now(t.create(&None, None, CancellationToken::new(), None)).is_err(),
            "over max_tasks"
        );
        *lock(&clock) = start + Duration::from_secs(9);
        assert!(now(t.get(&None, &id, None)).is_ok());
        *lock(&clock) = start + Duration::from_secs(10);
        let err = now(t.get(&None, &id, None)).unwrap_err();
        assert_eq!(err.code(), Some(-32602));
        assert!(
            token.is_cancelled(),
            "an expired task's work is told to stop"
        );
        assert_eq!(t.len(), 0);
        assert!(now(t.create(&None, None, CancellationToken::new(), None)).is_ok());
    }

    #[test]
    fn a_task_run_on_one_instance_is_read_answered_and_cancelled_on_the_others() {
        let (_store, members) = cluster(3);
        let [(a, va), (b, vb), (c, vc)] = &members[..] else {
            unreachable!()
        };
        let (va, vb, vc) = (voice(va), voice(vb), voice(vc));
        let token = CancellationToken::new();
        let (poke, mut pokes) = mpsc::unbounded();
        let id = now(a.create(&va, Some("alice"), token.clone(), Some(poke)))
            .unwrap()
            .task_id;
        // B and C read it; another principal does not.
        let got = now(b.get(&vb, &id, Some("alice"))).unwrap();
        assert_eq!(got.task.status, TaskStatus::Working);
        assert!(now(c.get(&vc, &id, Some("mallory"))).is_err());
        // A's work asks; B lists the ask and takes the answer; A delivers it when told.
        let mut ask = now(a.ask(&va, &id, "k".into(), elicit("sure?"))).unwrap();
        let got = now(c.get(&vc, &id, Some("alice"))).unwrap();
        assert_eq!(got.task.status, TaskStatus::InputRequired);
        assert_eq!(got.input_requests.unwrap().len(), 1);
        let tell = now(b.update(&vb, &id, Some("alice"), accept(&["k"]))).unwrap();
        assert!(tell, "B does not run it: the owner must be told");
        assert_eq!(
            now(b.get(&vb, &id, Some("alice"))).unwrap().task.status,
            TaskStatus::Working
        );
        assert!(
            matches!(ask.try_recv(), Ok(None)),
            "not delivered before A reads"
        );
        a.wake(&id);
        assert!(pokes.try_recv().is_ok(), "the watcher is poked");
        now(a.deliver(&va, &id)).unwrap();
        assert!(
            matches!(ask.try_recv(), Ok(Some(_))),
            "delivered once A reads"
        );
        // The answer left the record once handed over.
        let stored = now(a.load(&va, &id)).unwrap().unwrap();
        assert!(stored.state.answers.is_empty() && stored.state.inputs.is_empty());
        // C cancels; A stops the work when it reads; A's late result changes nothing.
        assert!(now(c.cancel(&vc, &id, Some("alice"))).unwrap());
        assert!(!token.is_cancelled());
        now(a.deliver(&va, &id)).unwrap();
        assert!(token.is_cancelled() && !a.runs(&id));
        let late = TaskOutcome::of_tool(Ok(CallToolResult::text("late")));
        now(a.finish(&va, &id, late)).unwrap();
        for (t, v) in [(a, &va), (b, &vb), (c, &vc)] {
            let got = now(t.get(v, &id, Some("alice"))).unwrap();
            assert_eq!(got.task.status, TaskStatus::Cancelled);
            assert!(got.result.is_none());
        }
    }

    #[test]
    fn the_owner_reads_its_task_again_on_its_recheck_when_the_notice_is_lost() {
        let (_store, members) = cluster(2);
        let [(a, va), (b, vb)] = &members[..] else {
            unreachable!()
        };
        let (va, vb) = (voice(va), voice(vb));
        let (poke, pokes) = mpsc::unbounded();
        let id = now(a.create(&va, None, CancellationToken::new(), Some(poke)))
            .unwrap()
            .task_id;
        let mut ask = now(a.ask(&va, &id, "k".into(), elicit("?"))).unwrap();
        // B takes the answer; its notice to A is lost (A is never woken).
        now(b.update(&vb, &id, None, accept(&["k"]))).unwrap();
        // The watcher's timer: the first nap ends, the next ones never do.
        let naps = Arc::new(AtomicU64::new(0));
        let counted = naps.clone();
        let sleep = move |_| -> BoxFuture<'static, ()> {
            if counted.fetch_add(1, Ordering::Relaxed) == 0 {
                Box::pin(std::future::ready(()))
            } else {
                Box::pin(std::future::pending())
            }
        };
        let reader = va.clone();
        let watcher = a
            .clone()
            .watch(id.clone(), move || reader.clone(), sleep, pokes);
        let mut watcher = std::pin::pin!(watcher);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(
            matches!(ask.try_recv(), Ok(None)),
            "nothing before the recheck"
        );
        assert!(watcher.as_mut().poll(&mut cx).is_pending(), "it watches on");
        assert_eq!(
            naps.load(Ordering::Relaxed),
            2,
            "one recheck, then the next nap"
        );
        assert!(
            matches!(ask.try_recv(), Ok(Some(_))),
            "delivered by the recheck"
        );
        // The task ends: the watcher stops at its next turn.
        a.stop(&id);
        assert!(!a.runs(&id));
    }

    #[test]
    fn a_task_whose_instance_died_fails_once_whoever_polls() {
        let (store, members) = cluster(3);
        let [(a, va), (b, vb), (c, vc)] = &members[..] else {
            unreachable!()
        };
        let member_a = va.member;
        let (va, vb, vc) = (voice(va), voice(vb), voice(vc));
        let id = now(a.create(&va, None, CancellationToken::new(), None))
            .unwrap()
            .task_id;
        let done = now(a.create(&va, None, CancellationToken::new(), None))
            .unwrap()
            .task_id;
        let ok = TaskOutcome::of_tool(Ok(CallToolResult::text("ok")));
        now(a.finish(&va, &done, ok)).unwrap();
        assert_eq!(
            now(b.get(&vb, &id, None)).unwrap().task.status,
            TaskStatus::Working
        );
        lock(&store).leave(member_a);
        let first = now(b.get(&vb, &id, None)).unwrap();
        assert_eq!(first.task.status, TaskStatus::Failed);
        let error = first.error.clone().unwrap();
        assert_eq!(error.code, -32603);
        assert!(error.message.contains("stopped"), "{error:?}");
        let version = now(b.load(&vb, &id)).unwrap().unwrap().version;
        // Another poll, on another instance: the same failure, not written again.
        let second = now(c.get(&vc, &id, None)).unwrap();
        assert_eq!(second, first);
        assert_eq!(now(c.load(&vc, &id)).unwrap().unwrap().version, version);
        // A task that had finished keeps its result.
        let kept = now(c.get(&vc, &done, None)).unwrap();
        assert_eq!(kept.task.status, TaskStatus::Completed);
    }

    #[test]
    fn the_store_away_is_an_error_not_a_hang_and_nothing_is_kept() {
        let (store, members) = cluster(1);
        let (a, va) = &members[0];
        let va = voice(va);
        lock(&store).set_available(false);
        let token = CancellationToken::new();
        let err = now(a.create(&va, None, token, None)).unwrap_err();
        assert_eq!(err.code(), Some(-32603));
        assert!(err.to_string().contains("unavailable"), "{err}");
        assert_eq!(lock(&a.running).len(), 0);
        assert_eq!(now(a.get(&va, "x", None)).unwrap_err().code(), Some(-32603));
    }

    proptest! {
        /// Any sequence of events: the status only moves along the table, a terminal status
        /// never changes, and a task gets at most one outcome (result xor error).
        #[test]
        fn the_lifecycle_stays_in_the_table(events in proptest::collection::vec(0..6u8, 0..40)) {
            let t = tasks();
            let id = now(t.create(&None, None, CancellationToken::new(), None)).unwrap().task_id;
            let mut keys = 0;
            let mut last = TaskStatus::Working;
            for e in events {
                match e {
                    0 => { keys += 1; let _ = now(t.ask(&None, &id, format!("k{keys}"), elicit("?"))); }
                    1 => { let all: Vec<String> = (1..=keys).map(|k| format!("k{k}")).collect(); let all: Vec<&str> = all.iter().map(String::as_str).collect(); now(t.update(&None, &id, None, accept(&all))).unwrap(); }
                    2 => now(t.finish(&None, &id, TaskOutcome::of_tool(Ok(CallToolResult::text("r"))))).unwrap(),
                    3 => now(t.finish(&None, &id, TaskOutcome::of_tool(Err(Error::internal("e"))))).unwrap(),
                    4 => { now(t.cancel(&None, &id, None)).unwrap(); }
                    _ => {}
                }
                let got = now(t.get(&None, &id, None)).unwrap();
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

        /// Two instances writing one task at once: B's write (an answer, a cancellation)
        /// lands between A's read and A's compare-and-set, at any step. No write is lost:
        /// the status still moves only along the table, and the first ending is the only one.
        #[test]
        fn concurrent_writers_never_lose_a_write_or_report_two_endings(
            order in proptest::collection::vec((0..3u8, proptest::option::of(0..2u8)), 1..24)
        ) {
            let (_store, members) = cluster(2);
            let [(a, va), (b, vb)] = &members[..] else { unreachable!() };
            let fake_a = va.clone();
            let (va, vb) = (voice(va), voice(vb));
            let id = now(a.create(&va, None, CancellationToken::new(), None)).unwrap().task_id;
            let mut last = TaskStatus::Working;
            // What B's interjected write left, as B read it right after.
            let seen: Arc<Mutex<Option<TaskStatus>>> = Arc::default();
            for (n, (op, interject)) in order.into_iter().enumerate() {
                if let Some(other) = interject {
                    let (b, vb, id, seen) = (b.clone(), vb.clone(), id.clone(), seen.clone());
                    let hook: Hook = Box::new(move || {
                        if other == 0 {
                            let keys: Vec<String> = (0..=n).map(|k| format!("k{k}")).collect();
                            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                            now(b.update(&vb, &id, None, accept(&keys))).unwrap();
                        } else {
                            now(b.cancel(&vb, &id, None)).unwrap();
                        }
                        *lock(&seen) = Some(now(b.get(&vb, &id, None)).unwrap().task.status);
                    });
                    *lock(&fake_a.before_save) = Some(hook);
                }
                match op {
                    0 => { let _ = now(a.ask(&va, &id, format!("k{n}"), elicit("?"))); }
                    1 => { let _ = now(a.deliver(&va, &id)); }
                    _ => { let _ = now(a.finish(&va, &id, TaskOutcome::of_tool(Ok(CallToolResult::text("r"))))); }
                }
                *lock(&fake_a.before_save) = None;
                let got = now(b.get(&vb, &id, None)).unwrap();
                let between = lock(&seen).take();
                for s in between.into_iter().chain([got.task.status]) {
                    prop_assert!(s == last || EVENTS.iter().any(|&ev| next(last, ev) == Some(s)), "{last:?} -> {s:?}");
                    if last.is_terminal() { prop_assert_eq!(s, last); }
                    last = s;
                }
                prop_assert_eq!(got.result.is_some(), got.task.status == TaskStatus::Completed);
            }
        }
    }
}
