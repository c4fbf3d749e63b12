//! Server→client requests (S-S2C-*): related ones on the originating POST stream (upgrading
//! it), unrelated ones on the GET stream; the client's POSTed answer reaches the waiting
//! request; deadlines; ids never collide.

use std::time::Duration;

use http::StatusCode;
use mcp_proto::jsonrpc::Outcome;
use mcp_proto::server::{
    SendError, ServerConfig, ServerEvent, ServerOutput, ServerRequestError, Target,
};
use mcp_tests::server_harness::{Harness, Req};

const V: &str = "2025-11-25";

fn client_responses(h: &mut Harness) -> Vec<(mcp_proto::server::OutboundId, Outcome)> {
    h.take_other()
        .into_iter()
        .filter_map(|o| match o {
            ServerOutput::ClientResponse {
                request, response, ..
            } => Some((request, response.outcome)),
            _ => None,
        })
        .collect()
}

#[test]
fn s_s2c_2_related_request_upgrades_the_post_stream_and_the_answer_comes_back() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    let (s, handle) = h.call(&id, V, 2, "tools/call");
    let out = h.request_client(Target::Request(handle), "sampling/createMessage");
    let r = h.response(s);
    assert!(r.is_sse());
    let sent = r.sse_messages();
    assert_eq!(sent[0]["method"], "sampling/createMessage");
    let wire_id = sent[0]["id"].clone();
    // S-S2C-3: the client POSTs its answer; 202.
    let a = h.post_in(
        &id,
        V,
        &format!(r#"{{"jsonrpc":"2.0","id":{wire_id},"result":{{"model":"m"}}}}"#),
    );
    assert_eq!(h.response(a).status(), StatusCode::ACCEPTED);
    let got = client_responses(&mut h);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, out);
    // The tool then answers on its stream.
    h.reply(handle, "{}");
    assert_eq!(h.response(s).sse_messages().last().unwrap()["id"], 2);
}

#[test]
fn unrelated_request_goes_on_the_get_stream() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, session) = h.initialize(V);
    let g = h.send(Req::get(&id));
    h.request_client(Target::Session(session), "roots/list");
    assert_eq!(h.response(g).sse_messages()[0]["method"], "roots/list");
}

#[test]
fn s_life_12_deadline_fails_the_request_and_cancels_it_at_the_client() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, session) = h.initialize(V);
    let g = h.send(Req::get(&id));
    let out = h
        .router
        .send_request(
            h.now,
            Target::Session(session),
            "elicitation/create",
            None,
            Some(Duration::from_secs(10)),
        )
        .unwrap();
    h.pump();
    h.advance(Duration::from_secs(9));
    assert!(h.take_other().is_empty());
    h.advance(Duration::from_secs(1));
    let other = h.take_other();
    assert!(other.iter().any(|o| matches!(o, ServerOutput::ServerRequestFailed { request, error: ServerRequestError::Timeout } if *request == out)));
    let msgs = h.response(g).sse_messages();
    assert_eq!(msgs[1]["method"], "notifications/cancelled");
    assert_eq!(msgs[1]["params"]["requestId"], msgs[0]["id"]);
    // A late answer is ignored (and reported), never delivered.
    let late = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#,
        msgs[0]["id"]
    );
    let a = h.post_in(&id, V, &late);
    assert_eq!(h.response(a).status(), StatusCode::ACCEPTED);
    assert!(client_responses(&mut h).is_empty());
    assert!(
        h.events
            .iter()
            .any(|e| matches!(e, ServerEvent::UnmatchedResponse { .. }))
    );
}

#[test]
fn ids_never_collide_and_answers_never_cross_sessions() {
    let mut h = Harness::new(ServerConfig::default());
    let (a, sa) = h.initialize(V);
    let (b, sb) = h.initialize(V);
    let ga = h.send(Req::get(&a));
    let gb = h.send(Req::get(&b));
    for _ in 0..3 {
        h.request_client(Target::Session(sa), "ping");
        h.request_client(Target::Session(sb), "ping");
    }
    let ids: Vec<_> = [ga, gb]
        .iter()
        .flat_map(|g| h.response(*g).sse_messages())
        .map(|m| m["id"].clone())
        .collect();
    let mut unique = ids.clone();
    unique.sort_by_key(|v| v.as_i64());
    unique.dedup();
    assert_eq!(unique.len(), 6, "{ids:?}");
    // Session b answering a's request is not delivered.
    let a_id = h.response(ga).sse_messages()[0]["id"].clone();
    h.post_in(
        &b,
        V,
        &format!(r#"{{"jsonrpc":"2.0","id":{a_id},"result":{{}}}}"#),
    );
    assert!(client_responses(&mut h).is_empty());
    h.post_in(
        &a,
        V,
        &format!(r#"{{"jsonrpc":"2.0","id":{a_id},"result":{{}}}}"#),
    );
    assert_eq!(client_responses(&mut h).len(), 1);
}

#[test]
fn closing_the_session_fails_pending_requests() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, session) = h.initialize(V);
    let out = h.request_client(Target::Session(session), "roots/list");
    h.send(Req::delete(&id));
    assert!(h.take_other().iter().any(|o| matches!(o, ServerOutput::ServerRequestFailed { request, error: ServerRequestError::SessionClosed } if *request == out)));
    assert_eq!(
        h.router
            .send_request(h.now, Target::Session(session), "ping", None, None),
        Err(SendError::UnknownSession)
    );
}

#[test]
fn cancel_request_drops_an_unsent_one_or_notifies_the_client() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, session) = h.initialize(V);
    let queued = h.request_client(Target::Session(session), "roots/list");
    h.router.cancel_request(h.now, queued).unwrap();
    let g = h.send(Req::get(&id));
    assert!(h.response(g).sse_messages().is_empty(), "never sent");
    let sent = h.request_client(Target::Session(session), "roots/list");
    h.router.cancel_request(h.now, sent).unwrap();
    h.pump();
    let m = h.response(g).sse_messages();
    assert_eq!(m[1]["method"], "notifications/cancelled");
    assert_eq!(
        h.router.cancel_request(h.now, sent),
        Err(SendError::UnknownHandle)
    );
}
