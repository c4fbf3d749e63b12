//! Era detection (S-NEW-10, G-11) and the modern request shape (S-NEW-4, S-NEW-7, S-NEW-8),
//! against the scripted fake server: a dual-era `ClientSession` (`EraMode::Auto`) probes with
//! `server/discover`, stays modern on a result or a recognised modern error, falls back to
//! `initialize` on anything else, reports HTTP+SSE-only servers with a typed error, and caches
//! the verdict per origin.

use std::time::Duration;

use bytes::Bytes;
use mcp_proto::Era;
use mcp_proto::client::{
    ClientConfig, ClientError, ClientEvent, ClientIdentity, EraMode, HttpRequestKind, KnownEra,
    RequestResult,
};
use mcp_proto::version::ProtocolVersion;
use mcp_tests::client_harness::{
    Harness, Match, ModernServer, NetConfig, Reply, ServerConfig, initialize_request,
};
use serde_json::{Value, json};

fn modern_server() -> ServerConfig {
    ServerConfig {
        issue_sessions: false,
        get_supported: false,
        delete_supported: false,
        ..ServerConfig::default()
    }
}

fn auto(cfg: ClientConfig, server: ServerConfig, modern: Option<ModernServer>) -> Harness {
    let mut h = Harness::new(cfg.with_seed(3), server, NetConfig::default());
    h.server.modern = modern;
    h
}

fn body(req: &mcp_proto::client::HttpRequest) -> Value {
    serde_json::from_slice(&req.body).unwrap()
}

/// What an application caching eras per origin holds after this session: what it configured
/// (`start`), then each `KnownEraChanged` the session reported, in order.
fn remembered(start: Option<KnownEra>, h: &Harness) -> Option<KnownEra> {
    h.events().iter().fold(start, |known, e| match e {
        ClientEvent::KnownEraChanged { era } => *era,
        _ => known,
    })
}

fn init(h: &mut Harness) {
    h.send(initialize_request(1, "2025-11-25")).unwrap();
    h.run_for(Duration::from_millis(200));
}

#[test]
fn s_new_10_a_modern_server_answers_the_probe_and_initialize_is_answered_from_discover() {
    let mut h = auto(
        ClientConfig::new().with_era(EraMode::Auto),
        modern_server(),
        Some(ModernServer::default()),
    );
    init(&mut h);
    assert!(h.client.is_ready());
    assert_eq!(h.client.era(), Some(Era::Modern));
    let posts = h.intents_of(HttpRequestKind::Post);
    assert_eq!(
        posts.len(),
        1,
        "only the probe: no initialize, no initialized"
    );
    assert_eq!(body(&posts[0].1)["method"], "server/discover");
    let result = h.result_of(1).expect("the app's initialize is answered");
    assert_eq!(result["protocolVersion"], "2026-07-28");
    assert_eq!(result["serverInfo"]["name"], "fake-modern");
    assert_eq!(result["capabilities"], json!({"tools": {}}));
    assert_eq!(result["instructions"], "modern fake");
    assert!(h.events().contains(&ClientEvent::EraDetected {
        era: Era::Modern,
        version: Some(ProtocolVersion::V2026_07_28),
        cached: false
    }));
    assert!(h.client.discovery().is_some());
    // notifications/initialized is absorbed; later requests go out modern.
    h.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
        .unwrap();
    let id = h.request("tools/list");
    h.run_for(Duration::from_millis(50));
    assert!(h.result_of(id).is_some(), "{:?}", h.outcomes_of(id));
    assert_eq!(h.intents_of(HttpRequestKind::Post).len(), 2);
}

#[test]
fn s_new_4_s_new_7_s_new_8_every_modern_request_carries_meta_and_mirrored_headers() {
    let identity = ClientIdentity {
        client_info: json!({"name": "cfg-client", "version": "9"}),
        capabilities: json!({"sampling": {}}),
    };
    let mut h = auto(
        ClientConfig::new()
            .with_version(ProtocolVersion::V2026_07_28)
            .with_client_identity(identity),
        modern_server(),
        Some(ModernServer {
            tools: vec![
                json!({"name": "execute_sql", "inputSchema": {"type": "object",
                "properties": {"region": {"type": "string", "x-mcp-header": "Region"},
                               "query": {"type": "string"}}}}),
            ],
            ..ModernServer::default()
        }),
    );
    h.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}))
        .unwrap();
    h.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"héllo","arguments":{}}}))
        .unwrap();
    h.send(json!({"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///é"}}))
        .unwrap();
    h.run_for(Duration::from_millis(50));
    h.send(json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"execute_sql","arguments":{"region":"us-west1","query":"x"}}}))
        .unwrap();
    h.run_for(Duration::from_millis(50));
    // The fake server checks the headers with mcp_proto::mirror::check_headers: every
    // request succeeded, so they matched the bodies.
    for id in 1..=4 {
        assert!(h.result_of(id).is_some(), "{id}: {:?}", h.outcomes_of(id));
    }
    let posts = h.intents_of(HttpRequestKind::Post);
    for (_, p) in &posts {
        let b = body(p);
        let meta = &b["params"]["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientInfo"]["name"],
            "cfg-client"
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientCapabilities"],
            json!({"sampling": {}})
        );
        assert_eq!(p.headers["mcp-protocol-version"], "2026-07-28");
        assert_eq!(p.headers["mcp-method"], b["method"].as_str().unwrap());
        assert!(p.headers.get("mcp-session-id").is_none());
    }
    assert_eq!(posts[1].1.headers["mcp-name"], "=?base64?aMOpbGxv?=");
    assert_eq!(
        posts[2].1.headers["mcp-name"],
        "=?base64?ZmlsZTovLy/DqQ==?="
    );
    assert_eq!(posts[3].1.headers["mcp-name"], "execute_sql");
    assert_eq!(posts[3].1.headers["mcp-param-region"], "us-west1");
}

#[test]
fn s_new_8_tools_with_invalid_x_mcp_header_are_removed_from_tools_list() {
    let mut h = auto(
        ClientConfig::new().with_version(ProtocolVersion::V2026_07_28),
        modern_server(),
        Some(ModernServer {
            tools: vec![
                json!({"name": "good", "inputSchema": {"type": "object"}}),
                json!({"name": "bad", "inputSchema": {"type": "object",
                    "properties": {"o": {"type": "object", "x-mcp-header": "O"}}}}),
            ],
            ..ModernServer::default()
        }),
    );
    h.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}))
        .unwrap();
    h.run_for(Duration::from_millis(50));
    let tools = h.result_of(1).unwrap()["tools"].clone();
    assert_eq!(tools.as_array().unwrap().len(), 1);
    assert_eq!(tools[0]["name"], "good");
    assert_eq!(
        h.count_events(
            |e| matches!(e, ClientEvent::InvalidToolDefinition { tool, .. } if tool == "bad")
        ),
        1
    );
}

#[test]
fn s_new_10_a_legacy_400_falls_back_to_initialize() {
    // The default fake is a 2025 server with sessions: a POST without a session id is 400
    // with no body.
    let mut h = auto(
        ClientConfig::new().with_era(EraMode::Auto),
        ServerConfig::default(),
        None,
    );
    init(&mut h);
    assert!(h.client.is_ready());
    assert_eq!(h.client.era(), Some(Era::Legacy));
    assert_eq!(
        h.client.protocol_version(),
        Some(ProtocolVersion::V2025_11_25)
    );
    assert!(h.client.session_id().is_some());
    let methods: Vec<String> = h
        .intents_of(HttpRequestKind::Post)
        .iter()
        .map(|(_, r)| body(r)["method"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        methods,
        ["server/discover", "initialize", "notifications/initialized"]
    );
    let posts = h.intents_of(HttpRequestKind::Post);
    // The initialize goes out exactly as the app wrote it (no modern _meta, no version).
    assert_eq!(body(&posts[1].1), initialize_request(1, "2025-11-25"));
    assert!(posts[1].1.headers.get("mcp-protocol-version").is_none());
    assert!(posts[1].1.headers.get("mcp-method").is_none());
    assert_eq!(h.result_of(1).unwrap()["protocolVersion"], "2025-11-25");
    assert!(h.events().contains(&ClientEvent::EraDetected {
        era: Era::Legacy,
        version: None,
        cached: false
    }));
}

#[test]
fn g_11_a_2025_error_body_is_not_a_modern_error() {
    for (status, body) in [
        (
            400,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Unsupported protocol version"}}"#,
        ),
        (
            400,
            r#"{"jsonrpc":"2.0","id":"x","error":{"code":-32600,"message":"Bad Request: No valid session ID provided"}}"#,
        ),
        (404, ""),
        (405, ""),
        (400, "not json at all"),
    ] {
        let mut h = auto(
            ClientConfig::new().with_era(EraMode::Auto),
            ServerConfig::default(),
            None,
        );
        h.server.script(
            Match::Method("server/discover"),
            Reply::Status(status, vec![], Bytes::from(body)),
        );
        init(&mut h);
        assert_eq!(h.client.era(), Some(Era::Legacy), "{status} {body}");
        assert!(h.result_of(1).is_some());
    }
}

#[test]
fn g_11_a_modern_error_keeps_the_session_modern() {
    // A recognised modern error the probe cannot get past (here -32020): the error goes to
    // the app and the era stays modern, no initialize.
    let mut h = auto(
        ClientConfig::new().with_era(EraMode::Auto),
        modern_server(),
        Some(ModernServer::default()),
    );
    h.server.script(
        Match::Method("server/discover"),
        Reply::Status(
            400,
            vec![("content-type", "application/json".into())],
            Bytes::from(
                r#"{"jsonrpc":"2.0","id":"x","error":{"code":-32020,"message":"HeaderMismatch"}}"#,
            ),
        ),
    );
    init(&mut h);
    let methods: Vec<String> = h
        .intents_of(HttpRequestKind::Post)
        .iter()
        .map(|(_, r)| body(r)["method"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(methods, ["server/discover"], "no fallback to initialize");
    match &h.outcomes_of(1)[..] {
        [RequestResult::Response { response, .. }] => {
            assert!(response.is_error());
            assert_eq!(response.id, Some(1.into()));
        }
        other => panic!("{other:?}"),
    }
    assert!(h.events().contains(&ClientEvent::EraDetected {
        era: Era::Modern,
        version: Some(ProtocolVersion::V2026_07_28),
        cached: false
    }));
    assert!(!h.client.is_ready());
}

/// `UnsupportedProtocolVersionError` listing the very version the probe carried: the
/// client retries at that version (a mutually supported one) once, and gives the second
/// refusal to the app; it never falls back to `initialize`.
#[test]
fn unsupported_version_naming_the_version_sent_is_retried_once() {
    let refusal = || {
        Reply::Status(
            400,
            vec![("content-type", "application/json".into())],
            Bytes::from(
                r#"{"jsonrpc":"2.0","id":"x","error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2026-07-28"}}}"#,
            ),
        )
    };
    let probes = |h: &Harness| {
        h.intents_of(HttpRequestKind::Post)
            .iter()
            .map(|(_, r)| {
                let b = body(r);
                let version = r
                    .headers
                    .get("mcp-protocol-version")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                assert_eq!(
                    b["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], version,
                    "header and _meta agree"
                );
                (b["method"].as_str().unwrap_or("").to_owned(), version)
            })
            .collect::<Vec<_>>()
    };
    let probe = ("server/discover".to_owned(), "2026-07-28".to_owned());
    // Refused once: the retry succeeds.
    let mut h = auto(
        ClientConfig::new().with_era(EraMode::Modern),
        modern_server(),
        Some(ModernServer::default()),
    );
    h.server.script(Match::Method("server/discover"), refusal());
    init(&mut h);
    assert_eq!(probes(&h), [probe.clone(), probe.clone()]);
    assert!(h.client.is_ready());
    assert_eq!(h.client.era(), Some(Era::Modern));
    assert_eq!(h.result_of(1).unwrap()["protocolVersion"], "2026-07-28");
    // Refused twice: no third probe, the refusal is the initialize's answer.
    let mut h = auto(
        ClientConfig::new().with_era(EraMode::Modern),
        modern_server(),
        Some(ModernServer::default()),
    );
    h.server.script(Match::Method("server/discover"), refusal());
    h.server.script(Match::Method("server/discover"), refusal());
    init(&mut h);
    assert_eq!(probes(&h), [probe.clone(), probe]);
    match &h.outcomes_of(1)[..] {
        [RequestResult::Response { response, .. }] => {
            assert!(response.is_error(), "{response:?}");
            assert_eq!(response.id, Some(1.into()));
        }
        other => panic!("{other:?}"),
    }
    assert!(!h.client.is_ready());
}

#[test]
fn s_new_10_unsupported_version_with_only_legacy_versions_falls_back() {
    let mut h = auto(
        ClientConfig::new().with_era(EraMode::Auto),
        ServerConfig::default(),
        None,
    );
    h.server.script(
        Match::Method("server/discover"),
        Reply::Status(
            400,
            vec![],
            Bytes::from(
                r#"{"jsonrpc":"2.0","id":"x","error":{"code":-32022,"message":"no","data":{"supported":["2025-11-25"]}}}"#,
            ),
        ),
    );
    init(&mut h);
    assert_eq!(h.client.era(), Some(Era::Legacy));
    assert!(h.client.is_ready());
}

#[test]
fn s_new_10_initialize_refused_after_the_probe_means_http_sse_only() {
    for status in [400u16, 404, 405] {
        let mut h = auto(
            ClientConfig::new().with_era(EraMode::Auto),
            ServerConfig::default(),
            None,
        );
        h.server.script(
            Match::Method("server/discover"),
            Reply::Status(404, vec![], Bytes::new()),
        );
        h.server.script(
            Match::Method("initialize"),
            Reply::Status(status, vec![], Bytes::new()),
        );
        init(&mut h);
        assert!(
            matches!(
                &h.outcomes_of(1)[..],
                [RequestResult::Failed(ClientError::LegacySseTransport { status: s })] if s.as_u16() == status
            ),
            "{status}: {:?}",
            h.outcomes_of(1)
        );
        assert!(!h.client.is_ready());
    }
}

#[test]
fn s_new_10_forced_modern_refuses_a_legacy_server_and_a_5xx_probe_is_an_error() {
    let mut h = auto(
        ClientConfig::new().with_era(EraMode::Modern),
        ServerConfig::default(),
        None,
    );
    init(&mut h);
    assert!(matches!(
        &h.outcomes_of(1)[..],
        [RequestResult::Failed(ClientError::ModernUnsupported)]
    ));
    assert_eq!(
        h.intents_of(HttpRequestKind::Post).len(),
        1,
        "no initialize"
    );
    // A server error is not a verdict: the initialize fails, nothing is cached, and the app
    // may try again.
    let mut h = auto(
        ClientConfig::new().with_era(EraMode::Auto),
        ServerConfig::default(),
        None,
    );
    h.server.script(
        Match::Method("server/discover"),
        Reply::Status(503, vec![], Bytes::new()),
    );
    init(&mut h);
    assert!(matches!(
        &h.outcomes_of(1)[..],
        [RequestResult::Failed(ClientError::HttpStatus { .. })]
    ));
    assert_eq!(remembered(None, &h), None);
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::KnownEraChanged { .. })),
        0,
        "nothing learned, nothing reported"
    );
    init(&mut h);
    assert!(h.client.is_ready(), "a second initialize probes again");
}

#[test]
fn s_new_10_the_era_is_cached_per_origin_and_shared() {
    // A modern origin: probed once, reported Modern; the next session probes at that version.
    let mut h = auto(
        ClientConfig::new().with_era(EraMode::Auto),
        modern_server(),
        Some(ModernServer::default()),
    );
    init(&mut h);
    assert_eq!(
        remembered(None, &h),
        Some(KnownEra::Modern(ProtocolVersion::V2026_07_28))
    );
    // A legacy origin: the verdict is reported once initialize succeeded...
    let mut h = auto(
        ClientConfig::new().with_era(EraMode::Auto),
        ServerConfig::default(),
        None,
    );
    init(&mut h);
    let legacy = remembered(None, &h);
    assert_eq!(legacy, Some(KnownEra::Legacy));
    // ... and the next session for that origin, told so, skips the probe.
    let mut h = auto(
        ClientConfig::new()
            .with_era(EraMode::Auto)
            .with_known_era(legacy),
        ServerConfig::default(),
        None,
    );
    init(&mut h);
    assert!(h.client.is_ready());
    let first = &h.intents_of(HttpRequestKind::Post)[0].1;
    assert_eq!(body(first)["method"], "initialize");
    assert!(h.events().contains(&ClientEvent::EraDetected {
        era: Era::Legacy,
        version: None,
        cached: true
    }));
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::KnownEraChanged { .. })),
        0,
        "what the app knew still holds: nothing to report"
    );
    // A known modern origin that turns out legacy is re-probed: the entry is forgotten
    // and the session falls back.
    let moved = Some(KnownEra::Modern(ProtocolVersion::V2026_07_28));
    let mut h = auto(
        ClientConfig::new()
            .with_era(EraMode::Auto)
            .with_known_era(moved),
        ServerConfig::default(),
        None,
    );
    init(&mut h);
    assert_eq!(h.client.era(), Some(Era::Legacy));
    assert!(
        h.events()
            .contains(&ClientEvent::KnownEraChanged { era: None })
    );
    assert_eq!(remembered(moved, &h), Some(KnownEra::Legacy));
}

#[test]
fn s_new_10_requests_sent_during_the_probe_wait_and_go_out_in_the_detected_era() {
    let mut h = auto(
        ClientConfig::new().with_era(EraMode::Auto),
        modern_server(),
        Some(ModernServer::default()),
    );
    // Hold the probe's answer so that requests pile up behind it.
    h.server
        .script(Match::Method("server/discover"), Reply::Hang);
    h.send(initialize_request(1, "2025-11-25")).unwrap();
    let id = h.request("tools/list");
    h.run_for(Duration::from_millis(50));
    assert_eq!(h.client.era(), None, "probing");
    assert!(h.outcomes_of(id).is_empty());
    assert_eq!(h.intents_of(HttpRequestKind::Post).len(), 1);
    // The probe times out (30 s default handshake): the initialize fails, the request waits
    // for the next initialize.
    h.run_for(Duration::from_secs(31));
    assert!(matches!(
        &h.outcomes_of(1)[..],
        [RequestResult::Failed(ClientError::TimedOut)]
    ));
    init(&mut h);
    assert!(h.client.is_ready());
    h.run_for(Duration::from_millis(50));
    assert!(h.result_of(id).is_some(), "{:?}", h.outcomes_of(id));
    let last = h
        .intents_of(HttpRequestKind::Post)
        .last()
        .unwrap()
        .1
        .clone();
    assert_eq!(
        body(&last)["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
}

#[test]
fn s_new_7_s_new_9_a_modern_4xx_error_body_is_the_response() {
    let mut h = auto(
        ClientConfig::new().with_version(ProtocolVersion::V2026_07_28),
        modern_server(),
        Some(ModernServer::default()),
    );
    let id = h.request("nope");
    h.run_for(Duration::from_millis(50));
    match &h.outcomes_of(id)[..] {
        [RequestResult::Response { response, .. }] => {
            assert!(response.is_error());
            let v: Value = serde_json::from_slice(
                &mcp_proto::client::Message::Response(response.clone()).to_bytes(),
            )
            .unwrap();
            assert_eq!(v["error"]["code"], -32601);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn s_new_10_requests_queued_during_the_probe_go_out_legacy_after_a_fallback() {
    let mut h = auto(
        ClientConfig::new().with_era(EraMode::Auto),
        ServerConfig::default(),
        None,
    );
    h.server
        .script(Match::Method("server/discover"), Reply::Hang);
    h.send(initialize_request(1, "2025-11-25")).unwrap();
    let id = h.request("tools/list");
    h.run_for(Duration::from_millis(50));
    assert!(h.outcomes_of(id).is_empty());
    // The probe's exchange finally fails with a 400 (a legacy server): fall back.
    let probe = h.intents_of(HttpRequestKind::Post)[0].1.stream;
    let headers = http::HeaderMap::new();
    let head = mcp_proto::client::Input::ResponseHead {
        stream: probe,
        status: http::StatusCode::BAD_REQUEST,
        headers: &headers,
    };
    h.client.handle_input(h.now, head);
    let end = mcp_proto::client::Input::End { stream: probe };
    h.client.handle_input(h.now, end);
    h.drain();
    h.run_for(Duration::from_millis(200));
    assert_eq!(h.client.era(), Some(Era::Legacy));
    assert!(h.result_of(id).is_some(), "{:?}", h.outcomes_of(id));
    let (_, last) = h.intents_of(HttpRequestKind::Post).pop().unwrap();
    let b = body(&last);
    assert_eq!(b["method"], "tools/list");
    assert!(
        b["params"].get("_meta").is_none(),
        "no modern _meta in the legacy era"
    );
    assert!(last.headers.get("mcp-method").is_none());
    assert_eq!(last.headers["mcp-protocol-version"], "2025-11-25");
    assert!(last.headers.get("mcp-session-id").is_some());
}

#[test]
fn s_new_10_a_cached_modern_era_that_stops_holding_is_forgotten() {
    let mut h = auto(
        ClientConfig::new().with_era(EraMode::Auto),
        modern_server(),
        Some(ModernServer::default()),
    );
    init(&mut h);
    assert!(matches!(remembered(None, &h), Some(KnownEra::Modern(_))));
    // A modern error does not shake it ...
    let id = h.request("nope");
    h.run_for(Duration::from_millis(50));
    assert!(h.result_of(id).is_none() && h.outcomes_of(id).len() == 1);
    assert!(matches!(remembered(None, &h), Some(KnownEra::Modern(_))));
    // ... a legacy-looking 400 does: the next session probes again.
    h.server.script(
        Match::Method("tools/list"),
        Reply::Status(400, vec![], Bytes::new()),
    );
    let id = h.request("tools/list");
    h.run_for(Duration::from_millis(50));
    assert!(matches!(
        &h.outcomes_of(id)[..],
        [RequestResult::Failed(ClientError::HttpStatus { .. })]
    ));
    assert_eq!(remembered(None, &h), None);
}
