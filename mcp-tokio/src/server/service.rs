//! [`McpService`]: the hyper service that turns each HTTP exchange into driver messages and
//! streams the driver's replies back through a channel-backed [`ResponseBody`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use mcp_proto::server::ServerConfig;
use mcp_proto::service::Server;
use tokio::sync::{mpsc, oneshot, watch};

use super::driver::{self, Exchange, Reply, ToDriver};

/// Why a request got no response: the driver stopped (shutdown) before answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverGone;

impl std::fmt::Display for DriverGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the MCP driver stopped before answering")
    }
}

impl std::error::Error for DriverGone {}

struct Shared {
    tx: mpsc::UnboundedSender<ToDriver>,
    keys: AtomicU64,
    shutdown: watch::Sender<bool>,
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
    /// Spawns the driver of `server` with `config` on the current tokio runtime.
    ///
    /// `config` is used as given: install a CSPRNG session id generator (as
    /// [`serve`](crate::serve) does with [`RandomSessionIds`](crate::RandomSessionIds)) and
    /// call [`ServerConfig::bound_to`] first.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn new(server: Server, config: ServerConfig) -> McpService {
        let (tx, rx) = mpsc::unbounded_channel();
        let (shutdown, shutdown_rx) = watch::channel(false);
        tokio::spawn(driver::run(server, config, rx, shutdown_rx));
        McpService {
            shared: Arc::new(Shared {
                tx,
                keys: AtomicU64::new(1),
                shutdown,
            }),
        }
    }

    /// Stops the driver: open responses end, requests in flight get no response.
    pub fn shutdown(&self) {
        let _ = self.shared.shutdown.send(true);
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
        let (stop_tx, stop_rx) = oneshot::channel();
        let guard = Guard {
            key,
            tx: self.shared.tx.clone(),
            armed: true,
        };
        self.shared
            .tx
            .send(ToDriver::Head {
                key,
                parts: Box::new(parts),
                exchange: Exchange {
                    reply: reply_tx,
                    stop_reading: Some(stop_tx),
                },
            })
            .map_err(|_| DriverGone)?;
        tokio::spawn(pump(key, body, self.shared.tx.clone(), stop_rx));
        let (status, headers) = match reply_rx.recv().await {
            Some(Reply::Head(status, headers)) => (status, headers),
            // The router always starts with the head; anything else means it is gone.
            _ => return Err(DriverGone),
        };
        let mut response = Response::new(ResponseBody {
            rx: reply_rx,
            guard: Some(guard),
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

/// Reads the request body into the driver until it ends, fails, or the router says stop.
async fn pump<B>(
    key: u64,
    mut body: B,
    tx: mpsc::UnboundedSender<ToDriver>,
    mut stop: oneshot::Receiver<()>,
) where
    B: Body<Data = Bytes> + Unpin,
{
    loop {
        let frame = tokio::select! {
            biased;
            _ = &mut stop => return,
            frame = body.frame() => frame,
        };
        let msg = match frame {
            None => ToDriver::End { key },
            Some(Ok(frame)) => match frame.into_data() {
                Ok(chunk) => ToDriver::Body { key, chunk },
                // Trailers carry nothing for the router.
                Err(_) => continue,
            },
            Some(Err(_)) => ToDriver::Disconnect { key },
        };
        let last = !matches!(msg, ToDriver::Body { .. });
        if tx.send(msg).is_err() || last {
            return;
        }
    }
}

/// Reports a disconnect when the exchange is dropped before the driver ended it.
struct Guard {
    key: u64,
    tx: mpsc::UnboundedSender<ToDriver>,
    armed: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.tx.send(ToDriver::Disconnect { key: self.key });
        }
    }
}

/// A response body fed by the driver: each router chunk becomes one frame (hyper writes and
/// flushes each frame as it comes). Dropping it before its end tells the router the client
/// went away.
pub struct ResponseBody {
    rx: mpsc::UnboundedReceiver<Reply>,
    guard: Option<Guard>,
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
    type Error = std::convert::Infallible;

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
                    return Poll::Ready(Some(Ok(Frame::data(chunk))));
                }
                // A second head cannot happen; skip it rather than corrupt the body.
                Poll::Ready(Some(Reply::Head(..))) => continue,
                Poll::Ready(None) => {
                    if let Some(mut guard) = self.guard.take() {
                        guard.armed = false;
                    }
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
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
