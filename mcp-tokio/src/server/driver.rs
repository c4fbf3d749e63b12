//! The driver task: the one owner of the [`Router`] and the [`ServerBinding`].
//!
//! Connections send it [`ToDriver`] messages (request heads, body chunks, ends, disconnects)
//! over one unbounded channel, so the messages of an exchange keep their order. It answers
//! on a per-exchange channel ([`Exchange`]). Each turn: apply what the handlers queued, drain
//! the router's outputs, then wait for the earliest of a message, a wake-up from a handler,
//! the router's deadline, or shutdown, and feed what fired with `Instant::now()`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use mcp_proto::server::{RequestHead, Router, ServerConfig, ServerOutput, StreamId};
use mcp_proto::service::Server;
use mcp_proto::service::bind::{Routed, ServerBinding};
use tokio::sync::{Notify, mpsc, oneshot, watch};

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
    /// Tells the request body pump to stop reading.
    pub(crate) stop_reading: Option<oneshot::Sender<()>>,
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
}

struct State {
    router: Router,
    binding: ServerBinding,
    by_key: HashMap<u64, StreamId>,
    exchanges: HashMap<StreamId, (u64, Exchange)>,
}

/// Runs the driver until `shutdown` turns true or every sender is gone.
pub(crate) async fn run(
    server: Server,
    config: ServerConfig,
    mut rx: mpsc::UnboundedReceiver<ToDriver>,
    mut shutdown: watch::Receiver<bool>,
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
    loop {
        st.pump(Instant::now());
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
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    break;
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
            ServerOutput::StopReading { stream } => {
                if let Some(stop) = self
                    .exchanges
                    .get_mut(&stream)
                    .and_then(|(_, ex)| ex.stop_reading.take())
                {
                    let _ = stop.send(());
                }
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
