//! A [`Client`] wired to a [`ServerSession`] in memory, through two message queues pumped on
//! the test [`Executor`]: no transport state machine, no HTTP. Every message is recorded in
//! a [`Wire`] log, in the order it was sent, so tests can check ordering (progress and logs
//! before the result).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use mcp_proto::jsonrpc::{Message, Notification, RawValue, Request, RequestId};
use mcp_service::client::{Client, ClientBuilder, ClientTransport};
use mcp_service::{
    BoxFuture, Peer, PeerError, PendingRequests, ResponseFuture, Server, ServerSession,
};

use crate::exec::Executor;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Which way a message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client to server.
    ToServer,
    /// Server to client.
    ToClient,
}

/// Every message sent, in order.
#[derive(Debug, Clone, Default)]
pub struct Wire {
    log: Arc<Mutex<Vec<(Direction, Message)>>>,
}

impl Wire {
    /// A copy of the log.
    pub fn messages(&self) -> Vec<(Direction, Message)> {
        lock(&self.log).clone()
    }

    /// The methods (or `response <id>`) sent in `direction`, in order.
    pub fn summary(&self, direction: Direction) -> Vec<String> {
        lock(&self.log)
            .iter()
            .filter(|(d, _)| *d == direction)
            .map(|(_, m)| match m {
                Message::Response(r) => format!(
                    "response {}",
                    r.id.as_ref().map_or("null".into(), ToString::to_string)
                ),
                other => other.method().unwrap_or_default().to_owned(),
            })
            .collect()
    }
}

#[derive(Default)]
struct PipeState {
    queue: VecDeque<Message>,
    waker: Option<Waker>,
    closed: bool,
}

/// One direction: a queue with a waiting reader.
#[derive(Clone)]
struct Pipe {
    state: Arc<Mutex<PipeState>>,
    direction: Direction,
    wire: Wire,
}

impl Pipe {
    fn new(direction: Direction, wire: Wire) -> Self {
        Pipe {
            state: Arc::default(),
            direction,
            wire,
        }
    }

    fn push(&self, message: Message) -> Result<(), PeerError> {
        let waker = {
            let mut state = lock(&self.state);
            if state.closed {
                return Err(PeerError::Closed);
            }
            lock(&self.wire.log).push((self.direction, message.clone()));
            state.queue.push_back(message);
            state.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    fn close(&self) {
        let waker = {
            let mut state = lock(&self.state);
            state.closed = true;
            state.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn recv(&self) -> impl Future<Output = Option<Message>> + Send + 'static {
        let state = self.state.clone();
        std::future::poll_fn(move |cx: &mut Context<'_>| {
            let mut s = lock(&state);
            if let Some(m) = s.queue.pop_front() {
                return Poll::Ready(Some(m));
            }
            if s.closed {
                return Poll::Ready(None);
            }
            s.waker = Some(cx.waker().clone());
            Poll::Pending
        })
    }
}

/// The server's side of the loopback: its [`Peer`].
struct LoopPeer {
    to_client: Pipe,
    pending: PendingRequests<RequestId>,
    next_id: AtomicI64,
    exec: Executor,
}

impl Peer for LoopPeer {
    fn notify(
        &self,
        _related: Option<&RequestId>,
        notification: Notification,
    ) -> Result<(), PeerError> {
        self.to_client.push(Message::Notification(notification))
    }

    fn request(
        &self,
        _related: Option<&RequestId>,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> ResponseFuture {
        let id = RequestId::Number(self.next_id.fetch_add(1, Ordering::Relaxed));
        let answer = self.pending.register(id.clone());
        match self
            .to_client
            .push(Message::Request(Request::new(id.clone(), method, params)))
        {
            Ok(()) => answer,
            Err(e) => {
                self.pending.complete(&id, Err(e));
                answer
            }
        }
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(self.exec.sleep(duration))
    }
}

/// The client's side of the loopback: its [`ClientTransport`].
struct LoopTransport {
    to_server: Pipe,
}

impl ClientTransport for LoopTransport {
    fn send(&self, message: Message) -> Result<(), PeerError> {
        self.to_server.push(message)
    }
}

/// A connected pair.
pub struct Loopback {
    /// The client.
    pub client: Client,
    /// The server's session for this client.
    pub session: ServerSession,
    /// Every message, in order.
    pub wire: Wire,
    to_server: Pipe,
    to_client: Pipe,
    peer: Arc<LoopPeer>,
}

impl Loopback {
    /// Connects a client built from `builder` to `server`; the pumps run on `exec`.
    pub fn connect(exec: &Executor, server: &Server, builder: ClientBuilder) -> Loopback {
        let wire = Wire::default();
        let to_server = Pipe::new(Direction::ToServer, wire.clone());
        let to_client = Pipe::new(Direction::ToClient, wire.clone());
        let peer = Arc::new(LoopPeer {
            to_client: to_client.clone(),
            pending: PendingRequests::new(),
            next_id: AtomicI64::new(1),
            exec: exec.clone(),
        });
        let session = server.session(peer.clone());
        let client = builder.build(Arc::new(LoopTransport {
            to_server: to_server.clone(),
        }));

        // Client → server.
        {
            let (pipe, back, session, peer, exec2) = (
                to_server.clone(),
                to_client.clone(),
                session.clone(),
                peer.clone(),
                exec.clone(),
            );
            exec.spawn(async move {
                while let Some(message) = pipe.recv().await {
                    match message {
                        Message::Request(r) => {
                            let answer = session.handle_request(r);
                            let back = back.clone();
                            exec2.spawn(async move {
                                if let Some(response) = answer.await {
                                    let _ = back.push(Message::Response(response));
                                }
                            });
                        }
                        Message::Notification(n) => session.handle_notification(n),
                        Message::Response(r) => {
                            if let Some(id) = r.id.clone() {
                                peer.pending.complete(&id, Ok(r));
                            }
                        }
                    }
                }
                session.close();
            });
        }
        // Server → client.
        {
            let (pipe, back, client, exec2) = (
                to_client.clone(),
                to_server.clone(),
                client.clone(),
                exec.clone(),
            );
            exec.spawn(async move {
                while let Some(message) = pipe.recv().await {
                    if let Some(answer) = client.handle_message(message) {
                        let back = back.clone();
                        exec2.spawn(async move {
                            if let Some(response) = answer.await {
                                let _ = back.push(Message::Response(response));
                            }
                        });
                    }
                }
                client.close();
            });
        }
        Loopback {
            client,
            session,
            wire,
            to_server,
            to_client,
            peer,
        }
    }

    /// Closes both directions: the session cancels its requests, the client fails its calls.
    pub fn close(&self) {
        self.to_server.close();
        self.to_client.close();
        self.peer.pending.fail_all(PeerError::Closed);
    }

    /// How many server→client requests wait for an answer.
    pub fn server_requests_pending(&self) -> usize {
        self.peer.pending.len()
    }
}

/// Boxes a future (for storing heterogeneous test steps).
pub fn boxed<T>(
    f: impl Future<Output = T> + Send + 'static,
) -> Pin<Box<dyn Future<Output = T> + Send>> {
    Box::pin(f)
}
