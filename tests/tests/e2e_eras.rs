//! The era × runtime end-to-end matrix (issue 8: "both eras pass the same end-to-end matrix
//! on both runtimes"). ONE scenario, [`scenario`], run for every era case ([`EraCase`]) and
//! every (client runtime, server runtime) pair in {tokio, smol}², over loopback against the
//! everything server ([`mcp_tests::everything::server`]) plus one tool that waits to be
//! cancelled. The [`matrix!`] invocation at the end names each cell
//! `matrix_<era>_<client>_to_<server>`.
//!
//! Each cell checks, in order (a failing check panics with its name):
//! 1. `version`: the negotiated revision and the era the client reached (S-NEW-10): legacy
//!    cases end at a legacy revision after `initialize`; modern cases at 2026-07-28 with
//!    `server/discover` and no `initialize` on the wire (S-NEW-4); the server handler sees
//!    the same revision for its request.
//! 2. `tools/list` and 3. a `tools/call` echo.
//! 4. `sampling` and 5. `elicitation` round trips through the typed client's handlers: a
//!    real server→client request whose answer the client POSTs back (legacy), or an MRTR
//!    round — the call POSTed twice, no response POSTed (S-NEW-5).
//! 6. `notifications`: legacy — a session log message delivered on the GET stream opened by
//!    continuous listening (S-GET-1), then `tools/list_changed` there after the server adds a
//!    tool; modern — `subscriptions/listen` POSTed and registered on the server (S-NEW-9, no
//!    GET, S-NEW-1), and `tools/list_changed` delivered on it after the server adds a tool.
//! 7. `cancellation`: a call whose future is dropped; the server handler observes the
//!    cancellation in both eras; legacy POSTs `notifications/cancelled` (S-CANCEL-*), modern
//!    sends none (closing the stream is the cancellation, S-NEW-6).
//! 8. `close`: legacy sends DELETE (S-SESS-8); modern has nothing to delete.
//!
//! Four control tests (`control_forced_modern_*`, one per runtime pair) show the fallback is
//! not vacuous: a client forced to `EraMode::Modern` against a `legacy_only()` server fails
//! to connect instead of ending legacy.
//!
//! What went over the wire is observed with the client's per-request header callback
//! ([`ClientConfig::with_header_fn`]), which sees every HTTP request the core builds: its
//! kind, HTTP method and JSON-RPC method. Every await is bounded.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http::Method;
use mcp_proto::ProtocolVersion;
use mcp_proto::client::{ClientConfig, EraMode, HttpRequestKind};
use mcp_proto::server::ServerConfig;
use mcp_service::client::ServerNotification;
use mcp_service::{CallToolResult, Server, Tool};
use mcp_tests::everything;
use mcp_tests::harness::{SAMPLING_ANSWER, conformance_client};
use mcp_tests::runtime::{Client, Runtime, Serving};
use serde_json::json;
use tokio::sync::Notify;

/// Generous for a loaded 2-core machine; a healthy cell takes well under a second.
const LIMIT: Duration = Duration::from_secs(20);

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// The four era cases of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EraCase {
    /// Client `EraMode::Legacy` against the default (dual-era) server.
    Legacy,
    /// Client `EraMode::Auto` against the default server: ends modern.
    AutoModern,
    /// Client `EraMode::Auto` against a `legacy_only()` server: falls back to a legacy
    /// revision.
    AutoLegacy,
    /// Client `EraMode::Modern` against the default server.
    Modern,
}

impl EraCase {
    fn client_mode(self) -> EraMode {
        match self {
            EraCase::Legacy => EraMode::Legacy,
            EraCase::AutoModern | EraCase::AutoLegacy => EraMode::Auto,
            EraCase::Modern => EraMode::Modern,
        }
    }

    fn server_config(self) -> ServerConfig {
        match self {
            EraCase::AutoLegacy => ServerConfig::default().legacy_only(),
            _ => ServerConfig::default(),
        }
    }

    /// Whether the session must end in the modern era.
    fn ends_modern(self) -> bool {
        matches!(self, EraCase::AutoModern | EraCase::Modern)
    }

    /// Whether the client probes with `server/discover` first.
    fn probes(self) -> bool {
        !matches!(self, EraCase::Legacy)
    }
}

/// One HTTP request the client core built, as its header callback saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sent {
    kind: HttpRequestKind,
    method: Method,
    rpc: Option<String>,
    session: Option<String>,
}

#[derive(Clone, Default)]
struct Wire(Arc<Mutex<Vec<Sent>>>);

impl Wire {
    fn all(&self) -> Vec<Sent> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn mark(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    fn since(&self, mark: usize) -> Vec<Sent> {
        self.all().split_off(mark)
    }

    fn count_rpc(sent: &[Sent], rpc: &str) -> usize {
        sent.iter()
            .filter(|s| s.rpc.as_deref() == Some(rpc))
            .count()
    }

    /// POSTs carrying no JSON-RPC method: responses to the server's requests.
    fn responses(sent: &[Sent]) -> usize {
        sent.iter()
            .filter(|s| s.kind == HttpRequestKind::Post && s.rpc.is_none())
            .count()
    }
}

/// What the `wait_for_cancel` tool observed.
#[derive(Default)]
struct CancelProbe {
    started: Notify,
    ended: Notify,
    /// 1 when the handler saw `ctx.cancelled()` resolve, 2 when it was dropped first.
    how: AtomicUsize,
}

struct OnDrop(Arc<CancelProbe>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        let _ = self
            .0
            .how
            .compare_exchange(0, 2, Ordering::SeqCst, Ordering::SeqCst);
        self.0.ended.notify_one();
    }
}

/// The everything server plus `wait_for_cancel`, a tool that only ends when cancelled, and
/// `version_seen`, which returns the revision the server handler sees for its request.
fn server(probe: Arc<CancelProbe>) -> Server {
    everything::server()
        .tool(
            Tool::new("version_seen").description("The revision of this request, as served"),
            |ctx, _| async move {
                Ok(CallToolResult::text(
                    ctx.protocol_version()
                        .map_or("none", ProtocolVersion::as_str),
                ))
            },
        )
        .tool(
            Tool::new("wait_for_cancel").description("Waits until the call is cancelled"),
            move |ctx, _| {
                let probe = probe.clone();
                async move {
                    let _guard = OnDrop(probe.clone());
                    probe.started.notify_one();
                    ctx.cancelled().await;
                    let _ = probe
                        .how
                        .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst);
                    Ok(CallToolResult::text("cancelled"))
                }
            },
        )
}

async fn next_matching<T>(
    notes: &mut mcp_service::client::Notifications,
    what: &str,
    pick: impl Fn(&ServerNotification) -> Option<T>,
) -> T {
    bounded(what, async {
        loop {
            let n = notes.next().await.expect("the notification stream ended");
            if let Some(t) = pick(&n) {
                return t;
            }
        }
    })
    .await
}

/// The one scenario of the matrix.
async fn scenario(era: EraCase, client_rt: Runtime, server_rt: Runtime) {
    let probe = Arc::new(CancelProbe::default());
    let server = server(probe.clone());
    let serving: Serving = bounded("bind", server_rt.serve(server.clone(), era.server_config()))
        .await
        .expect("serve");

    let wire = Wire::default();
    let log = wire.clone();
    let config = ClientConfig::new()
        .with_era(era.client_mode())
        .with_continuous_listening(true)
        .with_subscription_filter(json!({"toolsListChanged": true}))
        .with_header_fn(move |ctx, _| {
            log.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Sent {
                    kind: ctx.kind,
                    method: ctx.method.clone(),
                    rpc: ctx.rpc_method.map(str::to_owned),
                    session: ctx.session_id.map(str::to_owned),
                });
        });
    // `connect_with` is `start` + `initialize`; split so that the notification stream exists
    // before the first byte (the modern listen stream's acknowledgement comes right away).
    let client: Client = client_rt
        .start(serving.url(), conformance_client(), config)
        .expect("start");
    let mut notes = client.notifications();
    bounded("initialize", client.initialize())
        .await
        .unwrap_or_else(|e| panic!("[version] connect failed: {e}"));

    // 1. version / era.
    let version = client.protocol_version().expect("[version] negotiated");
    let opening = wire.all();
    let discovers = Wire::count_rpc(&opening, "server/discover");
    let initializes = Wire::count_rpc(&opening, "initialize");
    if era.ends_modern() {
        assert_eq!(
            version,
            ProtocolVersion::V2026_07_28,
            "[version] {opening:?}"
        );
        assert_eq!(initializes, 0, "[version] no initialize: {opening:?}");
    } else {
        assert!(
            ProtocolVersion::LEGACY.contains(&version),
            "[version] a legacy revision, got {version:?}"
        );
        assert_eq!(version, ProtocolVersion::LATEST_LEGACY, "[version]");
        assert_eq!(initializes, 1, "[version] {opening:?}");
    }
    assert_eq!(
        discovers,
        usize::from(era.probes()),
        "[version] the probe: {opening:?}"
    );
    let info = client.server_info().expect("[version] server info");
    assert_eq!(info.server_info.name, "mcp-everything", "[version]");
    assert_eq!(info.protocol_version, version.as_str(), "[version]");

    // The server handler sees the same revision (from `_meta` in the modern era, from the
    // session's `initialize` in the legacy one).
    let seen = bounded("version_seen", client.call_tool("version_seen", json!({})))
        .await
        .expect("[version] version_seen");
    assert_eq!(
        seen.first_text(),
        Some(version.as_str()),
        "[version] as served"
    );

    // 2. tools/list.
    let tools = bounded("tools/list", client.list_tools())
        .await
        .expect("[tools/list]");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for name in [
        "echo",
        "test_sampling",
        "test_elicitation",
        "test_notify_session",
        "wait_for_cancel",
    ] {
        assert!(names.contains(&name), "[tools/list] {name} in {names:?}");
    }
    assert!(!names.contains(&"added_later"), "[tools/list] {names:?}");

    // 3. tools/call echo.
    let echoed = bounded(
        "echo",
        client.call_tool("echo", json!({"text": "over the matrix"})),
    )
    .await
    .expect("[echo]");
    assert_eq!(echoed.first_text(), Some("over the matrix"), "[echo]");

    // 4. sampling.
    let mark = wire.mark();
    let sampled = bounded(
        "sampling",
        client.call_tool("test_sampling", json!({"prompt": "hi"})),
    )
    .await
    .expect("[sampling]");
    assert_eq!(
        sampled.first_text(),
        Some(format!("LLM response: {SAMPLING_ANSWER}").as_str()),
        "[sampling]"
    );
    check_round_trip("sampling", era, &wire.since(mark));

    // 5. elicitation.
    let mark = wire.mark();
    let elicited = bounded(
        "elicitation",
        client.call_tool("test_elicitation", json!({"message": "who?"})),
    )
    .await
    .expect("[elicitation]");
    let text = elicited.first_text().unwrap_or_default().to_owned();
    assert!(
        text.starts_with("User response: action=accept") && text.contains("testuser"),
        "[elicitation] {text}"
    );
    check_round_trip("elicitation", era, &wire.since(mark));

    // 6. notifications.
    if era.ends_modern() {
        next_matching(
            &mut notes,
            "[notifications] subscriptions/listen acknowledged",
            |n| match n {
                ServerNotification::Other(n)
                    if &*n.method == "notifications/subscriptions/acknowledged" =>
                {
                    Some(())
                }
                _ => None,
            },
        )
        .await;
        bounded("[notifications] the listen stream registers", async {
            while server.listener_count() == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        let sent = wire.all();
        assert_eq!(
            Wire::count_rpc(&sent, "subscriptions/listen"),
            1,
            "[notifications] {sent:?}"
        );
        assert!(
            sent.iter().all(|s| s.method != Method::GET),
            "[notifications] no GET in the modern era: {sent:?}"
        );
    } else {
        // The session-wide log goes out on the GET stream; retried until that stream is up.
        bounded("[notifications] a log on the GET stream", async {
            loop {
                let r = client
                    .call_tool("test_notify_session", json!({}))
                    .await
                    .expect("[notifications] test_notify_session");
                assert_eq!(r.first_text(), Some("notification sent"));
                let got = tokio::time::timeout(Duration::from_millis(500), async {
                    loop {
                        match notes.next().await {
                            Some(ServerNotification::Log(l))
                                if l.data == json!("notification on the GET stream") =>
                            {
                                return;
                            }
                            Some(_) => {}
                            None => panic!("[notifications] the stream ended"),
                        }
                    }
                })
                .await;
                if got.is_ok() {
                    return;
                }
            }
        })
        .await;
        let sent = wire.all();
        assert!(
            sent.iter()
                .any(|s| s.kind == HttpRequestKind::Listen && s.method == Method::GET),
            "[notifications] a GET listening stream: {sent:?}"
        );
        assert_eq!(
            Wire::count_rpc(&sent, "subscriptions/listen"),
            0,
            "[notifications] {sent:?}"
        );
    }
    server.add_tool(Tool::new("added_later"), |_, _| async {
        Ok(CallToolResult::text("later"))
    });
    next_matching(&mut notes, "[notifications] tools/list_changed", |n| {
        matches!(n, ServerNotification::ToolListChanged).then_some(())
    })
    .await;
    let tools = bounded("tools/list again", client.list_tools())
        .await
        .expect("[notifications] tools/list");
    assert!(
        tools.iter().any(|t| t.name == "added_later"),
        "[notifications] the new tool is listed"
    );

    // 7. cancellation.
    let mark = wire.mark();
    {
        let call = client.call_tool("wait_for_cancel", json!({}));
        tokio::pin!(call);
        bounded("[cancellation] the handler starts", async {
            tokio::select! {
                r = &mut call => panic!("[cancellation] the call ended: {r:?}"),
                () = probe.started.notified() => {}
            }
        })
        .await;
        // Dropping the call's future cancels it.
    }
    bounded(
        "[cancellation] the handler observes the cancellation",
        probe.ended.notified(),
    )
    .await;
    assert_ne!(probe.how.load(Ordering::SeqCst), 0, "[cancellation]");
    if era.ends_modern() {
        // A round trip after the handler ended: a cancellation notification would be out.
        bounded(
            "echo after cancel",
            client.call_tool("echo", json!({"text": "x"})),
        )
        .await
        .expect("[cancellation] the client still works");
        let sent = wire.since(mark);
        assert_eq!(
            Wire::count_rpc(&sent, "notifications/cancelled"),
            0,
            "[cancellation] modern cancels by closing the stream: {sent:?}"
        );
    } else {
        bounded("[cancellation] notifications/cancelled is POSTed", async {
            while Wire::count_rpc(&wire.since(mark), "notifications/cancelled") == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        bounded(
            "echo after cancel",
            client.call_tool("echo", json!({"text": "x"})),
        )
        .await
        .expect("[cancellation] the session still works");
    }

    // 8. close.
    let mark = wire.mark();
    let session = wire.all().iter().rev().find_map(|s| s.session.clone());
    bounded("close", client.close()).await;
    let sent = wire.since(mark);
    let deletes: Vec<&Sent> = sent
        .iter()
        .filter(|s| s.kind == HttpRequestKind::Delete)
        .collect();
    if era.ends_modern() {
        assert!(session.is_none(), "[close] no session in the modern era");
        assert!(deletes.is_empty(), "[close] nothing to delete: {sent:?}");
    } else {
        assert!(session.is_some(), "[close] a legacy session");
        assert_eq!(deletes.len(), 1, "[close] one DELETE: {sent:?}");
        assert_eq!(deletes[0].method, Method::DELETE, "[close]");
        assert_eq!(deletes[0].session, session, "[close] of the session");
    }
    bounded("shutdown", serving.shutdown()).await;
}

/// The wire-visible shape of a server→client round trip inside one `tools/call`.
fn check_round_trip(what: &str, era: EraCase, sent: &[Sent]) {
    let calls = Wire::count_rpc(sent, "tools/call");
    let responses = Wire::responses(sent);
    if era.ends_modern() {
        assert_eq!(
            calls, 2,
            "[{what}] an MRTR round: the call, then its retry: {sent:?}"
        );
        assert_eq!(
            responses, 0,
            "[{what}] no server request to answer: {sent:?}"
        );
    } else {
        assert_eq!(calls, 1, "[{what}] one call: {sent:?}");
        assert_eq!(
            responses, 1,
            "[{what}] the answer to the server's request is POSTed: {sent:?}"
        );
    }
}

/// The control of the `auto→legacy` column: a client forced to `EraMode::Modern` against a
/// `legacy_only()` server does not fall back — it fails to connect (S-NEW-10: the era may be
/// forced by configuration), having probed with `server/discover` and sent no `initialize`.
async fn forced_modern_refuses_a_legacy_server(client_rt: Runtime, server_rt: Runtime) {
    let probe = Arc::new(CancelProbe::default());
    let serving = bounded(
        "bind",
        server_rt.serve(server(probe), ServerConfig::default().legacy_only()),
    )
    .await
    .expect("serve");
    let wire = Wire::default();
    let log = wire.clone();
    let config = ClientConfig::new()
        .with_era(EraMode::Modern)
        .with_header_fn(move |ctx, _| {
            log.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Sent {
                    kind: ctx.kind,
                    method: ctx.method.clone(),
                    rpc: ctx.rpc_method.map(str::to_owned),
                    session: ctx.session_id.map(str::to_owned),
                });
        });
    let refused = bounded(
        "connect",
        client_rt.connect_with(serving.url(), conformance_client(), config),
    )
    .await;
    assert!(
        refused.is_err(),
        "a modern-only client must not settle for a legacy server"
    );
    let sent = wire.all();
    assert!(Wire::count_rpc(&sent, "server/discover") >= 1, "{sent:?}");
    assert_eq!(Wire::count_rpc(&sent, "initialize"), 0, "{sent:?}");
    bounded("shutdown", serving.shutdown()).await;
}

/// One test per cell: `matrix_<era>_<client>_to_<server>`.
macro_rules! matrix {
    ($($name:ident: $era:ident, $client:ident, $server:ident;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                scenario(EraCase::$era, Runtime::$client, Runtime::$server).await
            }
        )*
    };
}

matrix! {
    matrix_legacy_tokio_to_tokio: Legacy, Tokio, Tokio;
    matrix_legacy_tokio_to_smol: Legacy, Tokio, Smol;
    matrix_legacy_smol_to_tokio: Legacy, Smol, Tokio;
    matrix_legacy_smol_to_smol: Legacy, Smol, Smol;
    matrix_auto_modern_tokio_to_tokio: AutoModern, Tokio, Tokio;
    matrix_auto_modern_tokio_to_smol: AutoModern, Tokio, Smol;
    matrix_auto_modern_smol_to_tokio: AutoModern, Smol, Tokio;
    matrix_auto_modern_smol_to_smol: AutoModern, Smol, Smol;
    matrix_auto_legacy_tokio_to_tokio: AutoLegacy, Tokio, Tokio;
    matrix_auto_legacy_tokio_to_smol: AutoLegacy, Tokio, Smol;
    matrix_auto_legacy_smol_to_tokio: AutoLegacy, Smol, Tokio;
    matrix_auto_legacy_smol_to_smol: AutoLegacy, Smol, Smol;
    matrix_modern_tokio_to_tokio: Modern, Tokio, Tokio;
    matrix_modern_tokio_to_smol: Modern, Tokio, Smol;
    matrix_modern_smol_to_tokio: Modern, Smol, Tokio;
    matrix_modern_smol_to_smol: Modern, Smol, Smol;
}

/// The control cells: one test per runtime pair.
macro_rules! control {
    ($($name:ident: $client:ident, $server:ident;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                forced_modern_refuses_a_legacy_server(Runtime::$client, Runtime::$server).await
            }
        )*
    };
}

control! {
    control_forced_modern_tokio_to_tokio_legacy_only: Tokio, Tokio;
    control_forced_modern_tokio_to_smol_legacy_only: Tokio, Smol;
    control_forced_modern_smol_to_tokio_legacy_only: Smol, Tokio;
    control_forced_modern_smol_to_smol_legacy_only: Smol, Smol;
}
