//! An in-memory harness for [`ClientSession`]: a scripted [`FakeServer`], a fault-injecting
//! [`Net`] and a virtual clock. [`Harness::run_for`] jumps the clock from one deadline to the
//! next (network deliveries and the client's `poll_timeout`), so minutes of reconnect backoff
//! take microseconds and nothing sleeps.
//!
//! Every output the client produces is recorded with its time, and a few rules are checked on
//! every HTTP intent as it leaves (protocol headers after initialize, nothing after `Closed`).

pub mod net;
pub mod server;

use std::time::{Duration, Instant};

use bytes::Bytes;
use mcp_proto::client::{
    ApiMisuse, ClientConfig, ClientEvent, ClientSession, Delivered, HttpRequest, HttpRequestKind,
    Input, Output, RequestOutcome, RequestResult, SendReceipt, StreamId, TransportFailure,
};
use serde_json::{Value, json};

pub use net::{Net, NetConfig, Part, Rng};
pub use server::{
    FakeServer, Frame, Match, ModernServer, Reply, ServerConfig, SseEnd, encode_frame,
};

/// What the harness saw, with times.
#[derive(Debug, Clone)]
pub enum Seen {
    /// An HTTP intent.
    Http(HttpRequest),
    /// An abort.
    Abort(StreamId),
    /// A server message delivered to the app.
    Message(Delivered),
    /// A request outcome.
    Outcome(RequestOutcome),
    /// An event.
    Event(ClientEvent),
}

/// Client + server + network + clock.
pub struct Harness {
    /// The session under test.
    pub client: ClientSession,
    /// The fake server.
    pub server: FakeServer,
    /// The fake network.
    pub net: Net,
    /// Virtual time now.
    pub now: Instant,
    /// Virtual time zero.
    pub start: Instant,
    /// Everything the client output, in order.
    pub log: Vec<(Instant, Seen)>,
    /// When true, server requests are answered automatically with `{"ok":true}`.
    pub auto_answer: bool,
    closed_at: Option<usize>,
    next_id: i64,
}

/// The `initialize` request the helpers send.
pub fn initialize_request(id: i64, version: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"initialize","params":{
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name":"harness","version":"0"}}})
}

impl Harness {
    /// A harness at virtual time zero.
    pub fn new(cfg: ClientConfig, server: ServerConfig, net: NetConfig) -> Self {
        let start = Instant::now();
        let client = ClientSession::new(cfg, start);
        let mut h = Harness {
            client,
            server: FakeServer::new(server),
            net: Net::new(net),
            now: start,
            start,
            log: Vec::new(),
            auto_answer: true,
            closed_at: None,
            next_id: 100,
        };
        h.drain();
        h
    }

    /// Default client, server and network.
    pub fn default_pair() -> Self {
        Harness::new(
            ClientConfig::new().with_seed(7),
            ServerConfig::default(),
            NetConfig::default(),
        )
    }

    /// Virtual time elapsed.
    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    /// Sends a JSON message.
    pub fn send(&mut self, v: Value) -> Result<SendReceipt, ApiMisuse> {
        let r = self.client.send(self.now, Bytes::from(v.to_string()));
        self.drain();
        r
    }

    /// Sends a request with a fresh numeric id; returns the id.
    pub fn request(&mut self, method: &str) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc":"2.0","id":id,"method":method,"params":{"n":id}}))
            .expect("send");
        id
    }

    /// Sends `initialize` (id 1, version 2025-11-25) and runs until the session is ready.
    pub fn initialize(&mut self) {
        self.initialize_with("2025-11-25");
    }

    /// Sends `initialize` offering `version` and runs until ready.
    pub fn initialize_with(&mut self, version: &str) {
        self.send(initialize_request(1, version))
            .expect("initialize");
        self.run_for(Duration::from_millis(200));
        assert!(
            self.client.is_ready(),
            "not ready after initialize: {:?}",
            self.client
        );
    }

    /// Records and routes every pending output of the client.
    pub fn drain(&mut self) {
        while let Some(out) = self.client.poll_output() {
            let seen = match out {
                Output::Http(req) => {
                    assert!(
                        self.closed_at.is_none(),
                        "HTTP intent after Closed: {req:?}"
                    );
                    let parts = self.server.handle(self.now, &req);
                    self.deliver(parts);
                    Seen::Http(req)
                }
                Output::Abort(s) => {
                    self.net.kill(s);
                    self.server.abort(s);
                    Seen::Abort(s)
                }
                Output::Message(m) => {
                    if self.auto_answer
                        && let mcp_proto::client::Message::Request(r) = &m.message
                    {
                        let id = match &r.id {
                            mcp_proto::client::RequestId::Number(n) => json!(n),
                            mcp_proto::client::RequestId::String(s) => json!(&**s),
                        };
                        let reply = json!({"jsonrpc":"2.0","id":id,"result":{"ok":true}});
                        let _ = self.client.send(self.now, Bytes::from(reply.to_string()));
                    }
                    Seen::Message(m)
                }
                Output::Outcome(o) => Seen::Outcome(o),
                Output::Event(e) => {
                    if matches!(e, ClientEvent::Closed { .. }) {
                        self.closed_at = Some(self.log.len());
                    }
                    Seen::Event(e)
                }
                other => panic!("unknown output {other:?}"),
            };
            self.log.push((self.now, seen));
        }
    }

    /// Puts server parts on the network.
    pub fn deliver(&mut self, parts: Vec<(StreamId, Part)>) {
        for (s, p) in parts {
            self.net.send(self.now, s, vec![p]);
        }
    }

    /// Runs the world for `d` of virtual time.
    pub fn run_for(&mut self, d: Duration) {
        let until = self.now + d;
        let mut steps = 0u32;
        loop {
            steps += 1;
            assert!(steps < 200_000, "livelock: {:?}", self.client);
            self.drain();
            while let Some((s, part)) = self.net.pop_due(self.now) {
                if std::env::var_os("HARNESS_TRACE").is_some() {
                    eprintln!("{:?} net {s} {part:?}", self.now - self.start);
                }
                let input = match &part {
                    Part::Head(st, h) => {
                        self.client.handle_input(
                            self.now,
                            Input::ResponseHead {
                                stream: s,
                                status: *st,
                                headers: h,
                            },
                        );
                        self.drain();
                        continue;
                    }
                    Part::Chunk(b) => Input::Body {
                        stream: s,
                        chunk: b.clone(),
                    },
                    Part::End => {
                        self.server.gone(s);
                        Input::End { stream: s }
                    }
                    Part::Fail => {
                        self.server.gone(s);
                        Input::Failed {
                            stream: s,
                            kind: TransportFailure::Reset,
                        }
                    }
                };
                self.client.handle_input(self.now, input);
                self.drain();
            }
            let next = [self.net.next_time(), self.client.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= until => {
                    self.now = self.now.max(t);
                    self.client.handle_timeout(self.now);
                    if let Some(t2) = self.client.poll_timeout() {
                        assert!(
                            t2 > self.now,
                            "poll_timeout in the past after handle_timeout"
                        );
                    }
                    self.drain();
                }
                _ => {
                    self.now = until;
                    self.client.handle_timeout(self.now);
                    self.drain();
                    return;
                }
            }
        }
    }

    /// Restarts the server (all sessions then 404; open streams break).
    pub fn restart_server(&mut self) {
        let parts = self.server.restart();
        self.deliver(parts);
    }

    /// Pushes a notification on the session's listening stream.
    pub fn push_listen(&mut self, msg: Value) {
        let sid = self.client.session_id().map(str::to_string);
        let parts = self.server.push_listen(sid.as_deref(), msg);
        self.deliver(parts);
    }

    // ------------------------------------------------------------------ queries

    /// Every event, in order.
    pub fn events(&self) -> Vec<ClientEvent> {
        self.log
            .iter()
            .filter_map(|(_, s)| match s {
                Seen::Event(e) => Some(e.clone()),
                _ => None,
            })
            .collect()
    }

    /// Every HTTP intent, in order.
    pub fn intents(&self) -> Vec<HttpRequest> {
        self.log
            .iter()
            .filter_map(|(_, s)| match s {
                Seen::Http(h) => Some(h.clone()),
                _ => None,
            })
            .collect()
    }

    /// HTTP intents of a kind, with their times.
    pub fn intents_of(&self, kind: HttpRequestKind) -> Vec<(Instant, HttpRequest)> {
        self.log
            .iter()
            .filter_map(|(t, s)| match s {
                Seen::Http(h) if h.kind == kind => Some((*t, h.clone())),
                _ => None,
            })
            .collect()
    }

    /// Every outcome, in order.
    pub fn outcomes(&self) -> Vec<RequestOutcome> {
        self.log
            .iter()
            .filter_map(|(_, s)| match s {
                Seen::Outcome(o) => Some(o.clone()),
                _ => None,
            })
            .collect()
    }

    /// Outcomes of request `id`.
    pub fn outcomes_of(&self, id: i64) -> Vec<RequestResult> {
        self.outcomes()
            .into_iter()
            .filter(|o| o.id == mcp_proto::client::RequestId::Number(id))
            .map(|o| o.result)
            .collect()
    }

    /// The result JSON of request `id`'s response, if it had exactly one outcome that was a
    /// successful response.
    pub fn result_of(&self, id: i64) -> Option<Value> {
        let outs = self.outcomes_of(id);
        assert!(outs.len() <= 1, "several outcomes for {id}: {outs:?}");
        match outs.into_iter().next()? {
            RequestResult::Response { response, .. } => {
                let bytes = mcp_proto::client::Message::Response(response).to_bytes();
                let v: Value = serde_json::from_slice(&bytes).ok()?;
                v.get("result").cloned()
            }
            _ => None,
        }
    }

    /// Server messages delivered to the app.
    pub fn messages(&self) -> Vec<Delivered> {
        self.log
            .iter()
            .filter_map(|(_, s)| match s {
                Seen::Message(m) => Some(m.clone()),
                _ => None,
            })
            .collect()
    }

    /// Counts events matching `f`.
    pub fn count_events(&self, f: impl Fn(&ClientEvent) -> bool) -> usize {
        self.events().iter().filter(|e| f(e)).count()
    }
}
