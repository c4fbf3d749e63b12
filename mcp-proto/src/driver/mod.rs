//! # The driver: what every adapter does each turn, written once
//!
//! The state machines ([`Router`](crate::server::Router),
//! [`ClientSession`](crate::client::ClientSession)) and the service bindings
//! ([`bind`](crate::service::bind)) leave an adapter a loop to run: apply what the service
//! queued, drain the machine's outputs until neither moves, sleep until the earliest of its
//! deadline, the next network input or a wake-up, and feed what fired with the time. This
//! module is that loop, runtime-free: it uses `futures-channel` for its queues and knows
//! nothing of tokio, smol or sockets. An adapter gives it three things through [`Runtime`]
//! — spawn a task, sleep until an instant, read the clock — and, on the client, an
//! [`Engine`] that carries an [`HttpRequest`](crate::client::HttpRequest) over its HTTP
//! library. Everything else lives here once:
//!
//! - the **server** side ([`ServerHandle`]): the key ↔ stream maps, the connection-side
//!   [`exchange`](ServerHandle::exchange) (head, body pump with backpressure, the reply
//!   stream that reports what the HTTP library took), the bounded inbound queue
//!   ([`Limits`]), draining shutdown, session ids from the OS ([`RandomSessionIds`]), the
//!   running server's handle ([`Serving`]) and its [`accept_loop`];
//! - the **client** side ([`Client`], [`Connect`]): the builder vocabulary of every adapter,
//!   the intent ↔ exchange map, network events ([`NetEvents`]), event severity, close and
//!   drop, handlers of server requests stopped with the driver.
//!
//! - **HTTPS** ([`tls`], feature `tls`): the client's trust ([`ClientTls`]), the server's
//!   certificate and handshake timeout ([`ServerTls`]), the handshake under that timeout,
//!   rustls' errors classified as [`TlsFailure`](crate::client::TlsFailure)s.
//! - for adapters on **futures-io** streams ([`conn`], feature `futures-io`): one stream for
//!   a split reader and writer, and the securing of each connection opened or accepted
//!   (plain, or with feature `futures-tls` TLS by futures-rustls); for adapters on
//!   **async-h1** ([`h1`], feature `http-types`): the http-types 2 ↔ `http` 1.x conversions.
//!   Both are runtime-neutral (futures-io traits, [`Runtime`]): any executor's sockets fit.
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
//! | running | client: close command or `Client` dropped | closing (`ClientSession::close`) |
//! | closing | `ClientSession::is_closed` | stopped |
//! | any | every sender of the inbound queue gone (server) | stopped |

mod client;
mod cluster;
#[cfg(feature = "futures-io")]
pub mod conn;
#[cfg(feature = "http-types")]
pub mod h1;
mod memory;
mod oauth;
mod outbox;
#[cfg(feature = "redis")]
pub mod redis;
mod server;
mod signal;
#[cfg(feature = "tls")]
pub mod tls;

use std::future::Future;
use std::time::Instant;

pub use client::{
    Client, ClientDriver, Connect, ConnectError, Engine, NetEvent, NetEventKind, NetEvents,
};
pub use cluster::SharedMemoryCluster;
pub use memory::{MemoryExchange, MemoryLink, MemorySink};
pub use oauth::{AuthorizeHandler, OAuth, SharedTokenStore};
pub use outbox::Exchange;
pub use server::{
    Departure, DriverGone, ExchangeSink, Limits, RandomSessionIds, Reply, Response,
    ResponseAborted, ResponseStream, ServerDriver, ServerHandle, Serving, ShutdownHandle, ToDriver,
    accept_loop,
};
pub use signal::Latch;
#[cfg(feature = "tls")]
pub use tls::{ClientTls, ServerTls};

use crate::service::server::BoxFuture;

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

/// The first 8 characters of a session id: enough to follow a session through a log,
/// never the whole id (it works like a bearer secret). Both drivers log sessions so.
pub(crate) fn short_id(id: &str) -> String {
    id.chars().take(8).collect()
}

/// The binding's timer ([`crate::service::bind::Sleep`]) on a runtime.
fn binding_sleep<R: Runtime>(rt: &R) -> crate::service::bind::Sleep {
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

/// The in-memory [`EraStore`](crate::client::EraStore) of [`EraCache::new`](crate::client::EraCache::new).
#[derive(Default)]
struct MemoryEras(std::sync::Mutex<std::collections::BTreeMap<String, crate::client::KnownEra>>);

impl crate::client::EraStore for MemoryEras {
    fn get(&self, origin: &str) -> Option<crate::client::KnownEra> {
        crate::service::cancel::lock(&self.0).get(origin).copied()
    }

    fn insert(&self, origin: &str, era: crate::client::KnownEra) {
        crate::service::cancel::lock(&self.0).insert(origin.to_owned(), era);
    }

    fn forget(&self, origin: &str) {
        crate::service::cancel::lock(&self.0).remove(origin);
    }
}

impl crate::client::EraCache {
    /// An empty cache in memory.
    pub fn new() -> Self {
        Self::with_store(std::sync::Arc::new(MemoryEras::default()))
    }
}

impl Default for crate::client::EraCache {
    fn default() -> Self {
        Self::new()
    }
}
