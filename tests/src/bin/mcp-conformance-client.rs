//! The conformance client: the official suite (`@modelcontextprotocol/conformance`) runs it
//! against its mock servers, with the scenario in `MCP_CONFORMANCE_SCENARIO` and the server URL
//! as the last argument.
//!
//! ```text
//! mcp-conformance-client --runtime tokio|smol <url>
//! ```
//!
//! The runner appends the mock server's URL as the last argument and names the scenario in
//! `MCP_CONFORMANCE_SCENARIO`: `initialize`, `tools_call`,
//! `elicitation-sep1034-client-defaults` or `sse-retry`. Exits 0 when the scenario's work is
//! done, 1 with a one-line error otherwise (an unknown scenario too), 2 on bad arguments.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use mcp_proto::client::ClientConfig;
use mcp_proto::schema::{ElicitAction, ElicitRequestParams, ElicitResult, ElicitValue};
use mcp_proto::service::Error;
use mcp_proto::service::client::{Client as ServiceClient, ClientBuilder};
use mcp_tests::runtime::Runtime;

const USAGE: &str = "usage: mcp-conformance-client [--runtime tokio|smol] <url>
  --runtime   the adapter to connect with: tokio (default) or smol
  <url>       the MCP endpoint (the conformance runner appends it)
  MCP_CONFORMANCE_SCENARIO names the scenario: initialize, tools_call,
  elicitation-sep1034-client-defaults, sse-retry";

/// How long `close` may take before the process gives up on it.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

fn parse_args() -> Result<(Runtime, String), String> {
    let mut runtime = "tokio".to_owned();
    let mut url = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runtime" => runtime = args.next().ok_or("--runtime needs a name")?,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other if other.starts_with("--") => {
                return Err(format!("unknown argument {other:?}\n{USAGE}"));
            }
            other => {
                if url.replace(other.to_owned()).is_some() {
                    return Err(format!("more than one URL\n{USAGE}"));
                }
            }
        }
    }
    let runtime = runtime
        .parse()
        .map_err(|e: String| format!("{e}\n{USAGE}"))?;
    let url = url.ok_or_else(|| format!("missing the server URL\n{USAGE}"))?;
    Ok((runtime, url))
}

fn builder() -> ClientBuilder {
    ServiceClient::builder("mcp-conformance-client", env!("CARGO_PKG_VERSION"))
}

/// Connects, runs `work`, and closes the session whatever `work` gave.
async fn with_client<F, Fut>(
    rt: Runtime,
    url: &str,
    builder: ClientBuilder,
    config: ClientConfig,
    work: F,
) -> Result<(), String>
where
    F: FnOnce(ServiceClient) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let client = rt
        .connect_with(url, builder, config)
        .await
        .map_err(|e| e.to_string())?;
    let outcome = work(client.client().clone()).await;
    let _ = rt.timeout(CLOSE_TIMEOUT, client.close()).await;
    outcome
}

/// `initialize`, `tools/list`, close.
async fn initialize(rt: Runtime, url: &str) -> Result<(), String> {
    with_client(rt, url, builder(), ClientConfig::new(), |c| async move {
        c.list_tools()
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        Ok(())
    })
    .await
}

/// `tools/list`, then `tools/call add_numbers {a: 5, b: 10}`.
async fn tools_call(rt: Runtime, url: &str) -> Result<(), String> {
    with_client(rt, url, builder(), ClientConfig::new(), |c| async move {
        c.list_tools()
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        let result = c
            .call_tool("add_numbers", serde_json::json!({"a": 5, "b": 10}))
            .await
            .map_err(|e| format!("tools/call add_numbers failed: {e}"))?;
        if result.is_error == Some(true) {
            return Err("tools/call add_numbers returned isError".to_owned());
        }
        Ok(())
    })
    .await
}

/// Accepts a form, each field given its schema's `default` (fields without one are left out).
async fn accept_defaults(params: ElicitRequestParams) -> Result<ElicitResult, Error> {
    let ElicitRequestParams::Form(form) = params else {
        return Err(Error::invalid_params("only form elicitation is supported"));
    };
    let mut content = BTreeMap::new();
    for (name, field) in &form.requested_schema.properties {
        let field = serde_json::to_value(field).map_err(Error::internal)?;
        if let Some(default) = field.get("default") {
            let value: ElicitValue = serde_json::from_value(default.clone())
                .map_err(|e| Error::internal(format!("default of {name}: {e}")))?;
            content.insert(name.clone(), value);
        }
    }
    Ok(ElicitResult {
        action: ElicitAction::Accept,
        content: Some(content),
        meta: None,
        extra: Default::default(),
    })
}

/// Declares elicitation, keeps the GET stream open, calls the tool; the server's
/// `elicitation/create` (on the GET stream) is accepted with the schema's defaults. The
/// scenario's server sends it on the GET stream only, and drops it when none is open yet, so
/// the tool is called once the stream has opened (bounded: the call is made anyway).
async fn elicitation_defaults(rt: Runtime, url: &str) -> Result<(), String> {
    let builder = builder().elicitation_handler(accept_defaults);
    let config = ClientConfig::new().with_continuous_listening(true);
    with_client(rt, url, builder, config, |c| async move {
        if rt
            .timeout(Duration::from_secs(10), c.listen_opened())
            .await
            .is_none()
        {
            eprintln!("the GET stream did not open within 10 s; calling anyway");
        }
        c.list_tools()
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        c.call_tool("test_client_elicitation_defaults", serde_json::json!({}))
            .await
            .map_err(|e| format!("tools/call test_client_elicitation_defaults failed: {e}"))?;
        Ok(())
    })
    .await
}

/// `tools/call test_reconnection`: the server closes the POST stream after its priming
/// event; the core resumes with GET + `Last-Event-ID` after the server's `retry`.
async fn sse_retry(rt: Runtime, url: &str) -> Result<(), String> {
    with_client(rt, url, builder(), ClientConfig::new(), |c| async move {
        c.list_tools()
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        c.call_tool("test_reconnection", serde_json::json!({}))
            .await
            .map_err(|e| format!("tools/call test_reconnection failed: {e}"))?;
        Ok(())
    })
    .await
}

fn main() -> ExitCode {
    let (rt, url) = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    rt.block_on(run(rt, url))
}

async fn run(rt: Runtime, url: String) -> ExitCode {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let outcome = match scenario.as_str() {
        "initialize" => initialize(rt, &url).await,
        "tools_call" => tools_call(rt, &url).await,
        "elicitation-sep1034-client-defaults" => elicitation_defaults(rt, &url).await,
        "sse-retry" => sse_retry(rt, &url).await,
        "" => Err("MCP_CONFORMANCE_SCENARIO is not set".to_owned()),
        other => Err(format!("unknown scenario {other:?}")),
    }
    .map_err(|e| match scenario.as_str() {
        "" => e,
        s => format!("{s}: {e}"),
    });
    match outcome {
        Ok(()) => {
            println!("{scenario}: ok");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mcp-conformance-client: {e}");
            ExitCode::FAILURE
        }
    }
}
