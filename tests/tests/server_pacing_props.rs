//! Property test of the server under cuts at any byte, with resumption, on the virtual clock:
//! a session's GET stream and a long tool call's request stream get numbered messages while a
//! client reads some of what it was given, is cut at any byte (what it had not read is lost
//! with the connection, and a partial event with it), resumes from the last complete event it
//! holds (or with a plain GET when it holds none yet), and sometimes simply waits. At the end
//! the client reads everything. Whatever the sequence, with send windows of any size:
//!
//! every message arrives exactly once, in order, on each stream. (The client reads each new
//! connection's first event at once, as a client does with the priming event, so it always
//! holds an id to resume from; the slow-reader rule is set out of reach, so cuts come only
//! from the model; the router fuzz body checks the window itself.)

use std::time::Duration;

use http::StatusCode;
use mcp_proto::server::{
    ExchangeId, OverflowPolicy, ResponseMode, ServerConfig, ServerEvent, Target,
};
use mcp_tests::server_harness::{Harness, Req};
use proptest::prelude::*;
use serde_json::Value;

const V: &str = "2025-11-25";

#[derive(Debug, Clone)]
enum Op {
    /// A numbered message on the GET stream (not tied to a request).
    Notify,
    /// A numbered progress on the tool call's stream.
    Progress,
    /// The client of stream 0 (GET) or 1 (the call) reads `n` bytes of what it was given.
    Read(usize, usize),
    /// The connection of stream `s` is cut (the client resumes later).
    Cut(usize),
    /// The client of stream `s`, if cut, resumes from the last complete event it holds.
    Resume(usize),
    /// Time passes (seconds), below the slow-reader timeout.
    Wait(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Notify),
        3 => Just(Op::Progress),
        4 => (0..2usize, 1..4000usize).prop_map(|(s, n)| Op::Read(s, n)),
        1 => (0..2usize).prop_map(Op::Cut),
        1 => (0..2usize).prop_map(Op::Resume),
        1 => (0..20u64).prop_map(Op::Wait),
    ]
}

/// What the client holds of one logical stream: the bytes of its current connection it has
/// read, and the numbers and last event id of the connections before.
#[derive(Debug, Default)]
struct Held {
    conn: Option<ExchangeId>,
    read: usize,
    numbers: Vec<u64>,
    last_id: Option<String>,
}

/// The complete events in `bytes`: (id, data) pairs, and where the last one ended.
fn complete_events(bytes: &[u8]) -> Vec<(Option<String>, String)> {
    let text = String::from_utf8_lossy(bytes);
    let mut out = Vec::new();
    let mut rest: &str = &text;
    while let Some(end) = rest.find("\n\n") {
        let block = &rest[..end];
        rest = &rest[end + 2..];
        let mut id = None;
        let mut data = Vec::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id: ") {
                id = Some(v.to_owned());
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push(v);
            } else if line == "data:" {
                data.push("");
            }
        }
        out.push((id, data.join("\n")));
    }
    out
}

fn numbers_in(events: &[(Option<String>, String)]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|(_, d)| serde_json::from_str::<Value>(d).ok())
        .filter_map(|m| {
            m["params"]["n"]
                .as_u64()
                .or_else(|| m["params"]["progress"].as_u64())
        })
        .collect()
}

/// A new connection for `held`: the client reads its first event at once.
fn open(h: &mut Harness, held: &mut Held, conn: ExchangeId) {
    held.conn = Some(conn);
    held.read = 0;
    let body = &h.response(conn).body;
    if let Some(end) = String::from_utf8_lossy(body).find("\n\n") {
        held.read = end + 2;
        h.read(conn, end + 2);
    }
}

/// The client resumes `held` from the last complete event it holds.
fn resume(h: &mut Harness, session_id: &str, held: &mut Held) {
    let last = held.last_id.clone().expect("the priming id, at least");
    let r = h.send(Req::get(session_id).header("last-event-id", &last));
    assert_eq!(h.response(r).status(), StatusCode::OK);
    held.conn = Some(r);
    held.read = 0;
}

/// The client lets go of what it read on `h`'s current connection of `held`.
fn settle(h: &Harness, held: &mut Held) {
    if let Some(conn) = held.conn.take() {
        let body = &h.response(conn).body;
        let read = held.read.min(body.len());
        let events = complete_events(&body[..read]);
        held.numbers.extend(numbers_in(&events));
        if let Some(id) = events.iter().rev().find_map(|(id, _)| id.clone()) {
            held.last_id = Some(id);
        }
    }
    held.read = 0;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn every_message_arrives_once_in_order_whatever_the_cuts(
        window in 64usize..4096,
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        let mut h = Harness::new(
            ServerConfig::default()
                .with_response_mode(ResponseMode::Sse)
                .with_send_window(window)
                // A small session queue: messages for a GET stream that is away must not
                // depend on it (they are stored as the stream's events).
                .with_listen_queue(4, OverflowPolicy::DropOldestNotification)
                // The detached call stays alive however long the model waits.
                .with_resume_grace(Duration::from_secs(1 << 30))
                .with_slow_reader(Duration::from_secs(1 << 30), usize::MAX)
                .with_heartbeat_interval(None),
        );
        let (id, session) = h.initialize(V);
        h.auto_read = false;
        let mut held = [Held::default(), Held::default()];
        let get = h.send(Req::get(&id));
        open(&mut h, &mut held[0], get);
        let (call, handle) = h.call(&id, V, 2, "tools/call");
        open(&mut h, &mut held[1], call);
        let (mut notified, mut progressed) = (0u64, 0u64);
        for op in ops {
            match op {
                Op::Notify => {
                    notified += 1;
                    h.notify(Target::Session(session), "n", &format!(r#"{{"n":{notified}}}"#));
                }
                Op::Progress => {
                    progressed += 1;
                    h.notify(
                        Target::Request(handle),
                        "notifications/progress",
                        &format!(r#"{{"progressToken":1,"progress":{progressed}}}"#),
                    );
                }
                Op::Read(s, n) => {
                    if let Some(conn) = held[s].conn {
                        let given = h.response(conn).body.len();
                        let n = n.min(given - held[s].read);
                        held[s].read += n;
                        h.read(conn, n);
                    }
                }
                Op::Cut(s) => {
                    if let Some(conn) = held[s].conn {
                        settle(&h, &mut held[s]);
                        h.router.handle_disconnect(h.now, conn);
                        h.pump();
                    }
                }
                Op::Resume(s) => {
                    if held[s].conn.is_none() {
                        resume(&mut h, &id, &mut held[s]);
                    }
                }
                Op::Wait(secs) => h.advance(Duration::from_secs(secs)),
            }
        }
        // The call ends; the client resumes what is cut and reads everything that is left.
        h.reply(handle, "{}");
        for one in &mut held {
            if one.conn.is_none() {
                resume(&mut h, &id, one);
            }
            for _ in 0..10_000 {
                let Some(conn) = one.conn else { break };
                let given = h.response(conn).body.len();
                if one.read == given {
                    break;
                }
                one.read = given;
                h.read_all(conn);
            }
            settle(&h, one);
        }
        prop_assert_eq!(&held[0].numbers, &(1..=notified).collect::<Vec<_>>());
        prop_assert_eq!(&held[1].numbers, &(1..=progressed).collect::<Vec<_>>());
        let cut_as_slow = h
            .events
            .iter()
            .any(|e| matches!(e, ServerEvent::SlowReader { .. }));
        prop_assert!(!cut_as_slow, "a slow-reader cut out of the rule's reach");
    }
}
