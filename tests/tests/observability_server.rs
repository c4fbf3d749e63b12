//! The server's logs: one `debug` line per exchange (HTTP and JSON-RPC method, tool, short
//! session id, status, duration), a failed tool at `warn`, a panicking handler at `error`,
//! and nothing at `warn` or above for an ordinary session on either adapter. The client's
//! lines are structured too, and neither side ever logs a whole session id.

use std::time::Duration;

use mcp_proto::server::ServerConfig;
use mcp_service::Server;
use mcp_service::schema::Tool;
use mcp_tests::everything;
use mcp_tests::runtime::Runtime;
use serde_json::json;

/// The process-wide log (the server's tasks run on the runtime's threads, so a thread-local
/// subscriber would miss them).
fn log() -> &'static mcp_tests::log_capture::Log {
    mcp_tests::log_capture::global()
}

/// The everything server and a tool that panics.
fn server() -> Server {
    everything::server().tool(
        Tool::new("test_panic").description("Panics"),
        |_, _| async { panic!("the tool broke on purpose") },
    )
}

/// The id every session of these servers gets: its tail must never reach a log.
const SESSION_ID: &str = "d1e2a3d4-secret-tail-of-the-session-id";

fn lines_with<'a>(log: &'a str, level: &str, text: &str) -> Vec<&'a str> {
    log.lines()
        .filter(|l| l.trim_start().starts_with(level) && l.contains(text))
        .collect()
}

/// One ordinary session: initialize, a tool call, a failing tool, a panicking tool, close.
async fn session(rt: Runtime) -> (String, String) {
    let config = ServerConfig::default().with_session_ids(|| SESSION_ID.to_owned());
    let serving = rt.serve(server(), config).await.expect("serve");
    let client = rt.connect(serving.url()).await.expect("connect");
    let echoed = client.call_tool("echo", json!({"text": "hi"})).await;
    assert!(echoed.is_ok(), "{echoed:?}");
    let failed = client.call_tool("test_error_handling", json!({})).await;
    assert!(failed.is_ok(), "a tool error is a result: {failed:?}");
    let panicked = client.call_tool("test_panic", json!({})).await;
    assert!(
        panicked.is_err(),
        "a panic is a JSON-RPC error: {panicked:?}"
    );
    // Let the failure lines be written before the ordinary part begins.
    rt.timeout(Duration::from_millis(100), std::future::pending::<()>())
        .await;
    let calls = log().take();
    let listed = client.list_tools().await;
    assert!(listed.is_ok(), "{listed:?}");
    client.close().await;
    // The connection's end is logged when the server notices it.
    rt.timeout(Duration::from_millis(300), std::future::pending::<()>())
        .await;
    serving.shutdown().await;
    (calls, log().take())
}

#[test]
fn exchanges_tool_failures_and_panics_are_logged_and_an_ordinary_close_is_quiet() {
    log();
    for rt in [Runtime::Tokio, Runtime::Smol] {
        let (calls, ordinary) = rt.block_on(session(rt));
        let exchanges = lines_with(&calls, "DEBUG", " exchange ");
        let echo: Vec<_> = exchanges
            .iter()
            .filter(|l| l.contains("tool=\"echo\""))
            .collect();
        assert_eq!(echo.len(), 1, "{rt}: one line per exchange:\n{calls}");
        let echo = echo[0];
        for field in [
            "method=POST",
            "rpc.method=\"tools/call\"",
            "status=200",
            "ms=",
        ] {
            assert!(echo.contains(field), "{rt}: `{field}` in {echo}");
        }
        // The session: by a short prefix of its id, never the whole id.
        let session = echo
            .split("session=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or_else(|| panic!("{rt}: a session field in {echo}"));
        assert_eq!(session.len(), 8, "{rt}: {echo}");
        assert!(
            !calls.contains("secret-tail") && !ordinary.contains("secret-tail"),
            "{rt}: a whole session id in the log:\n{calls}{ordinary}"
        );
        // The client's own lines: what happened as a message, the session as its prefix.
        let initialized = lines_with(&calls, "DEBUG", "mcp client: initialized");
        assert!(
            initialized.len() == 1 && initialized[0].contains("session=d1e2a3d4 "),
            "{rt}: the client's initialize line:\n{calls}"
        );

        let failed = lines_with(&calls, "WARN", "tool failed");
        assert_eq!(failed.len(), 1, "{rt}: the tool error at warn:\n{calls}");
        assert!(
            failed[0].contains("tool=\"test_error_handling\"")
                && failed[0].contains("intentionally returns an error"),
            "{rt}: {}",
            failed[0]
        );

        let panics = lines_with(&calls, "ERROR", "panicked");
        assert_eq!(panics.len(), 1, "{rt}: the panic at error:\n{calls}");
        assert!(
            panics[0].contains("tool=\"test_panic\"")
                && panics[0].contains("the tool broke on purpose"),
            "{rt}: {}",
            panics[0]
        );

        let loud: Vec<_> = ordinary
            .lines()
            .filter(|l| {
                let l = l.trim_start();
                l.starts_with("ERROR") || l.starts_with("WARN")
            })
            .collect();
        assert!(
            loud.is_empty(),
            "{rt}: an ordinary session and close:\n{ordinary}"
        );
        assert!(
            !lines_with(&ordinary, "DEBUG", "rpc.method=\"tools/list\"").is_empty(),
            "{rt}:\n{ordinary}"
        );
    }
}
