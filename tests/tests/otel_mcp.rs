//! OpenTelemetry's semantic conventions for MCP (`mcp-otel`), on both runtimes, seen through
//! the SDK's in-memory exporters: a call made inside a trace is one trace across our client
//! and our server (a `CLIENT` span, parent of the `SERVER` span across the wire through
//! `params._meta`), named and attributed as the conventions say; the error rules of both
//! sides; the four duration histograms; and a peer's `_meta.traceparent` continued.

use std::time::Duration;

use mcp_otel::McpTelemetry;
use mcp_proto::client::ClientConfig;
use mcp_proto::server::ServerConfig;
use mcp_service::client::ClientBuilder;
use mcp_service::schema::{CallTool, CallToolRequestParams, CallToolResult, Tool};
use mcp_tests::everything;
use mcp_tests::runtime::Runtime;
use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::{
    SpanKind, Status, TraceContextExt as _, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, Value};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(10);

/// The SDK, exporting to memory.
struct Sdk {
    spans: InMemorySpanExporter,
    tracer_provider: SdkTracerProvider,
    metrics: InMemoryMetricExporter,
    meter_provider: SdkMeterProvider,
}

impl Sdk {
    fn new() -> Sdk {
        let spans = InMemorySpanExporter::default();
        let tracer_provider = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        let metrics = InMemoryMetricExporter::default();
        let meter_provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(metrics.clone()).build())
            .build();
        Sdk {
            spans,
            tracer_provider,
            metrics,
            meter_provider,
        }
    }

    /// The bridge, with the W3C propagator (no global state: tests run side by side).
    fn telemetry(&self) -> McpTelemetry {
        McpTelemetry::from_providers(&self.tracer_provider, &self.meter_provider)
            .with_propagator(TraceContextPropagator::new())
    }

    fn spans_named(&self, name: &str) -> Vec<SpanData> {
        self.spans
            .get_finished_spans()
            .expect("spans")
            .into_iter()
            .filter(|s| s.name == name)
            .collect()
    }

    fn metrics(&self) -> Vec<ResourceMetrics> {
        self.meter_provider.force_flush().expect("flush");
        self.metrics.get_finished_metrics().expect("metrics")
    }
}

fn attr(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

fn string(span: &SpanData, key: &str) -> Option<String> {
    attr(span, key).map(|v| v.as_str().into_owned())
}

/// Every data point of the histogram `name`: its attributes (as `key=value` strings) and
/// count, over all exports.
fn histogram(metrics: &[ResourceMetrics], name: &str) -> Vec<(Vec<String>, u64)> {
    let mut points = Vec::new();
    for rm in metrics {
        for sm in rm.scope_metrics() {
            for m in sm.metrics().filter(|m| m.name() == name) {
                assert_eq!(m.unit(), "s", "{name}'s unit");
                if let AggregatedMetrics::F64(MetricData::Histogram(h)) = m.data() {
                    for p in h.data_points() {
                        assert_eq!(
                            p.bounds().collect::<Vec<_>>(),
                            mcp_otel::DURATION_BUCKETS.to_vec(),
                            "{name}'s buckets"
                        );
                        let mut attrs: Vec<String> = p
                            .attributes()
                            .map(|kv| format!("{}={}", kv.key, kv.value))
                            .collect();
                        attrs.sort();
                        points.push((attrs, p.count()));
                    }
                }
            }
        }
    }
    points
}

async fn bounded<T>(rt: Runtime, what: &str, f: impl Future<Output = T>) -> T {
    rt.timeout(LIMIT, f)
        .await
        .unwrap_or_else(|| panic!("timed out: {what}"))
}

/// The everything server and a tool that answers with the span context it runs in.
fn server(sdk: &Sdk) -> mcp_service::Server {
    everything::server()
        .tool(
            Tool::new("whereami").description("The span it runs in"),
            |_, _| async {
                let cx = Context::current();
                let span = cx.span();
                let sc = span.span_context();
                Ok(CallToolResult::text(format!(
                    "{}/{}",
                    sc.trace_id(),
                    sc.span_id()
                )))
            },
        )
        .telemetry(sdk.telemetry())
}

/// One call inside a trace: one `CLIENT` span and one `SERVER` span, one trace, the server's
/// parent the client's, the client's the caller's; the handler runs in the server span; the
/// attributes of both; then the error rules and the histograms.
async fn one_trace(rt: Runtime) {
    let sdk = Sdk::new();
    let serving = bounded(rt, "serve", rt.serve(server(&sdk), ServerConfig::default()))
        .await
        .expect("serve");
    let builder = ClientBuilder::new("agent", "1.0").telemetry(sdk.telemetry());
    let client = bounded(
        rt,
        "connect",
        rt.connect_with(serving.url(), builder, ClientConfig::new()),
    )
    .await
    .expect("connect");

    // The caller's trace.
    let tracer = sdk.tracer_provider.tracer("agent");
    let parent = tracer.start("agent turn");
    let parent_cx = Context::current_with_span(parent);
    let caller = parent_cx.span().span_context().clone();
    let answer = bounded(
        rt,
        "call",
        client
            .call_tool("whereami", json!({}))
            .with_context(parent_cx.clone()),
    )
    .await
    .expect("call");

    let clients: Vec<_> = sdk
        .spans_named("tools/call whereami")
        .into_iter()
        .filter(|s| s.span_kind == SpanKind::Client)
        .collect();
    let servers: Vec<_> = sdk
        .spans_named("tools/call whereami")
        .into_iter()
        .filter(|s| s.span_kind == SpanKind::Server)
        .collect();
    assert_eq!(
        (clients.len(), servers.len()),
        (1, 1),
        "{rt}: one span each"
    );
    let (c, s) = (&clients[0], &servers[0]);
    assert_eq!(
        c.span_context.trace_id(),
        caller.trace_id(),
        "{rt}: the caller's trace"
    );
    assert_eq!(
        c.parent_span_id,
        caller.span_id(),
        "{rt}: the client span's parent"
    );
    assert_eq!(
        s.span_context.trace_id(),
        caller.trace_id(),
        "{rt}: one trace"
    );
    assert_eq!(
        s.parent_span_id,
        c.span_context.span_id(),
        "{rt}: across the wire"
    );
    // The handler ran inside the server span.
    let text = serde_json::to_value(&answer).expect("json")["content"][0]["text"]
        .as_str()
        .map(str::to_owned);
    assert_eq!(
        text,
        Some(format!(
            "{}/{}",
            s.span_context.trace_id(),
            s.span_context.span_id()
        )),
        "{rt}: the handler's context"
    );
    for span in [c, s] {
        assert_eq!(
            string(span, "mcp.method.name").as_deref(),
            Some("tools/call")
        );
        assert_eq!(
            string(span, "gen_ai.tool.name").as_deref(),
            Some("whereami")
        );
        assert_eq!(
            string(span, "gen_ai.operation.name").as_deref(),
            Some("execute_tool")
        );
        assert_eq!(
            string(span, "mcp.protocol.version").as_deref(),
            Some(mcp_proto::version::ProtocolVersion::LATEST_LEGACY.as_str())
        );
        assert!(
            string(span, "mcp.session.id").is_some(),
            "{rt}: a legacy session"
        );
        assert!(string(span, "jsonrpc.request.id").is_some());
        assert_eq!(
            string(span, "network.protocol.name").as_deref(),
            Some("http")
        );
        assert_eq!(string(span, "network.transport").as_deref(), Some("tcp"));
        assert_eq!(span.status, Status::Unset, "{rt}: a success");
        assert!(attr(span, "error.type").is_none());
    }
    assert_eq!(string(c, "mcp.session.id"), string(s, "mcp.session.id"));
    assert_eq!(
        string(c, "jsonrpc.request.id"),
        string(s, "jsonrpc.request.id")
    );
    assert_eq!(string(c, "server.address").as_deref(), Some("127.0.0.1"));
    let port = serving
        .url()
        .rsplit(':')
        .next()
        .and_then(|p| p.split('/').next());
    assert_eq!(
        attr(c, "server.port").map(|v| v.to_string()).as_deref(),
        port,
        "{rt}: server.port"
    );
    // The server names its client: the connection's address and port (no proxy here), and
    // the HTTP version of the POST.
    assert_eq!(string(s, "client.address").as_deref(), Some("127.0.0.1"));
    let client_port = attr(s, "client.port").map(|v| v.to_string());
    assert!(
        client_port
            .as_deref()
            .is_some_and(|p| p.parse::<u16>().is_ok_and(|p| p > 0)),
        "{rt}: client.port {client_port:?}"
    );
    assert_eq!(
        string(s, "network.protocol.version").as_deref(),
        Some("1.1"),
        "{rt}: network.protocol.version"
    );
    assert!(
        attr(c, "client.address").is_none(),
        "{rt}: not on the client"
    );
    // `initialize` too, with no target.
    assert_eq!(
        sdk.spans_named("initialize").len(),
        2,
        "{rt}: initialize, both sides"
    );

    // A JSON-RPC error: `error.type` is its code, the status its message.
    let unknown = bounded(rt, "unknown tool", client.call_tool("nope", json!({}))).await;
    let code = unknown
        .expect_err("no such tool")
        .code()
        .expect("a JSON-RPC error");
    let failed = sdk.spans_named("tools/call nope");
    assert_eq!(failed.len(), 2, "{rt}: both sides");
    for span in &failed {
        assert_eq!(string(span, "error.type"), Some(code.to_string()), "{rt}");
        assert_eq!(
            string(span, "rpc.response.status_code"),
            Some(code.to_string())
        );
        assert!(
            matches!(&span.status, Status::Error { description } if !description.is_empty()),
            "{rt}: {:?}",
            span.status
        );
    }
    // A tool error: `tool_error`, on both sides.
    let tool_error = bounded(
        rt,
        "tool error",
        client.call_tool("test_error_handling", json!({})),
    )
    .await
    .expect("a result");
    assert_eq!(tool_error.is_error, Some(true));
    let failed = sdk.spans_named("tools/call test_error_handling");
    assert_eq!(failed.len(), 2, "{rt}: both sides");
    for span in &failed {
        assert_eq!(
            string(span, "error.type").as_deref(),
            Some("tool_error"),
            "{rt}"
        );
        assert!(matches!(span.status, Status::Error { .. }), "{rt}");
    }

    bounded(rt, "close", client.close()).await;
    // The session metrics are recorded as the session ends on each side.
    let mut metrics = Vec::new();
    for _ in 0..100 {
        metrics = sdk.metrics();
        if !histogram(&metrics, "mcp.server.session.duration").is_empty()
            && !histogram(&metrics, "mcp.client.session.duration").is_empty()
        {
            break;
        }
        // A pause (the timeout of a future that never ends).
        let _ = rt
            .timeout(Duration::from_millis(20), std::future::pending::<()>())
            .await;
    }
    let client_ops = histogram(&metrics, "mcp.client.operation.duration");
    let server_ops = histogram(&metrics, "mcp.server.operation.duration");
    let has = |points: &[(Vec<String>, u64)], wanted: &[&str]| {
        points
            .iter()
            .any(|(attrs, n)| *n >= 1 && wanted.iter().all(|w| attrs.iter().any(|a| a == w)))
    };
    for (side, points) in [("client", &client_ops), ("server", &server_ops)] {
        assert!(
            has(
                points,
                &["mcp.method.name=tools/call", "gen_ai.tool.name=whereami"]
            ),
            "{rt}: {side} operation: {points:?}"
        );
        assert!(
            has(
                points,
                &[
                    "gen_ai.tool.name=test_error_handling",
                    "error.type=tool_error"
                ]
            ),
            "{rt}: {side} tool error: {points:?}"
        );
        assert!(
            has(points, &[&format!("error.type={code}")]),
            "{rt}: {side} rpc error: {points:?}"
        );
        assert!(
            points.iter().all(|(attrs, _)| !attrs
                .iter()
                .any(|a| a.starts_with("mcp.session.id") || a.starts_with("jsonrpc.request.id"))),
            "{rt}: {side}: no high-cardinality attribute on a metric"
        );
    }
    let sessions = [
        histogram(&metrics, "mcp.client.session.duration"),
        histogram(&metrics, "mcp.server.session.duration"),
    ];
    for points in &sessions {
        assert_eq!(
            points.iter().map(|(_, n)| n).sum::<u64>(),
            1,
            "{rt}: {points:?}"
        );
        assert!(
            has(points, &["network.protocol.name=http"]) && !has(points, &["error.type"]),
            "{rt}: {points:?}"
        );
    }
    serving.shutdown().await;
}

/// A peer's trace context (as another SDK writes it into `params._meta`) is the parent of
/// our server's span; a request without one starts a trace of its own.
async fn peer_traceparent(rt: Runtime) {
    let sdk = Sdk::new();
    let serving = bounded(rt, "serve", rt.serve(server(&sdk), ServerConfig::default()))
        .await
        .expect("serve");
    // A client with no telemetry: it sends `_meta` as it is given.
    let client = bounded(rt, "connect", rt.connect(serving.url()))
        .await
        .expect("connect");
    let params: CallToolRequestParams = serde_json::from_value(json!({
        "name": "echo",
        "arguments": {"text": "hi"},
        "_meta": {
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "tracestate": "rojo=00f067aa0ba902b7"
        }
    }))
    .expect("params");
    bounded(rt, "call", client.request::<CallTool>(params))
        .await
        .expect("call");
    bounded(
        rt,
        "plain call",
        client.call_tool("echo", json!({"text": "x"})),
    )
    .await
    .expect("call");
    let spans = sdk.spans_named("tools/call echo");
    assert_eq!(spans.len(), 2, "{rt}: {spans:?}");
    let s = &spans[0];
    assert_eq!(s.span_kind, SpanKind::Server);
    assert_eq!(
        s.span_context.trace_id().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "{rt}: the peer's trace"
    );
    assert_eq!(s.parent_span_id.to_string(), "00f067aa0ba902b7", "{rt}");
    assert!(s.parent_span_is_remote, "{rt}: a remote parent");
    let plain = &spans[1];
    assert_ne!(
        plain.span_context.trace_id().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "{rt}: no context, a trace of its own"
    );
    bounded(rt, "close", client.close()).await;
    serving.shutdown().await;
}

/// A server→client request (sampling, asked by a tool): a `CLIENT` span on the server, child
/// of the tool's `SERVER` span, and a `SERVER` span on the client, its child across the wire.
async fn server_to_client(rt: Runtime) {
    let sdk = Sdk::new();
    let serving = bounded(rt, "serve", rt.serve(server(&sdk), ServerConfig::default()))
        .await
        .expect("serve");
    let builder = mcp_tests::harness::conformance_client().telemetry(sdk.telemetry());
    let client = bounded(
        rt,
        "connect",
        rt.connect_with(serving.url(), builder, ClientConfig::new()),
    )
    .await
    .expect("connect");
    bounded(
        rt,
        "call",
        client.call_tool("test_sampling", json!({"prompt": "hi"})),
    )
    .await
    .expect("call");
    let tool = sdk.spans_named("tools/call test_sampling");
    let tool_server = tool
        .iter()
        .find(|s| s.span_kind == SpanKind::Server)
        .expect("the tool's server span");
    let sampling = sdk.spans_named("sampling/createMessage");
    assert_eq!(sampling.len(), 2, "{rt}: {sampling:?}");
    let sender = sampling
        .iter()
        .find(|s| s.span_kind == SpanKind::Client)
        .expect("the server's CLIENT span");
    let receiver = sampling
        .iter()
        .find(|s| s.span_kind == SpanKind::Server)
        .expect("the client's SERVER span");
    assert_eq!(
        sender.parent_span_id,
        tool_server.span_context.span_id(),
        "{rt}: inside the tool's span"
    );
    assert_eq!(
        receiver.parent_span_id,
        sender.span_context.span_id(),
        "{rt}: across the wire"
    );
    assert_eq!(
        receiver.span_context.trace_id(),
        tool_server.span_context.trace_id(),
        "{rt}: one trace"
    );
    for span in [sender, receiver] {
        assert_eq!(
            string(span, "mcp.method.name").as_deref(),
            Some("sampling/createMessage")
        );
        assert!(string(span, "mcp.session.id").is_some(), "{rt}");
        assert_eq!(span.status, Status::Unset, "{rt}");
    }
    bounded(rt, "close", client.close()).await;
    serving.shutdown().await;
}

/// The 2026-07-28 era has no session: the same call, one trace, and no `mcp.session.id` on
/// either side; the revision is the modern one; no session histogram.
async fn modern_era(rt: Runtime) {
    let sdk = Sdk::new();
    let serving = bounded(rt, "serve", rt.serve(server(&sdk), ServerConfig::default()))
        .await
        .expect("serve");
    let builder = ClientBuilder::new("agent", "1.0").telemetry(sdk.telemetry());
    let config = ClientConfig::new().with_era(mcp_proto::client::EraMode::Modern);
    let client = bounded(
        rt,
        "connect",
        rt.connect_with(serving.url(), builder, config),
    )
    .await
    .expect("connect");
    let tracer = sdk.tracer_provider.tracer("agent");
    let parent_cx = Context::current_with_span(tracer.start("agent turn"));
    bounded(
        rt,
        "call",
        client
            .call_tool("echo", json!({"text": "hi"}))
            .with_context(parent_cx.clone()),
    )
    .await
    .expect("call");
    let spans = sdk.spans_named("tools/call echo");
    assert_eq!(spans.len(), 2, "{rt}: {spans:?}");
    let c = spans
        .iter()
        .find(|s| s.span_kind == SpanKind::Client)
        .expect("client");
    let s = spans
        .iter()
        .find(|s| s.span_kind == SpanKind::Server)
        .expect("server");
    assert_eq!(
        s.parent_span_id,
        c.span_context.span_id(),
        "{rt}: across the wire"
    );
    for span in [c, s] {
        assert_eq!(string(span, "mcp.session.id"), None, "{rt}: no session");
        assert_eq!(
            string(span, "mcp.protocol.version").as_deref(),
            Some("2026-07-28"),
            "{rt}"
        );
    }
    bounded(rt, "close", client.close()).await;
    serving.shutdown().await;
    let metrics = sdk.metrics();
    assert!(
        histogram(&metrics, "mcp.server.session.duration").is_empty()
            && histogram(&metrics, "mcp.client.session.duration").is_empty(),
        "{rt}: no session, no session metric"
    );
    assert!(!histogram(&metrics, "mcp.client.operation.duration").is_empty());
}

/// Notifications are operations too: the client's `notifications/roots/list_changed` (a
/// `CLIENT` span, the parent of the server's `SERVER` span), and a tool's
/// `notifications/progress` (a `CLIENT` span on the server inside the tool's span, a `SERVER`
/// span on the client). `notifications/initialized` is the session's own (the app's is
/// absorbed): the server reports it, the client does not.
async fn notifications(rt: Runtime) {
    let sdk = Sdk::new();
    let serving = bounded(rt, "serve", rt.serve(server(&sdk), ServerConfig::default()))
        .await
        .expect("serve");
    let builder = ClientBuilder::new("agent", "1.0").telemetry(sdk.telemetry());
    let client = bounded(
        rt,
        "connect",
        rt.connect_with(serving.url(), builder, ClientConfig::new()),
    )
    .await
    .expect("connect");
    let options = mcp_service::client::RequestOptions::new().on_progress(|_| {});
    bounded(
        rt,
        "call",
        client.call_tool_with("test_tool_with_progress", json!({}), options),
    )
    .await
    .expect("call");
    let pair = |name: &str| {
        let spans = sdk.spans_named(name);
        let sender: Vec<_> = spans
            .iter()
            .filter(|s| s.span_kind == SpanKind::Client)
            .cloned()
            .collect();
        let receiver: Vec<_> = spans
            .iter()
            .filter(|s| s.span_kind == SpanKind::Server)
            .cloned()
            .collect();
        (sender, receiver)
    };
    client
        .notify("notifications/roots/list_changed", None)
        .expect("notify");
    // Its own POST: wait until the server reported it.
    for _ in 0..250 {
        if !pair("notifications/roots/list_changed").1.is_empty() {
            break;
        }
        let _ = rt
            .timeout(Duration::from_millis(20), std::future::pending::<()>())
            .await;
    }
    let (sent, received) = pair("notifications/initialized");
    assert_eq!((sent.len(), received.len()), (0, 1), "{rt}");
    let (sent, received) = pair("notifications/roots/list_changed");
    assert_eq!((sent.len(), received.len()), (1, 1), "{rt}");
    assert_eq!(
        received[0].parent_span_id,
        sent[0].span_context.span_id(),
        "{rt}: across the wire"
    );
    assert!(
        attr(&sent[0], "jsonrpc.request.id").is_none(),
        "{rt}: no id"
    );
    let tool = sdk
        .spans_named("tools/call test_tool_with_progress")
        .into_iter()
        .find(|s| s.span_kind == SpanKind::Server)
        .expect("the tool's span");
    let (sent, received) = pair("notifications/progress");
    assert!(!sent.is_empty(), "{rt}: progress reported");
    assert_eq!(sent.len(), received.len(), "{rt}");
    for s in &sent {
        assert_eq!(
            s.parent_span_id,
            tool.span_context.span_id(),
            "{rt}: in the tool"
        );
        assert!(
            received
                .iter()
                .any(|r| r.parent_span_id == s.span_context.span_id()),
            "{rt}: received as the child of what was sent"
        );
    }
    bounded(rt, "close", client.close()).await;
    serving.shutdown().await;
}

mcp_tests::on_each_runtime!(
    one_trace,
    peer_traceparent,
    server_to_client,
    modern_era,
    notifications,
);
