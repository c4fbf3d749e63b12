//! The router's draining shutdown (`Router::begin_shutdown`), sans-IO on a virtual clock:
//! new requests get 503 with a JSON-RPC error, GET streams end, requests in flight are
//! answered as usual, the router reports when it is drained, and the grace deadline (a core
//! timer, from `poll_timeout`) cuts what is left with 503.

use std::time::Duration;

use http::StatusCode;
use mcp_proto::server::{CloseReason, ServerConfig, ServerOutput};
use mcp_tests::server_harness::{Harness, Req};

const V: &str = "2025-11-25";

#[test]
fn a_drain_refuses_new_requests_ends_get_streams_and_finishes_what_is_in_flight() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    let (pending, handle) = h.call(&id, V, 2, "slow");
    let g = h.send(Req::get(&id));
    assert_eq!(h.response(g).status(), StatusCode::OK);
    assert!(!h.router.is_draining() && !h.router.is_drained());

    h.router.begin_shutdown(h.now, Duration::from_secs(10));
    h.pump();
    assert!(h.router.is_draining());
    // The GET stream ended; the call in flight did not.
    assert!(h.response(g).ended);
    assert!(!h.response(pending).ended);
    assert!(!h.router.is_drained());
    // The drain's deadline is a core timer.
    assert!(
        h.router
            .poll_timeout()
            .is_some_and(|t| t <= h.now + Duration::from_secs(10))
    );

    // A new request (even in a live session) is refused: 503 + JSON-RPC -32000.
    let late = h.post_in(&id, V, r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#);
    assert_eq!(h.response(late).status(), StatusCode::SERVICE_UNAVAILABLE);
    let body = h.response(late).json();
    assert_eq!(body["error"]["code"], -32000, "{body}");
    assert!(h.response(late).ended);
    let get = h.send(Req::get(&id));
    assert_eq!(h.response(get).status(), StatusCode::SERVICE_UNAVAILABLE);

    // The call in flight is answered as usual.
    h.reply(handle, r#"{"ok":true}"#);
    assert_eq!(h.response(pending).status(), StatusCode::OK);
    assert_eq!(h.response(pending).json()["result"]["ok"], true);
    assert!(h.response(pending).ended);
    assert!(h.router.is_drained());

    // The adapter then stops the router: the session ends.
    h.router.shutdown(h.now);
    h.pump();
    assert!(h.take_other().iter().any(|o| matches!(
        o,
        ServerOutput::SessionClosed {
            reason: CloseReason::Shutdown,
            ..
        }
    )));
}

#[test]
fn the_grace_deadline_answers_what_is_left_with_503() {
    let mut h = Harness::new(ServerConfig::default());
    let (id, _) = h.initialize(V);
    let (pending, handle) = h.call(&id, V, 2, "slow");
    h.router.begin_shutdown(h.now, Duration::from_secs(2));
    h.pump();
    h.advance(Duration::from_millis(1_999));
    assert!(!h.response(pending).ended);
    assert!(!h.router.is_drained());
    h.advance(Duration::from_millis(1));
    assert_eq!(
        h.response(pending).status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(h.response(pending).json()["error"]["code"], -32000);
    assert!(h.response(pending).ended);
    assert!(h.router.is_drained());
    let other = h.take_other();
    assert!(
        other
            .iter()
            .any(|o| matches!(o, ServerOutput::Cancelled { handle: x, .. } if *x == handle))
    );
    // A second begin_shutdown changes nothing, and no drain timer is left.
    h.router.begin_shutdown(h.now, Duration::from_secs(60));
    assert!(h.router.is_drained());
}

#[test]
fn a_drain_with_nothing_in_flight_is_drained_at_once() {
    let mut h = Harness::new(ServerConfig::default());
    let _ = h.initialize(V);
    h.router.begin_shutdown(h.now, Duration::from_secs(10));
    h.pump();
    assert!(h.router.is_drained());
}
