//! Sending: every message is a POST with the S-POST-3 `Accept` and a JSON `Content-Type`;
//! after initialize the session id (S-SESS-4) and `MCP-Protocol-Version` (S-VER-1) go on every
//! request; static headers, the per-request header callback and the bearer token (S-AUTH-2)
//! are applied; a 401 is a typed `AuthorizationRequired` carrying the challenge (S-AUTH-10).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Method};
use mcp_proto::client::{
    ClientConfig, ClientError, ClientEvent, HttpRequestKind, RequestResult, SendReceipt,
};
use mcp_tests::client_harness::{Harness, Match, NetConfig, Reply, ServerConfig};
use serde_json::json;

#[test]
fn s_post_3_every_post_has_accept_and_content_type() {
    let mut h = Harness::default_pair();
    h.initialize();
    h.request("tools/list");
    h.send(json!({"jsonrpc":"2.0","method":"notifications/progress","params":{}}))
        .unwrap();
    h.run_for(Duration::from_millis(100));
    let posts = h.intents_of(HttpRequestKind::Post);
    assert!(posts.len() >= 4, "{posts:?}");
    for (_, p) in posts {
        assert_eq!(p.method, Method::POST);
        assert_eq!(p.headers["accept"], "application/json, text/event-stream");
        assert_eq!(p.headers["content-type"], "application/json");
    }
}

#[test]
fn s_sess_4_s_ver_1_session_and_version_on_every_request_after_initialize() {
    let mut h = Harness::new(
        ClientConfig::new().with_continuous_listening(true),
        ServerConfig::default(),
        NetConfig::default(),
    );
    h.initialize();
    let sid = h.client.session_id().unwrap().to_string();
    h.request("tools/list");
    h.run_for(Duration::from_millis(100));
    h.client.close(h.now);
    h.drain();
    h.run_for(Duration::from_millis(100));
    let intents = h.intents();
    let init = &intents[0];
    assert!(init.headers.get("mcp-session-id").is_none(), "G-6");
    assert!(init.headers.get("mcp-protocol-version").is_none(), "G-6");
    let kinds: Vec<_> = intents.iter().map(|i| i.kind).collect();
    assert!(kinds.contains(&HttpRequestKind::Listen), "{kinds:?}");
    assert!(kinds.contains(&HttpRequestKind::Delete), "{kinds:?}");
    for i in &intents[1..] {
        assert_eq!(i.headers["mcp-session-id"], sid.as_str(), "{i:?}");
        assert_eq!(i.headers["mcp-protocol-version"], "2025-11-25", "{i:?}");
    }
}

#[test]
fn static_headers_header_callback_and_bearer_provider_are_applied() {
    let mut headers = HeaderMap::new();
    headers.insert("x-static", HeaderValue::from_static("yes"));
    // A static header must not override a protocol header.
    headers.insert("accept", HeaderValue::from_static("text/html"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let mut n = 0;
    let cfg = ClientConfig::new()
        .with_headers(headers)
        .with_header_fn(move |ctx, h| {
            seen2
                .lock()
                .unwrap()
                .push((ctx.kind, ctx.rpc_method.map(str::to_string)));
            h.insert("x-dynamic", HeaderValue::from_static("1"));
        })
        .with_bearer_token_provider(move || {
            n += 1;
            Some(format!("tok{n}"))
        });
    let mut h = Harness::new(cfg, ServerConfig::default(), NetConfig::default());
    h.initialize();
    let posts = h.intents_of(HttpRequestKind::Post);
    for (i, (_, p)) in posts.iter().enumerate() {
        assert_eq!(p.headers["x-static"], "yes");
        assert_eq!(p.headers["x-dynamic"], "1");
        assert_eq!(p.headers["accept"], "application/json, text/event-stream");
        assert_eq!(
            p.headers["authorization"],
            format!("Bearer tok{}", i + 1).as_str()
        );
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0], (HttpRequestKind::Post, Some("initialize".into())));
    assert_eq!(
        seen[1],
        (
            HttpRequestKind::Post,
            Some("notifications/initialized".into())
        )
    );
}

#[test]
fn set_bearer_token_is_sent_and_invalid_tokens_are_refused() {
    let mut h = Harness::default_pair();
    h.client.set_bearer_token(Some("abc")).unwrap();
    assert!(h.client.set_bearer_token(Some("bad\ntoken")).is_err());
    h.initialize();
    for (_, p) in h.intents_of(HttpRequestKind::Post) {
        assert_eq!(p.headers["authorization"], "Bearer abc");
    }
}

#[test]
fn s_auth_11_a_401_is_authorization_required_with_the_challenge() {
    let mut h = Harness::default_pair();
    h.initialize();
    h.server.script(
        Match::Method("tools/call"),
        Reply::Status(
            401,
            vec![(
                "www-authenticate",
                r#"Bearer resource_metadata="https://rs.example/.well-known/oauth-protected-resource", scope="tools:call""#.into(),
            )],
            Default::default(),
        ),
    );
    let id = h.request("tools/call");
    h.run_for(Duration::from_millis(50));
    let outs = h.outcomes_of(id);
    assert_eq!(outs.len(), 1);
    match &outs[0] {
        RequestResult::Failed(ClientError::AuthorizationRequired { status, challenge }) => {
            assert_eq!(status.as_u16(), 401);
            assert_eq!(challenge.scope.as_deref(), Some("tools:call"));
            assert_eq!(
                challenge.resource_metadata.as_deref(),
                Some("https://rs.example/.well-known/oauth-protected-resource")
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::AuthorizationRequired { .. })),
        1
    );
    // The session is not harmed: the next request works.
    let id2 = h.request("tools/call");
    h.run_for(Duration::from_millis(50));
    assert!(h.result_of(id2).is_some());
}

#[test]
fn messages_before_ready_are_queued_then_sent_in_order() {
    let mut h = Harness::default_pair();
    let r = h
        .send(mcp_tests::client_harness::initialize_request(
            1,
            "2025-11-25",
        ))
        .unwrap();
    assert!(matches!(r, SendReceipt::Posted(_)));
    let a = h
        .send(json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}))
        .unwrap();
    let b = h
        .send(json!({"jsonrpc":"2.0","id":3,"method":"prompts/list"}))
        .unwrap();
    assert_eq!((a, b), (SendReceipt::Queued, SendReceipt::Queued));
    // The app's own initialized notification is absorbed: the session sends it once.
    let c = h
        .send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
        .unwrap();
    assert_eq!(c, SendReceipt::Absorbed);
    h.run_for(Duration::from_millis(200));
    let methods: Vec<String> = h
        .server
        .received
        .iter()
        .filter_map(|r| r.rpc_method().map(str::to_string))
        .collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "prompts/list"
        ]
    );
    // G-9: the queued requests left only after the 202 to notifications/initialized.
    let ack_at = h.server.received[1].at;
    assert!(h.server.received[2].at > ack_at);
    assert!(h.result_of(2).is_some() && h.result_of(3).is_some());
}

/// `send_message` takes a parsed message: the same checks, outputs and bytes on the wire as
/// `send` of its bytes.
#[test]
fn send_message_is_send_without_the_parse() {
    use mcp_proto::client::ApiMisuse;
    use mcp_proto::jsonrpc::{Message, parse_message};
    let script = [
        mcp_tests::client_harness::initialize_request(1, "2025-11-25"),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"n":2}}),
        json!({"jsonrpc":"2.0","method":"notifications/progress","params":{}}),
        json!({"jsonrpc":"2.0","id":"s","result":{}}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
    ];
    let run = |by_message: bool| {
        let mut h = Harness::default_pair();
        let mut receipts = Vec::new();
        for v in &script {
            let m: Message = parse_message(v.to_string().as_bytes()).expect("a message");
            let r = if by_message {
                h.client.send_message(h.now, m)
            } else {
                h.client.send(h.now, m.to_bytes())
            };
            receipts.push(r);
            h.run_for(Duration::from_millis(50));
        }
        let bodies: Vec<_> = h.intents().into_iter().map(|i| (i.kind, i.body)).collect();
        (receipts, bodies, h.outcomes())
    };
    let by_bytes = run(false);
    assert_eq!(run(true), by_bytes);

    // A hand-built message is refused where its bytes would be.
    let mut h = Harness::default_pair();
    let array = mcp_proto::jsonrpc::RawValue::from_string("[1]".into()).unwrap();
    let bad = Message::Request(mcp_proto::jsonrpc::Request::new(9, "x", Some(array)));
    assert!(matches!(
        h.client.send(h.now, bad.to_bytes()),
        Err(ApiMisuse::NotJsonRpc { .. })
    ));
    assert!(matches!(
        h.client.send_message(h.now, bad),
        Err(ApiMisuse::NotJsonRpc { .. })
    ));
    h.client.close(h.now);
    let m = parse_message(br#"{"jsonrpc":"2.0","method":"n"}"#).unwrap();
    assert_eq!(h.client.send_message(h.now, m), Err(ApiMisuse::Closed));
}
