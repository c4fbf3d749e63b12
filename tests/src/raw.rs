//! One raw HTTP/1.1 exchange on a fresh loopback connection (hyper's client connection, no
//! pool): what the wire-level tests send when they need to control every header.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

/// How long a connect, a handshake or a response head may take.
pub const WITHIN: Duration = Duration::from_secs(10);

/// Sends `req` to `addr` on a new connection and returns the response head (the body still
/// streams). Runs on tokio.
///
/// # Panics
///
/// When the connection, handshake or response head fails or takes longer than [`WITHIN`]:
/// these are test helpers.
pub async fn exchange(
    addr: SocketAddr,
    req: http::Request<Full<Bytes>>,
) -> http::Response<Incoming> {
    let tcp = tokio::time::timeout(WITHIN, tokio::net::TcpStream::connect(addr))
        .await
        .unwrap_or_else(late("connect"))
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    let (mut sender, conn) = tokio::time::timeout(
        WITHIN,
        hyper::client::conn::http1::handshake(TokioIo::new(tcp)),
    )
    .await
    .unwrap_or_else(late("handshake"))
    .unwrap_or_else(|e| panic!("handshake with {addr}: {e}"));
    tokio::spawn(conn);
    tokio::time::timeout(WITHIN, sender.send_request(req))
        .await
        .unwrap_or_else(late("response head"))
        .unwrap_or_else(|e| panic!("request to {addr}: {e}"))
}

fn late<T>(what: &'static str) -> impl FnOnce(tokio::time::error::Elapsed) -> T {
    move |_| panic!("{what}: nothing within {WITHIN:?}")
}
