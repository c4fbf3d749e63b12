//! A 204 has no body on the wire: the CORS preflight answer is followed, on the same
//! keep-alive connection, by the next response itself, as a browser sends its POST after the
//! preflight. (async-h1 used to frame it as chunked, terminating chunk included, and
//! Chromium took those 5 bytes for the start of the POST's response and failed it.) And a
//! kept-alive connection left quiet is closed after `DriverConfig::keep_alive_timeout`. Every
//! await is bounded.

use std::time::Duration;

use mcp_proto::server::{CorsConfig, ServerConfig};
use smol::future::FutureExt;
use smol::io::{AsyncReadExt, AsyncWriteExt};
use smol::net::{TcpListener, TcpStream};

const LIMIT: Duration = Duration::from_secs(10);
const ORIGIN: &str = "http://127.0.0.1:8000";

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    f.or(async {
        smol::Timer::after(LIMIT).await;
        panic!("timed out: {what}")
    })
    .await
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Reads from `tcp` into `buf` until `done(buf)` (or EOF, or 64 KiB).
async fn read_until(tcp: &mut TcpStream, buf: &mut Vec<u8>, done: impl Fn(&[u8]) -> bool) {
    let mut chunk = [0u8; 4096];
    while !done(buf) && buf.len() < 64 * 1024 {
        let n = tcp.read(&mut chunk).await.expect("read");
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Sends `request` on `tcp` and reads until the end of a response head: what was read.
async fn send_for_head(tcp: &mut TcpStream, request: &str) -> Vec<u8> {
    bounded("send", tcp.write_all(request.as_bytes()))
        .await
        .expect("send");
    let mut buf = Vec::new();
    bounded(
        "a response head",
        read_until(tcp, &mut buf, |b| find(b, b"\r\n\r\n").is_some()),
    )
    .await;
    buf
}

#[test]
fn the_preflight_204_is_followed_by_the_next_response_on_the_connection() {
    smol::block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let config = ServerConfig::default().with_cors(CorsConfig::allow_origins([ORIGIN]));
        let serving = mcp_smol::serve(listener, mcp_demo::users::server())
            .config(config)
            .start()
            .expect("serve");
        let addr = serving.local_addr();
        let mut tcp = bounded("connect", TcpStream::connect(addr))
            .await
            .expect("connect");
        let preflight = format!(
            "OPTIONS /mcp HTTP/1.1\r\nHost: {addr}\r\nOrigin: {ORIGIN}\r\n\
             Access-Control-Request-Method: POST\r\n\
             Access-Control-Request-Headers: content-type\r\n\r\n"
        );
        let mut buf = send_for_head(&mut tcp, &preflight).await;
        let head_end = find(&buf, b"\r\n\r\n").expect("a response head") + 4;
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 204"), "{head}");
        assert!(
            head.contains(&format!("access-control-allow-origin: {ORIGIN}")),
            "{head}"
        );
        assert!(!head.contains("transfer-encoding"), "{head}");

        let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
        let post = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nOrigin: {ORIGIN}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        bounded("send POST", tcp.write_all(post.as_bytes()))
            .await
            .expect("send POST");
        bounded(
            "the POST's response head",
            read_until(&mut tcp, &mut buf, |b| {
                b.len() > head_end && find(&b[head_end..], b"\r\n\r\n").is_some()
            }),
        )
        .await;
        let next = String::from_utf8_lossy(&buf[head_end..]);
        assert!(
            next.starts_with("HTTP/1.1 200 OK\r\n"),
            "bytes after the 204's head: {next:?}"
        );
        drop(tcp);
        bounded("shutdown", serving.shutdown()).await;
    });
}

/// A kept-alive connection that stays quiet for `DriverConfig::keep_alive_timeout` after a
/// response is closed by the server (the adapter's own wait for the next request, which
/// replaces async-h1's 60 s timer): EOF comes after the bound, not before.
#[test]
fn a_quiet_kept_alive_connection_is_closed_after_the_keep_alive_timeout() {
    smol::block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let quiet = Duration::from_millis(300);
        let limits = mcp_smol::DriverConfig::default().with_keep_alive_timeout(quiet);
        let serving = mcp_smol::serve(listener, mcp_demo::users::server())
            .driver(limits)
            .start()
            .expect("serve");
        let addr = serving.local_addr();
        let mut tcp = bounded("connect", TcpStream::connect(addr))
            .await
            .expect("connect");
        let options = format!("OPTIONS /mcp HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        let buf = send_for_head(&mut tcp, &options).await;
        assert!(
            buf.starts_with(b"HTTP/1.1 204"),
            "{:?}",
            String::from_utf8_lossy(&buf)
        );
        let answered = std::time::Instant::now();
        let mut rest = [0u8; 64];
        let n = bounded("the close", tcp.read(&mut rest))
            .await
            .expect("read");
        let waited = answered.elapsed();
        assert_eq!(n, 0, "EOF, no more bytes");
        assert!(
            waited >= quiet - Duration::from_millis(50),
            "closed early: {waited:?}"
        );
        bounded("shutdown", serving.shutdown()).await;
    });
}
