//! [`Planner`]: what to send to Redis for each store operation, and what its reply means,
//! sans-IO.
//!
//! # Theory of operation
//!
//! Every store operation becomes one command or script call (a follow's start a few, and
//! the worker's own upkeep two more). Which command, on which keys, with which arguments,
//! and what its reply means are decided here alone: a [`Planner`] method builds a
//! [`Request`] (a command, or a [`ScriptCall`] of one of the store's scripts) from the
//! operation and the link's names (key prefix, instance, owner) and limits, and a decoder
//! turns the [`Value`] that came back into the answer. Nothing here touches a connection,
//! a clock or a timer: the worker sends the request under its command timeout, retries as
//! it decides, and hands the reply back here. The `redis` crate does RESP and the
//! conversions of a reply to Rust types; the readers of the store's own values (records,
//! log entries, a request stream's state) are in `wire`.
//!
//! A request that cannot be built (a bus message or request id that does not encode) is a
//! [`Fail`] that was not sent; a reply that does not decode is a [`Fail`] that was sent,
//! never a panic. Neither a reply of the wrong type nor a value of the right type that does
//! not read (a malformed record, log or stream) says anything of the connection: it came
//! whole, so the connection stays up and only that operation fails.
//!
//! # Operations
//!
//! ```text
//!  operation     request                                   reply             answer
//!  ------------  ----------------------------------------  ----------------  -----------------------
//!  Load          GET p:s:<s>                               nil | record      Session(None | Some)
//!  Create        script Create: record, cap                1 | 0 | other     Created | AtCapacity |
//!                                                                            Failed (id taken)
//!  Save          script Save: record, p:bus, SessionSaved  1 | other         Done | Session(None)
//!  Touch         script Touch                              integer           Done
//!  Publish       script Publish: payload, cap, p:wake:<s>, seq (0 missing)   Published { seq }
//!                owner, ticket (a repeat: nothing)
//!  Delivered     script Delivered: seq                     integer           Done
//!  CommitStreams script CommitStreams: owner, liveness     integer           Done
//!                TTL; per stream: name, requests (or
//!                none), retention (or 0), p:rsw:<s>:<name>,
//!                n, then n × (seq, payload, a:<id>)
//!  Broadcast     PUBLISH p:bus <message>                   integer           Done
//!  Delete        script Delete: p:bus, SessionDeleted      integer           Done (the worker drops
//!                                                                            the session's follows)
//!  Follow        HGET p:meta:<s> cursor (from the cursor)  nil | digits      where it starts
//!                XRANGE p:log:<s> (<after>-0 + COUNT n     entries           Events (the worker)
//!  FollowStream  script StreamRead: after, n, p:inst:      {0} | {1, ..}     StreamEvents (the worker)
//!  Record Load   script RecordLoad: p:rec:<key>, p:inst:   {0} | {1, v, d,   Record(None | Some)
//!                                                          alive}
//!  Record Save   script RecordSave: guard, bytes, owner,   {2, v} | as Load  RecordSaved | Record-
//!                TTL on creation, liveness TTL                               Conflict
//!  (beat)        SET p:inst:<owner> 1 PX <liveness TTL>    anything          -
//!  (closed)      DEL p:inst:<owner>                        integer           -
//! ```
//!
//! Every session script call starts with the session's five keys (record, sessions, log, meta,
//! streams) and two arguments (id, idle TTL ms; 0 for none or where unused); the table
//! lists what follows them. The subscriptions (wake-up channels) are the worker's: they
//! are connection state, not commands with replies.

use std::time::Duration;

use redis::{RedisWrite, ToRedisArgs, Value};

use mcp_proto::server::{
    BusMessage, LogEvent, RecordGuard, RecordOp, ServiceRecord, StoreError, StoreOp, StoreReply,
    Ticket,
};

use crate::scripts::{ScriptId, Scripts};
use crate::wire::{
    Keys, Name, StreamRead, answered_field, decode_record, encode_bus, encode_record,
    parse_entries, parse_stream, ttl_ms,
};

/// One failed attempt.
#[derive(Debug)]
pub(crate) struct Fail {
    /// The command may have reached Redis.
    pub(crate) sent: bool,
    pub(crate) why: String,
    /// What the failure says of the connection.
    pub(crate) link: LinkTrouble,
}

/// What a failed command says of its connection (the worker acts on it: `Worker::note`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkTrouble {
    /// Nothing (Redis answered an error, or its reply did not decode).
    None,
    /// The connection broke.
    Dropped,
    /// No answer within the command timeout.
    TimedOut,
}

impl Fail {
    /// The same failure, for another operation of the batch it ended.
    pub(crate) fn again(&self) -> Fail {
        Fail {
            sent: self.sent,
            why: self.why.clone(),
            link: self.link,
        }
    }
    pub(crate) fn unsent(why: impl Into<String>) -> Fail {
        Fail {
            sent: false,
            why: why.into(),
            link: LinkTrouble::None,
        }
    }
    pub(crate) fn dropped(why: impl Into<String>) -> Fail {
        Fail {
            sent: false,
            why: why.into(),
            link: LinkTrouble::Dropped,
        }
    }
    pub(crate) fn sent(why: impl Into<String>) -> Fail {
        Fail {
            sent: true,
            why: why.into(),
            link: LinkTrouble::None,
        }
    }
    /// A command that got no answer within its timeout.
    pub(crate) fn timed_out() -> Fail {
        Fail {
            sent: true,
            why: "timed out".into(),
            link: LinkTrouble::TimedOut,
        }
    }
    /// A failure the `redis` crate reported for a sent command: an error reply (nothing of
    /// the connection), or a broken connection or a reply out of step (dropped). One error
    /// reply is of the connection: `NOSCRIPT` (Redis lost the store's scripts: `SCRIPT
    /// FLUSH`, or a server that took over). Nothing ran then, and the connection counts as
    /// lost: the next one loads the scripts again before any operation.
    pub(crate) fn redis(e: &redis::RedisError) -> Fail {
        if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) {
            return Fail::dropped("Redis does not have the store's scripts (NOSCRIPT)");
        }
        let dropped = e.is_connection_dropped() || e.is_io_error() || e.is_unrecoverable_error();
        Fail {
            sent: true,
            why: e.to_string(),
            link: if dropped {
                LinkTrouble::Dropped
            } else {
                LinkTrouble::None
            },
        }
    }
}

/// What to send: a command, or a call of one of the store's scripts.
#[derive(Debug)]
pub(crate) enum Request {
    Command(redis::Cmd),
    Script(ScriptCall),
}

/// A call of script `script` with its keys and arguments, each as it goes on the wire
/// (sent as its `EVALSHA`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScriptCall {
    pub(crate) script: ScriptId,
    pub(crate) keys: Parts,
    pub(crate) args: Parts,
}

/// Parts of a command (keys, or arguments) end to end in one buffer, with where each ends.
/// A commit names eight keys and three arguments per event: as one allocation each, they
/// and their frees were most of the link thread's allocator time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Parts {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Parts {
    fn with_capacity(parts: usize, bytes: usize) -> Parts {
        Parts {
            bytes: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(parts),
        }
    }

    /// Room for `parts` more parts of `bytes` bytes in all.
    fn reserve(&mut self, parts: usize, bytes: usize) {
        self.bytes.reserve(bytes);
        self.ends.reserve(parts);
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Each part's bytes, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let part = &self.bytes[start..end];
            start = end;
            part
        })
    }
}

impl RedisWrite for Parts {
    fn write_arg(&mut self, arg: &[u8]) {
        self.bytes.extend_from_slice(arg);
        self.ends.push(self.bytes.len());
    }

    fn write_arg_fmt(&mut self, arg: impl std::fmt::Display) {
        use std::io::Write as _;
        // Writes into memory, which do not fail.
        let _ = write!(self.bytes, "{arg}");
        self.ends.push(self.bytes.len());
    }

    fn reserve_space_for_args(&mut self, additional: impl IntoIterator<Item = usize>) {
        let (parts, bytes) = additional
            .into_iter()
            .fold((0, 0), |(n, b), len| (n + 1, b + len));
        self.reserve(parts, bytes);
    }

    fn writer_for_next_arg(&mut self) -> impl std::io::Write + '_ {
        /// The part written ends where the writer is dropped.
        struct Part<'a>(&'a mut Parts);
        impl Drop for Part<'_> {
            fn drop(&mut self) {
                self.0.ends.push(self.0.bytes.len());
            }
        }
        impl std::io::Write for Part<'_> {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.bytes.extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        Part(self)
    }
}

impl ScriptCall {
    /// A call of `script` with room for `keys` keys and `args` arguments of about
    /// `args_bytes` bytes in all.
    fn with_capacity(script: ScriptId, keys: usize, args: usize, args_bytes: usize) -> Self {
        ScriptCall {
            script,
            // A key: the prefix, its kind, a session id (a UUID), a stream's name.
            keys: Parts::with_capacity(keys, keys * 64),
            args: Parts::with_capacity(args, args_bytes),
        }
    }

    /// A call of `script` on `session`'s keys (record, sessions, log, meta, streams) with
    /// its first two arguments (id, ttl ms).
    fn on_session(script: ScriptId, k: &Keys, session: &str, ttl: u64) -> ScriptCall {
        // Room for every call but a commit's, which sizes its own.
        Self::on_session_with(script, k, session, ttl, (3, 6, 256))
    }

    /// [`on_session`](Self::on_session) with room for `more` (keys, arguments, arguments'
    /// bytes) besides.
    fn on_session_with(
        script: ScriptId,
        k: &Keys,
        session: &str,
        ttl: u64,
        more: (usize, usize, usize),
    ) -> ScriptCall {
        let (keys, args, bytes) = more;
        let mut call = ScriptCall::with_capacity(script, 5 + keys, 2 + args, 64 + bytes);
        call.key(k.record(session))
            .key(k.sessions())
            .key(k.log(session))
            .key(k.meta(session))
            .key(k.streams(session))
            .arg(session)
            .arg(ttl);
        call
    }

    /// The Create script's call: a new session has no log, hash nor streams, so only its
    /// record's and the sessions set's keys, with the same first two arguments.
    fn on_new_session(k: &Keys, session: &str, ttl: u64) -> ScriptCall {
        let mut call = ScriptCall::with_capacity(ScriptId::Create, 2, 4, 512);
        call.key(k.record(session))
            .key(k.sessions())
            .arg(session)
            .arg(ttl);
        call
    }

    /// Adds a key, written in place.
    fn key(&mut self, key: Name<'_>) -> &mut Self {
        key.write_redis_args(&mut self.keys);
        self
    }

    fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// The `EVALSHA` command of this call (the script is loaded on every connection before
    /// any operation runs; a `NOSCRIPT` loses the connection, and the next one loads it).
    pub(crate) fn evalsha(&self, scripts: &Scripts) -> redis::Cmd {
        let hash = scripts.get(self.script).get_hash();
        // Sized once: the command, the hash, the key count (at most 20 digits), every part.
        let size =
            "EVALSHA".len() + hash.len() + 20 + self.keys.bytes.len() + self.args.bytes.len();
        let mut cmd = redis::Cmd::with_capacity(3 + self.keys.len() + self.args.len(), size);
        cmd.arg("EVALSHA").arg(hash).arg(self.keys.len());
        for part in self.keys.iter().chain(self.args.iter()) {
            cmd.arg(part);
        }
        cmd
    }
}

/// How a stateless operation's reply reads ([`Expect::decode`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expect {
    /// `GET` of session `0`'s record: nil (none) or the record.
    Record(Box<str>),
    /// The Create script: 1 created, 0 at capacity, else the id is taken.
    Created,
    /// The Save script: 1 saved, else the session is gone.
    Saved,
    /// The Publish script: the sequence number (0: the session is gone).
    Published,
    /// An integer, whatever it is: `Done`.
    Done,
    /// RecordLoad: `{0}` or `{1, version, bytes, alive}`.
    ServiceRecord,
    /// RecordSave: `{2, version}` saved, else what RecordLoad answers (a conflict).
    RecordSaved,
}

impl Expect {
    /// The answer `reply` gives.
    pub(crate) fn decode(&self, reply: Value) -> Result<StoreReply, Fail> {
        Ok(match self {
            Expect::Record(session) => match convert::<Option<Vec<u8>>>(reply)? {
                None => StoreReply::Session(None),
                Some(b) => StoreReply::Session(Some(
                    decode_record(session, &b).ok_or_else(|| Fail::sent("a malformed record"))?,
                )),
            },
            Expect::Created => match convert::<i64>(reply)? {
                1 => StoreReply::Created,
                0 => StoreReply::AtCapacity,
                _ => StoreReply::Failed(StoreError("the session id is taken".into())),
            },
            Expect::Saved => match convert::<i64>(reply)? {
                1 => StoreReply::Done,
                _ => StoreReply::Session(None),
            },
            Expect::Published => StoreReply::Published {
                seq: u64::try_from(convert::<i64>(reply)?).unwrap_or(0),
            },
            Expect::Done => {
                convert::<i64>(reply)?;
                StoreReply::Done
            }
            Expect::ServiceRecord => StoreReply::Record(decode_service_record(reply)?),
            Expect::RecordSaved => {
                let items = convert::<Vec<Value>>(reply)?;
                match items
                    .first()
                    .map(|v| convert::<i64>(v.clone()))
                    .transpose()?
                {
                    Some(2) => StoreReply::RecordSaved {
                        version: items
                            .get(1)
                            .map(|v| convert::<u64>(v.clone()))
                            .transpose()?
                            .ok_or_else(|| Fail::sent("a malformed record version"))?,
                    },
                    _ => StoreReply::RecordConflict(decode_service_record(Value::Array(items))?),
                }
            }
        })
    }
}

/// What the RecordLoad script answers: `{0}` (none) or `{1, version, bytes, alive}` (alive 1,
/// 0, or -1: no owner).
fn decode_service_record(reply: Value) -> Result<Option<ServiceRecord>, Fail> {
    let items = convert::<Vec<Value>>(reply)?;
    let malformed = || Fail::sent("a malformed service record");
    match items.as_slice() {
        [tag] if convert::<i64>(tag.clone())? == 0 => Ok(None),
        [tag, version, value, alive] if convert::<i64>(tag.clone())? == 1 => {
            Ok(Some(ServiceRecord {
                version: convert::<u64>(version.clone()).map_err(|_| malformed())?,
                value: bytes::Bytes::from(
                    convert::<Vec<u8>>(value.clone()).map_err(|_| malformed())?,
                ),
                owner_alive: match convert::<i64>(alive.clone()).map_err(|_| malformed())? {
                    -1 => None,
                    n => Some(n == 1),
                },
            }))
        }
        _ => Err(malformed()),
    }
}

/// `reply` as a `T`, as the `redis` crate converts it. A reply that does not convert came
/// whole over a working connection: it says nothing of the connection (which stays up; a
/// value of the wrong type under one key must not cost every session a reconnection), and
/// the operation is answered `Failed`.
fn convert<T: redis::FromRedisValue>(reply: Value) -> Result<T, Fail> {
    redis::from_redis_value(reply).map_err(|e| Fail::sent(format!("an unexpected reply: {e}")))
}

/// The cursor an `HGET p:meta:<s> cursor` answered: where a follow from the cursor starts
/// (0: none yet).
pub(crate) fn decode_cursor(reply: Value) -> Result<u64, Fail> {
    match convert::<Option<String>>(reply)? {
        None => Ok(0),
        Some(c) => c.parse().map_err(|_| Fail::sent("a malformed cursor")),
    }
}

/// The events an `XRANGE` of a listen log answered.
pub(crate) fn decode_log(reply: Value) -> Result<Vec<LogEvent>, Fail> {
    parse_entries(&reply).ok_or_else(|| Fail::sent("a malformed listen log"))
}

/// The integer a command answered (ignored, but it must be one).
pub(crate) fn decode_int(reply: Value) -> Result<i64, Fail> {
    convert(reply)
}

/// Any reply (a `SET`'s `OK`).
pub(crate) fn decode_unit(reply: Value) -> Result<(), Fail> {
    convert(reply)
}

/// The operations' names and limits: what planning needs besides the operation.
pub(crate) struct Planner {
    keys: Keys,
    /// The instance's name (the sender of its bus messages).
    instance: Box<str>,
    /// The link's owner name in request streams, `<instance>:<incarnation>`.
    owner: Box<str>,
    /// Log events read at once (at least 1).
    read_batch: usize,
    /// How long the owner counts as alive without a renewal.
    liveness_ttl: Duration,
}

impl Planner {
    pub(crate) fn new(
        prefix: &str,
        instance: &str,
        owner: &str,
        read_batch: usize,
        liveness_ttl: Duration,
    ) -> Planner {
        Planner {
            keys: Keys::new(prefix),
            instance: instance.into(),
            owner: owner.into(),
            read_batch: read_batch.max(1),
            liveness_ttl,
        }
    }

    pub(crate) fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The events read at once: a read that got this many reads again.
    pub(crate) fn read_batch(&self) -> usize {
        self.read_batch
    }

    /// The request of stateless operation `op` (`crate::is_stateless`), and how its reply
    /// reads.
    pub(crate) fn stateless(
        &self,
        ticket: Ticket,
        op: &StoreOp,
    ) -> Result<(Request, Expect), Fail> {
        let k = &self.keys;
        let script = |id, session: &str, ttl| ScriptCall::on_session(id, k, session, ttl);
        let (call, expect) = match op {
            StoreOp::Load { session } => {
                let cmd = redis::cmd("GET").arg(k.record(session)).to_owned();
                return Ok((Request::Command(cmd), Expect::Record(session.clone())));
            }
            StoreOp::Create {
                record,
                max_sessions,
                ttl,
            } => {
                let mut call = ScriptCall::on_new_session(k, &record.id, ttl_ms(*ttl));
                call.arg(encode_record(record))
                    .arg(u64::try_from(*max_sessions).unwrap_or(u64::MAX));
                (call, Expect::Created)
            }
            StoreOp::Save { record, ttl } => {
                let message = BusMessage::SessionSaved {
                    session: record.id.clone(),
                };
                let wire = self.bus_message(&message)?;
                let mut call = script(ScriptId::Save, &record.id, ttl_ms(*ttl));
                call.arg(encode_record(record)).arg(k.bus()).arg(wire);
                (call, Expect::Saved)
            }
            StoreOp::Touch { session, ttl } => {
                (script(ScriptId::Touch, session, ttl_ms(*ttl)), Expect::Done)
            }
            StoreOp::Publish {
                session,
                payload,
                capacity,
                gap,
            } => {
                let mut call = script(ScriptId::Publish, session, 0);
                call.arg(payload.as_ref())
                    .arg(u64::try_from((*capacity).max(1)).unwrap_or(u64::MAX))
                    .arg(k.wake(session))
                    .arg(&*self.owner)
                    .arg(ticket.as_u64())
                    .arg(u8::from(*gap));
                (call, Expect::Published)
            }
            StoreOp::Delivered { session, seq } => {
                let mut call = script(ScriptId::Delivered, session, 0);
                call.arg(*seq);
                (call, Expect::Done)
            }
            StoreOp::Broadcast { message } => {
                let wire = self.bus_message(message)?;
                let cmd = redis::cmd("PUBLISH").arg(k.bus()).arg(wire).to_owned();
                return Ok((Request::Command(cmd), Expect::Done));
            }
            StoreOp::CommitStreams { session, streams } => {
                // Sized once: per stream two keys and five arguments, per event three.
                let events = streams.iter().flat_map(|c| &c.events);
                let more = (
                    1 + 2 * streams.len(),
                    2 + 5 * streams.len() + 3 * events.clone().count(),
                    64 + 128 * streams.len() + events.map(|e| 64 + e.payload.len()).sum::<usize>(),
                );
                let mut call =
                    ScriptCall::on_session_with(ScriptId::CommitStreams, k, session, 0, more);
                call.key(k.liveness(&self.owner))
                    .arg(&*self.owner)
                    .arg(ttl_ms(Some(self.liveness_ttl)));
                for c in streams {
                    let requests = match &c.open {
                        None => String::new(),
                        Some(requests) => serde_json::to_string(requests)
                            .map_err(|_| Fail::unsent("the requests cannot be encoded"))?,
                    };
                    call.key(k.stream_log(session, &c.stream))
                        .key(k.stream_meta(session, &c.stream))
                        .arg(&*c.stream)
                        .arg(requests)
                        .arg(c.end.map_or(0, |retain| ttl_ms(Some(retain))))
                        .arg(k.stream_wake(session, &c.stream))
                        .arg(c.events.len());
                    for e in &c.events {
                        let answered = match &e.answers {
                            None => String::new(),
                            Some(id) => answered_field(id)
                                .ok_or_else(|| Fail::unsent("the request id cannot be encoded"))?,
                        };
                        call.arg(e.seq).arg(e.payload.as_ref()).arg(answered);
                    }
                }
                (call, Expect::Done)
            }
            StoreOp::Record(RecordOp::Load { key }) => {
                let mut call = ScriptCall::with_capacity(ScriptId::RecordLoad, 1, 1, 64);
                call.key(k.service_record(key)).arg(k.instances());
                (call, Expect::ServiceRecord)
            }
            StoreOp::Record(RecordOp::Save {
                key,
                value,
                guard,
                owned,
                ttl,
            }) => {
                let mut call =
                    ScriptCall::with_capacity(ScriptId::RecordSave, 2, 6, 128 + value.len());
                let guard = match guard {
                    RecordGuard::Absent => 0,
                    RecordGuard::Version(v) => *v,
                };
                call.key(k.service_record(key))
                    .key(k.liveness(&self.owner))
                    .arg(k.instances())
                    .arg(guard)
                    .arg(value.as_ref())
                    .arg(if *owned { &*self.owner } else { "" })
                    .arg(ttl_ms(*ttl))
                    .arg(ttl_ms(Some(self.liveness_ttl)));
                (call, Expect::RecordSaved)
            }
            StoreOp::Delete { .. }
            | StoreOp::Follow { .. }
            | StoreOp::FollowStream { .. }
            | StoreOp::Unfollow { .. } => {
                return Err(Fail::unsent("not a stateless operation"));
            }
        };
        Ok((Request::Script(call), expect))
    }

    /// `message` as this instance publishes it.
    fn bus_message(&self, message: &BusMessage) -> Result<Vec<u8>, Fail> {
        encode_bus(&self.instance, message)
            .ok_or_else(|| Fail::unsent("the bus message cannot be encoded"))
    }

    /// Deleting `session` (its record, log, hash and request streams), and telling the
    /// others ([`BusMessage::SessionDeleted`]); the reply reads with [`Expect::Done`].
    pub(crate) fn delete(&self, session: &str) -> Result<Request, Fail> {
        let message = BusMessage::SessionDeleted {
            session: session.into(),
        };
        let wire = self.bus_message(&message)?;
        let mut call = ScriptCall::on_session(ScriptId::Delete, &self.keys, session, 0);
        call.arg(self.keys.bus()).arg(wire);
        Ok(Request::Script(call))
    }

    /// The cursor of `session`'s listen log ([`decode_cursor`]).
    pub(crate) fn cursor(&self, session: &str) -> Request {
        let cmd = redis::cmd("HGET")
            .arg(self.keys.meta(session))
            .arg("cursor")
            .to_owned();
        Request::Command(cmd)
    }

    /// The events of `session`'s log after `after`, at most one batch ([`decode_log`]).
    pub(crate) fn read_log(&self, session: &str, after: u64) -> Request {
        let cmd = redis::cmd("XRANGE")
            .arg(self.keys.log(session))
            .arg(format!("({after}-0"))
            .arg("+")
            .arg("COUNT")
            .arg(self.read_batch)
            .to_owned();
        Request::Command(cmd)
    }

    /// Request stream `stream` of `session` after `after`, at most one batch
    /// ([`decode_stream`](Self::decode_stream)).
    pub(crate) fn read_stream(&self, session: &str, stream: &str, after: u64) -> Request {
        let k = &self.keys;
        let mut call = ScriptCall::on_session(ScriptId::StreamRead, k, session, 0);
        call.key(k.stream_log(session, stream))
            .key(k.stream_meta(session, stream))
            .arg(after)
            .arg(self.read_batch)
            .arg(k.instances());
        Request::Script(call)
    }

    /// What a [`read_stream`](Self::read_stream) answered (`None`: no such stream, or its
    /// session is gone).
    pub(crate) fn decode_stream(&self, reply: &Value) -> Result<Option<StreamRead>, Fail> {
        parse_stream(reply, self.read_batch).ok_or_else(|| Fail::sent("a malformed stream"))
    }

    /// Renewing this link's liveness key ([`decode_unit`]).
    pub(crate) fn renew_liveness(&self) -> Request {
        let cmd = redis::cmd("SET")
            .arg(self.keys.liveness(&self.owner))
            .arg("1")
            .arg("PX")
            .arg(ttl_ms(Some(self.liveness_ttl)))
            .to_owned();
        Request::Command(cmd)
    }

    /// Deleting this link's liveness key, the link gone in order ([`decode_int`]).
    pub(crate) fn drop_liveness(&self) -> Request {
        Request::Command(
            redis::cmd("DEL")
                .arg(self.keys.liveness(&self.owner))
                .to_owned(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use bytes::Bytes;
    use mcp_proto::jsonrpc::RequestId;
    use mcp_proto::server::{CommitEvent, FollowFrom, SessionRecord, StreamCommit, StreamEnd};

    use crate::wire::decode_bus;

    const MS: Duration = Duration::from_millis(1);

    fn planner() -> Planner {
        Planner::new("p", "a", "a:42", 8, 5000 * MS)
    }

    fn record(id: &str) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            principal: Some("alice".into()),
            version: mcp_proto::ProtocolVersion::V2025_03_26,
            state: Some(Bytes::from_static(b"\x00st")),
        }
    }

    /// A command's words, as text where they are UTF-8.
    fn words(cmd: &redis::Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => "<cursor>".into(),
            })
            .collect()
    }

    fn text(v: &Parts) -> Vec<String> {
        v.iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect()
    }

    fn command(r: Request) -> Vec<String> {
        match r {
            Request::Command(cmd) => words(&cmd),
            Request::Script(call) => panic!("a command expected, got {call:?}"),
        }
    }

    /// The script, its keys and its arguments as text.
    fn script(r: Request) -> (ScriptId, Vec<String>, Vec<String>) {
        match r {
            Request::Script(call) => (call.script, text(&call.keys), text(&call.args)),
            Request::Command(cmd) => panic!("a script expected, got {:?}", words(&cmd)),
        }
    }

    fn session_keys(s: &str) -> Vec<String> {
        [
            format!("p:s:{s}"),
            "p:sessions".into(),
            format!("p:log:{s}"),
            format!("p:meta:{s}"),
            format!("p:rss:{s}"),
        ]
        .into()
    }

    fn stream_keys(s: &str, name: &str) -> Vec<String> {
        let mut k = session_keys(s);
        k.push(format!("p:rs:{s}:{name}"));
        k.push(format!("p:rsm:{s}:{name}"));
        k
    }

    fn plan(op: StoreOp) -> (Request, Expect) {
        planner()
            .stateless(Ticket::from_u64(7), &op)
            .expect("planned")
    }

    fn bytes(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn service_records_call_their_scripts_and_read_saved_conflicts_and_garbage() {
        use mcp_proto::server::{RecordGuard, RecordOp, ServiceRecord};
        let (req, expect) = plan(StoreOp::Record(RecordOp::Load {
            key: "task:1".into(),
        }));
        assert_eq!(
            script(req),
            (
                ScriptId::RecordLoad,
                vec!["p:rec:task:1".into()],
                vec!["p:inst:".into()]
            )
        );
        assert_eq!(
            expect.decode(Value::Array(vec![Value::Int(0)])).unwrap(),
            StoreReply::Record(None)
        );
        let stored = |alive| {
            Value::Array(vec![
                Value::Int(1),
                Value::Int(3),
                bytes("{}"),
                Value::Int(alive),
            ])
        };
        let record = |owner_alive| ServiceRecord {
            version: 3,
            value: Bytes::from_static(b"{}"),
            owner_alive,
        };
        assert_eq!(
            expect.decode(stored(1)).unwrap(),
            StoreReply::Record(Some(record(Some(true))))
        );
        assert_eq!(
            expect.decode(stored(0)).unwrap(),
            StoreReply::Record(Some(record(Some(false))))
        );
        assert_eq!(
            expect.decode(stored(-1)).unwrap(),
            StoreReply::Record(Some(record(None)))
        );
        for bad in [
            Value::Nil,
            Value::Array(vec![]),
            Value::Array(vec![Value::Int(1), bytes("x")]),
            bytes("1"),
        ] {
            let f = expect.decode(bad).unwrap_err();
            assert_eq!((f.sent, f.link), (true, LinkTrouble::None));
        }
        let save = |guard, owned| {
            plan(StoreOp::Record(RecordOp::Save {
                key: "task:1".into(),
                value: Bytes::from_static(b"{}"),
                guard,
                owned,
                ttl: Some(2 * MS),
            }))
        };
        let (req, expect) = save(RecordGuard::Absent, true);
        let (id, keys, args) = script(req);
        assert_eq!(id, ScriptId::RecordSave);
        assert_eq!(keys, ["p:rec:task:1", "p:inst:a:42"]);
        assert_eq!(args, ["p:inst:", "0", "{}", "a:42", "2", "5000"]);
        let (req, _) = save(RecordGuard::Version(7), false);
        assert_eq!(script(req).2[1..4], ["7", "{}", ""]);
        assert_eq!(
            expect
                .decode(Value::Array(vec![Value::Int(2), Value::Int(4)]))
                .unwrap(),
            StoreReply::RecordSaved { version: 4 }
        );
        assert_eq!(
            expect.decode(stored(1)).unwrap(),
            StoreReply::RecordConflict(Some(record(Some(true))))
        );
        assert_eq!(
            expect.decode(Value::Array(vec![Value::Int(0)])).unwrap(),
            StoreReply::RecordConflict(None)
        );
        assert!(expect.decode(Value::Array(vec![Value::Int(2)])).is_err());
    }

    #[test]
    fn load_is_a_get_of_the_record_and_its_reply_reads_as_the_session() {
        let (req, expect) = plan(StoreOp::Load {
            session: "s1".into(),
        });
        assert_eq!(command(req), ["GET", "p:s:s1"]);
        assert_eq!(expect, Expect::Record("s1".into()));
        let r = record("s1");
        let stored = Value::BulkString(encode_record(&r));
        assert_eq!(expect.decode(stored).unwrap(), StoreReply::Session(Some(r)));
        assert_eq!(
            expect.decode(Value::Nil).unwrap(),
            StoreReply::Session(None)
        );
        // Another session's record, or garbage: malformed, nothing of the connection.
        let other = Value::BulkString(encode_record(&record("s2")));
        for bad in [other, bytes("{not json")] {
            let f = expect.decode(bad).unwrap_err();
            assert_eq!((f.sent, f.link), (true, LinkTrouble::None));
            assert_eq!(f.why, "a malformed record");
        }
        // A reply of another type: the operation fails, the connection stays.
        let f = expect.decode(Value::Array(vec![Value::Nil])).unwrap_err();
        assert_eq!((f.sent, f.link), (true, LinkTrouble::None));
    }

    #[test]
    fn create_calls_its_script_with_the_record_and_the_cap_and_reads_its_three_answers() {
        let r = record("s1");
        let (req, expect) = plan(StoreOp::Create {
            record: r.clone(),
            max_sessions: 10,
            ttl: Some(1500 * MS),
        });
        let (id, keys, args) = script(req);
        assert_eq!(id, ScriptId::Create);
        assert_eq!(keys, session_keys("s1")[..2]);
        let wire = String::from_utf8(encode_record(&r)).unwrap();
        assert_eq!(args, ["s1", "1500", &wire, "10"]);
        assert_eq!(expect, Expect::Created);
        assert_eq!(expect.decode(Value::Int(1)).unwrap(), StoreReply::Created);
        assert_eq!(
            expect.decode(Value::Int(0)).unwrap(),
            StoreReply::AtCapacity
        );
        assert_eq!(
            expect.decode(Value::Int(-1)).unwrap(),
            StoreReply::Failed(StoreError("the session id is taken".into()))
        );
        // An integer as text converts (as a typed query would); anything else fails.
        assert_eq!(expect.decode(bytes("1")).unwrap(), StoreReply::Created);
        assert!(expect.decode(bytes("x")).is_err());
        assert!(expect.decode(Value::Nil).is_err());
        // No TTL: 0; a TTL under a millisecond: 1.
        let (req, _) = plan(StoreOp::Create {
            record: r.clone(),
            max_sessions: usize::MAX,
            ttl: None,
        });
        assert_eq!(script(req).2[1..2], ["0"]);
        let (req, _) = plan(StoreOp::Create {
            record: r,
            max_sessions: 1,
            ttl: Some(Duration::from_micros(10)),
        });
        assert_eq!(script(req).2[1..2], ["1"]);
    }

    #[test]
    fn save_publishes_session_saved_from_this_instance_and_reads_a_missing_session() {
        let r = record("s1");
        let (req, expect) = plan(StoreOp::Save {
            record: r.clone(),
            ttl: Some(2 * MS),
        });
        let (id, keys, args) = script(req);
        assert_eq!(id, ScriptId::Save);
        assert_eq!(keys, session_keys("s1"));
        assert_eq!(args[..2], ["s1", "2"]);
        assert_eq!(args[2], String::from_utf8(encode_record(&r)).unwrap());
        assert_eq!(args[3], "p:bus");
        assert_eq!(
            decode_bus(args[4].as_bytes()),
            Some((
                "a".into(),
                BusMessage::SessionSaved {
                    session: "s1".into()
                }
            ))
        );
        assert_eq!(expect.decode(Value::Int(1)).unwrap(), StoreReply::Done);
        assert_eq!(
            expect.decode(Value::Int(0)).unwrap(),
            StoreReply::Session(None)
        );
        assert!(expect.decode(Value::Nil).is_err());
    }

    #[test]
    fn touch_and_delivered_call_their_scripts_and_answer_done_to_any_integer() {
        let (req, expect) = plan(StoreOp::Touch {
            session: "s1".into(),
            ttl: None,
        });
        assert_eq!(
            script(req),
            (
                ScriptId::Touch,
                session_keys("s1"),
                vec!["s1".into(), "0".into()]
            )
        );
        assert_eq!(expect, Expect::Done);
        let (req, expect) = plan(StoreOp::Delivered {
            session: "s1".into(),
            seq: 7,
        });
        assert_eq!(
            script(req),
            (
                ScriptId::Delivered,
                session_keys("s1"),
                vec!["s1".into(), "0".into(), "7".into()]
            )
        );
        assert_eq!(expect, Expect::Done);
        assert_eq!(
            Expect::Done.decode(Value::Int(0)).unwrap(),
            StoreReply::Done
        );
        let f = Expect::Done.decode(Value::Nil).unwrap_err();
        assert!(f.sent);
        let f = Expect::Done.decode(bytes("OK")).unwrap_err();
        assert!(f.sent);
    }

    #[test]
    fn publish_appends_the_payload_wakes_the_followers_and_reads_the_sequence_number() {
        let (req, expect) = plan(StoreOp::Publish {
            session: "s1".into(),
            payload: Bytes::from_static(b"{\"x\":1}"),
            capacity: 0,
            gap: false,
        });
        let (id, keys, args) = script(req);
        assert_eq!(id, ScriptId::Publish);
        assert_eq!(keys, session_keys("s1"));
        // A capacity of 0 keeps one event.
        // The publisher and its ticket: a repeat is recognised (the script appends once).
        assert_eq!(
            args,
            ["s1", "0", "{\"x\":1}", "1", "p:wake:s1", "a:42", "7", "0"]
        );
        // A gap's marker alone: an empty message, the gap flag set.
        let (req, _) = plan(StoreOp::Publish {
            session: "s1".into(),
            payload: Bytes::new(),
            capacity: 4,
            gap: true,
        });
        let (_, _, args) = script(req);
        assert_eq!(args, ["s1", "0", "", "4", "p:wake:s1", "a:42", "7", "1"]);
        assert_eq!(
            expect.decode(Value::Int(12)).unwrap(),
            StoreReply::Published { seq: 12 }
        );
        // 0: the session is gone; a negative number reads as 0 too.
        assert_eq!(
            expect.decode(Value::Int(-3)).unwrap(),
            StoreReply::Published { seq: 0 }
        );
        assert!(expect.decode(Value::Array(vec![])).is_err());
    }

    #[test]
    fn broadcast_publishes_the_message_from_this_instance_on_the_bus() {
        let message = BusMessage::Cancel {
            session: "s1".into(),
            request: RequestId::Number(3),
        };
        let (req, expect) = plan(StoreOp::Broadcast {
            message: message.clone(),
        });
        let words = command(req);
        assert_eq!(words[..2], ["PUBLISH", "p:bus"]);
        assert_eq!(decode_bus(words[2].as_bytes()), Some(("a".into(), message)));
        assert_eq!(words.len(), 3);
        assert_eq!(expect, Expect::Done);
        assert_eq!(expect.decode(Value::Int(2)).unwrap(), StoreReply::Done);
    }

    fn stream(
        name: &str,
        open: Option<Vec<RequestId>>,
        events: &[(u64, Option<RequestId>)],
        end: Option<Duration>,
    ) -> StreamCommit {
        StreamCommit {
            stream: name.into(),
            open,
            events: events
                .iter()
                .map(|(seq, answers)| CommitEvent {
                    seq: *seq,
                    payload: Bytes::from(format!("ev{seq}")),
                    answers: answers.clone(),
                })
                .collect(),
            end,
        }
    }

    #[test]
    fn a_commit_registers_ends_and_appends_to_each_of_its_streams() {
        let requests = vec![RequestId::Number(1), RequestId::String("x".into())];
        let answered = Some(RequestId::String("r".into()));
        let (req, expect) = plan(StoreOp::CommitStreams {
            session: "s1".into(),
            streams: vec![
                stream("a.1", Some(requests), &[(1, None)], None),
                stream(
                    "a.2",
                    None,
                    &[(4, None), (5, answered)],
                    Some(Duration::ZERO),
                ),
                stream("a.3", None, &[], Some(Duration::from_secs(2))),
            ],
        });
        let (id, keys, args) = script(req);
        assert_eq!(id, ScriptId::CommitStreams);
        let mut want = stream_keys("s1", "a.1")[..5].to_vec();
        want.push("p:inst:a:42".into());
        for name in ["a.1", "a.2", "a.3"] {
            want.extend_from_slice(&stream_keys("s1", name)[5..]);
        }
        assert_eq!(keys, want);
        assert_eq!(args[..4], ["s1", "0", "a:42", "5000"]);
        // Registering with its requests; not ended (0).
        let first = [
            "a.1",
            r#"[1,"x"]"#,
            "0",
            "p:rsw:s1:a.1",
            "1",
            "1",
            "ev1",
            "",
        ];
        assert_eq!(args[4..12], first);
        // Registered already (no requests); the retention is at least 1 ms (0: not ended).
        let second = [
            "a.2",
            "",
            "1",
            "p:rsw:s1:a.2",
            "2",
            "4",
            "ev4",
            "",
            "5",
            "ev5",
            r#"a:"r""#,
        ];
        assert_eq!(args[12..23], second);
        assert_eq!(args[23..], ["a.3", "", "2000", "p:rsw:s1:a.3", "0"]);
        assert_eq!(expect, Expect::Done);
    }

    #[test]
    fn the_worker_s_operations_are_not_planned_as_stateless() {
        let p = planner();
        for op in [
            StoreOp::Delete {
                session: "s".into(),
            },
            StoreOp::Follow {
                session: "s".into(),
                from: FollowFrom::Cursor,
            },
            StoreOp::FollowStream {
                session: "s".into(),
                stream: "a.1".into(),
                after: 0,
            },
            StoreOp::Unfollow {
                follow: Ticket::from_u64(1),
            },
        ] {
            let f = p.stateless(Ticket::from_u64(1), &op).unwrap_err();
            assert!(!f.sent, "{op:?}");
        }
    }

    #[test]
    fn delete_calls_its_script_and_tells_the_others() {
        let (id, keys, args) = script(planner().delete("s1").unwrap());
        assert_eq!(id, ScriptId::Delete);
        assert_eq!(keys, session_keys("s1"));
        assert_eq!(args[..3], ["s1", "0", "p:bus"]);
        assert_eq!(
            decode_bus(args[3].as_bytes()),
            Some((
                "a".into(),
                BusMessage::SessionDeleted {
                    session: "s1".into()
                }
            ))
        );
        assert_eq!(args.len(), 4);
    }

    #[test]
    fn a_follow_reads_its_cursor_then_its_log_after_it() {
        let p = planner();
        assert_eq!(command(p.cursor("s1")), ["HGET", "p:meta:s1", "cursor"]);
        assert_eq!(decode_cursor(Value::Nil).unwrap(), 0);
        assert_eq!(decode_cursor(bytes("17")).unwrap(), 17);
        let f = decode_cursor(bytes("x")).unwrap_err();
        assert_eq!(
            (f.sent, f.link, &*f.why),
            (true, LinkTrouble::None, "a malformed cursor")
        );
        assert!(decode_cursor(Value::Array(vec![])).is_err());
        assert_eq!(
            command(p.read_log("s1", 17)),
            ["XRANGE", "p:log:s1", "(17-0", "+", "COUNT", "8"]
        );
        let entry =
            |id: &str| Value::Array(vec![bytes(id), Value::Array(vec![bytes("p"), bytes("x")])]);
        assert_eq!(
            decode_log(Value::Array(vec![entry("18-0")])).unwrap(),
            [LogEvent {
                seq: 18,
                payload: Bytes::from_static(b"x"),
                gap: false,
            }]
        );
        let f = decode_log(Value::Array(vec![entry("18-1")])).unwrap_err();
        assert_eq!(
            (f.sent, f.link, &*f.why),
            (true, LinkTrouble::None, "a malformed listen log")
        );
        // A read batch of 0 reads one event at a time.
        let p = Planner::new("p", "a", "a:1", 0, MS);
        assert_eq!(command(p.read_log("s", 0))[5], "1");
    }

    #[test]
    fn a_stream_follow_reads_the_stream_with_the_liveness_keys_prefix() {
        let p = planner();
        let (id, keys, args) = script(p.read_stream("s1", "b.2", 3));
        assert_eq!(id, ScriptId::StreamRead);
        assert_eq!(keys, stream_keys("s1", "b.2"));
        assert_eq!(args, ["s1", "0", "3", "8", "p:inst:"]);
        assert!(
            p.decode_stream(&Value::Array(vec![Value::Int(0)]))
                .unwrap()
                .is_none()
        );
        let finished = Value::Array(vec![
            Value::Int(1),
            Value::Int(1),
            Value::Array(vec![
                bytes("owner"),
                bytes("b:1"),
                bytes("finished"),
                bytes("1"),
            ]),
            Value::Array(vec![]),
        ]);
        let read = p.decode_stream(&finished).unwrap().unwrap();
        assert_eq!(read.end, Some(StreamEnd::Finished));
        let f = p.decode_stream(&Value::Int(3)).unwrap_err();
        assert_eq!(
            (f.sent, f.link, &*f.why),
            (true, LinkTrouble::None, "a malformed stream")
        );
    }

    #[test]
    fn the_liveness_key_is_renewed_for_the_ttl_and_deleted_by_the_owner() {
        let p = planner();
        assert_eq!(
            command(p.renew_liveness()),
            ["SET", "p:inst:a:42", "1", "PX", "5000"]
        );
        assert_eq!(command(p.drop_liveness()), ["DEL", "p:inst:a:42"]);
        assert!(decode_unit(Value::Okay).is_ok());
        assert_eq!(decode_int(Value::Int(1)).unwrap(), 1);
        assert!(decode_int(Value::Okay).is_err());
    }

    #[test]
    fn parts_keep_each_part_whole_however_it_was_written() {
        let keys = Keys::new("p");
        let mut parts = Parts::default();
        parts.write_arg(b"raw");
        parts.write_arg_fmt(42u64);
        keys.stream_wake("s1", "r9").write_redis_args(&mut parts);
        drop(parts.writer_for_next_arg());
        7u8.write_redis_args(&mut parts);
        assert_eq!(text(&parts), ["raw", "42", "p:rsw:s1:r9", "", "7"]);
        assert_eq!(parts.len(), 5);
    }

    #[test]
    fn a_script_call_becomes_its_evalsha_with_its_keys_and_arguments() {
        let scripts = Scripts::new();
        let (req, _) = plan(StoreOp::Touch {
            session: "s1".into(),
            ttl: Some(9 * MS),
        });
        let Request::Script(call) = req else {
            panic!("a script")
        };
        // What `evalsha` sends, built the way a `redis::Script` builds it.
        let mut want = redis::cmd("EVALSHA");
        want.arg(scripts.get(ScriptId::Touch).get_hash())
            .arg(5)
            .arg(session_keys("s1"))
            .arg("s1")
            .arg(9);
        assert_eq!(
            call.evalsha(&scripts).get_packed_command(),
            want.get_packed_command()
        );
    }
}
