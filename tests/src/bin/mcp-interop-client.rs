//! Our client (`mcp_tokio::Client`, or `mcp_smol::Client` with `--runtime smol`) against another implementation's server: the interop step
//! of `.ci/run` points it at the official TypeScript SDK's server (`tests/interop/ts-server.mjs`).
//!
//! ```text
//! cargo run --bin mcp-interop-client -- [--runtime tokio|smol] [--era legacy|auto|modern] [--everything] <url>
//! ```
//!
//! `--era` is the client's era policy (`EraMode`; default legacy); with `auto` or `modern` the
//! connection must end in 2026-07-28, where the GET-stream check is replaced by a
//! `subscriptions/listen` acknowledgement and sampling is an MRTR round.
//!
//! Checks initialize, tools/list, `echo`, a notification on the GET stream (the `notify` tool
//! sends a log message not tied to its request) and a sampling round trip (the `sample` tool
//! asks this client, which answers); `--everything` calls our everything server's tools of the
//! same behaviour instead (`test_notify_session`, `test_sampling`). One line per check; exits 1 if any fails. Every wait is
//! bounded.

use std::future::Future;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use mcp_proto::client::{ClientConfig, EraMode};
use mcp_service::client::{Client as ServiceClient, ServerNotification};
use mcp_service::schema::{
    CallToolResult, ContentBlock, CreateMessageResult, Role, SamplingContent,
    SamplingMessageContentBlock, StopReason, TextContent,
};
use mcp_tests::runtime::Runtime;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);
const ANSWER: &str = "hello from the Rust client";

async fn bounded<T, E: std::fmt::Display>(
    rt: Runtime,
    what: &str,
    f: impl Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match rt.timeout(WAIT, f).await {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(format!("{what}: {e}")),
        None => Err(format!("{what}: no answer in {WAIT:?}")),
    }
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) => t.text.clone(),
            _ => String::new(),
        })
        .collect()
}

fn report(failures: &mut u32, name: &str, outcome: Result<String, String>) {
    match outcome {
        Ok(detail) if detail.is_empty() => println!("ok    {name}"),
        Ok(detail) => println!("ok    {name} ({detail})"),
        Err(e) => {
            *failures += 1;
            println!("FAIL  {name}: {e}");
        }
    }
}

async fn run(rt: Runtime, era: EraMode, pick: Tools, url: &str) -> u32 {
    let mut failures = 0;
    let builder = ServiceClient::builder("mcp-interop-client", env!("CARGO_PKG_VERSION"))
        .sampling_handler(|params| async move {
            let prompt = params
                .messages
                .first()
                .map(|m| match &m.content {
                    SamplingContent::Single(SamplingMessageContentBlock::Text(t)) => t.text.clone(),
                    _ => String::new(),
                })
                .unwrap_or_default();
            Ok(CreateMessageResult {
                role: Role::Assistant,
                content: SamplingMessageContentBlock::Text(TextContent::new(format!(
                    "{ANSWER} to {prompt}"
                )))
                .into(),
                model: "interop-model".into(),
                stop_reason: Some(StopReason::EndTurn),
                meta: None,
                extra: Default::default(),
            })
        });
    // Continuous listening: the client keeps a GET stream open for what the server sends unasked.
    let modern = era != EraMode::Legacy;
    let mut config = ClientConfig::new()
        .with_continuous_listening(true)
        .with_era(era);
    if modern {
        config = config.with_subscription_filter(json!({"toolsListChanged": true}));
    }
    let client = match bounded(rt, "initialize", rt.connect_with(url, builder, config)).await {
        Ok(c) => c,
        Err(e) => {
            println!("FAIL  initialize: {e}");
            return 1;
        }
    };
    let mut notifications = client.notifications();
    let info = client.server_info();
    let is_modern = info
        .as_ref()
        .is_some_and(|i| i.protocol_version.as_str() >= "2026-07-28");
    report(
        &mut failures,
        "initialize",
        info.map(|i| {
            format!(
                "server {} {}, protocol {}",
                i.server_info.name, i.server_info.version, i.protocol_version
            )
        })
        .ok_or_else(|| "no InitializeResult".to_owned())
        .and_then(|detail| {
            if is_modern == modern {
                Ok(detail)
            } else {
                Err(format!("{detail}: not the era asked for ({era:?})"))
            }
        }),
    );

    let outcome = async {
        let tools = bounded(rt, "tools/list", client.list_tools()).await?;
        let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
        for want in ["echo", pick.notify, pick.sample] {
            if !names.contains(&want) {
                return Err(format!("no tool {want} in {names:?}"));
            }
        }
        Ok(format!("{} tools", tools.len()))
    }
    .await;
    report(&mut failures, "tools/list", outcome);

    let outcome = async {
        let r = bounded(
            rt,
            "echo",
            client.call_tool("echo", json!({"text": "interop ✓"})),
        )
        .await?;
        if r.is_error == Some(true) || text(&r) != "interop ✓" {
            return Err(format!("unexpected result {r:?}"));
        }
        Ok(String::new())
    }
    .await;
    report(&mut failures, "tools/call echo", outcome);

    let outcome = async {
        if modern {
            // 2026-07-28: no GET stream; what the server sends unasked rides the
            // subscriptions/listen stream, acknowledged first.
            return if bounded(rt, "listen", async {
                Ok::<_, String>(client.listen_opened().await)
            })
            .await?
            {
                Ok("subscriptions/listen open".to_owned())
            } else {
                Err("subscriptions/listen did not open".to_owned())
            };
        }
        // A notification sent before the GET stream is open is lost (the spec lets the server
        // drop it), so the tool is called again, at most three times, until one arrives.
        for attempt in 1..=3 {
            let r = bounded(rt, "notify", client.call_tool(pick.notify, json!({}))).await?;
            if r.is_error == Some(true) {
                return Err(format!("notify failed: {r:?}"));
            }
            let deadline = Instant::now() + Duration::from_secs(3);
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match rt.timeout(left, notifications.next()).await {
                    None => break,
                    Some(None) => return Err("the client closed".to_owned()),
                    Some(Some(ServerNotification::Log(log)))
                        if log.logger.as_deref() == Some("interop") =>
                    {
                        return Ok(format!(
                            "notifications/message: {}, attempt {attempt}",
                            log.data
                        ));
                    }
                    Some(Some(_)) => {}
                }
            }
        }
        Err("no notifications/message after three calls of notify".to_owned())
    }
    .await;
    let what = if modern {
        "subscriptions/listen"
    } else {
        "notification on the GET stream"
    };
    report(&mut failures, what, outcome);

    let outcome = async {
        let r = bounded(
            rt,
            "sample",
            client.call_tool(pick.sample, json!({"prompt": "ping"})),
        )
        .await?;
        let want = format!("LLM response: {ANSWER} to ping");
        if r.is_error == Some(true) || text(&r) != want {
            return Err(format!("unexpected result {r:?}"));
        }
        Ok(want)
    }
    .await;
    report(&mut failures, "sampling round trip", outcome);

    let closed = rt.timeout(WAIT, client.close()).await;
    report(
        &mut failures,
        if modern { "close" } else { "close (DELETE)" },
        closed
            .map(|()| String::new())
            .ok_or_else(|| format!("not closed in {WAIT:?}")),
    );
    failures
}

const USAGE: &str = "usage: mcp-interop-client [--runtime tokio|smol] [--era legacy|auto|modern] [--everything] <url>";

/// The names of the two tools the scenario calls: the peers' test servers' (`notify`,
/// `sample`), or with `--everything` our everything server's.
#[derive(Clone, Copy)]
struct Tools {
    notify: &'static str,
    sample: &'static str,
}

fn parse_args() -> Result<(Runtime, EraMode, Tools, String), String> {
    let mut runtime = Runtime::Tokio;
    let mut era = EraMode::Legacy;
    let mut url = None;
    let mut tools = Tools {
        notify: "notify",
        sample: "sample",
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runtime" => runtime = args.next().ok_or(USAGE)?.parse()?,
            "--era" => {
                era = match args.next().as_deref() {
                    Some("legacy") => EraMode::Legacy,
                    Some("auto") => EraMode::Auto,
                    Some("modern") => EraMode::Modern,
                    _ => return Err(USAGE.to_owned()),
                }
            }
            "--everything" => {
                tools = Tools {
                    notify: "test_notify_session",
                    sample: "test_sampling",
                }
            }
            other if other.starts_with("--") || url.is_some() => return Err(USAGE.to_owned()),
            other => url = Some(other.to_owned()),
        }
    }
    Ok((runtime, era, tools, url.ok_or(USAGE)?))
}

fn main() -> ExitCode {
    let (rt, era, tools, url) = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let failures = rt.block_on(run(rt, era, tools, &url));
    if failures == 0 {
        println!("mcp-interop-client: all checks passed");
        ExitCode::SUCCESS
    } else {
        println!("mcp-interop-client: {failures} check(s) failed");
        ExitCode::FAILURE
    }
}
