//! Many routers, one service: the **cluster seam** ([`ServerConfig::with_cluster`]).
//!
//! # Theory of operation
//!
//! Without a cluster (the default) a router is the whole truth about its sessions. With one,
//! several routers — one per server instance, behind a load balancer that is not sticky —
//! share a **store** (Redis in production, [`MemoryCluster`] in tests) and a **bus** (the
//! store's publish/subscribe). The router still never waits: it asks the store through
//! [`ServerOutput::Store`] (a [`StoreOp`] with a [`Ticket`]), the driver executes the
//! operation, and the answer comes back through [`Router::handle_store`]; what other
//! instances broadcast comes in through [`Router::handle_bus`]. Everything the router does
//! while an answer is outstanding is explicit state below, and every call has a deadline
//! ([`ClusterConfig::store_timeout`]): the store being slow or gone is answered 503 with a
//! JSON-RPC error saying so, never a hang.
//!
//! What is shared, and how:
//!
//! - **Sessions.** A session is a [`SessionRecord`] in the store (id, principal, negotiated
//!   revision, the service's own state as opaque bytes). An instance holds a *cached copy*
//!   of the sessions it serves. A request naming a session this instance does not hold is
//!   *parked*: its head (and body, as it arrives) waits while the record is loaded
//!   ([`StoreOp::Load`]); then the session is adopted and the request runs exactly as if the
//!   session had been created here. `initialize` creates the record when the app answers
//!   ([`StoreOp::Create`], which also enforces [`ServerLimits::max_sessions`] across the
//!   cluster), and the answer carrying `Mcp-Session-Id` leaves only once the record is
//!   stored. Changes to the service's state ([`Router::set_session_state`]) are written
//!   ([`StoreOp::Save`]) before any later answer of that session leaves this instance.
//! - **Idle time and deletion.** The store expires a record after the idle TTL; activity
//!   renews it ([`StoreOp::Touch`], at most once per [`ClusterConfig::touch_interval`] per
//!   session), and an instance keeping a stream open renews it on that interval. An
//!   instance forgets its cached copy of a session idle here for the TTL
//!   ([`ServerOutput::SessionUnloaded`]: the session lives on elsewhere). `DELETE` removes
//!   the record and tells every instance on the bus ([`BusMessage::SessionDeleted`]); it is
//!   answered 200 once the store has removed it.
//! - **The GET stream.** A session's messages that belong to no request go to its *listen
//!   log* in the store ([`StoreOp::Publish`]), which numbers them; whichever instance holds
//!   the session's GET stream follows that log ([`StoreOp::Follow`]) and writes what it
//!   reads, in log order, with event ids `l-<seq>`. So a handler on B reaches the client on
//!   C's GET stream, every message is stored before any client sees it, and a GET with
//!   `Last-Event-ID: l-<seq>` resumes on any instance. A GET opened on one instance ends the
//!   one another instance held ([`BusMessage::ListenTaken`]).
//! - **Server→client requests** carry ids `"<instance>.<n>"`; a response POSTed to another
//!   instance is forwarded to the one waiting ([`BusMessage::ClientResponse`]).
//!   `notifications/cancelled` for a request not running here is broadcast
//!   ([`BusMessage::Cancel`]) to the instance running it.
//! - **Request streams** (a POST's SSE answer) are run by the instance that runs the
//!   request, and stored as they go ([`StoreOp::CommitStreams`]): every event is committed
//!   before any client sees it, the stream registered with its first events and the end
//!   recorded with its last. A session's writes of one turn (from one poll of the outputs to
//!   the next), over all its streams, are one commit: the progress a handler reports and its
//!   result, written together, and the session's other calls' events of that turn, are one
//!   store operation. Event ids are `"<instance>.<n>-<seq>"`; a `Last-Event-ID` of
//!   another instance's stream is served by following the stored stream
//!   ([`StoreOp::FollowStream`]): the events after it, then the rest as the owner appends
//!   them. When the owner is gone ([`StreamEnd::OwnerGone`]), the follower answers the
//!   requests it left unanswered with `-32603`, so the client does not wait forever.
//! - **Change notices for listen streams** (2026-07-28 `subscriptions/listen`, which has
//!   no session: its stream is a request stream of the instance it landed on). A change the
//!   service makes on one instance (a list changed, a resource updated) is told to that
//!   instance's listen streams directly and broadcast once to the others
//!   ([`Router::broadcast_notice`], [`BusMessage::Notice`]: an opaque payload with the
//!   sender's name, nothing stored); each other instance outputs it
//!   ([`ServerOutput::ClusterNotice`]) and its service tells its own listen streams, each
//!   with its own subscription id and only if its filter asked for it. What is shared is
//!   the *notice*, not the registry: a tool added on B is in B's registry only, so a client
//!   that re-lists through another instance sees that instance's list. Sessions of the 2025
//!   revisions hear of the same changes through their GET stream: every instance that
//!   knows the change (its origin, and each one the notice reaches) hands it to the
//!   sessions it holds, and only the one holding a session's GET stream
//!   ([`Router::holds_listen_stream`]) writes it to the session's listen log, so the session
//!   gets it once wherever the change was made. A session with no GET stream open
//!   anywhere is not told (the 2025 revisions let a server drop what it cannot deliver).
//!
//! - **Service records** ([`RecordOp`], [`Router::record_op`]): the service's own data that
//!   every instance reads and writes (a task's state), opaque to the router: versioned bytes
//!   under a key, written by compare-and-set ([`RecordGuard`]), with an optional owner (the
//!   instance that runs what the record describes) whose liveness the store reports
//!   ([`ServiceRecord::owner_alive`], by the same liveness as request streams'). The answer
//!   goes to the service ([`ServerOutput::RecordAnswer`]), under the store timeout.
//!
//! # Consistency model
//!
//! - *Read-your-writes for sessions.* Once a client has the answer to `initialize`, every
//!   instance finds the session; once it has the answer to a request that changed the
//!   session's state, every instance *loading* the session sees the change. An instance
//!   that already holds a copy is told on the bus ([`BusMessage::SessionSaved`]) and loads
//!   it again: it sees the change one bus delivery and one load later (eventually
//!   consistent), so a request racing that refresh may still see the old state.
//! - *Deletion* is immediate where the bus reaches: an instance holding a copy ends it when
//!   the bus tells it; an instance that lost the bus drops every cached copy that is not in
//!   use and loads again on the next request ([`Router::handle_bus_lost`]).
//! - *The GET stream* is exactly-once with `Last-Event-ID` on any instance (the log is the
//!   only path to a client, in order, deduplicated by sequence number). A plain GET starts
//!   after the last event this session's previous GET is known to have written (the log's
//!   cursor, updated after each write). That is neither at least once nor at most once:
//!   after an instance crash a client resuming without `Last-Event-ID` may see its last
//!   events again, and events written into a connection that was cut before they reached
//!   the client are not sent again (a plain GET cannot say what arrived). A client that
//!   holds any event id of the stream resumes exactly once with it; on a revision that
//!   allows priming, each stream opens with an event that carries one, so only a client cut
//!   before that event reached it reconnects without one. A message whose append to the
//!   log fails (the store unreachable past what its backend holds and retries, or past the
//!   store timeout here) is lost, and the client is told: the next entry of the log carries
//!   the gap ([`LogEvent::gap`]), and its follower writes an `events-lost` event before it.
//!   The instance that lost the message appends that entry at once (a marker alone), or,
//!   should that fail too, with the session's next message from it. A publish answered
//!   `Failed` that did reach the store (its answer lost) marks a gap where none is: the
//!   client may be told of a loss it did not have, never not told of one.
//! - *Service records* are linearizable per key (one store; a save applies only from the
//!   version it names, so concurrent writers never lose a write). An owner's death is seen
//!   by every instance after the store's owner-liveness delay.
//! - *Idle expiry* is global and approximate to one touch interval.
//! - *Listen-stream notices* are exactly once per listen stream while the bus is up: the
//!   instance that made the change tells its own streams itself and the bus brings it once
//!   to every other instance (never back to the sender: the backend delivers only other
//!   routers' messages, and a router drops its own should one be echoed). Across instances
//!   they are at most once: the bus keeps nothing, so a notice broadcast while the store is
//!   unreachable, or while an instance's bus subscription is broken, is lost for the
//!   listeners there: nothing replays it, and the listener is not told that it missed one.
//!   Notices of one instance arrive in the order it sent them; notices of different
//!   instances are not ordered with each other.
//! - *When an instance dies*, its requests in flight die with it: a client resuming their
//!   request streams elsewhere gets every event that was committed, once, then a `-32603`
//!   error for each request left unanswered (after the store's owner-liveness delay); a
//!   request that had committed nothing fails on its client as interrupted (or a load
//!   balancer's 502). Sessions, their GET streams and everything published live on; a
//!   restarted instance takes a new incarnation (the driver adds it to the name), so no id
//!   of its previous life is minted again.
//!
//! # The seam's own state
//!
//! [`ClusterState`] owns what the router waits on: the store calls by [`Ticket`], the parked
//! requests, and which session loads they wait for. A store call is registered by
//! `ClusterState::call` (the router then outputs its [`StoreOp`]) and leaves through
//! `ClusterState::answered` (its answer, or its deadline firing as a `Failed` answer);
//! the table below is those two functions, row for row. The deadlines of the waiting calls
//! are one line in the order the calls were made (each is its call's time plus the one
//! store timeout), with one timer for its first: a call made or answered while others wait
//! costs no operation on the router's timer set.
//!
//! ```text
//!  call                          registered as               answer / deadline   then
//!  ----------------------------  --------------------------  ------------------  ---------------
//!  Detached (touch, broadcast,   not kept                    ignored             -
//!   cursor, a stream's end
//!   alone)
//!  Load, Create, Save, Refresh,  Waiting, its deadline       answer              gone (its deadline
//!   Delete, Commit, Record,       (store_timeout) in line                        leaves the line); run
//!   Publish                                                  deadline            answered Failed
//!  Follow, FollowStream          Following, no deadline      answer              kept: a follow's
//!                                                                                answers continue
//!                                                                                until unfollowed
//! ```
//!
//! A request stream's writes are not calls yet when they are made: they gather in
//! `ClusterState::commits`, one entry per session, until the router's outputs are next
//! polled; `Router::flush_commits` then makes each entry one `Commit` call (or, for ends
//! alone, a detached one).
//!
//! # The parked request
//!
//! A request waiting for its session's record changes state only through
//! [`Parked::on`]; the table is that match, row for row.
//!
//! ```text
//!  state    event                  next     effect
//!  -------  ---------------------  -------  --------------------------------------------
//!  Loading  Body (under the cap)   Loading  chunk kept
//!  Loading  Body (over the cap)    gone     413
//!  Loading  BodyEnd                Loading  remembered
//!  Loading  Loaded                 gone     session adopted; the request runs
//!  Loading  Missing                gone     the request runs and finds no session: 404
//!  Loading  Failed / Timeout       gone     503, the store is unavailable
//!  Loading  Disconnect             gone     forgotten
//! ```

use crate::HandleMap;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Uri};

use super::error::{CancelReason, CloseReason, ProtocolError};
use super::names::EventRef;
use super::session::{Session, SessionEvent};
use super::stream::{Phase, StreamKind, event_frame, events_lost_frame};
use super::timer::{Timer, TimerQueue};
use super::{
    AuthDecision, ExchangeId, RequestHandle, RequestHead, Router, ServerOutput, SessionHandle,
};
use crate::ProtocolVersion;
use crate::jsonrpc::{Outcome, RequestId, Response};

/// A router's place in a cluster.
#[derive(Clone)]
#[non_exhaustive]
pub struct ClusterConfig {
    /// This instance's name, unique among the instances sharing the store: 1 to 32 ASCII
    /// letters and digits (it is part of event ids and request ids). Two live instances must
    /// never share it. The runtime driver appends eight random letters and digits when it
    /// starts the router, so that a restarted instance (same name) never mints an id of its
    /// previous life; a router driven by hand takes the name as it is.
    pub instance: Box<str>,
    /// How long the router waits for the store before answering 503. Default 5 s.
    pub store_timeout: Duration,
    /// A live session's record is renewed at most this often by one instance. Default: a
    /// quarter of [`ServerConfig::session_idle_ttl`](super::ServerConfig), else 60 s.
    pub touch_interval: Option<Duration>,
    /// Messages kept in a session's listen log for `Last-Event-ID`. Default 1,024.
    pub listen_log_capacity: usize,
    /// Store operations this instance may wait on at once (loads, creations, saves, a
    /// request stream's events being committed, deletions, record operations; not the live
    /// follows, nor the operations nothing waits for) before it pushes back: while it waits
    /// on this many, a new `POST` or `GET` on the MCP endpoint is refused before it is
    /// processed with 503, `Retry-After` ([`backlog_retry_after`](Self::backlog_retry_after))
    /// and a JSON-RPC error, instead of piling more work on a store that is behind (whose
    /// operations would then miss [`store_timeout`](Self::store_timeout) half-way through a
    /// request). `DELETE` is never refused for it. New requests are pushed back the same
    /// way while the store backend says its own queue runs high
    /// ([`Router::handle_store_pressure`]: the Redis backend's queue also holds operations
    /// nothing waits for, and those the router stopped waiting for). Default 16,384: half
    /// the Redis link's own bound (`RedisConfig::max_queued`, 32,768 operations), so that
    /// the router pushes back before that link refuses. Measured with 10,000 streaming
    /// calls at once on one core with Redis, 4,096 pushed back 6,800–26,700 of 30,000 (each
    /// a second exchange: 9–17 % more server CPU per call, and a p99 of 6–14 s); 16,384
    /// pushed back none, with the p99 under 5.4 s.
    pub max_store_backlog: usize,
    /// The `Retry-After` of a request refused for [`max_store_backlog`](Self::max_store_backlog).
    /// Default 1 s.
    pub backlog_retry_after: Duration,
    /// Events one store operation commits at most ([`StoreOp::CommitStreams`]: a session's
    /// request-stream writes of one turn). A session that writes more in one turn has them
    /// committed by several operations, in order, so that no single one holds the store
    /// (a Redis script runs alone) for long. Default 256.
    pub max_commit_events: usize,
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("instance", &self.instance)
            .field("store_timeout", &self.store_timeout)
            .field("touch_interval", &self.touch_interval)
            .field("listen_log_capacity", &self.listen_log_capacity)
            .field("max_store_backlog", &self.max_store_backlog)
            .field("backlog_retry_after", &self.backlog_retry_after)
            .field("max_commit_events", &self.max_commit_events)
            .finish()
    }
}

impl ClusterConfig {
    /// A cluster member named `instance` (see [`ClusterConfig::instance`]). Refuses a name
    /// that is empty, longer than 32 bytes, or not ASCII letters and digits.
    pub fn new(instance: impl Into<Box<str>>) -> Result<ClusterConfig, InvalidInstanceName> {
        let instance = instance.into();
        let ok = !instance.is_empty()
            && instance.len() <= 32
            && instance.bytes().all(|b| b.is_ascii_alphanumeric());
        if !ok {
            return Err(InvalidInstanceName(instance));
        }
        Ok(ClusterConfig {
            instance,
            store_timeout: Duration::from_secs(5),
            touch_interval: None,
            listen_log_capacity: 1024,
            max_store_backlog: 16_384,
            backlog_retry_after: Duration::from_secs(1),
            max_commit_events: 256,
        })
    }

    /// Sets [`max_commit_events`](Self::max_commit_events) (at least 1).
    pub fn with_max_commit_events(mut self, events: usize) -> Self {
        self.max_commit_events = events.max(1);
        self
    }

    /// Sets [`max_store_backlog`](Self::max_store_backlog) (at least 1) and
    /// [`backlog_retry_after`](Self::backlog_retry_after).
    pub fn with_store_backlog(mut self, max: usize, retry_after: Duration) -> Self {
        self.max_store_backlog = max.max(1);
        self.backlog_retry_after = retry_after;
        self
    }

    /// Sets [`store_timeout`](Self::store_timeout).
    pub fn with_store_timeout(mut self, timeout: Duration) -> Self {
        self.store_timeout = timeout;
        self
    }

    /// Sets [`touch_interval`](Self::touch_interval).
    pub fn with_touch_interval(mut self, every: Duration) -> Self {
        self.touch_interval = Some(every);
        self
    }

    /// Sets [`listen_log_capacity`](Self::listen_log_capacity) (at least 1).
    pub fn with_listen_log_capacity(mut self, events: usize) -> Self {
        self.listen_log_capacity = events.max(1);
        self
    }
}

/// A cluster instance name that is not 1 to 32 ASCII letters and digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cluster instance name {0:?}: use 1 to 32 ASCII letters and digits")]
pub struct InvalidInstanceName(pub Box<str>);

/// Names one store operation; its answer comes back with it ([`Router::handle_store`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(pub(crate) u64);

impl Ticket {
    /// The raw number (for logs and maps).
    pub fn as_u64(self) -> u64 {
        self.0
    }

    /// A ticket numbered `n`: routers number their own; this is for a backend's tests (which
    /// submit operations without a router) and drivers of one's own.
    pub fn from_u64(n: u64) -> Ticket {
        Ticket(n)
    }
}

/// A session as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    /// The `Mcp-Session-Id`.
    pub id: Box<str>,
    /// The principal the session is bound to.
    pub principal: Option<Box<str>>,
    /// The negotiated revision.
    pub version: ProtocolVersion,
    /// The service's state of the session (opaque to the router; see
    /// [`Router::set_session_state`]).
    pub state: Option<Bytes>,
}

/// One message of a listen log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEvent {
    /// Its number in the log (from 1, increasing, never reused).
    pub seq: u64,
    /// The JSON-RPC message; empty in a gap's marker alone (`gap` set).
    pub payload: Bytes,
    /// Messages meant for the log before this entry were lost (their appends failed past
    /// the store's retries): the follower tells its client with an `events-lost` event
    /// before this entry's message ([`StoreOp::Publish`]'s `gap`). Always `false` in a
    /// request stream.
    pub gap: bool,
}

/// One request stream's writes in a [`StoreOp::CommitStreams`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamCommit {
    /// The stream's name (`<instance>.<n>`, the part of its event ids before `-`).
    pub stream: Box<str>,
    /// Registers the stream (replacing a stream of the name) with the client's ids of the
    /// requests it owes an answer: a resuming instance writes their answers as errors should
    /// this instance die first.
    pub open: Option<Vec<RequestId>>,
    /// The events, in order (their sequence numbers from 1, consecutive over the stream's
    /// commits). An event at or below one already stored is not stored again.
    pub events: Vec<CommitEvent>,
    /// The stream wrote its last event: keep it this long for resumes.
    pub end: Option<Duration>,
}

/// One event of a [`StreamCommit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitEvent {
    /// Its number in its stream (from 1, consecutive).
    pub seq: u64,
    /// The JSON-RPC message.
    pub payload: Bytes,
    /// The client's request this event answers, if it does.
    pub answers: Option<RequestId>,
}

/// Where a [`StoreOp::Follow`] starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowFrom {
    /// After this sequence number (a `Last-Event-ID`).
    After(u64),
    /// After the log's cursor: the last event a GET stream of the session is known to have
    /// written ([`StoreOp::Delivered`]).
    Cursor,
}

/// What the router asks of the store. Operations of one session must be applied in the
/// order they are emitted; answers may come back in any order.
///
/// Exhaustive on purpose: a backend must apply every operation, so a new one is a change
/// every backend's `match` has to see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreOp {
    /// The record of a session: [`StoreReply::Session`].
    Load {
        /// The session id.
        session: Box<str>,
    },
    /// Stores a new record unless `max_sessions` live records exist: [`StoreReply::Created`]
    /// or [`StoreReply::AtCapacity`]. `ttl` is the idle expiry.
    Create {
        /// The record.
        record: SessionRecord,
        /// The cluster-wide session cap.
        max_sessions: usize,
        /// Expire the record after this long without a touch (`None`: never).
        ttl: Option<Duration>,
    },
    /// Replaces a record that exists (renewing its expiry), then publishes
    /// [`BusMessage::SessionSaved`]: [`StoreReply::Done`], or [`StoreReply::Session`]`(None)`
    /// when it is gone.
    Save {
        /// The record.
        record: SessionRecord,
        /// The idle expiry.
        ttl: Option<Duration>,
    },
    /// Renews a record's expiry: [`StoreReply::Done`] (answer ignored).
    Touch {
        /// The session id.
        session: Box<str>,
        /// The idle expiry.
        ttl: Option<Duration>,
    },
    /// Removes a record and its listen log, then publishes
    /// [`BusMessage::SessionDeleted`]: [`StoreReply::Done`].
    Delete {
        /// The session id.
        session: Box<str>,
    },
    /// Appends a message to a session's listen log (keeping at most `capacity`), wakes its
    /// followers: [`StoreReply::Published`].
    Publish {
        /// The session id.
        session: Box<str>,
        /// The message; empty with `gap`: the gap's marker alone.
        payload: Bytes,
        /// The log's capacity.
        capacity: usize,
        /// An earlier message of this session for the log was lost (its publish was
        /// answered `Failed`): the entry carries [`LogEvent::gap`], so that the client is
        /// told.
        gap: bool,
    },
    /// Follows a session's listen log: answers [`StoreReply::Events`] now (possibly empty)
    /// and again whenever events are appended, until [`StoreOp::Unfollow`]. Every answer
    /// continues where the previous one ended, so nothing is skipped or repeated.
    Follow {
        /// The session id.
        session: Box<str>,
        /// Where to start.
        from: FollowFrom,
    },
    /// Ends a [`StoreOp::Follow`] (no answer).
    Unfollow {
        /// The ticket of the follow.
        follow: Ticket,
    },
    /// Moves the listen log's cursor forward to `seq` (no answer needed).
    Delivered {
        /// The session id.
        session: Box<str>,
        /// The last event written to a client.
        seq: u64,
    },
    /// Commits request streams' writes before any client sees them: for each stream, in
    /// this order, its registration (with its first commit), its events, and its end.
    /// [`StoreReply::Done`]. The router sends one per session and turn (the writes since its
    /// outputs were last polled): the events a handler writes together, and those of the
    /// session's other streams written in the same turn, cost one store operation.
    CommitStreams {
        /// The session id.
        session: Box<str>,
        /// Each stream's writes (one entry per stream).
        streams: Vec<StreamCommit>,
    },
    /// Follows a request stream (another instance's, resumed here): answers
    /// [`StoreReply::StreamEvents`] now and whenever it grows or ends, each answer continuing
    /// the previous one, until it ends or [`StoreOp::Unfollow`].
    FollowStream {
        /// The session id.
        session: Box<str>,
        /// The stream's name.
        stream: Box<str>,
        /// The client's `Last-Event-ID` sequence number.
        after: u64,
    },
    /// Publishes a message on the bus to every instance (each drops what is not for it).
    Broadcast {
        /// The message.
        message: BusMessage,
    },
    /// A service record's operation ([`Router::record_op`]): the service's own data that
    /// every instance reads and writes (a task's state), opaque to the router.
    Record(RecordOp),
}

/// An operation on a service record: versioned bytes under a key of the service's, with an
/// optional owner (the instance that runs what the record describes) whose liveness the
/// store reports. Every instance of the cluster sees the same record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordOp {
    /// The record under `key`: [`StoreReply::Record`].
    Load {
        /// The service's key.
        key: Box<str>,
    },
    /// Writes the record under `key` if `guard` holds: [`StoreReply::RecordSaved`] with its
    /// new version, else [`StoreReply::RecordConflict`] with what is stored (a
    /// compare-and-set: two instances writing the same record never both succeed from the
    /// same version).
    Save {
        /// The service's key.
        key: Box<str>,
        /// The new bytes.
        value: Bytes,
        /// When the write applies.
        guard: RecordGuard,
        /// `true`: this instance becomes the record's owner; `false`: the owner stays.
        owned: bool,
        /// The record expires this long after it is created (`None`: never); later writes
        /// keep the expiry the creation set.
        ttl: Option<Duration>,
    },
}

impl RecordOp {
    /// The record's key.
    pub fn key(&self) -> &str {
        match self {
            RecordOp::Load { key } | RecordOp::Save { key, .. } => key,
        }
    }
}

/// When a [`RecordOp::Save`] applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordGuard {
    /// Only if no record exists (it is created, version 1).
    Absent,
    /// Only if the stored record has this version.
    Version(u64),
}

/// A service record as the store keeps it ([`RecordOp`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRecord {
    /// 1 when created, one more with each write.
    pub version: u64,
    /// The service's bytes.
    pub value: Bytes,
    /// Whether the record's owner is alive (its instance runs and reaches the store):
    /// `None` when it has no owner. An owner that crashed counts as gone within the store's
    /// liveness delay.
    pub owner_alive: Option<bool>,
}

/// The store's answer to one [`StoreOp`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreReply {
    /// The record asked for (`None`: no such session, or it expired).
    Session(Option<SessionRecord>),
    /// The record was created.
    Created,
    /// The cluster already holds `max_sessions` live sessions.
    AtCapacity,
    /// Done.
    Done,
    /// The message got sequence number `seq` in the listen log.
    Published {
        /// Its sequence number.
        seq: u64,
    },
    /// Events of a followed log, in order, continuing the previous answer.
    Events {
        /// The events (possibly none).
        events: Vec<LogEvent>,
        /// Events between the start (or the previous answer) and these were evicted.
        gap: bool,
        /// The last sequence number before `events` (where this answer starts).
        after: u64,
    },
    /// Events of a followed request stream, in order, continuing the previous answer.
    StreamEvents {
        /// The events (possibly none).
        events: Vec<LogEvent>,
        /// The last sequence number before `events`.
        after: u64,
        /// The stream ended (after these events), or cannot be followed.
        end: Option<StreamEnd>,
    },
    /// A service record ([`RecordOp::Load`]; `None`: none, or it expired).
    Record(Option<ServiceRecord>),
    /// A [`RecordOp::Save`] applied: the record's new version.
    RecordSaved {
        /// Its version now.
        version: u64,
    },
    /// A [`RecordOp::Save`] whose guard did not hold: what is stored (`None`: nothing).
    RecordConflict(Option<ServiceRecord>),
    /// The store could not do it (unreachable, timed out after its retries, refused).
    Failed(StoreError),
}

/// How a followed request stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamEnd {
    /// Its last event was written.
    Finished,
    /// The instance that ran its requests is gone: these requests will never be answered.
    OwnerGone {
        /// The client's ids of the requests left unanswered.
        unanswered: Vec<RequestId>,
    },
    /// The store knows no such stream of the session.
    Unknown,
}

/// Why the store could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the session store is unavailable: {0}")]
pub struct StoreError(pub Box<str>);

/// What instances tell each other. Exhaustive on purpose, like [`StoreOp`]: a backend
/// carries every message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BusMessage {
    /// The session was deleted: forget it.
    SessionDeleted {
        /// The session id.
        session: Box<str>,
    },
    /// The session's record changed: an instance holding a copy loads it again.
    SessionSaved {
        /// The session id.
        session: Box<str>,
    },
    /// The client cancelled a request of the session; the instance running it stops it.
    Cancel {
        /// The session id.
        session: Box<str>,
        /// The client's request id.
        request: RequestId,
    },
    /// The client answered a server→client request of `instance`.
    ClientResponse {
        /// The instance waiting for it.
        instance: Box<str>,
        /// The session id.
        session: Box<str>,
        /// The answer.
        response: Response,
    },
    /// A client resumed request stream `stream` on another instance: its owner keeps its
    /// handlers running (no resume grace), their events reach the client through the store.
    StreamResumed {
        /// The session id.
        session: Box<str>,
        /// The stream's name.
        stream: Box<str>,
    },
    /// Instance `by` opened the session's GET stream: any other connection ends.
    ListenTaken {
        /// The session id.
        session: Box<str>,
        /// The instance that holds it now.
        by: Box<str>,
    },
    /// A service-level notice of instance `from` for every other instance (a change the
    /// `subscriptions/listen` streams held elsewhere must hear of: a list changed, a
    /// resource was updated). Opaque to the router ([`Router::broadcast_notice`] sends it,
    /// [`ServerOutput::ClusterNotice`] hands it to the service); not tied to a session.
    Notice {
        /// The instance that sent it (a router drops its own, should a bus echo it).
        from: Box<str>,
        /// The service's notice.
        payload: Bytes,
    },
}

/// An owned copy of a request head, kept while its session loads.
#[derive(Debug)]
pub(crate) struct OwnedHead {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    verdict: AuthDecision,
}

/// A request waiting for its session's record (the module's parked-request table).
#[derive(Debug)]
pub(crate) struct Parked {
    head: OwnedHead,
    session: Box<str>,
    body: Vec<u8>,
    ended: bool,
    origin: Option<Box<str>>,
}

/// What happened to a parked request.
#[derive(Debug)]
pub(crate) enum ParkEvent<'a> {
    Body(&'a [u8]),
    BodyEnd,
    Loaded,
    Missing,
    Failed,
    Disconnect,
}

/// What the router does after a parked-request event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ParkStep {
    /// Keep waiting.
    Wait,
    /// Answer 413.
    TooLarge,
    /// Run the request now (the session was adopted, or is missing: 404 follows).
    Run,
    /// Answer 503.
    Unavailable,
    /// Forget it.
    Drop,
}

impl Parked {
    /// The parked-request machine: the module's table, row for row.
    pub(crate) fn on(&mut self, event: ParkEvent<'_>, cap: usize) -> ParkStep {
        match event {
            ParkEvent::Body(chunk) => {
                if self.body.len().saturating_add(chunk.len()) > cap {
                    ParkStep::TooLarge
                } else {
                    self.body.extend_from_slice(chunk);
                    ParkStep::Wait
                }
            }
            ParkEvent::BodyEnd => {
                self.ended = true;
                ParkStep::Wait
            }
            ParkEvent::Loaded | ParkEvent::Missing => ParkStep::Run,
            ParkEvent::Failed => ParkStep::Unavailable,
            ParkEvent::Disconnect => ParkStep::Drop,
        }
    }
}

/// Session entries of [`ClusterState::commits`] whose room is always kept from one turn to
/// the next (more is kept while the turns use it).
const COMMITS_RETAINED: usize = 1024;

/// A store call the router waits on.
#[derive(Debug)]
pub(crate) enum Call {
    /// Requests parked on this session's record.
    Load { session: Box<str> },
    /// `initialize` answered; its answer waits for the record.
    Create { session: SessionHandle },
    /// A state change; the session's later answers wait for it.
    Save { session: SessionHandle },
    /// Request streams' events are being committed: for each, its `lsid` and the sequence
    /// numbers `first..=last` (seq 0: its priming event, committed with its registration;
    /// none when `first > last`).
    Commit(Vec<(u64, u64, u64)>),
    /// The remote stream `lsid` follows its log.
    FollowStream { lsid: u64 },
    /// A copy held here is loaded again (another instance saved it).
    Refresh { session: SessionHandle },
    /// `DELETE`, answered when done.
    Delete {
        conn: ExchangeId,
        origin: Option<Box<str>>,
    },
    /// The listen stream `lsid` follows its log.
    Follow { lsid: u64 },
    /// The service's record operation: its answer goes to the service.
    Record,
    /// A message for the session's listen log (`gap`: it carried a gap): its failure is a
    /// loss the client is told of.
    Publish { session: SessionHandle, gap: bool },
    /// Nothing waits (touch, broadcast, cursor).
    Detached,
}

/// Whether `call` waits for one answer (under a deadline): all but the detached ones and the
/// follows.
fn waits(call: &Call) -> bool {
    !matches!(
        call,
        Call::Detached | Call::Follow { .. } | Call::FollowStream { .. }
    )
}

/// The cluster state of a router.
#[derive(Debug, Default)]
pub(crate) struct ClusterState {
    next_ticket: u64,
    pub(crate) calls: HandleMap<Ticket, Call>,
    /// The deadlines of the calls that wait for one answer, in the order they were made:
    /// each is its call's time plus the one store timeout, so the line is in deadline order
    /// (kept so should the clock pass a call's time twice). Answered calls leave it from
    /// its front only (one further back is skipped when it gets there), and the timer set
    /// holds one entry for the whole line ([`Timer::StoreDeadlines`], `armed`), not one per
    /// call: a call costs no operation on the timer set while others are in flight. It
    /// holds at most the calls made within one store timeout (its front is due by then).
    deadlines: std::collections::VecDeque<(Instant, Ticket)>,
    /// The deadline [`Timer::StoreDeadlines`] is armed at, if it is.
    armed: Option<Instant>,
    /// The calls of `calls` that wait for one answer (not the follows): changed only by
    /// [`call`](Self::call) and [`answered`](Self::answered), the only two ways such a
    /// call comes and goes (the other removals from `calls` are follows').
    waiting: usize,
    /// The backend said its queue is high ([`Router::handle_store_pressure`]).
    pub(crate) store_busy: bool,
    pub(crate) parked: HandleMap<ExchangeId, Parked>,
    /// Parked requests by session id, and the ticket of the load they wait on.
    pub(crate) loading: HashMap<Box<str>, (Ticket, Vec<ExchangeId>)>,
    /// A parked request re-running after its session turned out missing (it must not park
    /// again).
    pub(crate) rerun_missing: Option<ExchangeId>,
    /// Request streams' writes of this turn, one entry per session (or more, each of at
    /// most [`ClusterConfig::max_commit_events`]), in the order they were begun: each
    /// becomes one [`StoreOp::CommitStreams`] when the outputs are next polled. A session's
    /// entry still open for more is in `commit_index`; a stream's place is its
    /// `LogicalStream::commit`.
    pub(crate) commits: Vec<PendingCommit>,
    pub(crate) commit_index: HashMap<SessionHandle, usize>,
}

/// A session's request-stream writes not yet sent to the store (see
/// [`ClusterState::commits`]).
#[derive(Debug)]
pub(crate) struct PendingCommit {
    session: Box<str>,
    streams: Vec<StreamCommit>,
    /// For each of `streams`: its lsid and the sequence numbers `first..=last` of its
    /// frames waiting on this commit (the priming event is 0; none: `first > last`).
    frames: Vec<(u64, u64, u64)>,
    /// Events in `streams`.
    events: usize,
}

impl ClusterState {
    /// Registers a store call (`Detached` ones are not kept: nothing waits for them) and
    /// puts its deadline in line (arming the line's timer if it was empty); returns its
    /// ticket.
    pub(crate) fn call(
        &mut self,
        call: Call,
        deadline: Option<Instant>,
        timers: &mut TimerQueue,
    ) -> Ticket {
        self.next_ticket += 1;
        let ticket = Ticket(self.next_ticket);
        let waits = waits(&call);
        if let (Some(at), true) = (deadline, waits) {
            let at = self.deadlines.back().map_or(at, |(last, _)| at.max(*last));
            self.deadlines.push_back((at, ticket));
            if self.armed.is_none() {
                timers.set(&mut self.armed, Timer::StoreDeadlines, at);
            }
        }
        if waits {
            self.waiting += 1;
        }
        if !matches!(call, Call::Detached) {
            self.calls.insert(ticket, call);
        }
        ticket
    }

    /// Whether `ticket` is a call that waits for its answer and has none yet.
    fn waits_still(&self, ticket: Ticket) -> bool {
        self.calls.get(&ticket).is_some_and(waits)
    }

    /// Takes the answered calls off the front of the line of deadlines; with none left
    /// waiting, disarms its timer.
    fn trim_deadlines(&mut self, timers: &mut TimerQueue) {
        while let Some(&(_, ticket)) = self.deadlines.front() {
            if self.waits_still(ticket) {
                return;
            }
            self.deadlines.pop_front();
        }
        timers.clear(&mut self.armed, Timer::StoreDeadlines);
    }

    /// [`Timer::StoreDeadlines`] fired at `now`: the calls waiting past their deadline, in
    /// order (each is then answered `Failed`); the timer is armed again for the next.
    pub(crate) fn deadlines_due(&mut self, now: Instant, timers: &mut TimerQueue) -> Vec<Ticket> {
        self.armed = None;
        let mut due = Vec::new();
        while let Some(&(at, ticket)) = self.deadlines.front() {
            if !self.waits_still(ticket) {
                self.deadlines.pop_front();
            } else if at <= now {
                self.deadlines.pop_front();
                due.push(ticket);
            } else {
                timers.set(&mut self.armed, Timer::StoreDeadlines, at);
                break;
            }
        }
        due
    }

    /// Store calls that wait for their answer (the follows excluded).
    pub(crate) fn waiting(&self) -> usize {
        self.waiting
    }

    /// The call an answer to `ticket` is for: a follow stays registered (its answers
    /// continue until it is unfollowed); any other is taken out, its deadline disarmed.
    /// `None`: nobody waits (late, after a timeout, or a detached call).
    pub(crate) fn answered(&mut self, ticket: Ticket, timers: &mut TimerQueue) -> Option<Call> {
        match self.calls.get(&ticket) {
            Some(Call::Follow { lsid }) => return Some(Call::Follow { lsid: *lsid }),
            Some(Call::FollowStream { lsid }) => {
                return Some(Call::FollowStream { lsid: *lsid });
            }
            _ => {}
        }
        let call = self.calls.remove(&ticket)?;
        self.waiting = self.waiting.saturating_sub(1);
        if self.deadlines.front().is_some_and(|(_, t)| *t == ticket) {
            self.trim_deadlines(timers);
        }
        Some(call)
    }

    /// Takes a parked request out, and out of the list of those waiting for its session.
    pub(crate) fn forget_parked(&mut self, stream: ExchangeId) -> Option<Parked> {
        let p = self.parked.remove(&stream)?;
        if let Some((_, waiting)) = self.loading.get_mut(&p.session) {
            waiting.retain(|s| *s != stream);
        }
        Some(p)
    }
}

impl Router {
    /// Whether this router is a cluster member.
    pub fn is_clustered(&self) -> bool {
        self.config.cluster.is_some()
    }

    /// Admission under store pressure: while this instance waits on
    /// [`ClusterConfig::max_store_backlog`] store calls, a new request is refused (503 with
    /// `Retry-After`) before it adds to them.
    pub(crate) fn check_store_backlog(&self) -> Result<(), ProtocolError> {
        match &self.config.cluster {
            Some(c) if self.cluster.store_busy || self.cluster.waiting() >= c.max_store_backlog => {
                Err(ProtocolError::StoreBusy {
                    retry_after: c.backlog_retry_after,
                })
            }
            _ => Ok(()),
        }
    }

    /// Whether the store backend said its queue runs high ([`handle_store_pressure`](Self::handle_store_pressure)).
    pub fn store_pressure(&self) -> bool {
        self.cluster.store_busy
    }

    /// Input: the store backend's queue of operations not yet done crossed its high mark
    /// (`busy`: new requests are pushed back, as for
    /// [`ClusterConfig::max_store_backlog`]) or fell back under its low mark.
    pub fn handle_store_pressure(&mut self, now: Instant, busy: bool) {
        self.advance(now);
        self.cluster.store_busy = busy;
    }

    /// Store calls this instance waits on now (the follows excluded): what
    /// [`ClusterConfig::max_store_backlog`] bounds. 0 outside a cluster.
    pub fn store_backlog(&self) -> usize {
        self.cluster.waiting()
    }

    /// Emits a store operation and remembers what waits on it.
    pub(crate) fn store_call(&mut self, op: StoreOp, call: Call) -> Ticket {
        let deadline = self
            .config
            .cluster
            .as_ref()
            .map(|c| self.now + c.store_timeout);
        let ticket = self.cluster.call(call, deadline, &mut self.timers);
        self.out.push_back(ServerOutput::Store { ticket, op });
        ticket
    }

    /// Input: the store's answer to the operation `ticket` named. Answers nobody waits for
    /// (late, after a timeout; or to operations that need none) are ignored.
    pub fn handle_store(&mut self, now: Instant, ticket: Ticket, reply: StoreReply) {
        self.advance(now);
        let Some(call) = self.cluster.answered(ticket, &mut self.timers) else {
            return;
        };
        match call {
            Call::Load { session } => self.loaded(&session, reply),
            Call::Create { session } => self.created(session, reply),
            Call::Save { session } => self.saved(session, reply),
            Call::Refresh { session } => self.refreshed(session, reply),
            Call::Delete { conn, origin } => match reply {
                StoreReply::Failed(e) => self.refuse(
                    conn,
                    unavailable(&e),
                    origin.as_deref(),
                    HeaderMap::new(),
                    None,
                    false,
                ),
                _ => {
                    let mut headers = HeaderMap::new();
                    self.config.cors_headers(origin.as_deref(), &mut headers);
                    self.answer(conn, http::StatusCode::OK, headers, None);
                }
            },
            Call::Follow { lsid } => self.followed(ticket, lsid, reply),
            Call::FollowStream { lsid } => self.stream_followed(ticket, lsid, reply),
            Call::Commit(streams) => {
                for (lsid, first, last) in streams {
                    self.commit_answered(lsid, first..=last, &reply);
                }
            }
            Call::Record => self
                .out
                .push_back(ServerOutput::RecordAnswer { ticket, reply }),
            Call::Publish { session, gap } => self.publish_answered(session, gap, &reply),
            Call::Detached => {}
        }
    }

    /// Command: a service record operation ([`RecordOp`]: the service's own shared data, a
    /// task's state). Its answer comes back as [`ServerOutput::RecordAnswer`] with the
    /// ticket returned here, or [`StoreReply::Failed`] after
    /// [`ClusterConfig::store_timeout`]: never a hang. `None` (nothing sent) when this router
    /// is not a cluster member.
    pub fn record_op(&mut self, now: Instant, op: RecordOp) -> Option<Ticket> {
        self.advance(now);
        if !self.is_clustered() {
            return None;
        }
        Some(self.store_call(StoreOp::Record(op), Call::Record))
    }

    /// The line of store deadlines reached its first ([`Timer::StoreDeadlines`]): each call
    /// waiting past its deadline is answered `Failed` (the timer before its answer).
    pub(crate) fn store_deadlines(&mut self) {
        for ticket in self.cluster.deadlines_due(self.now, &mut self.timers) {
            let e = StoreError("no answer in time".into());
            self.handle_store(self.now, ticket, StoreReply::Failed(e));
        }
    }

    /// Input: a message another instance published on the bus.
    pub fn handle_bus(&mut self, now: Instant, message: BusMessage) {
        self.advance(now);
        match message {
            BusMessage::SessionDeleted { session } => {
                if let Some(h) = self.sessions.by_id(&session) {
                    self.end_session(h, CloseReason::Deleted);
                }
            }
            BusMessage::SessionSaved { session } => {
                if let Some(h) = self.sessions.by_id(&session) {
                    self.store_call(StoreOp::Load { session }, Call::Refresh { session: h });
                }
            }
            BusMessage::Cancel { session, request } => {
                if let Some(h) = self.sessions.by_id(&session) {
                    self.cancel_client_request(h, &request);
                }
            }
            BusMessage::ClientResponse {
                instance,
                session,
                response,
            } => {
                if *instance == *self.config.instance()
                    && let Some(h) = self.sessions.by_id(&session)
                {
                    self.match_client_response(h, response);
                }
            }
            BusMessage::StreamResumed { session, stream } => {
                let mine = match self.config.resolve_event_id(&format!("{stream}-0")) {
                    Some(EventRef::Stream(lsid, _)) => Some(lsid),
                    _ => None,
                };
                let owner = self.sessions.by_id(&session);
                if let (Some(lsid), Some(owner)) = (mine, owner)
                    && let Some(ls) = self.streams.stream_mut(&lsid)
                    && ls.session == Some(owner)
                {
                    // Resumed elsewhere: its handlers run on, their events go to the store.
                    self.timers.clear(&mut ls.grace, Timer::ResumeGrace(lsid));
                }
            }
            BusMessage::ListenTaken { session, by } => {
                if *by != *self.config.instance()
                    && let Some(h) = self.sessions.by_id(&session)
                    && let Some(lsid) = self.sessions.get(&h).and_then(|s| s.listen)
                {
                    self.release_listen(lsid);
                }
            }
            BusMessage::Notice { from, payload } => {
                // Our own, echoed: the service told its listeners here when it sent it.
                if self.is_clustered() && *from != *self.config.instance() {
                    self.out
                        .push_back(ServerOutput::ClusterNotice { from, payload });
                }
            }
        }
    }

    /// Command: tells every other instance of the cluster a service-level notice (what their
    /// `subscriptions/listen` streams must hear of); each of them outputs it as
    /// [`ServerOutput::ClusterNotice`]. Fire and forget: nothing waits for the store, and a
    /// notice the bus cannot carry (the store is away) is lost. `false` (and nothing sent)
    /// when this router is not a cluster member.
    pub fn broadcast_notice(&mut self, now: Instant, payload: Bytes) -> bool {
        self.advance(now);
        if !self.is_clustered() {
            return false;
        }
        let message = BusMessage::Notice {
            from: self.config.instance().into(),
            payload,
        };
        self.store_call(StoreOp::Broadcast { message }, Call::Detached);
        true
    }

    /// Input: the bus was interrupted (messages may have been missed). Every cached session
    /// with nothing in use here is forgotten and loaded again on its next request, so a
    /// missed deletion cannot keep a session alive.
    pub fn handle_bus_lost(&mut self, now: Instant) {
        self.advance(now);
        if !self.is_clustered() {
            return;
        }
        let idle: Vec<SessionHandle> = self
            .sessions
            .iter()
            .filter(|(_, s)| !s.is_busy() && s.share.stored)
            .map(|(h, _)| *h)
            .collect();
        for h in idle {
            self.unload_session(h);
        }
    }

    /// Command: the service's state of a session changed (its log level, subscriptions,
    /// what `initialize` told). In a cluster it is stored before the session's next answer
    /// leaves; alone, it is kept with the session. Call it before answering the request
    /// that changed it.
    pub fn set_session_state(&mut self, now: Instant, session: SessionHandle, state: Bytes) {
        self.advance(now);
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        s.share.state = Some(state);
        if self.config.cluster.is_none() {
            return;
        }
        if !s.share.stored {
            // Written with the record, unless its creation is already on its way.
            s.share.resave |= !s.share.held.is_empty();
            return;
        }
        s.share.unsaved += 1;
        let record = record_of(s);
        let ttl = self.config.session_idle_ttl;
        self.store_call(StoreOp::Save { record, ttl }, Call::Save { session });
    }

    /// Query: whether this instance holds `session`'s GET stream (its listen stream is open
    /// here, or detached and awaiting a resume here). In a cluster, at most one instance
    /// does, except briefly while a GET moves ([`BusMessage::ListenTaken`]): a change told to
    /// every instance is written by that one.
    pub fn holds_listen_stream(&self, session: SessionHandle) -> bool {
        self.sessions
            .get(&session)
            .and_then(|s| s.listen)
            .is_some_and(|l| self.streams.has_stream(&l))
    }

    /// The service's state of a session, as last set here or loaded from the store.
    pub fn session_state(&self, session: SessionHandle) -> Option<&Bytes> {
        self.sessions.get(&session)?.share.state.as_ref()
    }

    // ---- parking --------------------------------------------------------------------

    /// Parks a request whose session this instance does not hold; `true` when parked.
    pub(crate) fn park_unloaded(
        &mut self,
        stream: ExchangeId,
        head: &RequestHead<'_>,
        principal: Option<&str>,
        origin: Option<&str>,
    ) -> bool {
        if self.config.cluster.is_none()
            || self.config.stateless
            || self.cluster.rerun_missing == Some(stream)
            || !matches!(*head.method, Method::POST | Method::GET | Method::DELETE)
        {
            return false;
        }
        let Some(id) = head
            .headers
            .get(&crate::http::header_name::MCP_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|id| super::is_valid_session_id(id))
        else {
            return false;
        };
        if self.sessions.by_id(id).is_some() {
            return false;
        }
        let session: Box<str> = id.into();
        let parked = Parked {
            head: OwnedHead {
                method: head.method.clone(),
                uri: head.uri.clone(),
                headers: head.headers.clone(),
                verdict: AuthDecision::Allow {
                    principal: principal.map(Into::into),
                },
            },
            session: session.clone(),
            body: Vec::new(),
            ended: false,
            origin: origin.map(Into::into),
        };
        self.cluster.parked.insert(stream, parked);
        if let Some((_, waiting)) = self.cluster.loading.get_mut(&session) {
            waiting.push(stream);
        } else {
            let ticket = self.store_call(
                StoreOp::Load {
                    session: session.clone(),
                },
                Call::Load {
                    session: session.clone(),
                },
            );
            self.cluster.loading.insert(session, (ticket, vec![stream]));
        }
        true
    }

    /// A parked request's body chunk, end or disconnect; `false` when `stream` is not parked.
    pub(crate) fn parked_input(&mut self, stream: ExchangeId, event: ParkEvent<'_>) -> bool {
        let cap = self.config.limits.max_body_bytes;
        let Some(p) = self.cluster.parked.get_mut(&stream) else {
            return false;
        };
        match p.on(event, cap) {
            ParkStep::Wait => {}
            ParkStep::TooLarge => {
                let origin = self.cluster.forget_parked(stream).and_then(|p| p.origin);
                let e = ProtocolError::PayloadTooLarge(cap);
                self.refuse(stream, e, origin.as_deref(), HeaderMap::new(), None, true);
            }
            _ => {
                self.cluster.forget_parked(stream);
            }
        }
        true
    }

    fn loaded(&mut self, session: &str, reply: StoreReply) {
        let Some((_, waiting)) = self.cluster.loading.remove(session) else {
            return;
        };
        let event = match reply {
            StoreReply::Session(Some(record)) => {
                if self.sessions.by_id(&record.id).is_none() && *record.id == *session {
                    self.adopt(record);
                }
                ParkEvent::Loaded
            }
            StoreReply::Session(None) => ParkEvent::Missing,
            _ => ParkEvent::Failed,
        };
        let failed = matches!(event, ParkEvent::Failed);
        let missing = matches!(event, ParkEvent::Missing);
        for stream in waiting {
            let cap = self.config.limits.max_body_bytes;
            let Some(mut p) = self.cluster.parked.remove(&stream) else {
                continue;
            };
            let ev = if failed {
                ParkEvent::Failed
            } else if missing {
                ParkEvent::Missing
            } else {
                ParkEvent::Loaded
            };
            match p.on(ev, cap) {
                ParkStep::Unavailable => {
                    let e = unavailable(&StoreError("the session could not be loaded".into()));
                    let stop = p.head.method == Method::POST && !p.ended;
                    self.refuse(stream, e, p.origin.as_deref(), HeaderMap::new(), None, stop);
                }
                ParkStep::Run => self.rerun(stream, p, missing),
                _ => {}
            }
        }
    }

    /// Runs a parked request as if it had just arrived (same [`ExchangeId`]).
    fn rerun(&mut self, stream: ExchangeId, p: Parked, missing: bool) {
        if missing {
            self.cluster.rerun_missing = Some(stream);
        }
        let head = RequestHead::new(&p.head.method, &p.head.uri, &p.head.headers)
            .with_verdict(Some(&p.head.verdict));
        self.start_request(stream, head);
        self.cluster.rerun_missing = None;
        if !p.body.is_empty() {
            self.body_chunk(stream, &p.body);
        }
        if p.ended {
            self.body_end(stream);
        }
    }

    /// A session record from the store becomes a session here.
    fn adopt(&mut self, record: SessionRecord) {
        let handle = SessionHandle(self.next());
        // Through the session machine, like every change of state: `Initializing` to `Ready`.
        let s = self
            .sessions
            .adopt(handle, record.id, record.principal, record.version);
        s.share.stored = true;
        s.share.state = record.state.clone();
        s.share.touched = Some(self.now);
        self.out.push_back(ServerOutput::SessionLoaded {
            session: handle,
            state: record.state,
        });
        self.session_step(handle, SessionEvent::Activity);
    }

    /// Forgets this instance's copy of a session that lives on in the store.
    pub(crate) fn unload_session(&mut self, handle: SessionHandle) {
        self.end_session_as(handle, None);
    }

    // ---- sessions: create, save, touch ----------------------------------------------

    /// In a cluster, `respond` holds an answer while the session's record is not stored
    /// (`initialize`: creates it) or a save is outstanding. `None`: go on answering.
    pub(crate) fn hold_answer(
        &mut self,
        session: SessionHandle,
        handle: RequestHandle,
        outcome: Outcome,
        initialize_ok: bool,
    ) -> Option<Outcome> {
        if self.config.cluster.is_none() {
            return Some(outcome);
        }
        let Some(s) = self.sessions.get_mut(&session) else {
            return Some(outcome);
        };
        if s.share.stored && s.share.unsaved == 0 {
            return Some(outcome);
        }
        if !s.share.stored && !initialize_ok {
            // A failed initialize stores nothing.
            return Some(outcome);
        }
        let create = !s.share.stored && s.share.held.is_empty();
        s.share.held.push((handle, outcome));
        if create {
            let mut record = record_of(s);
            if let Outcome::Result(r) = &s.share.held[0].1
                && let Some(v) = super::wire::read_protocol_version(Some(r))
                && self.config.supported_versions.contains(&v)
                && v.era() == crate::Era::Legacy
            {
                record.version = v;
            }
            let op = StoreOp::Create {
                record,
                max_sessions: self.config.limits.max_sessions,
                ttl: self.config.session_idle_ttl,
            };
            self.store_call(op, Call::Create { session });
        }
        None
    }

    fn release_held(&mut self, session: SessionHandle, failure: Option<&str>) {
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        if s.share.unsaved > 0 && failure.is_none() {
            return;
        }
        let held = std::mem::take(&mut s.share.held);
        for (handle, outcome) in held {
            let outcome = match failure {
                Some(why) => Outcome::Error(crate::jsonrpc::ErrorObject::new(
                    crate::jsonrpc::error_codes::INTERNAL_ERROR,
                    format!("the session's state could not be stored: {why}"),
                )),
                None => outcome,
            };
            let _ = self.respond(self.now, handle, outcome);
        }
    }

    fn created(&mut self, session: SessionHandle, reply: StoreReply) {
        match reply {
            StoreReply::Created => {
                if let Some(s) = self.sessions.get_mut(&session) {
                    s.share.stored = true;
                    s.share.touched = Some(self.now);
                    if std::mem::take(&mut s.share.resave) {
                        s.share.unsaved += 1;
                        let record = record_of(s);
                        let ttl = self.config.session_idle_ttl;
                        self.store_call(StoreOp::Save { record, ttl }, Call::Save { session });
                    }
                }
                self.release_held(session, None);
            }
            StoreReply::AtCapacity => self.refuse_creation(session, ProtocolError::TooManySessions),
            StoreReply::Failed(e) => self.refuse_creation(session, unavailable(&e)),
            _ => self.refuse_creation(
                session,
                unavailable(&StoreError("unexpected answer".into())),
            ),
        }
    }

    /// The record of a new session could not be stored: its `initialize` is answered with
    /// the refusal's status (503) when its answer is still one JSON body, else with a
    /// JSON-RPC error; the session ends.
    fn refuse_creation(&mut self, session: SessionHandle, error: ProtocolError) {
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        let held = std::mem::take(&mut s.share.held);
        for (handle, _) in held {
            let Some(f) = self.inflight.get(&handle) else {
                continue;
            };
            let pending_conn = self
                .streams
                .stream(&f.stream)
                .filter(|ls| ls.phase() == Phase::Pending)
                .and_then(|ls| ls.connection.map(|c| (c, ls.origin.clone(), f.stream)));
            if let Some((conn, origin, lsid)) = pending_conn {
                self.inflight.remove(&handle);
                if let Some(ls) = self.streams.stream_mut(&lsid) {
                    ls.connection = None;
                }
                self.remove_exchange(conn);
                self.drop_stream(lsid);
                self.refuse(
                    conn,
                    error.clone(),
                    origin.as_deref(),
                    HeaderMap::new(),
                    None,
                    false,
                );
            } else {
                let e = crate::jsonrpc::ErrorObject::new(error.code(), error.to_string());
                let _ = self.respond(self.now, handle, Outcome::Error(e));
            }
        }
        self.end_session(session, CloseReason::InitializeFailed);
    }

    fn refreshed(&mut self, session: SessionHandle, reply: StoreReply) {
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        match reply {
            StoreReply::Session(Some(record)) if record.id == s.id => {
                if s.share.unsaved > 0 {
                    return; // our own save is on its way and is newer
                }
                s.share.state = record.state.clone();
                self.out.push_back(ServerOutput::SessionLoaded {
                    session,
                    state: record.state,
                });
            }
            StoreReply::Session(_) => self.end_session(session, CloseReason::Deleted),
            _ => {
                // Unknown state: forget the copy if nothing uses it; it is loaded afresh.
                if !s.is_busy() {
                    self.unload_session(session);
                }
            }
        }
    }

    fn saved(&mut self, session: SessionHandle, reply: StoreReply) {
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        s.share.unsaved = s.share.unsaved.saturating_sub(1);
        match reply {
            StoreReply::Done => self.release_held(session, None),
            StoreReply::Session(None) => self.end_session(session, CloseReason::Deleted),
            StoreReply::Failed(e) => self.release_held(session, Some(&e.0)),
            _ => self.release_held(session, Some("unexpected answer")),
        }
    }

    /// Activity on a session: renews its record at most once per touch interval.
    pub(crate) fn cluster_activity(&mut self, session: SessionHandle) {
        let Some(c) = &self.config.cluster else {
            return;
        };
        let every = touch_interval(c, self.config.session_idle_ttl);
        let now = self.now;
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        s.share.active = Some(now);
        if !s.share.stored || s.share.touched.is_some_and(|t| now < t + every) {
            return;
        }
        s.share.touched = Some(now);
        let op = StoreOp::Touch {
            session: s.id.clone(),
            ttl: self.config.session_idle_ttl,
        };
        self.store_call(op, Call::Detached);
    }

    /// When a clustered session's idle timer is due next: at the next touch interval (a
    /// session that is busy then renews its record), or at the end of its idle TTL here if
    /// that comes first.
    pub(crate) fn cluster_idle_deadline(&self, s: &Session, ttl: Duration) -> Option<Instant> {
        let c = self.config.cluster.as_ref()?;
        let every = touch_interval(c, Some(ttl));
        let next_touch = self.now + every;
        if s.is_busy() {
            return Some(next_touch);
        }
        let last = s.share.active.unwrap_or(self.now);
        Some((last + ttl).max(self.now).min(next_touch))
    }

    /// A clustered session's idle timer fired: renew it when busy, forget the local copy when
    /// idle here for the whole TTL (the store expires the record on its own). `true` when
    /// the cluster handled it.
    pub(crate) fn cluster_idle(&mut self, handle: SessionHandle) -> bool {
        if self.config.cluster.is_none() {
            return false;
        }
        let Some(s) = self.sessions.get_mut(&handle) else {
            return true;
        };
        let ttl = self.config.session_idle_ttl.unwrap_or(Duration::MAX);
        let idle_since = s.share.active.unwrap_or(self.now);
        if s.is_busy() {
            // Renew the record (not `active`: a busy session is not idle, but an open
            // stream is no request).
            s.share.touched = Some(self.now);
            let op = StoreOp::Touch {
                session: s.id.clone(),
                ttl: self.config.session_idle_ttl,
            };
            if s.share.stored {
                self.store_call(op, Call::Detached);
            }
            self.rearm_idle(handle);
        } else if idle_since.checked_add(ttl).is_none_or(|end| end > self.now) {
            self.rearm_idle(handle);
        } else {
            self.unload_session(handle);
        }
        true
    }

    /// `DELETE` in a cluster: the record goes first, the answer follows.
    pub(crate) fn cluster_delete(
        &mut self,
        conn: ExchangeId,
        session: SessionHandle,
        origin: Option<Box<str>>,
    ) -> bool {
        if self.config.cluster.is_none() {
            return false;
        }
        let Some(id) = self.sessions.get(&session).map(|s| s.id.clone()) else {
            return false;
        };
        self.store_call(
            StoreOp::Delete { session: id },
            Call::Delete { conn, origin },
        );
        self.end_session(session, CloseReason::Deleted);
        true
    }

    // ---- the listen stream ----------------------------------------------------------

    /// A message for a clustered session's GET stream goes to its listen log. It carries
    /// the gap when an earlier publish of the session failed (see
    /// [`publish_answered`](Self::publish_answered)).
    pub(crate) fn publish(&mut self, session: SessionHandle, payload: Bytes) -> bool {
        let Some(c) = &self.config.cluster else {
            return false;
        };
        let capacity = c.listen_log_capacity;
        let Some(s) = self.sessions.get_mut(&session) else {
            return false;
        };
        let gap = s.share.gap_owed;
        if gap {
            s.share.gap_owed = false;
        }
        let op = StoreOp::Publish {
            session: s.id.clone(),
            payload,
            capacity,
            gap,
        };
        self.store_call(op, Call::Publish { session, gap });
        true
    }

    /// A publish was answered. One that failed (past the store's retries, or the store's
    /// deadline here) lost its message: the session owes its client a gap. A message's
    /// failure sends the gap's marker alone at once (so that the client is told though the
    /// session publishes nothing more); a marker's failure (or a gap-carrying message's)
    /// leaves the gap owed to the next publish, so that a store that stays away makes no
    /// loop. Only a gap not yet on its way is owed: a marker and a message both in flight
    /// do not mark one loss twice.
    fn publish_answered(&mut self, session: SessionHandle, carried_gap: bool, reply: &StoreReply) {
        if !matches!(reply, StoreReply::Failed(_)) {
            return;
        }
        let Some(s) = self.sessions.get_mut(&session) else {
            return; // gone here; nothing more of it is published from here
        };
        s.share.gap_owed = true;
        if !carried_gap {
            self.publish(session, Bytes::new());
        }
    }

    /// A GET opened (or resumed, `after`) a clustered session's listen stream here: follow
    /// the log, and tell the other instances.
    pub(crate) fn follow_listen(&mut self, session: SessionHandle, lsid: u64, from: FollowFrom) {
        let Some(s) = self.sessions.get(&session) else {
            return;
        };
        let id = s.id.clone();
        self.unfollow(lsid);
        let ticket = self.store_call(
            StoreOp::Follow {
                session: id.clone(),
                from,
            },
            Call::Follow { lsid },
        );
        if let Some(ls) = self.streams.stream_mut(&lsid) {
            ls.follow = Some(ticket);
            ls.primed = false;
            if let FollowFrom::After(seq) = from {
                // The client has the log up to its Last-Event-ID, and nothing after it:
                // what an earlier connection here wrote past it (cut on the way) is written
                // again, not taken as delivered.
                ls.last_seq = seq;
            }
        }
        let by = self.config.instance().into();
        self.store_call(
            StoreOp::Broadcast {
                message: BusMessage::ListenTaken { session: id, by },
            },
            Call::Detached,
        );
    }

    /// Stops following a listen log (its connection went away or was taken over).
    pub(crate) fn unfollow(&mut self, lsid: u64) {
        if let Some(ticket) = self.streams.stream_mut(&lsid).and_then(|l| l.follow.take()) {
            self.forget_follow(ticket);
        }
    }

    pub(crate) fn forget_follow(&mut self, ticket: Ticket) {
        self.cluster.calls.remove(&ticket);
        self.store_call(StoreOp::Unfollow { follow: ticket }, Call::Detached);
    }

    /// Another instance took the GET stream: end ours.
    fn release_listen(&mut self, lsid: u64) {
        self.unfollow(lsid);
        let Some(ls) = self.streams.stream_mut(&lsid) else {
            return;
        };
        if let Some(conn) = ls.detach() {
            ls.step(super::stream::StreamEvent::Release);
            self.end_exchange(conn);
        }
    }

    fn followed(&mut self, ticket: Ticket, lsid: u64, reply: StoreReply) {
        let live = self
            .streams
            .stream(&lsid)
            .is_some_and(|l| l.follow == Some(ticket) && l.connection.is_some());
        if !live {
            self.cluster.calls.remove(&ticket);
            return;
        }
        let (events, gap, after) = match reply {
            StoreReply::Events { events, gap, after } => (events, gap, after),
            StoreReply::Failed(_) => {
                // The log cannot be followed: end the connection; the client resumes with
                // its Last-Event-ID (and gets 503 while the store is away).
                self.cluster.calls.remove(&ticket);
                if let Some(ls) = self.streams.stream_mut(&lsid) {
                    ls.follow = None;
                    if let Some(conn) = ls.connection {
                        self.out
                            .push_back(ServerOutput::ResponseAbort { stream: conn });
                        self.disconnected(conn);
                    }
                }
                return;
            }
            _ => return,
        };
        let Some(ls) = self.streams.stream_mut(&lsid) else {
            return;
        };
        let Some(conn) = ls.connection else { return };
        let session = ls.session;
        let mut chunks = Vec::new();
        if !ls.primed {
            ls.primed = true;
            ls.last_seq = ls.last_seq.max(after);
            if ls.resumable && ls.version.allows_priming() {
                let retry = self.config.streams.retry_interval;
                chunks.push(super::stream::priming_frame(&listen_event_id(after), retry));
                ls.id_sent = true;
            }
        }
        if gap {
            chunks.push(events_lost_frame(&listen_event_id(after)));
        }
        for e in events {
            if e.seq <= ls.last_seq {
                continue; // already written: the log is the only path, deduplicated here
            }
            if e.gap {
                // A message before this entry was lost: the client is told where.
                chunks.push(events_lost_frame(&listen_event_id(e.seq - 1)));
            }
            ls.last_seq = e.seq;
            if !e.payload.is_empty() {
                ls.id_sent = true;
                chunks.push(event_frame(Some(&listen_event_id(e.seq)), &e.payload));
            }
        }
        let written = ls.last_seq;
        let moved = chunks.len();
        for chunk in chunks {
            self.send_chunk(conn, chunk, true);
        }
        if moved > 0
            && let Some(id) = session
                .and_then(|s| self.sessions.get(&s))
                .map(|s| s.id.clone())
        {
            self.store_call(
                StoreOp::Delivered {
                    session: id,
                    seq: written,
                },
                Call::Detached,
            );
        }
    }

    // ---- request streams --------------------------------------------------------------

    /// In a cluster, an event of a resumable request stream is committed to the store before
    /// it is written: queues `frame` (event `seq`; seq 0 is the priming event) and emits the
    /// operation. `message` is the event's payload and the request it answers (`None` for the
    /// priming event). `true` when queued (the caller writes nothing).
    pub(crate) fn gate_event(
        &mut self,
        lsid: u64,
        seq: u64,
        frame: Bytes,
        message: Option<(Bytes, Option<RequestId>)>,
    ) -> bool {
        if self.config.cluster.is_none() {
            return false;
        }
        let Some(ls) = self.streams.stream(&lsid) else {
            return false;
        };
        let StreamKind::Request { pending, .. } = &ls.kind else {
            return false;
        };
        if !ls.resumable {
            return false;
        }
        // A live session's stream (the commit names the session).
        let Some(handle) = ls.session.filter(|s| self.sessions.get(s).is_some()) else {
            return false;
        };
        let open = (!ls.registered).then(|| {
            pending
                .iter()
                .filter_map(|h| self.inflight.get(h).map(|f| f.client_id.clone()))
                .collect()
        });
        let (entry, slot) = self.pending_commit(lsid, handle);
        let max = self
            .config
            .cluster
            .as_ref()
            .map_or(usize::MAX, |c| c.max_commit_events);
        let commit = &mut self.cluster.commits[entry];
        let stream = &mut commit.streams[slot];
        if open.is_some() {
            stream.open = open;
        }
        if let Some((payload, answers)) = message {
            stream.events.push(CommitEvent {
                seq,
                payload,
                answers,
            });
            // At the cap the entry is closed: the session's next writes begin another,
            // committed after it.
            commit.events += 1;
            if commit.events >= max {
                self.cluster.commit_index.remove(&handle);
            }
        }
        let frames = &mut commit.frames[slot];
        if frames.1 > frames.2 {
            frames.1 = seq;
        }
        frames.2 = seq;
        if let Some(ls) = self.streams.stream_mut(&lsid) {
            ls.registered = true;
            ls.uncommitted.push_back((seq, frame));
        }
        true
    }

    /// The place in `ClusterState::commits` gathering stream `lsid`'s writes of this turn
    /// (made when it has none): its session entry and its slot there. `session` is the
    /// stream's.
    fn pending_commit(&mut self, lsid: u64, session: SessionHandle) -> (usize, usize) {
        let cluster = &mut self.cluster;
        let next = cluster.commits.len();
        let entry = *cluster.commit_index.entry(session).or_insert(next);
        if entry == next {
            let (id, open) = self.sessions.get(&session).map_or_else(
                || (Box::default(), 1),
                |s| (s.id.clone(), s.open_connections),
            );
            // Room for a stream per open exchange of the session (the streams that write
            // this turn, as a rule): grown one stream at a time, a session of ten calls
            // reallocated both lists twice per turn, the last time past 1 KiB, which glibc
            // serves after consolidating its fast bins.
            let room = usize::try_from(open).unwrap_or(1).clamp(1, 64);
            cluster.commits.push(PendingCommit {
                session: id,
                streams: Vec::with_capacity(room),
                frames: Vec::with_capacity(room),
                events: 0,
            });
        }
        let commit = &mut cluster.commits[entry];
        let place = self.streams.stream_mut(&lsid).map(|ls| &mut ls.commit);
        let slot = match place {
            Some(Some((e, slot))) if *e == entry => *slot,
            place => {
                let slot = commit.streams.len();
                if let Some(place) = place {
                    *place = Some((entry, slot));
                }
                commit.streams.push(StreamCommit {
                    stream: self.config.stream_name(lsid).into(),
                    open: None,
                    events: Vec::new(),
                    end: None,
                });
                commit.frames.push((lsid, 1, 0));
                slot
            }
        };
        (entry, slot)
    }

    /// Sends this turn's request-stream writes ([`ClusterState::commits`]): one
    /// [`StoreOp::CommitStreams`] per entry, in order. Their frames wait on it (a `Commit`
    /// call); ends alone are detached, as nothing waits for them.
    pub(crate) fn flush_commits(&mut self) {
        let mut commits = std::mem::take(&mut self.cluster.commits);
        let used = commits.len();
        self.cluster.commit_index.clear();
        for c in commits.drain(..) {
            let mut waits = false;
            for &(lsid, first, last) in &c.frames {
                if let Some(ls) = self.streams.stream_mut(&lsid) {
                    ls.commit = None;
                }
                waits |= first <= last;
            }
            let call = if waits {
                Call::Commit(c.frames)
            } else {
                Call::Detached
            };
            let op = StoreOp::CommitStreams {
                session: c.session,
                streams: c.streams,
            };
            self.store_call(op, call);
        }
        // The room is kept for the next turn (a busy router's turns are alike: regrowing it
        // each turn was a large allocation, and glibc consolidates its fast bins for each),
        // and given back after a turn that used less than a quarter of it.
        let keep = used.max(COMMITS_RETAINED);
        if commits.capacity() > keep * 4 {
            commits.shrink_to(keep);
        }
        self.cluster.commits = commits;
        if self.cluster.commit_index.capacity() > keep * 4 {
            self.cluster.commit_index.shrink_to(keep);
        }
    }

    /// The store answered a commit: the frames now committed in order go out. A commit the
    /// store refused (after its own retries) is written all the same and kept here, so the
    /// client still gets it on this instance (a resume elsewhere may then miss it).
    fn commit_answered(
        &mut self,
        lsid: u64,
        seqs: std::ops::RangeInclusive<u64>,
        reply: &StoreReply,
    ) {
        if let StoreReply::Failed(e) = reply {
            self.out
                .push_back(ServerOutput::Event(super::ServerEvent::NotStored {
                    reason: e.0.clone(),
                }));
        }
        let Some(ls) = self.streams.stream_mut(&lsid) else {
            return;
        };
        ls.committed.extend(seqs);
        let sid = ls
            .session
            .and_then(|s| self.sessions.get(&s))
            .map(|s| s.id.clone());
        let mut out = Vec::new();
        while let Some((front, _)) = ls.uncommitted.front() {
            if !ls.committed.remove(front) {
                break;
            }
            if let Some((seq, frame)) = ls.uncommitted.pop_front() {
                out.push((seq, frame));
            }
        }
        let conn = ls.connection;
        let end = ls.uncommitted.is_empty() && ls.end_after_commit;
        let poll_close =
            ls.uncommitted.is_empty() && std::mem::take(&mut ls.poll_close_after_commit);
        if conn.is_some() && !out.is_empty() {
            ls.id_sent = true;
        }
        for (seq, frame) in out {
            if seq > 0
                && let Some(sid) = &sid
            {
                self.config
                    .event_store
                    .append(sid, lsid, seq, frame.clone());
            }
            if let Some(conn) = conn {
                self.write_raw(conn, frame);
            }
        }
        if poll_close && !end {
            self.release_for_polling(lsid);
        }
        if end && let Some(ls) = self.streams.stream_mut(&lsid) {
            ls.end_after_commit = false;
            if let Some(conn) = ls.connection.take() {
                self.end_exchange(conn);
            }
        }
    }

    /// A clustered request stream wrote its last response: tell the store, and (`true`) keep
    /// the connection until its last frames are committed and written.
    pub(crate) fn end_stream_in_cluster(&mut self, lsid: u64) -> bool {
        if self.config.cluster.is_none() {
            return false;
        }
        let retain = self.config.streams.finished_stream_retention;
        let Some(ls) = self.streams.stream(&lsid) else {
            return false;
        };
        let session = ls.session.filter(|s| self.sessions.get(s).is_some());
        let registered = ls.registered;
        let waiting = !ls.uncommitted.is_empty();
        if registered && let Some(session) = session {
            let (entry, slot) = self.pending_commit(lsid, session);
            self.cluster.commits[entry].streams[slot].end = Some(retain);
        }
        if waiting && let Some(ls) = self.streams.stream_mut(&lsid) {
            ls.end_after_commit = true;
        }
        waiting
    }

    /// A GET with another instance's `Last-Event-ID`: follow that stream from the store.
    /// The head waits for the store's first answer (an unknown stream gets 400).
    pub(crate) fn resume_remote(
        &mut self,
        conn: ExchangeId,
        session: SessionHandle,
        name: Box<str>,
        seq: u64,
        origin: Option<Box<str>>,
    ) {
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        let sid = s.id.clone();
        let version = s.version;
        let lsid = self.next();
        let mut ls = super::stream::LogicalStream::new(
            Some(session),
            StreamKind::Remote { name: name.clone() },
            Phase::Detached,
            true,
            version,
        );
        ls.connection = Some(conn);
        ls.origin = origin;
        ls.last_seq = seq;
        self.streams.insert_stream(lsid, ls);
        if let Some(s) = self.sessions.get_mut(&session) {
            s.work.streams.push(lsid);
            s.open_connections += 1;
        }
        self.streams.insert_exchange(
            conn,
            super::stream::Exchange::new(
                super::stream::ExchangeState::Attached(lsid),
                Some(session),
            ),
        );
        let op = StoreOp::FollowStream {
            session: sid,
            stream: name,
            after: seq,
        };
        let ticket = self.store_call(op, Call::FollowStream { lsid });
        if let Some(ls) = self.streams.stream_mut(&lsid) {
            ls.follow = Some(ticket);
        }
    }

    fn stream_followed(&mut self, ticket: Ticket, lsid: u64, reply: StoreReply) {
        let live = self
            .streams
            .stream(&lsid)
            .is_some_and(|l| l.follow == Some(ticket) && l.connection.is_some());
        if !live {
            self.cluster.calls.remove(&ticket);
            return;
        }
        let Some(ls) = self.streams.stream(&lsid) else {
            return;
        };
        let (Some(conn), StreamKind::Remote { name }) = (ls.connection, &ls.kind) else {
            return;
        };
        let name = name.clone();
        let origin = ls.origin.clone();
        let first = !ls.primed;
        let (events, end) = match reply {
            StoreReply::StreamEvents { events, end, .. } => (events, end),
            StoreReply::Failed(e) if first => {
                return self.refuse_remote(ticket, lsid, conn, origin, unavailable(&e));
            }
            _ => {
                // The store broke the follow: cut, so the client resumes again.
                self.cluster.calls.remove(&ticket);
                self.out
                    .push_back(ServerOutput::ResponseAbort { stream: conn });
                return self.disconnected(conn);
            }
        };
        if first {
            if matches!(end, Some(StreamEnd::Unknown)) {
                return self.refuse_remote(
                    ticket,
                    lsid,
                    conn,
                    origin,
                    ProtocolError::UnknownLastEventId,
                );
            }
            let Some(ls) = self.streams.stream_mut(&lsid) else {
                return;
            };
            ls.primed = true;
            ls.step(super::stream::StreamEvent::Attach);
            ls.id_sent = true;
            let headers = self
                .streams
                .stream(&lsid)
                .map(|ls| self.sse_head(ls))
                .unwrap_or_default();
            self.out.push_back(ServerOutput::ResponseHead {
                stream: conn,
                status: http::StatusCode::OK,
                headers,
            });
            self.arm_heartbeat(conn);
            if let Some(sid) = self
                .streams
                .stream(&lsid)
                .and_then(|l| l.session)
                .and_then(|s| self.sessions.get(&s))
                .map(|s| s.id.clone())
            {
                let message = BusMessage::StreamResumed {
                    session: sid,
                    stream: name.clone(),
                };
                self.store_call(StoreOp::Broadcast { message }, Call::Detached);
            }
        }
        let mut chunks = Vec::new();
        if let Some(ls) = self.streams.stream_mut(&lsid) {
            for e in events {
                if e.seq <= ls.last_seq {
                    continue; // written already
                }
                ls.last_seq = e.seq;
                chunks.push(event_frame(Some(&format!("{name}-{}", e.seq)), &e.payload));
            }
        }
        let lost = match &end {
            Some(StreamEnd::OwnerGone { unanswered }) => unanswered.clone(),
            _ => Vec::new(),
        };
        for id in lost {
            // No id: these answers are this instance's, not events of the stream.
            let body = super::wire::error_body(
                Some(id),
                crate::jsonrpc::error_codes::INTERNAL_ERROR,
                "the server instance running this request stopped before answering it",
            );
            chunks.push(event_frame(None, &body));
        }
        for chunk in chunks {
            self.send_chunk(conn, chunk, true);
        }
        if end.is_some() {
            self.cluster.calls.remove(&ticket);
            if let Some(ls) = self.streams.stream_mut(&lsid) {
                ls.follow = None;
                ls.connection = None;
            }
            self.end_exchange(conn);
            self.drop_stream(lsid);
        }
    }

    fn refuse_remote(
        &mut self,
        ticket: Ticket,
        lsid: u64,
        conn: ExchangeId,
        origin: Option<Box<str>>,
        error: ProtocolError,
    ) {
        self.cluster.calls.remove(&ticket);
        if let Some(ls) = self.streams.stream_mut(&lsid) {
            ls.follow = None;
            ls.connection = None;
        }
        self.remove_exchange(conn);
        self.drop_stream(lsid);
        self.refuse(
            conn,
            error,
            origin.as_deref(),
            HeaderMap::new(),
            None,
            false,
        );
    }

    // ---- server→client requests and cancellation --------------------------------------

    /// Forwards the client's answer to the instance that asked.
    pub(crate) fn forward_response(
        &mut self,
        session: SessionHandle,
        instance: Box<str>,
        response: Response,
    ) {
        let Some(id) = self.sessions.get(&session).map(|s| s.id.clone()) else {
            return;
        };
        let message = BusMessage::ClientResponse {
            instance,
            session: id,
            response,
        };
        self.store_call(StoreOp::Broadcast { message }, Call::Detached);
    }

    /// `notifications/cancelled` for a request not running here: tell the others.
    pub(crate) fn broadcast_cancel(&mut self, session: SessionHandle, request: RequestId) {
        if self.config.cluster.is_none() {
            return;
        }
        let Some(id) = self.sessions.get(&session).map(|s| s.id.clone()) else {
            return;
        };
        let message = BusMessage::Cancel {
            session: id,
            request,
        };
        self.store_call(StoreOp::Broadcast { message }, Call::Detached);
    }

    /// Cancels the client request `id` of `session` if it runs here; `false` otherwise.
    pub(crate) fn cancel_client_request(&mut self, session: SessionHandle, id: &RequestId) -> bool {
        let Some(handle) = self
            .sessions
            .get(&session)
            .and_then(|s| s.work.inflight.get(id).copied())
        else {
            return false;
        };
        if self.inflight.get(&handle).is_some_and(|f| f.initialize) {
            return true; // S-CANCEL-2: initialize cannot be cancelled.
        }
        self.cancel_handle(handle, CancelReason::ClientCancelled);
        true
    }
}

/// The event id of `seq` in a listen log.
pub(crate) fn listen_event_id(seq: u64) -> String {
    format!("l-{seq}")
}

fn touch_interval(c: &ClusterConfig, ttl: Option<Duration>) -> Duration {
    c.touch_interval
        .or(ttl.map(|t| t / 4))
        .unwrap_or(Duration::from_secs(60))
        .max(Duration::from_millis(1))
}

fn record_of(s: &Session) -> SessionRecord {
    SessionRecord {
        id: s.id.clone(),
        principal: s.principal.clone(),
        version: s.version,
        state: s.share.state.clone(),
    }
}

fn unavailable(e: &StoreError) -> ProtocolError {
    ProtocolError::StoreUnavailable(e.0.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_call_table() {
        let t0 = Instant::now();
        let at = t0 + Duration::from_secs(5);
        let mut state = ClusterState::default();
        let mut timers = TimerQueue::default();
        // Detached: not kept, no deadline; its answer finds nobody.
        let detached = state.call(Call::Detached, Some(at), &mut timers);
        assert!(state.answered(detached, &mut timers).is_none());
        assert_eq!(timers.len(), 0);
        // Waiting: a deadline armed, disarmed by the answer, which takes the call out.
        let save = state.call(
            Call::Save {
                session: SessionHandle(1),
            },
            Some(at),
            &mut timers,
        );
        assert_eq!(timers.next(), Some(at));
        assert!(matches!(
            state.answered(save, &mut timers),
            Some(Call::Save { .. })
        ));
        assert_eq!(timers.len(), 0);
        assert!(state.answered(save, &mut timers).is_none(), "answered once");
        // Following: no deadline, kept across answers.
        let follow = state.call(Call::Follow { lsid: 7 }, Some(at), &mut timers);
        assert_eq!(timers.len(), 0);
        for _ in 0..2 {
            assert!(matches!(
                state.answered(follow, &mut timers),
                Some(Call::Follow { lsid: 7 })
            ));
        }
        // A deadline that fired: the call is due (its Failed answer then takes it out), and
        // nothing is left armed.
        let load = state.call(
            Call::Load {
                session: "s".into(),
            },
            Some(at),
            &mut timers,
        );
        assert_eq!(timers.pop_due(at), Some((at, Timer::StoreDeadlines)));
        assert_eq!(state.deadlines_due(at, &mut timers), [load]);
        assert!(matches!(
            state.answered(load, &mut timers),
            Some(Call::Load { .. })
        ));
        assert_eq!(timers.len(), 0);
    }

    /// The store calls' deadlines are one line with one timer for its first: calls made
    /// while others wait add no timer; answered ones leave from the front (one answered out
    /// of order is skipped when the line reaches it); what is due when the timer fires is
    /// the waiting calls past their deadline, in order, and the timer moves to the next.
    #[test]
    fn the_store_deadlines_are_one_line_with_one_timer() {
        let t0 = Instant::now();
        let s = |n| Duration::from_secs(n);
        let mut state = ClusterState::default();
        let mut timers = TimerQueue::default();
        let save = |n| Call::Save {
            session: SessionHandle(n),
        };
        let a = state.call(save(1), Some(t0 + s(5)), &mut timers);
        let b = state.call(save(2), Some(t0 + s(6)), &mut timers);
        let c = state.call(save(3), Some(t0 + s(7)), &mut timers);
        let d = state.call(save(4), Some(t0 + s(8)), &mut timers);
        assert_eq!(timers.len(), 1, "one timer for the line");
        assert_eq!(timers.next(), Some(t0 + s(5)));
        // b is answered out of order: the line keeps it until its front gets there.
        assert!(state.answered(b, &mut timers).is_some());
        assert_eq!(timers.next(), Some(t0 + s(5)));
        // a is answered: the front moves past a and b; the timer stays where it was (no
        // operation on the set per answer) and finds nothing due there.
        assert!(state.answered(a, &mut timers).is_some());
        assert_eq!(timers.len(), 1);
        assert_eq!(
            timers.pop_due(t0 + s(5)),
            Some((t0 + s(5), Timer::StoreDeadlines))
        );
        assert_eq!(state.deadlines_due(t0 + s(5), &mut timers), []);
        assert_eq!(timers.next(), Some(t0 + s(7)), "armed for c");
        // At 8 s c and d are both due, in order.
        assert!(timers.pop_due(t0 + s(8)).is_some());
        assert_eq!(state.deadlines_due(t0 + s(8), &mut timers), [c, d]);
        assert_eq!(timers.len(), 0);
        for t in [c, d] {
            assert!(state.answered(t, &mut timers).is_some());
        }
        assert_eq!(state.waiting(), 0);
        // A deadline earlier than the last one in line (the clock passed twice) waits
        // behind it; the line empties, and its timer goes, with the last answer.
        let e = state.call(save(5), Some(t0 + s(20)), &mut timers);
        let f = state.call(save(6), Some(t0 + s(19)), &mut timers);
        assert!(state.answered(e, &mut timers).is_some());
        assert_eq!(timers.len(), 1);
        assert!(state.answered(f, &mut timers).is_some());
        assert_eq!(timers.len(), 0);
    }
}
