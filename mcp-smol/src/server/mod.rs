//! The server: [`serve`], an accept loop of async-h1 connections whose exchanges feed one
//! driver task (see [`driver`]).
//!
//! # Theory of operation
//!
//! Each connection runs async-h1's request loop one request at a time
//! ([`async_h1::server::Server::accept_one`]). Its endpoint turns the request into driver
//! messages: the head (converted to `http` 1.x types), then the body read by a pump task,
//! then, once the body is complete, the same task watches the socket: async-h1 does not read
//! it again before the response ends, so EOF there means the client left, and the router
//! hears of it at once (`handle_disconnect`) rather than at the next failed write. The
//! endpoint resolves when the driver sends the response head; the body is a channel the
//! driver fills, one chunk per router chunk, written and sent as it comes (`TCP_NODELAY`). A
//! body dropped before its end (a write failed) is a disconnect too.
//!
//! Per connection:
//!
//! | state | event | next |
//! |---|---|---|
//! | idle (waiting for a request head) | head decoded | busy |
//! | idle | shutdown | closed (the socket is dropped) |
//! | busy (an exchange in progress) | response written, keep-alive | idle, or closed after a shutdown |
//! | busy | shutdown | busy (the driver stops, so the response ends), then closed |
//! | any | EOF, error, `Connection: close` | closed |

mod driver;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use async_h1::server::ConnectionStatus;
use bytes::Bytes;
use mcp_proto::server::{ServerConfig, SessionIdGenerator};
use mcp_proto::service::Server;
use smol::Task;
use smol::channel::{Receiver, Sender};
use smol::future::FutureExt;
use smol::io::AsyncReadExt;
use smol::net::{TcpListener, TcpStream};

use crate::body::{ChannelBody, Flow, OnDrop};
use crate::convert;
use driver::{Exchange, ToDriver};

/// The size of one read of a request body (each read becomes one chunk for the router).
const READ_CHUNK: usize = 16 * 1024;

/// Session ids from the operating system's CSPRNG: 16 random bytes as 32 lowercase hex
/// characters (S-SESS-2).
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomSessionIds;

impl SessionIdGenerator for RandomSessionIds {
    fn generate(&mut self) -> String {
        let mut bytes = [0u8; 16];
        if let Err(e) = getrandom::fill(&mut bytes) {
            // An empty id is invalid: the router refuses to send it, so the session fails
            // closed rather than get a guessable id.
            tracing::error!(error = %e, "no random source for a session id");
            return String::new();
        }
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

struct Shared {
    tx: Sender<ToDriver>,
    keys: AtomicU64,
    /// `ServerConfig::write_report_threshold`.
    report_every: usize,
}

/// A running server (from [`serve`]). Dropping it detaches the server (it keeps serving on
/// smol's global executor); [`Serving::shutdown`] stops it.
#[derive(Debug)]
pub struct Serving {
    local_addr: SocketAddr,
    url: String,
    trigger: ShutdownHandle,
    accept: Option<Task<()>>,
}

/// Starts the shutdown of a [`Serving`] from anywhere (a signal handler, another task).
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    stop: Sender<()>,
}

impl ShutdownHandle {
    /// Starts the shutdown (see [`Serving::shutdown`]); [`Serving::wait`] sees it end.
    pub fn shutdown(&self) {
        // Closing the channel wakes every waiter: the accept loop, each idle connection and
        // the driver.
        self.stop.close();
    }
}

impl Serving {
    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The MCP endpoint's URL, e.g. `http://127.0.0.1:8080/mcp`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A handle that starts the shutdown from elsewhere.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.trigger.clone()
    }

    /// Waits until the server has shut down (started by a [`ShutdownHandle`]).
    pub async fn wait(mut self) {
        if let Some(accept) = self.accept.take() {
            accept.await;
        }
    }

    /// Shuts down: stops accepting, closes idle connections, lets each busy one finish its
    /// response, stops the driver (open SSE streams end, requests still being handled get no
    /// response), and waits for the connections to finish. Wrap it in a timeout to bound the
    /// wait on slow clients.
    pub async fn shutdown(self) {
        self.trigger.shutdown();
        self.wait().await;
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(accept) = self.accept.take() {
            accept.detach();
        }
    }
}

/// Serves `server` on `listener` (HTTP/1.1 through async-h1, `TCP_NODELAY` on every
/// connection) on smol's global executor until [`Serving::shutdown`].
///
/// `config` is adjusted as every adapter must: session ids from [`RandomSessionIds`] (unless
/// it has a generator),
/// [`ServerConfig::bound_to`] the listener's address (loopback `Host` validation for a
/// loopback bind), and [`ServerConfig::with_heartbeats_required`]: async-h1 notices a client
/// that left only when a write fails, so an SSE stream must be written to now and then.
///
/// # Errors
///
/// When the listener's local address cannot be read.
pub fn serve(listener: TcpListener, server: Server, config: ServerConfig) -> io::Result<Serving> {
    let local_addr = listener.local_addr()?;
    let url = format!("http://{local_addr}{}", config.endpoint_path);
    let config = config
        .or_session_ids(RandomSessionIds)
        .bound_to(local_addr.ip())
        .with_heartbeats_required();
    let report_every = config.write_report_threshold();
    let (tx, rx) = smol::channel::unbounded();
    let (stop, stop_rx) = smol::channel::bounded(1);
    smol::spawn(driver::run(server, config, rx, stop_rx.clone())).detach();
    let shared = Arc::new(Shared {
        tx,
        keys: AtomicU64::new(1),
        report_every,
    });
    let accept = smol::spawn(accept_loop(listener, shared, stop_rx));
    tracing::info!(%url, "serving MCP");
    Ok(Serving {
        local_addr,
        url,
        trigger: ShutdownHandle { stop },
        accept: Some(accept),
    })
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, stop: Receiver<()>) {
    let mut connections: Vec<Task<()>> = Vec::new();
    loop {
        let accepted = async {
            let _ = stop.recv().await;
            None
        }
        .or(async { Some(listener.accept().await) })
        .await;
        match accepted {
            None => break,
            Some(Ok((tcp, peer))) => {
                if let Err(e) = tcp.set_nodelay(true) {
                    tracing::debug!(%peer, error = %e, "TCP_NODELAY");
                }
                connections.retain(|c| !c.is_finished());
                connections.push(smol::spawn(connection(
                    tcp,
                    peer,
                    shared.clone(),
                    stop.clone(),
                )));
            }
            // Per-connection failures (resets, fd limits) must not end the server.
            Some(Err(e)) => {
                tracing::warn!(error = %e, "accept failed");
                smol::future::yield_now().await;
            }
        }
    }
    drop(listener);
    for connection in connections {
        connection.await;
    }
}

enum Next {
    Served(http_types::Result<ConnectionStatus>),
    StopWhileIdle,
}

async fn connection(tcp: TcpStream, peer: SocketAddr, shared: Arc<Shared>, stop: Receiver<()>) {
    let busy = Arc::new(AtomicBool::new(false));
    let endpoint = {
        let busy = busy.clone();
        let tcp = tcp.clone();
        move |req| {
            busy.store(true, Ordering::SeqCst);
            exchange(shared.clone(), tcp.clone(), req)
        }
    };
    let mut server = async_h1::server::Server::new(tcp, endpoint);
    loop {
        busy.store(false, Ordering::SeqCst);
        let next = async { Next::Served(server.accept_one().await) }
            .or(async {
                let _ = stop.recv().await;
                if busy.load(Ordering::SeqCst) {
                    // Let the response in progress finish (the driver is stopping too).
                    std::future::pending::<()>().await;
                }
                Next::StopWhileIdle
            })
            .await;
        match next {
            Next::Served(Ok(ConnectionStatus::KeepAlive)) if !stop.is_closed() => {}
            Next::Served(Ok(_)) | Next::StopWhileIdle => break,
            Next::Served(Err(e)) => {
                tracing::debug!(%peer, error = %e, "connection ended");
                break;
            }
        }
    }
}

/// An error that makes async-h1 close the connection without a response: the adapter never
/// invents a status code.
fn no_response(why: impl std::fmt::Display) -> http_types::Error {
    http_types::Error::from(io::Error::other(why.to_string()))
}

/// One HTTP exchange: the request to the driver, the driver's response back.
async fn exchange(
    shared: Arc<Shared>,
    tcp: TcpStream,
    mut req: http_types::Request,
) -> http_types::Result<http_types::Response> {
    let parts = match convert::request_parts(&req) {
        Ok(parts) => parts,
        Err(e) => {
            tracing::debug!(error = %e, "request not representable in http 1.x types");
            return Err(no_response(e));
        }
    };
    let key = shared.keys.fetch_add(1, Ordering::Relaxed);
    let (head_tx, head_rx) = smol::channel::bounded(1);
    let (body_tx, body_rx) = smol::channel::unbounded();
    let (stop_tx, stop_rx) = smol::channel::bounded(1);
    let aborted = Arc::new(AtomicBool::new(false));
    // Until the body takes it over: a handler dropped early is a disconnect.
    let tx = shared.tx.clone();
    let disconnect = OnDrop::new(move || {
        let _ = tx.try_send(ToDriver::Disconnect { key });
    });
    shared
        .tx
        .try_send(ToDriver::Head {
            key,
            parts: Box::new(parts),
            exchange: Exchange {
                head: Some(head_tx),
                body: body_tx,
                stop_reading: stop_tx,
                aborted: aborted.clone(),
            },
        })
        .map_err(|_| no_response("the MCP driver stopped"))?;
    let pump = smol::spawn(pump_then_watch(
        key,
        req.take_body(),
        tcp,
        shared.tx.clone(),
        stop_rx,
    ));
    let Ok((status, headers)) = head_rx.recv().await else {
        // The driver stopped, or the client left before the head.
        return Err(no_response("no response head from the MCP driver"));
    };
    let status = convert::status_to_h1(status).map_err(|e| {
        tracing::error!(error = %e, "response head not representable in http-types");
        no_response(e)
    })?;
    let report_tx = shared.tx.clone();
    let flow = Flow {
        aborted,
        report: Box::new(move |bytes| {
            let _ = report_tx.try_send(ToDriver::Written { key, bytes });
        }),
        report_every: shared.report_every,
    };
    let mut res = http_types::Response::new(status);
    res.set_body(http_types::Body::from_reader(
        ChannelBody::new(body_rx, disconnect, pump, flow),
        None,
    ));
    // `set_body` adds the body's default content type; the router's headers are the only ones.
    res.remove_header("content-type");
    convert::headers_to_h1(&headers, |name, value| res.append_header(name, value)).map_err(
        |e| {
            tracing::error!(error = %e, "response header not representable in http-types");
            no_response(e)
        },
    )?;
    Ok(res)
}

/// Reads the request body into the driver until it ends, fails, or the router says stop;
/// then, the request being complete, watches the socket for EOF (the client left) until the
/// response ends (the body drops this task).
async fn pump_then_watch(
    key: u64,
    mut body: http_types::Body,
    tcp: TcpStream,
    tx: Sender<ToDriver>,
    stop: Receiver<()>,
) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        let read = async {
            let _ = stop.recv().await;
            None
        }
        .or(async { Some(body.read(&mut buf).await) })
        .await;
        let msg = match read {
            None => return,
            Some(Ok(0)) => ToDriver::End { key },
            Some(Ok(n)) => ToDriver::Body {
                key,
                chunk: Bytes::copy_from_slice(&buf[..n]),
            },
            Some(Err(e)) => {
                tracing::debug!(error = %e, "request body failed");
                let _ = tx.try_send(ToDriver::Disconnect { key });
                return;
            }
        };
        let end = matches!(msg, ToDriver::End { .. });
        if tx.try_send(msg).is_err() {
            return;
        }
        if end {
            break;
        }
    }
    drop(buf);
    let mut one = [0u8; 1];
    match tcp.peek(&mut one).await {
        // Bytes of a pipelined request: the client is there.
        Ok(n) if n > 0 => {}
        Ok(_) | Err(_) => {
            tracing::trace!(key, "the client closed its connection");
            let _ = tx.try_send(ToDriver::Disconnect { key });
        }
    }
}
