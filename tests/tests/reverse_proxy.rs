//! Behind a reverse proxy: the public URL names the RFC 9728 `resource` and the
//! `resource_metadata` of `WWW-Authenticate` and is admitted by `Host`/`Origin` validation;
//! the `Forwarded`/`X-Forwarded-*` headers of trusted proxies are believed (client address,
//! forwarded host), those of anyone else ignored. On a virtual clock, then through a real
//! nginx (skipped when nginx is not installed) in front of an in-process server, the client
//! connecting from 127.0.0.2 and nginx (127.0.0.1) the one trusted proxy; the client
//! address the server sees is read from the driver's exchange log (`client=`).

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use mcp_proto::server::{
    AuthDecision, Health, ProtectedResourceMetadata, RequestHead, ServerConfig,
};
use mcp_tests::require_service;
use mcp_tests::runtime::Runtime;
use mcp_tests::server_harness::{Harness, Req, init_body};
use mcp_tests::services::Nginx;
use serde_json::{Value, json};

const PUBLIC: &str = "http://mcp.example.test/mcp";
const METADATA: &str = "http://mcp.example.test/.well-known/oauth-protected-resource/mcp";

fn bearer(head: &RequestHead<'_>) -> AuthDecision {
    match head
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
    {
        Some("Bearer good") => AuthDecision::allow("alice"),
        _ => AuthDecision::unauthorized(),
    }
}

/// Public URL, nginx's address trusted, metadata for the public URL, bearer tokens.
fn proxied() -> ServerConfig {
    ServerConfig::default()
        .with_public_url(PUBLIC.parse().unwrap())
        .with_trusted_proxies(["127.0.0.1".parse().unwrap()])
        .with_protected_resource(ProtectedResourceMetadata::for_public_url(
            "https://as.example.test",
        ))
        .with_authenticator(bearer)
        .with_health(Health::new().liveness("/healthz").readiness("/readyz"))
}

fn init() -> Req {
    Req::post(&init_body(1, "2025-11-25")).header("authorization", "Bearer good")
}

#[test]
fn the_public_url_names_the_metadata_and_the_challenge() {
    let mut h = Harness::new(proxied());
    let s = h.send(Req::new(
        Method::GET,
        "/.well-known/oauth-protected-resource/mcp",
    ));
    assert_eq!(h.response(s).status(), StatusCode::OK);
    assert_eq!(h.response(s).json()["resource"], PUBLIC);
    let s = h.send(Req::post(&init_body(1, "2025-11-25")));
    assert_eq!(h.response(s).status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        h.response(s).header("www-authenticate"),
        Some(format!("Bearer resource_metadata=\"{METADATA}\"").as_str())
    );
    // An explicit resource wins over the public URL, whichever is configured first.
    let explicit = ProtectedResourceMetadata::new("https://other.example/mcp", "https://as");
    for config in [
        ServerConfig::default()
            .with_public_url(PUBLIC.parse().unwrap())
            .with_protected_resource(explicit.clone()),
        ServerConfig::default()
            .with_protected_resource(explicit.clone())
            .with_public_url(PUBLIC.parse().unwrap()),
    ] {
        let mut h = Harness::new(config);
        let s = h.send(Req::new(
            Method::GET,
            "/.well-known/oauth-protected-resource",
        ));
        assert_eq!(
            h.response(s).json()["resource"],
            "https://other.example/mcp"
        );
    }
}

#[test]
fn host_validation_admits_the_public_host_and_origin() {
    let mut h = Harness::new(proxied());
    for (host, origin, status) in [
        (
            "mcp.example.test",
            Some("http://mcp.example.test"),
            StatusCode::OK,
        ),
        ("mcp.example.test:80", None, StatusCode::OK),
        ("localhost:3000", None, StatusCode::OK),
        ("evil.example", None, StatusCode::FORBIDDEN),
        (
            "mcp.example.test",
            Some("http://evil.example"),
            StatusCode::FORBIDDEN,
        ),
    ] {
        let mut req = init().header("host", host);
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        let s = h.send(req);
        if status == StatusCode::OK {
            let (handle, _, _) = h.expect_request();
            h.reply(handle, r#"{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}"#);
        }
        assert_eq!(h.response(s).status(), status, "{host} {origin:?}");
    }
    // Without a public URL, its host is just another host.
    let mut h = Harness::new(ServerConfig::default());
    let s = h.send(init().header("host", "mcp.example.test"));
    assert_eq!(h.response(s).status(), StatusCode::FORBIDDEN);
}

#[test]
fn a_trusted_proxys_forwarded_host_is_what_host_validation_checks() {
    let mut h = Harness::new(proxied());
    // A proxy that rewrites Host to its upstream but forwards the client's: a DNS-rebinding
    // page's host is refused.
    let s = h.send(
        init()
            .peer("127.0.0.1:40000")
            .header("x-forwarded-host", "evil.example"),
    );
    assert_eq!(h.response(s).status(), StatusCode::FORBIDDEN);
    let s = h.send(
        init()
            .peer("127.0.0.1:40000")
            .header("forwarded", "for=192.0.2.1;host=evil.example"),
    );
    assert_eq!(h.response(s).status(), StatusCode::FORBIDDEN);
    // From a peer that is not trusted, the header is ignored (never an error).
    let s = h.send(
        init()
            .peer("127.0.0.2:40000")
            .header("x-forwarded-host", "evil.example"),
    );
    assert!(h.next_request().is_some());
    assert!(h.response(s).status.is_none());
}

#[test]
fn the_client_address_believes_trusted_proxies_only() {
    let h = Harness::new(proxied());
    let address = |peer: &str, xff: &str| {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", xff.parse().unwrap());
        let uri = Uri::from_static("/mcp");
        let head =
            RequestHead::new(&Method::POST, &uri, &headers).with_peer(Some(peer.parse().unwrap()));
        h.router.client_address(&head)
    };
    let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
    assert_eq!(
        address("127.0.0.1:1", "198.51.100.7, 203.0.113.9"),
        ip("203.0.113.9")
    );
    assert_eq!(address("127.0.0.2:1", "203.0.113.9"), ip("127.0.0.2"));
    assert_eq!(
        address("[::ffff:127.0.0.1]:1", "203.0.113.9"),
        ip("203.0.113.9")
    );
}

fn log() -> &'static mcp_tests::log_capture::Log {
    mcp_tests::log_capture::global()
}

/// The exchange log lines written since the last call, waiting (up to 5 s) for `n` of them:
/// the driver logs an exchange when it ends, which may be just after the client has it.
async fn exchange_lines(n: usize) -> Vec<String> {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let text = log().text();
        let lines: Vec<String> = text
            .lines()
            .filter(|l| l.contains("mcp_driver::server: exchange"))
            .map(str::to_owned)
            .collect();
        if lines.len() >= n || Instant::now() >= until {
            log().clear();
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One request from `from` to `to` on a new connection: status, headers, body.
async fn send(
    from: IpAddr,
    to: SocketAddr,
    req: http::Request<Full<Bytes>>,
) -> (StatusCode, HeaderMap, Bytes) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(from, 0)).unwrap();
    let tcp = socket.connect(to).await.expect("connect");
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .expect("handshake");
    tokio::spawn(conn);
    let resp = sender.send_request(req).await.expect("a response");
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.expect("a body").to_bytes();
    (parts.status, parts.headers, body)
}

fn request(
    method: Method,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
) -> http::Request<Full<Bytes>> {
    let mut b = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", host);
    for (n, v) in headers {
        b = b.header(*n, *v);
    }
    let body = if path == "/mcp" {
        b = b
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        Bytes::from(init_body(1, "2025-11-25"))
    } else {
        Bytes::new()
    };
    b.body(Full::new(body)).unwrap()
}

#[test]
fn through_nginx_with_trusted_proxies() {
    let _ = log();
    Runtime::Tokio.block_on(async {
        let serving = Runtime::Tokio
            .serve(mcp_tests::everything::server(), proxied())
            .await
            .expect("serve");
        let lb = require_service!(Nginx::round_robin(&[serving.local_addr()]));
        let client: IpAddr = "127.0.0.2".parse().unwrap();
        let _ = exchange_lines(0).await;

        // The metadata names the public URL.
        let (status, _, body) = send(
            client,
            lb.addr(),
            request(
                Method::GET,
                "/.well-known/oauth-protected-resource/mcp",
                "mcp.example.test",
                &[],
            ),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{}", lb.error_log_tail());
        let doc: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(doc["resource"], PUBLIC);

        // The 401 challenge names the public metadata URL; the public Host is admitted; the
        // client's forged X-Forwarded-For entry does not move its address.
        let (status, headers, _) = send(
            client,
            lb.addr(),
            request(
                Method::POST,
                "/mcp",
                "mcp.example.test",
                &[("x-forwarded-for", "198.51.100.7")],
            ),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(
            headers["www-authenticate"],
            format!("Bearer resource_metadata=\"{METADATA}\"")
        );
        let (status, headers, _) = send(
            client,
            lb.addr(),
            request(
                Method::POST,
                "/mcp",
                "mcp.example.test",
                &[("authorization", "Bearer good")],
            ),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert!(headers.contains_key("mcp-session-id"));
        let lines = exchange_lines(3).await;
        assert_eq!(lines.len(), 3, "{lines:#?}");
        for l in &lines {
            assert!(l.contains("client=127.0.0.2 "), "the forwarded client: {l}");
        }

        // A host the public URL does not name is refused, through nginx too.
        let (status, _, _) = send(
            client,
            lb.addr(),
            request(
                Method::POST,
                "/mcp",
                "evil.example",
                &[("authorization", "Bearer good")],
            ),
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN);

        // Readiness through nginx, for its health checks.
        let (status, _, body) = send(
            client,
            lb.addr(),
            request(Method::GET, "/readyz", "10.0.0.9", &[]),
        )
        .await;
        assert_eq!(
            (status, &body[..]),
            (StatusCode::OK, &br#"{"status":"ok"}"#[..])
        );
        let _ = exchange_lines(2).await;

        // The same headers straight from 127.0.0.2 (not a trusted proxy): ignored.
        let (status, _, _) = send(
            client,
            serving.local_addr(),
            request(
                Method::POST,
                "/mcp",
                "localhost",
                &[
                    ("authorization", "Bearer good"),
                    ("x-forwarded-for", "198.51.100.7"),
                    ("x-forwarded-host", "evil.example"),
                    ("forwarded", "for=198.51.100.8;host=evil.example"),
                ],
            ),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "the forwarded host is ignored");
        let lines = exchange_lines(1).await;
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(
            lines[0].contains("client=127.0.0.2 "),
            "the peer: {}",
            lines[0]
        );
        assert!(!lines[0].contains("198.51.100"), "{}", lines[0]);
        let _ = json!({});
        serving.shutdown().await;
    });
}

#[test]
fn each_request_names_its_client_for_observability() {
    let mut h = Harness::new(proxied());
    // Through the trusted proxy: the forwarded client, and no port (a proxy forwards none).
    h.send(
        init()
            .peer("127.0.0.1:40000")
            .header("x-forwarded-for", "203.0.113.9"),
    );
    let (handle, _, _) = h.expect_request();
    let client = h.router.request_client(handle).expect("in flight");
    assert_eq!(client.address, Some("203.0.113.9".parse().unwrap()));
    assert_eq!(client.port, None);
    // Straight from a peer that is not trusted: its address and port, the header ignored.
    h.send(
        init()
            .peer("127.0.0.2:40001")
            .header("x-forwarded-for", "203.0.113.9"),
    );
    let (handle, _, _) = h.expect_request();
    let client = h.router.request_client(handle).expect("in flight");
    assert_eq!(client.address, Some("127.0.0.2".parse().unwrap()));
    assert_eq!(client.port, Some(40001));
}
