//! Compile-time checks that the transport machines and the service handles can move into a
//! spawned task (a multi-threaded runtime's `spawn` needs `Send + 'static`): an adapter owns
//! a `Router` or a `ClientSession` (and the bindings) inside its driver task.

use mcp_proto::client::ClientSession;
use mcp_proto::server::{Router, ServerConfig};
use mcp_service::Server;
use mcp_service::bind::{ClientBinding, ServerBinding};
use mcp_service::client::Client;

fn assert_send<T: Send>() {}
fn assert_send_static<T: Send + 'static>() {}

#[test]
fn transport_machines_and_service_handles_are_send() {
    assert_send::<Router>();
    assert_send::<ServerConfig>();
    assert_send::<ClientSession>();
    assert_send::<Server>();
    assert_send::<Client>();
    assert_send::<ServerBinding>();
    assert_send::<ClientBinding>();
    assert_send_static::<Router>();
    assert_send_static::<ClientSession>();
}

#[test]
fn a_router_with_custom_hooks_moves_to_another_thread() {
    let now = std::time::Instant::now();
    let config = ServerConfig::default()
        .with_session_ids(|| "fixed-session".to_owned())
        .with_authenticator(|_: &mcp_proto::server::RequestHead<'_>| {
            mcp_proto::server::AuthDecision::allow("alice")
        })
        .with_event_store(mcp_proto::server::InMemoryEventStore::new(2, 1 << 20));
    let router = Router::new(config.with_insecure_test_session_ids(), now);
    let router = std::thread::spawn(move || router).join().unwrap();
    drop(router);
    let session = ClientSession::new(mcp_proto::client::ClientConfig::new(), now);
    let session = std::thread::spawn(move || session).join().unwrap();
    drop(session);
}
