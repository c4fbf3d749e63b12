//! [`MemoryLink`]: a [`ClientDriver`] and a [`ServerDriver`] in one process with no network
//! between them — each HTTP intent of the client becomes a request of the router (with
//! `Host: localhost`, as an HTTP client adds), each reply of the router a network event of
//! the client — and the lock-step that moves both until neither moves, written once for
//! every in-memory pair (a virtual-clock test harness, a thread-per-task example).
//!
//! | exchange | event | next |
//! |---|---|---|
//! | carried (client intent ↔ router stream) | the router's head, chunks | carried (fed to the client) |
//! | carried | the router ends it (its sink drops) / cuts it | gone (`End` / `Failed(Reset)` to the client) |
//! | carried | the client aborts it (its exchange drops) | gone (`Disconnect` to the router) |

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use http::{HeaderValue, Uri, header};

use super::client::{ClientDriver, NetEvent, NetEventKind};
use super::server::{ExchangeSink, Reply, ServerDriver, ToDriver};
use crate::lock;
use mcp_proto::client::{HttpRequest, StreamId, TransportFailure};
use mcp_service::server::BoxFuture;

/// What crosses the link between two turns.
#[derive(Default)]
struct Wire {
    /// Intents the client started, for the router.
    requests: Vec<HttpRequest>,
    /// Router replies, for the client.
    replies: VecDeque<NetEvent>,
    /// Exchanges the client aborted, for the router.
    aborted: Vec<u64>,
}

/// The client's side of one carried exchange; dropping it before the router ended the
/// response is an abort.
pub struct MemoryExchange {
    key: u64,
    wire: Arc<Mutex<Wire>>,
}

impl Drop for MemoryExchange {
    fn drop(&mut self) {
        lock(&self.wire).aborted.push(self.key);
    }
}

/// The router's side of one carried exchange; dropping it ends the response.
pub struct MemorySink {
    stream: StreamId,
    wire: Arc<Mutex<Wire>>,
    aborted: bool,
}

impl ExchangeSink for MemorySink {
    fn send(&mut self, reply: Reply) -> bool {
        let kind = match reply {
            Reply::Head(status, headers) => NetEventKind::Head(status, headers),
            Reply::Body(chunk) => NetEventKind::Body(chunk),
        };
        let stream = self.stream;
        lock(&self.wire)
            .replies
            .push_back(NetEvent { stream, kind });
        true
    }

    fn abort(mut self) {
        self.aborted = true;
    }
}

impl Drop for MemorySink {
    fn drop(&mut self) {
        let kind = if self.aborted {
            NetEventKind::Failed(TransportFailure::Reset)
        } else {
            NetEventKind::End
        };
        let stream = self.stream;
        lock(&self.wire)
            .replies
            .push_back(NetEvent { stream, kind });
    }
}

/// The link between an in-memory client and server (see the module docs).
#[derive(Default)]
pub struct MemoryLink {
    wire: Arc<Mutex<Wire>>,
}

impl std::fmt::Debug for MemoryLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryLink").finish_non_exhaustive()
    }
}

impl MemoryLink {
    /// An idle link.
    pub fn new() -> MemoryLink {
        MemoryLink::default()
    }

    /// Moves both drivers until neither moves: the client's queued work and outputs, the
    /// intents into the router, the router's queued work and outputs, its replies into the
    /// client. Handler futures of both go to `spawn`. Says whether anything moved.
    pub fn turn(
        &mut self,
        now: Instant,
        client: &mut ClientDriver<MemoryExchange>,
        server: &mut ServerDriver<MemorySink>,
        spawn: &mut dyn FnMut(BoxFuture<'static, ()>),
    ) -> bool {
        super::until_still(|| {
            let wire = self.wire.clone();
            let mut start = |req: HttpRequest| {
                let key = req.stream.as_u64();
                lock(&wire).requests.push(req);
                MemoryExchange {
                    key,
                    wire: wire.clone(),
                }
            };
            let mut moved = client.pump(now, &mut start, spawn);
            moved |= self.carry_requests(now, server);
            moved |= server.pump(now, spawn);
            moved |= self.carry_replies(now, client);
            moved
        })
    }

    fn carry_requests(&mut self, now: Instant, server: &mut ServerDriver<MemorySink>) -> bool {
        let (requests, aborted) = {
            let mut wire = lock(&self.wire);
            (
                std::mem::take(&mut wire.requests),
                std::mem::take(&mut wire.aborted),
            )
        };
        let moved = !requests.is_empty() || !aborted.is_empty();
        for key in aborted {
            server.input(now, ToDriver::Disconnect { key });
        }
        for req in requests {
            let key = req.stream.as_u64();
            let (mut parts, ()) = http::Request::new(()).into_parts();
            parts.method = req.method;
            parts.uri = Uri::from_static("/mcp");
            parts.headers = req.headers;
            parts
                .headers
                .insert(header::HOST, HeaderValue::from_static("localhost"));
            let exchange = MemorySink {
                stream: req.stream,
                wire: self.wire.clone(),
                aborted: false,
            };
            let parts = Box::new(parts);
            server.input(
                now,
                ToDriver::Head {
                    key,
                    parts,
                    verdict: None,
                    exchange,
                    body: Some(req.body),
                    end: true,
                },
            );
        }
        moved
    }

    fn carry_replies(&mut self, now: Instant, client: &mut ClientDriver<MemoryExchange>) -> bool {
        let replies = std::mem::take(&mut lock(&self.wire).replies);
        let moved = !replies.is_empty();
        for event in replies {
            let last = matches!(event.kind, NetEventKind::End | NetEventKind::Failed(_));
            let stream = event.stream;
            client.net(now, event);
            if last {
                // The client dropped its exchange on the end: that is no abort.
                let mut wire = lock(&self.wire);
                wire.aborted.retain(|&k| k != stream.as_u64());
            }
        }
        moved
    }
}
