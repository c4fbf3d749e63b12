//! # mcp-driver: what every adapter does each turn, written once
//!
//! The runtime-neutral layer between the sans-IO core (`mcp-proto`), the typed API
//! (`mcp-service`) and an adapter (`mcp-tokio`, `mcp-smol`, or your own). Users of an adapter
//! rarely name this crate: the adapter re-exports what a server or client author needs
//! ([`Serve`], [`DriverConfig`], [`Serving`], [`Connect`], …).
//!
//! The state machines ([`Router`](mcp_proto::server::Router),
//! [`ClientSession`](mcp_proto::client::ClientSession)) and the service bindings
//! ([`bind`](mcp_service::bind)) leave an adapter a loop to run: apply what the service
//! queued, drain the machine's outputs until neither moves, sleep until the earliest of its
//! deadline, the next network input or a wake-up, and feed what fired with the time. This
//! crate is that loop, runtime-free: it uses `futures-channel` for its queues and knows
//! nothing of tokio, smol or sockets. An adapter gives it three things through [`Runtime`]
//! — spawn a task, sleep until an instant, read the clock — and, on the client, an
//! [`Engine`] that carries an [`HttpRequest`](mcp_proto::client::HttpRequest) over its HTTP
//! library. Everything else lives here once:
//!
//! - the **server** side: [`Serve`], the one entry point every adapter's `serve` returns (a
//!   builder over the core's `ServerConfig`, the driver's [`DriverConfig`] and TLS);
//!   [`ServerHandle`]: the key ↔ stream maps, the connection-side
//!   [`exchange`](ServerHandle::exchange) (head, body pump with backpressure, the reply
//!   stream that reports what the HTTP library took), the bounded inbound queue, draining
//!   shutdown, session ids from the OS ([`RandomSessionIds`]), the running server's handle
//!   ([`Serving`]) and its [`accept_loop`]; the plug-ins that do I/O and so belong here, not
//!   in the core: the asynchronous authentication step ([`AsyncAuthenticator`]) and the
//!   cluster store ([`ClusterBackend`], [`SharedMemoryCluster`] in one process, `mcp-redis`
//!   on Redis);
//! - the **client** side ([`ClientHandle`], [`Connect`]): the builder vocabulary of every adapter,
//!   the intent ↔ exchange map, network events ([`NetEvents`]), event severity, close and
//!   drop, handlers of server requests stopped with the driver; the era each origin speaks,
//!   remembered across sessions ([`EraCache`]); the OAuth 2.1 flow ([`OAuth`]).
//! - **HTTPS** ([`tls`], feature `tls`): the client's trust ([`ClientTls`]), the server's
//!   certificate and handshake timeout ([`ServerTls`]), the handshake under that timeout,
//!   rustls' errors classified as [`TlsFailure`](mcp_proto::client::TlsFailure)s.
//!
//! - **Keys of the OAuth flow** (feature `jwt`): the application's key signs, the core never
//!   holds it. [`PrivateKeyJwt`] signs `private_key_jwt` client assertions (ES256 or RS256
//!   from PEM, 60 s lifetime by default); [`DpopKey`] signs DPoP proofs (ES256, fresh from the
//!   OS CSPRNG or from PEM); [`DpopVerifier`] checks them on a protected server.
//!
//! # DPoP on a protected server, and what a deployer decides
//!
//! After the access token itself is validated (a JWT's signature, issuer, audience and
//! lifetime, or introspection) and found bound to a key (`cnf.jkt`), the asynchronous
//! authentication step ([`AsyncAuthenticator`]) calls [`DpopVerifier::check`] with the
//! request's `DPoP` headers, method, public URL and token, and answers the
//! [`DpopRefusal::decision`] it may return (a `401` with `WWW-Authenticate: DPoP`, the error,
//! the algorithms, and a `DPoP-Nonce` when one is due). `mcp-demo`'s `protected` example does
//! exactly this (`--dpop`, `--dpop-only`, `--dpop-nonce SECS`).
//!
//! ```no_run
//! # use std::sync::Arc; use std::time::{Duration, SystemTime};
//! use mcp_driver::{DpopCheck, DpopPolicy, DpopVerifier};
//! let verifier = Arc::new(DpopVerifier::new(
//!     DpopPolicy::default().with_nonces(Duration::from_secs(300)),
//! ));
//! # let (proofs, token, jkt) = (vec![""], "", "");
//! let verdict = verifier.check(SystemTime::now(), &DpopCheck {
//!     proofs: &proofs, method: "POST", url: "https://mcp.example.com/mcp",
//!     access_token: token, jkt,
//! });
//! ```
//!
//! Security notes. **Keys are the application's**: store a `PrivateKeyJwt` key as any private
//! key (a secrets manager, a file readable by the service only); a `DpopKey` may live only in
//! memory (a restart then gets new tokens). **Windows and defaults**: a proof's `iat` is
//! accepted within ±60 s ([`DpopPolicy::max_skew`]); its `jti` is remembered that long, at
//! most 65,536 of them ([`DpopPolicy::replay_capacity`]: when full, the oldest is forgotten, so
//! size it above the proofs one window sees); nonces are off by default, and when on rotate
//! every 5 min with the previous one still accepted for one period. The replay cache and the
//! nonces are per process: behind a load balancer, a proof replayed to another instance
//! within the window is not caught unless nonces are on (each instance then has its own
//! nonce, and a client is asked once per instance). The URL checked as `htu` is the
//! resource's public URL, not the address the server is bound to.
//!
//! What only one adapter needs lives in that adapter (mcp-smol's futures-io connections and
//! its http-types conversions, for instance).
//!
//! The per-turn logic is also usable without the async loop: [`ServerDriver`] and
//! [`ClientDriver`] take inputs and pump synchronously, for a driver of one's own; a
//! [`MemoryLink`] joins the two in one process (threads, an in-memory pair on a virtual
//! clock).
//!
//! # State table of the run loops
//!
//! | state | event | next |
//! |---|---|---|
//! | running | input, wake-up, deadline | running (after one pump) |
//! | running | server: drain command | draining (`Router::begin_shutdown`) |
//! | draining | `Router::is_drained` (or the grace deadline) | stopped, after `Router::shutdown` |
//! | running | client: close command or `ClientHandle` dropped | closing (`ClientSession::close`) |
//! | closing | `ClientSession::is_closed` | stopped |
//! | any | every sender of the inbound queue gone (server) | stopped |
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod auth;
mod client;
mod cluster;
#[cfg(feature = "jwt")]
mod dpop_verify;
mod era;
pub mod h1;
#[cfg(feature = "jwt")]
mod jwt;
mod memory;
mod oauth;
mod outbox;
mod serve;
mod server;
mod signal;
#[cfg(feature = "tls")]
pub mod tls;

use std::future::Future;
use std::time::Instant;

pub use auth::AsyncAuthenticator;
pub use client::{
    ClientDriver, ClientHandle, Connect, ConnectError, Engine, NetEvent, NetEventKind, NetEvents,
};
pub use cluster::{ClusterBackend, ClusterInbox, SharedMemoryCluster, StoreLink};
#[cfg(feature = "jwt")]
pub use dpop_verify::{
    DPOP_ALGORITHMS, DpopCheck, DpopPolicy, DpopRefusal, DpopVerifier, dpop_algs,
};
pub use era::EraCache;
#[cfg(feature = "jwt")]
pub use jwt::{DEFAULT_ASSERTION_LIFETIME, DpopKey, JwtKeyError, PrivateKeyJwt};
pub use memory::{MemoryExchange, MemoryLink, MemorySink};
pub use oauth::{AuthorizeHandler, OAuth, SharedTokenStore};
pub use outbox::Exchange;
pub use serve::{Adapter, Serve};
pub use server::{
    Departure, DriverConfig, DriverGone, ExchangeSink, HttpResponse, PeerAddr, RandomSessionIds,
    Reply, ResponseAborted, ResponseStream, ServerDriver, ServerHandle, Serving, ToDriver,
    accept_loop,
};
pub use signal::Latch;
#[cfg(feature = "tls")]
pub use tls::{ClientTls, ServerTls};

use mcp_service::server::BoxFuture;

/// What a runtime gives the driver: a clock, a timer, and a way to run tasks.
pub trait Runtime: Clone + Send + Sync + 'static {
    /// The timer future of [`sleep_until`](Runtime::sleep_until) (its output is ignored).
    type Sleep: Future + Send + 'static;

    /// Completes at `deadline` (at once if it has passed).
    fn sleep_until(&self, deadline: Instant) -> Self::Sleep;

    /// Runs `task` to its end in the background.
    fn spawn(&self, task: BoxFuture<'static, ()>);

    /// The current time (a virtual clock in tests).
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// Locks a mutex, ignoring poisoning: every critical section of the driver leaves its data
/// consistent, so a panic elsewhere does not make it unusable.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The first 8 characters of a session id: enough to follow a session through a log,
/// never the whole id (it works like a bearer secret). Both drivers log sessions so.
pub(crate) fn short_id(id: &str) -> String {
    id.chars().take(8).collect()
}

/// The binding's timer ([`mcp_service::bind::Sleep`]) on a runtime.
fn binding_sleep<R: Runtime>(rt: &R) -> mcp_service::bind::Sleep {
    let rt = rt.clone();
    std::sync::Arc::new(move |d| {
        let sleep = rt.sleep_until(rt.now() + d);
        Box::pin(async move {
            sleep.await;
        })
    })
}

/// The lock-step of every driver: runs `round` (apply what was queued, drain what came out)
/// until a round moves nothing; says whether any did.
fn until_still(mut round: impl FnMut() -> bool) -> bool {
    let mut progressed = false;
    while round() {
        progressed = true;
    }
    progressed
}

/// What ended a run loop's wait.
enum Woke<T> {
    /// An input of the loop's own (a command, a network event).
    Input(T),
    /// The service queued work.
    Wake,
    /// The machine's deadline.
    Deadline,
}

/// The wait of every run loop, and its clock-before-sleep rule: a `deadline` already past
/// fires at once; otherwise the earliest of `input` (polled first), a wake-up from the
/// service, and the deadline.
async fn wait<R: Runtime, T>(
    rt: &R,
    deadline: Option<Instant>,
    wakeup: &signal::Wakeup,
    mut input: impl FnMut(&mut std::task::Context<'_>) -> std::task::Poll<T>,
) -> Woke<T> {
    use std::task::Poll;
    if deadline.is_some_and(|d| d <= rt.now()) {
        return Woke::Deadline;
    }
    let mut sleep = std::pin::pin!(deadline.map(|d| rt.sleep_until(d)));
    std::future::poll_fn(|cx| {
        if let Poll::Ready(t) = input(cx) {
            return Poll::Ready(Woke::Input(t));
        }
        if wakeup.poll_take(cx).is_ready() {
            return Poll::Ready(Woke::Wake);
        }
        match sleep.as_mut().as_pin_mut().map(|s| s.poll(cx)) {
            Some(Poll::Ready(_)) => Poll::Ready(Woke::Deadline),
            _ => Poll::Pending,
        }
    })
    .await
}

/// Runs `task` until it ends or `stop` is set, whichever comes first.
async fn until(mut task: BoxFuture<'static, ()>, stop: Latch) {
    let mut stopped = std::pin::pin!(stop.wait());
    std::future::poll_fn(|cx| {
        if task.as_mut().poll(cx).is_ready() || stopped.as_mut().poll(cx).is_ready() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
}
