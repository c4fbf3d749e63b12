//! The client against servers async-h1 cannot fully represent: a status code http-types does
//! not know (299) and a connection closed before any response. Each makes `initialize` fail
//! with an error, never hang or panic. Every await is bounded.

use std::time::Duration;

use mcp_smol::{Client, ConnectError};
use smol::future::FutureExt;
use smol::io::{AsyncReadExt, AsyncWriteExt};
use smol::net::TcpListener;

const LIMIT: Duration = Duration::from_secs(10);

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    f.or(async {
        smol::Timer::after(LIMIT).await;
        panic!("timed out: {what}")
    })
    .await
}

/// A server that reads one request head and answers every connection with `reply` (then
/// closes it).
async fn odd_server(reply: &'static [u8]) -> (String, smol::Task<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let task = smol::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let mut buf = vec![0u8; 64 * 1024];
            let _ = tcp.read(&mut buf).await;
            let _ = tcp.write_all(reply).await;
        }
    });
    (url, task)
}

#[test]
fn an_unknown_status_code_fails_initialize() {
    smol::block_on(async {
        let (url, _server) = odd_server(
            b"HTTP/1.1 299 Odd\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
        )
        .await;
        let err = bounded("connect", Client::connect(&url))
            .await
            .expect_err("299 is not representable in http-types");
        assert!(matches!(err, ConnectError::Initialize(_)), "{err}");
    });
}

#[test]
fn a_connection_closed_before_the_response_fails_initialize() {
    smol::block_on(async {
        let (url, _server) = odd_server(b"").await;
        let err = bounded("connect", Client::connect(&url))
            .await
            .expect_err("no response");
        assert!(matches!(err, ConnectError::Initialize(_)), "{err}");
    });
}
