//! Ids: a second in-flight request with the same id is refused with a typed error; responses
//! are matched by id and never cross-wired (S-RPC-3, S-RPC-4; peer SDKs have handed one caller
//! the response meant for another request with the same id).

use std::time::Duration;

use mcp_proto::client::{ApiMisuse, ClientError, ClientEvent, RequestResult, ServerFault};
use mcp_tests::client_harness::{Harness, Match, Reply};
use serde_json::json;

#[test]
fn s_rpc_3_a_duplicate_in_flight_id_is_refused_and_reusable_after_completion() {
    let mut h = Harness::default_pair();
    h.initialize();
    let req = json!({"jsonrpc":"2.0","id":1,"method":"hang"});
    h.send(req.clone()).unwrap();
    assert_eq!(
        h.send(req.clone()),
        Err(ApiMisuse::DuplicateRequestId { id: 1.into() })
    );
    // A string "1" is a different id.
    h.send(json!({"jsonrpc":"2.0","id":"1","method":"tools/list"}))
        .unwrap();
    h.run_for(Duration::from_millis(50));
    assert_eq!(h.client.in_flight(), 1);
    h.client.cancel(h.now, &1.into(), None).unwrap();
    h.drain();
    h.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}))
        .unwrap();
    h.run_for(Duration::from_millis(50));
    // (Id 1 was also initialize's, long completed.)
    let outs = h.outcomes_of(1);
    assert!(
        matches!(
            outs[..],
            [
                RequestResult::Response { .. },
                RequestResult::Cancelled,
                RequestResult::Response { .. }
            ]
        ),
        "{outs:?}"
    );
}

#[test]
fn responses_are_never_cross_wired() {
    // The claude.ai connector bug: the server answers request A with B's response.
    let mut h = Harness::default_pair();
    h.initialize();
    h.server.script(
        Match::Method("a"),
        Reply::Json(json!({"jsonrpc":"2.0","id":999,"result":{"for":"nobody"}})),
    );
    let a = h.request("a");
    h.run_for(Duration::from_millis(50));
    // A's stream carried someone else's (unknown) response: A failed, nothing was misdelivered.
    assert!(matches!(
        h.outcomes_of(a)[..],
        [RequestResult::Failed(ClientError::Protocol(
            ServerFault::MissingResponse
        ))]
    ));
    assert!(h.events().iter().any(|e| matches!(
        e,
        ClientEvent::UnmatchedResponse { id: Some(i), .. } if *i == 999.into()
    )));

    // With two requests in flight, a response carrying B's id completes B only, wherever it
    // arrives.
    let b = h.request("hang");
    h.server.script(
        Match::Method("c"),
        Reply::Json(json!({"jsonrpc":"2.0","id":b,"result":{"for":"b"}})),
    );
    let c = h.request("c");
    h.run_for(Duration::from_millis(50));
    assert_eq!(h.result_of(b).unwrap(), json!({"for":"b"}));
    assert!(matches!(
        h.outcomes_of(c)[..],
        [RequestResult::Failed(ClientError::Protocol(
            ServerFault::MissingResponse
        ))]
    ));
    assert_eq!(h.outcomes_of(b).len(), 1);
}

#[test]
fn a_late_response_after_cancel_is_dropped() {
    let mut h = Harness::default_pair();
    h.initialize();
    let id = h.request("hang");
    let post = h.intents().pop().unwrap().stream;
    h.run_for(Duration::from_millis(20));
    h.client.cancel(h.now, &id.into(), Some("user")).unwrap();
    h.drain();
    let parts = h.server.answer_hanging(post, json!(id));
    h.deliver(parts);
    h.run_for(Duration::from_millis(50));
    assert!(matches!(h.outcomes_of(id)[..], [RequestResult::Cancelled]));
}
