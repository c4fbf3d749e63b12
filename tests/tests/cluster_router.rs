//! The cluster seam, sans-IO: three routers share one in-memory store on a virtual clock,
//! and each request may land on any of them (a load balancer that is not sticky).

use std::time::Duration;

use http::StatusCode;
use mcp_proto::jsonrpc::{Notification, Outcome};
use mcp_proto::server::{ServerConfig, ServerOutput, Target};
use mcp_tests::cluster_harness::Cluster;
use mcp_tests::server_harness::{Collected, Req, init_body, init_result};
use serde_json::{Value, json};

const V: &str = "2025-11-25";

fn cluster(n: usize) -> Cluster {
    Cluster::new(n, |_| ServerConfig::default())
}

/// `initialize` on node `on`; returns the session id.
fn initialize(c: &mut Cluster, on: usize) -> String {
    let s = c.node(on).send(Req::post(&init_body(1, V)));
    c.settle();
    let (h, _, req) = c.node(on).expect_request();
    assert_eq!(&*req.method, "initialize");
    c.node(on).reply(h, &init_result(V));
    c.settle();
    let r = c.node(on).response(s).clone();
    assert_eq!(r.status(), StatusCode::OK, "{:?}", c.node(on).log);
    r.header("mcp-session-id").expect("session id").to_owned()
}

fn call(id: i64, method: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#)
}

/// POSTs request `id` (`method`) in session `sid` to node `on`; returns its stream and what
/// the app got (handle, session, request).
fn post_call(
    c: &mut Cluster,
    on: usize,
    sid: &str,
    id: i64,
    method: &str,
) -> (
    mcp_proto::server::ExchangeId,
    (
        mcp_proto::server::RequestHandle,
        Option<mcp_proto::server::SessionHandle>,
        mcp_proto::jsonrpc::Request,
    ),
) {
    let s = c
        .node(on)
        .send(Req::post(&call(id, method)).session(sid).version(V));
    c.settle();
    (s, c.node(on).expect_request())
}

fn other_outputs(c: &mut Cluster, i: usize) -> Vec<ServerOutput> {
    c.node(i).take_other()
}

#[test]
fn a_session_made_on_one_instance_is_served_by_the_others_and_deleted_everywhere() {
    let mut c = cluster(3);
    let sid = initialize(&mut c, 0);
    // tools/call on B: the session is loaded from the store, the request runs there.
    let (s, (h, _, req)) = post_call(&mut c, 1, &sid, 2, "tools/list");
    assert_eq!(&*req.method, "tools/list");
    assert!(
        other_outputs(&mut c, 1)
            .iter()
            .any(|o| matches!(o, ServerOutput::SessionLoaded { .. })),
        "B adopted the session"
    );
    c.node(1).reply(h, r#"{"tools":[]}"#);
    c.settle();
    let r = c.node(1).response(s).clone();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.messages()[0]["id"], 2);
    // DELETE on C: 200 once the store removed it; A and B forget it at once.
    let d = c.node(2).send(Req::delete(&sid));
    c.settle();
    assert_eq!(c.node(2).response(d).status(), StatusCode::OK);
    for i in 0..3 {
        let s = c
            .node(i)
            .send(Req::post(&call(3, "ping")).session(&sid).version(V));
        c.settle();
        assert_eq!(
            c.node(i).response(s).status(),
            StatusCode::NOT_FOUND,
            "node {i} still served a deleted session"
        );
    }
}

#[test]
fn the_initialize_answer_waits_until_the_store_has_the_session() {
    let mut c = cluster(2);
    c.hold(0, true);
    let s = c.node(0).send(Req::post(&init_body(1, V)));
    c.settle();
    let (h, _, _) = c.node(0).expect_request();
    c.node(0).reply(h, &init_result(V));
    c.settle();
    assert!(
        c.node(0).response(s).status.is_none(),
        "answered before the record was stored"
    );
    c.hold(0, false);
    c.settle();
    let sid = c
        .node(0)
        .response(s)
        .header("mcp-session-id")
        .unwrap()
        .to_owned();
    let now = c.node(0).now;
    assert!(c.store.record(now, &sid).is_some());
}

#[test]
fn the_session_cap_is_global() {
    let mut c = Cluster::new(3, |_| ServerConfig::default().with_max_sessions(2));
    initialize(&mut c, 0);
    initialize(&mut c, 1);
    let s = c.node(2).send(Req::post(&init_body(1, V)));
    c.settle();
    let (h, _, _) = c.node(2).expect_request();
    c.node(2).reply(h, &init_result(V));
    c.settle();
    let r = c.node(2).response(s).clone();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.header("mcp-session-id").is_none());
    assert_eq!(r.json()["error"]["code"], -32000);
}

#[test]
fn a_message_from_a_handler_on_b_reaches_the_get_stream_on_c_and_resumes_anywhere() {
    let mut c = cluster(3);
    let sid = initialize(&mut c, 0);
    let get = c.node(2).send(Req::get(&sid).version(V));
    c.settle();
    assert_eq!(c.node(2).response(get).status(), StatusCode::OK);
    // A request on B whose handler sends two unrelated notifications.
    let (_, (h, session, _)) = post_call(&mut c, 1, &sid, 7, "tools/call");
    let session = session.unwrap();
    c.node(1).notify(
        Target::Session(session),
        "notifications/message",
        r#"{"n":1}"#,
    );
    c.node(1).notify(
        Target::Session(session),
        "notifications/message",
        r#"{"n":2}"#,
    );
    c.settle();
    c.node(1).reply(h, "{}");
    c.settle();
    let r = c.node(2).response(get).clone();
    assert_eq!(numbers(&r), [json!(1), json!(2)]);
    let ids = r.event_ids();
    assert_eq!(
        ids,
        ["l-0", "l-1", "l-2"],
        "priming, then the log's numbers"
    );
    // C dies; a third message is published; the client resumes on A after l-1.
    c.kill(2);
    c.node(1).notify(
        Target::Session(session),
        "notifications/message",
        r#"{"n":3}"#,
    );
    c.settle();
    let resumed = c
        .node(0)
        .send(Req::get(&sid).version(V).header("last-event-id", "l-1"));
    c.settle();
    let r = c.node(0).response(resumed).clone();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        numbers(&r),
        [json!(2), json!(3)],
        "exactly what followed l-1, once"
    );
}

/// The `n` of each message of a GET stream's response (the tests' notifications number
/// themselves).
fn numbers(r: &Collected) -> Vec<Value> {
    r.sse_messages()
        .iter()
        .map(|m| m["params"]["n"].clone())
        .collect()
}

/// Two instances: a session made on 0, its GET stream open on 1, and a `tools/call` running
/// on 0 (whose handler sends the GET stream's messages). Returns the session id, the GET,
/// the call's handle and the session's.
fn listening_on_1(
    c: &mut Cluster,
) -> (
    String,
    mcp_proto::server::ExchangeId,
    mcp_proto::server::RequestHandle,
    mcp_proto::server::SessionHandle,
) {
    let sid = initialize(c, 0);
    let get = c.node(1).send(Req::get(&sid).version(V));
    c.settle();
    assert_eq!(c.node(1).response(get).status(), StatusCode::OK);
    let (_, (h, session, _)) = post_call(c, 0, &sid, 7, "tools/call");
    (sid, get, h, session.expect("a session"))
}

/// Node 0 sends the GET stream's message number `n` (not settled).
fn notify_n(c: &mut Cluster, session: mcp_proto::server::SessionHandle, n: i64) {
    c.node(0).notify(
        Target::Session(session),
        "notifications/message",
        &format!(r#"{{"n":{n}}}"#),
    );
}

/// A GET stream cut after events went out, resumed *on the same instance* with a
/// `Last-Event-ID` from before them: the client never got them, so they come again (the
/// instance's record of what its previous connection wrote does not hide them).
#[test]
fn a_get_resumed_on_the_same_instance_gets_what_its_cut_connection_wrote_after_the_id() {
    let mut c = cluster(2);
    let (sid, get, h, session) = listening_on_1(&mut c);
    for n in 1..=3 {
        notify_n(&mut c, session, n);
    }
    c.settle();
    let ids = c.node(1).response(get).event_ids();
    assert_eq!(ids, ["l-0", "l-1", "l-2", "l-3"]);
    // The client got l-1 only: its connection was cut while l-2 and l-3 were on the way.
    let now = c.node(1).now;
    c.node(1).router.handle_disconnect(now, get);
    c.settle();
    let resumed = c
        .node(1)
        .send(Req::get(&sid).version(V).header("last-event-id", "l-1"));
    c.settle();
    notify_n(&mut c, session, 4);
    c.node(0).reply(h, "{}");
    c.settle();
    let r = c.node(1).response(resumed).clone();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        numbers(&r),
        [json!(2), json!(3), json!(4)],
        "what followed l-1, once, then the rest"
    );
}

/// A GET stream's events, read as `l-<seq> n=<n>`, `l-0` (priming) or `lost after <id>`
/// (an `events-lost` event, which carries no id).
fn listen_events(r: &Collected) -> Vec<String> {
    r.frames()
        .into_iter()
        .filter(|f| !f.comment && f.data_present)
        .map(|f| {
            let v: Value = serde_json::from_str(&f.data).unwrap_or(Value::Null);
            match (&f.id, v["lastEventId"].as_str(), v["params"]["n"].as_i64()) {
                (None, Some(after), _) => format!("lost after {after}"),
                (Some(id), _, Some(n)) => format!("{id} n={n}"),
                (Some(id), _, None) => id.clone(),
                (None, None, _) => format!("? {}", f.data),
            }
        })
        .collect()
}

/// A message whose append to the listen log failed is lost, and the client is told where:
/// the instance that lost it appends the gap's marker alone at once, or, when that fails
/// too, the session's next message from it carries the gap; the GET stream (on another
/// instance) writes an `events-lost` event there, once per loss.
#[test]
fn a_message_lost_on_its_way_to_the_log_is_told_on_the_get_stream() {
    let mut c = cluster(2);
    let (sid, get, h, session) = listening_on_1(&mut c);
    let notify = |c: &mut Cluster, n: i64| {
        notify_n(c, session, n);
        c.settle();
    };
    notify(&mut c, 1);
    // n=2's publish fails; the store is back when node 0 hears of it: the marker goes in.
    c.hold(0, true);
    c.store.set_available(false);
    notify(&mut c, 2);
    c.store.set_available(true);
    c.hold(0, false);
    c.settle();
    // n=3's publish fails and so does its marker: n=4 carries the gap.
    c.store.set_available(false);
    notify(&mut c, 3);
    c.store.set_available(true);
    c.settle();
    notify(&mut c, 4);
    notify(&mut c, 5);
    c.node(0).reply(h, "{}");
    c.settle();
    let r = c.node(1).response(get).clone();
    assert_eq!(
        listen_events(&r),
        [
            "l-0",
            "l-1 n=1",
            "lost after l-1",
            "lost after l-2",
            "l-3 n=4",
            "l-4 n=5"
        ],
        "{}",
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(
        String::from_utf8_lossy(&r.body)
            .matches("event: events-lost\n")
            .count(),
        2
    );
    // A GET resumed from l-1 on the other instance reads the log again: both gaps, then
    // the rest.
    let resumed = c
        .node(0)
        .send(Req::get(&sid).version(V).header("last-event-id", "l-1"));
    c.settle();
    assert_eq!(
        listen_events(c.node(0).response(resumed)),
        [
            "l-1",
            "lost after l-1",
            "lost after l-2",
            "l-3 n=4",
            "l-4 n=5"
        ]
    );
}

#[test]
fn a_get_opened_elsewhere_ends_the_old_one() {
    let mut c = cluster(2);
    let sid = initialize(&mut c, 0);
    let first = c.node(0).send(Req::get(&sid).version(V));
    c.settle();
    let second = c.node(1).send(Req::get(&sid).version(V));
    c.settle();
    assert!(c.node(0).response(first).ended, "the old GET was ended");
    assert!(!c.node(1).response(second).ended);
}

#[test]
fn a_client_answer_posted_to_a_reaches_the_handler_waiting_on_b() {
    let mut c = cluster(3);
    let sid = initialize(&mut c, 0);
    let get = c.node(2).send(Req::get(&sid).version(V));
    c.settle();
    let (_, (_, session, _)) = post_call(&mut c, 1, &sid, 9, "tools/call");
    let oid = c
        .node(1)
        .request_client(Target::Session(session.unwrap()), "roots/list");
    c.settle();
    let msgs = c.node(2).response(get).sse_messages();
    let asked = msgs
        .iter()
        .find(|m| m["method"] == "roots/list")
        .expect("asked on C");
    let wire = asked["id"].clone();
    assert_eq!(wire, json!("n1.".to_owned() + &oid.as_u64().to_string()));
    let answer = json!({"jsonrpc":"2.0","id":wire,"result":{"roots":[]}}).to_string();
    let s = c.node(0).send(Req::post(&answer).session(&sid).version(V));
    c.settle();
    assert_eq!(c.node(0).response(s).status(), StatusCode::ACCEPTED);
    let got = other_outputs(&mut c, 1);
    assert!(
        got.iter()
            .any(|o| matches!(o, ServerOutput::ClientResponse { request, .. } if *request == oid)),
        "B got the answer: {got:?}"
    );
}

#[test]
fn a_cancellation_posted_to_a_stops_the_request_running_on_b() {
    let mut c = cluster(2);
    let sid = initialize(&mut c, 0);
    let (_, (h, _, _)) = post_call(&mut c, 1, &sid, 5, "tools/call");
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}"#;
    let s = c.node(0).send(Req::post(cancel).session(&sid).version(V));
    c.settle();
    assert_eq!(c.node(0).response(s).status(), StatusCode::ACCEPTED);
    assert!(
        other_outputs(&mut c, 1)
            .iter()
            .any(|o| matches!(o, ServerOutput::Cancelled { handle, .. } if *handle == h)),
        "B cancelled the handler"
    );
}

#[test]
fn an_unreachable_store_is_a_503_with_a_json_rpc_error_and_recovery_is_automatic() {
    let mut c = cluster(2);
    let sid = initialize(&mut c, 0);
    c.store.set_available(false);
    let s = c
        .node(1)
        .send(Req::post(&call(2, "ping")).session(&sid).version(V));
    c.settle();
    let r = c.node(1).response(s).clone();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.json()["error"]["code"], -32000);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("session store")
    );
    c.store.set_available(true);
    let (s, (h, _, _)) = post_call(&mut c, 1, &sid, 3, "ping");
    c.node(1).reply(h, "{}");
    c.settle();
    assert_eq!(c.node(1).response(s).status(), StatusCode::OK);
}

#[test]
fn a_store_that_never_answers_times_out_with_503() {
    let mut c = cluster(2);
    let sid = initialize(&mut c, 0);
    c.hold(1, true);
    let s = c
        .node(1)
        .send(Req::post(&call(2, "ping")).session(&sid).version(V));
    c.settle();
    assert!(c.node(1).response(s).status.is_none(), "parked");
    c.advance(Duration::from_secs(6));
    assert_eq!(
        c.node(1).response(s).status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    // The late answer is ignored.
    c.hold(1, false);
    c.settle();
    assert!(c.node(1).next_request().is_none());
}

#[test]
fn session_state_set_before_an_answer_is_stored_before_the_answer_leaves() {
    let mut c = cluster(2);
    let sid = initialize(&mut c, 0);
    let s = c.node(0).send(
        Req::post(&call(2, "logging/setLevel"))
            .session(&sid)
            .version(V),
    );
    c.settle();
    let (h, session, _) = c.node(0).expect_request();
    let now = c.node(0).now;
    c.hold(0, true);
    c.node(0).router.set_session_state(
        now,
        session.unwrap(),
        bytes::Bytes::from_static(b"{\"level\":\"debug\"}"),
    );
    c.node(0).reply(h, "{}");
    c.settle();
    assert!(c.node(0).response(s).status.is_none(), "held until saved");
    c.hold(0, false);
    c.settle();
    assert_eq!(c.node(0).response(s).status(), StatusCode::OK);
    // B loads the session with that state.
    let _ = c
        .node(1)
        .send(Req::post(&call(3, "ping")).session(&sid).version(V));
    c.settle();
    let loaded = other_outputs(&mut c, 1);
    let state = loaded.iter().find_map(|o| match o {
        ServerOutput::SessionLoaded { state, .. } => state.clone(),
        _ => None,
    });
    assert_eq!(state.as_deref(), Some(&b"{\"level\":\"debug\"}"[..]));
}

#[test]
fn idle_sessions_leave_the_instance_cache_and_expire_globally() {
    let mut c = Cluster::new(2, |_| {
        ServerConfig::default().with_session_idle_ttl(Some(Duration::from_secs(60)))
    });
    let sid = initialize(&mut c, 0);
    let (s, (h, _, _)) = post_call(&mut c, 1, &sid, 2, "ping");
    c.node(1).reply(h, "{}");
    c.settle();
    assert_eq!(c.node(1).response(s).status(), StatusCode::OK);
    // Activity on B keeps the session alive in the store past A's own view of it.
    c.advance(Duration::from_secs(40));
    let (s, (h, _, _)) = post_call(&mut c, 1, &sid, 3, "ping");
    c.node(1).reply(h, "{}");
    c.settle();
    c.advance(Duration::from_secs(40));
    assert_eq!(c.node(1).response(s).status(), StatusCode::OK);
    let now = c.node(0).now;
    assert!(
        c.store.record(now, &sid).is_some(),
        "touched by B's activity"
    );
    assert!(
        other_outputs(&mut c, 0)
            .iter()
            .any(|o| matches!(o, ServerOutput::SessionUnloaded { .. })),
        "A forgot its idle copy"
    );
    c.advance(Duration::from_secs(61));
    let now = c.node(0).now;
    assert!(c.store.record(now, &sid).is_none(), "expired in the store");
    let s = c
        .node(0)
        .send(Req::post(&call(4, "ping")).session(&sid).version(V));
    c.settle();
    assert_eq!(c.node(0).response(s).status(), StatusCode::NOT_FOUND);
}

#[test]
fn an_open_get_stream_keeps_its_session_alive_in_the_store() {
    let mut c = Cluster::new(2, |_| {
        ServerConfig::default()
            .with_session_idle_ttl(Some(Duration::from_secs(60)))
            .with_heartbeat_interval(None)
    });
    let sid = initialize(&mut c, 0);
    let _get = c.node(1).send(Req::get(&sid).version(V));
    c.settle();
    c.advance(Duration::from_secs(200));
    let now = c.node(0).now;
    assert!(
        c.store.record(now, &sid).is_some(),
        "renewed while B holds the GET"
    );
}

#[test]
fn a_parked_request_keeps_its_body_and_its_limits() {
    let mut c = Cluster::new(2, |_| ServerConfig::default().with_max_body_bytes(300));
    let sid = initialize(&mut c, 0);
    c.hold(1, true);
    let req = Req::post(&call(2, "ping")).session(&sid).version(V);
    let s = c.node(1).send_head(&req);
    let now = c.node(1).now;
    c.node(1).router.handle_body(now, s, &[b' '; 301]);
    c.node(1).pump();
    assert_eq!(
        c.node(1).response(s).status(),
        StatusCode::PAYLOAD_TOO_LARGE
    );
    // A body split in two chunks while parked is kept whole.
    let body = call(3, "ping");
    let s = c
        .node(1)
        .send_head(&Req::post(&body).session(&sid).version(V));
    let (a, b) = body.as_bytes().split_at(10);
    c.node(1).router.handle_body(now, s, a);
    c.node(1).router.handle_body(now, s, b);
    c.node(1).router.handle_body_end(now, s);
    c.hold(1, false);
    c.settle();
    let (h, _, req) = c.node(1).expect_request();
    assert_eq!(req.id, mcp_proto::jsonrpc::RequestId::Number(3));
    c.node(1).reply(h, "{}");
    c.settle();
    assert_eq!(c.node(1).response(s).status(), StatusCode::OK);
}

#[test]
fn a_state_change_on_a_reaches_a_copy_b_already_holds() {
    let mut c = cluster(2);
    let sid = initialize(&mut c, 0);
    let (_, (h, _, _)) = post_call(&mut c, 1, &sid, 2, "ping");
    c.node(1).reply(h, "{}");
    c.settle();
    other_outputs(&mut c, 1);
    let _ = c.node(0).send(
        Req::post(&call(3, "logging/setLevel"))
            .session(&sid)
            .version(V),
    );
    c.settle();
    let (h, session, _) = c.node(0).expect_request();
    let now = c.node(0).now;
    c.node(0).router.set_session_state(
        now,
        session.unwrap(),
        bytes::Bytes::from_static(b"{\"log\":\"error\"}"),
    );
    c.node(0).reply(h, "{}");
    c.settle();
    let state = other_outputs(&mut c, 1).into_iter().find_map(|o| match o {
        ServerOutput::SessionLoaded { state, .. } => state,
        _ => None,
    });
    assert_eq!(
        state.as_deref(),
        Some(&b"{\"log\":\"error\"}"[..]),
        "B refreshed its copy"
    );
}

/// A POST on node `on` whose handler sent one related notification (so its answer is an SSE
/// stream); returns the stream, the request handle and the router's session handle.
fn streaming_call(
    c: &mut Cluster,
    on: usize,
    sid: &str,
    id: i64,
) -> (
    mcp_proto::server::ExchangeId,
    mcp_proto::server::RequestHandle,
    mcp_proto::server::SessionHandle,
) {
    let s = c
        .node(on)
        .send(Req::post(&call(id, "tools/call")).session(sid).version(V));
    c.settle();
    let (h, session, _) = c.node(on).expect_request();
    c.node(on)
        .notify(Target::Request(h), "notifications/progress", r#"{"n":1}"#);
    c.settle();
    (s, h, session.unwrap())
}

fn ns(c: &mut Cluster, node: usize, s: mcp_proto::server::ExchangeId) -> Vec<Value> {
    c.node(node)
        .response(s)
        .sse_messages()
        .iter()
        .map(|m| {
            m.get("params")
                .and_then(|p| p.get("n"))
                .cloned()
                .unwrap_or(m["id"].clone())
        })
        .collect()
}

#[test]
fn request_stream_events_are_written_only_once_stored() {
    let mut c = cluster(2);
    let sid = initialize(&mut c, 0);
    c.hold(1, true);
    let s = c
        .node(1)
        .send(Req::post(&call(4, "tools/call")).session(&sid).version(V));
    c.hold(1, false);
    c.settle();
    let (h, _, _) = c.node(1).expect_request();
    c.hold(1, true);
    c.node(1)
        .notify(Target::Request(h), "notifications/progress", r#"{"n":1}"#);
    c.settle();
    let r = c.node(1).response(s).clone();
    assert_eq!(r.status(), StatusCode::OK, "the SSE head goes at once");
    assert!(
        r.event_ids().is_empty(),
        "no event before the store has it: {:?}",
        r.frames()
    );
    c.hold(1, false);
    c.settle();
    let ids = c.node(1).response(s).event_ids();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(
        ids[0].starts_with("n1.") && ids[0].ends_with("-0"),
        "{ids:?}"
    );
    assert!(ids[1].ends_with("-1"), "{ids:?}");
}

/// Handlers' messages written in one turn, without the outputs being polled in between:
/// for each handler, `n` progress notifications from `first`, then (`answer`) its result.
fn write_together(
    c: &mut Cluster,
    on: usize,
    handlers: &[mcp_proto::server::RequestHandle],
    first: i64,
    n: i64,
    answer: bool,
) {
    let node = c.node(on);
    let now = node.now;
    let raw = |s: String| serde_json::value::RawValue::from_string(s).unwrap();
    for &h in handlers {
        for i in first..first + n {
            let progress = Notification {
                method: "notifications/progress".into(),
                params: Some(raw(format!(r#"{{"n":{i}}}"#))),
            };
            node.router
                .notify(now, Target::Request(h), progress)
                .expect("sent");
        }
        if answer {
            let result = Outcome::Result(raw(r#"{"content":[]}"#.into()));
            node.router.respond(now, h, result).expect("answered");
        }
    }
    node.pump();
    c.settle();
}

#[test]
fn what_a_session_s_request_streams_write_in_one_turn_is_one_store_operation() {
    let mut c = cluster(3);
    let sid = initialize(&mut c, 0);
    let mut calls = Vec::new();
    for id in [5, 6] {
        let (s, (h, _, _)) = post_call(&mut c, 1, &sid, id, "tools/call");
        calls.push((s, h));
    }
    let handlers = [calls[0].1, calls[1].1];
    // Both streams' registrations, priming events and first two notifications: one
    // operation.
    let before = c.store.operations();
    write_together(&mut c, 1, &handlers, 1, 2, false);
    assert_eq!(
        c.store.operations() - before,
        1,
        "registered with their first events"
    );
    for (s, _) in &calls {
        assert_eq!(ns(&mut c, 1, *s), [json!(1), json!(2)]);
    }
    // Three more each and the results, with the ends: one operation.
    let before = c.store.operations();
    write_together(&mut c, 1, &handlers, 3, 3, true);
    assert_eq!(
        c.store.operations() - before,
        1,
        "their last events and their ends"
    );
    for ((s, _), id) in calls.iter().zip([5, 6]) {
        let r = c.node(1).response(*s).clone();
        assert!(r.ended, "a stream ends once its last events are stored");
        let want = [json!(1), json!(2), json!(3), json!(4), json!(5), json!(id)];
        assert_eq!(ns(&mut c, 1, *s), want);
        // Each event was stored with its own id: a resume elsewhere gets the rest, once.
        let ids = r.event_ids();
        let resumed = c
            .node(2)
            .send(Req::get(&sid).version(V).header("last-event-id", &ids[2]));
        c.settle();
        let r = c.node(2).response(resumed).clone();
        assert!(r.ended, "finished: {:?}", r.frames());
        assert_eq!(ns(&mut c, 2, resumed), want[2..]);
    }
}

#[test]
fn a_turn_s_writes_beyond_the_commit_cap_take_more_operations_in_order() {
    let mut c = Cluster::tuned(
        3,
        |_| ServerConfig::default(),
        |k| k.with_max_commit_events(4),
    );
    let sid = initialize(&mut c, 0);
    let (s, (h, _, _)) = post_call(&mut c, 1, &sid, 5, "tools/call");
    let before = c.store.operations();
    write_together(&mut c, 1, &[h], 1, 9, true);
    assert_eq!(
        c.store.operations() - before,
        3,
        "10 events, at most 4 per operation"
    );
    let r = c.node(1).response(s).clone();
    assert!(r.ended, "{:?}", r.frames());
    let want: Vec<Value> = (1..=9).map(|n| json!(n)).chain([json!(5)]).collect();
    assert_eq!(ns(&mut c, 1, s), want);
    let resumed = c.node(2).send(
        Req::get(&sid)
            .version(V)
            .header("last-event-id", &r.event_ids()[0]),
    );
    c.settle();
    assert_eq!(ns(&mut c, 2, resumed), want, "stored in order, each once");
    assert!(c.node(2).response(resumed).ended, "the end is stored");
    // Exactly at the cap: two full operations, and the end alone in a third (nothing waits
    // for it, but it is stored: a resume elsewhere ends).
    let (s, (h, _, _)) = post_call(&mut c, 1, &sid, 6, "tools/call");
    let before = c.store.operations();
    write_together(&mut c, 1, &[h], 1, 7, true);
    assert_eq!(c.store.operations() - before, 3, "8 events, then the end");
    let r = c.node(1).response(s).clone();
    assert!(r.ended, "{:?}", r.frames());
    let resumed = c.node(2).send(
        Req::get(&sid)
            .version(V)
            .header("last-event-id", &r.event_ids()[7]),
    );
    c.settle();
    let r = c.node(2).response(resumed).clone();
    assert_eq!(ns(&mut c, 2, resumed), [json!(6)], "the last event");
    assert!(r.ended, "the end alone is stored: {:?}", r.frames());
}

#[test]
fn a_request_stream_resumes_on_another_instance_while_its_owner_runs_on() {
    let mut c = cluster(3);
    let sid = initialize(&mut c, 0);
    let (s, h, _) = streaming_call(&mut c, 1, &sid, 4);
    let ids = c.node(1).response(s).event_ids();
    let last = ids.last().expect("an event id").clone();
    // The client's connection to B drops; the handler goes on.
    let now = c.node(1).now;
    c.node(1).router.handle_disconnect(now, s);
    c.node(1).pump();
    c.node(1)
        .notify(Target::Request(h), "notifications/progress", r#"{"n":2}"#);
    c.settle();
    let resumed = c
        .node(2)
        .send(Req::get(&sid).version(V).header("last-event-id", &last));
    c.settle();
    assert_eq!(c.node(2).response(resumed).status(), StatusCode::OK);
    // Long after B's resume grace, the handler was not cancelled: it answers.
    c.advance(Duration::from_secs(90));
    c.node(1).reply(h, r#"{"content":[]}"#);
    c.settle();
    let r = c.node(2).response(resumed).clone();
    assert!(r.ended, "the resumed stream ends with its last event");
    assert_eq!(
        ns(&mut c, 2, resumed),
        [json!(2), json!(4)],
        "the rest, once: {:?}",
        r.frames()
    );
}

/// A finished request stream resumed on the instance that ran it, after that instance
/// dropped its copy of the session (the bus was lost, the session idle here): the events
/// come from the store, as on any other instance. (Before, the owner answered 400, not
/// knowing the stream any more, while every other instance served it.)
#[test]
fn a_stream_resumed_on_its_owner_after_it_dropped_the_session_comes_from_the_store() {
    let mut c = cluster(2);
    let sid = initialize(&mut c, 0);
    let (s, h, _) = streaming_call(&mut c, 1, &sid, 4);
    let first = c
        .node(1)
        .response(s)
        .event_ids()
        .last()
        .expect("an id")
        .clone();
    // The client's connection drops after the first event; the handler then finishes.
    let now = c.node(1).now;
    c.node(1).router.handle_disconnect(now, s);
    c.node(1)
        .notify(Target::Request(h), "notifications/progress", r#"{"n":2}"#);
    c.node(1).reply(h, r#"{"content":[]}"#);
    c.settle();
    // B loses the bus: its idle copy of the session goes, with the finished stream.
    bus_lost_drops_the_copy(&mut c, 1);
    c.settle();
    let resumed = c
        .node(1)
        .send(Req::get(&sid).version(V).header("last-event-id", &first));
    c.settle();
    let r = c.node(1).response(resumed).clone();
    assert_eq!(
        r.status(),
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&r.body)
    );
    assert!(r.ended, "the stream's end is in the store");
    assert_eq!(
        ns(&mut c, 1, resumed),
        [json!(2), json!(4)],
        "the rest, once"
    );
}

#[test]
fn a_killed_owner_leaves_typed_errors_not_a_hang() {
    let mut c = cluster(2);
    let sid = initialize(&mut c, 0);
    let (s, _, _) = streaming_call(&mut c, 1, &sid, 6);
    let last = c.node(1).response(s).event_ids().last().unwrap().clone();
    c.kill(1);
    let resumed = c
        .node(0)
        .send(Req::get(&sid).version(V).header("last-event-id", &last));
    c.settle();
    let r = c.node(0).response(resumed).clone();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.ended, "not left hanging");
    let msgs = r.sse_messages();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(msgs[0]["id"], 6);
    assert_eq!(msgs[0]["error"]["code"], -32603);
}

#[test]
fn an_unknown_stream_of_another_instance_is_a_400() {
    let mut c = cluster(2);
    let sid = initialize(&mut c, 0);
    let g = c
        .node(1)
        .send(Req::get(&sid).version(V).header("last-event-id", "n0.99-3"));
    c.settle();
    assert_eq!(c.node(1).response(g).status(), StatusCode::BAD_REQUEST);
    let g = c.node(1).send(
        Req::get(&sid)
            .version(V)
            .header("last-event-id", "n-0.99-3"),
    );
    c.settle();
    assert_eq!(c.node(1).response(g).status(), StatusCode::BAD_REQUEST);
}

#[test]
fn a_json_tools_call_on_a_cached_session_costs_no_store_round_trip() {
    let mut c = Cluster::new(2, |_| {
        ServerConfig::default().with_response_mode(mcp_proto::server::ResponseMode::Json)
    });
    let sid = initialize(&mut c, 0);
    let call_on_b = |c: &mut Cluster, id: i64| {
        let s = c
            .node(1)
            .send(Req::post(&call(id, "tools/call")).session(&sid).version(V));
        c.settle();
        let (h, _, _) = c.node(1).expect_request();
        c.node(1).reply(h, r#"{"content":[]}"#);
        c.settle();
        assert_eq!(c.node(1).response(s).status(), StatusCode::OK);
    };
    call_on_b(&mut c, 2); // B loads the session: one round trip
    let before = c.store.operations();
    for id in 3..103 {
        call_on_b(&mut c, id);
    }
    assert_eq!(
        c.store.operations() - before,
        0,
        "100 calls, no store operation"
    );
    // Time passing renews the record at most once per touch interval (a quarter of the TTL).
    let before = c.store.operations();
    for id in 103..113 {
        c.advance(Duration::from_secs(60));
        call_on_b(&mut c, id);
    }
    let touches = c.store.operations() - before;
    assert!(
        touches <= 2,
        "{touches} operations for 10 calls over 10 minutes"
    );
}

/// Node `i` is told that the bus was lost: it drops its idle copy of a session (asserted).
fn bus_lost_drops_the_copy(c: &mut Cluster, i: usize) {
    let now = c.node(i).now;
    c.node(i).router.handle_bus_lost(now);
    c.node(i).pump();
    assert!(
        other_outputs(c, i)
            .iter()
            .any(|o| matches!(o, ServerOutput::SessionUnloaded { .. })),
        "the idle copy was dropped"
    );
}

#[test]
fn after_the_bus_is_lost_idle_copies_are_dropped_and_loaded_again() {
    let mut c = cluster(2);
    let sid = initialize(&mut c, 0);
    let (s, (h, _, _)) = post_call(&mut c, 1, &sid, 2, "ping");
    c.node(1).reply(h, "{}");
    c.settle();
    assert_eq!(c.node(1).response(s).status(), StatusCode::OK);
    other_outputs(&mut c, 1);
    // A deletes the session; B misses the bus message.
    c.hold(1, true);
    let d = c.node(0).send(Req::delete(&sid));
    c.settle();
    assert_eq!(c.node(0).response(d).status(), StatusCode::OK);
    c.discard(1);
    c.hold(1, false);
    // Told that the bus was lost, B forgets its idle copy and asks the store again: 404.
    bus_lost_drops_the_copy(&mut c, 1);
    let s = c
        .node(1)
        .send(Req::post(&call(3, "ping")).session(&sid).version(V));
    c.settle();
    assert_eq!(c.node(1).response(s).status(), StatusCode::NOT_FOUND);
}

/// The answers to node `i`'s record operations so far (ticket, reply); its other outputs stay.
fn record_answers(
    c: &mut Cluster,
    i: usize,
) -> Vec<(mcp_proto::server::Ticket, mcp_proto::server::StoreReply)> {
    let mut answers = Vec::new();
    for o in other_outputs(c, i) {
        if let ServerOutput::RecordAnswer { ticket, reply } = o {
            answers.push((ticket, reply));
        }
    }
    answers
}

#[test]
fn a_service_record_written_on_one_instance_is_read_and_guarded_on_another() {
    use mcp_proto::server::{RecordGuard, RecordOp, ServiceRecord, StoreReply};
    let mut c = cluster(2);
    let save = |guard, value: &'static str| RecordOp::Save {
        key: "task:1".into(),
        value: bytes::Bytes::from_static(value.as_bytes()),
        guard,
        owned: true,
        ttl: Some(Duration::from_secs(60)),
    };
    let now = c.node(0).now;
    let t = c
        .node(0)
        .router
        .record_op(now, save(RecordGuard::Absent, "one"))
        .expect("clustered");
    c.settle();
    assert_eq!(
        record_answers(&mut c, 0),
        [(t, StoreReply::RecordSaved { version: 1 })]
    );
    let now = c.node(1).now;
    let load = RecordOp::Load {
        key: "task:1".into(),
    };
    let t = c
        .node(1)
        .router
        .record_op(now, load.clone())
        .expect("clustered");
    let stale = c
        .node(1)
        .router
        .record_op(now, save(RecordGuard::Absent, "two"))
        .expect("clustered");
    c.settle();
    let stored = ServiceRecord {
        version: 1,
        value: bytes::Bytes::from_static(b"one"),
        owner_alive: Some(true),
    };
    assert_eq!(
        record_answers(&mut c, 1),
        [
            (t, StoreReply::Record(Some(stored.clone()))),
            (stale, StoreReply::RecordConflict(Some(stored)))
        ]
    );
    // The owner dies: the record says so.
    c.kill(0);
    let now = c.node(1).now;
    let t = c
        .node(1)
        .router
        .record_op(now, load.clone())
        .expect("clustered");
    c.settle();
    let answers = record_answers(&mut c, 1);
    assert!(
        matches!(&answers[..], [(at, StoreReply::Record(Some(r)))] if *at == t && r.owner_alive == Some(false)),
        "{answers:?}"
    );
    // The store does not answer: Failed after the store timeout, never a hang.
    c.hold(1, true);
    let now = c.node(1).now;
    let t = c.node(1).router.record_op(now, load).expect("clustered");
    c.advance(Duration::from_secs(6));
    let answers = record_answers(&mut c, 1);
    assert!(
        matches!(&answers[..], [(at, StoreReply::Failed(_))] if *at == t),
        "{answers:?}"
    );
    // A router outside a cluster sends nothing.
    let mut alone = mcp_tests::server_harness::Harness::new(ServerConfig::default());
    let now = alone.now;
    assert!(
        alone
            .router
            .record_op(now, RecordOp::Load { key: "k".into() })
            .is_none()
    );
}

#[test]
fn an_instance_waiting_on_a_store_that_is_behind_pushes_new_requests_back() {
    let backlog =
        |k: mcp_proto::server::ClusterConfig| k.with_store_backlog(1, Duration::from_secs(2));
    let mut c = Cluster::tuned(2, |_| ServerConfig::default(), backlog);
    let sid = initialize(&mut c, 0);
    let other = initialize(&mut c, 0);
    // Node 1 serves `sid` (loaded once), then its store falls behind: a request of `other`
    // waits on that session's load, held back.
    let (s, (h, _, _)) = post_call(&mut c, 1, &sid, 2, "ping");
    c.node(1).reply(h, "{}");
    c.settle();
    assert_eq!(c.node(1).response(s).status(), StatusCode::OK);
    c.hold(1, true);
    let waiting = c
        .node(1)
        .send(Req::post(&call(3, "ping")).session(&other).version(V));
    c.settle();
    assert!(
        c.node(1).response(waiting).status.is_none(),
        "waits on the load"
    );
    // One store call waited on is the backlog: a new POST and a new GET are pushed back,
    // before anything is processed, with Retry-After and the same delay in the error.
    let pushed = c
        .node(1)
        .send(Req::post(&call(4, "ping")).session(&sid).version(V));
    let get = c.node(1).send(Req::get(&sid).version(V));
    c.settle();
    for s in [pushed, get] {
        let r = c.node(1).response(s).clone();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.header("retry-after"), Some("2"));
        let body: Value = serde_json::from_slice(&r.body).expect("a JSON-RPC error");
        assert_eq!(body["error"]["code"], -32000);
        assert_eq!(body["error"]["data"]["retryAfter"], 2);
    }
    // The pushed-back POST keeps its connection: its client comes back on it.
    assert!(!c.node(1).response(pushed).stopped_reading);
    assert!(
        c.node(1).next_request().is_none(),
        "nothing reached the app"
    );
    // DELETE frees: never pushed back (answered once the store has done it).
    let delete = c.node(1).send(Req::delete(&sid));
    c.settle();
    assert!(c.node(1).response(delete).status.is_none());
    // Once the store answers, what waited runs and new requests are taken again.
    c.hold(1, false);
    c.settle();
    assert_eq!(c.node(1).response(delete).status(), StatusCode::OK);
    let (h, _, _) = c.node(1).expect_request();
    c.node(1).reply(h, "{}");
    c.settle();
    assert_eq!(c.node(1).response(waiting).status(), StatusCode::OK);
    let (s, (h, _, _)) = post_call(&mut c, 1, &other, 5, "ping");
    c.node(1).reply(h, "{}");
    c.settle();
    assert_eq!(c.node(1).response(s).status(), StatusCode::OK);
}

#[test]
fn a_store_backend_whose_queue_runs_high_has_new_requests_pushed_back_until_it_is_low() {
    let mut c = cluster(1);
    let sid = initialize(&mut c, 0);
    let now = c.node(0).now;
    c.node(0).router.handle_store_pressure(now, true);
    let pushed = c
        .node(0)
        .send(Req::post(&call(2, "ping")).session(&sid).version(V));
    c.settle();
    let r = c.node(0).response(pushed).clone();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.header("retry-after"), Some("1"), "the default delay");
    assert!(
        c.node(0).next_request().is_none(),
        "nothing reached the app"
    );
    c.node(0).router.handle_store_pressure(now, false);
    let (s, (h, _, _)) = post_call(&mut c, 0, &sid, 3, "ping");
    c.node(0).reply(h, "{}");
    c.settle();
    assert_eq!(c.node(0).response(s).status(), StatusCode::OK);
}
