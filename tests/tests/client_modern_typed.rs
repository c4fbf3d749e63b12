//! The typed [`Client`](mcp_service::client::Client) over a dual-era `ClientSession`
//! through the real [`ClientBinding`]: `initialize` works against a modern server (answered
//! from `server/discover`), and the same sampling handler that answers a legacy server's
//! `sampling/createMessage` answers an MRTR input request (S-NEW-5); dropping a call cancels
//! it by closing its stream (S-NEW-6).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_proto::client::{ClientConfig, EraMode, HttpRequestKind, Input, Output, TransportFailure};
use mcp_proto::version::ProtocolVersion;
use mcp_service::bind::{ClientBinding, Routed};
use mcp_tests::client_harness::{Harness, ModernServer, NetConfig, Part, ServerConfig};
use mcp_tests::exec::Executor;
use mcp_tests::harness::{SAMPLING_ANSWER, conformance_client};
use serde_json::{Value, json};

/// Runs session + binding + fake server + executor until nothing moves (bounded).
fn pump(h: &mut Harness, b: &mut ClientBinding, exec: &Executor) {
    for _ in 0..10_000 {
        let mut moved = b.apply(&mut h.client, h.now);
        while let Some(out) = h.client.poll_output() {
            moved = true;
            match b.handle_output(out) {
                Routed::Transport(Output::Http(req)) => {
                    h.log
                        .push((h.now, mcp_tests::client_harness::Seen::Http(req.clone())));
                    let parts = h.server.handle(h.now, &req);
                    h.deliver(parts);
                }
                Routed::Transport(Output::Abort(s)) => {
                    h.log
                        .push((h.now, mcp_tests::client_harness::Seen::Abort(s)));
                    h.net.kill(s);
                    h.server.abort(s);
                }
                Routed::Transport(_) => {}
                Routed::Spawn(f) => exec.spawn(f),
                Routed::Done => {}
            }
        }
        if exec.has_ready() {
            exec.run_ready();
            moved = true;
        }
        while let Some((s, part)) = h.net.pop_due(h.now) {
            moved = true;
            match part {
                Part::Head(status, headers) => h.client.handle_input(
                    h.now,
                    Input::ResponseHead {
                        stream: s,
                        status,
                        headers: &headers,
                    },
                ),
                Part::Chunk(chunk) => h
                    .client
                    .handle_input(h.now, Input::Body { stream: s, chunk }),
                Part::End => {
                    h.server.gone(s);
                    h.client.handle_input(h.now, Input::End { stream: s })
                }
                Part::Fail => {
                    h.server.gone(s);
                    h.client.handle_input(
                        h.now,
                        Input::Failed {
                            stream: s,
                            kind: TransportFailure::Reset,
                        },
                    )
                }
            }
        }
        if !moved {
            match h.net.next_time() {
                Some(t) if t > h.now => h.now = t,
                _ => return,
            }
        }
    }
    panic!("no quiescence");
}

fn modern_pair(cfg: ClientConfig) -> (Harness, ClientBinding, Executor) {
    let mut h = Harness::new(
        cfg.with_seed(9),
        ServerConfig {
            issue_sessions: false,
            get_supported: false,
            ..ServerConfig::default()
        },
        NetConfig::default(),
    );
    h.server.modern = Some(ModernServer::default());
    let b = ClientBinding::new(conformance_client(), Arc::new(|| {}));
    (h, b, Executor::new())
}

#[test]
fn s_new_5_the_sampling_handler_answers_an_mrtr_round() {
    let (mut h, mut b, exec) = modern_pair(ClientConfig::new().with_era(EraMode::Auto));
    let client = b.client().clone();
    let out = Arc::new(Mutex::new(None));
    let o = out.clone();
    exec.spawn(async move {
        let init = client.initialize().await.expect("initialize");
        let call = client.call_tool("needs_input", json!({"x": 1})).await;
        *o.lock().unwrap() = Some((init, call, client.protocol_version()));
    });
    pump(&mut h, &mut b, &exec);
    let (init, call, version) = out.lock().unwrap().take().expect("the task finished");
    assert_eq!(init.protocol_version, "2026-07-28");
    assert_eq!(version, Some(ProtocolVersion::V2026_07_28));
    let call = call.expect("the call succeeded");
    let v = serde_json::to_value(&call).unwrap();
    assert_eq!(v["answer"]["content"]["text"], SAMPLING_ANSWER, "{v}");
    assert_eq!(v["answer"]["model"], "test-model");
    assert_eq!(v["state"], "st-1");
    // Two POSTs of the call (the probe first), no POSTed response.
    let methods: Vec<String> = h
        .intents_of(HttpRequestKind::Post)
        .iter()
        .map(|(_, r)| {
            let b: Value = serde_json::from_slice(&r.body).unwrap();
            b["method"].as_str().unwrap_or("<response>").to_string()
        })
        .collect();
    assert_eq!(methods, ["server/discover", "tools/call", "tools/call"]);
    assert_eq!(b.client().pending(), 0);
}

#[test]
fn s_new_6_dropping_a_typed_call_closes_its_stream() {
    let (mut h, mut b, exec) =
        modern_pair(ClientConfig::new().with_version(ProtocolVersion::V2026_07_28));
    let client = b.client().clone();
    let done = Arc::new(Mutex::new(false));
    let d = done.clone();
    let sleeper = exec.sleep(Duration::from_millis(10));
    exec.spawn(async move {
        // `hang` never answers: the call is dropped when the sleep wins.
        let call = client
            .request_with::<mcp_service::schema::ListTools>(Default::default(), Default::default());
        let call = std::pin::pin!(call);
        let _ = futures_select(call, sleeper).await;
        *d.lock().unwrap() = true;
    });
    // Route the request to the hanging method.
    h.server.script(
        mcp_tests::client_harness::Match::Method("tools/list"),
        mcp_tests::client_harness::Reply::Hang,
    );
    pump(&mut h, &mut b, &exec);
    exec.advance();
    pump(&mut h, &mut b, &exec);
    assert!(*done.lock().unwrap());
    let post = h.intents_of(HttpRequestKind::Post)[0].1.stream;
    assert!(h.log.iter().any(|(_, s)| matches!(
        s,
        mcp_tests::client_harness::Seen::Abort(a) if *a == post
    )));
    assert_eq!(
        h.intents_of(HttpRequestKind::Post).len(),
        1,
        "no notifications/cancelled"
    );
}

/// The first of two futures to finish (`true` when it was `a`).
async fn futures_select<A: std::future::Future + Unpin, B: std::future::Future + Unpin>(
    mut a: A,
    mut b: B,
) -> bool {
    std::future::poll_fn(move |cx| {
        use std::task::Poll;
        if std::pin::Pin::new(&mut a).poll(cx).is_ready() {
            return Poll::Ready(true);
        }
        if std::pin::Pin::new(&mut b).poll(cx).is_ready() {
            return Poll::Ready(false);
        }
        Poll::Pending
    })
    .await
}
