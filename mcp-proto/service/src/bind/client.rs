//! [`ClientBinding`]: a [`Client`] on a [`ClientSession`].

use std::sync::Arc;
use std::time::Instant;

use super::{Queue, Routed, Wake};
use crate::PeerError;
use crate::client::{Client, ClientBuilder, ClientTransport};
use crate::telemetry::{
    self, Direction, End, Operation, OperationScope, SessionInfo, SessionScope, Side,
};
use mcp_proto::client::{ClientEvent, ClientSession, Delivered, Output, RequestResult};
use mcp_proto::jsonrpc::{Message, RequestId};

enum Command {
    Send(Message),
    Cancel(RequestId, String),
}

struct BoundTransport {
    queue: Arc<Queue<Command>>,
}

impl ClientTransport for BoundTransport {
    fn send(&self, message: Message) -> Result<(), PeerError> {
        self.queue.push(Command::Send(message));
        Ok(())
    }

    fn cancel(&self, id: &RequestId, reason: &str) -> Result<(), PeerError> {
        self.queue
            .push(Command::Cancel(id.clone(), reason.to_owned()));
        Ok(())
    }
}

// S-NEW-5, S-NEW-6.
/// A [`Client`] on a [`ClientSession`]: calls become `send`, dropped calls `cancel`,
/// outcomes complete the calls, and server requests come back as futures to spawn. See the
/// [module docs](super).
///
/// Both eras go through the same code. In the modern era (a session built with
/// `EraMode::Auto` or `Modern`, or `with_version(2026-07-28)`): `Client::initialize` is
/// answered by the session from `server/discover`; the input requests of an
/// `InputRequiredResult` arrive as server requests, are answered by the builder's sampling /
/// elicitation / roots handlers, and their answers are absorbed by the session, which retries
/// the call (MRTR) — the call's future sees only the final result; a dropped call
/// closes its stream instead of sending `notifications/cancelled`.
pub struct ClientBinding {
    client: Client,
    queue: Arc<Queue<Command>>,
    /// With telemetry: the session being reported (its id), and its scope.
    session: Option<(String, Box<dyn SessionScope>)>,
}

impl std::fmt::Debug for ClientBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBinding")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl ClientBinding {
    /// Builds the client from `builder`; `wake` is called whenever it queues a message.
    pub fn new(builder: ClientBuilder, wake: Wake) -> Self {
        let queue = Arc::new(Queue::new(wake));
        let client = builder.build(Arc::new(BoundTransport {
            queue: queue.clone(),
        }));
        ClientBinding {
            client,
            queue,
            session: None,
        }
    }

    /// The client (cheap to clone; hand it to the application).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Applies the client's queued messages and cancellations to `session`, in order.
    /// Returns whether anything was applied.
    pub fn apply(&mut self, session: &mut ClientSession, now: Instant) -> bool {
        if self.client.telemetry().is_some() {
            self.observe(session);
        }
        let mut commands = self.queue.drain();
        let carried = commands.len();
        let any = carried > 0;
        for command in commands.drain(..) {
            match command {
                Command::Send(message) => {
                    let id = match &message {
                        Message::Request(r) => Some(r.id.clone()),
                        _ => None,
                    };
                    if let Err(e) = session.send_message(now, message)
                        && let Some(id) = id
                    {
                        self.client.fail_request(&id, PeerError::from(e));
                    }
                }
                Command::Cancel(id, reason) => {
                    // Already ended: nothing to cancel.
                    let _ = session.cancel(now, &id, Some(&reason));
                }
            }
        }
        self.queue.recycle(commands, carried);
        any
    }

    /// With telemetry: hands the client what the session knows (its id and revision), and
    /// reports a session's start and end (a legacy-era session: one with an id).
    fn observe(&mut self, session: &ClientSession) {
        let Some(telemetry) = self.client.telemetry().cloned() else {
            return;
        };
        let version = session.protocol_version().map(|v| v.as_str());
        let id = session.session_id();
        self.client.note_connection(id, version);
        if self.session.as_ref().map(|(s, _)| s.as_str()) == id {
            return;
        }
        if let Some((_, scope)) = self.session.take() {
            scope.end(None);
        }
        if let Some(id) = id {
            let facts = self.client.connection_facts();
            let scope = telemetry.session(&SessionInfo {
                side: Side::Client,
                protocol_version: version.map(str::to_owned),
                network: facts.network,
            });
            self.session = Some((id.to_owned(), scope));
        }
    }

    /// Ends the reported session, if any.
    fn session_ended(&mut self, error_type: Option<&str>) {
        if let Some((_, scope)) = self.session.take() {
            scope.end(error_type);
        }
    }

    /// A server request or notification, as the telemetry sees it: an incoming operation.
    fn incoming(
        &self,
        method: &str,
        params: Option<&mcp_proto::jsonrpc::RawValue>,
        id: Option<&RequestId>,
    ) -> Option<Arc<dyn OperationScope>> {
        let telemetry = self.client.telemetry()?;
        let facts = self.client.connection_facts();
        let mut op = Operation::new(Side::Client, Direction::Incoming, method, params);
        op.request_id = id.map(telemetry::id_string);
        op.session_id = facts.session_id;
        op.protocol_version = facts.protocol_version;
        op.network = facts.network;
        let meta = telemetry::meta_of(params);
        Some(telemetry.incoming(&op, meta.as_ref()))
    }

    /// Takes one session output: messages and outcomes are consumed (a server request
    /// becomes a future to spawn), HTTP intents, aborts and events are given back.
    pub fn handle_output(&mut self, output: Output) -> Routed<Output> {
        match output {
            Output::Message(Delivered {
                message: Message::Request(request),
                ..
            }) if self.client.telemetry().is_some() => {
                let scope = self.incoming(
                    &request.method,
                    request.params.as_deref(),
                    Some(&request.id),
                );
                let method = request.method.clone();
                let answer = self.client.handle_request(request);
                let queue = self.queue.clone();
                let ender = scope.clone();
                let work: crate::server::BoxFuture<'static, ()> = Box::pin(async move {
                    let response = answer.await;
                    if let Some(scope) = &ender {
                        scope.end(match &response {
                            Some(r) => telemetry::end_of(&method, &r.outcome),
                            None => End::Failed {
                                error_type: "cancelled",
                                message: "the server cancelled the request",
                            },
                        });
                    }
                    if let Some(response) = response {
                        queue.push(Command::Send(Message::Response(response)));
                    }
                });
                Routed::Spawn(match scope {
                    Some(scope) => scope.instrument(work),
                    None => work,
                })
            }
            Output::Message(Delivered {
                message: Message::Notification(n),
                ..
            }) if self.client.telemetry().is_some() => {
                let scope = self.incoming(&n.method, n.params.as_deref(), None);
                self.client.handle_notification(n);
                if let Some(scope) = scope {
                    scope.end(End::Ok);
                }
                Routed::Done
            }
            Output::Message(delivered) => match self.client.handle_message(delivered.message) {
                Some(answer) => {
                    let queue = self.queue.clone();
                    Routed::Spawn(Box::pin(async move {
                        if let Some(response) = answer.await {
                            queue.push(Command::Send(Message::Response(response)));
                        }
                    }))
                }
                None => Routed::Done,
            },
            Output::Outcome(outcome) => {
                match outcome.result {
                    RequestResult::Response { response, .. } => {
                        self.client.handle_response(response);
                    }
                    RequestResult::Failed(e) => {
                        self.client.fail_request(&outcome.id, PeerError::from(e));
                    }
                    // The call was dropped by its owner: nobody waits.
                    RequestResult::Cancelled => {}
                }
                Routed::Done
            }
            Output::Event(event) => {
                match &event {
                    ClientEvent::SessionExpired { .. } => {
                        self.session_ended(Some("session_expired"))
                    }
                    ClientEvent::Closed { .. } => self.session_ended(None),
                    _ => {}
                }
                // To the app's event streams, and back to the adapter (which logs it).
                self.client.handle_event(&event);
                Routed::Transport(Output::Event(event))
            }
            other => Routed::Transport(other),
        }
    }
}
