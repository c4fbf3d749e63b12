//! A [`ClusterBackend`] on Redis (feature `redis`), runtime-neutral: it takes the driver's
//! [`Runtime`] (spawn, timers, clock) and a [`Dial`] function of the adapter's (a TCP stream
//! with tokio's I/O traits: `mcp-tokio` dials a tokio `TcpStream`, `mcp-smol` wraps a smol one
//! with tokio-util's `compat`). It matches [`MemoryCluster`](mcp_proto::server::MemoryCluster),
//! the reference semantics, operation for operation.
//!
//! # One link, one worker
//!
//! Each connected router ([`ClusterBackend::connect`]) gets one worker task and one
//! multiplexed RESP3 connection, used for commands *and* publish/subscribe. The seam asks
//! that one session's operations be applied in submission order, and nothing more; so the
//! worker puts each operation in its session's **lane** (the service notices, which name no
//! session, share one lane: one instance's notices stay in order) and runs
//!
//! - one *batch* at a time per lane: the stateless operations at the lane's head (those that
//!   need none of the worker's state, one command each, answered from its reply alone: all
//!   but the follows, `Unfollow` and `Delete`), at most 64, sent as one pipeline in
//!   submission order (one write and one deadline for the batch, the replies read in order:
//!   Redis runs one connection's commands in order); the lane's next batch starts after the
//!   answers to this one;
//! - the lanes' batches side by side, as futures in flight on the multiplexed connection,
//!   at most [`RedisConfig::max_in_flight`] operations at once (a lane waiting for a place
//!   queues for it in order);
//! - a listen-log follow's start (subscribe, cursor, first read) in flight too, alone in its
//!   lane's turn; the worker registers it when it comes back, and reads again if its
//!   session was woken in between (an event published after that read is not missed);
//! - the beat's renewal of the liveness key in flight: measured on one saturated core, a
//!   worker that waited for it inline stalled for the command timeout now and then, and the
//!   operations in flight timed out behind it;
//! - every other operation here, in its lane's turn, to its end (as are the retries, the
//!   dials, the wake-ups, the bus messages (RESP3 pushes) and the beat's follow reads,
//!   between the other inputs).
//!
//! A failed operation of a batch is attempted again, in order, only if no later one of its
//! batch was applied (a retry would overtake that one: it is answered `Failed` instead); the
//! scripts are loaded on every (re)connection before any operation runs, so an operation
//! never falls back to loading its script and being sent again behind the later ones. An
//! `Unfollow` whose follow still waits in its lane queues behind it. What a failed batch
//! says of the connection (broken, timing out) is acted on when its answers come back, and
//! only if it ran on the current connection.
//! [`RedisConfig::max_queued`] bounds what is submitted and not done (queued, in a lane or in
//! flight).
//!
//! # Key layout (prefix `p`, default `mcp`; session `s`)
//!
//! | key | type | content |
//! |---|---|---|
//! | `p:s:<s>` | string | the record (JSON), `PEXPIRE` = idle TTL |
//! | `p:sessions` | sorted set | live session ids, scored by expiry (ms, server clock; `+inf`: none): the cluster-wide cap |
//! | `p:log:<s>` | stream | the listen log, entry ids `<seq>-0`, field `p` = payload (and `g` = `1` when a message before it was lost), trimmed `MAXLEN =` capacity |
//! | `p:meta:<s>` | hash | `last` (the log's sequence counter), `cursor`, `o:<owner>` (the last ticket each link published: a repeat is not appended again) |
//! | `p:bus` | channel | [`BusMessage`](mcp_proto::server::BusMessage)s of every instance (JSON, with the sender's name) |
//! | `p:wake:<s>` | channel | "the log of `s` grew" (the followers then read with `XRANGE`) |
//! | `p:rss:<s>` | set | the names of the session's request streams |
//! | `p:rs:<s>:<name>` | stream | request stream `name`'s events, ids `<seq>-0`, field `p` |
//! | `p:rsm:<s>:<name>` | hash | `owner` (`<instance>:<incarnation>`), `requests` (JSON ids), `a:<id JSON>` per answered request, `finished` |
//! | `p:rsw:<s>:<name>` | channel | "request stream `name` grew or ended" |
//! | `p:rec:<key>` | hash | a service record ([`RecordOp`](mcp_proto::server::RecordOp), a task's state): `v` version, `d` bytes, `o` owner (`<instance>:<incarnation>`, whose liveness key tells whether it is alive); `PEXPIRE` set at creation |
//! | `p:inst:<owner>` | string | a link's liveness key, `PX` = [`RedisConfig::liveness_ttl`], renewed every third of it, deleted when the link is dropped |
//!
//! # Request streams
//!
//! CommitStreams is one script per operation: a session's request-stream writes of one
//! router turn, each stream's registration, events and end in order. An unfinished stream's
//! keys share the session record's expiry (Save and Touch renew them with it, walking
//! `p:rss:<s>`); its end sets the retention expiry; Delete removes them all. FollowStream
//! reads (one script) the record's existence, the hash, the owner's liveness key and the
//! events: no record or no stream answers [`StreamEnd::Unknown`] at once. A live follow reads again on every wake-up
//! of its stream's channel and on every beat (a third of the liveness TTL): an owner whose
//! liveness key is gone answers [`StreamEnd::OwnerGone`] with its requests not answered. The
//! detection delay: a link dropped in order deletes its key, so at most one beat; a crashed
//! process, at most the liveness TTL plus one beat after its last renewal. A live owner cut
//! off from Redis (or whose worker is held up) longer than the TTL looks gone to followers.
//!
//! Create, Save, Touch, Delete, Publish and Delivered are Lua scripts (atomic); the log, its
//! hash and the record share one expiry. A follow subscribes to its session's wake-up channel
//! *before* reading, then reads from the last sequence number it answered on every wake-up and
//! after every reconnect: an event may be read twice (the router deduplicates), never skipped.
//!
//! # Failures
//!
//! Every command races [`RedisConfig::command_timeout`]; a failed attempt is retried
//! [`RedisConfig::retries`] times after [`RedisConfig::retry_backoff`] (doubling), except that
//! an operation that is not idempotent (Create, Broadcast) is not repeated once it may have
//! reached Redis; then the answer is [`StoreReply::Failed`]. (Publish is repeated: its script
//! keeps each link's last ticket per session, `o:<owner>` in `p:meta:<s>`, and appends a
//! repeat no second time; CommitStreams appends only events past a stream's last.) An append
//! (Publish, CommitStreams) whose attempts all failed is not answered yet: it is held at the
//! head of its session's lane with what its batch held behind it, and attempted again after
//! a pause, until it is applied or [`RedisConfig::append_hold`] has passed (then `Failed`:
//! for a publish the router marks the loss in the log). Nothing of its session overtakes
//! it, so an event caught in a cut is neither dropped nor appended out of order (the
//! publish script's repeat check needs the session's publishes in ticket order, and a
//! repeated registration would drop a stream's later events). A broken connection is
//! re-dialed with a backoff (from `retry_backoff`, doubling, at most
//! [`RedisConfig::reconnect_backoff_max`]); while a re-dial is not due, operations fail at
//! once. After a reconnect the worker subscribes again, calls
//! [`ClusterInbox::bus_lost`], and reads every live follow again; follows that cannot be
//! resumed within [`RedisConfig::follow_grace`] are answered `Failed`. A value in Redis that
//! does not decode is answered `Failed`, never a panic.
//!
//! Those decisions about the connection — when a dial is due, the backoff, when timeouts in
//! a row or a break lose it, a recovery, the follows' grace — are one sans-IO machine, its
//! state table in the `link` module, time passed in, tested on a virtual clock; the worker
//! only dials, subscribes and runs commands, and holds the connection exactly while that
//! machine says it is up. Likewise sans-IO, tested without a server: the order of the
//! operations (their lanes, batches, places in flight, an `Unfollow` behind its follow) is
//! the `lanes` module's; the follows (the live ones and their last answers, the wake-up
//! channels they use, subscribed by the first and unsubscribed after the last, what a
//! wake-up, a beat or a recovery makes them read, and which events of a read go out: those
//! after the last answered) are the `follows` module's; and the command each operation
//! sends and what its reply means are the `plan` module's (the scripts in `scripts`, the
//! key names and encodings in `wire`); the worker sends what they say, performs the turns
//! they start and the reads they ask for, and holds no follow of its own. A link's
//! incarnation (its owner name's random part) is drawn by the backend, not the worker
//! ([`RedisBackend::with_incarnations`]).
//!
//! [`StreamEnd::Unknown`]: mcp_proto::server::StreamEnd::Unknown
//! [`StreamEnd::OwnerGone`]: mcp_proto::server::StreamEnd::OwnerGone
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_channel::mpsc;
use futures_core::Stream;
use futures_util::stream::FuturesUnordered;
use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, ConnectionAddr, IntoConnectionInfo, ProtocolVersion, PushInfo, PushKind,
    RedisConnectionInfo, Value,
};

use mcp_driver::{ClusterBackend, ClusterInbox, Runtime, StoreLink};

mod follows;
mod lanes;
mod link;
mod plan;
mod scripts;
mod spent;
mod wire;
use follows::{FollowEffects, FollowEvent, Follows, Read};
use lanes::{Lane, Lanes, Start, Submitted, is_stateless};
use link::{LinkEffect, LinkEvent, LinkLimits, LinkMachine, LinkState};
use mcp_proto::server::{FollowFrom, LogEvent, StoreError, StoreOp, StoreReply, Ticket};
use mcp_service::server::BoxFuture;
use plan::{
    Fail, LinkTrouble, Planner, Request, decode_cursor, decode_int, decode_log, decode_unit,
};
use scripts::Scripts;
use spent::Spent;
use wire::{StreamRead, bulk, decode_bus};

/// A byte stream to Redis, with tokio's I/O traits (what the `redis` crate's codec reads).
pub trait RedisIo: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static {}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static> RedisIo for T {}

/// Opens a new connection to the Redis server (the adapter's TCP dial). Called again after
/// every loss, under [`RedisConfig::connect_timeout`].
pub type Dial =
    Arc<dyn Fn() -> BoxFuture<'static, std::io::Result<Box<dyn RedisIo>>> + Send + Sync>;

/// A [`ClusterBackend`] on the Redis server at `url`
/// (`redis://[user:password@]host[:port][/db]`) on `runtime`, dialing with `connect(host,
/// port)` (the adapter's TCP connect; it should set `TCP_NODELAY`). What each adapter's
/// `redis_backend` calls.
///
/// # Errors
///
/// A URL that does not parse, or is not `redis://` over TCP.
pub fn backend<R, F, Fut>(
    runtime: R,
    url: &str,
    config: RedisConfig,
    connect: F,
) -> Result<Arc<dyn ClusterBackend>, RedisUrlError>
where
    R: Runtime,
    F: Fn(Arc<str>, u16) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = std::io::Result<Box<dyn RedisIo>>> + Send + 'static,
{
    let target = RedisTarget::parse(url)?;
    let host: Arc<str> = target.host.into();
    let port = target.port;
    let dial: Dial = Arc::new(move || Box::pin(connect(host.clone(), port)));
    Ok(Arc::new(RedisBackend::new(
        runtime,
        target.info,
        dial,
        config,
    )))
}

/// The limits and names of a [`RedisBackend`]. Every field has a safe default
/// ([`RedisConfig::default`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RedisConfig {
    /// The prefix of every key and channel (several clusters can share one Redis). Default
    /// `mcp`.
    pub prefix: String,
    /// The deadline of one command (and of the handshake after a dial). Default 2 s.
    pub command_timeout: Duration,
    /// The deadline of one dial. Default 2 s.
    pub connect_timeout: Duration,
    /// Retries of a failed attempt (so at most `1 + retries` attempts). Default 2.
    pub retries: u32,
    /// The pause before the first retry (doubling for the next). Default 50 ms.
    pub retry_backoff: Duration,
    /// The longest pause between two dials of a lost connection. Default 2 s.
    pub reconnect_backoff_max: Duration,
    /// How long follows survive a lost connection before they are answered `Failed`.
    /// Default 5 s.
    pub follow_grace: Duration,
    /// How long an append to a log is kept once its attempts (`1 + retries`) have failed:
    /// a publish to a listen log, or a commit of request streams' events. It is held at the
    /// head of its session's lane (nothing of the session overtakes it, so the logs keep
    /// their order) and attempted again after a pause (the retry backoff, doubling, at most
    /// `reconnect_backoff_max`), counted from its first hold. Past it the append is answered
    /// `Failed`: for a publish the router marks the loss in the log for the client (an
    /// `events-lost` event); a commit's events are written to their client unstored, and a
    /// resume elsewhere misses them. Default 3 s: a cut connection is dialed again within
    /// it. It counts from the first hold, after the attempts: with a connection that is
    /// down the attempts fail at once (≈ 150 ms) and the hold ends before the router's
    /// default store timeout (5 s); attempts that time out (`command_timeout`, 2 s each)
    /// can outlast that timeout, and then the router gives up first (a publish's gap is
    /// marked even if the message is appended later: a client may be told of a loss it did
    /// not have). 0: not held.
    pub append_hold: Duration,
    /// Operations submitted on one link and not yet done (queued, waiting in their session's
    /// lane, or in flight), at most; beyond, an operation is answered `Failed` at once: a
    /// burst the store cannot absorb is refused at once rather than queued past the router's
    /// store timeout. Default 32,768: measured on one saturated core (the benchmark docs), a
    /// link there drains ≈ 11,000 operations a second, so a full queue waits about 3 s,
    /// within the router's 5 s store deadline, and a burst of 10,000 streaming calls (each
    /// opening a stream, then appending to it) fits without a refusal.
    pub max_queued: usize,
    /// `(busy_above, calm_below)`: when the operations not yet done (as
    /// [`max_queued`](Self::max_queued) counts them) reach `busy_above`, the link says it is
    /// busy (`StoreLink::busy`, asked as each request comes in) and the router pushes new
    /// requests back (503 with `Retry-After`) until they fall to `calm_below`. Default
    /// `None` (the link never says so; the router's own bound,
    /// `ClusterConfig::max_store_backlog`, still applies): measured on one saturated core,
    /// a link whose queue stays high while failed operations wait for their retries keeps
    /// pushing back long after the burst, and more calls fail than without (see the
    /// benchmark docs); turn it on where the link drains faster than requests come.
    pub pressure_marks: Option<(usize, usize)>,
    /// Operations in flight on the link's connection at once (pipelined: each session's
    /// sent in submission order, its next ones after the answers to these; different
    /// sessions' side by side). 1 runs every operation after the previous one's answer.
    /// Default 1,024, at least 1: with Redis on a busy core a round trip takes 20–200 ms, and
    /// at 256 the places in flight, not Redis, bounded what a link drained.
    pub max_in_flight: usize,
    /// Log events read by one `XRANGE` (a longer backlog is answered in several answers).
    /// Default 256.
    pub read_batch: usize,
    /// How long an instance counts as alive without renewing its liveness key
    /// (`p:inst:<instance>:<incarnation>`); the worker renews it every third of this. A
    /// follower of a request stream whose owner's key is gone answers
    /// [`StreamEnd::OwnerGone`]: a crashed owner is detected at most this long plus a third of
    /// it after its last renewal (a link dropped in order deletes its key, detected within a
    /// third). Too short, a slow Redis or a busy worker can make a live owner look dead.
    /// Default 5 s, at least 30 ms.
    ///
    /// [`StreamEnd::OwnerGone`]: mcp_proto::server::StreamEnd::OwnerGone
    pub liveness_ttl: Duration,
}

impl Default for RedisConfig {
    fn default() -> Self {
        RedisConfig {
            prefix: "mcp".into(),
            command_timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(2),
            retries: 2,
            retry_backoff: Duration::from_millis(50),
            reconnect_backoff_max: Duration::from_secs(2),
            follow_grace: Duration::from_secs(5),
            append_hold: Duration::from_secs(3),
            max_queued: 32_768,
            pressure_marks: None,
            max_in_flight: 1024,
            read_batch: 256,
            liveness_ttl: Duration::from_secs(5),
        }
    }
}

impl RedisConfig {
    /// Sets [`prefix`](Self::prefix).
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets [`command_timeout`](Self::command_timeout) (at least 1 ms).
    pub fn with_command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Sets [`retries`](Self::retries).
    pub fn with_retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// Sets [`append_hold`](Self::append_hold).
    pub fn with_append_hold(mut self, hold: Duration) -> Self {
        self.append_hold = hold;
        self
    }

    /// Sets [`follow_grace`](Self::follow_grace).
    pub fn with_follow_grace(mut self, grace: Duration) -> Self {
        self.follow_grace = grace;
        self
    }

    /// Sets [`liveness_ttl`](Self::liveness_ttl) (at least 30 ms).
    pub fn with_liveness_ttl(mut self, ttl: Duration) -> Self {
        self.liveness_ttl = ttl.max(Duration::from_millis(30));
        self
    }

    /// Sets [`max_in_flight`](Self::max_in_flight) (at least 1).
    pub fn with_max_in_flight(mut self, max: usize) -> Self {
        self.max_in_flight = max.max(1);
        self
    }

    /// Sets [`max_queued`](Self::max_queued).
    pub fn with_max_queued(mut self, max: usize) -> Self {
        self.max_queued = max;
        self
    }

    /// Sets [`pressure_marks`](Self::pressure_marks) (`calm_below` at most `busy_above`).
    pub fn with_pressure_marks(mut self, busy_above: usize, calm_below: usize) -> Self {
        self.pressure_marks = Some((busy_above, calm_below.min(busy_above)));
        self
    }

    /// Sets [`reconnect_backoff_max`](Self::reconnect_backoff_max).
    pub fn with_reconnect_backoff_max(mut self, max: Duration) -> Self {
        self.reconnect_backoff_max = max;
        self
    }
}

/// A `redis://` URL that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unusable Redis URL: {0}")]
pub struct RedisUrlError(pub Box<str>);

/// Where a Redis URL points: the TCP host and port to dial, and the handshake settings
/// (database, user, password). Only `redis://` over TCP is supported.
#[derive(Debug, Clone)]
pub struct RedisTarget {
    /// The host to dial.
    pub host: String,
    /// The port to dial.
    pub port: u16,
    /// The handshake settings (RESP3 is forced by the backend).
    pub info: RedisConnectionInfo,
}

impl RedisTarget {
    /// Parses `redis://[user:password@]host[:port][/db]` (the `redis` crate's parser).
    ///
    /// # Errors
    ///
    /// A URL that does not parse, or names TLS or a Unix socket.
    pub fn parse(url: &str) -> Result<RedisTarget, RedisUrlError> {
        let info = url
            .into_connection_info()
            .map_err(|e| RedisUrlError(e.to_string().into()))?;
        match info.addr() {
            ConnectionAddr::Tcp(host, port) => Ok(RedisTarget {
                host: host.clone(),
                port: *port,
                info: info.redis_settings().clone(),
            }),
            _ => Err(RedisUrlError("only redis:// over TCP is supported".into())),
        }
    }
}

/// Draws a link's incarnation: a number that differs between processes and between the
/// links of one process (no two incarnations of one instance name may share a liveness
/// key). [`RedisBackend::with_incarnations`] sets it.
type Incarnations = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The Redis [`ClusterBackend`] (see the module docs).
pub struct RedisBackend<R: Runtime> {
    runtime: R,
    info: RedisConnectionInfo,
    dial: Dial,
    config: Arc<RedisConfig>,
    incarnations: Incarnations,
}

impl<R: Runtime> RedisBackend<R> {
    /// A backend dialing with `dial`, handshaking with `info`, on `runtime`; its links'
    /// incarnations are random ([`with_incarnations`](Self::with_incarnations)).
    pub fn new(runtime: R, info: RedisConnectionInfo, dial: Dial, config: RedisConfig) -> Self {
        RedisBackend {
            runtime,
            info: info.set_protocol(ProtocolVersion::RESP3),
            dial,
            config: Arc::new(config),
            incarnations: Arc::new(random_incarnation),
        }
    }

    /// Draws each link's incarnation (its owner name in request streams is
    /// `<instance>:<incarnation>`, in 16 hex digits) from `source` instead of the operating
    /// system's random numbers: for tests that want fixed names, or a runtime of one's own
    /// entropy. Every link of every process of the cluster must draw a different number.
    ///
    /// The entropy is an input, not read by the worker, so that the worker decides nothing
    /// from the environment; the source is given to the backend (not to [`RedisConfig`] or
    /// [`backend`]) so that their callers, the adapters, need not change.
    pub fn with_incarnations(mut self, source: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        self.incarnations = Arc::new(source);
        self
    }
}

impl<R: Runtime> RedisBackend<R> {
    /// The worker of a new link of `instance`, incarnation `incarnation` (drawn by the
    /// caller: the worker reads no entropy).
    fn worker(
        &self,
        instance: &str,
        inbox: ClusterInbox,
        incarnation: u64,
        push_tx: mpsc::UnboundedSender<(u64, PushInfo)>,
        queued: Arc<AtomicUsize>,
        spent: Arc<Spent>,
    ) -> Worker<R> {
        let now = self.runtime.now();
        let planner = Planner::new(
            &self.config.prefix,
            instance,
            &owner_name(instance, incarnation),
            self.config.read_batch,
            self.config.liveness_ttl,
        );
        // Their channels named as the planner names them, a full read as it counts one.
        let follows = Follows::new(&self.config.prefix, planner.read_batch());
        Worker {
            rt: self.runtime.clone(),
            cfg: self.config.clone(),
            info: self.info.clone(),
            dial: self.dial.clone(),
            instance: instance.into(),
            inbox,
            planner: Arc::new(planner),
            scripts: Arc::new(Scripts::new()),
            conn: None,
            lanes: Lanes::new(self.config.max_in_flight),
            in_flight: FuturesUnordered::new(),
            push_tx,
            link: LinkMachine::new(
                LinkLimits {
                    retries: self.config.retries,
                    retry_backoff: self.config.retry_backoff,
                    reconnect_backoff_max: self.config.reconnect_backoff_max,
                    follow_grace: self.config.follow_grace,
                },
                now,
            ),
            follows,
            next_beat: now,
            queued,
            spent,
            answered: Vec::new(),
            held: HashMap::new(),
            holds: Vec::new(),
        }
    }
}

impl<R: Runtime> ClusterBackend for RedisBackend<R> {
    fn connect(&self, instance: &str, inbox: ClusterInbox) -> Box<dyn StoreLink> {
        let (ops_tx, ops_rx) = mpsc::unbounded();
        let (push_tx, push_rx) = mpsc::unbounded();
        let queued = Arc::new(AtomicUsize::new(0));
        let spent = Arc::new(Spent::default());
        let incarnation = (self.incarnations)();
        let worker = self.worker(
            instance,
            inbox.clone(),
            incarnation,
            push_tx,
            queued.clone(),
            spent.clone(),
        );
        self.runtime.spawn(Box::pin(worker.run(ops_rx, push_rx)));
        Box::new(RedisLink {
            ops: ops_tx,
            queued,
            max_queued: self.config.max_queued,
            inbox,
            cfg: self.config.clone(),
            busy: false,
            spent,
            dropping: Vec::new(),
        })
    }
}

struct RedisLink {
    ops: mpsc::UnboundedSender<(Ticket, StoreOp)>,
    queued: Arc<AtomicUsize>,
    max_queued: usize,
    inbox: ClusterInbox,
    cfg: Arc<RedisConfig>,
    /// Whether [`StoreLink::busy`] said so last ([`busy_now`]'s hysteresis).
    busy: bool,
    /// The operations the worker is done with, dropped here (on the submitting thread).
    spent: Arc<Spent>,
    /// The list they are dropped from (its room swapped with the worker's).
    dropping: Vec<StoreOp>,
}

impl StoreLink for RedisLink {
    fn submit(&mut self, _now: Instant, ticket: Ticket, op: StoreOp) {
        self.spent.drop_here(&mut self.dropping);
        let answered = !matches!(op, StoreOp::Unfollow { .. });
        if self.queued.load(Ordering::Relaxed) >= self.max_queued {
            if answered {
                let e = StoreError("too many store operations queued".into());
                let _ = self.inbox.reply(ticket, StoreReply::Failed(e));
            }
            return;
        }
        self.queued.fetch_add(1, Ordering::Relaxed);
        if self.ops.unbounded_send((ticket, op)).is_err() && answered {
            let e = StoreError("the store worker is gone".into());
            let _ = self.inbox.reply(ticket, StoreReply::Failed(e));
        }
    }

    /// Busy as [`RedisConfig::pressure_marks`] say (read where the operations not yet done
    /// are counted, as each request comes in).
    fn busy(&mut self) -> bool {
        let queued = self.queued.load(Ordering::Relaxed);
        let busy = busy_now(self.busy, queued, &self.cfg);
        if busy != self.busy {
            tracing::debug!(queued, busy, "the store link's queue");
            self.busy = busy;
        }
        busy
    }
}

/// Whether `op` may be repeated once it may have reached Redis (a Publish may: its script
/// recognises a repeat by the link's owner name and the ticket).
fn is_idempotent(op: &StoreOp) -> bool {
    !matches!(op, StoreOp::Create { .. } | StoreOp::Broadcast { .. })
}

/// A batch in flight ended: a lane's operations, in order, each with its outcome.
struct Done {
    lane: Lane,
    /// The connection it ran on (a failure of an older one says nothing of the current).
    generation: u64,
    ops: Vec<(Ticket, StoreOp, Result<StoreReply, Fail>)>,
}

/// A follow's start in flight ended: where it starts, and the first events read.
struct FollowDone {
    lane: Lane,
    generation: u64,
    ticket: Ticket,
    /// The operation (attempted again here if it failed).
    op: StoreOp,
    session: Box<str>,
    result: Result<(u64, Vec<LogEvent>), Fail>,
}

/// What comes back from flight.
enum Landed {
    Batch(Done),
    Follow(Box<FollowDone>),
    /// A beat's renewal of the liveness key.
    Renewed {
        generation: u64,
        result: Result<(), Fail>,
    },
}

/// What a stateless operation needs: cloned into its future when it runs in flight.
struct Stateless<R: Runtime> {
    rt: R,
    cfg: Arc<RedisConfig>,
    planner: Arc<Planner>,
    scripts: Arc<Scripts>,
}

enum Input {
    Op(Ticket, StoreOp),
    Done(Landed),
    Push(u64, PushInfo),
    Timer,
    Closed,
}

struct Worker<R: Runtime> {
    rt: R,
    cfg: Arc<RedisConfig>,
    info: RedisConnectionInfo,
    dial: Dial,
    instance: Arc<str>,
    inbox: ClusterInbox,
    /// What to send for each operation, and what its reply means.
    planner: Arc<Planner>,
    scripts: Arc<Scripts>,
    conn: Option<MultiplexedConnection>,
    /// The order of the operations: their lanes, the places in flight (at most
    /// [`RedisConfig::max_in_flight`] operations), the follows an `Unfollow` queues behind.
    lanes: Lanes,
    /// The batches and follow starts in flight on the connection (as [`Lanes`] started
    /// them).
    in_flight: FuturesUnordered<BoxFuture<'static, Landed>>,
    push_tx: mpsc::UnboundedSender<(u64, PushInfo)>,
    /// The connection's life: when to dial, backoff, when it is lost, the follows' grace,
    /// which dial it is (pushes of older ones are ignored). `conn` is `Some` exactly while
    /// the machine is `Subscribing` or `Up`.
    link: LinkMachine,
    /// The follows: live ones and their last answers, starts in flight, the wake-up
    /// channels they use, what a wake-up, a beat or a recovery makes them read.
    follows: Follows,
    /// When the liveness key is renewed and the stream follows are checked next.
    next_beat: Instant,
    /// Operations submitted and not yet done (the link refuses more than
    /// [`RedisConfig::max_queued`]).
    queued: Arc<AtomicUsize>,
    /// Where answered operations go to be dropped on the submitting thread ([`Spent`]).
    spent: Arc<Spent>,
    /// A batch's answered operations, handed to `spent` together (its room kept).
    answered: Vec<StoreOp>,
    /// The appends held after their attempts failed ([`RedisConfig::append_hold`]):
    /// since when, and the holds so far (for the pause).
    held: HashMap<Ticket, (Instant, u32)>,
    /// The lanes held ([`Lanes::hold`]), and when each goes on.
    holds: Vec<(Instant, Lane)>,
}

/// Whether the link is busy with `queued` operations not yet done, having been `was` (a
/// hysteresis on [`RedisConfig::pressure_marks`]: busy from `busy_above` on, until at most
/// `calm_below`; never without marks).
fn busy_now(was: bool, queued: usize, cfg: &RedisConfig) -> bool {
    match cfg.pressure_marks {
        None => false,
        Some((_, calm_below)) if was => queued > calm_below,
        Some((busy_above, _)) => queued >= busy_above,
    }
}

/// The default source of incarnations: the operating system's random numbers; should they fail,
/// a hash of a per-process link counter, the process id and the time.
fn random_incarnation() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    if let Ok(n) = getrandom::u64() {
        return n;
    }
    static LINKS: AtomicUsize = AtomicUsize::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_usize(LINKS.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish()
}

/// Link `incarnation`'s owner name in request streams: its liveness key is
/// `p:inst:<owner>` (a restarted instance of the same name is another owner).
fn owner_name(instance: &str, incarnation: u64) -> String {
    format!("{instance}:{incarnation:016x}")
}

impl<R: Runtime> Worker<R> {
    async fn run(
        mut self,
        mut ops: mpsc::UnboundedReceiver<(Ticket, StoreOp)>,
        mut pushes: mpsc::UnboundedReceiver<(u64, PushInfo)>,
    ) {
        loop {
            let timer = self
                .link
                .deadline()
                .map_or(self.next_beat, |due| due.min(self.next_beat));
            let timer = self.holds.iter().fold(timer, |t, (due, _)| t.min(*due));
            match self.next_input(&mut ops, &mut pushes, Some(timer)).await {
                Input::Op(ticket, op) => self.submit(ticket, op).await,
                Input::Done(Landed::Batch(done)) => self.finish(done).await,
                Input::Done(Landed::Follow(done)) => self.follow_landed(done).await,
                Input::Done(Landed::Renewed { generation, result }) => {
                    if generation == self.link.generation() {
                        self.note(result.as_ref().map(|_| ()));
                    }
                    if let Err(f) = result {
                        tracing::debug!(why = f.why, "renewing the liveness key failed");
                    }
                }
                Input::Push(generation, push) => self.on_push(generation, push).await,
                Input::Timer => {
                    if self.link.dial_due(self.rt.now()) {
                        self.redial_idle().await;
                    }
                    self.resume_holds().await;
                    if self.rt.now() >= self.next_beat {
                        self.beat().await;
                    }
                }
                Input::Closed => {
                    // Gone in order: the owned streams' followers need not wait for the TTL.
                    if let Some(mut con) = self.conn.clone() {
                        let req = self.planner.drop_liveness();
                        let _ = self.query(&mut con, &req, decode_int).await;
                    }
                    return;
                }
            }
        }
    }

    /// An operation is done: one fewer not yet done.
    fn done_one(&self) {
        self.queued.fetch_sub(1, Ordering::Relaxed);
    }

    fn stateless(&self) -> Stateless<R> {
        Stateless {
            rt: self.rt.clone(),
            cfg: self.cfg.clone(),
            planner: self.planner.clone(),
            scripts: self.scripts.clone(),
        }
    }

    /// Queues `op` in its lane and starts what the lane can start.
    async fn submit(&mut self, ticket: Ticket, op: StoreOp) {
        match self.lanes.submit(ticket, op) {
            Submitted::Queued(lane) => self.run_lane(lane).await,
            Submitted::Now(ticket, op) => {
                // An `Unfollow`: never held.
                let held = self.execute(ticket, op).await;
                debug_assert!(held.is_none());
                self.done_one();
            }
        }
    }

    /// Performs `lane`'s next turns ([`Lanes::next`]) while it is free: a batch or a
    /// follow's start goes in flight; any other operation runs here to its end. With no
    /// connection every operation runs here (its attempts dial). Bounded: each turn run
    /// here takes an operation off the lane, and nothing is queued meanwhile.
    async fn run_lane(&mut self, lane: Lane) {
        while let Some(start) = self.lanes.next(&lane, self.conn.is_some()) {
            match start {
                Start::Batch(batch) => {
                    let Some(con) = self.conn.clone() else {
                        return; // not reached: `next` starts a batch only with a connection
                    };
                    let s = self.stateless();
                    let (generation, lane) = (self.link.generation(), lane.clone());
                    self.in_flight.push(Box::pin(async move {
                        let results = s.batch(con, &batch).await;
                        let ops = batch
                            .into_iter()
                            .zip(results)
                            .map(|((ticket, op), result)| (ticket, op, result))
                            .collect();
                        Landed::Batch(Done {
                            lane,
                            generation,
                            ops,
                        })
                    }));
                    return;
                }
                Start::Follow(ticket, op) => {
                    let (Some(con), StoreOp::Follow { session, from }) = (self.conn.clone(), &op)
                    else {
                        return; // not reached: `next` starts a follow only with a connection
                    };
                    let (session, from) = (session.clone(), *from);
                    let starting = FollowEvent::Starting { session: &session };
                    let subscribe = self.follows.on(starting).subscribe;
                    let s = self.stateless();
                    let (generation, lane) = (self.link.generation(), lane.clone());
                    self.in_flight.push(Box::pin(async move {
                        let result = s.follow_start(con, &session, from, subscribe).await;
                        Landed::Follow(Box::new(FollowDone {
                            lane,
                            generation,
                            ticket,
                            op,
                            session,
                            result,
                        }))
                    }));
                    return;
                }
                Start::Run(ticket, op) => {
                    if let Some((op, pause)) = self.execute(ticket, op).await {
                        self.hold(&lane, vec![(ticket, op)], pause);
                        return;
                    }
                    self.done_one();
                }
            }
        }
    }

    /// Registers follow `ticket` of `session` from `after` and answers it with `events`;
    /// reads again, on the connection there is, what [`Follows`] says (a full batch, or a
    /// wake-up before it was registered: what it announced may be past the first read).
    async fn follow_started(
        &mut self,
        ticket: Ticket,
        session: &str,
        after: u64,
        events: Vec<LogEvent>,
    ) {
        let started = FollowEvent::Started {
            ticket,
            session,
            after,
            events,
        };
        let fx = self.follows.on(started);
        let reads = self.perform(fx).await;
        if let Some(con) = self.conn.clone() {
            self.follow_reads(con, reads).await;
        }
    }

    /// A follow's start in flight ended: registered and answered (or attempted again here),
    /// then its lane goes on. Without a connection now, the reconnection reads it again.
    async fn follow_landed(&mut self, done: Box<FollowDone>) {
        let FollowDone {
            lane,
            generation,
            ticket,
            op,
            session,
            result,
        } = *done;
        if generation == self.link.generation() {
            self.note(result.as_ref().map(|_| ()));
        }
        match result {
            Ok((after, events)) => {
                self.follow_started(ticket, &session, after, events).await;
            }
            Err(f) => {
                let failed = FollowEvent::StartFailed { session: &session };
                let fx = self.follows.on(failed);
                debug_assert_eq!(fx, FollowEffects::default());
                // A follow: never held.
                let held = self.attempts(ticket, &op, 1, false, f.why).await;
                debug_assert!(held.is_none());
            }
        }
        self.done_one();
        self.lanes.landed(&lane, 1, Some(ticket));
        self.run_lane(lane).await;
        self.fill_places().await;
    }

    /// Lets the lanes that waited for a place in flight go, in order, while places are free.
    async fn fill_places(&mut self) {
        // Bounded: each lane leaves the line, and joins it again only when no place is free.
        while let Some(next) = self.lanes.next_waiting() {
            self.run_lane(next).await;
        }
    }

    /// A batch in flight ended: the answers, in order. A failed operation is attempted
    /// again (here, in order) only when no later one of the batch was applied (a retry would
    /// overtake it: then it is answered `Failed`). Then the lane's next operations, then
    /// the lanes that waited for a place in flight.
    async fn finish(&mut self, done: Done) {
        let Done {
            lane,
            generation,
            ops,
        } = done;
        let landed = ops.len();
        let last_applied = ops.iter().rposition(|(_, _, r)| r.is_ok());
        let mut noted_failure = false;
        let mut again = Vec::new();
        for (i, (ticket, op, result)) in ops.into_iter().enumerate() {
            // What the batch says of the connection: each answer, and its first failure
            // (the rest of a broken or silent batch fail with it).
            if generation == self.link.generation() && (result.is_ok() || !noted_failure) {
                noted_failure |= result.is_err();
                self.note(result.as_ref().map(|_| ()));
            }
            match result {
                Ok(reply) => {
                    self.unhold(ticket);
                    let _ = self.inbox.reply(ticket, reply);
                    self.answered.push(op);
                }
                Err(f) if last_applied.is_some_and(|l| l > i) => self.give_up(ticket, &f.why),
                Err(f) if f.sent && !is_idempotent(&op) => self.give_up(ticket, &f.why),
                Err(f) => {
                    again.push((ticket, op, f.why));
                    continue;
                }
            }
            self.done_one();
        }
        self.spent.give(&mut self.answered);
        // The operations failed together (one connection): one pause before their second
        // attempts, not one each (a batch of 64 would hold every lane for 64 pauses, past
        // the router's store timeout). A held append that failed again is held again at
        // once, and what follows it with it: this was its attempt.
        let held_first = again
            .first()
            .is_some_and(|(ticket, _, _)| self.held.contains_key(ticket));
        if !again.is_empty() && self.cfg.retries > 0 && !held_first {
            let pause = self.retry_pause(1);
            self.rt.sleep_until(self.rt.now() + pause).await;
        }
        let mut hold = None;
        let mut again = again.into_iter();
        while let Some((ticket, op, why)) = again.next() {
            let kept = if self.held.contains_key(&ticket) {
                self.hold_again(ticket, &op, &why)
            } else {
                self.attempts(ticket, &op, 1, true, why).await
            };
            if let Some(pause) = kept {
                // Held, and the rest of the batch behind it (they must not overtake it).
                let mut ops = vec![(ticket, op)];
                ops.extend(again.by_ref().map(|(ticket, op, _)| (ticket, op)));
                hold = Some((ops, pause));
                break;
            }
            self.done_one();
        }
        self.lanes.landed(&lane, landed, None);
        if let Some((ops, pause)) = hold {
            self.hold(&lane, ops, pause);
        }
        self.run_lane(lane).await;
        self.fill_places().await;
    }

    /// A failed `op` whose attempts are over: held ([`RedisConfig::append_hold`]) if it
    /// is an append (Publish, CommitStreams) within the hold since its first, with the
    /// pause before its next attempt; else (`None`) answered `Failed` for `why`.
    fn hold_again(&mut self, ticket: Ticket, op: &StoreOp, why: &str) -> Option<Duration> {
        if !matches!(op, StoreOp::Publish { .. } | StoreOp::CommitStreams { .. }) {
            self.give_up(ticket, why);
            return None;
        }
        let now = self.rt.now();
        let (since, holds) = self.held.entry(ticket).or_insert((now, 0));
        if now.saturating_duration_since(*since) >= self.cfg.append_hold {
            self.held.remove(&ticket);
            self.give_up(ticket, why);
            return None;
        }
        *holds += 1;
        let holds = *holds;
        Some(self.retry_pause(holds).min(self.cfg.reconnect_backoff_max))
    }

    /// A held operation is answered: no longer held.
    fn unhold(&mut self, ticket: Ticket) {
        if !self.held.is_empty() {
            self.held.remove(&ticket);
        }
    }

    /// Holds `lane` with `ops` back at its head ([`Lanes::hold`]) for `pause`.
    fn hold(&mut self, lane: &Lane, ops: Vec<(Ticket, StoreOp)>, pause: Duration) {
        tracing::debug!(
            instance = &*self.instance,
            ops = ops.len(),
            ?pause,
            "an append is held"
        );
        self.lanes.hold(lane, ops);
        self.holds.push((self.rt.now() + pause, lane.clone()));
    }

    /// The held lanes whose pause is over go on.
    async fn resume_holds(&mut self) {
        if self.holds.is_empty() {
            return;
        }
        let now = self.rt.now();
        let mut due = Vec::new();
        self.holds.retain(|(at, lane)| {
            let go = *at <= now;
            if go {
                due.push(lane.clone());
            }
            !go
        });
        for lane in due {
            self.lanes.resume(&lane);
            self.run_lane(lane).await;
        }
        self.fill_places().await;
    }

    fn beat_every(&self) -> Duration {
        (self.cfg.liveness_ttl / 3).max(Duration::from_millis(10))
    }

    /// Renews this link's liveness key.
    async fn renew_liveness(&mut self, mut con: MultiplexedConnection) -> Result<(), Fail> {
        let req = self.planner.renew_liveness();
        self.query(&mut con, &req, decode_unit).await
    }

    /// Every third of the liveness TTL: renew the liveness key, and read every stream follow
    /// again (its owner may be gone: no wake-up tells).
    async fn beat(&mut self) {
        self.next_beat = self.rt.now() + self.beat_every();
        let Ok(con) = self.connection().await else {
            return;
        };
        // In flight: the worker waits for no round trip of its own on a beat.
        let s = self.stateless();
        let (generation, req) = (self.link.generation(), self.planner.renew_liveness());
        let mut renewing = con.clone();
        self.in_flight.push(Box::pin(async move {
            let result = s.send(&mut renewing, &req).await.and_then(decode_unit);
            Landed::Renewed { generation, result }
        }));
        let fx = self.follows.on(FollowEvent::Beat);
        let reads = self.perform(fx).await;
        self.follow_reads(con, reads).await;
    }

    async fn next_input(
        &mut self,
        ops: &mut mpsc::UnboundedReceiver<(Ticket, StoreOp)>,
        pushes: &mut mpsc::UnboundedReceiver<(u64, PushInfo)>,
        timer: Option<Instant>,
    ) -> Input {
        let mut sleep = std::pin::pin!(timer.map(|t| self.rt.sleep_until(t)));
        let in_flight = &mut self.in_flight;
        std::future::poll_fn(|cx| {
            if let Poll::Ready(Some((g, p))) = Pin::new(&mut *pushes).poll_next(cx) {
                return Poll::Ready(Input::Push(g, p));
            }
            if !in_flight.is_empty()
                && let Poll::Ready(Some(done)) = Pin::new(&mut *in_flight).poll_next(cx)
            {
                return Poll::Ready(Input::Done(done));
            }
            match Pin::new(&mut *ops).poll_next(cx) {
                Poll::Ready(Some((t, op))) => return Poll::Ready(Input::Op(t, op)),
                Poll::Ready(None) => return Poll::Ready(Input::Closed),
                Poll::Pending => {}
            }
            match sleep.as_mut().as_pin_mut().map(|s| s.poll(cx)) {
                Some(Poll::Ready(_)) => Poll::Ready(Input::Timer),
                _ => Poll::Pending,
            }
        })
        .await
    }

    /// `fut` under the command timeout, noted ([`note`](Self::note)).
    async fn timed<T>(
        &mut self,
        fut: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, Fail> {
        let out = timed_on(&self.rt, self.cfg.command_timeout, fut).await;
        self.note(out.as_ref().map(|_| ()));
        out
    }

    /// Planned request `req` on `con` under the command timeout, its reply read by
    /// `decode`. What the sending says of the connection is noted ([`note`](Self::note)):
    /// a reply that arrived is an answer, whether or not it decodes.
    async fn query<T>(
        &mut self,
        con: &mut MultiplexedConnection,
        req: &Request,
        decode: impl FnOnce(Value) -> Result<T, Fail>,
    ) -> Result<T, Fail> {
        let timeout = self.cfg.command_timeout;
        let reply = send_on(&self.rt, timeout, &self.scripts, con, req).await;
        self.note(reply.as_ref().map(|_| ()));
        reply.and_then(decode)
    }

    /// What a command's outcome on the current connection says of it: an answer clears
    /// the timeouts in a row; a broken connection is lost; timing out again and again (more
    /// than the retries), the connection is likely dead silently.
    fn note(&mut self, outcome: Result<(), &Fail>) {
        let event = match outcome.map_err(|f| f.link) {
            Ok(()) => LinkEvent::Answered,
            // Redis answered an error, or its reply did not decode: nothing about the link.
            Err(LinkTrouble::None) => return,
            Err(LinkTrouble::Dropped) => LinkEvent::Dropped,
            Err(LinkTrouble::TimedOut) => LinkEvent::TimedOut,
        };
        if self.link.on(self.rt.now(), event) == LinkEffect::Lost {
            self.conn = None;
            tracing::warn!(instance = &*self.instance, "the Redis connection is lost");
            let _ = self.inbox.store_unreachable("the Redis connection is lost");
        }
    }

    /// A dial and the handshake, under their deadlines.
    async fn dial_once(&mut self) -> Result<MultiplexedConnection, Fail> {
        let dial = (self.dial)();
        let deadline = self.rt.now() + self.cfg.connect_timeout;
        let stream = race(&self.rt, deadline, dial)
            .await
            .ok_or_else(|| Fail::unsent("connecting timed out"))?
            .map_err(|e| Fail::unsent(format!("cannot connect: {e}")))?;
        let generation = self.link.generation();
        let tx = self.push_tx.clone();
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(None)
            .set_response_timeout(None)
            .set_push_sender(move |p: PushInfo| tx.unbounded_send((generation, p)));
        let info = self.info.clone();
        let deadline = self.rt.now() + self.cfg.command_timeout;
        let handshake = async move {
            let (con, driver) =
                MultiplexedConnection::new_with_config(&info, stream, config).await?;
            let driver: BoxFuture<'static, ()> = Box::pin(driver);
            Ok::<_, redis::RedisError>((con, driver))
        };
        let (con, driver) = race(&self.rt, deadline, handshake)
            .await
            .ok_or_else(|| Fail::unsent("the handshake timed out"))?
            .map_err(|e| Fail::unsent(format!("the handshake failed: {e}")))?;
        self.rt.spawn(driver);
        Ok(con)
    }

    /// The connection, dialing (and resubscribing) when it is lost and a dial is due.
    async fn connection(&mut self) -> Result<MultiplexedConnection, Fail> {
        debug_assert_eq!(
            self.conn.is_some(),
            matches!(self.link.state(), LinkState::Subscribing | LinkState::Up),
            "the connection is held exactly while the link machine says it is"
        );
        if let Some(c) = &self.conn {
            return Ok(c.clone());
        }
        match self.link.on(self.rt.now(), LinkEvent::DialStart) {
            LinkEffect::Dial { .. } => {}
            _ => return Err(Fail::unsent("the store is unreachable")),
        }
        let mut con = match self.dial_once().await {
            Ok(c) => c,
            Err(f) => {
                self.link.on(self.rt.now(), LinkEvent::DialFailed);
                let _ = self.inbox.store_unreachable(f.why.clone());
                return Err(f);
            }
        };
        self.link.on(self.rt.now(), LinkEvent::Dialed);
        let mut channels = vec![String::from(self.planner.keys().bus())];
        channels.extend(self.follows.channels());
        self.conn = Some(con.clone());
        self.timed(con.subscribe(channels)).await?;
        if self.conn.is_none() {
            return Err(Fail::unsent("the connection was lost while subscribing"));
        }
        // Every script loaded before any operation runs: an operation in a batch never falls
        // back to loading its script (which would send it again after the later ones).
        let scripts = self.scripts.clone();
        for script in scripts.all() {
            self.timed(script.load_async(&mut con)).await?;
        }
        let up = self.link.on(self.rt.now(), LinkEvent::Ready);
        let _ = self.inbox.store_reachable();
        if let Err(f) = self.renew_liveness(con.clone()).await {
            tracing::debug!(why = f.why, "renewing the liveness key failed");
        }
        if up == LinkEffect::Recovered {
            tracing::info!(instance = &*self.instance, "the Redis connection is back");
            let _ = self.inbox.bus_lost();
            // A failure leaves a follow for the next reconnect (a stream follow, the next
            // beat).
            let fx = self.follows.on(FollowEvent::Recovered);
            let reads = self.perform(fx).await;
            self.follow_reads(con.clone(), reads).await;
        }
        Ok(con)
    }

    /// The timer of a lost connection: dial again (the bus and the follows need it); end
    /// follows that waited longer than their grace.
    async fn redial_idle(&mut self) {
        if self.connection().await.is_ok() {
            return;
        }
        if self.link.on(self.rt.now(), LinkEvent::Tick) == LinkEffect::FollowsExpired {
            let fx = self.follows.on(FollowEvent::Expired);
            let _no_reads = self.perform(fx).await;
        }
    }

    async fn on_push(&mut self, generation: u64, push: PushInfo) {
        if generation != self.link.generation() {
            return;
        }
        match push.kind {
            PushKind::Disconnection => self.note(Err(&Fail::dropped("the connection closed"))),
            PushKind::Message => {
                let (Some(channel), Some(payload)) = (push.data.first(), push.data.get(1)) else {
                    return;
                };
                let (Some(channel), Some(payload)) = (bulk(channel), bulk(payload)) else {
                    return;
                };
                let Ok(channel) = std::str::from_utf8(channel) else {
                    return;
                };
                if self.planner.keys().bus() == *channel {
                    match decode_bus(payload) {
                        Some((from, message)) if *from != *self.instance => {
                            let _ = self.inbox.bus(message);
                        }
                        Some(_) => {}
                        None => tracing::warn!("a malformed bus message is ignored"),
                    }
                    return;
                }
                let fx = self.follows.on(FollowEvent::Woken { channel });
                let reads = self.perform(fx).await;
                self.woken_reads(reads).await;
            }
            _ => {}
        }
    }

    /// Reads a log after `after`, at most one batch.
    async fn read_log(
        &mut self,
        con: MultiplexedConnection,
        session: &str,
        after: u64,
    ) -> Result<Vec<LogEvent>, Fail> {
        let out = self.stateless().read_log(con, session, after).await;
        self.note(out.as_ref().map(|_| ()));
        out
    }

    /// The reads of a wake-up: a listen follow's on the connection (dialing if it is lost
    /// and a dial is due), a stream follow's on the connection there is.
    async fn woken_reads(&mut self, reads: Vec<Read>) {
        for read in reads {
            let con = match read {
                Read::Log { ticket, .. } => match self.connection().await {
                    Ok(con) => con,
                    Err(f) => {
                        tracing::debug!(why = f.why, "a follow read failed (retried later)");
                        let fx = self.follows.on(FollowEvent::ReadFailed { ticket });
                        debug_assert_eq!(fx, FollowEffects::default());
                        continue;
                    }
                },
                Read::Stream { .. } => match self.conn.clone() {
                    Some(con) => con,
                    None => return,
                },
            };
            self.follow_reads(con, vec![read]).await;
        }
    }

    /// Does `reads` on `con`, in order, each followed by the reads again [`Follows`] asks
    /// for; a failed one is left for the next wake-up, beat or reconnection.
    async fn follow_reads(&mut self, con: MultiplexedConnection, reads: Vec<Read>) {
        for read in reads {
            let ticket = read.ticket();
            if let Err(f) = self.follow_read(con.clone(), read).await {
                let fx = self.follows.on(FollowEvent::ReadFailed { ticket });
                debug_assert_eq!(fx, FollowEffects::default());
                let ticket = ticket.as_u64();
                tracing::debug!(ticket, why = f.why, "a follow read failed (retried later)");
            }
        }
    }

    /// Does `read` on `con`, hands its result to [`Follows`], performs what it says, and
    /// does the read again it asks for. Bounded: a read again follows only an answer that
    /// moved the follow's last sequence number forward (a full batch).
    async fn follow_read(&mut self, con: MultiplexedConnection, read: Read) -> Result<(), Fail> {
        let mut pending = vec![read];
        while let Some(read) = pending.pop() {
            let event = match read {
                Read::Log {
                    ticket,
                    session,
                    after,
                } => {
                    let events = self.read_log(con.clone(), &session, after).await?;
                    self.follows.on(FollowEvent::LogRead { ticket, events })
                }
                Read::Stream {
                    ticket,
                    session,
                    stream,
                    after,
                } => {
                    let read = self
                        .read_stream(con.clone(), &session, &stream, after)
                        .await?;
                    self.follows.on(FollowEvent::StreamRead { ticket, read })
                }
            };
            pending.extend(self.perform(event).await);
        }
        Ok(())
    }

    /// Performs what [`Follows`] said, but its subscription (the start's, before its
    /// first read) and its reads (returned): the answers, then the unsubscription (best
    /// effort: a stale subscription only costs ignored wake-ups).
    async fn perform(&mut self, fx: FollowEffects) -> Vec<Read> {
        let FollowEffects {
            subscribe,
            answers,
            unsubscribe,
            reads,
        } = fx;
        debug_assert!(subscribe.is_none(), "a start subscribes itself");
        for (ticket, reply) in answers {
            let _ = self.inbox.reply(ticket, reply);
        }
        if let Some(channel) = unsubscribe
            && let Some(mut con) = self.conn.clone()
        {
            let _ = self.timed(con.unsubscribe(channel)).await;
        }
        reads
    }

    /// Runs `op` here to its end; `Some`: an append held (with the pause before its next
    /// attempt), given back to be put back in its lane.
    async fn execute(&mut self, ticket: Ticket, op: StoreOp) -> Option<(StoreOp, Duration)> {
        if let StoreOp::Unfollow { follow } = op {
            self.unfollow(follow).await;
            return None;
        }
        let pause = self.attempts(ticket, &op, 0, false, String::new()).await?;
        Some((op, pause))
    }

    /// The pause before attempt `attempt` (≥ 1) of an operation: the retry backoff,
    /// doubling.
    fn retry_pause(&self, attempt: u32) -> Duration {
        self.cfg
            .retry_backoff
            .saturating_mul(1 << attempt.saturating_sub(1).min(16))
    }

    /// Attempts `op` from attempt `first` (the later ones after a doubling pause; `first`'s
    /// too, unless `paused`: the caller took it) until one answers, or gives up with the
    /// last failure's reason (`why` before any attempt here). A held append has one
    /// attempt here. `Some`: an append held ([`hold_again`](Self::hold_again)), the pause
    /// before its next attempt: the caller puts it back in its lane.
    async fn attempts(
        &mut self,
        ticket: Ticket,
        op: &StoreOp,
        first: u32,
        paused: bool,
        mut why: String,
    ) -> Option<Duration> {
        let last = if self.held.contains_key(&ticket) {
            first
        } else {
            self.cfg.retries
        };
        for attempt in first..=last {
            if attempt > 0 && !(paused && attempt == first) {
                let pause = self.retry_pause(attempt);
                self.rt.sleep_until(self.rt.now() + pause).await;
            }
            match self.once(ticket, op).await {
                Ok(Some(reply)) => {
                    self.unhold(ticket);
                    let _ = self.inbox.reply(ticket, reply);
                    return None;
                }
                Ok(None) => return None, // a follow, answered by `once`
                Err(f) => {
                    why = f.why;
                    if f.sent && !is_idempotent(op) {
                        self.give_up(ticket, &why);
                        return None;
                    }
                }
            }
        }
        self.hold_again(ticket, op, &why)
    }

    /// Answers `ticket` `Failed` for `why` (a follow it named ends).
    fn give_up(&mut self, ticket: Ticket, why: &str) {
        let fx = self.follows.on(FollowEvent::GaveUp { ticket });
        debug_assert_eq!(fx, FollowEffects::default());
        let e = StoreError(format!("Redis: {why}").into());
        let _ = self.inbox.reply(ticket, StoreReply::Failed(e));
    }

    /// Ends follow `ticket` without an answer, unsubscribing its channel if no other
    /// follow uses it.
    async fn unfollow(&mut self, ticket: Ticket) {
        let fx = self.follows.on(FollowEvent::Unfollow { ticket });
        let _no_reads = self.perform(fx).await;
    }

    /// Reads request stream `stream` of `session` after `after` (`None`: no such stream, or
    /// its session is gone).
    async fn read_stream(
        &mut self,
        mut con: MultiplexedConnection,
        session: &str,
        stream: &str,
        after: u64,
    ) -> Result<Option<StreamRead>, Fail> {
        let req = self.planner.read_stream(session, stream, after);
        // The reply is noted as an answer before it is read (as a malformed one says
        // nothing of the connection).
        let reply = self.query(&mut con, &req, Ok).await?;
        self.planner.decode_stream(&reply)
    }

    /// One attempt at `op`: its answer, `None` for a follow (answered here).
    async fn once(&mut self, ticket: Ticket, op: &StoreOp) -> Result<Option<StoreReply>, Fail> {
        let mut con = self.connection().await?;
        if is_stateless(op) {
            let out = self.stateless().once(con, ticket, op).await;
            self.note(out.as_ref().map(|_| ()));
            return out.map(Some);
        }
        let reply = match op {
            StoreOp::Delete { session } => {
                let req = self.planner.delete(session)?;
                self.query(&mut con, &req, decode_int).await?;
                let fx = self.follows.on(FollowEvent::SessionDeleted { session });
                debug_assert_eq!(fx, FollowEffects::default());
                StoreReply::Done
            }
            StoreOp::Follow { session, from } => {
                let subscribe = self.follows.on(FollowEvent::Start { session }).subscribe;
                let out = self
                    .stateless()
                    .follow_start(con, session, *from, subscribe)
                    .await;
                self.note(out.as_ref().map(|_| ()));
                let (after, events) = out?;
                self.follow_started(ticket, session, after, events).await;
                return Ok(None);
            }
            StoreOp::FollowStream {
                session,
                stream,
                after,
            } => {
                // Subscribe first: a wake-up after the read is never missed.
                let start = FollowEvent::StreamStart { session, stream };
                if let Some(channel) = self.follows.on(start).subscribe {
                    self.timed(con.subscribe(channel)).await?;
                }
                let read = match self.read_stream(con.clone(), session, stream, *after).await {
                    Ok(r) => r,
                    Err(f) => {
                        let failed = FollowEvent::StreamStartFailed { session, stream };
                        let fx = self.follows.on(failed);
                        let _no_reads = self.perform(fx).await;
                        return Err(f);
                    }
                };
                let started = FollowEvent::StreamStarted {
                    ticket,
                    session,
                    stream,
                    after: *after,
                    read,
                };
                let fx = self.follows.on(started);
                let reads = self.perform(fx).await;
                self.follow_reads(con, reads).await;
                return Ok(None);
            }
            StoreOp::Unfollow { .. } => return Ok(None),
            _ => return Err(Fail::unsent("a stateless operation")),
        };
        Ok(Some(reply))
    }
}

impl<R: Runtime> Stateless<R> {
    /// `fut` under the command timeout (its failure is noted by the worker).
    async fn timed<T>(
        &self,
        fut: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, Fail> {
        timed_on(&self.rt, self.cfg.command_timeout, fut).await
    }

    /// Sends `req` on `con` under the command timeout: the reply (its failure is noted by
    /// the worker).
    async fn send(&self, con: &mut MultiplexedConnection, req: &Request) -> Result<Value, Fail> {
        send_on(&self.rt, self.cfg.command_timeout, &self.scripts, con, req).await
    }

    /// Reads a log after `after`, at most one batch.
    async fn read_log(
        &self,
        mut con: MultiplexedConnection,
        session: &str,
        after: u64,
    ) -> Result<Vec<LogEvent>, Fail> {
        let req = self.planner.read_log(session, after);
        decode_log(self.send(&mut con, &req).await?)
    }

    /// The start of a follow of `session`: its wake-up channel `subscribe` subscribed first
    /// (`None`: another follow of the session has it), so that a wake-up after the read is
    /// never missed; where it starts; the first events after it.
    async fn follow_start(
        &self,
        mut con: MultiplexedConnection,
        session: &str,
        from: FollowFrom,
        subscribe: Option<String>,
    ) -> Result<(u64, Vec<LogEvent>), Fail> {
        if let Some(channel) = subscribe {
            self.timed(con.subscribe(channel)).await?;
        }
        let after = match from {
            FollowFrom::After(n) => n,
            FollowFrom::Cursor => {
                let req = self.planner.cursor(session);
                decode_cursor(self.send(&mut con, &req).await?)?
            }
        };
        let events = self.read_log(con, session, after).await?;
        Ok((after, events))
    }

    /// One attempt at a batch of stateless operations ([`is_stateless`]) on `con`, as one
    /// pipeline: their commands written together in order, under one deadline, their
    /// replies read in order (what one `MultiplexedConnection` request costs, paid once per
    /// batch rather than per operation). Each operation's outcome, in order: its answer, an
    /// error reply of its own (nothing of the connection), or the pipeline's failure (a
    /// broken connection or a timeout: every operation of it fails, and may have reached
    /// Redis).
    async fn batch(
        &self,
        mut con: MultiplexedConnection,
        ops: &[(Ticket, StoreOp)],
    ) -> Vec<Result<StoreReply, Fail>> {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        let planned: Vec<Result<plan::Expect, Fail>> = ops
            .iter()
            .map(|(ticket, op)| {
                let (req, expect) = self.planner.stateless(*ticket, op)?;
                pipe.add_command(match req {
                    Request::Command(cmd) => cmd,
                    Request::Script(call) => call.evalsha(&self.scripts),
                });
                Ok(expect)
            })
            .collect();
        let sent = pipe.len();
        let replies = if sent == 0 {
            Ok(Vec::new())
        } else {
            self.timed(pipe.query_async::<Vec<Value>>(&mut con)).await
        };
        let mut replies = match replies {
            Ok(v) if v.len() == sent => Ok(v.into_iter()),
            Ok(v) => Err(Fail::dropped(format!(
                "{} replies to a pipeline of {sent} commands",
                v.len()
            ))),
            Err(f) => Err(f),
        };
        planned
            .into_iter()
            .map(|expect| {
                let expect = expect?;
                let replies = replies.as_mut().map_err(|f| f.again())?;
                match replies.next() {
                    Some(Value::ServerError(e)) => Err(Fail::redis(&e.into())),
                    Some(v) => expect.decode(v),
                    None => Err(Fail::dropped("a pipeline's reply is missing")),
                }
            })
            .collect()
    }

    /// One attempt at stateless operation `op` ([`is_stateless`]) on `con`: the planned
    /// request sent, its reply decoded.
    async fn once(
        &self,
        mut con: MultiplexedConnection,
        ticket: Ticket,
        op: &StoreOp,
    ) -> Result<StoreReply, Fail> {
        let (req, expect) = self.planner.stateless(ticket, op)?;
        expect.decode(self.send(&mut con, &req).await?)
    }
}

/// `fut` under `timeout`: a failure says what it means for the connection; nothing is done
/// about it here ([`Worker::note`] does).
async fn timed_on<R: Runtime, T>(
    rt: &R,
    timeout: Duration,
    fut: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, Fail> {
    match race(rt, rt.now() + timeout, fut).await {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(Fail::redis(&e)),
        None => Err(Fail::timed_out()),
    }
}

/// Sends planned request `req` on `con` under `timeout` (a script as its `EVALSHA`): the
/// reply, for the planner's decoders.
async fn send_on<R: Runtime>(
    rt: &R,
    timeout: Duration,
    scripts: &Scripts,
    con: &mut MultiplexedConnection,
    req: &Request,
) -> Result<Value, Fail> {
    match req {
        Request::Command(cmd) => timed_on(rt, timeout, cmd.query_async::<Value>(con)).await,
        Request::Script(call) => {
            // `EVALSHA` as a plain command: the script is loaded on every connection
            // (`NOSCRIPT` counts as a lost one: `Fail::redis`), and the redis crate boxes a
            // command's future, so each operation in flight stays small
            // (`ScriptInvocation::invoke_async` made it ≈ 1.7 KB: an allocation glibc serves
            // from its large bins, consolidating its fast bins each time).
            let cmd = call.evalsha(scripts);
            timed_on(rt, timeout, cmd.query_async::<Value>(con)).await
        }
    }
}

/// `fut`, or `None` at `deadline`.
async fn race<R: Runtime, T>(
    rt: &R,
    deadline: Instant,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    let mut sleep = std::pin::pin!(rt.sleep_until(deadline));
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        sleep.as_mut().poll(cx).map(|_| None)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::atomic::AtomicU64;

    /// A runtime whose tasks never run and whose timers never fire.
    #[derive(Clone)]
    struct Idle;

    impl Runtime for Idle {
        type Sleep = std::future::Pending<()>;
        fn sleep_until(&self, _deadline: Instant) -> Self::Sleep {
            std::future::pending()
        }
        fn spawn(&self, _task: BoxFuture<'static, ()>) {}
    }

    fn backend() -> RedisBackend<Idle> {
        let info = RedisTarget::parse("redis://127.0.0.1/")
            .expect("a URL")
            .info;
        let dial: Dial = Arc::new(|| Box::pin(async { Err(std::io::Error::other("no")) }));
        RedisBackend::new(Idle, info, dial, RedisConfig::default().with_prefix("p"))
    }

    /// The liveness key a worker renews (its owner's).
    fn liveness_key(w: &Worker<Idle>) -> String {
        let Request::Command(cmd) = w.planner.renew_liveness() else {
            panic!("a command")
        };
        let arg = cmd.args_iter().nth(1).expect("a key");
        let redis::Arg::Simple(key) = arg else {
            panic!("a key")
        };
        String::from_utf8_lossy(key).into_owned()
    }

    #[test]
    fn the_link_is_busy_from_its_high_mark_until_its_low_mark() {
        let cfg = RedisConfig::default().with_pressure_marks(10, 4);
        let mut busy = false;
        let mut changes = Vec::new();
        for queued in [0, 9, 10, 12, 9, 5, 4, 3, 9, 10] {
            let now = busy_now(busy, queued, &cfg);
            if now != busy {
                changes.push((queued, now));
            }
            busy = now;
        }
        assert_eq!(changes, [(10, true), (4, false), (10, true)]);
        // The low mark never exceeds the high one; without marks, never busy.
        let marks = RedisConfig::default()
            .with_pressure_marks(3, 8)
            .pressure_marks;
        assert_eq!(marks, Some((3, 3)));
        assert!(!busy_now(false, usize::MAX, &RedisConfig::default()));
    }

    #[test]
    fn a_link_s_owner_is_its_instance_and_the_incarnation_it_is_given() {
        let b = backend();
        let (tx, _rx) = mpsc::unbounded();
        let inbox = ClusterInbox::new(|_| true);
        let w = b.worker("a", inbox, 0x2a, tx, Arc::default(), Arc::default());
        assert_eq!(liveness_key(&w), "p:inst:a:000000000000002a");
        assert_eq!(owner_name("b", u64::MAX), "b:ffffffffffffffff");
    }

    #[test]
    fn each_link_draws_its_incarnation_from_the_backend_s_source() {
        let drawn = Arc::new(AtomicU64::new(0));
        let counter = drawn.clone();
        let b = backend().with_incarnations(move || counter.fetch_add(1, Ordering::Relaxed));
        let inbox = ClusterInbox::new(|_| true);
        let _one = b.connect("a", inbox.clone());
        let _two = b.connect("a", inbox);
        assert_eq!(drawn.load(Ordering::Relaxed), 2);
        // The default source: two draws differ.
        assert_ne!(random_incarnation(), random_incarnation());
    }
}
