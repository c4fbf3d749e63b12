//! The one server entry point (`mcp_driver::Serve`, what every adapter's `serve` returns):
//! TLS asked of an adapter built without it is refused before the adapter starts anything,
//! never served as plain HTTP. The driver's `tls` feature can be on (another crate of the
//! build turned it on) while the adapter's is off: the adapter says which with `Adapter::TLS`.

use std::sync::atomic::{AtomicBool, Ordering};

use mcp_driver::{Adapter, Serve, Serving};
use mcp_service::Server;
use mcp_tests::tls::TestPki;

static STARTED: AtomicBool = AtomicBool::new(false);

/// An adapter built without TLS; it records that it was asked to start.
struct Plain;

impl Adapter for Plain {
    type Listener = ();
    const TLS: bool = false;

    fn start(_serve: Serve<Self>) -> std::io::Result<Serving> {
        STARTED.store(true, Ordering::SeqCst);
        Err(std::io::Error::other("started"))
    }
}

#[test]
fn tls_asked_of_an_adapter_without_it_is_refused_before_it_starts() {
    let pki = TestPki::new(&["localhost"]);
    let serve = Serve::<Plain>::new((), Server::new("t", "1")).tls(pki.server_tls());
    assert!(serve.wants_tls());
    let err = serve.start().expect_err("refused");
    assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
    assert!(!STARTED.load(Ordering::SeqCst), "the adapter never started");
    // Without TLS the same adapter is asked to start.
    let err = Serve::<Plain>::new((), Server::new("t", "1"))
        .start()
        .expect_err("the fake adapter fails on purpose");
    assert_eq!(err.to_string(), "started");
    assert!(STARTED.load(Ordering::SeqCst));
}
