//! [`McpService`]: the hyper service that turns each HTTP exchange into driver messages and
//! streams the driver's replies back through a channel-backed [`ResponseBody`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use mcp_proto::server::{DEFAULT_SHUTDOWN_GRACE, ServerConfig};
use mcp_proto::service::Server;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, watch};

use super::driver::{self, Control, Exchange, Limits, Reply, ToDriver};

/// Why a request got no response: the driver stopped (shutdown) before answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverGone;

impl std::fmt::Display for DriverGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the MCP driver stopped before answering")
    }
}

impl std::error::Error for DriverGone {}

/// Why a response body ended early: the client stopped reading it and the core cut it
/// (`ServerConfig::slow_reader_timeout`); hyper then aborts the connection rather than end
/// the body as if it were complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseAborted;

impl std::fmt::Display for ResponseAborted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the response was cut: the client stopped reading it")
    }
}

impl std::error::Error for ResponseAborted {}

struct Shared {
    tx: mpsc::Sender<ToDriver>,
    keys: AtomicU64,
    control: watch::Sender<Control>,
    stopped: watch::Receiver<bool>,
    limits: Limits,
    /// `ServerConfig::write_report_threshold`.
    report_every: usize,
}

/// The MCP endpoint as a hyper [`Service`](hyper::service::Service): clone it into every
/// connection (or mount it in any framework that takes hyper services). All clones feed one
/// driver task that owns the router and the service binding; it stops on
/// [`shutdown`](McpService::shutdown) or when the last clone and response are gone.
#[derive(Clone)]
pub struct McpService {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for McpService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpService").finish_non_exhaustive()
    }
}

impl McpService {
    /// Spawns the driver of `server` with `config` on the current tokio runtime, with the
    /// default [`Limits`].
    ///
    /// Secure by default: session ids come from [`RandomSessionIds`](crate::RandomSessionIds)
    /// unless `config` has a generator, and `Host` validation is the core's default (loopback
    /// only) unless `config` says otherwise: behind a public name, configure
    /// [`ServerConfig::with_host_validation`] (or [`ServerConfig::bound_to`] the bind
    /// address).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn new(server: Server, config: ServerConfig) -> McpService {
        McpService::with_limits(server, config, Limits::default())
    }

    /// [`new`](McpService::new) with explicit queue bounds.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn with_limits(server: Server, config: ServerConfig, limits: Limits) -> McpService {
        let limits = Limits::default().with_inbound(limits.inbound);
        let config = config.or_session_ids(crate::RandomSessionIds);
        let report_every = config.write_report_threshold();
        let (tx, rx) = mpsc::channel(limits.inbound);
        let (control, control_rx) = watch::channel(Control::Run);
        let (stopped_tx, stopped) = watch::channel(false);
        tokio::spawn(driver::run(server, config, rx, control_rx, stopped_tx));
        McpService {
            shared: Arc::new(Shared {
                tx,
                keys: AtomicU64::new(1),
                control,
                stopped,
                limits,
                report_every,
            }),
        }
    }

    /// The queue bounds in force.
    pub fn limits(&self) -> Limits {
        self.shared.limits
    }

    /// Starts a draining shutdown with the core's default grace period
    /// ([`DEFAULT_SHUTDOWN_GRACE`]); see [`shutdown_within`](McpService::shutdown_within).
    pub fn shutdown(&self) {
        self.shutdown_within(DEFAULT_SHUTDOWN_GRACE);
    }

    /// Starts a draining shutdown ([`Router::begin_shutdown`]): new requests are refused
    /// (the core answers 503), GET streams end cleanly, requests in flight finish and their
    /// responses are written; after `grace` whatever is left is cancelled. The driver then
    /// stops ([`stopped`](McpService::stopped)). A second call changes nothing.
    ///
    /// [`Router::begin_shutdown`]: mcp_proto::server::Router::begin_shutdown
    pub fn shutdown_within(&self, grace: Duration) {
        self.shared.control.send_if_modified(|c| {
            if *c == Control::Run {
                *c = Control::Drain(grace);
                true
            } else {
                false
            }
        });
    }

    /// Resolves once the driver has stopped (after a drain, or when every handle is gone).
    pub async fn stopped(&self) {
        let mut stopped = self.shared.stopped.clone();
        // An error means the driver task is gone, which is stopped too.
        let _ = stopped.wait_for(|s| *s).await;
    }

    /// Handles one HTTP exchange. Resolves to the response once the router sent its head;
    /// the body streams from the driver as the router produces it.
    pub async fn handle<B>(&self, req: Request<B>) -> Result<Response<ResponseBody>, DriverGone>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
    {
        let key = self.shared.keys.fetch_add(1, Ordering::Relaxed);
        let (parts, body) = req.into_parts();
        let (reply_tx, mut reply_rx) = mpsc::unbounded_channel();
        let aborted = Arc::new(AtomicBool::new(false));
        let guard = Guard {
            key,
            tx: self.shared.tx.clone(),
            armed: true,
        };
        // Waits while the driver's queue is full: this connection reads nothing more.
        self.shared
            .tx
            .send(ToDriver::Head {
                key,
                parts: Box::new(parts),
                exchange: Exchange {
                    reply: reply_tx,
                    aborted: aborted.clone(),
                },
            })
            .await
            .map_err(|_| DriverGone)?;
        // The body is read in this task while waiting for the head (no task per request).
        // The router answers a POST only once it has the whole body, or early when it
        // refuses it (`StopReading` comes with that answer): either way the head means the
        // body is no longer needed, so reading stops there.
        let mut pump = std::pin::pin!(pump(key, body, self.shared.tx.clone()));
        let mut pumping = true;
        let head = loop {
            tokio::select! {
                biased;
                head = reply_rx.recv() => break head,
                () = &mut pump, if pumping => pumping = false,
            }
        };
        let (status, headers) = match head {
            Some(Reply::Head(status, headers)) => (status, headers),
            // The router always starts with the head; anything else means it is gone.
            _ => return Err(DriverGone),
        };
        let mut response = Response::new(ResponseBody {
            rx: reply_rx,
            aborted,
            guard: Some(guard),
            report_every: self.shared.report_every,
            taken: 0,
        });
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        Ok(response)
    }
}

impl<B> hyper::service::Service<Request<B>> for McpService
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
{
    type Response = Response<ResponseBody>;
    type Error = DriverGone;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, DriverGone>> + Send>>;

    fn call(&self, req: Request<B>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { this.handle(req).await })
    }
}

/// Reads the request body into the driver until it ends or fails (or the response head
/// arrives first: see [`McpService::handle`]).
async fn pump<B>(key: u64, mut body: B, tx: mpsc::Sender<ToDriver>)
where
    B: Body<Data = Bytes> + Unpin,
{
    loop {
        // In a block, so that the frame (whose error type need not be `Send`) is gone
        // before the await below.
        let msg = {
            let frame = body.frame().await;
            match frame {
                None => ToDriver::End { key },
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(chunk) => ToDriver::Body { key, chunk },
                    // Trailers carry nothing for the router.
                    Err(_) => continue,
                },
                Some(Err(_)) => ToDriver::Disconnect { key },
            }
        };
        let last = !matches!(msg, ToDriver::Body { .. });
        if tx.send(msg).await.is_err() || last {
            return;
        }
    }
}

/// Reports a disconnect when the exchange is dropped before the driver ended it.
struct Guard {
    key: u64,
    tx: mpsc::Sender<ToDriver>,
    armed: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.deliver(ToDriver::Disconnect { key: self.key });
    }
}

impl Guard {
    /// Sends `msg` to the driver without waiting: when the queue is full, a task delivers it
    /// (at most one disconnect per exchange, and a body reports again only after the driver
    /// sent it more, so these tasks are bounded too).
    fn deliver(&self, msg: ToDriver) {
        if let Err(TrySendError::Full(msg)) = self.tx.try_send(msg)
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let tx = self.tx.clone();
            rt.spawn(async move {
                let _ = tx.send(msg).await;
            });
        }
    }
}

/// A response body fed by the driver: each router chunk becomes one frame (hyper writes and
/// flushes each frame as it comes). Dropping it before its end tells the router the client
/// went away.
pub struct ResponseBody {
    rx: mpsc::UnboundedReceiver<Reply>,
    aborted: Arc<AtomicBool>,
    guard: Option<Guard>,
    /// Report taken bytes to the driver once this many are unreported.
    report_every: usize,
    /// Bytes handed to hyper and not yet reported ([`ToDriver::Written`]).
    taken: usize,
}

impl ResponseBody {
    /// Tells the driver how much of the body hyper took (the core paces by it).
    fn report(&mut self) {
        let Some(guard) = &self.guard else { return };
        if self.taken == 0 {
            return;
        }
        let msg = ToDriver::Written {
            key: guard.key,
            bytes: std::mem::take(&mut self.taken),
        };
        guard.deliver(msg);
    }
}

impl std::fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseBody")
            .field("ended", &self.guard.is_none())
            .finish()
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = ResponseAborted;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.guard.is_none() {
            return Poll::Ready(None);
        }
        loop {
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(Reply::Body(chunk))) => {
                    self.taken += chunk.len();
                    if self.taken >= self.report_every {
                        self.report();
                    }
                    return Poll::Ready(Some(Ok(Frame::data(chunk))));
                }
                // A second head cannot happen; skip it rather than corrupt the body.
                Poll::Ready(Some(Reply::Head(..))) => continue,
                Poll::Ready(None) => {
                    if let Some(mut guard) = self.guard.take() {
                        guard.armed = false;
                    }
                    if self.aborted.load(Ordering::Acquire) {
                        return Poll::Ready(Some(Err(ResponseAborted)));
                    }
                    return Poll::Ready(None);
                }
                Poll::Pending => {
                    // Everything given so far was taken: let the core send more.
                    self.report();
                    return Poll::Pending;
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.guard.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
