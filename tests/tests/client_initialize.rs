//! Initialize once: the session id comes from the initialize response (S-SESS-1); the session
//! sends `notifications/initialized` itself (S-LIFE-4) and opens the listening stream only after
//! it was accepted (seed: initialized gate; G-9); `with_session` starts from a known session
//! (seed: WithSession); a 404 to initialize is its own error (S-BC-3).

use std::time::Duration;

use mcp_proto::client::{
    ApiMisuse, ClientConfig, ClientError, ClientEvent, HttpRequestKind, RequestResult, ServerFault,
};
use mcp_proto::version::ProtocolVersion;
use mcp_tests::client_harness::{
    Harness, Match, NetConfig, Reply, ServerConfig, initialize_request,
};

fn listening() -> ClientConfig {
    ClientConfig::new()
        .with_continuous_listening(true)
        .with_seed(3)
}

#[test]
fn s_sess_1_session_id_and_version_come_from_the_initialize_response() {
    let mut h = Harness::new(
        ClientConfig::new(),
        ServerConfig {
            version: Some("2025-06-18"),
            ..ServerConfig::default()
        },
        NetConfig::default(),
    );
    h.initialize_with("2025-11-25");
    let sid = h.client.session_id().unwrap().to_string();
    assert!(h.server.has_session(&sid));
    assert_eq!(
        h.client.protocol_version(),
        Some(ProtocolVersion::V2025_06_18)
    );
    let ev = h.events();
    assert_eq!(
        ev[0],
        ClientEvent::Initialized {
            session_id: Some(sid.clone().into()),
            version: ProtocolVersion::V2025_06_18
        }
    );
    assert!(matches!(
        ev[1],
        ClientEvent::Ready {
            acknowledged: Ok(())
        }
    ));
    // The app got the initialize response as the outcome of its request.
    assert_eq!(h.result_of(1).unwrap()["protocolVersion"], "2025-06-18");
}

#[test]
fn s_life_4_listening_opens_only_after_initialized_was_accepted() {
    let mut h = Harness::new(listening(), ServerConfig::default(), NetConfig::default());
    h.send(initialize_request(1, "2025-11-25")).unwrap();
    h.run_for(Duration::from_millis(200));
    let order: Vec<String> = h
        .server
        .received
        .iter()
        .map(|r| match r.kind {
            HttpRequestKind::Post => r.rpc_method().unwrap_or("?").to_string(),
            k => format!("{k:?}"),
        })
        .collect();
    assert_eq!(order, ["initialize", "notifications/initialized", "Listen"]);
    let ack = h.server.received[1].at;
    let get = h.server.received[2].at;
    assert!(
        get > ack,
        "GET went out before the 202 to initialized arrived"
    );
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::ListenOpened { .. })),
        1
    );
}

#[test]
fn with_session_starts_ready_and_listens_without_initialize() {
    let mut h = Harness::new(
        listening().with_session("sess-0-1", ProtocolVersion::V2025_06_18),
        ServerConfig::default(),
        NetConfig::default(),
    );
    assert!(h.client.is_ready());
    assert_eq!(h.client.session_id(), Some("sess-0-1"));
    let first = &h.intents()[0];
    assert_eq!(first.kind, HttpRequestKind::Listen);
    assert_eq!(first.headers["mcp-session-id"], "sess-0-1");
    assert_eq!(first.headers["mcp-protocol-version"], "2025-06-18");
    // This server never issued that id: 404 → expired; no saved initialize → no re-init.
    h.run_for(Duration::from_millis(50));
    assert_eq!(
        h.events()
            .iter()
            .filter(|e| matches!(e, ClientEvent::SessionExpired { .. }))
            .count(),
        1
    );
    assert!(!h.client.is_ready());
    assert_eq!(h.client.session_id(), None);
}

#[test]
fn s_bc_3_a_404_to_initialize_is_endpoint_not_found() {
    let mut h = Harness::default_pair();
    h.server.script(
        Match::Method("initialize"),
        Reply::Status(404, vec![], Default::default()),
    );
    h.send(initialize_request(1, "2025-11-25")).unwrap();
    h.run_for(Duration::from_millis(50));
    assert!(matches!(
        h.outcomes_of(1)[..],
        [RequestResult::Failed(ClientError::EndpointNotFound)]
    ));
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::SessionExpired { .. })),
        0
    );
    // The app may try again.
    h.send(initialize_request(2, "2025-11-25")).unwrap();
    h.run_for(Duration::from_millis(100));
    assert!(h.client.is_ready());
}

#[test]
fn s_life_9_an_unsupported_version_fails_initialize() {
    let mut h = Harness::new(
        ClientConfig::new(),
        ServerConfig {
            version: Some("2024-11-05"),
            ..ServerConfig::default()
        },
        NetConfig::default(),
    );
    h.send(initialize_request(1, "2025-11-25")).unwrap();
    h.run_for(Duration::from_millis(50));
    assert!(matches!(
        &h.outcomes_of(1)[..],
        [RequestResult::Failed(ClientError::Protocol(ServerFault::UnsupportedVersion { offered: Some(v) }))] if v == "2024-11-05"
    ));
    assert!(!h.client.is_ready());
}

#[test]
fn initialize_twice_is_refused_and_a_refused_initialized_does_not_wedge() {
    let mut h = Harness::default_pair();
    h.server.script(
        Match::Method("notifications/initialized"),
        Reply::Status(400, vec![], Default::default()),
    );
    h.send(initialize_request(1, "2025-11-25")).unwrap();
    assert_eq!(
        h.send(initialize_request(2, "2025-11-25")),
        Err(ApiMisuse::AlreadyInitialized)
    );
    h.run_for(Duration::from_millis(100));
    assert!(h.client.is_ready());
    assert!(h.events().iter().any(|e| matches!(
        e,
        ClientEvent::Ready {
            acknowledged: Err(ClientError::HttpStatus { .. })
        }
    )));
    let id = h.request("tools/list");
    h.run_for(Duration::from_millis(50));
    assert!(h.result_of(id).is_some());
}

#[test]
fn a_server_without_sessions_works_and_gets_no_session_header() {
    let mut h = Harness::new(
        listening(),
        ServerConfig {
            issue_sessions: false,
            ..ServerConfig::default()
        },
        NetConfig::default(),
    );
    h.initialize();
    assert_eq!(h.client.session_id(), None);
    h.request("x");
    h.run_for(Duration::from_millis(50));
    for i in h.intents() {
        assert!(i.headers.get("mcp-session-id").is_none());
    }
    h.client.close(h.now);
    h.drain();
    assert!(h.intents_of(HttpRequestKind::Delete).is_empty());
    assert!(h.client.is_closed());
}

#[test]
fn an_unanswered_initialized_notification_does_not_wedge_either() {
    let mut h = Harness::default_pair();
    h.server
        .script(Match::Method("notifications/initialized"), Reply::Hang);
    h.send(initialize_request(1, "2025-11-25")).unwrap();
    let id = h.request("tools/list");
    h.run_for(Duration::from_secs(29));
    assert!(!h.client.is_ready());
    assert!(h.outcomes_of(id).is_empty(), "queued until the gate opens");
    h.run_for(Duration::from_secs(2));
    assert!(h.client.is_ready());
    assert!(h.events().contains(&ClientEvent::Ready {
        acknowledged: Err(ClientError::TimedOut)
    }));
    h.run_for(Duration::from_millis(50));
    assert!(h.result_of(id).is_some());
}
