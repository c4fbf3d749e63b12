//! The client side of the service layer, driven by hand: server requests and their
//! cancellation, transport failures, closing, encoding errors, cursor loops, version checks,
//! and concurrent calls with their own progress callbacks.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_proto::jsonrpc::{
    Message, Notification, Outcome, RawValue, Request, RequestId, Response, error_codes,
};
use mcp_service::client::{
    Client, ClientTransport, RequestError, RequestOptions, ServerNotification,
};
use mcp_service::{CallToolResult, PeerError, Server, Tool};
use mcp_tests::exec::Executor;
use mcp_tests::harness::{conformance_client, pair};
use serde_json::{Value, json};

/// A transport that records what the client sends.
#[derive(Default)]
struct Recorder(Mutex<Vec<Message>>);
impl ClientTransport for Recorder {
    fn send(&self, message: Message) -> Result<(), PeerError> {
        self.0.lock().unwrap().push(message);
        Ok(())
    }
}

fn raw(v: Value) -> Option<Box<RawValue>> {
    Some(serde_json::value::to_raw_value(&v).unwrap())
}

fn ok(id: i64, v: Value) -> Message {
    Message::Response(Response::result(RequestId::Number(id), raw(v).unwrap()))
}

#[test]
fn server_requests_are_answered_and_can_be_cancelled() {
    let exec = Executor::new();
    let transport = Arc::new(Recorder::default());
    let client = Client::builder("c", "1")
        .elicitation_handler(|_| std::future::pending())
        .build(transport.clone());
    // ping needs no handler; an unknown method is -32601; a declared handler runs.
    let ping = client
        .handle_message(Message::Request(Request::new(1, "ping", None)))
        .unwrap();
    let unknown = client.handle_request(Request::new(2, "sampling/createMessage", raw(json!({}))));
    let elicit = client.handle_request(Request::new(
        "e-3",
        "elicitation/create",
        raw(json!({"message": "?", "requestedSchema": {"type": "object", "properties": {}}})),
    ));
    let out = Arc::new(Mutex::new(Vec::new()));
    for fut in [ping, Box::pin(unknown), Box::pin(elicit)] {
        let out = out.clone();
        exec.spawn(async move {
            let answer = fut.await;
            out.lock().unwrap().push(answer);
        });
    }
    exec.run_ready();
    {
        let out = out.lock().unwrap();
        assert_eq!(out.len(), 2, "the elicitation waits for its user");
        assert!(matches!(&out[0].as_ref().unwrap().outcome, Outcome::Result(r) if r.get() == "{}"));
        assert!(
            matches!(&out[1].as_ref().unwrap().outcome, Outcome::Error(e) if e.code == error_codes::METHOD_NOT_FOUND)
        );
    }
    // The server gives up on its elicitation: the handler is dropped, nothing is answered.
    client.handle_notification(Notification::new(
        "notifications/cancelled",
        raw(json!({"requestId": "e-3"})),
    ));
    exec.run_ready();
    let out = out.lock().unwrap();
    assert_eq!(out.len(), 3);
    assert!(out[2].is_none());
    assert!(
        transport.0.lock().unwrap().is_empty(),
        "the client sent nothing itself"
    );
}

#[test]
fn transport_failures_close_and_bad_arguments() {
    let exec = Executor::new();
    let transport = Arc::new(Recorder::default());
    let client = Client::builder("c", "1").build(transport.clone());
    let c2 = client.clone();
    let results = Arc::new(Mutex::new(Vec::new()));
    let r2 = results.clone();
    exec.spawn(async move {
        let a = c2.ping().await;
        let b = c2.call_tool("x", json!({})).await;
        r2.lock().unwrap().push(format!("{a:?}|{b:?}"));
    });
    exec.run_ready();
    assert!(client.fail_request(&RequestId::Number(1), PeerError::Timeout));
    exec.run_ready();
    let mut notes = client.notifications();
    client.close();
    exec.run_ready();
    assert_eq!(
        results.lock().unwrap().as_slice(),
        ["Err(Transport(Timeout))|Err(Transport(Closed))"]
    );
    assert!(
        exec.block_on(async move { notes.next().await }).is_none(),
        "the stream ended"
    );
    let c3 = client.clone();
    let err = exec.block_on(async move { c3.call_tool("x", json!([1, 2])).await.unwrap_err() });
    assert!(matches!(err, RequestError::Encode(_)), "{err:?}");
    // A call or notification after close fails at once: nothing would ever answer it.
    let sent_before = transport.0.lock().unwrap().len();
    let c4 = client.clone();
    let err = exec.block_on(async move { c4.ping().await.unwrap_err() });
    assert!(
        matches!(err, RequestError::Transport(PeerError::Closed)),
        "{err:?}"
    );
    assert!(client.notify("notifications/x", None).is_err());
    assert_eq!(
        transport.0.lock().unwrap().len(),
        sent_before,
        "nothing sent after close"
    );
    // An unknown or late answer is reported, not applied.
    assert!(!client.handle_response(Response::result(
        RequestId::Number(99),
        raw(json!({})).unwrap()
    )));
}

/// A server that hands out fresh cursors forever gets [`RequestError::TooManyPages`] after the
/// client's bound, whatever the listing; within the bound a listing is whole.
#[test]
fn a_listing_follows_at_most_max_list_pages() {
    let exec = Executor::new();
    let transport = Arc::new(Recorder::default());
    let client = Client::builder("c", "1")
        .max_list_pages(3)
        .build(transport.clone());
    let out = Arc::new(Mutex::new(None));
    let (c2, o2) = (client.clone(), out.clone());
    exec.spawn(async move {
        *o2.lock().unwrap() = Some(c2.list_tools().await.map(|t| t.len()));
    });
    for id in 1..=3 {
        exec.run_ready();
        let page = json!({"tools": [{"name": format!("t{id}"), "inputSchema": {"type": "object"}}], "nextCursor": format!("c{id}")});
        client.handle_message(ok(id, page));
    }
    exec.run_ready();
    assert_eq!(
        out.lock().unwrap().take(),
        Some(Err(RequestError::TooManyPages(3)))
    );
    assert_eq!(
        transport.0.lock().unwrap().len(),
        3,
        "no fourth page asked for"
    );
    // The last page within the bound ends the listing.
    let (c3, o3) = (client.clone(), out.clone());
    exec.spawn(async move {
        *o3.lock().unwrap() = Some(c3.list_tools().await.map(|t| t.len()));
    });
    for id in 4..=6 {
        exec.run_ready();
        let next = (id < 6).then(|| format!("d{id}"));
        client.handle_message(ok(id, json!({"tools": [], "nextCursor": next})));
    }
    exec.run_ready();
    assert_eq!(out.lock().unwrap().take(), Some(Ok(0)));
}

#[test]
fn cursor_loops_and_unsupported_versions_are_errors() {
    let exec = Executor::new();
    let transport = Arc::new(Recorder::default());
    let client = Client::builder("c", "1").build(transport.clone());
    let c2 = client.clone();
    let out = Arc::new(Mutex::new(None));
    let o2 = out.clone();
    exec.spawn(async move {
        let r = c2.list_prompts().await;
        *o2.lock().unwrap() = Some(r);
    });
    exec.run_ready();
    client.handle_message(ok(1, json!({"prompts": [], "nextCursor": "a"})));
    exec.run_ready();
    client.handle_message(ok(2, json!({"prompts": [], "nextCursor": "a"})));
    exec.run_ready();
    assert_eq!(
        out.lock().unwrap().take(),
        Some(Err(RequestError::CursorLoop("a".into())))
    );

    let c3 = client.clone();
    exec.spawn(async move {
        let r = c3.initialize().await.map(|_| ());
        *out.lock().unwrap() = Some(r.map(|()| Vec::new()));
    });
    exec.run_ready();
    let init = json!({"protocolVersion": "2024-11-05", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}});
    client.handle_message(ok(3, init));
    exec.run_ready();
    let sent = transport.0.lock().unwrap();
    let Message::Request(r) = &sent[2] else {
        panic!()
    };
    let params: Value = serde_json::from_str(r.params.as_ref().unwrap().get()).unwrap();
    assert_eq!(params["protocolVersion"], "2025-11-25");
    assert_eq!(params["clientInfo"], json!({"name": "c", "version": "1"}));
    assert_eq!(params["capabilities"], json!({}));
    assert_eq!(
        sent.len(),
        3,
        "no notifications/initialized after a refused version"
    );
}

#[test]
fn concurrent_calls_get_their_own_progress() {
    let server = Server::new("p", "1").tool(
        Tool::new("count")
            .description("Counts to n")
            .integer("n", mcp_service::required()),
        |ctx, args| async move {
            let n = args.get_int("n", 0) as u64;
            for i in 1..=n {
                ctx.sleep(Duration::from_millis(10)).await;
                ctx.progress(i, Some(n));
            }
            Ok(CallToolResult::text(n.to_string()))
        },
    );
    let (exec, lb) = pair(&server, conformance_client());
    let seen: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let mut waits = Vec::new();
    for n in [2u64, 3] {
        let client = lb.client.clone();
        let seen = seen.clone();
        waits.push(async move {
            let options = RequestOptions::new()
                .on_progress(move |p| seen.lock().unwrap().push((n, p.progress.as_u64().unwrap())));
            client
                .call_tool_with("count", json!({"n": n}), options)
                .await
                .unwrap()
        });
    }
    let client = lb.client.clone();
    let exec2 = exec.clone();
    exec.block_on(async move {
        client.initialize().await.unwrap();
        let mut notes = client.notifications();
        let [a, b] = <[_; 2]>::try_from(waits).ok().unwrap();
        let both = Arc::new(Mutex::new(Vec::new()));
        for fut in [
            Box::pin(a)
                as std::pin::Pin<Box<dyn std::future::Future<Output = CallToolResult> + Send>>,
            Box::pin(b),
        ] {
            let both = both.clone();
            exec2.spawn(async move {
                let r = fut.await;
                both.lock()
                    .unwrap()
                    .push(r.first_text().unwrap().to_owned());
            });
        }
        exec2.sleep(Duration::from_millis(100)).await;
        assert_eq!(*both.lock().unwrap(), ["2", "3"]);
        let progress = notes
            .drain()
            .into_iter()
            .filter(|n| matches!(n, ServerNotification::Progress(_)))
            .count();
        assert_eq!(
            progress, 5,
            "the stream sees every progress notification too"
        );
    });
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, [(2, 1), (2, 2), (3, 1), (3, 2), (3, 3)]);
}
