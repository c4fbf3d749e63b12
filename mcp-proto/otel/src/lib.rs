//! OpenTelemetry for MCP, on both sides: [`McpTelemetry`] implements the service layer's
//! [`Telemetry`] hooks with the `opentelemetry` API, following OpenTelemetry's semantic
//! conventions for MCP (`docs/gen-ai/mcp.md` of `open-telemetry/semantic-conventions-genai`,
//! status *Development*, as of its `main` branch at commit `0393513c`, citing semantic
//! conventions v1.41).
//!
//! ```no_run
//! // The application sets up the SDK, its exporter and the W3C propagator (globals), then:
//! let server = mcp_service::Server::new("demo", "1.0").telemetry(mcp_otel::McpTelemetry::global());
//! let client = mcp_service::client::ClientBuilder::new("agent", "1.0")
//!     .telemetry(mcp_otel::McpTelemetry::global());
//! # let _ = (server, client);
//! ```
//!
//! # What it emits
//!
//! One span per request or notification, named `{mcp.method.name} {target}` (the target: the tool of a
//! `tools/call`, the prompt of a `prompts/get`; the resource URI only with
//! [`McpTelemetry::resource_uri_in_span_name`]; else the method alone), of kind `CLIENT` on
//! the side that sends the request and `SERVER` on the side that answers it (a server's
//! sampling, elicitation and roots requests: `CLIENT` on the server, `SERVER` on the client).
//! The sender injects its span's context into the request's `params._meta` with the
//! configured propagator (`traceparent`, `tracestate`, `baggage`, unprefixed); the receiver
//! extracts it and makes it its span's parent (linking the ambient context, if any), and
//! runs the handler inside its span.
//!
//! Attributes: `mcp.method.name`, `gen_ai.tool.name`, `gen_ai.prompt.name`,
//! `mcp.resource.uri`, `gen_ai.operation.name` (`execute_tool`, for `tools/call` only),
//! `jsonrpc.request.id`, `mcp.protocol.version`, `mcp.session.id` (legacy-era sessions only:
//! the 2026-07-28 era has none), `network.protocol.name` (`http`), `network.protocol.version`
//! (when the transport knows it), `network.transport` (`tcp`), `server.address` and
//! `server.port` on the client. On failure: `error.type` and the span status `ERROR`:
//!
//! | the operation ended with | `error.type` | `rpc.response.status_code` | status description |
//! |---|---|---|---|
//! | a JSON-RPC error | its code (`-32602`) | its code | its message |
//! | a `tools/call` result with `isError: true` | `tool_error` | | |
//! | no answer: timeout, connection closed, cancelled | `timeout`, `closed`, `cancelled`, `_OTHER` | | what happened |
//!
//! Metrics (histograms in seconds, with the conventions' advisory bucket boundaries
//! [`DURATION_BUCKETS`]): `mcp.client.operation.duration` (the sender's),
//! `mcp.server.operation.duration` (the receiver's), `mcp.client.session.duration`,
//! `mcp.server.session.duration` (legacy-era sessions; `error.type` `timeout` when the
//! server's idle time ran out, `session_expired` when the client was told its session is
//! gone).

#![forbid(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use mcp_service::schema::JsonObject;
use mcp_service::server::BoxFuture;
use mcp_service::telemetry::{
    Direction, End, Operation, OperationScope, SessionInfo, SessionScope, Side, Telemetry,
};
use opentelemetry::context::FutureExt as _;
use opentelemetry::global::{self, BoxedTracer};
use opentelemetry::metrics::{Histogram, Meter, MeterProvider};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{Link, SpanKind, Status, TraceContextExt as _, Tracer, TracerProvider};
use opentelemetry::{Context, InstrumentationScope, KeyValue};

/// The advisory bucket boundaries (seconds) the conventions give the four histograms.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// The instrumentation scope of the spans and metrics (`mcp-otel`, this crate's version).
pub fn scope() -> InstrumentationScope {
    InstrumentationScope::builder("mcp-otel")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build()
}

/// The service layer's [`Telemetry`] on OpenTelemetry. See the [crate docs](crate).
pub struct McpTelemetry {
    tracer: BoxedTracer,
    client_operation: Histogram<f64>,
    server_operation: Histogram<f64>,
    client_session: Histogram<f64>,
    server_session: Histogram<f64>,
    /// `None`: the global text-map propagator (set the W3C one with
    /// `global::set_text_map_propagator(TraceContextPropagator::new())`).
    propagator: Option<Box<dyn TextMapPropagator + Send + Sync>>,
    resource_uri_in_span_name: bool,
}

impl std::fmt::Debug for McpTelemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTelemetry")
            .field("own_propagator", &self.propagator.is_some())
            .field("resource_uri_in_span_name", &self.resource_uri_in_span_name)
            .finish_non_exhaustive()
    }
}

impl McpTelemetry {
    /// Spans from `tracer`, metrics from `meter`.
    pub fn new<T>(tracer: T, meter: &Meter) -> Self
    where
        T: Tracer + Send + Sync + 'static,
        T::Span: Send + Sync + 'static,
    {
        let histogram = |name: &'static str, description: &'static str| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(description)
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build()
        };
        McpTelemetry {
            tracer: BoxedTracer::new(Box::new(tracer)),
            client_operation: histogram(
                "mcp.client.operation.duration",
                "The duration of the MCP request or notification as observed on the sender \
                 from the time it was sent until the response or ack is received.",
            ),
            server_operation: histogram(
                "mcp.server.operation.duration",
                "MCP request or notification duration as observed on the receiver from the \
                 time it was received until the result or ack is sent.",
            ),
            client_session: histogram(
                "mcp.client.session.duration",
                "The duration of the MCP session as observed on the MCP client.",
            ),
            server_session: histogram(
                "mcp.server.session.duration",
                "The duration of the MCP session as observed on the MCP server.",
            ),
            propagator: None,
            resource_uri_in_span_name: false,
        }
    }

    /// Spans and metrics from these providers (scope [`scope`]).
    pub fn from_providers<P, M>(tracer_provider: &P, meter_provider: &M) -> Self
    where
        P: TracerProvider,
        P::Tracer: Send + Sync + 'static,
        <P::Tracer as Tracer>::Span: Send + Sync + 'static,
        M: MeterProvider,
    {
        Self::new(
            tracer_provider.tracer_with_scope(scope()),
            &meter_provider.meter_with_scope(scope()),
        )
    }

    /// Spans and metrics from the global providers (scope [`scope`]).
    pub fn global() -> Self {
        Self::new(
            global::tracer_with_scope(scope()),
            &global::meter_with_scope(scope()),
        )
    }

    /// Injects and extracts trace context with `propagator` instead of the global one.
    #[must_use]
    pub fn with_propagator(
        mut self,
        propagator: impl TextMapPropagator + Send + Sync + 'static,
    ) -> Self {
        self.propagator = Some(Box::new(propagator));
        self
    }

    /// Names the spans of `resources/read`, `resources/subscribe` and
    /// `resources/unsubscribe` after their URI (`resources/read file:///a.txt`). Off by
    /// default: URIs make span names high-cardinality.
    #[must_use]
    pub fn resource_uri_in_span_name(mut self, on: bool) -> Self {
        self.resource_uri_in_span_name = on;
        self
    }

    fn with_propagator_do<R>(&self, mut f: impl FnMut(&dyn TextMapPropagator) -> R) -> R {
        match &self.propagator {
            Some(p) => f(&**p),
            None => global::get_text_map_propagator(|p| f(p)),
        }
    }

    fn start(
        &self,
        operation: &Operation,
        kind: SpanKind,
        parent: &Context,
        links: Vec<Link>,
    ) -> Scope {
        let mut attributes = common_attributes(operation);
        let histogram = match operation.direction {
            Direction::Outgoing => self.client_operation.clone(),
            Direction::Incoming => self.server_operation.clone(),
        };
        let metric_attributes = attributes.clone();
        if let Some(id) = &operation.request_id {
            attributes.push(KeyValue::new("jsonrpc.request.id", id.clone()));
        }
        if let Some(id) = &operation.session_id {
            attributes.push(KeyValue::new("mcp.session.id", id.clone()));
        }
        if let Some(uri) = &operation.resource_uri {
            attributes.push(KeyValue::new("mcp.resource.uri", uri.clone()));
        }
        if operation.side == Side::Server
            && let Some(address) = &operation.network.peer_address
        {
            attributes.push(KeyValue::new("client.address", address.clone()));
            if let Some(port) = operation.network.peer_port {
                attributes.push(KeyValue::new("client.port", i64::from(port)));
            }
        }
        let span = self
            .tracer
            .span_builder(operation.span_name(self.resource_uri_in_span_name))
            .with_kind(kind)
            .with_attributes(attributes)
            .with_links(links)
            .start_with_context(&self.tracer, parent);
        Scope {
            cx: parent.with_span(span),
            started: Instant::now(),
            histogram,
            attributes: metric_attributes,
            ended: AtomicBool::new(false),
        }
    }
}

/// The attributes of both the span and the operation metric.
fn common_attributes(operation: &Operation) -> Vec<KeyValue> {
    let mut attributes = vec![KeyValue::new("mcp.method.name", operation.method.clone())];
    if let Some(tool) = &operation.tool {
        attributes.push(KeyValue::new("gen_ai.tool.name", tool.clone()));
    }
    if let Some(prompt) = &operation.prompt {
        attributes.push(KeyValue::new("gen_ai.prompt.name", prompt.clone()));
    }
    if operation.method == "tools/call" {
        attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
    }
    if let Some(version) = &operation.protocol_version {
        attributes.push(KeyValue::new("mcp.protocol.version", version.clone()));
    }
    network_attributes(operation.side, &operation.network, &mut attributes);
    attributes
}

/// `network.*`, and on a client `server.address`/`server.port`.
fn network_attributes(
    side: Side,
    network: &mcp_service::telemetry::Network,
    attributes: &mut Vec<KeyValue>,
) {
    attributes.push(KeyValue::new("network.protocol.name", "http"));
    if let Some(version) = &network.http_version {
        attributes.push(KeyValue::new("network.protocol.version", version.clone()));
    }
    attributes.push(KeyValue::new("network.transport", "tcp"));
    if side == Side::Client
        && let Some(address) = &network.peer_address
    {
        attributes.push(KeyValue::new("server.address", address.clone()));
        if let Some(port) = network.peer_port {
            attributes.push(KeyValue::new("server.port", i64::from(port)));
        }
    }
}

impl Telemetry for McpTelemetry {
    fn outgoing(&self, operation: &Operation, meta: &mut JsonObject) -> Arc<dyn OperationScope> {
        let scope = self.start(operation, SpanKind::Client, &Context::current(), Vec::new());
        self.with_propagator_do(|p| p.inject_context(&scope.cx, &mut MetaInjector(meta)));
        Arc::new(scope)
    }

    fn incoming(
        &self,
        operation: &Operation,
        meta: Option<&JsonObject>,
    ) -> Arc<dyn OperationScope> {
        let ambient = Context::current();
        let extracted = meta.map(|meta| {
            self.with_propagator_do(|p| {
                p.extract_with_context(&Context::new(), &MetaExtractor(meta))
            })
        });
        let scope = match extracted {
            Some(remote) if remote.span().span_context().is_valid() => {
                // The sender's context is the parent; the ambient one (an HTTP server span,
                // say) is linked.
                let ambient_span = ambient.span().span_context().clone();
                let links = if ambient_span.is_valid() {
                    vec![Link::with_context(ambient_span)]
                } else {
                    Vec::new()
                };
                self.start(operation, SpanKind::Server, &remote, links)
            }
            _ => self.start(operation, SpanKind::Server, &ambient, Vec::new()),
        };
        Arc::new(scope)
    }

    fn session(&self, session: &SessionInfo) -> Box<dyn SessionScope> {
        let mut attributes = Vec::new();
        if let Some(version) = &session.protocol_version {
            attributes.push(KeyValue::new("mcp.protocol.version", version.clone()));
        }
        network_attributes(session.side, &session.network, &mut attributes);
        Box::new(Session {
            histogram: match session.side {
                Side::Client => self.client_session.clone(),
                Side::Server => self.server_session.clone(),
            },
            started: Instant::now(),
            attributes,
        })
    }
}

/// One operation: its span (in its context) and the metric to record at its end.
struct Scope {
    cx: Context,
    started: Instant,
    histogram: Histogram<f64>,
    attributes: Vec<KeyValue>,
    ended: AtomicBool,
}

impl OperationScope for Scope {
    fn instrument(&self, work: BoxFuture<'static, ()>) -> BoxFuture<'static, ()> {
        Box::pin(work.with_context(self.cx.clone()))
    }

    fn end(&self, end: End<'_>) {
        if self.ended.swap(true, Ordering::AcqRel) {
            return;
        }
        let span = self.cx.span();
        let mut attributes = self.attributes.clone();
        let mut fail = |error_type: String, description: &str, code: Option<String>| {
            span.set_attribute(KeyValue::new("error.type", error_type.clone()));
            attributes.push(KeyValue::new("error.type", error_type));
            if let Some(code) = code {
                span.set_attribute(KeyValue::new("rpc.response.status_code", code.clone()));
                attributes.push(KeyValue::new("rpc.response.status_code", code));
            }
            span.set_status(Status::error(description.to_owned()));
        };
        match end {
            End::Ok => {}
            End::ToolError => fail("tool_error".to_owned(), "", None),
            End::RpcError { code, message } => {
                fail(code.to_string(), message, Some(code.to_string()));
            }
            End::Failed {
                error_type,
                message,
            } => fail(error_type.to_owned(), message, None),
        }
        span.end();
        self.histogram
            .record(self.started.elapsed().as_secs_f64(), &attributes);
    }
}

/// One session: the metric to record at its end.
struct Session {
    histogram: Histogram<f64>,
    started: Instant,
    attributes: Vec<KeyValue>,
}

impl SessionScope for Session {
    fn end(self: Box<Self>, error_type: Option<&str>) {
        let mut attributes = self.attributes;
        if let Some(error_type) = error_type {
            attributes.push(KeyValue::new("error.type", error_type.to_owned()));
        }
        self.histogram
            .record(self.started.elapsed().as_secs_f64(), &attributes);
    }
}

/// Writes the propagator's fields into `params._meta`.
struct MetaInjector<'a>(&'a mut JsonObject);

impl Injector for MetaInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0
            .insert(key.to_owned(), serde_json::Value::String(value));
    }
}

/// Reads the propagator's fields from `params._meta` (string members only).
struct MetaExtractor<'a>(&'a JsonObject);

impl Extractor for MetaExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(serde_json::Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}
