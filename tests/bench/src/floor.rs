//! The "floor" server: the practical lower bound of CPU per call for an MCP server on hyper 1
//! and tokio. It reads each POST body, parses it as JSON (as any server must), and answers
//! what the benchmark's client checks — `initialize` with a session id, a notification with
//! 202, `tools/call echo` with one SSE frame carrying the echoed text — keeping and checking
//! nothing else: no session table, no header validation, no limits, no streams. Not a server
//! to use: a yardstick for ours.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};

use crate::process::URL_LINE;

static SESSIONS: AtomicU64 = AtomicU64::new(1);

fn reply(status: u16, content_type: Option<&str>, body: Bytes) -> Response<Full<Bytes>> {
    let mut b = Response::builder().status(status);
    if let Some(ct) = content_type {
        b = b.header(http::header::CONTENT_TYPE, ct);
    }
    b.body(Full::new(body))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

/// One exchange: the body parsed, the least answer the client accepts.
async fn exchange(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    // No GET stream (405 is what a server without one answers); DELETE ends nothing.
    if req.method() == http::Method::GET {
        return Ok(reply(405, None, Bytes::new()));
    }
    if req.method() != http::Method::POST {
        return Ok(reply(200, None, Bytes::new()));
    }
    let Ok(body) = req.into_body().collect().await.map(|b| b.to_bytes()) else {
        return Ok(reply(400, None, Bytes::new()));
    };
    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
        return Ok(reply(400, None, Bytes::new()));
    };
    let Some(id) = msg.get("id") else {
        return Ok(reply(202, None, Bytes::new()));
    };
    match msg.get("method").and_then(Value::as_str) {
        Some("initialize") => {
            let version = msg
                .pointer("/params/protocolVersion")
                .cloned()
                .unwrap_or(json!("2025-11-25"));
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "floor", "version": "0"},
            }});
            let mut resp = reply(200, Some("application/json"), answer.to_string().into());
            let sid = SESSIONS.fetch_add(1, Ordering::Relaxed).to_string();
            if let Ok(v) = http::HeaderValue::from_str(&sid) {
                resp.headers_mut().insert("mcp-session-id", v);
            }
            Ok(resp)
        }
        Some("tools/call") => {
            let text = msg
                .pointer("/params/arguments/text")
                .cloned()
                .unwrap_or(json!(""));
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": {
                "content": [{"type": "text", "text": text}],
            }});
            let frame = format!("event: message\ndata: {answer}\n\n");
            Ok(reply(200, Some("text/event-stream"), frame.into()))
        }
        _ => {
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": {}});
            Ok(reply(
                200,
                Some("application/json"),
                answer.to_string().into(),
            ))
        }
    }
}

/// Serves the floor on `listener` (hyper `http1`, `TCP_NODELAY`) until stdin closes.
///
/// # Errors
///
/// When the listener has no address.
pub async fn serve(listener: tokio::net::TcpListener) -> std::io::Result<()> {
    serve_as(listener, false).await
}

/// Serves the floor on `listener` (`TCP_NODELAY`) until stdin closes: with hyper's
/// `http2` server (HTTP/2 with prior knowledge, h2c, only) when `http2`, its `http1` one
/// otherwise.
///
/// # Errors
///
/// When the listener has no address.
pub async fn serve_as(listener: tokio::net::TcpListener, http2: bool) -> std::io::Result<()> {
    println!("{URL_LINE}http://{}/mcp", listener.local_addr()?);
    let accept = async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let _ = tcp.set_nodelay(true);
            tokio::spawn(async move {
                let _ = if http2 {
                    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tcp), service_fn(exchange))
                        .await
                } else {
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service_fn(exchange))
                        .await
                };
            });
        }
    };
    tokio::select! {
        () = accept => {}
        () = crate::echo::wait_for_stdin_eof() => {}
    }
    Ok(())
}
