//! The driver task: the one owner of the [`Router`] and the [`ServerBinding`].
//!
//! Exchanges send it [`ToDriver`] messages (request heads, body chunks, ends, disconnects)
//! over one unbounded channel, so the messages of an exchange keep their order. It answers on
//! a per-exchange channel ([`Exchange`]). Each turn: apply what the handlers queued, drain the
//! router's outputs, then wait for the earliest of shutdown, a message, a wake-up from a
//! handler, or the router's deadline, and feed what fired with `Instant::now()`.
//!
//! | state | leaves on |
//! |---|---|
//! | running | shutdown (or every sender gone) → stopped: every exchange's channel drops, so open responses end and pending heads fail |

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use mcp_proto::server::{RequestHead, Router, ServerConfig, ServerOutput, StreamId};
use mcp_proto::service::Server;
use mcp_proto::service::bind::{Routed, ServerBinding};
use smol::channel::{Receiver, Sender};
use smol::future::FutureExt;

/// The driver's end of one exchange.
#[derive(Debug)]
pub(crate) struct Exchange {
    /// The response head, sent once.
    pub(crate) head: Option<smol::channel::Sender<(StatusCode, HeaderMap)>>,
    /// Body chunks; dropping it ends the response.
    pub(crate) body: Sender<Bytes>,
    /// Tells the request body pump to stop reading (closing it is the signal).
    pub(crate) stop_reading: Sender<()>,
    /// Set on the core's `ResponseAbort`: the body then fails instead of ending.
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
    /// The client went away (a write failed, the socket reached EOF, or the handler was
    /// dropped early).
    Disconnect { key: u64 },
    /// The response body handed this many more bytes to async-h1.
    Written { key: u64, bytes: usize },
}

struct State {
    router: Router,
    binding: ServerBinding,
    by_key: HashMap<u64, StreamId>,
    exchanges: HashMap<StreamId, (u64, Exchange)>,
}

enum Fired {
    Stop,
    Message(Option<ToDriver>),
    Wake,
    Deadline,
}

/// Runs the driver until `stop` is closed or every sender is gone.
pub(crate) async fn run(
    server: Server,
    config: ServerConfig,
    rx: Receiver<ToDriver>,
    stop: Receiver<()>,
) {
    let (wake_tx, wake_rx) = smol::channel::bounded::<()>(1);
    let binding = ServerBinding::new(
        server,
        Arc::new(|d| {
            Box::pin(async move {
                smol::Timer::after(d).await;
            })
        }),
        Arc::new(move || {
            // A full channel already holds a wake-up.
            let _ = wake_tx.try_send(());
        }),
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
        // `or` polls in order: shutdown first, then messages, wake-ups, the deadline.
        let fired = async {
            let _ = stop.recv().await;
            Fired::Stop
        }
        .or(async { Fired::Message(rx.recv().await.ok()) })
        .or(async {
            let _ = wake_rx.recv().await;
            Fired::Wake
        })
        .or(async {
            match deadline {
                Some(d) => {
                    smol::Timer::at(d).await;
                }
                None => std::future::pending::<()>().await,
            }
            Fired::Deadline
        })
        .await;
        match fired {
            Fired::Stop | Fired::Message(None) => break,
            Fired::Message(Some(msg)) => {
                st.input(msg);
                // Take what else is already there before draining outputs.
                for _ in 0..256 {
                    match rx.try_recv() {
                        Ok(msg) => st.input(msg),
                        Err(_) => break,
                    }
                }
            }
            Fired::Wake => {}
            Fired::Deadline => st.router.handle_timeout(Instant::now()),
        }
    }
    tracing::debug!(
        exchanges = st.exchanges.len(),
        sessions = st.router.session_count(),
        "mcp-smol driver stopped"
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
            Routed::Spawn(task) => smol::spawn(task).detach(),
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
            } => {
                let gone = match self.exchanges.get_mut(&stream) {
                    Some((_, ex)) => match ex.head.take() {
                        Some(head) => head.try_send((status, headers)).is_err(),
                        None => false,
                    },
                    None => false,
                };
                if gone {
                    self.gone(stream);
                }
            }
            ServerOutput::ResponseBody { stream, chunk } => {
                let gone = match self.exchanges.get(&stream) {
                    Some((_, ex)) => ex.body.try_send(chunk).is_err(),
                    None => false,
                };
                if gone {
                    self.gone(stream);
                }
            }
            ServerOutput::ResponseEnd { stream } => {
                // Dropping the senders ends the body.
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
            ServerOutput::StopReading { stream } => {
                if let Some((_, ex)) = self.exchanges.get(&stream) {
                    ex.stop_reading.close();
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

    /// The response side of `stream` is gone: the client left.
    fn gone(&mut self, stream: StreamId) {
        if let Some((key, _)) = self.exchanges.remove(&stream) {
            self.by_key.remove(&key);
        }
        self.router.handle_disconnect(Instant::now(), stream);
    }
}
