//! The transport's spans reach OpenTelemetry through `tracing-opentelemetry` (the wiring of
//! `examples/otel.rs`, with an in-memory exporter): one `exchange` span per HTTP exchange
//! with its JSON-RPC method, tool, short session id and status; one `rpc` span per request a
//! handler ran; one `session` span per session, ended when the session is deleted.

use std::time::{Duration, Instant};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::prelude::*;

fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.as_str().into_owned())
}

/// The finished spans once `done` holds of them (spans end when their exchange's body or
/// their session does, a little after the client's call returns), at most 10 s.
fn finished_when(
    exporter: &InMemorySpanExporter,
    done: impl Fn(&[SpanData]) -> bool,
) -> Vec<SpanData> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let spans = exporter.get_finished_spans().expect("in-memory exporter");
        if done(&spans) || Instant::now() > deadline {
            return spans;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_of_a_session_reach_the_exporter() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("mcp-users-test"))
        .with_filter(
            Targets::new()
                .with_target("mcp_driver", LevelFilter::DEBUG)
                .with_target("mcp_service", LevelFilter::DEBUG),
        );
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(otel))
        .expect("the only subscriber of this test binary");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let serving = mcp_tokio::serve(listener, mcp_demo::users::server())
        .start()
        .unwrap();
    let client = mcp_tokio::Client::connect(serving.url()).await.unwrap();
    let created = client
        .call_tool(
            "create_user",
            json!({"name": "Ann", "email": "ann@example.com", "age": 30}),
        )
        .await
        .unwrap();
    assert!(created.is_error != Some(true), "{created:?}");
    client.close().await;

    let is_call = |s: &SpanData| {
        s.name == "exchange" && attr(s, "rpc.method").as_deref() == Some("tools/call")
    };
    let spans = finished_when(&exporter, |spans| {
        spans.iter().any(is_call)
            && spans.iter().any(|s| s.name == "rpc")
            && spans.iter().any(|s| s.name == "session")
            && spans
                .iter()
                .any(|s| s.name == "exchange" && attr(s, "method").as_deref() == Some("DELETE"))
    });
    let names: Vec<_> = spans.iter().map(|s| s.name.to_string()).collect();

    let call = spans
        .iter()
        .find(|s| is_call(s))
        .unwrap_or_else(|| panic!("no tools/call exchange in {names:?}"));
    assert_eq!(attr(call, "method").as_deref(), Some("POST"));
    assert_eq!(attr(call, "tool").as_deref(), Some("create_user"));
    assert_eq!(attr(call, "status").as_deref(), Some("200"));
    let session = attr(call, "session").expect("the call's session");
    assert_eq!(session.len(), 8, "a short session id: {session:?}");
    assert!(attr(call, "ms").is_some(), "the exchange's duration");

    let initialize = spans
        .iter()
        .find(|s| s.name == "exchange" && attr(s, "rpc.method").as_deref() == Some("initialize"))
        .unwrap_or_else(|| panic!("no initialize exchange in {names:?}"));
    // The session id is the one the initialize answer created.
    assert_eq!(attr(initialize, "session").as_deref(), Some(&*session));

    let rpc = spans
        .iter()
        .find(|s| s.name == "rpc" && attr(s, "tool").as_deref() == Some("create_user"))
        .unwrap_or_else(|| panic!("no rpc span of create_user in {names:?}"));
    assert_eq!(attr(rpc, "rpc.method").as_deref(), Some("tools/call"));

    let session_span = spans
        .iter()
        .find(|s| s.name == "session")
        .unwrap_or_else(|| panic!("no session span in {names:?}"));
    assert_eq!(attr(session_span, "session").as_deref(), Some(&*session));

    serving.shutdown().await;
    provider.shutdown().unwrap();
}
