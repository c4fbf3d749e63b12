//! [`Follows`]: the worker's follows and the wake-up channels they use, sans-IO.
//!
//! # Theory of operation
//!
//! A follow is a ticket the store answers again and again: a listen-log follow
//! (`StoreOp::Follow`) with the events its session's log gains, a request-stream follow
//! (`StoreOp::FollowStream`) with the events its stream gains and its end. Redis tells that
//! a log or a stream grew by a publication on a **wake-up channel** (`p:wake:<s>` for a
//! session's log, `p:rsw:<s>:<name>` for a request stream); the follow then reads what
//! followed its **last** answered sequence number. So a follow subscribes to its channel
//! *before* its first read (a wake-up after that read is never missed), and reads from its
//! last answer
//!
//! - on every wake-up of its channel;
//! - after every reconnection (wake-ups may have been lost meanwhile): every live follow;
//! - for a stream follow, on every beat too (its owner may be gone: no wake-up tells);
//! - for a listen follow, on the next beat after a read of it failed (the wake-up it was
//!   reading for is spent: without a later publication nothing else would read it);
//! - for a listen follow whose start was in flight when its channel woke: once more as soon
//!   as it is live (what the wake-up announced may be past its first read);
//! - again at once after a read that filled a whole batch (more may be left).
//!
//! Of what a read returns, only the events after the follow's last answered sequence
//! number go out (each above the one before it), and the last answered number moves to the
//! last of them: an event is answered at most once per follow, and a read that brought
//! nothing new (and, for a stream, no end) answers nothing, nor is read again. A follow's
//! first answer goes out even when empty. Reading again only after the last answered number
//! moved keeps the rereads of a full batch finite.
//!
//! Channels are **reference counted**: a channel is used by every live follow on it, and a
//! session's wake-up channel also by a follow of it starting in flight (at most one per
//! session: the session's lane runs one turn at a time). A start subscribes only when no
//! other uses the channel; an `Unfollow` or the end of a stream unsubscribes only when no
//! other uses it any more. A follow given up, of a deleted session or past its grace ends
//! without unsubscribing: a stale subscription only costs ignored wake-ups, and the next
//! start subscribes again.
//!
//! The follows' grace after a lost connection is the `link` module's decision
//! (`LinkEffect::FollowsExpired`); here it only means: answer every live follow `Failed`.
//!
//! This module decides; it reads nothing, subscribes to nothing, holds no connection and
//! reads no clock. The worker tells it what happened ([`FollowEvent`]) and performs the
//! [`FollowEffects`] returned: a subscription (before the read that follows it), the
//! answers, an unsubscription (best effort), the reads (each answered back as a
//! [`FollowEvent::LogRead`] or [`FollowEvent::StreamRead`]).
//!
//! # State table (one follow)
//!
//! ```text
//!  state       event                                next        effects
//!  ----------  -----------------------------------  ----------  ---------------------------------
//!  listen follow of session s (channel p:wake:s)
//!  -           Starting s (a start in flight)       Starting    subscribe p:wake:s if unused
//!  -           Start s (a start run here)           -           subscribe p:wake:s if unused
//!  Starting    Woken p:wake:s                       Starting    - (woken: read once live)
//!  Starting    Recovered                            Starting    - (woken: read once live)
//!  Starting    StartFailed s                        -           - (the worker tries Start)
//!  Starting,   Started (after, events)              Live        answer the events after `after`
//!  -                                                            (even none); read if the batch
//!                                                               was full or it was woken
//!  Live        LogRead (events)                     Live        answer those after last, if any,
//!                                                               last = the last one's; read
//!                                                               again if full and last moved
//!  Live        Woken p:wake:s, Recovered            Live        read after last
//!  Live        ReadFailed                           Live        behind
//!  Live        Beat (behind)                        Live        read after last (a LogRead
//!                                                               clears behind)
//!  Live        Unfollow                             -           unsubscribe p:wake:s if unused
//!  Live        Expired                              -           answer Failed
//!  Live        GaveUp, SessionDeleted s             -           -
//!
//!  stream follow of s's stream n (channel p:rsw:s:n)
//!  -           StreamStart                          -           subscribe p:rsw:s:n if unused
//!  -           StreamStartFailed                    -           unsubscribe p:rsw:s:n if unused
//!  -           StreamStarted (no such stream)       -           answer end Unknown; unsubscribe
//!                                                               if unused
//!  -           StreamStarted (ended)                -           answer events, end; unsubscribe
//!                                                               if unused
//!  -           StreamStarted (running)              Live        answer the events after `after`
//!                                                               (even none); read if full
//!  Live        StreamRead (stream gone)             -           unsubscribe if unused (no answer)
//!  Live        StreamRead (ended)                   -           answer events after last, end;
//!                                                               unsubscribe if unused
//!  Live        StreamRead (running)                 Live        answer those after last, if any,
//!                                                               last = the last one's; read
//!                                                               again if full
//!  Live        Woken p:rsw:s:n, Beat, Recovered     Live        read after last
//!  Live        Unfollow                             -           unsubscribe p:rsw:s:n if unused
//!  Live        Expired                              -           answer Failed
//!  Live        GaveUp, SessionDeleted s             -           -
//!
//!  any         any other (an unknown ticket, ...)   unchanged   -
//! ```
//!
//! "Unused": no live follow (nor, for `p:wake:s`, a start of s in flight) uses the channel.
//!
//! # State table (one channel: its users)
//!
//! ```text
//!  users  event                                           users after  effects
//!  -----  ----------------------------------------------  -----------  ----------------------
//!  0      a start (Starting, Start, StreamStart)          0            subscribe
//!  n ≥ 1  a start                                         n            -
//!  n      Starting (in flight); Started, StreamStarted    n + 1        -
//!         (running) of a start run here
//!  n      Started of the start in flight                  n            - (in flight -> live)
//!  1      Unfollow; a stream read ended or gone           0            unsubscribe
//!  n > 1  Unfollow; a stream read ended or gone           n - 1        -
//!  0      StreamStartFailed; StreamStarted not kept       0            unsubscribe
//!  n ≥ 1  StreamStartFailed; StreamStarted not kept       n            -
//!  n      GaveUp, SessionDeleted, Expired (k of them)     n - k        - (left subscribed)
//!  n ≥ 1  a dial (live follows and starts in flight)      n            subscribed again
//!                                                                      ([`Follows::channels`])
//! ```
//!
//! The users are counted where they are kept (the live follows, the starts in flight), not
//! in a count of their own that could drift from them. Every change goes through
//! [`Follows::on`].

use std::collections::{BTreeMap, BTreeSet, HashSet};

use mcp_proto::server::{LogEvent, StoreError, StoreReply, StreamEnd, Ticket};

use crate::wire::{Keys, StreamRead};

/// A read the worker must do for a live follow, its result handed back
/// ([`FollowEvent::LogRead`], [`FollowEvent::StreamRead`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Read {
    /// Listen follow `ticket`: `session`'s log after `after`, one batch.
    Log {
        ticket: Ticket,
        session: Box<str>,
        after: u64,
    },
    /// Stream follow `ticket`: `session`'s request stream `stream` after `after`, one batch.
    Stream {
        ticket: Ticket,
        session: Box<str>,
        stream: Box<str>,
        after: u64,
    },
}

impl Read {
    /// The follow it is for.
    pub(crate) fn ticket(&self) -> Ticket {
        match self {
            Read::Log { ticket, .. } | Read::Stream { ticket, .. } => *ticket,
        }
    }
}

/// What happened to the follows.
#[derive(Debug)]
pub(crate) enum FollowEvent<'a> {
    /// A listen follow of `session` starts in flight (its subscription, cursor, first read).
    Starting { session: &'a str },
    /// A listen follow of `session` starts here, to its end (an attempt of the worker's).
    Start { session: &'a str },
    /// The start of `session`'s follow in flight failed (the worker attempts it again here).
    StartFailed { session: &'a str },
    /// Listen follow `ticket` of `session` started after `after` and read `events`.
    Started {
        ticket: Ticket,
        session: &'a str,
        after: u64,
        events: Vec<LogEvent>,
    },
    /// A [`Read::Log`] of follow `ticket` read `events`.
    LogRead {
        ticket: Ticket,
        events: Vec<LogEvent>,
    },
    /// A stream follow of `session`'s `stream` starts (here).
    StreamStart { session: &'a str, stream: &'a str },
    /// Its subscription or first read failed.
    StreamStartFailed { session: &'a str, stream: &'a str },
    /// Stream follow `ticket` read `read` after `after` (`None`: no such stream, or its
    /// session is gone).
    StreamStarted {
        ticket: Ticket,
        session: &'a str,
        stream: &'a str,
        after: u64,
        read: Option<StreamRead>,
    },
    /// A [`Read::Stream`] of follow `ticket` read `read` (`None`: the stream is gone with its
    /// session).
    StreamRead {
        ticket: Ticket,
        read: Option<StreamRead>,
    },
    /// A publication on `channel` (one not the bus).
    Woken { channel: &'a str },
    /// A read of follow `ticket` failed (left for a later wake-up, beat or reconnection).
    ReadFailed { ticket: Ticket },
    /// The beat (a third of the liveness TTL).
    Beat,
    /// The connection came back after a loss (`LinkEffect::Recovered`).
    Recovered,
    /// The follows waited for a lost connection longer than their grace
    /// (`LinkEffect::FollowsExpired`).
    Expired,
    /// `StoreOp::Unfollow` of `ticket`.
    Unfollow { ticket: Ticket },
    /// The worker answered `ticket` `Failed` (its attempts failed): a follow it named ends.
    GaveUp { ticket: Ticket },
    /// `session` was deleted: its follows end, unanswered.
    SessionDeleted { session: &'a str },
}

/// What the worker must do, in this order.
#[derive(Debug, Default, PartialEq)]
#[must_use]
pub(crate) struct FollowEffects {
    /// Subscribe to this channel before the start's first read (no follow uses it yet); a
    /// failure fails the start.
    pub(crate) subscribe: Option<String>,
    /// Answer these tickets with these replies, in order.
    pub(crate) answers: Vec<(Ticket, StoreReply)>,
    /// Unsubscribe from this channel (no follow uses it any more), best effort.
    pub(crate) unsubscribe: Option<String>,
    /// Do these reads, in order, each answered back.
    pub(crate) reads: Vec<Read>,
}

/// A live listen-log follow.
#[derive(Debug)]
struct LogFollow {
    session: Box<str>,
    /// The last sequence number answered.
    last: u64,
    /// A read of it failed since its last read came back: the next beat reads it (no
    /// wake-up may come again).
    behind: bool,
}

/// A live request-stream follow.
#[derive(Debug)]
struct StreamFollow {
    session: Box<str>,
    stream: Box<str>,
    /// The last sequence number answered.
    last: u64,
}

/// The live follows, the starts in flight and the channels they use (see the
/// [module docs](self)).
pub(crate) struct Follows {
    /// The channels' names.
    keys: Keys,
    /// Events read at once: a read that got this many reads again.
    read_batch: usize,
    /// Live listen-log follows.
    logs: BTreeMap<Ticket, LogFollow>,
    /// Live request-stream follows.
    streams: BTreeMap<Ticket, StreamFollow>,
    /// Sessions whose follow is starting in flight (its wake-up channel subscribed, or being
    /// subscribed).
    starting: HashSet<Box<str>>,
    /// Those of `starting` woken meanwhile: read again once live.
    woken: HashSet<Box<str>>,
}

impl Follows {
    /// No follows; channels named with `prefix`, reads of `read_batch` events (at least 1).
    pub(crate) fn new(prefix: &str, read_batch: usize) -> Follows {
        Follows {
            keys: Keys::new(prefix),
            read_batch: read_batch.max(1),
            logs: BTreeMap::new(),
            streams: BTreeMap::new(),
            starting: HashSet::new(),
            woken: HashSet::new(),
        }
    }

    /// The wake-up channels the live follows and the starts in flight use, each once:
    /// subscribed again on every dial (a start whose subscription was made on the connection
    /// that broke must hear the wake-ups of the new one).
    pub(crate) fn channels(&self) -> Vec<String> {
        let starting = self.starting.iter().map(|s| self.keys.wake(s).into());
        let logs = self
            .logs
            .values()
            .map(|f| self.keys.wake(&f.session).into())
            .chain(starting);
        let streams = self
            .streams
            .values()
            .map(|f| self.keys.stream_wake(&f.session, &f.stream).into());
        let set: BTreeSet<String> = logs.chain(streams).collect();
        set.into_iter().collect()
    }

    /// Whether `session`'s wake-up channel is used: a follow of it is live or starting.
    fn is_followed(&self, session: &str) -> bool {
        self.starting.contains(session) || self.logs.values().any(|f| *f.session == *session)
    }

    /// Whether a live stream follow uses `session`'s `stream` channel.
    fn is_stream_followed(&self, session: &str, stream: &str) -> bool {
        self.streams
            .values()
            .any(|f| *f.session == *session && *f.stream == *stream)
    }

    /// `session`'s wake-up channel, if no follow uses it.
    fn unused_wake(&self, session: &str) -> Option<String> {
        (!self.is_followed(session)).then(|| self.keys.wake(session).into())
    }

    /// The channel of `session`'s `stream`, if no follow uses it.
    fn unused_stream_wake(&self, session: &str, stream: &str) -> Option<String> {
        (!self.is_stream_followed(session, stream))
            .then(|| self.keys.stream_wake(session, stream).into())
    }

    /// Ends stream follow `ticket`: its channel, if no other follow uses it.
    fn end_stream(&mut self, ticket: Ticket) -> Option<String> {
        let f = self.streams.remove(&ticket)?;
        self.unused_stream_wake(&f.session, &f.stream)
    }

    /// The read of live follow `ticket` after its last answer.
    fn read(&self, ticket: Ticket) -> Option<Read> {
        if let Some(f) = self.logs.get(&ticket) {
            return Some(Read::Log {
                ticket,
                session: f.session.clone(),
                after: f.last,
            });
        }
        let f = self.streams.get(&ticket)?;
        Some(Read::Stream {
            ticket,
            session: f.session.clone(),
            stream: f.stream.clone(),
            after: f.last,
        })
    }

    /// Answers live listen follow `ticket` with those of `events` after its last answer
    /// (`always`: even none), moving its last to theirs. `None`: nothing to answer.
    fn answer_log(
        &mut self,
        ticket: Ticket,
        events: Vec<LogEvent>,
        always: bool,
    ) -> Option<(Ticket, StoreReply)> {
        let f = self.logs.get_mut(&ticket)?;
        let after = f.last;
        let events = fresh(events, after);
        if events.is_empty() && !always {
            return None;
        }
        let gap = events
            .first()
            .is_some_and(|e| e.seq > after.saturating_add(1));
        if let Some(e) = events.last() {
            f.last = e.seq;
        }
        Some((ticket, StoreReply::Events { events, gap, after }))
    }

    /// The one transition function: the module's table, row for row.
    pub(crate) fn on(&mut self, event: FollowEvent<'_>) -> FollowEffects {
        use FollowEvent as E;
        let mut fx = FollowEffects::default();
        match event {
            E::Starting { session } => {
                fx.subscribe = self.unused_wake(session);
                self.starting.insert(session.into());
            }
            E::Start { session } => fx.subscribe = self.unused_wake(session),
            E::StartFailed { session } => {
                self.starting.remove(session);
                self.woken.remove(session);
            }
            E::Started {
                ticket,
                session,
                after,
                events,
            } => {
                self.starting.remove(session);
                let woken = self.woken.remove(session);
                let full = events.len() >= self.read_batch;
                let follow = LogFollow {
                    session: session.into(),
                    last: after,
                    behind: false,
                };
                self.logs.insert(ticket, follow);
                fx.answers.extend(self.answer_log(ticket, events, true));
                let moved = self.logs.get(&ticket).is_some_and(|f| f.last > after);
                if (full && moved) || woken {
                    fx.reads.extend(self.read(ticket));
                }
            }
            E::LogRead { ticket, events } => {
                let Some(before) = self.logs.get_mut(&ticket).map(|f| {
                    f.behind = false;
                    f.last
                }) else {
                    return fx;
                };
                let full = events.len() >= self.read_batch;
                fx.answers.extend(self.answer_log(ticket, events, false));
                let moved = self.logs.get(&ticket).is_some_and(|f| f.last > before);
                if full && moved {
                    fx.reads.extend(self.read(ticket));
                }
            }
            E::StreamStart { session, stream } => {
                fx.subscribe = self.unused_stream_wake(session, stream);
            }
            E::StreamStartFailed { session, stream } => {
                fx.unsubscribe = self.unused_stream_wake(session, stream);
            }
            E::StreamStarted {
                ticket,
                session,
                stream,
                after,
                read,
            } => {
                let Some(read) = read else {
                    let reply = StoreReply::StreamEvents {
                        events: Vec::new(),
                        after,
                        end: Some(StreamEnd::Unknown),
                    };
                    fx.answers.push((ticket, reply));
                    fx.unsubscribe = self.unused_stream_wake(session, stream);
                    return fx;
                };
                let StreamRead { events, end, full } = read;
                let events = fresh(events, after);
                if end.is_some() {
                    fx.answers
                        .push((ticket, StoreReply::StreamEvents { events, after, end }));
                    fx.unsubscribe = self.unused_stream_wake(session, stream);
                    return fx;
                }
                let last = events.last().map_or(after, |e| e.seq);
                let follow = StreamFollow {
                    session: session.into(),
                    stream: stream.into(),
                    last,
                };
                self.streams.insert(ticket, follow);
                fx.answers
                    .push((ticket, StoreReply::StreamEvents { events, after, end }));
                if full && last > after {
                    fx.reads.extend(self.read(ticket));
                }
            }
            E::StreamRead { ticket, read } => {
                let Some(after) = self.streams.get(&ticket).map(|f| f.last) else {
                    return fx;
                };
                let Some(StreamRead { events, end, full }) = read else {
                    // Gone with its session: dropped without an answer, as the reference does.
                    fx.unsubscribe = self.end_stream(ticket);
                    return fx;
                };
                let events = fresh(events, after);
                if events.is_empty() && end.is_none() {
                    return fx;
                }
                let ended = end.is_some();
                if let (Some(f), Some(e)) = (self.streams.get_mut(&ticket), events.last()) {
                    f.last = e.seq;
                }
                fx.answers
                    .push((ticket, StoreReply::StreamEvents { events, after, end }));
                if ended {
                    fx.unsubscribe = self.end_stream(ticket);
                } else if full {
                    fx.reads.extend(self.read(ticket));
                }
            }
            E::Woken { channel } => {
                let streams: Vec<Ticket> = self
                    .streams
                    .iter()
                    .filter(|(_, f)| self.keys.stream_wake(&f.session, &f.stream) == *channel)
                    .map(|(t, _)| *t)
                    .collect();
                if !streams.is_empty() {
                    fx.reads = streams.into_iter().filter_map(|t| self.read(t)).collect();
                } else if let Some(session) = self.keys.wake_session(channel) {
                    if self.starting.contains(session) {
                        self.woken.insert(session.into());
                    }
                    fx.reads = self
                        .logs
                        .iter()
                        .filter(|(_, f)| *f.session == *session)
                        .filter_map(|(t, _)| self.read(*t))
                        .collect();
                }
            }
            E::ReadFailed { ticket } => {
                if let Some(f) = self.logs.get_mut(&ticket) {
                    f.behind = true;
                }
            }
            E::Beat => {
                let behind = self.logs.iter().filter(|(_, f)| f.behind).map(|(t, _)| t);
                let tickets: Vec<Ticket> = behind.chain(self.streams.keys()).copied().collect();
                fx.reads = tickets.into_iter().filter_map(|t| self.read(t)).collect();
            }
            E::Recovered => {
                let tickets = self.logs.keys().chain(self.streams.keys());
                fx.reads = tickets.filter_map(|t| self.read(*t)).collect();
                // A start in flight read on the lost connection: what was published before
                // the new subscription is read once it is live.
                self.woken.extend(self.starting.iter().cloned());
            }
            E::Expired => {
                let e = StoreError("the store connection is lost".into());
                let logs = std::mem::take(&mut self.logs).into_keys();
                let streams = std::mem::take(&mut self.streams).into_keys();
                fx.answers = logs
                    .chain(streams)
                    .map(|t| (t, StoreReply::Failed(e.clone())))
                    .collect();
            }
            E::Unfollow { ticket } => {
                if self.streams.contains_key(&ticket) {
                    fx.unsubscribe = self.end_stream(ticket);
                } else if let Some(f) = self.logs.remove(&ticket) {
                    fx.unsubscribe = self.unused_wake(&f.session);
                }
            }
            E::GaveUp { ticket } => {
                self.logs.remove(&ticket);
                self.streams.remove(&ticket);
            }
            E::SessionDeleted { session } => {
                self.logs.retain(|_, f| *f.session != *session);
                self.streams.retain(|_, f| *f.session != *session);
            }
        }
        fx
    }
}

/// Those of `events` after `after`, each above the one before it (a read answered twice,
/// or out of order, goes out once).
fn fresh(events: Vec<LogEvent>, after: u64) -> Vec<LogEvent> {
    let mut last = after;
    events
        .into_iter()
        .filter(|e| {
            let new = e.seq > last;
            if new {
                last = e.seq;
            }
            new
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use bytes::Bytes;

    fn t(n: u64) -> Ticket {
        Ticket::from_u64(n)
    }

    fn evs(seqs: &[u64]) -> Vec<LogEvent> {
        seqs.iter()
            .map(|&seq| LogEvent {
                seq,
                payload: Bytes::from(format!("{{\"n\":{seq}}}")),
                gap: false,
            })
            .collect()
    }

    /// Follows of prefix `p`, reading 3 events at once.
    fn follows() -> Follows {
        Follows::new("p", 3)
    }

    fn log(n: u64, session: &str, after: u64) -> Read {
        Read::Log {
            ticket: t(n),
            session: session.into(),
            after,
        }
    }

    fn stream(n: u64, session: &str, name: &str, after: u64) -> Read {
        Read::Stream {
            ticket: t(n),
            session: session.into(),
            stream: name.into(),
            after,
        }
    }

    fn running(seqs: &[u64], full: bool) -> Option<StreamRead> {
        Some(StreamRead {
            events: evs(seqs),
            end: None,
            full,
        })
    }

    /// What `fx` answered: each ticket with the sequence numbers and `after` of its answer.
    fn answered(fx: &FollowEffects) -> Vec<(u64, Vec<u64>, u64)> {
        let seqs = |events: &[LogEvent]| events.iter().map(|e| e.seq).collect();
        fx.answers
            .iter()
            .map(|(ticket, reply)| match reply {
                StoreReply::Events { events, after, .. }
                | StoreReply::StreamEvents { events, after, .. } => {
                    (ticket.as_u64(), seqs(events), *after)
                }
                other => panic!("not events: {other:?}"),
            })
            .collect()
    }

    /// Starts listen follow `n` of `session` here after `after`, its first read empty: the
    /// channel it subscribed.
    fn start(f: &mut Follows, n: u64, session: &str, after: u64) -> Option<String> {
        let subscribe = f.on(FollowEvent::Start { session }).subscribe;
        let fx = f.on(FollowEvent::Started {
            ticket: t(n),
            session,
            after,
            events: Vec::new(),
        });
        assert_eq!(answered(&fx), [(n, vec![], after)], "a first answer, empty");
        assert_eq!(fx.reads, []);
        subscribe
    }

    /// Starts stream follow `n` of `session`'s `name` after `after`, running, nothing read
    /// yet: the channel it subscribed.
    fn start_stream(f: &mut Follows, n: u64, session: &str, name: &str) -> Option<String> {
        let subscribe = f
            .on(FollowEvent::StreamStart {
                session,
                stream: name,
            })
            .subscribe;
        let fx = f.on(FollowEvent::StreamStarted {
            ticket: t(n),
            session,
            stream: name,
            after: 0,
            read: running(&[], false),
        });
        assert_eq!(answered(&fx), [(n, vec![], 0)]);
        subscribe
    }

    fn channel(s: &str) -> Option<String> {
        Some(s.into())
    }

    #[test]
    fn a_listen_follow_whose_read_failed_is_read_on_the_next_beat_until_a_read_comes_back() {
        let mut f = follows();
        start(&mut f, 1, "s", 0);
        start(&mut f, 2, "u", 0);
        // A live listen follow is read on wake-ups, not on beats.
        assert_eq!(f.on(FollowEvent::Beat).reads, []);
        let fx = f.on(FollowEvent::Woken {
            channel: "p:wake:s",
        });
        assert_eq!(fx.reads, [log(1, "s", 0)]);
        // That read failed: the wake-up is spent, and no other may come; the beat reads it,
        // and again on every beat until a read of it comes back.
        assert_eq!(
            f.on(FollowEvent::ReadFailed { ticket: t(1) }),
            FollowEffects::default()
        );
        assert_eq!(f.on(FollowEvent::Beat).reads, [log(1, "s", 0)]);
        assert_eq!(f.on(FollowEvent::Beat).reads, [log(1, "s", 0)]);
        let fx = f.on(FollowEvent::LogRead {
            ticket: t(1),
            events: evs(&[1, 2]),
        });
        assert_eq!(answered(&fx), [(1, vec![1, 2], 0)]);
        assert_eq!(f.on(FollowEvent::Beat).reads, [], "caught up");
        // A failure of an unknown ticket changes nothing.
        assert_eq!(
            f.on(FollowEvent::ReadFailed { ticket: t(9) }),
            FollowEffects::default()
        );
        assert_eq!(f.on(FollowEvent::Beat).reads, []);
    }

    #[test]
    fn two_follows_of_one_session_share_its_channel_until_both_have_ended() {
        let mut f = follows();
        assert_eq!(start(&mut f, 1, "s", 0), channel("p:wake:s"));
        assert_eq!(start(&mut f, 2, "s", 0), None, "already subscribed");
        assert_eq!(f.channels(), ["p:wake:s"]);
        let fx = f.on(FollowEvent::Unfollow { ticket: t(1) });
        assert_eq!(fx, FollowEffects::default(), "follow 2 still uses it");
        assert_eq!(f.channels(), ["p:wake:s"]);
        let fx = f.on(FollowEvent::Unfollow { ticket: t(2) });
        assert_eq!(fx.unsubscribe, channel("p:wake:s"), "the last one ended");
        assert_eq!(f.channels(), Vec::<String>::new());
        // A start in flight uses the channel too.
        assert_eq!(start(&mut f, 3, "s", 0), channel("p:wake:s"));
        let starting = f.on(FollowEvent::Starting { session: "s" });
        assert_eq!(starting.subscribe, None, "follow 3 has it");
        let fx = f.on(FollowEvent::Unfollow { ticket: t(3) });
        assert_eq!(fx.unsubscribe, None, "the start in flight still uses it");
        let _ = f.on(FollowEvent::Started {
            ticket: t(4),
            session: "s",
            after: 0,
            events: Vec::new(),
        });
        let fx = f.on(FollowEvent::Unfollow { ticket: t(4) });
        assert_eq!(fx.unsubscribe, channel("p:wake:s"));
    }

    #[test]
    fn a_stream_follow_and_a_listen_follow_of_one_session_use_different_channels() {
        let mut f = follows();
        assert_eq!(start(&mut f, 1, "s", 0), channel("p:wake:s"));
        assert_eq!(start_stream(&mut f, 2, "s", "b"), channel("p:rsw:s:b"));
        assert_eq!(
            start_stream(&mut f, 3, "s", "b"),
            None,
            "already subscribed"
        );
        assert_eq!(start_stream(&mut f, 4, "s", "c"), channel("p:rsw:s:c"));
        assert_eq!(f.channels(), ["p:rsw:s:b", "p:rsw:s:c", "p:wake:s"]);
        // Each channel wakes its own follows.
        let fx = f.on(FollowEvent::Woken {
            channel: "p:rsw:s:b",
        });
        assert_eq!(fx.reads, [stream(2, "s", "b", 0), stream(3, "s", "b", 0)]);
        let fx = f.on(FollowEvent::Woken {
            channel: "p:wake:s",
        });
        assert_eq!(fx.reads, [log(1, "s", 0)]);
        // The listen follow's end leaves the streams' channels subscribed.
        let fx = f.on(FollowEvent::Unfollow { ticket: t(1) });
        assert_eq!(fx.unsubscribe, channel("p:wake:s"));
        // A stream that ends releases its channel once no other follow uses it.
        let fx = f.on(FollowEvent::StreamRead {
            ticket: t(2),
            read: Some(StreamRead {
                events: evs(&[1]),
                end: Some(StreamEnd::Finished),
                full: false,
            }),
        });
        assert_eq!(answered(&fx), [(2, vec![1], 0)]);
        assert_eq!(fx.unsubscribe, None, "follow 3 still uses p:rsw:s:b");
        let fx = f.on(FollowEvent::StreamRead {
            ticket: t(3),
            read: None,
        });
        assert_eq!(fx.answers, [], "a stream gone with its session: no answer");
        assert_eq!(fx.unsubscribe, channel("p:rsw:s:b"));
        let fx = f.on(FollowEvent::Unfollow { ticket: t(4) });
        assert_eq!(fx.unsubscribe, channel("p:rsw:s:c"));
        assert_eq!(f.channels(), Vec::<String>::new());
    }

    #[test]
    fn a_start_in_flight_across_a_reconnection_is_subscribed_again_and_reads_again() {
        let mut f = follows();
        let _ = f.on(FollowEvent::Starting { session: "s" });
        // The dial subscribes the channel of the start in flight too.
        assert_eq!(f.channels(), ["p:wake:s"]);
        let fx = f.on(FollowEvent::Recovered);
        assert_eq!(fx.reads, [], "nothing live to read yet");
        // Once live, it reads after its first read: what was published before the new
        // subscription is not missed.
        let fx = f.on(FollowEvent::Started {
            ticket: t(1),
            session: "s",
            after: 0,
            events: evs(&[1]),
        });
        assert_eq!(fx.reads, [log(1, "s", 1)]);
    }

    #[test]
    fn a_wake_up_during_a_start_in_flight_reads_again_once_the_follow_is_live() {
        let mut f = follows();
        // Without a wake-up, a short first read is all.
        let _ = f.on(FollowEvent::Starting { session: "a" });
        let fx = f.on(FollowEvent::Started {
            ticket: t(1),
            session: "a",
            after: 0,
            events: evs(&[1]),
        });
        assert_eq!(fx.reads, []);
        // Woken while starting: nothing is live to read yet, but once it is, it reads.
        let _ = f.on(FollowEvent::Starting { session: "s" });
        let fx = f.on(FollowEvent::Woken {
            channel: "p:wake:s",
        });
        assert_eq!(fx.reads, []);
        let fx = f.on(FollowEvent::Started {
            ticket: t(2),
            session: "s",
            after: 4,
            events: evs(&[5]),
        });
        assert_eq!(answered(&fx), [(2, vec![5], 4)]);
        assert_eq!(
            fx.reads,
            [log(2, "s", 5)],
            "read again after the first read"
        );
        // The wake-up is spent: the next start of s reads no more than it must.
        let _ = f.on(FollowEvent::Starting { session: "s" });
        let fx = f.on(FollowEvent::Started {
            ticket: t(3),
            session: "s",
            after: 5,
            events: Vec::new(),
        });
        assert_eq!(fx.reads, []);
        // A failed start forgets its wake-up (the start here subscribes and reads anew).
        let _ = f.on(FollowEvent::Starting { session: "b" });
        let _ = f.on(FollowEvent::Woken {
            channel: "p:wake:b",
        });
        let fx = f.on(FollowEvent::StartFailed { session: "b" });
        assert_eq!(fx, FollowEffects::default());
        assert_eq!(start(&mut f, 4, "b", 0), channel("p:wake:b"));
    }

    #[test]
    fn events_at_or_before_the_last_answered_are_not_answered_again_and_the_last_advances() {
        let mut f = follows();
        let fx = f.on(FollowEvent::Started {
            ticket: t(1),
            session: "s",
            after: 0,
            events: evs(&[1, 2]),
        });
        assert_eq!(answered(&fx), [(1, vec![1, 2], 0)]);
        let fx = f.on(FollowEvent::LogRead {
            ticket: t(1),
            events: evs(&[2, 3]),
        });
        assert_eq!(answered(&fx), [(1, vec![3], 2)]);
        let fx = f.on(FollowEvent::LogRead {
            ticket: t(1),
            events: evs(&[1, 2, 3]),
        });
        assert_eq!(
            fx,
            FollowEffects::default(),
            "nothing new: no answer, no read"
        );
        let fx = f.on(FollowEvent::Woken {
            channel: "p:wake:s",
        });
        assert_eq!(fx.reads, [log(1, "s", 3)], "read after the last answered");
        // Evicted events between two answers are a gap.
        let fx = f.on(FollowEvent::LogRead {
            ticket: t(1),
            events: evs(&[6, 5, 7]),
        });
        assert_eq!(
            answered(&fx),
            [(1, vec![6, 7], 3)],
            "each above the one before"
        );
        assert_eq!(
            fx.answers[0].1,
            StoreReply::Events {
                events: evs(&[6, 7]),
                gap: true,
                after: 3
            }
        );
        // A stream follow alike.
        assert_eq!(start_stream(&mut f, 2, "s", "b"), channel("p:rsw:s:b"));
        let fx = f.on(FollowEvent::StreamRead {
            ticket: t(2),
            read: running(&[1, 2], false),
        });
        assert_eq!(answered(&fx), [(2, vec![1, 2], 0)]);
        let fx = f.on(FollowEvent::StreamRead {
            ticket: t(2),
            read: running(&[2], false),
        });
        assert_eq!(fx, FollowEffects::default());
        let fx = f.on(FollowEvent::StreamRead {
            ticket: t(2),
            read: Some(StreamRead {
                events: evs(&[1, 2, 3]),
                end: Some(StreamEnd::Finished),
                full: false,
            }),
        });
        assert_eq!(answered(&fx), [(2, vec![3], 2)]);
    }

    #[test]
    fn a_full_batch_is_read_again_until_a_read_is_short_or_brings_nothing_new() {
        let mut f = follows();
        let fx = f.on(FollowEvent::Started {
            ticket: t(1),
            session: "s",
            after: 0,
            events: evs(&[1, 2, 3]),
        });
        assert_eq!(fx.reads, [log(1, "s", 3)]);
        let fx = f.on(FollowEvent::LogRead {
            ticket: t(1),
            events: evs(&[4, 5, 6]),
        });
        assert_eq!(answered(&fx), [(1, vec![4, 5, 6], 3)]);
        assert_eq!(fx.reads, [log(1, "s", 6)]);
        let fx = f.on(FollowEvent::LogRead {
            ticket: t(1),
            events: evs(&[4, 5, 6]),
        });
        assert_eq!(
            fx,
            FollowEffects::default(),
            "a full read of nothing new ends"
        );
        let fx = f.on(FollowEvent::LogRead {
            ticket: t(1),
            events: evs(&[7]),
        });
        assert_eq!(fx.reads, []);
        let _ = f.on(FollowEvent::StreamStart {
            session: "s",
            stream: "b",
        });
        let fx = f.on(FollowEvent::StreamStarted {
            ticket: t(2),
            session: "s",
            stream: "b",
            after: 0,
            read: running(&[1, 2, 3], true),
        });
        assert_eq!(fx.reads, [stream(2, "s", "b", 3)]);
    }

    #[test]
    fn an_unfollow_of_an_unknown_ticket_does_nothing() {
        let mut f = follows();
        assert_eq!(start(&mut f, 1, "s", 0), channel("p:wake:s"));
        let fx = f.on(FollowEvent::Unfollow { ticket: t(9) });
        assert_eq!(fx, FollowEffects::default());
        // Nor of one that ended already (given up), while another uses its channel.
        assert_eq!(start(&mut f, 2, "s", 0), None);
        let fx = f.on(FollowEvent::GaveUp { ticket: t(1) });
        assert_eq!(fx, FollowEffects::default());
        let fx = f.on(FollowEvent::Unfollow { ticket: t(1) });
        assert_eq!(fx, FollowEffects::default());
        assert_eq!(f.channels(), ["p:wake:s"]);
        let fx = f.on(FollowEvent::Recovered);
        assert_eq!(fx.reads, [log(2, "s", 0)], "follow 2 lives on");
    }

    #[test]
    fn a_reconnection_reads_every_live_follow_again_from_its_last_answer() {
        let mut f = follows();
        let _ = f.on(FollowEvent::Started {
            ticket: t(1),
            session: "a",
            after: 0,
            events: evs(&[1, 2]),
        });
        assert_eq!(start(&mut f, 2, "b", 7), channel("p:wake:b"));
        assert_eq!(start(&mut f, 3, "c", 0), channel("p:wake:c"));
        let _ = f.on(FollowEvent::Unfollow { ticket: t(3) });
        assert_eq!(start_stream(&mut f, 4, "a", "x"), channel("p:rsw:a:x"));
        let _ = f.on(FollowEvent::StreamRead {
            ticket: t(4),
            read: running(&[1], false),
        });
        // A start in flight is not live: it reads again once it is.
        let _ = f.on(FollowEvent::Starting { session: "d" });
        let fx = f.on(FollowEvent::Recovered);
        assert_eq!(
            fx.reads,
            [log(1, "a", 2), log(2, "b", 7), stream(4, "a", "x", 1)]
        );
        assert_eq!(
            (fx.subscribe, fx.answers, fx.unsubscribe),
            (None, vec![], None)
        );
        // Subscribed again on the new connection: the live follows' channels, and the start
        // in flight's (its subscription was on the lost connection).
        assert_eq!(
            f.channels(),
            ["p:rsw:a:x", "p:wake:a", "p:wake:b", "p:wake:d"]
        );
    }

    #[test]
    fn a_beat_reads_the_stream_follows_only() {
        let mut f = follows();
        start(&mut f, 1, "s", 0);
        start_stream(&mut f, 2, "s", "b");
        let fx = f.on(FollowEvent::Beat);
        assert_eq!(fx.reads, [stream(2, "s", "b", 0)]);
    }

    #[test]
    fn past_the_grace_every_live_follow_is_answered_failed() {
        let mut f = follows();
        start(&mut f, 1, "s", 0);
        start_stream(&mut f, 2, "s", "b");
        let fx = f.on(FollowEvent::Expired);
        let failed = StoreReply::Failed(StoreError("the store connection is lost".into()));
        assert_eq!(fx.answers, [(t(1), failed.clone()), (t(2), failed)]);
        assert_eq!(fx.unsubscribe, None);
        assert_eq!(f.on(FollowEvent::Recovered), FollowEffects::default());
        assert_eq!(f.channels(), Vec::<String>::new());
    }

    #[test]
    fn a_stream_follow_that_cannot_start_or_ends_at_once_is_not_kept() {
        let mut f = follows();
        for (n, read, answer) in [
            (1, None, (1, vec![], 5)),
            (
                2,
                Some(StreamRead {
                    events: evs(&[6]),
                    end: Some(StreamEnd::Finished),
                    full: false,
                }),
                (2, vec![6], 5),
            ),
        ] {
            let start = f.on(FollowEvent::StreamStart {
                session: "s",
                stream: "b",
            });
            assert_eq!(start.subscribe, channel("p:rsw:s:b"));
            let fx = f.on(FollowEvent::StreamStarted {
                ticket: t(n),
                session: "s",
                stream: "b",
                after: 5,
                read,
            });
            assert_eq!(answered(&fx), [answer]);
            assert_eq!(fx.unsubscribe, channel("p:rsw:s:b"));
        }
        let StoreReply::StreamEvents { end, .. } = &f
            .on(FollowEvent::StreamStarted {
                ticket: t(3),
                session: "s",
                stream: "b",
                after: 0,
                read: None,
            })
            .answers[0]
            .1
        else {
            panic!("stream events")
        };
        assert_eq!(*end, Some(StreamEnd::Unknown));
        // A failed start releases the channel it subscribed, unless a follow uses it.
        start_stream(&mut f, 4, "s", "b");
        let fx = f.on(FollowEvent::StreamStartFailed {
            session: "s",
            stream: "b",
        });
        assert_eq!(fx.unsubscribe, None);
        assert_eq!(f.channels(), ["p:rsw:s:b"]);
    }

    #[test]
    fn follows_given_up_or_of_a_deleted_session_end_without_unsubscribing() {
        let mut f = follows();
        start(&mut f, 1, "s", 0);
        start_stream(&mut f, 2, "s", "b");
        start(&mut f, 3, "t", 0);
        let fx = f.on(FollowEvent::SessionDeleted { session: "s" });
        assert_eq!(fx, FollowEffects::default());
        assert_eq!(
            f.on(FollowEvent::GaveUp { ticket: t(3) }),
            FollowEffects::default()
        );
        assert_eq!(f.on(FollowEvent::Recovered), FollowEffects::default());
        // The next start subscribes again.
        assert_eq!(start(&mut f, 4, "s", 0), channel("p:wake:s"));
    }
}
