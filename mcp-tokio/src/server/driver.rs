//! The driver task: the one owner of the [`Router`] and the [`ServerBinding`].
//!
//! Connections send it [`ToDriver`] messages (request heads, body chunks, ends, disconnects)
//! over one bounded channel ([`Limits::inbound`]), so the messages of an exchange keep their
//! order; when it is full, connections wait (hyper stops reading requests: TCP backpressure).
//! It answers on a per-exchange channel ([`Exchange`]) that the core bounds: the router
//! hands out at most its send window of body bytes that the response body has not reported
//! taken ([`ToDriver::Written`]), so a client that reads slowly holds at most that much here.
//! Each turn: apply what the handlers queued, drain the router's outputs, then wait for the
//! earliest of a message, a wake-up from a handler, the router's deadline, or a shutdown
//! command, and feed what fired with `Instant::now()`.
//!
//! # At the bounds
//!
//! Whether a client reads too slowly is the core's decision (its slow-reader rule): on
//! [`ServerOutput::ResponseAbort`] the exchange's body ends with an error, so hyper aborts
//! the connection instead of ending the chunked body cleanly (the client must not mistake
//! the cut for a complete stream).
//!
//! # Shutdown
//!
//! A [`Control::Drain`] command calls [`Router::begin_shutdown`]; the driver keeps running
//! until [`Router::is_drained`] (the core's grace deadline, from [`Router::poll_timeout`],
//! bounds that), then calls [`Router::shutdown`], writes what it produced, and stops; the
//! `stopped` flag then tells the connections to close.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use mcp_proto::server::{RequestHead, Router, ServerConfig, ServerOutput, StreamId};
use mcp_proto::service::Server;
use mcp_proto::service::bind::{Routed, ServerBinding};
use tokio::sync::{Notify, mpsc, watch};

/// The adapter's queue bounds (plain channel capacities: no protocol meaning).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Messages queued from all connections to the driver (heads, body chunks, ends,
    /// disconnects). When full, connections wait before reading more. Default 1024. (What a
    /// response may hold is bounded by the core: `ServerConfig::send_window`.)
    pub inbound: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { inbound: 1024 }
    }
}

impl Limits {
    /// Sets [`Limits::inbound`] (at least 1).
    pub fn with_inbound(mut self, capacity: usize) -> Self {
        self.inbound = capacity.max(1);
        self
    }
}

/// What the service tells the driver besides requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Control {
    /// Serve.
    Run,
    /// Drain within this grace period, then stop.
    Drain(Duration),
}

/// What the driver sends back on an exchange's response channel.
#[derive(Debug)]
pub(crate) enum Reply {
    /// The response head.
    Head(StatusCode, HeaderMap),
    /// A body chunk (one SSE frame or a whole JSON body).
    Body(Bytes),
}

/// The driver's end of one exchange.
#[derive(Debug)]
pub(crate) struct Exchange {
    /// Response head and body chunks; dropping it ends the response.
    pub(crate) reply: mpsc::UnboundedSender<Reply>,
    /// Set when the core cut the exchange ([`ServerOutput::ResponseAbort`]): the body then
    /// ends with an error rather than cleanly.
    pub(crate) aborted: Arc<AtomicBool>,
}

/// A message from a connection to the driver. `key` names the exchange (allocated by the
/// connection side, so that a head and its body chunks need no round trip).
#[derive(Debug)]
pub(crate) enum ToDriver {
    /// A new request.
    Head {
        key: u64,
        parts: Box<http::request::Parts>,
        exchange: Exchange,
    },
    /// A chunk of its body.
    Body { key: u64, chunk: Bytes },
    /// Its body is complete.
    End { key: u64 },
    /// The client went away (the response body or the request future was dropped early).
    Disconnect { key: u64 },
    /// The response body handed this many more bytes to hyper.
    Written { key: u64, bytes: usize },
}

struct State {
    router: Router,
    binding: ServerBinding,
    by_key: HashMap<u64, StreamId>,
    exchanges: HashMap<StreamId, (u64, Exchange)>,
}

/// Runs the driver until a drain has finished or every sender is gone; then sets `stopped`.
pub(crate) async fn run(
    server: Server,
    config: ServerConfig,
    mut rx: mpsc::Receiver<ToDriver>,
    mut control: watch::Receiver<Control>,
    stopped: watch::Sender<bool>,
) {
    let wake = Arc::new(Notify::new());
    let waker = wake.clone();
    let binding = ServerBinding::new(
        server,
        Arc::new(|d| Box::pin(tokio::time::sleep(d))),
        Arc::new(move || waker.notify_one()),
    );
    let mut st = State {
        router: Router::new(config, Instant::now()),
        binding,
        by_key: HashMap::new(),
        exchanges: HashMap::new(),
    };
    let mut control_open = true;
    loop {
        st.pump(Instant::now());
        if st.router.is_drained() {
            st.router.shutdown(Instant::now());
            st.pump(Instant::now());
            break;
        }
        let deadline = st.router.poll_timeout();
        // The clock before the sleep: a deadline already passed fires at once.
        if deadline.is_some_and(|d| d <= Instant::now()) {
            st.router.handle_timeout(Instant::now());
            continue;
        }
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            changed = control.changed(), if control_open => {
                let command = match changed {
                    Ok(()) => *control.borrow_and_update(),
                    // Every service handle is gone: nobody can drain it any more, and
                    // the inbound channel closing ends the loop.
                    Err(_) => {
                        control_open = false;
                        Control::Run
                    }
                };
                if let Control::Drain(grace) = command {
                    tracing::debug!(?grace, "mcp-tokio driver draining");
                    st.router.begin_shutdown(Instant::now(), grace);
                }
            }
            msg = rx.recv() => {
                let Some(msg) = msg else { break };
                st.input(msg);
                // Take what else is already there before draining outputs.
                for _ in 0..256 {
                    match rx.try_recv() {
                        Ok(msg) => st.input(msg),
                        Err(_) => break,
                    }
                }
            }
            () = wake.notified() => {}
            () = sleep => st.router.handle_timeout(Instant::now()),
        }
    }
    tracing::debug!(
        exchanges = st.exchanges.len(),
        sessions = st.router.session_count(),
        "mcp-tokio driver stopped"
    );
    let _ = stopped.send(true);
}

impl State {
    fn input(&mut self, msg: ToDriver) {
        let now = Instant::now();
        match msg {
            ToDriver::Head {
                key,
                parts,
                exchange,
            } => {
                let stream = self
                    .router
                    .handle_request(now, RequestHead::from_parts(&parts));
                tracing::trace!(stream = stream.as_u64(), method = %parts.method, uri = %parts.uri, "request");
                self.by_key.insert(key, stream);
                self.exchanges.insert(stream, (key, exchange));
            }
            ToDriver::Body { key, chunk } => {
                if let Some(&stream) = self.by_key.get(&key) {
                    self.router.handle_body(now, stream, &chunk);
                }
            }
            ToDriver::End { key } => {
                if let Some(&stream) = self.by_key.get(&key) {
                    self.router.handle_body_end(now, stream);
                }
            }
            ToDriver::Disconnect { key } => {
                if let Some(stream) = self.by_key.remove(&key) {
                    self.exchanges.remove(&stream);
                    tracing::trace!(stream = stream.as_u64(), "client went away");
                    self.router.handle_disconnect(now, stream);
                }
            }
            ToDriver::Written { key, bytes } => {
                if let Some(&stream) = self.by_key.get(&key) {
                    self.router.handle_written(now, stream, bytes);
                }
            }
        }
    }

    /// Applies queued commands and drains outputs until nothing moves.
    fn pump(&mut self, now: Instant) {
        loop {
            let applied = self.binding.apply(&mut self.router, now);
            let mut moved = false;
            while let Some(out) = self.router.poll_output() {
                moved = true;
                self.output(out);
            }
            if !applied && !moved {
                return;
            }
        }
    }

    fn output(&mut self, out: ServerOutput) {
        match self.binding.handle_output(out) {
            Routed::Spawn(task) => {
                tokio::spawn(task);
            }
            Routed::Done => {}
            Routed::Transport(out) => self.transport(out),
        }
    }

    fn transport(&mut self, out: ServerOutput) {
        match out {
            ServerOutput::ResponseHead {
                stream,
                status,
                headers,
            } => self.send(stream, Reply::Head(status, headers)),
            ServerOutput::ResponseBody { stream, chunk } => self.send(stream, Reply::Body(chunk)),
            ServerOutput::ResponseEnd { stream } => {
                // Dropping the sender ends the body.
                if let Some((key, _)) = self.exchanges.remove(&stream) {
                    self.by_key.remove(&key);
                }
            }
            ServerOutput::ResponseAbort { stream } => {
                if let Some((key, ex)) = self.exchanges.remove(&stream) {
                    ex.aborted.store(true, Ordering::Release);
                    self.by_key.remove(&key);
                }
            }
            // The connection stops reading the body when the head (which comes with this)
            // arrives: see `McpService::handle`.
            ServerOutput::StopReading { stream } => {
                tracing::trace!(stream = stream.as_u64(), "stop reading");
            }
            ServerOutput::SessionCreated { session } => {
                tracing::debug!(session = session.as_u64(), "session created");
            }
            ServerOutput::SessionClosed { session, reason } => {
                tracing::debug!(session = session.as_u64(), ?reason, "session closed");
            }
            ServerOutput::Event(event) => tracing::debug!(?event, "router event"),
            other => tracing::trace!(?other, "unhandled router output"),
        }
    }

    fn send(&mut self, stream: StreamId, reply: Reply) {
        let gone = match self.exchanges.get(&stream) {
            Some((_, ex)) => ex.reply.send(reply).is_err(),
            None => false,
        };
        if gone {
            // The response side is gone: the client left.
            if let Some((key, _)) = self.exchanges.remove(&stream) {
                self.by_key.remove(&key);
            }
            self.router.handle_disconnect(Instant::now(), stream);
        }
    }
}
