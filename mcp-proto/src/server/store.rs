// S-RES-1..9, S-RES-2, S-RES-3, S-RES-6/7, G-5.
//! The [`EventStore`]: where SSE events wait for a client that may resume with
//! `Last-Event-ID`, and [`InMemoryEventStore`], the bounded default.
//!
//! The router assigns every event on a resumable stream an id `"<stream>-<seq>"`: `stream` is
//! unique in the whole router (so ids are unique per session and name their stream) and `seq`
//! counts from 1 (0 is the priming event, which is never stored). It appends the encoded frame
//! here, and on a resuming GET asks for exactly the frames of that stream after the given `seq`.
//! Replays never cross sessions: the router checks that the stream belongs to the requesting
//! session before it asks, and the store keys everything by session too (GHSA-84j6-jc92-77jm).
//!
//! The trait is synchronous like the rest of the core. A shared store (Redis, a database) is
//! wrapped by the adapter with a local write-behind buffer; the router never waits.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;

/// One stored SSE event: its sequence number in its stream and its encoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// The sequence number (the part after `-` in the event id).
    pub seq: u64,
    /// The SSE frame exactly as it was written (`id:` and `data:` lines, blank line).
    pub frame: Bytes,
}

/// The answer to a replay request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Replay {
    /// Every event after the given one, in order (possibly none).
    Complete(Vec<StoredEvent>),
    /// Some events after the given one were evicted; these are the ones still kept.
    Gap(Vec<StoredEvent>),
    /// The store knows nothing of this stream for this session.
    Unknown,
}

/// Storage of SSE events for replay.
///
/// Implementations MUST keep events of different sessions apart and MUST return a stream's
/// events in `seq` order. They MAY evict (bounded memory), reporting it with [`Replay::Gap`].
///
/// The router boxes it as `dyn EventStore + Send`, so that a `Router` can move into an
/// adapter's task: an implementation shared with other code uses `Arc<Mutex<_>>`, not `Rc`.
pub trait EventStore {
    /// Stores the frame of event `seq` of `stream` in `session`.
    fn append(&mut self, session: &str, stream: u64, seq: u64, frame: Bytes);
    /// The events of `stream` in `session` with a sequence number above `after`.
    fn replay_after(&mut self, session: &str, stream: u64, after: u64) -> Replay;
    /// Forgets one stream (its retention ended).
    fn remove_stream(&mut self, session: &str, stream: u64);
    /// Forgets every stream of a session (terminated, expired or evicted).
    fn remove_session(&mut self, session: &str);
}

#[derive(Debug)]
struct StreamLog {
    session: Box<str>,
    events: VecDeque<StoredEvent>,
    /// Highest `seq` evicted so far (0 = none).
    evicted_upto: u64,
}

/// The default [`EventStore`]: in memory, bounded per stream and in total bytes, evicting the
/// oldest events first.
#[derive(Debug)]
pub struct InMemoryEventStore {
    max_events_per_stream: usize,
    max_total_bytes: usize,
    total_bytes: usize,
    streams: HashMap<u64, StreamLog>,
    by_session: HashMap<Box<str>, Vec<u64>>,
    /// Global append order, for evicting the oldest event first; may hold entries of
    /// removed streams, compacted when it grows past twice the live events.
    order: VecDeque<(u64, u64)>,
    live_events: usize,
}

impl Default for InMemoryEventStore {
    /// 1,024 events per stream, 64 MiB in total.
    fn default() -> Self {
        InMemoryEventStore::new(1024, 64 * 1024 * 1024)
    }
}

impl InMemoryEventStore {
    /// A store keeping at most `max_events_per_stream` events per stream and
    /// `max_total_bytes` of frames overall.
    pub fn new(max_events_per_stream: usize, max_total_bytes: usize) -> Self {
        InMemoryEventStore {
            max_events_per_stream: max_events_per_stream.max(1),
            max_total_bytes,
            total_bytes: 0,
            streams: HashMap::new(),
            by_session: HashMap::new(),
            order: VecDeque::new(),
            live_events: 0,
        }
    }

    /// Bytes of frames currently held.
    pub fn total_bytes(&self) -> usize {
        self.total_bytes
    }

    /// Number of streams currently held.
    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }

    fn evict_front_of(&mut self, stream: u64) {
        if let Some(log) = self.streams.get_mut(&stream)
            && let Some(ev) = log.events.pop_front()
        {
            log.evicted_upto = log.evicted_upto.max(ev.seq);
            self.total_bytes -= ev.frame.len();
            self.live_events -= 1;
        }
    }

    fn evict_oldest(&mut self) -> bool {
        while let Some((stream, seq)) = self.order.pop_front() {
            let is_front = self
                .streams
                .get(&stream)
                .and_then(|l| l.events.front())
                .is_some_and(|e| e.seq == seq);
            if is_front {
                self.evict_front_of(stream);
                return true;
            }
        }
        false
    }

    fn compact_order(&mut self) {
        if self.order.len() > 2 * self.live_events + 64 {
            let streams = &self.streams;
            self.order.retain(|(s, seq)| {
                // Events of a stream are kept in increasing `seq` order and only leave from
                // the front, so "still held" is a range check.
                streams.get(s).is_some_and(|l| {
                    matches!((l.events.front(), l.events.back()), (Some(f), Some(b)) if f.seq <= *seq && *seq <= b.seq)
                })
            });
            self.order.shrink_to_fit();
        }
    }
}

impl EventStore for InMemoryEventStore {
    fn append(&mut self, session: &str, stream: u64, seq: u64, frame: Bytes) {
        let len = frame.len();
        let log = self.streams.entry(stream).or_insert_with(|| {
            let ids = self.by_session.entry(session.into()).or_default();
            ids.push(stream);
            StreamLog {
                session: session.into(),
                // A POST stream's few events (progress, then the answer) in one allocation:
                // grown from nothing, the queue was reallocated at the first and the fifth.
                events: VecDeque::with_capacity(8),
                evicted_upto: 0,
            }
        });
        if &*log.session != session {
            // A stream number reused across sessions would be a router bug; never mix.
            return;
        }
        log.events.push_back(StoredEvent { seq, frame });
        self.total_bytes += len;
        self.live_events += 1;
        self.order.push_back((stream, seq));
        if log.events.len() > self.max_events_per_stream {
            self.evict_front_of(stream);
        }
        while self.total_bytes > self.max_total_bytes {
            if !self.evict_oldest() {
                break;
            }
        }
        self.compact_order();
    }

    fn replay_after(&mut self, session: &str, stream: u64, after: u64) -> Replay {
        let Some(log) = self.streams.get(&stream) else {
            return Replay::Unknown;
        };
        if &*log.session != session {
            return Replay::Unknown;
        }
        let events: Vec<StoredEvent> = log
            .events
            .iter()
            .filter(|e| e.seq > after)
            .cloned()
            .collect();
        if log.evicted_upto > after {
            Replay::Gap(events)
        } else {
            Replay::Complete(events)
        }
    }

    fn remove_stream(&mut self, session: &str, stream: u64) {
        if self
            .streams
            .get(&stream)
            .is_some_and(|l| &*l.session == session)
        {
            if let Some(log) = self.streams.remove(&stream) {
                self.live_events -= log.events.len();
                self.total_bytes -= log.events.iter().map(|e| e.frame.len()).sum::<usize>();
            }
            if let Some(ids) = self.by_session.get_mut(session) {
                ids.retain(|s| *s != stream);
                if ids.is_empty() {
                    self.by_session.remove(session);
                }
            }
        }
        self.compact_order();
    }

    fn remove_session(&mut self, session: &str) {
        if let Some(ids) = self.by_session.remove(session) {
            for stream in ids {
                if let Some(log) = self.streams.remove(&stream) {
                    self.live_events -= log.events.len();
                    self.total_bytes -= log.events.iter().map(|e| e.frame.len()).sum::<usize>();
                }
            }
        }
        self.compact_order();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn s_res_6_replays_exactly_the_later_events_of_that_stream() {
        let mut s = InMemoryEventStore::default();
        s.append("a", 1, 1, frame("x1"));
        s.append("a", 2, 1, frame("y1"));
        s.append("a", 1, 2, frame("x2"));
        s.append("a", 1, 3, frame("x3"));
        let Replay::Complete(ev) = s.replay_after("a", 1, 1) else {
            panic!()
        };
        assert_eq!(ev.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(s.replay_after("a", 1, 3), Replay::Complete(vec![]));
    }

    #[test]
    fn s_res_7_never_across_sessions() {
        let mut s = InMemoryEventStore::default();
        s.append("a", 1, 1, frame("x1"));
        assert_eq!(s.replay_after("b", 1, 0), Replay::Unknown);
        s.append("b", 1, 1, frame("evil"));
        let Replay::Complete(ev) = s.replay_after("a", 1, 0) else {
            panic!()
        };
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].frame, frame("x1"));
    }

    #[test]
    fn bounded_with_gap_reported_and_memory_freed() {
        let mut s = InMemoryEventStore::new(2, 1000);
        for i in 1..=4 {
            s.append("a", 1, i, frame("abc"));
        }
        let Replay::Gap(ev) = s.replay_after("a", 1, 0) else {
            panic!()
        };
        assert_eq!(ev.iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 4]);
        assert_eq!(s.replay_after("a", 1, 2), Replay::Complete(ev.clone()));
        let mut t = InMemoryEventStore::new(100, 10);
        for i in 1..=5 {
            t.append("a", 7, i, frame("abcd"));
        }
        assert!(t.total_bytes() <= 10);
        t.remove_session("a");
        assert_eq!(t.total_bytes(), 0);
        assert_eq!(t.stream_count(), 0);
        assert!(t.by_session.is_empty());
    }
}
