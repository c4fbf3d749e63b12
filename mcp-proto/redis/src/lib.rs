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
//!   but the follows, `Unfollow` and `Delete`), at most 64, sent together in submission order
//!   (each polled first in order: the multiplexed connection queues commands first come,
//!   first served, and Redis runs one connection's commands in order); the lane's next batch
//!   starts after the answers to this one;
//! - the lanes' batches side by side, as futures in flight on the multiplexed connection,
//!   at most [`RedisConfig::max_in_flight`] operations at once (a lane waiting for a place
//!   queues for it in order);
//! - a listen-log follow's start (subscribe, cursor, first read) in flight too, alone in its
//!   lane's turn; the worker registers it when it comes back, and reads again if its
//!   session was woken in between (an event published after that read is not missed);
//! - every other operation here, in its lane's turn, to its end (as are the retries, the
//!   dials, the wake-ups, the bus messages (RESP3 pushes) and the beats, between the other
//!   inputs).
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
//! | `p:log:<s>` | stream | the listen log, entry ids `<seq>-0`, field `p` = payload, trimmed `MAXLEN =` capacity |
//! | `p:meta:<s>` | hash | `last` (the log's sequence counter), `cursor` |
//! | `p:bus` | channel | [`BusMessage`]s of every instance (JSON, with the sender's name) |
//! | `p:wake:<s>` | channel | "the log of `s` grew" (the followers then read with `XRANGE`) |
//! | `p:rss:<s>` | set | the names of the session's request streams |
//! | `p:rs:<s>:<name>` | stream | request stream `name`'s events, ids `<seq>-0`, field `p` |
//! | `p:rsm:<s>:<name>` | hash | `owner` (`<instance>:<incarnation>`), `requests` (JSON ids), `a:<id JSON>` per answered request, `finished` |
//! | `p:rsw:<s>:<name>` | channel | "request stream `name` grew or ended" |
//! | `p:inst:<owner>` | string | a link's liveness key, `PX` = [`RedisConfig::liveness_ttl`], renewed every third of it, deleted when the link is dropped |
//!
//! # Request streams
//!
//! OpenStream, Append and EndStream are scripts; an unfinished stream's keys share the
//! session record's expiry (Save and Touch renew them with it, walking `p:rss:<s>`); EndStream
//! sets the retention expiry; Delete removes them all. FollowStream reads (one script) the
//! record's existence, the hash, the owner's liveness key and the events: no record or no
//! stream answers [`StreamEnd::Unknown`] at once. A live follow reads again on every wake-up
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
//! an operation that is not idempotent (Create, Publish, Broadcast) is not repeated once it may
//! have reached Redis; then the answer is [`StoreReply::Failed`]. A broken connection is
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
//! machine says it is up.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::collections::{HashMap, HashSet, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use futures_channel::mpsc;
use futures_core::Stream;
use futures_util::stream::FuturesUnordered;
use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, ConnectionAddr, IntoConnectionInfo, ProtocolVersion, PushInfo, PushKind,
    RedisConnectionInfo, Value,
};
use serde::{Deserialize, Serialize};

use mcp_driver::{ClusterBackend, ClusterInbox, Runtime, StoreLink};

mod link;
use link::{LinkEffect, LinkEvent, LinkLimits, LinkMachine, LinkState};
use mcp_proto::jsonrpc::{Message, RequestId};
use mcp_proto::server::{
    BusMessage, FollowFrom, LogEvent, SessionRecord, StoreError, StoreOp, StoreReply, StreamEnd,
    Ticket,
};
use mcp_service::server::BoxFuture;

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
    /// Operations submitted on one link and not yet done (queued, waiting in their session's
    /// lane, or in flight), at most; beyond, an operation is answered `Failed` at once: a
    /// burst the store cannot absorb is refused at once rather than queued past the router's
    /// store timeout. Default 10,000.
    pub max_queued: usize,
    /// Operations in flight on the link's connection at once (pipelined: each session's
    /// sent in submission order, its next ones after the answers to these; different
    /// sessions' side by side). 1 runs every operation after the previous one's answer.
    /// Default 256, at least 1.
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
            max_queued: 10_000,
            max_in_flight: 256,
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

/// The Redis [`ClusterBackend`] (see the module docs).
pub struct RedisBackend<R: Runtime> {
    runtime: R,
    info: RedisConnectionInfo,
    dial: Dial,
    config: Arc<RedisConfig>,
}

impl<R: Runtime> RedisBackend<R> {
    /// A backend dialing with `dial`, handshaking with `info`, on `runtime`.
    pub fn new(runtime: R, info: RedisConnectionInfo, dial: Dial, config: RedisConfig) -> Self {
        RedisBackend {
            runtime,
            info: info.set_protocol(ProtocolVersion::RESP3),
            dial,
            config: Arc::new(config),
        }
    }
}

impl<R: Runtime> ClusterBackend for RedisBackend<R> {
    fn connect(&self, instance: &str, inbox: ClusterInbox) -> Box<dyn StoreLink> {
        let (ops_tx, ops_rx) = mpsc::unbounded();
        let (push_tx, push_rx) = mpsc::unbounded();
        let queued = Arc::new(AtomicUsize::new(0));
        let now = self.runtime.now();
        let worker = Worker {
            rt: self.runtime.clone(),
            cfg: self.config.clone(),
            info: self.info.clone(),
            dial: self.dial.clone(),
            instance: instance.into(),
            inbox: inbox.clone(),
            keys: Arc::new(Keys::new(&self.config.prefix)),
            scripts: Arc::new(Scripts::new()),
            conn: None,
            lanes: HashMap::new(),
            waiting: VecDeque::new(),
            in_flight: FuturesUnordered::new(),
            in_flight_ops: 0,
            queued_follows: HashMap::new(),
            starting: HashSet::new(),
            woken: HashSet::new(),
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
            follows: HashMap::new(),
            stream_follows: HashMap::new(),
            owner: format!("{instance}:{}", incarnation()).into(),
            next_beat: now,
            queued: queued.clone(),
        };
        self.runtime.spawn(Box::pin(worker.run(ops_rx, push_rx)));
        Box::new(RedisLink {
            ops: ops_tx,
            queued,
            max_queued: self.config.max_queued,
            inbox,
        })
    }
}

struct RedisLink {
    ops: mpsc::UnboundedSender<(Ticket, StoreOp)>,
    queued: Arc<AtomicUsize>,
    max_queued: usize,
    inbox: ClusterInbox,
}

impl StoreLink for RedisLink {
    fn submit(&mut self, _now: Instant, ticket: Ticket, op: StoreOp) {
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
}

/// Key and channel names.
struct Keys {
    prefix: String,
}

impl Keys {
    fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.into(),
        }
    }
    fn record(&self, s: &str) -> String {
        format!("{}:s:{s}", self.prefix)
    }
    fn sessions(&self) -> String {
        format!("{}:sessions", self.prefix)
    }
    fn log(&self, s: &str) -> String {
        format!("{}:log:{s}", self.prefix)
    }
    fn meta(&self, s: &str) -> String {
        format!("{}:meta:{s}", self.prefix)
    }
    fn bus(&self) -> String {
        format!("{}:bus", self.prefix)
    }
    fn wake(&self, s: &str) -> String {
        format!("{}:wake:{s}", self.prefix)
    }
    fn streams(&self, s: &str) -> String {
        format!("{}:rss:{s}", self.prefix)
    }
    fn stream_log(&self, s: &str, stream: &str) -> String {
        format!("{}:rs:{s}:{stream}", self.prefix)
    }
    fn stream_meta(&self, s: &str, stream: &str) -> String {
        format!("{}:rsm:{s}:{stream}", self.prefix)
    }
    fn stream_wake(&self, s: &str, stream: &str) -> String {
        format!("{}:rsw:{s}:{stream}", self.prefix)
    }
    fn instances(&self) -> String {
        format!("{}:inst:", self.prefix)
    }
    fn wake_session<'a>(&self, channel: &'a str) -> Option<&'a str> {
        channel
            .strip_prefix(self.prefix.as_str())?
            .strip_prefix(":wake:")
    }
}

/// The server's clock in ms (Lua), and the renewal of a record, its log, its hash and its
/// unfinished request streams: KEYS[1] record, [2] sessions, [3] log, [4] meta, [5] the set
/// of its request streams (`<prefix>:rss:<id>`); ARGV[1] id, ARGV[2] ttl ms (0: none). The
/// streams' keys are named from KEYS[5] (one Redis, not Redis Cluster). A finished stream
/// keeps its retention expiry; the names of streams gone are dropped from the set.
const RENEW: &str = r"
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function stream_keys(name)
  local base = string.sub(KEYS[5], 1, #KEYS[5] - #ARGV[1] - 5)
  local tail = ':' .. ARGV[1] .. ':' .. name
  return base .. ':rs' .. tail, base .. ':rsm' .. tail
end
local function renew_streams(ttl)
  for _, name in ipairs(redis.call('SMEMBERS', KEYS[5])) do
    local l, m = stream_keys(name)
    if redis.call('EXISTS', m) == 0 then
      redis.call('SREM', KEYS[5], name)
    elseif redis.call('HEXISTS', m, 'finished') == 0 then
      if ttl > 0 then
        redis.call('PEXPIRE', l, ttl)
        redis.call('PEXPIRE', m, ttl)
      else
        redis.call('PERSIST', l)
        redis.call('PERSIST', m)
      end
    end
  end
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[5], ttl)
  else
    redis.call('PERSIST', KEYS[5])
  end
end
local function renew(ttl)
  renew_streams(ttl)
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[3], ttl)
    redis.call('PEXPIRE', KEYS[4], ttl)
    redis.call('ZADD', KEYS[2], now_ms() + ttl, ARGV[1])
  else
    redis.call('PERSIST', KEYS[1])
    redis.call('PERSIST', KEYS[3])
    redis.call('PERSIST', KEYS[4])
    redis.call('ZADD', KEYS[2], '+inf', ARGV[1])
  end
end
";

/// Create: ARGV[3] record, ARGV[4] cap. 1 created, 0 at capacity, -1 the id is taken.
const CREATE: &str = r"
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now_ms())
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then return 0 end
redis.call('SET', KEYS[1], ARGV[3])
renew(ttl)
return 1
";

/// Save: ARGV[3] record, ARGV[4] bus channel, ARGV[5] the bus message (`SessionSaved`,
/// published only when saved). 1 saved, 0 missing.
const SAVE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('SET', KEYS[1], ARGV[3])
renew(tonumber(ARGV[2]))
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
";

/// Touch. 1 renewed, 0 missing.
const TOUCH: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
renew(tonumber(ARGV[2]))
return 1
";

/// Delete: ARGV[3] bus channel, ARGV[4] the bus message.
const DELETE: &str = r"
for _, name in ipairs(redis.call('SMEMBERS', KEYS[5])) do
  local l, m = stream_keys(name)
  redis.call('DEL', l, m)
end
redis.call('DEL', KEYS[1], KEYS[3], KEYS[4], KEYS[5])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
";

/// Publish: ARGV[3] payload, ARGV[4] capacity, ARGV[5] wake channel. The seq, 0 missing.
const PUBLISH: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local seq = redis.call('HINCRBY', KEYS[4], 'last', 1)
redis.call('XADD', KEYS[3], 'MAXLEN', '=', ARGV[4], seq .. '-0', 'p', ARGV[3])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[3], ttl)
  redis.call('PEXPIRE', KEYS[4], ttl)
end
redis.call('PUBLISH', ARGV[5], seq)
return seq
";

/// Delivered: ARGV[3] seq. 1 moved (or kept), 0 missing.
const DELIVERED: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local cur = tonumber(redis.call('HGET', KEYS[4], 'cursor') or '0') or 0
if tonumber(ARGV[3]) > cur then redis.call('HSET', KEYS[4], 'cursor', ARGV[3]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[4], ttl) end
return 1
";

/// OpenStream: KEYS[6] its log, [7] its hash, [8] the owner's liveness key; ARGV[3] name,
/// ARGV[4] owner, ARGV[5] requests (JSON), ARGV[6] liveness TTL ms. Replaces a stream of the
/// name. 1 opened, 0 no such session.
const OPEN_STREAM: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('DEL', KEYS[6], KEYS[7])
redis.call('HSET', KEYS[7], 'owner', ARGV[4], 'requests', ARGV[5])
redis.call('SADD', KEYS[5], ARGV[3])
redis.call('SET', KEYS[8], '1', 'PX', ARGV[6])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[7], ttl)
  redis.call('PEXPIRE', KEYS[5], ttl)
else
  redis.call('PERSIST', KEYS[5])
end
return 1
";

/// Append: KEYS[6] log, [7] hash; ARGV[3] seq, ARGV[4] payload, ARGV[5] the answered
/// request's field (`a:<id JSON>`, empty: none), ARGV[6] wake channel. An event at or below
/// the log's last one is already there (a retry) and is not added again. 1 stored, 0 no such
/// stream.
const APPEND: &str = r"
if redis.call('EXISTS', KEYS[7]) == 0 then return 0 end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[7], ARGV[5], '1') end
local seq = tonumber(ARGV[3])
if seq > 0 then
  local top = redis.call('XREVRANGE', KEYS[6], '+', '-', 'COUNT', 1)
  local last = 0
  if #top > 0 then last = tonumber(string.match(top[1][1], '^(%d+)')) or 0 end
  if seq > last then redis.call('XADD', KEYS[6], seq .. '-0', 'p', ARGV[4]) end
end
local ttl
if redis.call('HEXISTS', KEYS[7], 'finished') == 0 then
  ttl = redis.call('PTTL', KEYS[1])
else
  ttl = redis.call('PTTL', KEYS[7])
end
if ttl > 0 then redis.call('PEXPIRE', KEYS[6], ttl) end
redis.call('PUBLISH', ARGV[6], 'a')
return 1
";

/// EndStream: KEYS[6] log, [7] hash; ARGV[3] retention ms (at least 1), ARGV[4] wake
/// channel. 1 ended, 0 no such stream.
const END_STREAM: &str = r"
if redis.call('EXISTS', KEYS[7]) == 0 then return 0 end
redis.call('HSET', KEYS[7], 'finished', '1')
redis.call('PEXPIRE', KEYS[7], ARGV[3])
redis.call('PEXPIRE', KEYS[6], ARGV[3])
redis.call('PUBLISH', ARGV[4], 'e')
return 1
";

/// A request stream's state: KEYS[6] log, [7] hash; ARGV[3] after, ARGV[4] count, ARGV[5]
/// the liveness keys' prefix. `{0}`: no such session or stream; else `{1, owner alive (0/1),
/// the hash (HGETALL), the events after (XRANGE)}`.
const STREAM_READ: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('EXISTS', KEYS[7]) == 0 then return {0} end
local h = redis.call('HGETALL', KEYS[7])
local owner = ''
for i = 1, #h, 2 do
  if h[i] == 'owner' then owner = h[i + 1] end
end
local alive = redis.call('EXISTS', ARGV[5] .. owner)
local events = redis.call('XRANGE', KEYS[6], '(' .. ARGV[3] .. '-0', '+', 'COUNT', ARGV[4])
return {1, alive, h, events}
";

struct Scripts {
    create: redis::Script,
    save: redis::Script,
    touch: redis::Script,
    delete: redis::Script,
    publish: redis::Script,
    delivered: redis::Script,
    open_stream: redis::Script,
    append: redis::Script,
    end_stream: redis::Script,
    stream_read: redis::Script,
}

impl Scripts {
    fn new() -> Scripts {
        let s = |body: &str| redis::Script::new(&format!("{RENEW}{body}"));
        Scripts {
            create: s(CREATE),
            save: s(SAVE),
            touch: s(TOUCH),
            delete: s(DELETE),
            publish: s(PUBLISH),
            delivered: s(DELIVERED),
            open_stream: s(OPEN_STREAM),
            append: s(APPEND),
            end_stream: s(END_STREAM),
            stream_read: s(STREAM_READ),
        }
    }

    fn all(&self) -> [&redis::Script; 10] {
        [
            &self.create,
            &self.save,
            &self.touch,
            &self.delete,
            &self.publish,
            &self.delivered,
            &self.open_stream,
            &self.append,
            &self.end_stream,
            &self.stream_read,
        ]
    }
}

/// A record as stored (JSON; the state in base64).
#[derive(Serialize, Deserialize)]
struct WireRecord {
    id: String,
    principal: Option<String>,
    version: String,
    state: Option<String>,
}

fn encode_record(r: &SessionRecord) -> Vec<u8> {
    let w = WireRecord {
        id: r.id.to_string(),
        principal: r.principal.as_deref().map(str::to_owned),
        version: r.version.as_str().to_owned(),
        state: r
            .state
            .as_ref()
            .map(|s| base64::engine::general_purpose::STANDARD.encode(s)),
    };
    serde_json::to_vec(&w).unwrap_or_default()
}

fn decode_record(session: &str, bytes: &[u8]) -> Option<SessionRecord> {
    let w: WireRecord = serde_json::from_slice(bytes).ok()?;
    if w.id != session {
        return None;
    }
    let state = match w.state {
        Some(s) => Some(Bytes::from(
            base64::engine::general_purpose::STANDARD.decode(s).ok()?,
        )),
        None => None,
    };
    Some(SessionRecord {
        id: w.id.into(),
        principal: w.principal.map(Into::into),
        version: mcp_proto::ProtocolVersion::parse(&w.version)?,
        state,
    })
}

/// A bus message as published: the sender's instance name, and the message.
#[derive(Serialize, Deserialize)]
struct WireBus {
    from: String,
    msg: WireMsg,
}

#[derive(Serialize, Deserialize)]
enum WireMsg {
    SessionDeleted {
        session: String,
    },
    Cancel {
        session: String,
        request: RequestId,
    },
    ClientResponse {
        instance: String,
        session: String,
        response: Box<serde_json::value::RawValue>,
    },
    ListenTaken {
        session: String,
        by: String,
    },
    SessionSaved {
        session: String,
    },
    StreamResumed {
        session: String,
        stream: String,
    },
    /// [`BusMessage::Notice`]: the payload in base64 (it is opaque bytes).
    Notice {
        from: String,
        payload: String,
    },
}

fn encode_bus(from: &str, message: &BusMessage) -> Option<Vec<u8>> {
    let msg = match message {
        BusMessage::SessionDeleted { session } => WireMsg::SessionDeleted {
            session: session.to_string(),
        },
        BusMessage::Cancel { session, request } => WireMsg::Cancel {
            session: session.to_string(),
            request: request.clone(),
        },
        BusMessage::ClientResponse {
            instance,
            session,
            response,
        } => {
            let text = String::from_utf8(response.to_bytes().to_vec()).ok()?;
            WireMsg::ClientResponse {
                instance: instance.to_string(),
                session: session.to_string(),
                response: serde_json::value::RawValue::from_string(text).ok()?,
            }
        }
        BusMessage::ListenTaken { session, by } => WireMsg::ListenTaken {
            session: session.to_string(),
            by: by.to_string(),
        },
        BusMessage::SessionSaved { session } => WireMsg::SessionSaved {
            session: session.to_string(),
        },
        BusMessage::StreamResumed { session, stream } => WireMsg::StreamResumed {
            session: session.to_string(),
            stream: stream.to_string(),
        },
        BusMessage::Notice { from, payload } => WireMsg::Notice {
            from: from.to_string(),
            payload: base64::engine::general_purpose::STANDARD.encode(payload),
        },
    };
    serde_json::to_vec(&WireBus {
        from: from.into(),
        msg,
    })
    .ok()
}

/// The sender and the message of a published bus message (`None`: malformed).
fn decode_bus(bytes: &[u8]) -> Option<(String, BusMessage)> {
    let w: WireBus = serde_json::from_slice(bytes).ok()?;
    let msg = match w.msg {
        WireMsg::SessionDeleted { session } => BusMessage::SessionDeleted {
            session: session.into(),
        },
        WireMsg::Cancel { session, request } => BusMessage::Cancel {
            session: session.into(),
            request,
        },
        WireMsg::ClientResponse {
            instance,
            session,
            response,
        } => match mcp_proto::jsonrpc::parse_message(response.get().as_bytes()).ok()? {
            Message::Response(response) => BusMessage::ClientResponse {
                instance: instance.into(),
                session: session.into(),
                response,
            },
            _ => return None,
        },
        WireMsg::ListenTaken { session, by } => BusMessage::ListenTaken {
            session: session.into(),
            by: by.into(),
        },
        WireMsg::SessionSaved { session } => BusMessage::SessionSaved {
            session: session.into(),
        },
        WireMsg::StreamResumed { session, stream } => BusMessage::StreamResumed {
            session: session.into(),
            stream: stream.into(),
        },
        WireMsg::Notice { from, payload } => BusMessage::Notice {
            from: from.into(),
            payload: Bytes::from(
                base64::engine::general_purpose::STANDARD
                    .decode(payload)
                    .ok()?,
            ),
        },
    };
    Some((w.from, msg))
}

/// The idle TTL as the scripts take it: ms, at least 1; 0 for none.
fn ttl_ms(ttl: Option<Duration>) -> u64 {
    ttl.map_or(0, |t| {
        u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1)
    })
}

/// One failed attempt.
struct Fail {
    /// The command may have reached Redis.
    sent: bool,
    why: String,
    /// What the failure says of the connection.
    link: LinkTrouble,
}

/// What a failed command says of its connection (the worker acts on it: [`Worker::note`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LinkTrouble {
    /// Nothing (Redis answered an error, or its reply did not decode).
    None,
    /// The connection broke.
    Dropped,
    /// No answer within the command timeout.
    TimedOut,
}

impl Fail {
    fn unsent(why: impl Into<String>) -> Fail {
        Fail {
            sent: false,
            why: why.into(),
            link: LinkTrouble::None,
        }
    }
    fn dropped(why: impl Into<String>) -> Fail {
        Fail {
            sent: false,
            why: why.into(),
            link: LinkTrouble::Dropped,
        }
    }
    fn sent(why: impl Into<String>) -> Fail {
        Fail {
            sent: true,
            why: why.into(),
            link: LinkTrouble::None,
        }
    }
}

/// The lane of an operation: one session's operations, or the service notices (which carry
/// no session). A lane runs one operation at a time, in submission order, its retries
/// included; different lanes run side by side.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Lane {
    Session(Box<str>),
    Notices,
}

impl Lane {
    /// The lane of `op`; `None` for an `Unfollow`, whose lane is its follow's.
    fn of(op: &StoreOp) -> Option<Lane> {
        let session = match op {
            StoreOp::Load { session }
            | StoreOp::Touch { session, .. }
            | StoreOp::Delete { session }
            | StoreOp::Publish { session, .. }
            | StoreOp::Follow { session, .. }
            | StoreOp::Delivered { session, .. }
            | StoreOp::OpenStream { session, .. }
            | StoreOp::Append { session, .. }
            | StoreOp::EndStream { session, .. }
            | StoreOp::FollowStream { session, .. } => session,
            StoreOp::Create { record, .. } | StoreOp::Save { record, .. } => &record.id,
            StoreOp::Broadcast { message } => match message {
                BusMessage::SessionDeleted { session }
                | BusMessage::SessionSaved { session }
                | BusMessage::Cancel { session, .. }
                | BusMessage::ClientResponse { session, .. }
                | BusMessage::StreamResumed { session, .. }
                | BusMessage::ListenTaken { session, .. } => session,
                BusMessage::Notice { .. } => return Some(Lane::Notices),
            },
            StoreOp::Unfollow { .. } => return None,
        };
        Some(Lane::Session(session.clone()))
    }
}

/// A lane's operations: the one running (in flight or here) or waiting for a place in
/// flight is out of `queue`.
#[derive(Default)]
struct LaneState {
    /// An operation of the lane runs.
    busy: bool,
    /// The lane's next operation waits for a place in flight (the lane is in
    /// [`Worker::waiting`]).
    waiting: bool,
    queue: VecDeque<(Ticket, StoreOp)>,
}

/// Whether `op` needs none of the worker's state (follows, subscriptions): one command,
/// its answer from the reply alone. Those run pipelined.
fn is_stateless(op: &StoreOp) -> bool {
    !matches!(
        op,
        StoreOp::Follow { .. }
            | StoreOp::FollowStream { .. }
            | StoreOp::Unfollow { .. }
            | StoreOp::Delete { .. }
    )
}

/// Whether `op` may be repeated once it may have reached Redis.
fn is_idempotent(op: &StoreOp) -> bool {
    !matches!(
        op,
        StoreOp::Create { .. } | StoreOp::Publish { .. } | StoreOp::Broadcast { .. }
    )
}

/// Operations of one lane sent together at most (a batch in flight).
const MAX_BATCH: usize = 64;

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
}

/// Runs `futs` side by side, each polled first in order (so that their commands enter the
/// connection in order: the multiplexed connection queues them first come, first served);
/// their outputs in the same order.
async fn in_order<F: std::future::Future>(futs: Vec<F>) -> Vec<F::Output> {
    let mut futs: Vec<Pin<Box<F>>> = futs.into_iter().map(Box::pin).collect();
    let mut outs: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, out) in futs.iter_mut().zip(outs.iter_mut()) {
            if out.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *out = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outs.into_iter().flatten().collect()
}

/// What a stateless operation needs: cloned into its future when it runs in flight.
struct Stateless<R: Runtime> {
    rt: R,
    cfg: Arc<RedisConfig>,
    keys: Arc<Keys>,
    scripts: Arc<Scripts>,
    instance: Arc<str>,
    owner: Arc<str>,
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
    keys: Arc<Keys>,
    scripts: Arc<Scripts>,
    conn: Option<MultiplexedConnection>,
    /// Operations by lane: one at a time per lane, in submission order.
    lanes: HashMap<Lane, LaneState>,
    /// Lanes whose next operation waits for a place in flight, in the order they asked.
    waiting: VecDeque<Lane>,
    /// Batches of stateless operations in flight on the connection.
    in_flight: FuturesUnordered<BoxFuture<'static, Landed>>,
    /// The operations in them, at most [`RedisConfig::max_in_flight`].
    in_flight_ops: usize,
    /// Follows not yet registered (queued in their lane, or starting in flight): an
    /// `Unfollow` of one queues behind it.
    queued_follows: HashMap<Ticket, Lane>,
    /// Sessions whose follow is starting in flight (subscribed, or subscribing, to their
    /// wake-up channel), and those of them woken meanwhile (read again once registered).
    starting: HashSet<Box<str>>,
    woken: HashSet<Box<str>>,
    push_tx: mpsc::UnboundedSender<(u64, PushInfo)>,
    /// The connection's life: when to dial, backoff, when it is lost, the follows' grace,
    /// which dial it is (pushes of older ones are ignored). `conn` is `Some` exactly while
    /// the machine is `Subscribing` or `Up`.
    link: LinkMachine,
    /// Live follows: ticket → session, last sequence number answered.
    follows: HashMap<Ticket, (Box<str>, u64)>,
    /// Live request-stream follows.
    stream_follows: HashMap<Ticket, StreamFollow>,
    /// This link's owner name in request streams, `<instance>:<incarnation>`: its liveness
    /// key is `p:inst:<owner>` (a restarted instance of the same name is another owner).
    owner: Arc<str>,
    /// When the liveness key is renewed and the stream follows are checked next.
    next_beat: Instant,
    /// Operations submitted and not yet done (the link refuses more than
    /// [`RedisConfig::max_queued`]).
    queued: Arc<AtomicUsize>,
}

/// A live follow of a request stream.
struct StreamFollow {
    session: Box<str>,
    stream: Box<str>,
    /// The last sequence number answered.
    last: u64,
}

/// A request stream as read: the events after the asked one (at most one batch), its end
/// (`None` while it runs, or while more events are left to read), and whether the batch was
/// full (read again).
struct StreamRead {
    events: Vec<LogEvent>,
    end: Option<StreamEnd>,
    full: bool,
}

/// A number that differs between processes and links (no two incarnations of one instance
/// name share a liveness key).
fn incarnation() -> String {
    use std::hash::{BuildHasher, Hasher};
    static LINKS: AtomicUsize = AtomicUsize::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_usize(LINKS.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    format!("{:016x}", h.finish())
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
            match self.next_input(&mut ops, &mut pushes, Some(timer)).await {
                Input::Op(ticket, op) => self.submit(ticket, op).await,
                Input::Done(Landed::Batch(done)) => self.finish(done).await,
                Input::Done(Landed::Follow(done)) => self.follow_landed(done).await,
                Input::Push(generation, push) => self.on_push(generation, push).await,
                Input::Timer => {
                    if self.link.dial_due(self.rt.now()) {
                        self.redial_idle().await;
                    }
                    if self.rt.now() >= self.next_beat {
                        self.beat().await;
                    }
                }
                Input::Closed => {
                    // Gone in order: the owned streams' followers need not wait for the TTL.
                    if let Some(mut con) = self.conn.clone() {
                        let cmd = redis::cmd("DEL").arg(self.liveness_key()).to_owned();
                        let _ = self.timed(cmd.query_async::<i64>(&mut con)).await;
                    }
                    return;
                }
            }
        }
    }

    fn liveness_key(&self) -> String {
        liveness_key(&self.keys, &self.owner)
    }

    fn stateless(&self) -> Stateless<R> {
        Stateless {
            rt: self.rt.clone(),
            cfg: self.cfg.clone(),
            keys: self.keys.clone(),
            scripts: self.scripts.clone(),
            instance: self.instance.clone(),
            owner: self.owner.clone(),
        }
    }

    /// Queues `op` in its lane and starts what the lane can start.
    async fn submit(&mut self, ticket: Ticket, op: StoreOp) {
        let lane = match Lane::of(&op) {
            Some(lane) => lane,
            None => match &op {
                StoreOp::Unfollow { follow } if self.queued_follows.contains_key(follow) => {
                    self.queued_follows[follow].clone()
                }
                _ => {
                    // Its follow ran already (or never was): nothing waits for it.
                    self.execute(ticket, op).await;
                    self.queued.fetch_sub(1, Ordering::Relaxed);
                    return;
                }
            },
        };
        if matches!(op, StoreOp::Follow { .. } | StoreOp::FollowStream { .. }) {
            self.queued_follows.insert(ticket, lane.clone());
        }
        self.lanes
            .entry(lane.clone())
            .or_default()
            .queue
            .push_back((ticket, op));
        self.run_lane(lane).await;
    }

    /// Runs `lane`'s next operations while it is free: the stateless ones at its head go
    /// in flight together, in order (a batch of at most [`MAX_BATCH`] and of the places left
    /// in flight, or they wait for a place); any other runs here to its end. With no
    /// connection every operation runs here (its attempts dial).
    async fn run_lane(&mut self, lane: Lane) {
        let max = self.cfg.max_in_flight.max(1);
        loop {
            let Some(state) = self.lanes.get_mut(&lane) else {
                return;
            };
            if state.busy || state.waiting {
                return;
            }
            let Some((_, op)) = state.queue.front() else {
                self.lanes.remove(&lane);
                return;
            };
            if let (Some(con), true) = (&self.conn, is_stateless(op)) {
                let room = max.saturating_sub(self.in_flight_ops).min(MAX_BATCH);
                if room == 0 {
                    state.waiting = true;
                    self.waiting.push_back(lane);
                    return;
                }
                let take = state
                    .queue
                    .iter()
                    .take(room)
                    .take_while(|(_, op)| is_stateless(op))
                    .count();
                let batch: Vec<(Ticket, StoreOp)> = state.queue.drain(..take).collect();
                state.busy = true;
                self.in_flight_ops += batch.len();
                let (s, con) = (self.stateless(), con.clone());
                let (generation, lane) = (self.link.generation(), lane.clone());
                self.in_flight.push(Box::pin(async move {
                    let attempts = batch.iter().map(|(_, op)| s.once(con.clone(), op));
                    let results = in_order(attempts.collect()).await;
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
            if let (Some(con), StoreOp::Follow { session, from }) = (&self.conn, op) {
                let (session, from, con) = (session.clone(), *from, con.clone());
                if self.in_flight_ops >= max {
                    state.waiting = true;
                    self.waiting.push_back(lane);
                    return;
                }
                let Some((ticket, op)) = state.queue.pop_front() else {
                    return;
                };
                state.busy = true;
                self.in_flight_ops += 1;
                let subscribe = !self.is_followed(&session);
                self.starting.insert(session.clone());
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
            let Some((ticket, op)) = state.queue.pop_front() else {
                return;
            };
            if matches!(op, StoreOp::Follow { .. } | StoreOp::FollowStream { .. }) {
                self.queued_follows.remove(&ticket);
            }
            self.execute(ticket, op).await;
            self.queued.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Whether `session` has a follow registered or starting (its wake-up channel is
    /// subscribed, or being subscribed).
    fn is_followed(&self, session: &str) -> bool {
        self.starting.contains(session) || self.follows.values().any(|(s, _)| **s == *session)
    }

    /// Registers follow `ticket` of `session` from `after` and answers it with `events`; reads
    /// again when that was a full batch, or when a wake-up came before it was registered
    /// (`woken`: what it announced may be past the first read).
    async fn follow_started(
        &mut self,
        ticket: Ticket,
        session: &str,
        after: u64,
        events: Vec<LogEvent>,
        woken: bool,
    ) {
        let full = events.len() >= self.cfg.read_batch.max(1);
        self.follows.insert(ticket, (session.into(), after));
        self.answer(ticket, after, events);
        if (full || woken)
            && let Some(con) = self.conn.clone()
            && let Err(f) = self.advance_on(con, ticket).await
        {
            tracing::debug!(why = f.why, "a follow read failed (retried later)");
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
        self.in_flight_ops = self.in_flight_ops.saturating_sub(1);
        self.starting.remove(&session);
        let woken = self.woken.remove(&session);
        if generation == self.link.generation() {
            self.note(result.as_ref().map(|_| ()));
        }
        match result {
            Ok((after, events)) => {
                self.follow_started(ticket, &session, after, events, woken)
                    .await;
            }
            Err(f) => self.attempts(ticket, &op, 1, f.why).await,
        }
        self.queued_follows.remove(&ticket);
        self.queued.fetch_sub(1, Ordering::Relaxed);
        if let Some(state) = self.lanes.get_mut(&lane) {
            state.busy = false;
        }
        self.run_lane(lane).await;
        self.fill_places().await;
    }

    /// Lets the lanes that waited for a place in flight go, in order, while places are free.
    async fn fill_places(&mut self) {
        while self.in_flight_ops < self.cfg.max_in_flight.max(1)
            && let Some(next) = self.waiting.pop_front()
        {
            if let Some(state) = self.lanes.get_mut(&next) {
                state.waiting = false;
            }
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
        self.in_flight_ops = self.in_flight_ops.saturating_sub(ops.len());
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
                    let _ = self.inbox.reply(ticket, reply);
                }
                Err(f) if last_applied.is_some_and(|l| l > i) => self.give_up(ticket, &f.why),
                Err(f) if f.sent && !is_idempotent(&op) => self.give_up(ticket, &f.why),
                Err(f) => {
                    again.push((ticket, op, f.why));
                    continue;
                }
            }
            self.queued.fetch_sub(1, Ordering::Relaxed);
        }
        for (ticket, op, why) in again {
            self.attempts(ticket, &op, 1, why).await;
            self.queued.fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(state) = self.lanes.get_mut(&lane) {
            state.busy = false;
        }
        self.run_lane(lane).await;
        self.fill_places().await;
    }

    fn beat_every(&self) -> Duration {
        (self.cfg.liveness_ttl / 3).max(Duration::from_millis(10))
    }

    /// Renews this link's liveness key.
    async fn renew_liveness(&mut self, mut con: MultiplexedConnection) -> Result<(), Fail> {
        let cmd = redis::cmd("SET")
            .arg(self.liveness_key())
            .arg("1")
            .arg("PX")
            .arg(ttl_ms(Some(self.cfg.liveness_ttl)))
            .to_owned();
        self.timed(cmd.query_async::<()>(&mut con)).await
    }

    /// Every third of the liveness TTL: renew the liveness key, and read every stream follow
    /// again (its owner may be gone: no wake-up tells).
    async fn beat(&mut self) {
        self.next_beat = self.rt.now() + self.beat_every();
        let Ok(con) = self.connection().await else {
            return;
        };
        if let Err(f) = self.renew_liveness(con.clone()).await {
            tracing::debug!(why = f.why, "renewing the liveness key failed");
        }
        let tickets: Vec<Ticket> = self.stream_follows.keys().copied().collect();
        for t in tickets {
            if let Err(f) = self.advance_stream(con.clone(), t).await {
                tracing::debug!(why = f.why, "a stream follow read failed (retried later)");
            }
        }
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
                return Err(f);
            }
        };
        self.link.on(self.rt.now(), LinkEvent::Dialed);
        let mut channels = vec![self.keys.bus()];
        let sessions: HashSet<&str> = self.follows.values().map(|(s, _)| &**s).collect();
        channels.extend(sessions.into_iter().map(|s| self.keys.wake(s)));
        let streams: HashSet<String> = self
            .stream_follows
            .values()
            .map(|f| self.keys.stream_wake(&f.session, &f.stream))
            .collect();
        channels.extend(streams);
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
        if let Err(f) = self.renew_liveness(con.clone()).await {
            tracing::debug!(why = f.why, "renewing the liveness key failed");
        }
        if up == LinkEffect::Recovered {
            tracing::info!(instance = &*self.instance, "the Redis connection is back");
            let _ = self.inbox.bus_lost();
            let tickets: Vec<Ticket> = self.follows.keys().copied().collect();
            for t in tickets {
                // A failure leaves the follow for the next reconnect.
                let _ = self.advance_on(con.clone(), t).await;
            }
            let tickets: Vec<Ticket> = self.stream_follows.keys().copied().collect();
            for t in tickets {
                // A failure leaves the follow for the next beat.
                let _ = self.advance_stream(con.clone(), t).await;
            }
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
            let e = StoreError("the store connection is lost".into());
            let tickets: Vec<Ticket> = self
                .follows
                .drain()
                .map(|(t, _)| t)
                .chain(self.stream_follows.drain().map(|(t, _)| t))
                .collect();
            for ticket in tickets {
                let _ = self.inbox.reply(ticket, StoreReply::Failed(e.clone()));
            }
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
                let streams: Vec<Ticket> = self
                    .stream_follows
                    .iter()
                    .filter(|(_, f)| self.keys.stream_wake(&f.session, &f.stream) == channel)
                    .map(|(t, _)| *t)
                    .collect();
                if !streams.is_empty() {
                    let Some(con) = self.conn.clone() else {
                        return;
                    };
                    for t in streams {
                        if let Err(f) = self.advance_stream(con.clone(), t).await {
                            tracing::debug!(why = f.why, "a stream follow read failed");
                        }
                    }
                } else if channel == self.keys.bus() {
                    match decode_bus(payload) {
                        Some((from, message)) if *from != *self.instance => {
                            let _ = self.inbox.bus(message);
                        }
                        Some(_) => {}
                        None => tracing::warn!("a malformed bus message is ignored"),
                    }
                } else if let Some(session) = self.keys.wake_session(channel) {
                    if self.starting.contains(session) {
                        self.woken.insert(session.into());
                    }
                    let tickets: Vec<Ticket> = self
                        .follows
                        .iter()
                        .filter(|(_, (s, _))| **s == *session)
                        .map(|(t, _)| *t)
                        .collect();
                    for t in tickets {
                        if let Err(f) = self.advance(t).await {
                            tracing::debug!(why = f.why, "a follow read failed (retried later)");
                        }
                    }
                }
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

    /// Answers follow `ticket` with what its log holds after its last answer (nothing when
    /// nothing new).
    async fn advance(&mut self, ticket: Ticket) -> Result<(), Fail> {
        let con = self.connection().await?;
        self.advance_on(con, ticket).await
    }

    /// [`advance`](Self::advance) on `con`.
    async fn advance_on(&mut self, con: MultiplexedConnection, ticket: Ticket) -> Result<(), Fail> {
        loop {
            let Some((session, last)) = self.follows.get(&ticket).cloned() else {
                return Ok(());
            };
            let events = self.read_log(con.clone(), &session, last).await?;
            if events.is_empty() {
                return Ok(());
            }
            let full = events.len() >= self.cfg.read_batch.max(1);
            self.answer(ticket, last, events);
            if !full {
                return Ok(());
            }
        }
    }

    fn answer(&mut self, ticket: Ticket, after: u64, events: Vec<LogEvent>) {
        let gap = events
            .first()
            .is_some_and(|e| e.seq > after.saturating_add(1));
        if let (Some(f), Some(e)) = (self.follows.get_mut(&ticket), events.last()) {
            f.1 = e.seq;
        }
        let _ = self
            .inbox
            .reply(ticket, StoreReply::Events { events, gap, after });
    }

    async fn execute(&mut self, ticket: Ticket, op: StoreOp) {
        if let StoreOp::Unfollow { follow } = op {
            self.unfollow(follow).await;
            return;
        }
        self.attempts(ticket, &op, 0, String::new()).await;
    }

    /// Attempts `op` from attempt `first` (the later ones after a doubling pause) until one
    /// answers, or gives up with the last failure's reason (`why` before any attempt here).
    async fn attempts(&mut self, ticket: Ticket, op: &StoreOp, first: u32, mut why: String) {
        for attempt in first..=self.cfg.retries {
            if attempt > 0 {
                let pause = self
                    .cfg
                    .retry_backoff
                    .saturating_mul(1 << (attempt - 1).min(16));
                self.rt.sleep_until(self.rt.now() + pause).await;
            }
            match self.once(ticket, op).await {
                Ok(Some(reply)) => {
                    let _ = self.inbox.reply(ticket, reply);
                    return;
                }
                Ok(None) => return, // a follow, answered by `once`
                Err(f) => {
                    why = f.why;
                    if f.sent && !is_idempotent(op) {
                        break;
                    }
                }
            }
        }
        self.give_up(ticket, &why);
    }

    /// Answers `ticket` `Failed` for `why` (a follow it named ends).
    fn give_up(&mut self, ticket: Ticket, why: &str) {
        self.follows.remove(&ticket);
        self.stream_follows.remove(&ticket);
        let e = StoreError(format!("Redis: {why}").into());
        let _ = self.inbox.reply(ticket, StoreReply::Failed(e));
    }

    async fn unfollow(&mut self, ticket: Ticket) {
        if self.stream_follows.contains_key(&ticket) {
            self.drop_stream_follow(ticket).await;
            return;
        }
        let Some((session, _)) = self.follows.remove(&ticket) else {
            return;
        };
        if self.is_followed(&session) {
            return;
        }
        if let Some(mut con) = self.conn.clone() {
            // Best effort: a stale subscription only costs ignored wake-ups.
            let _ = self.timed(con.unsubscribe(self.keys.wake(&session))).await;
        }
    }

    /// Ends stream follow `ticket` without an answer, unsubscribing its channel if no other
    /// follow uses it.
    async fn drop_stream_follow(&mut self, ticket: Ticket) {
        if let Some(f) = self.stream_follows.remove(&ticket) {
            self.release_stream_channel(&f.session, &f.stream).await;
        }
    }

    async fn release_stream_channel(&mut self, session: &str, stream: &str) {
        let used = self
            .stream_follows
            .values()
            .any(|f| *f.session == *session && *f.stream == *stream);
        if !used && let Some(mut con) = self.conn.clone() {
            // Best effort: a stale subscription only costs ignored wake-ups.
            let channel = self.keys.stream_wake(session, stream);
            let _ = self.timed(con.unsubscribe(channel)).await;
        }
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
        let k = self.keys.clone();
        let scripts = self.scripts.clone();
        let batch = self.cfg.read_batch.max(1);
        let mut inv = invocation(&scripts.stream_read, &k, session, 0);
        inv.key(k.stream_log(session, stream))
            .key(k.stream_meta(session, stream))
            .arg(after)
            .arg(batch)
            .arg(k.instances());
        let reply: Value = self.timed(inv.invoke_async(&mut con)).await?;
        let read = parse_stream(&reply, batch).ok_or_else(|| Fail::sent("a malformed stream"))?;
        Ok(read)
    }

    /// Answers stream follow `ticket` (registered or not) with `events` after `after` and
    /// `end`; an ended follow is dropped. `true` when it ended.
    fn answer_stream(
        &mut self,
        ticket: Ticket,
        after: u64,
        events: Vec<LogEvent>,
        end: Option<StreamEnd>,
    ) -> bool {
        let ended = end.is_some();
        if ended {
            self.stream_follows.remove(&ticket);
        } else if let (Some(f), Some(e)) = (self.stream_follows.get_mut(&ticket), events.last()) {
            f.last = e.seq;
        }
        let _ = self
            .inbox
            .reply(ticket, StoreReply::StreamEvents { events, after, end });
        ended
    }

    /// Answers stream follow `ticket` with what its stream gained since its last answer
    /// (events, its end; nothing when nothing new). A stream gone with its session drops the
    /// follow silently, as the reference does.
    async fn advance_stream(
        &mut self,
        con: MultiplexedConnection,
        ticket: Ticket,
    ) -> Result<(), Fail> {
        loop {
            let Some(f) = self.stream_follows.get(&ticket) else {
                return Ok(());
            };
            let (session, stream, last) = (f.session.clone(), f.stream.clone(), f.last);
            let Some(read) = self
                .read_stream(con.clone(), &session, &stream, last)
                .await?
            else {
                self.drop_stream_follow(ticket).await;
                return Ok(());
            };
            if read.events.is_empty() && read.end.is_none() {
                return Ok(());
            }
            if self.answer_stream(ticket, last, read.events, read.end) {
                self.release_stream_channel(&session, &stream).await;
                return Ok(());
            }
            if !read.full {
                return Ok(());
            }
        }
    }

    /// One attempt at `op`: its answer, `None` for a follow (answered here).
    async fn once(&mut self, ticket: Ticket, op: &StoreOp) -> Result<Option<StoreReply>, Fail> {
        let mut con = self.connection().await?;
        if is_stateless(op) {
            let out = self.stateless().once(con, op).await;
            self.note(out.as_ref().map(|_| ()));
            return out.map(Some);
        }
        let k = self.keys.clone();
        let scripts = self.scripts.clone();
        let reply = match op {
            StoreOp::Delete { session } => {
                let message = BusMessage::SessionDeleted {
                    session: session.clone(),
                };
                let wire = encode_bus(&self.instance, &message)
                    .ok_or_else(|| Fail::unsent("the bus message cannot be encoded"))?;
                let mut inv = invocation(&scripts.delete, &k, session, 0);
                inv.arg(k.bus());
                inv.arg(wire);
                self.timed(inv.invoke_async::<i64>(&mut con)).await?;
                self.follows.retain(|_, (s, _)| *s != *session);
                self.stream_follows.retain(|_, f| f.session != *session);
                StoreReply::Done
            }
            StoreOp::Follow { session, from } => {
                let subscribe = !self.is_followed(session);
                let out = self
                    .stateless()
                    .follow_start(con, session, *from, subscribe)
                    .await;
                self.note(out.as_ref().map(|_| ()));
                let (after, events) = out?;
                self.follow_started(ticket, session, after, events, false)
                    .await;
                return Ok(None);
            }
            StoreOp::FollowStream {
                session,
                stream,
                after,
            } => {
                // Subscribe first: a wake-up after the read is never missed.
                let subscribed = self
                    .stream_follows
                    .values()
                    .any(|f| f.session == *session && f.stream == *stream);
                if !subscribed {
                    self.timed(con.subscribe(k.stream_wake(session, stream)))
                        .await?;
                }
                let read = match self.read_stream(con.clone(), session, stream, *after).await {
                    Ok(r) => r,
                    Err(f) => {
                        self.release_stream_channel(session, stream).await;
                        return Err(f);
                    }
                };
                let Some(read) = read else {
                    self.release_stream_channel(session, stream).await;
                    return Ok(Some(StoreReply::StreamEvents {
                        events: Vec::new(),
                        after: *after,
                        end: Some(StreamEnd::Unknown),
                    }));
                };
                if read.end.is_none() {
                    let follow = StreamFollow {
                        session: session.clone(),
                        stream: stream.clone(),
                        last: *after,
                    };
                    self.stream_follows.insert(ticket, follow);
                }
                if self.answer_stream(ticket, *after, read.events, read.end) {
                    self.release_stream_channel(session, stream).await;
                } else if read.full
                    && let Err(f) = self.advance_stream(con, ticket).await
                {
                    tracing::debug!(why = f.why, "a stream follow read failed (retried later)");
                }
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

    /// Reads a log after `after`, at most one batch.
    async fn read_log(
        &self,
        mut con: MultiplexedConnection,
        session: &str,
        after: u64,
    ) -> Result<Vec<LogEvent>, Fail> {
        let cmd = redis::cmd("XRANGE")
            .arg(self.keys.log(session))
            .arg(format!("({after}-0"))
            .arg("+")
            .arg("COUNT")
            .arg(self.cfg.read_batch.max(1))
            .to_owned();
        let reply: Value = self.timed(cmd.query_async(&mut con)).await?;
        parse_entries(&reply).ok_or_else(|| Fail::sent("a malformed listen log"))
    }

    /// The start of a follow of `session`: its wake-up channel subscribed first (when
    /// `subscribe`: no other follow of the session has it), so that a wake-up after the read
    /// is never missed; where it starts; the first events after it.
    async fn follow_start(
        &self,
        mut con: MultiplexedConnection,
        session: &str,
        from: FollowFrom,
        subscribe: bool,
    ) -> Result<(u64, Vec<LogEvent>), Fail> {
        if subscribe {
            self.timed(con.subscribe(self.keys.wake(session))).await?;
        }
        let after = match from {
            FollowFrom::After(n) => n,
            FollowFrom::Cursor => {
                let cur: Option<String> = self
                    .timed(
                        redis::cmd("HGET")
                            .arg(self.keys.meta(session))
                            .arg("cursor")
                            .to_owned()
                            .query_async(&mut con),
                    )
                    .await?;
                match cur {
                    None => 0,
                    Some(c) => c.parse().map_err(|_| Fail::sent("a malformed cursor"))?,
                }
            }
        };
        let events = self.read_log(con, session, after).await?;
        Ok((after, events))
    }

    /// One attempt at stateless operation `op` ([`is_stateless`]) on `con`.
    async fn once(&self, mut con: MultiplexedConnection, op: &StoreOp) -> Result<StoreReply, Fail> {
        let k = self.keys.clone();
        let scripts = self.scripts.clone();
        let reply = match op {
            StoreOp::Load { session } => {
                let got: Option<Vec<u8>> = self
                    .timed(
                        redis::cmd("GET")
                            .arg(k.record(session))
                            .to_owned()
                            .query_async(&mut con),
                    )
                    .await?;
                match got {
                    None => StoreReply::Session(None),
                    Some(b) => StoreReply::Session(Some(
                        decode_record(session, &b)
                            .ok_or_else(|| Fail::sent("a malformed record"))?,
                    )),
                }
            }
            StoreOp::Create {
                record,
                max_sessions,
                ttl,
            } => {
                let mut inv = invocation(&scripts.create, &k, &record.id, ttl_ms(*ttl));
                inv.arg(encode_record(record));
                inv.arg(u64::try_from(*max_sessions).unwrap_or(u64::MAX));
                match self.timed(inv.invoke_async::<i64>(&mut con)).await? {
                    1 => StoreReply::Created,
                    0 => StoreReply::AtCapacity,
                    _ => StoreReply::Failed(StoreError("the session id is taken".into())),
                }
            }
            StoreOp::Save { record, ttl } => {
                let message = BusMessage::SessionSaved {
                    session: record.id.clone(),
                };
                let wire = encode_bus(&self.instance, &message)
                    .ok_or_else(|| Fail::unsent("the bus message cannot be encoded"))?;
                let mut inv = invocation(&scripts.save, &k, &record.id, ttl_ms(*ttl));
                inv.arg(encode_record(record));
                inv.arg(k.bus());
                inv.arg(wire);
                match self.timed(inv.invoke_async::<i64>(&mut con)).await? {
                    1 => StoreReply::Done,
                    _ => StoreReply::Session(None),
                }
            }
            StoreOp::Touch { session, ttl } => {
                let inv = invocation(&scripts.touch, &k, session, ttl_ms(*ttl));
                self.timed(inv.invoke_async::<i64>(&mut con)).await?;
                StoreReply::Done
            }
            StoreOp::Publish {
                session,
                payload,
                capacity,
            } => {
                let mut inv = invocation(&scripts.publish, &k, session, 0);
                inv.arg(payload.as_ref());
                inv.arg(u64::try_from((*capacity).max(1)).unwrap_or(u64::MAX));
                inv.arg(k.wake(session));
                let seq = self.timed(inv.invoke_async::<i64>(&mut con)).await?;
                StoreReply::Published {
                    seq: u64::try_from(seq).unwrap_or(0),
                }
            }
            StoreOp::Delivered { session, seq } => {
                let mut inv = invocation(&scripts.delivered, &k, session, 0);
                inv.arg(*seq);
                self.timed(inv.invoke_async::<i64>(&mut con)).await?;
                StoreReply::Done
            }
            StoreOp::Broadcast { message } => {
                let wire = encode_bus(&self.instance, message)
                    .ok_or_else(|| Fail::unsent("the bus message cannot be encoded"))?;
                let cmd = redis::cmd("PUBLISH").arg(k.bus()).arg(wire).to_owned();
                self.timed(cmd.query_async::<i64>(&mut con)).await?;
                StoreReply::Done
            }
            StoreOp::OpenStream {
                session,
                stream,
                requests,
            } => {
                let requests = serde_json::to_string(requests)
                    .map_err(|_| Fail::unsent("the requests cannot be encoded"))?;
                let mut inv = invocation(&scripts.open_stream, &k, session, 0);
                inv.key(k.stream_log(session, stream))
                    .key(k.stream_meta(session, stream))
                    .key(liveness_key(&k, &self.owner))
                    .arg(&**stream)
                    .arg(&*self.owner)
                    .arg(requests)
                    .arg(ttl_ms(Some(self.cfg.liveness_ttl)));
                self.timed(inv.invoke_async::<i64>(&mut con)).await?;
                StoreReply::Done
            }
            StoreOp::Append {
                session,
                stream,
                seq,
                payload,
                answers,
            } => {
                let answered = match answers {
                    None => String::new(),
                    Some(id) => answered_field(id)
                        .ok_or_else(|| Fail::unsent("the request id cannot be encoded"))?,
                };
                let mut inv = invocation(&scripts.append, &k, session, 0);
                inv.key(k.stream_log(session, stream))
                    .key(k.stream_meta(session, stream))
                    .arg(*seq)
                    .arg(payload.as_ref())
                    .arg(answered)
                    .arg(k.stream_wake(session, stream));
                self.timed(inv.invoke_async::<i64>(&mut con)).await?;
                StoreReply::Done
            }
            StoreOp::EndStream {
                session,
                stream,
                retain,
            } => {
                let mut inv = invocation(&scripts.end_stream, &k, session, 0);
                inv.key(k.stream_log(session, stream))
                    .key(k.stream_meta(session, stream))
                    .arg(ttl_ms(Some(*retain)))
                    .arg(k.stream_wake(session, stream));
                self.timed(inv.invoke_async::<i64>(&mut con)).await?;
                StoreReply::Done
            }
            _ => return Err(Fail::unsent("not a stateless operation")),
        };
        Ok(reply)
    }
}

/// The liveness key of link `owner`.
fn liveness_key(keys: &Keys, owner: &str) -> String {
    format!("{}{}", keys.instances(), owner)
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
        Some(Err(e)) => {
            let dropped =
                e.is_connection_dropped() || e.is_io_error() || e.is_unrecoverable_error();
            Err(Fail {
                sent: true,
                why: e.to_string(),
                link: if dropped {
                    LinkTrouble::Dropped
                } else {
                    LinkTrouble::None
                },
            })
        }
        None => Err(Fail {
            sent: true,
            why: "timed out".into(),
            link: LinkTrouble::TimedOut,
        }),
    }
}

/// A script's invocation on a session's keys (record, sessions, log, meta, streams) with its
/// first two arguments (id, ttl ms).
fn invocation<'a>(
    script: &'a redis::Script,
    k: &Keys,
    session: &str,
    ttl: u64,
) -> redis::ScriptInvocation<'a> {
    let mut inv = script.key(k.record(session));
    inv.key(k.sessions())
        .key(k.log(session))
        .key(k.meta(session))
        .key(k.streams(session))
        .arg(session)
        .arg(ttl);
    inv
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

fn bulk(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

/// The entries of an `XRANGE` reply (`None`: malformed): ids `<seq>-0`, field `p`.
fn parse_entries(v: &Value) -> Option<Vec<LogEvent>> {
    let Value::Array(entries) = v else {
        return None;
    };
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Array(pair) = entry else {
            return None;
        };
        let [id, fields] = pair.as_slice() else {
            return None;
        };
        let id = std::str::from_utf8(bulk(id)?).ok()?;
        let (seq, zero) = id.split_once('-')?;
        if zero != "0" {
            return None;
        }
        let seq: u64 = seq.parse().ok()?;
        let payload = match fields {
            Value::Array(kv) => kv
                .chunks(2)
                .find(|c| c.len() == 2 && bulk(&c[0]) == Some(b"p"))
                .and_then(|c| bulk(&c[1])),
            Value::Map(kv) => kv
                .iter()
                .find(|(k, _)| bulk(k) == Some(b"p"))
                .and_then(|(_, v)| bulk(v)),
            _ => None,
        }?;
        out.push(LogEvent {
            seq,
            payload: Bytes::copy_from_slice(payload),
        });
    }
    Some(out)
}

/// The hash field naming an answered request: `a:` and the id's JSON.
fn answered_field(id: &RequestId) -> Option<String> {
    serde_json::to_string(id).ok().map(|j| format!("a:{j}"))
}

/// A `STREAM_READ` reply (`None`: malformed; `Some(None)`: no such stream).
fn parse_stream(v: &Value, batch: usize) -> Option<Option<StreamRead>> {
    let Value::Array(parts) = v else {
        return None;
    };
    match parts.as_slice() {
        [Value::Int(0)] => Some(None),
        [Value::Int(1), Value::Int(alive), hash, events] => {
            let fields: Vec<(&[u8], &[u8])> = match hash {
                Value::Array(kv) if kv.len() % 2 == 0 => kv
                    .chunks(2)
                    .map(|c| Some((bulk(&c[0])?, bulk(&c[1])?)))
                    .collect::<Option<_>>()?,
                Value::Map(kv) => kv
                    .iter()
                    .map(|(k, v)| Some((bulk(k)?, bulk(v)?)))
                    .collect::<Option<_>>()?,
                _ => return None,
            };
            let events = parse_entries(events)?;
            let full = events.len() >= batch;
            let finished = fields.iter().any(|(k, _)| *k == b"finished");
            let end = if full {
                None
            } else if finished {
                Some(StreamEnd::Finished)
            } else if *alive == 0 {
                let requests = fields.iter().find(|(k, _)| *k == b"requests")?.1;
                let requests: Vec<RequestId> = serde_json::from_slice(requests).ok()?;
                let answered: Vec<RequestId> = fields
                    .iter()
                    .filter_map(|(k, _)| k.strip_prefix(b"a:"))
                    .map(|j| serde_json::from_slice(j).ok())
                    .collect::<Option<_>>()?;
                let unanswered = requests
                    .into_iter()
                    .filter(|r| !answered.contains(r))
                    .collect();
                Some(StreamEnd::OwnerGone { unanswered })
            } else {
                None
            };
            Some(Some(StreamRead { events, end, full }))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_bus_messages_round_trip_and_garbage_is_refused() {
        let r = SessionRecord {
            id: "abc".into(),
            principal: Some("alice".into()),
            version: mcp_proto::ProtocolVersion::V2025_03_26,
            state: Some(Bytes::from_static(b"\x00\xffstate")),
        };
        assert_eq!(decode_record("abc", &encode_record(&r)), Some(r.clone()));
        assert_eq!(decode_record("other", &encode_record(&r)), None);
        assert_eq!(decode_record("abc", b"{not json"), None);
        assert_eq!(
            decode_record(
                "abc",
                br#"{"id":"abc","principal":null,"version":"1999","state":null}"#
            ),
            None
        );
        let response = mcp_proto::jsonrpc::Response::result(
            RequestId::String("a.1".into()),
            serde_json::value::RawValue::from_string("{\"x\":1}".into()).unwrap(),
        );
        for m in [
            BusMessage::SessionDeleted {
                session: "s".into(),
            },
            BusMessage::Cancel {
                session: "s".into(),
                request: RequestId::Number(7),
            },
            BusMessage::ClientResponse {
                instance: "b".into(),
                session: "s".into(),
                response,
            },
            BusMessage::ListenTaken {
                session: "s".into(),
                by: "c".into(),
            },
            BusMessage::SessionSaved {
                session: "s".into(),
            },
            BusMessage::StreamResumed {
                session: "s".into(),
                stream: "b.7".into(),
            },
            BusMessage::Notice {
                from: "a".into(),
                payload: Bytes::from_static(b"{\"method\":\"x\"}\x00\xff"),
            },
        ] {
            let wire = encode_bus("a", &m).unwrap();
            assert_eq!(decode_bus(&wire), Some(("a".to_string(), m)));
        }
        assert_eq!(decode_bus(b"[]"), None);
        // A message of a newer version, or a notice whose payload is not base64: refused
        // (the worker logs it), never a panic.
        assert_eq!(decode_bus(br#"{"from":"a","msg":{"Later":{"x":1}}}"#), None);
        assert_eq!(
            decode_bus(br#"{"from":"a","msg":{"Notice":{"from":"a","payload":"%%"}}}"#),
            None
        );
        assert_eq!(
            decode_bus(br#"{"from":"a","msg":{"Notice":{"from":"a"}}}"#),
            None
        );
    }

    #[test]
    fn stream_reads_decode_their_end_and_garbage_is_refused() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let entry = |id: &str| Value::Array(vec![b(id), Value::Array(vec![b("p"), b("x")])]);
        let read = |alive: i64, hash: Vec<Value>, events: Vec<Value>| {
            Value::Array(vec![
                Value::Int(1),
                Value::Int(alive),
                Value::Array(hash),
                Value::Array(events),
            ])
        };
        let meta = |extra: &[(&str, &str)]| {
            let mut h = vec![b("owner"), b("b:1"), b("requests"), b(r#"[1,"two",3]"#)];
            for (k, v) in extra {
                h.push(b(k));
                h.push(b(v));
            }
            h
        };
        let end = |v: &Value, batch| {
            parse_stream(v, batch).map(|r| r.map(|r| (r.events.len(), r.end, r.full)))
        };
        assert_eq!(end(&Value::Array(vec![Value::Int(0)]), 8), Some(None));
        assert_eq!(
            end(&read(1, meta(&[]), vec![entry("1-0")]), 8),
            Some(Some((1, None, false)))
        );
        assert_eq!(
            end(&read(1, meta(&[("finished", "1")]), vec![]), 8),
            Some(Some((0, Some(StreamEnd::Finished), false)))
        );
        // The owner is gone: the requests not answered, in order.
        let answered = answered_field(&RequestId::String("two".into())).unwrap();
        assert_eq!(
            end(&read(0, meta(&[(&answered, "1")]), vec![]), 8),
            Some(Some((
                0,
                Some(StreamEnd::OwnerGone {
                    unanswered: vec![RequestId::Number(1), RequestId::Number(3)]
                }),
                false
            )))
        );
        // A full batch: no end yet (more to read first).
        assert_eq!(
            end(&read(0, meta(&[]), vec![entry("1-0"), entry("2-0")]), 2),
            Some(Some((2, None, true)))
        );
        for bad in [
            Value::Int(1),
            Value::Array(vec![Value::Int(2)]),
            read(0, vec![b("owner")], vec![]),
            read(0, vec![b("requests"), b("{not json")], vec![]),
            read(0, meta(&[("a:{bad", "1")]), vec![]),
            read(1, meta(&[]), vec![entry("1-1")]),
        ] {
            assert!(parse_stream(&bad, 8).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn malformed_log_entries_are_refused() {
        let entry = |id: &str, field: &str| {
            Value::Array(vec![
                Value::BulkString(id.as_bytes().to_vec()),
                Value::Array(vec![
                    Value::BulkString(field.as_bytes().to_vec()),
                    Value::BulkString(b"x".to_vec()),
                ]),
            ])
        };
        let ok = Value::Array(vec![entry("3-0", "p")]);
        assert_eq!(
            parse_entries(&ok),
            Some(vec![LogEvent {
                seq: 3,
                payload: Bytes::from_static(b"x")
            }])
        );
        for bad in [
            Value::Array(vec![entry("3-1", "p")]),
            Value::Array(vec![entry("x-0", "p")]),
            Value::Array(vec![entry("3-0", "q")]),
            Value::Int(1),
        ] {
            assert_eq!(parse_entries(&bad), None, "{bad:?}");
        }
    }
}
