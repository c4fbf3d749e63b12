//! The server side of the service layer: cancellation, runtime changes and list_changed,
//! pagination, version negotiation, capability gating, roots, sessions, errors, typed
//! arguments and the 2026-07-28 per-request metadata.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_proto::jsonrpc::{Message, Outcome, RawValue, Request, RequestId, Response, error_codes};
use mcp_service::client::{Client, ServerNotification};
use mcp_service::schema::{LoggingLevel, Root};
use mcp_service::{
    CallToolResult, Error, Peer, PeerError, ResponseFuture, Server, Tool, ToolArgs, required,
};
use mcp_tests::everything;
use mcp_tests::exec::Executor;
use mcp_tests::harness::{pair, timeout};
use mcp_tests::loopback::Direction;
use serde_json::{Value, json};

/// Sets its flag when dropped: observes that a handler's future was dropped.
struct DropFlag(Arc<AtomicBool>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn slow_server(dropped: Arc<AtomicBool>) -> Server {
    Server::new("slow", "1").tool(
        Tool::new("slow").description("Takes a second"),
        move |ctx, _| {
            let flag = DropFlag(dropped.clone());
            async move {
                let _flag = flag;
                ctx.sleep(Duration::from_secs(1)).await;
                Ok(CallToolResult::text("done"))
            }
        },
    )
}

#[test]
fn dropping_a_call_cancels_it_on_the_server() {
    let dropped = Arc::new(AtomicBool::new(false));
    let (exec, lb) = pair(&slow_server(dropped.clone()), Client::builder("t", "1"));
    let client = lb.client.clone();
    let exec2 = exec.clone();
    let outcome = exec.block_on(async move {
        client.initialize().await.unwrap();
        timeout(
            &exec2,
            Duration::from_millis(100),
            client.call_tool("slow", ()),
        )
        .await
    });
    assert!(outcome.is_none(), "timed out");
    exec.run_for(Duration::from_secs(2));
    assert!(dropped.load(Ordering::SeqCst), "the handler was dropped");
    assert_eq!(lb.session.in_flight(), 0);
    assert_eq!(lb.client.pending(), 0);
    let to_server = lb.wire.summary(Direction::ToServer);
    assert_eq!(
        to_server.last().map(String::as_str),
        Some("notifications/cancelled"),
        "{to_server:?}"
    );
    // The cancelled request (id 2) is never answered.
    let to_client = lb.wire.summary(Direction::ToClient);
    assert_eq!(to_client, ["response 1"], "{to_client:?}");
}

#[test]
fn closing_the_session_cancels_handlers() {
    let dropped = Arc::new(AtomicBool::new(false));
    let server = slow_server(dropped.clone());
    let session = server.session(Arc::new(NullPeer(None)));
    let exec = Executor::new();
    let answer =
        session.handle_request(Request::new(1, "tools/call", raw(json!({"name": "slow"}))));
    let slot = Arc::new(Mutex::new(None));
    let slot2 = slot.clone();
    exec.spawn(async move { *slot2.lock().unwrap() = Some(answer.await) });
    exec.run_ready();
    assert_eq!(session.in_flight(), 1);
    session.close();
    exec.run_ready();
    assert_eq!(*slot.lock().unwrap(), Some(None), "cancelled: no response");
    assert!(dropped.load(Ordering::SeqCst));
    assert!(session.is_closed());
    assert_eq!(server.session_count(), 0);
}

/// A peer that drops everything (for driving a session by hand); it sleeps on the given
/// executor's clock, or forever.
struct NullPeer(Option<Executor>);
impl Peer for NullPeer {
    fn sleep(&self, d: Duration) -> mcp_service::BoxFuture<'static, ()> {
        match &self.0 {
            Some(exec) => Box::pin(exec.sleep(d)),
            None => Box::pin(std::future::pending()),
        }
    }
    fn notify(
        &self,
        _: Option<&RequestId>,
        _: mcp_proto::jsonrpc::Notification,
    ) -> Result<(), PeerError> {
        Ok(())
    }
    fn request(&self, _: Option<&RequestId>, _: &str, _: Option<Box<RawValue>>) -> ResponseFuture {
        ResponseFuture::ready(Err(PeerError::Unsupported("no back channel".into())))
    }
}

fn raw(v: Value) -> Option<Box<RawValue>> {
    Some(serde_json::value::to_raw_value(&v).unwrap())
}

fn call(server: &Server, method: &str, params: Value) -> Response {
    let session = server.session(Arc::new(NullPeer(None)));
    Executor::new()
        .block_on(session.handle_request(Request::new(7, method, raw(params))))
        .unwrap()
}

fn result(response: &Response) -> Value {
    match &response.outcome {
        Outcome::Result(r) => serde_json::from_str(r.get()).unwrap(),
        Outcome::Error(e) => panic!("error {e:?}"),
    }
}

fn error_code(response: &Response) -> i64 {
    match &response.outcome {
        Outcome::Error(e) => e.code,
        Outcome::Result(r) => panic!("result {}", r.get()),
    }
}

#[test]
fn version_negotiation() {
    let server = everything::server();
    let init = |v: &str| {
        let params = json!({"protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}});
        result(&call(&server, "initialize", params))["protocolVersion"].clone()
    };
    assert_eq!(init("2025-06-18"), "2025-06-18");
    assert_eq!(init("2025-03-26"), "2025-03-26");
    assert_eq!(init("2025-11-25"), "2025-11-25");
    assert_eq!(init("2024-11-05"), "2025-11-25", "unknown: our latest");
    assert_eq!(
        init("2026-07-28"),
        "2025-11-25",
        "initialize is legacy-only"
    );
    let bad = call(
        &server,
        "initialize",
        json!({"protocolVersion": "2025-06-18"}),
    );
    assert_eq!(error_code(&bad), error_codes::INVALID_PARAMS);
}

#[test]
fn client_offering_an_older_revision_gets_it() {
    let (exec, lb) = pair(
        &everything::server(),
        Client::builder("old", "1").protocol_version(mcp_proto::ProtocolVersion::V2025_03_26),
    );
    let client = lb.client.clone();
    let init = exec.block_on(async move { client.initialize().await.unwrap() });
    assert_eq!(init.protocol_version, "2025-03-26");
    assert_eq!(
        lb.session.state().protocol_version,
        Some(mcp_proto::ProtocolVersion::V2025_03_26)
    );
    assert_eq!(
        lb.client.protocol_version(),
        Some(mcp_proto::ProtocolVersion::V2025_03_26)
    );
}

#[test]
fn unknown_methods_tools_and_bad_params_are_protocol_errors() {
    let server = everything::server();
    assert_eq!(
        error_code(&call(&server, "nope/nope", json!({}))),
        error_codes::METHOD_NOT_FOUND
    );
    assert_eq!(
        error_code(&call(&server, "tools/call", json!({"name": "nope"}))),
        error_codes::INVALID_PARAMS
    );
    assert_eq!(
        error_code(&call(&server, "tools/call", json!({"arguments": {}}))),
        error_codes::INVALID_PARAMS
    );
    assert_eq!(
        error_code(&call(&server, "resources/read", json!({}))),
        error_codes::INVALID_PARAMS
    );
    assert_eq!(
        error_code(&call(&server, "logging/setLevel", json!({"level": "loud"}))),
        error_codes::INVALID_PARAMS
    );
    assert_eq!(
        error_code(&call(&server, "tools/list", json!({"cursor": "zz"}))),
        error_codes::INVALID_PARAMS
    );
    // A server without a completion handler does not know completion/complete.
    let bare = Server::new("bare", "1");
    let params =
        json!({"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": ""}});
    assert_eq!(
        error_code(&call(&bare, "completion/complete", params)),
        error_codes::METHOD_NOT_FOUND
    );
    assert_eq!(
        result(&call(
            &bare,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}})
        ))["capabilities"],
        json!({"logging": {}})
    );
    // server/discover lists every revision and the capabilities.
    let d = result(&call(&server, "server/discover", json!({})));
    assert_eq!(
        d["supportedVersions"],
        json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"])
    );
    assert_eq!(
        d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcp-everything"
    );
}

#[test]
fn duplicate_in_flight_ids_are_refused() {
    let dropped = Arc::new(AtomicBool::new(false));
    let server = slow_server(dropped);
    let exec = Executor::new();
    let session = server.session(Arc::new(NullPeer(Some(exec.clone()))));
    let first = session.handle_request(Request::new(1, "tools/call", raw(json!({"name": "slow"}))));
    let second = session.handle_request(Request::new(1, "ping", None));
    let slot = Arc::new(Mutex::new(Vec::new()));
    for (i, fut) in [
        (
            1,
            Box::pin(first) as std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send>>,
        ),
        (2, Box::pin(second)),
    ] {
        let slot = slot.clone();
        exec.spawn(async move {
            let answer = fut.await;
            slot.lock().unwrap().push((i, answer));
        });
    }
    exec.run_for(Duration::from_secs(2));
    let answers = slot.lock().unwrap();
    assert_eq!(answers.len(), 2);
    assert_eq!(answers[0].0, 2, "the duplicate is answered at once");
    assert_eq!(
        error_code(answers[0].1.as_ref().unwrap()),
        error_codes::INVALID_REQUEST
    );
    assert_eq!(
        result(answers[1].1.as_ref().unwrap())["content"][0]["text"],
        "done"
    );
}

#[test]
fn runtime_changes_send_list_changed() {
    let server = Server::new("dyn", "1")
        .tool_capabilities(true)
        .prompt_capabilities(false)
        .resource_capabilities(true, true);
    let (exec, lb) = pair(&server, Client::builder("t", "1"));
    let client = lb.client.clone();
    let server2 = server.clone();
    exec.block_on(async move {
        let init = client.initialize().await.unwrap();
        assert!(
            init.capabilities.tools.is_some(),
            "declared before any tool exists"
        );
        assert!(client.list_tools().await.unwrap().is_empty());
        let mut notes = client.notifications();
        server2.add_tool(Tool::new("late").description("Added later"), |_, _| async {
            Ok(CallToolResult::text("late"))
        });
        server2.add_prompt(
            mcp_service::Prompt::new("p").description("d"),
            |_, _| async { Ok(mcp_service::GetPromptResult::user_text("x")) },
        );
        server2.add_resource(mcp_service::Resource::new("x://1", "one"), |_, _| async {
            Ok(vec![])
        });
        client.ping().await.unwrap();
        let got = notes.drain();
        assert_eq!(
            got,
            [
                ServerNotification::ToolListChanged,
                ServerNotification::ResourceListChanged
            ],
            "prompts declared listChanged=false"
        );
        assert_eq!(
            client.call_tool("late", ()).await.unwrap().first_text(),
            Some("late")
        );
        assert!(server2.remove_tool("late"));
        assert!(!server2.remove_tool("late"));
        assert!(server2.remove_resource("x://1"));
        client.ping().await.unwrap();
        assert_eq!(
            notes.drain(),
            [
                ServerNotification::ToolListChanged,
                ServerNotification::ResourceListChanged
            ]
        );
        assert!(client.list_tools().await.unwrap().is_empty());
    });
}

#[test]
fn pagination_follows_cursors() {
    let mut server = Server::new("paged", "1").page_size(2);
    for i in 0..5 {
        server = server.tool(Tool::new(format!("t{i}")).description("x"), |_, _| async {
            Ok(CallToolResult::text(""))
        });
    }
    let (exec, lb) = pair(&server, Client::builder("t", "1"));
    let client = lb.client.clone();
    let (all, first) = exec.block_on(async move {
        client.initialize().await.unwrap();
        (
            client.list_tools().await.unwrap(),
            client.list_tools_page(None).await.unwrap(),
        )
    });
    let names: Vec<_> = all.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["t0", "t1", "t2", "t3", "t4"]);
    assert_eq!(first.tools.len(), 2);
    assert_eq!(first.next_cursor.as_deref(), Some("2"));
    let lists = lb
        .wire
        .summary(Direction::ToServer)
        .iter()
        .filter(|m| *m == "tools/list")
        .count();
    assert_eq!(lists, 4, "three pages, then one more");
}

fn gated_server() -> Server {
    Server::new("gated", "1")
        .tool(
            Tool::new("roots").description("Lists the client's roots"),
            |ctx, _| async move {
                let roots = ctx.list_roots().await?;
                Ok(CallToolResult::text(
                    roots
                        .roots
                        .iter()
                        .map(|r| r.uri.as_str())
                        .collect::<Vec<_>>()
                        .join(","),
                ))
            },
        )
        .tool(
            Tool::new("ask")
                .description("Samples")
                .string("prompt", required()),
            |ctx, args: ToolArgs| async move {
                let p = mcp_service::schema::CreateMessageRequestParams {
                    messages: vec![mcp_service::schema::SamplingMessage::new(
                        mcp_service::schema::Role::User,
                        mcp_service::schema::TextContent::new(args.get_string("prompt", "")),
                    )],
                    max_tokens: 10,
                    ..Default::default()
                };
                let r = ctx.create_message(p).await?;
                Ok(CallToolResult::text(r.model))
            },
        )
}

#[test]
fn server_requests_need_the_client_capability() {
    let (exec, lb) = pair(&gated_server(), Client::builder("plain", "1"));
    let client = lb.client.clone();
    let (ask, roots) = exec.block_on(async move {
        client.initialize().await.unwrap();
        (
            client
                .call_tool("ask", json!({"prompt": "hi"}))
                .await
                .unwrap(),
            client.call_tool("roots", ()).await.unwrap(),
        )
    });
    assert_eq!(ask.is_error, Some(true));
    assert!(
        ask.first_text()
            .unwrap()
            .contains("does not support sampling"),
        "{ask:?}"
    );
    assert!(
        roots
            .first_text()
            .unwrap()
            .contains("does not support roots"),
        "{roots:?}"
    );
    assert!(
        lb.wire
            .messages()
            .iter()
            .all(|(d, m)| !(matches!(m, Message::Request(_)) && *d == Direction::ToClient)),
        "nothing was sent to the client"
    );
}

#[test]
fn roots_round_trip_and_client_errors_become_tool_errors() {
    let builder = Client::builder("rooted", "1")
        .roots(vec![Root {
            uri: "file:///work".into(),
            name: Some("work".into()),
            ..Default::default()
        }])
        .sampling_handler(|_| async { Err(Error::protocol(-1, "User rejected sampling request")) });
    let (exec, lb) = pair(&gated_server(), builder);
    let client = lb.client.clone();
    let (roots, ask) = exec.block_on(async move {
        let init = client.initialize().await;
        init.unwrap();
        (
            client.call_tool("roots", ()).await.unwrap(),
            client
                .call_tool("ask", json!({"prompt": "hi"}))
                .await
                .unwrap(),
        )
    });
    assert_eq!(roots.first_text(), Some("file:///work"));
    assert_eq!(
        ask.is_error,
        Some(true),
        "the client's refusal is the tool's failure"
    );
    assert_eq!(ask.first_text(), Some("User rejected sampling request"));
    assert!(
        lb.session
            .state()
            .client_capabilities
            .unwrap()
            .roots
            .unwrap()
            .list_changed
            == Some(true)
    );
}

#[test]
fn typed_arguments_and_protocol_errors_from_tools() {
    #[derive(serde::Deserialize)]
    struct Point {
        x: i32,
        y: i32,
    }
    let server = Server::new("typed", "1")
        .validate_arguments(false)
        .tool(
            Tool::new("sum")
                .description("x + y")
                .integer("x", required())
                .integer("y", required()),
            |_, args: ToolArgs| async move {
                let p: Point = args.parse()?;
                Ok(CallToolResult::text((p.x + p.y).to_string()))
            },
        )
        .tool(
            Tool::new("strict").description("Refuses as a protocol error"),
            |_, _| async { Err(Error::invalid_params("no")) },
        );
    let (exec, lb) = pair(&server, Client::builder("t", "1"));
    let client = lb.client.clone();
    exec.block_on(async move {
        client.initialize().await.unwrap();
        assert_eq!(
            client
                .call_tool("sum", json!({"x": 2, "y": 3}))
                .await
                .unwrap()
                .first_text(),
            Some("5")
        );
        let r = client.call_tool("sum", json!({"x": "2"})).await.unwrap();
        assert_eq!(r.is_error, Some(true));
        assert!(
            r.first_text().unwrap().starts_with("invalid arguments:"),
            "{r:?}"
        );
        let err = client.call_tool("strict", ()).await.unwrap_err();
        assert_eq!(err.code(), Some(error_codes::INVALID_PARAMS));
    });
}

#[test]
fn modern_requests_carry_their_own_client_info_and_log_level() {
    let seen = Arc::new(Mutex::new(None));
    let seen2 = seen.clone();
    let server = Server::new("modern", "1").tool(
        Tool::new("who").description("Logs and reports"),
        move |ctx, _| {
            *seen2.lock().unwrap() = Some((
                ctx.client_info().map(|i| i.name),
                ctx.protocol_version(),
                ctx.log_level(),
            ));
            async move {
                ctx.info("dropped: below warning");
                ctx.warning("sent");
                Ok(CallToolResult::text("ok"))
            }
        },
    );
    let sent = Arc::new(Mutex::new(Vec::new()));
    struct Recorder(Arc<Mutex<Vec<String>>>);
    impl Peer for Recorder {
        fn notify(
            &self,
            related: Option<&RequestId>,
            n: mcp_proto::jsonrpc::Notification,
        ) -> Result<(), PeerError> {
            assert_eq!(related, Some(&RequestId::Number(7)), "related to the call");
            self.0
                .lock()
                .unwrap()
                .push(n.params.unwrap().get().to_owned());
            Ok(())
        }
        fn request(
            &self,
            _: Option<&RequestId>,
            _: &str,
            _: Option<Box<RawValue>>,
        ) -> ResponseFuture {
            ResponseFuture::ready(Err(PeerError::Closed))
        }
    }
    let session = server.session(Arc::new(Recorder(sent.clone())));
    let params = json!({"name": "who", "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "modern-client", "version": "2"},
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/logLevel": "warning"
    }});
    let r = Executor::new().block_on(session.handle_request(Request::new(
        7,
        "tools/call",
        raw(params),
    )));
    assert_eq!(result(&r.unwrap())["content"][0]["text"], "ok");
    assert_eq!(
        *seen.lock().unwrap(),
        Some((
            Some("modern-client".into()),
            Some(mcp_proto::ProtocolVersion::V2026_07_28),
            Some(LoggingLevel::Warning)
        ))
    );
    let sent = sent.lock().unwrap();
    assert_eq!(sent.len(), 1);
    assert!(sent[0].contains("\"sent\""), "{sent:?}");
}

#[test]
fn handler_can_observe_cancellation_between_awaits() {
    let observed = Arc::new(AtomicBool::new(false));
    let observed2 = observed.clone();
    let server = Server::new("obs", "1").tool(
        Tool::new("watch").description("Waits for cancellation"),
        move |ctx, _| {
            let observed = observed2.clone();
            async move {
                let token = ctx.cancellation_token();
                assert!(!ctx.is_cancelled());
                // Work that outlives the handler learns of the cancellation through the token.
                let watcher = token.cancelled();
                let flag = observed.clone();
                std::thread::spawn(move || {
                    futures_lite_block_on(watcher);
                    flag.store(true, Ordering::SeqCst);
                });
                ctx.cancelled().await;
                Ok(CallToolResult::text("unreachable"))
            }
        },
    );
    let session = server.session(Arc::new(NullPeer(None)));
    let exec = Executor::new();
    let answer =
        session.handle_request(Request::new(3, "tools/call", raw(json!({"name": "watch"}))));
    exec.spawn(async move { assert!(answer.await.is_none()) });
    exec.run_ready();
    let cancel = mcp_proto::jsonrpc::Notification::new(
        "notifications/cancelled",
        raw(json!({"requestId": 3, "reason": "user"})),
    );
    session.handle_notification(cancel);
    exec.run_ready();
    for _ in 0..200 {
        if observed.load(Ordering::SeqCst) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(observed.load(Ordering::SeqCst));
    assert_eq!(session.in_flight(), 0);
}

/// A resource's declared MIME type reaches the contents `resources/read` returns when the
/// handler names none; contents that name one, or another URI, keep theirs.
#[test]
fn a_declared_mime_type_is_carried_into_read_contents() {
    use mcp_service::{Resource, ResourceContents, ResourceTemplate};
    let server = Server::new("mime", "1")
        .resource(
            Resource::new("docs://readme", "readme").mime_type("text/markdown"),
            |_, req| async move {
                Ok(vec![
                    ResourceContents::text(req.uri.clone(), "# hi"),
                    ResourceContents::text("docs://other", "x"),
                ])
            },
        )
        .resource(
            Resource::new("docs://logo", "logo").mime_type("image/png"),
            |_, req| async move {
                Ok(vec![
                    ResourceContents::blob(req.uri.clone(), "iVBORw0KGgo=")
                        .with_mime_type("image/svg+xml"),
                ])
            },
        )
        .resource_template(
            ResourceTemplate::new("users://{id}", "user").mime_type("application/json"),
            |_, req| async move { Ok(vec![ResourceContents::blob(req.uri.clone(), "e30=")]) },
        );
    let read = |uri: &str| result(&call(&server, "resources/read", json!({"uri": uri})));
    let readme = read("docs://readme");
    assert_eq!(
        readme["contents"][0]["mimeType"], "text/markdown",
        "{readme}"
    );
    assert!(readme["contents"][1].get("mimeType").is_none(), "{readme}");
    let logo = read("docs://logo");
    assert_eq!(logo["contents"][0]["mimeType"], "image/svg+xml", "{logo}");
    let user = read("users://7");
    assert_eq!(
        user["contents"][0]["mimeType"], "application/json",
        "{user}"
    );
}

/// Blocks the current thread on a future (a thread-parking waker).
fn futures_lite_block_on<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}
