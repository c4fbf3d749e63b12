//! Properties of the default event store: a replay is always an in-order, gap-reported
//! suffix of exactly that session's stream; memory stays within its bounds; removing a
//! session or stream forgets it.

use std::collections::HashMap;

use bytes::Bytes;
use mcp_proto::server::{EventStore, InMemoryEventStore, Replay};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Append { session: u8, stream: u8, len: u8 },
    Replay { session: u8, stream: u8, after: u8 },
    RemoveStream { session: u8, stream: u8 },
    RemoveSession { session: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..3, 0u8..4, 1u8..40).prop_map(|(session, stream, len)| Op::Append { session, stream, len }),
        3 => (0u8..3, 0u8..4, 0u8..30).prop_map(|(session, stream, after)| Op::Replay { session, stream, after }),
        1 => (0u8..3, 0u8..4).prop_map(|(session, stream)| Op::RemoveStream { session, stream }),
        1 => (0u8..3).prop_map(|session| Op::RemoveSession { session }),
    ]
}

proptest! {
    #[test]
    fn replay_is_an_ordered_suffix_of_that_stream(ops in prop::collection::vec(op(), 1..200), per_stream in 1usize..8, total in 16usize..400) {
        let mut store = InMemoryEventStore::new(per_stream, total);
        // Model: per (session, stream) the full history; stream numbers are global in the
        // router, so a stream belongs to the first session that used it.
        let mut owner: HashMap<u8, u8> = HashMap::new();
        let mut history: HashMap<u8, Vec<(u64, Bytes)>> = HashMap::new();
        for op in ops {
            match op {
                Op::Append { session, stream, len } => {
                    if *owner.entry(stream).or_insert(session) != session {
                        continue;
                    }
                    let h = history.entry(stream).or_default();
                    let seq = h.last().map_or(1, |(s, _)| s + 1);
                    let frame = Bytes::from(vec![b'a' + session; len as usize]);
                    h.push((seq, frame.clone()));
                    store.append(&session.to_string(), stream as u64, seq, frame);
                    prop_assert!(store.total_bytes() <= total.max(len as usize));
                }
                Op::Replay { session, stream, after } => {
                    let r = store.replay_after(&session.to_string(), stream as u64, after as u64);
                    let mine = owner.get(&stream) == Some(&session);
                    let (events, gap) = match r {
                        Replay::Unknown => (vec![], false),
                        Replay::Complete(e) => (e, false),
                        Replay::Gap(e) => (e, true),
                        _ => unreachable!(),
                    };
                    if !mine {
                        prop_assert!(events.is_empty(), "another session's events");
                        continue;
                    }
                    let full: Vec<_> = history.get(&stream).map(|h| h.iter().filter(|(s, _)| *s > after as u64).cloned().collect()).unwrap_or_default();
                    // What is returned is a suffix of the full answer, in order, same bytes.
                    prop_assert!(events.len() <= full.len());
                    let tail = &full[full.len() - events.len()..];
                    for (e, (s, f)) in events.iter().zip(tail) {
                        prop_assert_eq!(e.seq, *s);
                        prop_assert_eq!(&e.frame, f);
                    }
                    // Anything missing is reported.
                    if events.len() < full.len() {
                        prop_assert!(gap, "missing events not reported");
                    }
                }
                Op::RemoveStream { session, stream } => {
                    store.remove_stream(&session.to_string(), stream as u64);
                    if owner.get(&stream) == Some(&session) {
                        owner.remove(&stream);
                        history.remove(&stream);
                    }
                }
                Op::RemoveSession { session } => {
                    store.remove_session(&session.to_string());
                    let gone: Vec<u8> = owner.iter().filter(|(_, s)| **s == session).map(|(k, _)| *k).collect();
                    for k in gone {
                        owner.remove(&k);
                        history.remove(&k);
                    }
                }
            }
        }
        for s in 0..3u8 {
            store.remove_session(&s.to_string());
        }
        prop_assert_eq!(store.total_bytes(), 0);
        prop_assert_eq!(store.stream_count(), 0);
    }
}
