//! [`MemoryCluster`]: the cluster store and bus in memory — the reference semantics every
//! store executor (Redis) must match, and the fake the sans-IO tests run several routers on.
//!
//! It is sans-IO like the routers: [`MemoryCluster::execute`] applies one [`StoreOp`] at a
//! time `now`, and what it answers (to the operation's member) or publishes (to every
//! member) waits in each member's inbox until [`MemoryCluster::take`]. A test decides when
//! inboxes are delivered, so it can delay, reorder across members, or drop deliveries, and
//! [`MemoryCluster::set_available`] makes every operation fail, as an unreachable Redis.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

use super::cluster::{
    BusMessage, FollowFrom, LogEvent, RecordGuard, RecordOp, ServiceRecord, SessionRecord,
    StoreError, StoreOp, StoreReply, StreamEnd, Ticket,
};
use crate::jsonrpc::RequestId;

/// A member of a [`MemoryCluster`] (one router).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MemberId(usize);

/// What a member receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterDelivery {
    /// The answer to one of its operations: give it to `Router::handle_store`.
    Reply(Ticket, StoreReply),
    /// A bus message: give it to `Router::handle_bus`.
    Bus(BusMessage),
    /// Bus messages may have been missed: `Router::handle_bus_lost`.
    BusLost,
    /// The store became unreachable (the backend lost its connection):
    /// `Router::handle_store_unreachable` (readiness answers 503).
    StoreUnreachable(StoreError),
    /// The store is reachable again: `Router::handle_store_reachable`.
    StoreReachable,
}

/// A request stream: (session id, stream name).
type StreamKey = (Box<str>, Box<str>);

/// A request stream's log.
#[derive(Debug)]
struct StreamLog {
    owner: MemberId,
    requests: Vec<RequestId>,
    answered: Vec<RequestId>,
    events: Vec<LogEvent>,
    finished: Option<Option<Instant>>,
    orphaned: bool,
}

impl StreamLog {
    fn end(&self) -> Option<StreamEnd> {
        if self.finished.is_some() {
            Some(StreamEnd::Finished)
        } else if self.orphaned {
            let unanswered = self
                .requests
                .iter()
                .filter(|r| !self.answered.contains(r))
                .cloned()
                .collect();
            Some(StreamEnd::OwnerGone { unanswered })
        } else {
            None
        }
    }

    fn after(&self, after: u64) -> Vec<LogEvent> {
        self.events
            .iter()
            .filter(|e| e.seq > after)
            .cloned()
            .collect()
    }
}

#[derive(Debug, Default)]
struct Log {
    events: VecDeque<LogEvent>,
    last: u64,
    evicted_upto: u64,
    cursor: u64,
}

impl Log {
    /// Events after `after`, and whether some of them were evicted.
    fn after(&self, after: u64) -> (Vec<LogEvent>, bool) {
        let events = self
            .events
            .iter()
            .filter(|e| e.seq > after)
            .cloned()
            .collect();
        (events, self.evicted_upto > after)
    }
}

/// A service record as kept here.
#[derive(Debug)]
struct Stored {
    version: u64,
    value: bytes::Bytes,
    owner: Option<MemberId>,
    expires: Option<Instant>,
}

/// The cluster store and bus, in memory (see the module docs).
#[derive(Debug, Default)]
pub struct MemoryCluster {
    records: HashMap<Box<str>, (SessionRecord, Option<Instant>)>,
    logs: HashMap<Box<str>, Log>,
    /// Live follows: member, ticket → session, last sequence number answered.
    follows: HashMap<(MemberId, Ticket), (Box<str>, u64)>,
    /// Request streams by (session, stream name).
    streams: HashMap<StreamKey, StreamLog>,
    /// Live request-stream follows: member, ticket → (session, stream), last answered.
    stream_follows: HashMap<(MemberId, Ticket), (StreamKey, u64)>,
    /// Service records: version, bytes, owner, expiry.
    service: HashMap<Box<str>, Stored>,
    /// Members that left (their processes died): the owners no longer alive.
    gone: HashSet<MemberId>,
    inboxes: Vec<VecDeque<ClusterDelivery>>,
    unavailable: bool,
    redeliver: bool,
    ops: u64,
}

impl MemoryCluster {
    /// An empty store.
    pub fn new() -> Self {
        MemoryCluster::default()
    }

    /// Adds a member.
    pub fn join(&mut self) -> MemberId {
        self.inboxes.push(VecDeque::new());
        MemberId(self.inboxes.len() - 1)
    }

    /// Makes every later operation fail (`false`) or succeed again (`true`).
    /// Every member is told of a change ([`ClusterDelivery::StoreUnreachable`],
    /// [`ClusterDelivery::StoreReachable`]), as a backend tells of a lost connection.
    pub fn set_available(&mut self, available: bool) {
        if self.unavailable != available {
            return;
        }
        self.unavailable = !available;
        for (i, q) in self.inboxes.iter_mut().enumerate() {
            if self.gone.contains(&MemberId(i)) {
                continue;
            }
            q.push_back(if available {
                ClusterDelivery::StoreReachable
            } else {
                ClusterDelivery::StoreUnreachable(StoreError("the store is unavailable".into()))
            });
        }
    }

    /// Makes follow answers repeat the last event already answered (`true`), as an
    /// at-least-once feed does after a reconnect; a router must write each event once.
    pub fn set_redeliver(&mut self, redeliver: bool) {
        self.redeliver = redeliver;
    }

    /// Operations executed so far (round trips, for the tests' counts).
    pub fn operations(&self) -> u64 {
        self.ops
    }

    /// Live session records at `now`.
    pub fn session_count(&mut self, now: Instant) -> usize {
        self.expire(now);
        self.records.len()
    }

    /// The stored record of a session, if live at `now`.
    pub fn record(&mut self, now: Instant, session: &str) -> Option<SessionRecord> {
        self.expire(now);
        self.records.get(session).map(|(r, _)| r.clone())
    }

    /// Drains what `member` received, in order.
    pub fn take(&mut self, member: MemberId) -> Vec<ClusterDelivery> {
        self.inboxes
            .get_mut(member.0)
            .map(|q| q.drain(..).collect())
            .unwrap_or_default()
    }

    /// Forgets a member (its process died): its follows end, and the request streams it
    /// owned end for their followers, naming the requests left unanswered.
    pub fn leave(&mut self, member: MemberId) {
        self.gone.insert(member);
        self.follows.retain(|(m, _), _| *m != member);
        self.stream_follows.retain(|(m, _), _| *m != member);
        if let Some(q) = self.inboxes.get_mut(member.0) {
            q.clear();
        }
        let orphaned: Vec<StreamKey> = self
            .streams
            .iter_mut()
            .filter(|(_, s)| s.owner == member && s.finished.is_none())
            .map(|(k, s)| {
                s.orphaned = true;
                k.clone()
            })
            .collect();
        for key in orphaned {
            self.wake_stream(&key);
        }
    }

    fn expire(&mut self, now: Instant) {
        let gone: Vec<Box<str>> = self
            .records
            .iter()
            .filter(|(_, (_, exp))| exp.is_some_and(|e| e <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for id in gone {
            self.records.remove(&id);
            self.logs.remove(&id);
            self.streams.retain(|(s, _), _| *s != id);
        }
        self.streams
            .retain(|_, s| !matches!(s.finished, Some(Some(until)) if until <= now));
        self.service
            .retain(|_, r| r.expires.is_none_or(|e| now < e));
    }

    /// A service record as a load answers it.
    fn service_record(&self, key: &str) -> Option<ServiceRecord> {
        self.service.get(key).map(|r| ServiceRecord {
            version: r.version,
            value: r.value.clone(),
            owner_alive: r.owner.map(|o| !self.gone.contains(&o)),
        })
    }

    /// Applies a service record operation of `member`.
    fn record_op(&mut self, now: Instant, member: MemberId, op: RecordOp) -> StoreReply {
        match op {
            RecordOp::Load { key } => StoreReply::Record(self.service_record(&key)),
            RecordOp::Save {
                key,
                value,
                guard,
                owned,
                ttl,
            } => {
                let current = self.service.get(&key).map(|r| r.version);
                match (guard, current) {
                    (RecordGuard::Absent, None) => {
                        self.service.insert(
                            key,
                            Stored {
                                version: 1,
                                value,
                                owner: owned.then_some(member),
                                expires: ttl.map(|t| now + t),
                            },
                        );
                        StoreReply::RecordSaved { version: 1 }
                    }
                    (RecordGuard::Version(v), Some(at)) if v == at => {
                        let Some(r) = self.service.get_mut(&key) else {
                            return StoreReply::RecordConflict(None);
                        };
                        r.version += 1;
                        r.value = value;
                        if owned {
                            r.owner = Some(member);
                        }
                        StoreReply::RecordSaved { version: r.version }
                    }
                    _ => StoreReply::RecordConflict(self.service_record(&key)),
                }
            }
        }
    }

    fn reply(&mut self, member: MemberId, ticket: Ticket, reply: StoreReply) {
        if let Some(q) = self.inboxes.get_mut(member.0) {
            q.push_back(ClusterDelivery::Reply(ticket, reply));
        }
    }

    fn publish_bus(&mut self, from: MemberId, message: BusMessage) {
        for (i, q) in self.inboxes.iter_mut().enumerate() {
            if i != from.0 {
                q.push_back(ClusterDelivery::Bus(message.clone()));
            }
        }
    }

    /// Applies `op`, sent by `member` under `ticket`, at `now`.
    pub fn execute(&mut self, now: Instant, member: MemberId, ticket: Ticket, op: StoreOp) {
        self.ops += 1;
        if self.unavailable {
            if !matches!(op, StoreOp::Unfollow { .. }) {
                let e = StoreError("the store is unreachable".into());
                self.reply(member, ticket, StoreReply::Failed(e));
            }
            return;
        }
        self.expire(now);
        let expiry = |ttl: Option<std::time::Duration>| ttl.map(|t| now + t);
        match op {
            StoreOp::Load { session } => {
                let r = self.records.get(&session).map(|(r, _)| r.clone());
                self.reply(member, ticket, StoreReply::Session(r));
            }
            StoreOp::Create {
                record,
                max_sessions,
                ttl,
            } => {
                let answer = if self.records.contains_key(&record.id) {
                    StoreReply::Failed(StoreError("the session id is taken".into()))
                } else if self.records.len() >= max_sessions {
                    StoreReply::AtCapacity
                } else {
                    self.records
                        .insert(record.id.clone(), (record, expiry(ttl)));
                    StoreReply::Created
                };
                self.reply(member, ticket, answer);
            }
            StoreOp::Save { record, ttl } => {
                let session = record.id.clone();
                let answer = match self.records.get_mut(&record.id) {
                    Some(slot) => {
                        *slot = (record, expiry(ttl));
                        StoreReply::Done
                    }
                    None => StoreReply::Session(None),
                };
                if answer == StoreReply::Done {
                    self.publish_bus(member, BusMessage::SessionSaved { session });
                }
                self.reply(member, ticket, answer);
            }
            StoreOp::Touch { session, ttl } => {
                if let Some((_, exp)) = self.records.get_mut(&session) {
                    *exp = expiry(ttl);
                }
                self.reply(member, ticket, StoreReply::Done);
            }
            StoreOp::Record(op) => {
                let answer = self.record_op(now, member, op);
                self.reply(member, ticket, answer);
            }
            StoreOp::Delete { session } => {
                self.records.remove(&session);
                self.logs.remove(&session);
                self.follows.retain(|_, (s, _)| *s != session);
                self.streams.retain(|(s, _), _| *s != session);
                self.stream_follows.retain(|_, ((s, _), _)| *s != session);
                self.publish_bus(member, BusMessage::SessionDeleted { session });
                self.reply(member, ticket, StoreReply::Done);
            }
            StoreOp::Publish {
                session,
                payload,
                capacity,
                gap,
            } => {
                if !self.records.contains_key(&session) {
                    // A deleted or expired session's message goes nowhere.
                    self.reply(member, ticket, StoreReply::Published { seq: 0 });
                    return;
                }
                let log = self.logs.entry(session.clone()).or_default();
                log.last += 1;
                let seq = log.last;
                log.events.push_back(LogEvent { seq, payload, gap });
                while log.events.len() > capacity.max(1) {
                    if let Some(e) = log.events.pop_front() {
                        log.evicted_upto = e.seq;
                    }
                }
                self.reply(member, ticket, StoreReply::Published { seq });
                self.wake(&session);
            }
            StoreOp::Follow { session, from } => {
                let log = self.logs.entry(session.clone()).or_default();
                let after = match from {
                    FollowFrom::After(n) => n,
                    FollowFrom::Cursor => log.cursor,
                };
                let (events, gap) = log.after(after);
                let last = events.last().map_or(after, |e| e.seq);
                self.follows.insert((member, ticket), (session, last));
                self.reply(member, ticket, StoreReply::Events { events, gap, after });
            }
            StoreOp::Unfollow { follow } => {
                self.follows.remove(&(member, follow));
                self.stream_follows.remove(&(member, follow));
            }
            StoreOp::Delivered { session, seq } => {
                if let Some(log) = self.logs.get_mut(&session) {
                    log.cursor = log.cursor.max(seq);
                }
                self.reply(member, ticket, StoreReply::Done);
            }
            StoreOp::Broadcast { message } => {
                self.publish_bus(member, message);
                self.reply(member, ticket, StoreReply::Done);
            }
            StoreOp::CommitStreams { session, streams } => {
                let mut woken = Vec::new();
                for c in streams {
                    let key = (session.clone(), c.stream);
                    if let Some(requests) = c.open
                        && self.records.contains_key(&session)
                    {
                        self.streams.insert(
                            key.clone(),
                            StreamLog {
                                owner: member,
                                requests,
                                answered: Vec::new(),
                                events: Vec::new(),
                                finished: None,
                                orphaned: false,
                            },
                        );
                    }
                    let Some(log) = self.streams.get_mut(&key) else {
                        continue;
                    };
                    let wakes = !c.events.is_empty() || c.end.is_some();
                    for e in c.events {
                        if log.events.last().is_some_and(|last| last.seq >= e.seq) {
                            continue; // stored already
                        }
                        if let Some(id) = e.answers {
                            log.answered.push(id);
                        }
                        log.events.push(LogEvent {
                            seq: e.seq,
                            payload: e.payload,
                            gap: false,
                        });
                    }
                    if let Some(retain) = c.end {
                        log.finished = Some(Some(now + retain));
                    }
                    if wakes {
                        woken.push(key);
                    }
                }
                self.reply(member, ticket, StoreReply::Done);
                for key in woken {
                    self.wake_stream(&key);
                }
            }
            StoreOp::FollowStream {
                session,
                stream,
                after,
            } => {
                let key = (session, stream);
                let answer = match self.streams.get(&key) {
                    None => StoreReply::StreamEvents {
                        events: Vec::new(),
                        after,
                        end: Some(StreamEnd::Unknown),
                    },
                    Some(log) => {
                        let events = log.after(after);
                        let end = log.end();
                        if end.is_none() {
                            let last = events.last().map_or(after, |e| e.seq);
                            self.stream_follows.insert((member, ticket), (key, last));
                        }
                        StoreReply::StreamEvents { events, after, end }
                    }
                };
                self.reply(member, ticket, answer);
            }
        }
    }

    /// Answers every follow of a request stream with what it gained (events, its end).
    fn wake_stream(&mut self, key: &StreamKey) {
        let Some(log) = self.streams.get(key) else {
            return;
        };
        let end = log.end();
        let mut out = Vec::new();
        let mut ended = Vec::new();
        for ((member, ticket), (k, last)) in self.stream_follows.iter_mut() {
            if k != key {
                continue;
            }
            let events = log.after(*last);
            if events.is_empty() && end.is_none() {
                continue;
            }
            let after = *last;
            *last = events.last().map_or(*last, |e| e.seq);
            if end.is_some() {
                ended.push((*member, *ticket));
            }
            let end = end.clone();
            out.push((
                *member,
                *ticket,
                StoreReply::StreamEvents { events, after, end },
            ));
        }
        for k in ended {
            self.stream_follows.remove(&k);
        }
        for (member, ticket, reply) in out {
            self.reply(member, ticket, reply);
        }
    }

    /// Answers every follow of `session` with what was appended since its last answer.
    fn wake(&mut self, session: &str) {
        let Some(log) = self.logs.get(session) else {
            return;
        };
        let mut out = Vec::new();
        let back = u64::from(self.redeliver);
        for ((member, ticket), (s, last)) in self.follows.iter_mut() {
            if **s != *session {
                continue;
            }
            let (events, gap) = log.after(last.saturating_sub(back));
            if events.is_empty() {
                continue;
            }
            let after = last.saturating_sub(back);
            *last = events.last().map_or(*last, |e| e.seq);
            out.push((*member, *ticket, StoreReply::Events { events, gap, after }));
        }
        for (member, ticket, reply) in out {
            self.reply(member, ticket, reply);
        }
    }
}
