//! The Redis cluster store (`mcp_redis`, issue 15) against a real
//! `redis-server` (skipped when it is not installed, failing under `CI=true`):
//!
//! - conformance: one scripted sequence of store operations from three members, executed on
//!   `MemoryCluster` (the reference semantics) and on the Redis backend, every member's
//!   deliveries compared step by step;
//! - end to end: three servers on each runtime sharing sessions through Redis;
//! - Redis killed mid-test: 503 with a JSON-RPC error, then service again after a restart.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mcp_driver::{ClusterBackend, ClusterInbox, StoreLink};
use mcp_proto::ProtocolVersion;
use mcp_proto::jsonrpc::{RequestId, Response};
use mcp_proto::server::{
    BusMessage, ClusterDelivery, CommitEvent, FollowFrom, MemberId, MemoryCluster, RecordGuard,
    RecordOp, SessionRecord, StoreOp, StoreReply, StreamCommit, Ticket,
};
use mcp_tests::require_service;
use mcp_tests::services::Redis;

/// The bound of every wait.
const WAIT: Duration = Duration::from_secs(5);

/// A short idle TTL, in real time.
const SHORT: Duration = Duration::from_millis(300);

fn record(id: &str, state: Option<&'static [u8]>) -> SessionRecord {
    SessionRecord {
        id: id.into(),
        principal: Some("alice".into()),
        version: ProtocolVersion::V2025_03_26,
        state: state.map(Bytes::from_static),
    }
}

/// An inbox that sends to `tx` what both stores deliver: the Redis link's reachability
/// reports (`StoreReachable` when it connects) have no counterpart in the memory store's
/// operations and are left out.
fn inbox(tx: mpsc::Sender<ClusterDelivery>) -> ClusterInbox {
    ClusterInbox::new(move |d| {
        matches!(
            d,
            ClusterDelivery::StoreReachable | ClusterDelivery::StoreUnreachable(_)
        ) || tx.send(d).is_ok()
    })
}

/// Failures compared by kind only (the texts differ).
fn normalize(d: ClusterDelivery) -> ClusterDelivery {
    match d {
        ClusterDelivery::Reply(t, StoreReply::Failed(_)) => ClusterDelivery::Reply(
            t,
            StoreReply::Failed(mcp_proto::server::StoreError("".into())),
        ),
        other => other,
    }
}

/// A member's deliveries in the order the seam promises, and only that: each ticket's answers
/// in order (a follow's continue one another), the bus messages in order, and the rest in any
/// order ("answers may come back in any order": the Redis link pipelines the operations of
/// different sessions, and a follow's wake-up can overtake the answer to the publish that
/// caused it). A stable sort by ticket, bus messages after the answers.
fn canonical(mut deliveries: Vec<ClusterDelivery>) -> Vec<ClusterDelivery> {
    deliveries.sort_by_key(|d| match d {
        ClusterDelivery::Reply(t, _) => (0, t.as_u64()),
        ClusterDelivery::Bus(_) | ClusterDelivery::BusLost => (1, 0),
        ClusterDelivery::StoreUnreachable(_) | ClusterDelivery::StoreReachable => (2, 0),
    });
    deliveries
}

/// Both stores, three members each.
struct Twin {
    memory: MemoryCluster,
    members: Vec<MemberId>,
    /// `None`: the member left (its link was dropped).
    links: Vec<Option<Box<dyn StoreLink>>>,
    inboxes: Vec<mpsc::Receiver<ClusterDelivery>>,
    next: u64,
    step: usize,
    /// The instant the last operation was run at, on both stores.
    last: Instant,
}

impl Twin {
    fn new(backend: &dyn ClusterBackend) -> Twin {
        let mut memory = MemoryCluster::new();
        let mut members = Vec::new();
        let mut links = Vec::new();
        let mut inboxes = Vec::new();
        for name in ["a", "b", "c"] {
            members.push(memory.join());
            let (tx, rx) = mpsc::channel();
            let inbox = inbox(tx);
            links.push(Some(backend.connect(name, inbox)));
            inboxes.push(rx);
        }
        Twin {
            memory,
            members,
            links,
            inboxes,
            next: 0,
            step: 0,
            last: Instant::now(),
        }
    }

    /// Runs `op` from member `m` on both stores; compares what every member received.
    /// Returns the ticket.
    fn run(&mut self, m: usize, op: StoreOp) -> Ticket {
        self.step += 1;
        self.next += 1;
        let ticket = Ticket::from_u64(self.next);
        let now = Instant::now();
        self.last = now;
        self.memory
            .execute(now, self.members[m], ticket, op.clone());
        self.links[m]
            .as_mut()
            .expect("a member that left runs nothing")
            .submit(now, ticket, op.clone());
        self.compare(&format!("{op:?} from member {m}"));
        ticket
    }

    /// Member `m` dies: `MemoryCluster::leave`, and its Redis link is dropped (its liveness
    /// key goes; the followers notice within a third of the liveness TTL, inside `WAIT`).
    fn leave(&mut self, m: usize) {
        self.step += 1;
        self.memory.leave(self.members[m]);
        self.links[m] = None;
        self.compare(&format!("member {m} leaves"));
    }

    /// Compares what every live member received since the last step.
    fn compare(&mut self, what: &str) {
        let expected: Vec<Vec<ClusterDelivery>> = self
            .members
            .iter()
            .map(|&mb| self.memory.take(mb).into_iter().map(normalize).collect())
            .collect();
        for (i, want) in expected.iter().enumerate() {
            if self.links[i].is_none() {
                continue; // gone: what the reference still queues for it reaches no one
            }
            let mut got = Vec::new();
            let deadline = Instant::now() + WAIT;
            while got.len() < want.len() {
                let left = deadline.saturating_duration_since(Instant::now());
                match self.inboxes[i].recv_timeout(left) {
                    Ok(d) => got.push(normalize(d)),
                    Err(_) => break,
                }
            }
            // Anything more, a little later, is a difference too.
            while let Ok(d) = self.inboxes[i].recv_timeout(Duration::from_millis(30)) {
                got.push(normalize(d));
            }
            assert_eq!(
                canonical(got),
                canonical(want.clone()),
                "step {} ({what}): member {i} received differently (left: Redis, right: MemoryCluster)",
                self.step
            );
        }
    }
}

/// Sleeps until `at` (at once if it has passed).
fn sleep_until(at: Instant) {
    std::thread::sleep(at.saturating_duration_since(Instant::now()));
}

fn publish(session: &str, seq: u64, capacity: usize) -> StoreOp {
    StoreOp::Publish {
        session: session.into(),
        payload: Bytes::from(format!("{{\"m\":{seq}}}")),
        capacity,
        gap: false,
    }
}

/// A publish carrying a gap (`seq` 0: the gap's marker alone, no message).
fn publish_gap(session: &str, seq: u64, capacity: usize) -> StoreOp {
    let payload = match seq {
        0 => Bytes::new(),
        n => Bytes::from(format!("{{\"m\":{n}}}")),
    };
    StoreOp::Publish {
        session: session.into(),
        payload,
        capacity,
        gap: true,
    }
}

/// The scripted sequence; the Redis answers must equal MemoryCluster's at every step.
fn conformance(backend: &dyn ClusterBackend, redis: &Redis) {
    let long = Some(Duration::from_secs(60));
    let mut t = Twin::new(backend);
    let create = |id: &str, cap: usize, ttl: Option<Duration>| StoreOp::Create {
        record: record(id, None),
        max_sessions: cap,
        ttl,
    };
    let load = |id: &str| StoreOp::Load { session: id.into() };
    // Create and the cluster-wide cap.
    t.run(0, create("s1", 2, long));
    t.run(1, create("s2", 2, None));
    t.run(2, create("s3", 2, long)); // at capacity
    t.run(0, create("s1", 9, long)); // taken: failed
    t.run(1, load("s1"));
    t.run(1, load("nope"));
    // Save replaces, a missing record answers Session(None).
    t.run(
        0,
        StoreOp::Save {
            record: record("s1", Some(b"\x00state\xff")),
            ttl: long,
        },
    );
    t.run(2, load("s1"));
    t.run(
        0,
        StoreOp::Save {
            record: record("gone", None),
            ttl: long,
        },
    );
    t.run(
        0,
        StoreOp::Touch {
            session: "s1".into(),
            ttl: long,
        },
    );
    // Expiry (real time), and an expired record no longer counts against the cap.
    t.run(0, create("s4", 10, Some(SHORT)));
    std::thread::sleep(SHORT + Duration::from_millis(150));
    t.run(1, load("s4"));
    t.run(2, create("s5", 3, long));
    // A touch renews. The sleeps are measured from the instant each operation ran (comparing
    // the deliveries after a step takes some 100 ms, more on a loaded machine), with a third of
    // the TTL as the margin on either side: without the touch the record would be expired at
    // the load, with it the load comes at two thirds of its new life.
    const RENEWED: Duration = Duration::from_millis(900);
    t.run(0, create("s6", 10, Some(RENEWED)));
    sleep_until(t.last + RENEWED * 2 / 3);
    t.run(
        1,
        StoreOp::Touch {
            session: "s6".into(),
            ttl: Some(RENEWED),
        },
    );
    sleep_until(t.last + RENEWED * 2 / 3);
    t.run(2, load("s6"));
    // Delete: the record goes, the others hear it on the bus.
    t.run(
        1,
        StoreOp::Delete {
            session: "s2".into(),
        },
    );
    t.run(0, load("s2"));
    t.run(0, publish("s2", 1, 3)); // a deleted session's message goes nowhere
    // The listen log: follow, publish, gap, cursor, unfollow.
    let c_follow = t.run(
        2,
        StoreOp::Follow {
            session: "s1".into(),
            from: FollowFrom::After(0),
        },
    );
    for seq in 1..=5 {
        t.run(0, publish("s1", seq, 3));
    }
    t.run(
        1,
        StoreOp::Follow {
            session: "s1".into(),
            from: FollowFrom::After(0),
        },
    ); // 3..=5 with a gap
    t.run(
        2,
        StoreOp::Delivered {
            session: "s1".into(),
            seq: 4,
        },
    );
    t.run(
        0,
        StoreOp::Follow {
            session: "s1".into(),
            from: FollowFrom::Cursor,
        },
    ); // 5
    t.run(2, StoreOp::Unfollow { follow: c_follow });
    t.run(1, publish("s1", 6, 3)); // to a and b only
    // A lost message's marker alone, then a message carrying a gap: both carry the flag.
    t.run(1, publish_gap("s1", 0, 3));
    t.run(0, publish_gap("s1", 8, 3));
    // Broadcasts reach every other member.
    t.run(
        0,
        StoreOp::Broadcast {
            message: BusMessage::ListenTaken {
                session: "s1".into(),
                by: "a".into(),
            },
        },
    );
    t.run(
        1,
        StoreOp::Broadcast {
            message: BusMessage::Cancel {
                session: "s1".into(),
                request: RequestId::Number(3),
            },
        },
    );
    let response: Response = match mcp_proto::jsonrpc::parse_message(
        br#"{"jsonrpc":"2.0","id":"a.1","result":{"ok":true}}"#,
    )
    .unwrap()
    {
        mcp_proto::jsonrpc::Message::Response(r) => r,
        other => panic!("{other:?}"),
    };
    t.run(
        2,
        StoreOp::Broadcast {
            message: BusMessage::ClientResponse {
                instance: "a".into(),
                session: "s1".into(),
                response,
            },
        },
    );
    // Deleting the followed session: its follows end, the others hear of it.
    t.run(
        2,
        StoreOp::Delete {
            session: "s1".into(),
        },
    );
    t.run(0, publish("s1", 7, 3));
    t.run(1, load("s1"));
    request_streams(&mut t, create, redis);
}

fn record_load(key: &str) -> StoreOp {
    StoreOp::Record(RecordOp::Load { key: key.into() })
}

fn record_save(
    key: &str,
    value: &'static str,
    guard: RecordGuard,
    owned: bool,
    ttl: Option<Duration>,
) -> StoreOp {
    StoreOp::Record(RecordOp::Save {
        key: key.into(),
        value: Bytes::from_static(value.as_bytes()),
        guard,
        owned,
        ttl,
    })
}

/// Service records (a task's state): compare-and-set, ownership, expiry on creation. Member
/// 1 owns `task:1` (it leaves afterwards).
fn service_records(t: &mut Twin) {
    let long = Some(Duration::from_secs(60));
    t.run(
        1,
        record_save("task:1", "v1", RecordGuard::Absent, true, long),
    );
    t.run(2, record_load("task:1")); // version 1, owner alive
    t.run(
        0,
        record_save("task:1", "x", RecordGuard::Absent, false, long),
    ); // exists: conflict
    t.run(
        0,
        record_save("task:1", "x", RecordGuard::Version(7), false, long),
    ); // stale: conflict
    t.run(
        2,
        record_save(
            "task:1",
            "v2\x00\u{ff}",
            RecordGuard::Version(1),
            false,
            long,
        ),
    ); // the owner stays b
    t.run(0, record_load("task:1"));
    t.run(
        0,
        record_save("nope", "x", RecordGuard::Version(1), false, long),
    ); // none: conflict, nothing
    t.run(0, record_load("nope"));
    t.run(
        2,
        record_save("task:2", "unowned", RecordGuard::Absent, false, None),
    );
    t.run(1, record_load("task:2"));
    // The TTL counts from the creation; a later write keeps it.
    t.run(
        0,
        record_save("task:3", "short", RecordGuard::Absent, true, Some(SHORT)),
    );
    t.run(
        0,
        record_save("task:3", "again", RecordGuard::Version(1), true, long),
    );
    std::thread::sleep(SHORT + Duration::from_millis(150));
    t.run(1, record_load("task:3"));
}

/// One stream's writes in a commit: `open` registers it with these requests; each event is
/// `(seq, the request it answers)`; `end` its retention.
fn writes(
    stream: &str,
    open: Option<&[RequestId]>,
    events: &[(u64, Option<RequestId>)],
    end: Option<Duration>,
) -> StreamCommit {
    StreamCommit {
        stream: stream.into(),
        open: open.map(<[RequestId]>::to_vec),
        events: events
            .iter()
            .map(|(seq, answers)| CommitEvent {
                seq: *seq,
                payload: Bytes::from(format!("{{\"event\":{seq}}}")),
                answers: answers.clone(),
            })
            .collect(),
        end,
    }
}

/// A commit of one stream's writes (see [`writes`]).
fn commit(
    session: &str,
    stream: &str,
    open: Option<&[RequestId]>,
    events: &[(u64, Option<RequestId>)],
    end: Option<Duration>,
) -> StoreOp {
    StoreOp::CommitStreams {
        session: session.into(),
        streams: vec![writes(stream, open, events, end)],
    }
}

fn open(session: &str, stream: &str, requests: &[RequestId]) -> StoreOp {
    commit(session, stream, Some(requests), &[], None)
}

fn append(session: &str, stream: &str, seq: u64, answers: Option<RequestId>) -> StoreOp {
    commit(session, stream, None, &[(seq, answers)], None)
}

fn end_stream(session: &str, stream: &str, retain: Duration) -> StoreOp {
    commit(session, stream, None, &[], Some(retain))
}

fn follow_stream(session: &str, stream: &str, after: u64) -> StoreOp {
    StoreOp::FollowStream {
        session: session.into(),
        stream: stream.into(),
        after,
    }
}

/// Request streams, then member 1 (`b`, the owner) dies. Runs last: member 1 is gone after.
fn request_streams(
    t: &mut Twin,
    create: impl Fn(&str, usize, Option<Duration>) -> StoreOp,
    redis: &Redis,
) {
    let long = Some(Duration::from_secs(60));
    let n = RequestId::Number;
    let id = |s: &str| RequestId::String(s.into());
    // SessionSaved reaches the others after a save (and only then).
    t.run(0, create("r1", 100, long));
    t.run(
        2,
        StoreOp::Save {
            record: record("r1", Some(b"saved")),
            ttl: long,
        },
    );
    // No session, no stream: a follow answers Unknown at once (and is not registered).
    t.run(1, open("nope", "b.1", &[n(1)]));
    t.run(2, follow_stream("nope", "b.1", 0));
    t.run(2, follow_stream("r1", "b.9", 0));
    // Open, append, follow from the start and from the middle, answered ids.
    t.run(1, open("r1", "b.1", &[n(1), id("x"), n(3)]));
    t.run(1, append("r1", "b.1", 1, None));
    t.run(2, follow_stream("r1", "b.1", 0)); // event 1, live
    t.run(1, append("r1", "b.1", 2, Some(n(1)))); // to c
    let a_follow = t.run(0, follow_stream("r1", "b.1", 1)); // event 2, live
    t.run(0, StoreOp::Unfollow { follow: a_follow });
    t.run(1, append("r1", "b.1", 3, Some(id("x")))); // to c only
    // A finished stream answers its events and Finished, and the follow ends.
    t.run(1, open("r1", "b.2", &[n(7)]));
    t.run(1, append("r1", "b.2", 1, Some(n(7))));
    t.run(1, end_stream("r1", "b.2", Duration::from_secs(60)));
    t.run(2, follow_stream("r1", "b.2", 0));
    t.run(1, end_stream("r1", "b.1", Duration::from_secs(60))); // c's follow: Finished
    t.run(1, append("r1", "b.1", 4, None)); // nobody follows any more
    // Retention: a finished stream goes after `retain`.
    t.run(1, open("r1", "b.3", &[n(8)]));
    t.run(1, end_stream("r1", "b.3", SHORT));
    std::thread::sleep(SHORT + Duration::from_millis(150));
    t.run(2, follow_stream("r1", "b.3", 0)); // Unknown
    // One commit registers a stream with its first events; a repeated one (a retry) stores
    // nothing twice; one commit carries the last events and the end; one commit carries
    // several streams' writes, each applied as if alone (b.9 is neither registered nor
    // registering: passed over).
    let first = commit(
        "r1",
        "b.7",
        Some(&[n(12), n(13)]),
        &[(1, None), (2, Some(n(12)))],
        None,
    );
    t.run(1, first);
    let more = commit("r1", "b.7", None, &[(2, Some(n(12))), (3, None)], None);
    t.run(1, more.clone());
    t.run(1, more);
    t.run(2, follow_stream("r1", "b.7", 1)); // events 2 and 3, live
    t.run(
        1,
        StoreOp::CommitStreams {
            session: "r1".into(),
            streams: vec![
                writes(
                    "b.7",
                    None,
                    &[(4, Some(n(13))), (5, None)],
                    Some(Duration::from_secs(60)),
                ),
                writes("b.9", None, &[(1, None)], None),
                writes("b.8", Some(&[n(14)]), &[(1, Some(n(14)))], None),
            ],
        },
    ); // c: events 4 and 5, Finished
    t.run(0, follow_stream("r1", "b.7", 0)); // events 1 to 5, Finished
    t.run(0, follow_stream("r1", "b.8", 0)); // event 1, live
    t.run(0, follow_stream("r1", "b.9", 0)); // Unknown
    // The streams live as long as their session: a touch renews them, expiry removes them.
    // (A TTL longer than SHORT: each step takes some 100 ms of comparing; the sleeps count
    // from the instant the operations ran.)
    let ttl = Duration::from_millis(1500);
    let opened = Instant::now();
    t.run(0, create("r2", 100, Some(ttl)));
    let created = t.last;
    t.run(1, open("r2", "b.4", &[n(1)]));
    sleep_until(created + ttl * 2 / 3);
    let touched = Instant::now();
    t.run(
        0,
        StoreOp::Touch {
            session: "r2".into(),
            ttl: Some(ttl),
        },
    );
    sleep_until(t.last + ttl * 2 / 3);
    let live = t.run(2, follow_stream("r2", "b.4", 0)); // still there
    assert!(
        opened.elapsed() > ttl && touched.elapsed() < ttl,
        "too slow to test the renewal"
    );
    t.run(2, StoreOp::Unfollow { follow: live });
    std::thread::sleep(ttl + Duration::from_millis(150));
    t.run(2, follow_stream("r2", "b.4", 0)); // expired with r2: Unknown
    // StreamResumed round-trips on the bus.
    t.run(
        2,
        StoreOp::Broadcast {
            message: BusMessage::StreamResumed {
                session: "r1".into(),
                stream: "b.5".into(),
            },
        },
    );
    // The owner dies with a request unanswered: its follower gets OwnerGone, and so does a
    // follow that starts afterwards; a finished stream of it stays Finished.
    t.run(1, open("r1", "b.6", &[n(10), n(11)]));
    t.run(1, append("r1", "b.6", 1, Some(n(10))));
    t.run(2, follow_stream("r1", "b.6", 0));
    service_records(t);
    t.leave(1);
    t.run(0, follow_stream("r1", "b.6", 0));
    // A record whose owner left says so; one without an owner says nothing of one.
    t.run(0, record_load("task:1"));
    t.run(0, record_load("task:2"));
    t.run(0, follow_stream("r1", "b.2", 0));
    // Delete removes the session's streams.
    t.run(
        0,
        StoreOp::Delete {
            session: "r1".into(),
        },
    );
    t.run(2, follow_stream("r1", "b.2", 0));
    // ... from Redis too (the session's record check alone would hide a leak).
    let mut resp = redis.connect().unwrap();
    let left = resp.command(&["KEYS", "conf:*r1*"]).unwrap();
    assert_eq!(
        left,
        mcp_tests::services::RespValue::Array(Some(vec![])),
        "keys left after Delete"
    );
}

/// A prefix of its own per test (one Redis per test already; this keeps the keys apart if
/// two backends ever share one).
fn redis_config(prefix: &str) -> mcp_redis::RedisConfig {
    mcp_redis::RedisConfig::default()
        .with_prefix(prefix)
        .with_liveness_ttl(Duration::from_millis(600))
}

/// Runs `check` on the tokio adapter's Redis backend (keys under `prefix`), inside a
/// one-worker runtime.
fn on_tokio_backend(redis: &Redis, prefix: &str, check: fn(&dyn ClusterBackend, &Redis)) {
    let rt = mcp_tests::runtime::one_worker_tokio();
    let _guard = rt.enter();
    let backend = mcp_tokio::redis_backend(&redis.url(), redis_config(prefix)).unwrap();
    check(&*backend, redis);
}

/// Runs `check` on the smol adapter's Redis backend (keys under `prefix`).
fn on_smol_backend(redis: &Redis, prefix: &str, check: fn(&dyn ClusterBackend, &Redis)) {
    let backend = mcp_smol::redis_backend(&redis.url(), redis_config(prefix)).unwrap();
    check(&*backend, redis);
}

#[test]
fn the_redis_backend_answers_as_memory_cluster_on_tokio() {
    let redis = require_service!(Redis::start());
    on_tokio_backend(&redis, "conf", conformance);
}

#[test]
fn the_redis_backend_answers_as_memory_cluster_on_smol() {
    let redis = require_service!(Redis::start());
    on_smol_backend(&redis, "conf", conformance);
}

/// A payload's buffer that records the thread which freed it.
struct FreedOn(std::sync::Arc<std::sync::Mutex<Option<String>>>, Vec<u8>);

impl AsRef<[u8]> for FreedOn {
    fn as_ref(&self) -> &[u8] {
        &self.1
    }
}

impl Drop for FreedOn {
    fn drop(&mut self) {
        let here = std::thread::current();
        *self.0.lock().unwrap() = Some(format!("{:?} {:?}", here.id(), here.name()));
    }
}

/// An operation the link answered is dropped on the thread that submits (at its next
/// submission), not on the link's own thread: its allocations are freed where they were made.
fn answered_operations_are_dropped_on_the_submitting_thread(
    backend: &dyn ClusterBackend,
    _: &Redis,
) {
    let (tx, rx) = mpsc::channel();
    let mut link = backend.connect("a", inbox(tx));
    let answered = |ticket: u64| loop {
        match rx.recv_timeout(WAIT).expect("an answer") {
            ClusterDelivery::Reply(t, _) if t == Ticket::from_u64(ticket) => break,
            _ => continue,
        }
    };
    // Once connected (an operation submitted before runs with the dial, on the link's
    // thread to its end), operations go in batches and come back answered.
    let load = || StoreOp::Load {
        session: "none".into(),
    };
    link.submit(Instant::now(), Ticket::from_u64(1), load());
    answered(1);
    let freed = std::sync::Arc::new(std::sync::Mutex::new(None));
    let payload = Bytes::from_owner(FreedOn(freed.clone(), b"{}".to_vec()));
    let op = StoreOp::Publish {
        session: "none".into(),
        payload,
        capacity: 8,
        gap: false,
    };
    link.submit(Instant::now(), Ticket::from_u64(2), op);
    answered(2);
    // The worker hands the operation back after its batch's answers: the next submissions
    // drop it here.
    let deadline = Instant::now() + WAIT;
    let mut ticket = 3;
    while freed.lock().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        link.submit(Instant::now(), Ticket::from_u64(ticket), load());
        ticket += 1;
    }
    let here = std::thread::current();
    assert_eq!(
        *freed.lock().unwrap(),
        Some(format!("{:?} {:?}", here.id(), here.name())),
        "freed on the submitting thread"
    );
}

#[test]
fn answered_operations_are_dropped_on_the_submitting_thread_on_both_runtimes() {
    let redis = require_service!(Redis::start());
    on_tokio_backend(
        &redis,
        "spent",
        answered_operations_are_dropped_on_the_submitting_thread,
    );
    on_smol_backend(
        &redis,
        "spent",
        answered_operations_are_dropped_on_the_submitting_thread,
    );
}

#[test]
fn a_bad_redis_url_is_refused() {
    assert!(mcp_tokio::redis_backend("not a url", Default::default()).is_err());
    assert!(mcp_smol::redis_backend("unix:///tmp/redis.sock", Default::default()).is_err());
    assert!(mcp_smol::redis_backend("redis://127.0.0.1:6379/0", Default::default()).is_ok());
}

// ---------------------------------------------------------------------------------------
// End to end: three servers per runtime, one Redis.
// ---------------------------------------------------------------------------------------

use std::net::SocketAddr;

use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use mcp_proto::server::{ClusterConfig, ServerConfig};
use mcp_tests::runtime::{Runtime, Serving};
use serde_json::{Value, json};

async fn bounded<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing within {WAIT:?}"))
}

/// One request on a fresh HTTP/1.1 connection to `addr`.
async fn send(
    addr: SocketAddr,
    method: Method,
    session: Option<&str>,
    body: Option<Value>,
) -> http::Response<Incoming> {
    send_with(addr, method, session, body, &[]).await
}

/// [`send`] with more headers.
async fn send_with(
    addr: SocketAddr,
    method: Method,
    session: Option<&str>,
    body: Option<Value>,
    extra: &[(&str, &str)],
) -> http::Response<Incoming> {
    let accept = if method == Method::GET {
        "text/event-stream"
    } else {
        "application/json, text/event-stream"
    };
    let mut req = Request::builder()
        .method(method)
        .uri("/mcp")
        .header(header::HOST, addr.to_string())
        .header(header::ACCEPT, accept)
        .header(header::CONTENT_TYPE, "application/json")
        .header("MCP-Protocol-Version", "2025-06-18");
    if let Some(id) = session {
        req = req.header("Mcp-Session-Id", id);
    }
    for (name, value) in extra {
        req = req.header(*name, *value);
    }
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = req.body(Full::new(Bytes::from(body))).unwrap();
    mcp_tests::raw::exchange(addr, req).await
}

async fn text(resp: http::Response<Incoming>) -> String {
    let bytes = bounded("body", resp.into_body().collect())
        .await
        .unwrap()
        .to_bytes();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Reads a streaming body until it contains `needle` (bounded).
async fn read_until(body: &mut Incoming, needle: &str) -> String {
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !seen.contains(needle) {
        let frame = tokio::time::timeout_at(deadline, body.frame())
            .await
            .unwrap_or_else(|_| panic!("no {needle:?} within {WAIT:?}; got {seen:?}"));
        match frame {
            Some(Ok(f)) => {
                if let Some(d) = f.data_ref() {
                    seen.push_str(&String::from_utf8_lossy(d));
                }
            }
            other => panic!("the stream ended ({other:?}) before {needle:?}; got {seen:?}"),
        }
    }
    seen
}

fn call(id: u64, tool: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": {"text": "hi"}}})
}

/// Three servers of one cluster on `rt`, each with its own Redis backend (as three processes
/// would have).
async fn cluster_of_three(rt: Runtime, url: &str) -> Vec<Serving> {
    let mut out = Vec::new();
    for name in ["a", "b", "c"] {
        let config = RedisTestConfig::fast();
        let backend = match rt {
            Runtime::Tokio => mcp_tokio::redis_backend(url, config),
            Runtime::Smol => mcp_smol::redis_backend(url, config),
        }
        .unwrap();
        let cluster = ClusterConfig::new(format!("{name}{rt}")).unwrap();
        let config = ServerConfig::default().with_cluster(cluster);
        out.push(
            rt.serve_clustered(mcp_tests::everything::server(), config, backend)
                .await
                .unwrap(),
        );
    }
    out
}

struct RedisTestConfig;

impl RedisTestConfig {
    /// The defaults, with a shorter reconnect backoff (the restart test waits for it).
    fn fast() -> mcp_redis::RedisConfig {
        mcp_redis::RedisConfig::default().with_reconnect_backoff_max(Duration::from_millis(200))
    }
}

/// initialize on A, the notification to the GET stream.
async fn initialize(addr: SocketAddr) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "redis-e2e", "version": "1"}}});
    let resp = send(addr, Method::POST, None, Some(init)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let id = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let body = text(resp).await;
    assert!(body.contains("serverInfo"), "{body}");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = send(addr, Method::POST, Some(&id), Some(note)).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    id
}

async fn three_instances_share_sessions(rt: Runtime) {
    let redis = require_service!(Redis::start());
    let servers = cluster_of_three(rt, &redis.url()).await;
    let [a, b, c] = [0, 1, 2].map(|i| servers[i].local_addr());
    let id = initialize(a).await;
    // B serves the session it never saw.
    let resp = send(b, Method::POST, Some(&id), Some(call(2, "echo"))).await;
    assert_eq!(resp.status(), StatusCode::OK, "{rt}");
    let body = text(resp).await;
    assert!(body.contains("hi"), "{rt}: {body}");
    // C holds the GET stream; a handler on B publishes to it.
    let get = send(c, Method::GET, Some(&id), None).await;
    assert_eq!(get.status(), StatusCode::OK, "{rt}");
    let mut stream = get.into_body();
    let resp = send(
        b,
        Method::POST,
        Some(&id),
        Some(call(3, "test_notify_session")),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK, "{rt}");
    assert!(text(resp).await.contains("notification sent"));
    let seen = read_until(&mut stream, "notification on the GET stream").await;
    assert!(seen.contains("id: l-"), "{rt}: {seen}");
    // DELETE on one instance: every other one answers 404.
    let resp = send(b, Method::DELETE, Some(&id), None).await;
    assert_eq!(resp.status(), StatusCode::OK, "{rt}");
    for addr in [a, c, b] {
        let resp = send(addr, Method::POST, Some(&id), Some(call(4, "echo"))).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{rt}: {addr}");
    }
    for s in servers {
        s.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_tokio_instances_share_sessions_through_redis() {
    three_instances_share_sessions(Runtime::Tokio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_smol_instances_share_sessions_through_redis() {
    three_instances_share_sessions(Runtime::Smol).await;
}

async fn redis_killed_then_restarted(rt: Runtime) {
    let mut redis = require_service!(Redis::start_persistent());
    let servers = cluster_of_three(rt, &redis.url()).await;
    let [a, b] = [0, 1].map(|i| servers[i].local_addr());
    let id = initialize(a).await;
    redis.kill();
    // B must load the session: the store is gone, 503 with a JSON-RPC error.
    let resp = send(b, Method::POST, Some(&id), Some(call(2, "echo"))).await;
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE, "{rt}");
    let body: Value = serde_json::from_str(&text(resp).await).unwrap();
    assert!(body["error"]["message"].is_string(), "{rt}: {body}");
    // A new session cannot be stored either.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "redis-e2e", "version": "1"}}});
    let resp = send(a, Method::POST, None, Some(init)).await;
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE, "{rt}");
    // Back: the same servers serve the session again (after their re-dial).
    redis.restart().unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        let resp = send(b, Method::POST, Some(&id), Some(call(3, "echo"))).await;
        if resp.status() == StatusCode::OK {
            assert!(text(resp).await.contains("hi"));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{rt}: still {} after the restart",
            resp.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = initialize(servers[2].local_addr()).await;
    for s in servers {
        s.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_instances_answer_503_without_redis_and_recover_after_its_restart() {
    redis_killed_then_restarted(Runtime::Tokio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smol_instances_answer_503_without_redis_and_recover_after_its_restart() {
    redis_killed_then_restarted(Runtime::Smol).await;
}

/// A tools/call on B streams its first progress notification; the client's connection drops;
/// it resumes on C with `Last-Event-ID` and gets the rest, and the result, exactly once
/// (through Redis: the stream's events are committed there; C follows them).
async fn a_request_stream_resumes_on_another_instance(rt: Runtime) {
    let redis = require_service!(Redis::start());
    let servers = cluster_of_three(rt, &redis.url()).await;
    let [a, b, c] = [0, 1, 2].map(|i| servers[i].local_addr());
    let id = initialize(a).await;
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "test_tool_with_progress", "arguments": {},
            "_meta": {"progressToken": "p9"}}});
    let resp = send(b, Method::POST, Some(&id), Some(body)).await;
    assert_eq!(resp.status(), StatusCode::OK, "{rt}");
    let mut stream = resp.into_body();
    let seen = read_until(&mut stream, "notifications/progress").await;
    drop(stream); // the client's connection is gone after the first progress event
    let event = seen
        .split("\n\n")
        .find(|e| e.contains("notifications/progress"))
        .unwrap_or_else(|| panic!("{rt}: {seen:?}"));
    assert!(event.contains("\"progress\":0"), "{rt}: {event:?}");
    let last = event
        .lines()
        .find_map(|l| l.strip_prefix("id: "))
        .unwrap_or_else(|| panic!("{rt}: no id in {event:?}"))
        .trim()
        .to_owned();
    let resp = send_with(c, Method::GET, Some(&id), None, &[("Last-Event-ID", &last)]).await;
    assert_eq!(resp.status(), StatusCode::OK, "{rt}");
    let rest = text(resp).await;
    for (needle, times) in [
        ("\"progress\":0,", 0),
        ("\"progress\":50", 1),
        ("\"progress\":100", 1),
        ("Progress test completed", 1),
    ] {
        assert_eq!(
            rest.matches(needle).count(),
            times,
            "{rt}: {needle} in {rest:?}"
        );
    }
    assert!(rest.contains("\"id\":9"), "{rt}: {rest:?}");
    for s in servers {
        s.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokio_request_stream_resumes_on_another_instance_through_redis() {
    a_request_stream_resumes_on_another_instance(Runtime::Tokio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_smol_request_stream_resumes_on_another_instance_through_redis() {
    a_request_stream_resumes_on_another_instance(Runtime::Smol).await;
}

/// The ids a request stream's events carry (`id: <instance>.<stream>-<seq>`), up to the
/// `-`: the stream's name.
fn stream_names(sse: &str) -> Vec<String> {
    sse.lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .filter_map(|id| id.rsplit_once('-').map(|(name, _)| name.to_owned()))
        .collect()
}

/// An instance killed and started again under the same name mints none of the ids of its
/// previous life: the driver adds a random incarnation to the name, so a late `Last-Event-ID`
/// or response of the dead process can never reach the new one's streams or handlers.
async fn a_restarted_instance_mints_no_id_of_its_previous_life(rt: Runtime) {
    let redis = require_service!(Redis::start());
    let mut names = Vec::new();
    for life in 0..2 {
        let backend = match rt {
            Runtime::Tokio => mcp_tokio::redis_backend(&redis.url(), RedisTestConfig::fast()),
            Runtime::Smol => mcp_smol::redis_backend(&redis.url(), RedisTestConfig::fast()),
        }
        .unwrap();
        let cluster = ClusterConfig::new("a").unwrap();
        let server = rt
            .serve_clustered(
                mcp_tests::everything::server(),
                ServerConfig::default().with_cluster(cluster),
                backend,
            )
            .await
            .unwrap();
        let addr = server.local_addr();
        // The same steps in both lives: a fresh process counts from where the first did.
        let id = initialize(addr).await;
        let counted = json!({"jsonrpc": "2.0", "id": 10 + life, "method": "tools/call",
            "params": {"name": "ledger_count", "arguments": {"n": 2, "interval_ms": 0},
                "_meta": {"progressToken": "p"}}});
        let resp = send(addr, Method::POST, Some(&id), Some(counted)).await;
        assert_eq!(resp.status(), StatusCode::OK, "{rt}");
        let body = text(resp).await;
        assert!(body.contains("counted 2"), "{rt}: {body}");
        let life_names = stream_names(&body);
        assert!(!life_names.is_empty(), "{rt}: no event ids in {body}");
        names.push(life_names[0].clone());
        server.shutdown().await;
    }
    assert!(
        names.iter().all(|n| n.starts_with('a') && n.contains('.')),
        "{rt}: {names:?}"
    );
    assert_ne!(
        names[0], names[1],
        "{rt}: the second life reused the first's ids"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_tokio_instance_mints_no_id_of_its_previous_life() {
    a_restarted_instance_mints_no_id_of_its_previous_life(Runtime::Tokio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_smol_instance_mints_no_id_of_its_previous_life() {
    a_restarted_instance_mints_no_id_of_its_previous_life(Runtime::Smol).await;
}

/// A change of the server's on an instance that never saw a session (a tool added on B by
/// another session's call) reaches that session's GET stream on C exactly once — not also
/// through A, which holds a copy of the session from its `initialize`.
async fn a_list_change_reaches_legacy_sessions_on_other_instances_once(rt: Runtime) {
    let redis = require_service!(Redis::start());
    let servers = cluster_of_three(rt, &redis.url()).await;
    let [a, b, c] = [0, 1, 2].map(|i| servers[i].local_addr());
    let watched = initialize(a).await;
    let get = send(c, Method::GET, Some(&watched), None).await;
    assert_eq!(get.status(), StatusCode::OK, "{rt}");
    let mut stream = get.into_body();
    // C follows the session's log once its GET is open; give the follow a moment.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let other = initialize(b).await;
    let resp = send(
        b,
        Method::POST,
        Some(&other),
        Some(call(2, "test_trigger_tool_change")),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK, "{rt}");
    assert!(text(resp).await.contains("added"), "{rt}");
    let mut seen = read_until(&mut stream, "notifications/tools/list_changed").await;
    // A fence through A: everything before it has been written when it arrives.
    let resp = send(
        a,
        Method::POST,
        Some(&watched),
        Some(call(3, "test_notify_session")),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK, "{rt}");
    seen.push_str(&read_until(&mut stream, "notification on the GET stream").await);
    assert_eq!(
        seen.matches("notifications/tools/list_changed").count(),
        1,
        "{rt}: {seen}"
    );
    for s in servers {
        s.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_change_reaches_legacy_sessions_across_tokio_instances_once() {
    a_list_change_reaches_legacy_sessions_on_other_instances_once(Runtime::Tokio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_change_reaches_legacy_sessions_across_smol_instances_once() {
    a_list_change_reaches_legacy_sessions_on_other_instances_once(Runtime::Smol).await;
}

/// What a [`Gated`] connection lets through: while `held`, reads wait (Redis's replies stay
/// in the socket); while `down`, writes fail and dials are refused (Redis unreachable);
/// every byte written is kept.
#[derive(Default)]
struct Gate {
    held: bool,
    down: bool,
    waker: Option<std::task::Waker>,
    written: Vec<u8>,
}

/// A TCP connection to Redis whose replies the test can hold back.
struct Gated {
    tcp: tokio::net::TcpStream,
    gate: std::sync::Arc<std::sync::Mutex<Gate>>,
}

impl tokio::io::AsyncRead for Gated {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        {
            let mut gate = this.gate.lock().unwrap();
            if gate.held {
                gate.waker = Some(cx.waker().clone());
                return std::task::Poll::Pending;
            }
        }
        std::pin::Pin::new(&mut this.tcp).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Gated {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if this.gate.lock().unwrap().down {
            let e = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
            return std::task::Poll::Ready(Err(e));
        }
        let out = std::pin::Pin::new(&mut this.tcp).poll_write(cx, buf);
        if let std::task::Poll::Ready(Ok(n)) = out {
            this.gate
                .lock()
                .unwrap()
                .written
                .extend_from_slice(&buf[..n]);
        }
        out
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

/// A Redis backend (on tokio, with `config`) whose connections are [`Gated`] by `gate`.
fn gated_backend(
    url: &str,
    config: mcp_redis::RedisConfig,
    gate: &std::sync::Arc<std::sync::Mutex<Gate>>,
) -> std::sync::Arc<dyn ClusterBackend> {
    let gate = gate.clone();
    mcp_redis::backend(mcp_tokio::Tokio, url, config, move |host, port| {
        let gate = gate.clone();
        async move {
            if gate.lock().unwrap().down {
                return Err(std::io::ErrorKind::ConnectionRefused.into());
            }
            let tcp = tokio::net::TcpStream::connect((&*host, port)).await?;
            tcp.set_nodelay(true)?;
            Ok(Box::new(Gated { tcp, gate }) as Box<dyn mcp_redis::RedisIo>)
        }
    })
    .unwrap()
}

/// A one-worker tokio runtime and a [`gated_backend`] on it (prefix `prefix`, a command
/// timeout longer than any hold here: a held answer is never an attempt timing out).
fn gated_runtime(
    url: &str,
    prefix: &str,
) -> (
    tokio::runtime::Runtime,
    std::sync::Arc<std::sync::Mutex<Gate>>,
    std::sync::Arc<dyn ClusterBackend>,
) {
    let rt = mcp_tests::runtime::one_worker_tokio();
    let gate = std::sync::Arc::new(std::sync::Mutex::new(Gate::default()));
    let backend = {
        let _guard = rt.enter();
        let config = redis_config(prefix).with_command_timeout(Duration::from_secs(30));
        gated_backend(url, config, &gate)
    };
    (rt, gate, backend)
}

/// Creates `session` on `link` (ticket `ticket`), answered.
fn create_on(
    link: &mut Box<dyn StoreLink>,
    rx: &mpsc::Receiver<ClusterDelivery>,
    ticket: u64,
    session: &str,
) {
    let create = StoreOp::Create {
        record: record(session, None),
        max_sessions: 100,
        ttl: Some(Duration::from_secs(60)),
    };
    link.submit(Instant::now(), Ticket::from_u64(ticket), create);
    assert_eq!(reply(rx), (Ticket::from_u64(ticket), StoreReply::Created));
}

/// `session`'s listen log from its start: a follow (ticket `ticket`) on `link`, its first
/// answer's events.
fn listen_log(
    link: &mut Box<dyn StoreLink>,
    rx: &mpsc::Receiver<ClusterDelivery>,
    ticket: u64,
    session: &str,
) -> Vec<mcp_proto::server::LogEvent> {
    let follow = StoreOp::Follow {
        session: session.into(),
        from: FollowFrom::After(0),
    };
    link.submit(Instant::now(), Ticket::from_u64(ticket), follow);
    let (t, answer) = reply(rx);
    assert_eq!(t, Ticket::from_u64(ticket));
    let StoreReply::Events { events, .. } = answer else {
        panic!("events: {answer:?}")
    };
    events
}

/// The next reply `inbox` receives within [`WAIT`].
fn reply(inbox: &mpsc::Receiver<ClusterDelivery>) -> (Ticket, StoreReply) {
    loop {
        match inbox.recv_timeout(WAIT).expect("a reply within the bound") {
            ClusterDelivery::Reply(t, r) => return (t, r),
            _ => continue,
        }
    }
}

/// The Redis link sends the operations of different sessions without waiting for each
/// other's answers (pipelined on its one connection), and one session's next operations only
/// after the answers to its previous ones, in submission order. Held replies show it: while
/// Redis's answers are held back, the link has written the first operation of every session
/// and none that a session submitted after its first.
#[test]
fn the_redis_link_pipelines_sessions_and_keeps_each_sessions_order() {
    let redis = require_service!(Redis::start());
    let (rt, gate, backend) = gated_runtime(&redis.url(), "pipe");
    let _guard = rt.enter();
    let (tx, rx) = mpsc::channel();
    let mut link = backend.connect("a", inbox(tx));
    let now = Instant::now();
    for (i, session) in ["warm", "x", "y", "z"].into_iter().enumerate() {
        create_on(&mut link, &rx, 100 + i as u64, session);
    }
    // Connected, subscribed, the publish script loaded: the held phase sends only EVALSHAs.
    link.submit(now, Ticket::from_u64(1), publish("warm", 1, 8));
    assert_eq!(
        reply(&rx),
        (Ticket::from_u64(1), StoreReply::Published { seq: 1 })
    );
    {
        let mut g = gate.lock().unwrap();
        g.held = true;
        g.written.clear();
    }
    let submit = |link: &mut Box<dyn StoreLink>, i: u64, session: &str, n: u64| {
        link.submit(now, Ticket::from_u64(i), publish(session, n, 8));
    };
    let at = |n: u64| {
        let needle = format!("{{\"m\":{n}}}");
        let g = gate.lock().unwrap();
        g.written
            .windows(needle.len())
            .position(|w| w == needle.as_bytes())
    };
    // One operation each on x, y and z: all three are sent while no answer has come.
    submit(&mut link, 2, "x", 7101);
    submit(&mut link, 3, "y", 7201);
    submit(&mut link, 4, "z", 7301);
    let deadline = Instant::now() + WAIT;
    while [7101, 7201, 7301].iter().any(|n| at(*n).is_none()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        [7101, 7201, 7301].iter().all(|n| at(*n).is_some()),
        "with replies held, the first operation of every session is sent (pipelined)"
    );
    // Two more on x while its first is unanswered: they wait for that answer.
    submit(&mut link, 5, "x", 7102);
    submit(&mut link, 6, "x", 7103);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        at(7102).is_none() && at(7103).is_none(),
        "x's later operations wait for the answer to its first"
    );
    {
        let mut g = gate.lock().unwrap();
        g.held = false;
        if let Some(w) = g.waker.take() {
            w.wake();
        }
    }
    let mut got: Vec<(Ticket, StoreReply)> = (0..5).map(|_| reply(&rx)).collect();
    got.sort_by_key(|(t, _)| *t);
    let published = |seq| StoreReply::Published { seq };
    assert_eq!(
        got,
        [
            (Ticket::from_u64(2), published(1)),
            (Ticket::from_u64(3), published(1)),
            (Ticket::from_u64(4), published(1)),
            (Ticket::from_u64(5), published(2)),
            (Ticket::from_u64(6), published(3)),
        ],
        "x's operations applied in submission order"
    );
    assert!(at(7102) < at(7103), "and sent in it");
    drop(link);
}

/// Appends (a publish, a commit of request-stream events) whose attempts fail while Redis is
/// unreachable are held, not answered `Failed`: once Redis is back (within `append_hold`)
/// they are applied in submission order, each once; a publish still failing past the hold
/// is answered `Failed` (the router then marks the loss in the log).
#[test]
fn appends_failing_while_redis_is_away_are_held_then_applied_in_order() {
    let redis = require_service!(Redis::start());
    let rt = mcp_tests::runtime::one_worker_tokio();
    let _guard = rt.enter();
    let gate = std::sync::Arc::new(std::sync::Mutex::new(Gate::default()));
    // Attempts over in ≈ 150 ms (three, 50 and 100 ms apart); dials again every ≤ 100 ms.
    let config = redis_config("hold")
        .with_command_timeout(Duration::from_millis(200))
        .with_reconnect_backoff_max(Duration::from_millis(100))
        .with_append_hold(Duration::from_secs(3));
    let backend = gated_backend(&redis.url(), config, &gate);
    let (tx, rx) = mpsc::channel();
    let mut link = backend.connect("a", inbox(tx));
    create_on(&mut link, &rx, 1, "x");
    let now = Instant::now();
    gate.lock().unwrap().down = true;
    let events = [(1, Some(RequestId::Number(1)))];
    let commit = commit("x", "a.1", Some(&[RequestId::Number(1)]), &events, None);
    link.submit(now, Ticket::from_u64(2), commit);
    link.submit(now, Ticket::from_u64(3), publish("x", 2, 8));
    link.submit(now, Ticket::from_u64(4), publish("x", 3, 8));
    std::thread::sleep(Duration::from_millis(800));
    let early: Vec<_> = rx
        .try_iter()
        .filter(|d| matches!(d, ClusterDelivery::Reply(..)))
        .collect();
    assert!(early.is_empty(), "held, not answered: {early:?}");
    gate.lock().unwrap().down = false;
    assert_eq!(reply(&rx), (Ticket::from_u64(2), StoreReply::Done));
    assert_eq!(
        reply(&rx),
        (Ticket::from_u64(3), StoreReply::Published { seq: 1 })
    );
    assert_eq!(
        reply(&rx),
        (Ticket::from_u64(4), StoreReply::Published { seq: 2 })
    );
    // Past the hold: `Failed`.
    gate.lock().unwrap().down = true;
    let sent = Instant::now();
    link.submit(sent, Ticket::from_u64(5), publish("x", 4, 8));
    let (t, r) = reply(&rx);
    assert_eq!(t, Ticket::from_u64(5));
    assert!(matches!(r, StoreReply::Failed(_)), "{r:?}");
    assert!(sent.elapsed() >= Duration::from_secs(3), "after the hold");
    gate.lock().unwrap().down = false;
    let events = listen_log(&mut link, &rx, 6, "x");
    let payloads: Vec<_> = events.iter().map(|e| e.payload.clone()).collect();
    assert_eq!(
        payloads,
        [&b"{\"m\":2}"[..], &b"{\"m\":3}"[..]],
        "each once, in order"
    );
    drop(link);
}

/// A follow that starts in flight is registered when its first read's answer comes back; a
/// wake-up of its session in between (an event published after that read) is not lost: the
/// follow reads again once registered. Held replies make the window: the second follow of a
/// session (its channel already subscribed) sends its read, Redis runs it, the answer is held;
/// another instance publishes; the wake-up comes in right behind the held answer.
#[test]
fn an_event_published_while_a_follow_starts_reaches_it() {
    use std::sync::{Arc, Mutex};
    let redis = require_service!(Redis::start());
    let rt = mcp_tests::runtime::one_worker_tokio();
    let gate = Arc::new(Mutex::new(Gate::default()));
    let config = || redis_config("window").with_command_timeout(Duration::from_secs(30));
    let (backend, publisher) = {
        let _guard = rt.enter();
        let gated = gated_backend(&redis.url(), config(), &gate);
        (
            gated,
            mcp_tokio::redis_backend(&redis.url(), config()).unwrap(),
        )
    };
    let _guard = rt.enter();
    let (tx, rx) = mpsc::channel();
    let mut link = backend.connect("a", inbox(tx));
    let (ptx, prx) = mpsc::channel();
    let mut other = publisher.connect("b", inbox(ptx));
    let now = Instant::now();
    let create = StoreOp::Create {
        record: record("x", None),
        max_sessions: 100,
        ttl: Some(Duration::from_secs(60)),
    };
    link.submit(now, Ticket::from_u64(1), create);
    assert_eq!(reply(&rx), (Ticket::from_u64(1), StoreReply::Created));
    let follow = |after| StoreOp::Follow {
        session: "x".into(),
        from: FollowFrom::After(after),
    };
    let no_events = |t| {
        (
            Ticket::from_u64(t),
            StoreReply::Events {
                events: vec![],
                gap: false,
                after: 0,
            },
        )
    };
    // The first follow subscribes x's wake-up channel.
    link.submit(now, Ticket::from_u64(2), follow(0));
    assert_eq!(reply(&rx), no_events(2));
    let reads = || {
        let g = gate.lock().unwrap();
        g.written.windows(6).filter(|w| w == b"XRANGE").count()
    };
    let before = reads();
    gate.lock().unwrap().held = true;
    link.submit(now, Ticket::from_u64(3), follow(0));
    let deadline = Instant::now() + WAIT;
    while reads() == before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(reads() > before, "the second follow's read is sent");
    // Redis ran that read (one connection: in order) before this publish.
    std::thread::sleep(Duration::from_millis(100));
    other.submit(now, Ticket::from_u64(10), publish("x", 1, 8));
    let published = loop {
        match prx.recv_timeout(WAIT).expect("the publish is answered") {
            ClusterDelivery::Reply(_, r) => break r,
            _ => continue,
        }
    };
    assert_eq!(published, StoreReply::Published { seq: 1 });
    std::thread::sleep(Duration::from_millis(100));
    {
        let mut g = gate.lock().unwrap();
        g.held = false;
        if let Some(w) = g.waker.take() {
            w.wake();
        }
    }
    // Both follows get the event: the first on the wake-up, the second although the wake-up
    // came before it was registered.
    let deadline = Instant::now() + WAIT;
    let mut got = std::collections::BTreeSet::new();
    while got.len() < 2 && Instant::now() < deadline {
        if let Ok(ClusterDelivery::Reply(t, StoreReply::Events { events, .. })) =
            rx.recv_timeout(Duration::from_millis(50))
            && events.iter().any(|e| e.seq == 1)
        {
            got.insert(t);
        }
    }
    assert_eq!(
        got,
        [Ticket::from_u64(2), Ticket::from_u64(3)].into(),
        "every follow gets the event published while the second one started"
    );
    drop((link, other));
}

/// A Publish is repeated when its answer is lost (the Redis link may have applied it): the
/// script recognises a repeat of a link's ticket and appends it once, while another link's
/// publish of the same ticket number, and the link's next ticket, are appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_repeated_by_its_link_is_appended_once() {
    let redis = require_service!(Redis::start());
    let backend = mcp_tokio::redis_backend(&redis.url(), redis_config("repeat")).unwrap();
    let (tx, rx) = mpsc::channel();
    let mut link = backend.connect("a", inbox(tx));
    let (otx, orx) = mpsc::channel();
    let mut other = backend.connect("b", inbox(otx));
    let now = Instant::now();
    let create = StoreOp::Create {
        record: record("x", None),
        max_sessions: 100,
        ttl: Some(Duration::from_secs(60)),
    };
    link.submit(now, Ticket::from_u64(1), create);
    assert_eq!(reply(&rx), (Ticket::from_u64(1), StoreReply::Created));
    let published = |rx: &mpsc::Receiver<ClusterDelivery>, link: &mut Box<dyn StoreLink>, t| {
        link.submit(now, Ticket::from_u64(t), publish("x", t, 8));
        reply(rx)
    };
    let seq = |s| StoreReply::Published { seq: s };
    assert_eq!(published(&rx, &mut link, 5), (Ticket::from_u64(5), seq(1)));
    // The same ticket again (a retry after a lost answer): not appended, the last seq.
    assert_eq!(published(&rx, &mut link, 5), (Ticket::from_u64(5), seq(1)));
    // Another link's ticket 5, and this link's ticket 6: appended.
    assert_eq!(
        published(&orx, &mut other, 5),
        (Ticket::from_u64(5), seq(2))
    );
    assert_eq!(published(&rx, &mut link, 6), (Ticket::from_u64(6), seq(3)));
    let events = listen_log(&mut link, &rx, 7, "x");
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2, 3], "each publish once");
    drop((link, other));
}

/// The beat renews the link's liveness key without the worker waiting for the answer: while
/// Redis's answers are held back past a beat (the renewal unanswered), an operation
/// submitted then is still sent. (A worker that waited for the renewal inline sent nothing
/// until its answer came or the command timed out: measured under load, a 2 s stall.)
#[test]
fn the_link_sends_operations_while_its_liveness_renewal_is_unanswered() {
    let redis = require_service!(Redis::start());
    // A beat every 200 ms (a third of `redis_config`'s TTL).
    let (rt, gate, backend) = gated_runtime(&redis.url(), "beat");
    let _guard = rt.enter();
    let (tx, rx) = mpsc::channel();
    let mut link = backend.connect("a", inbox(tx));
    let now = Instant::now();
    create_on(&mut link, &rx, 1, "x");
    link.submit(now, Ticket::from_u64(2), publish("x", 1, 8));
    assert_eq!(
        reply(&rx),
        (Ticket::from_u64(2), StoreReply::Published { seq: 1 })
    );
    {
        let mut g = gate.lock().unwrap();
        g.held = true;
        g.written.clear();
    }
    let renewals = || {
        let g = gate.lock().unwrap();
        g.written.windows(8).filter(|w| w == b"beat:ins").count()
    };
    let deadline = Instant::now() + WAIT;
    while renewals() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        renewals() > 0,
        "a beat renewed the liveness key, unanswered"
    );
    link.submit(now, Ticket::from_u64(3), publish("x", 7501, 8));
    let sent = || {
        let g = gate.lock().unwrap();
        g.written.windows(10).any(|w| w == b"{\"m\":7501}")
    };
    let deadline = Instant::now() + WAIT;
    while !sent() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        sent(),
        "an operation is sent while the renewal waits for its answer"
    );
    {
        let mut g = gate.lock().unwrap();
        g.held = false;
        if let Some(w) = g.waker.take() {
            w.wake();
        }
    }
    assert_eq!(
        reply(&rx),
        (Ticket::from_u64(3), StoreReply::Published { seq: 2 })
    );
    drop(link);
}

/// Redis that lost the store's scripts (`SCRIPT FLUSH`, or a server that took over) answers
/// `NOSCRIPT`, and nothing ran: the link loads the scripts again and the operation is
/// answered, even a Create, which is never sent twice once it may have run.
fn the_link_loads_the_scripts_again_after_a_script_flush(
    backend: &dyn ClusterBackend,
    redis: &Redis,
) {
    let (tx, rx) = mpsc::channel();
    let mut link = backend.connect("a", inbox(tx));
    create_on(&mut link, &rx, 1, "before");
    let mut admin = redis.connect().unwrap();
    admin.command(&["SCRIPT", "FLUSH"]).unwrap();
    create_on(&mut link, &rx, 2, "after");
    link.submit(Instant::now(), Ticket::from_u64(3), publish("after", 1, 8));
    assert_eq!(
        reply(&rx),
        (Ticket::from_u64(3), StoreReply::Published { seq: 1 })
    );
}

#[test]
fn a_tokio_link_loads_the_scripts_again_after_a_script_flush() {
    let redis = require_service!(Redis::start());
    on_tokio_backend(
        &redis,
        "flush",
        the_link_loads_the_scripts_again_after_a_script_flush,
    );
}

#[test]
fn a_smol_link_loads_the_scripts_again_after_a_script_flush() {
    let redis = require_service!(Redis::start());
    on_smol_backend(
        &redis,
        "flush",
        the_link_loads_the_scripts_again_after_a_script_flush,
    );
}
