//! Fault injection: a proxy that breaks HTTP responses the way networks do, and the "ledger"
//! workloads that count what a client lost or received twice.
//!
//! [`Proxy`] sits between a client and a server on loopback (hyper on both sides: no
//! hand-written HTTP). For every response it decides, from a generator seeded by the run's
//! seed and the request itself (its HTTP method, JSON-RPC method and id, and how many such
//! requests came before it: so the decisions do not depend on how concurrent requests
//! interleave, and a seed cuts the same calls on every run), whether to
//! cut it after a random number of bytes (anywhere in the first 40 KB, or "early": within
//! the first 400, that is the status line, headers and priming event; a long-lived stream
//! gets a new chance every that many bytes it carries); a cut inside the head
//! closes the connection before any response, a later one aborts the body (no terminating
//! chunk) and closes the upstream connection too, so the server sees the client leave. It
//! can fragment bodies into 1–16-byte writes with small pauses, and logs every request
//! (method, `Last-Event-ID`, JSON-RPC method, where it was cut).
//!
//! The workloads drive the everything server's ledger tools through the proxy:
//! [`post_ledger`] calls `ledger_count` (progress 1..n on the request's stream) and checks that
//! every call completes with each number exactly once, within its own duration plus the
//! waits the client announced for it (`ClientEvent::Reconnecting`: the server's `retry` after
//! a cut, longer only while resumes bring nothing) plus a quarter second per cut;
//! [`get_ledger`] calls `ledger_burst` (log messages 1..n on the GET
//! stream) and checks that every message of every burst arrives exactly once. The one allowed
//! failure: a call whose response was cut before any event id reached the client fails at
//! once with [`PeerError::Interrupted`] (it cannot be resumed, and the transport never re-sends
//! it by itself: the proxy must see each `tools/call` exactly once).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, header};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper_util::rt::TokioIo;
use mcp_proto::client::{ClientEvent, StreamRole};
use mcp_proto::fuzzing::rng::XorShift64Star;
use mcp_service::PeerError;
use mcp_service::client::{
    Client as ServiceClient, RequestError, RequestOptions, ServerNotification,
};

use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// What the proxy does to responses.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    /// The generator's seed.
    pub seed: u64,
    /// The chance that a response is cut.
    pub cut_probability: f64,
    /// A cut comes after a uniform number of bytes below this (head included).
    pub cut_within: usize,
    /// Body bytes go out in 1–16-byte writes with small pauses.
    pub fragment: bool,
    /// A long-lived stream gets a new chance to be cut every `cut_within` bytes (off for
    /// early cuts, which only hit the start of a response).
    pub reroll: bool,
}

impl Faults {
    /// Nothing is cut or fragmented.
    pub fn none() -> Self {
        Faults {
            seed: 1,
            cut_probability: 0.0,
            cut_within: 1,
            fragment: false,
            reroll: false,
        }
    }

    /// Cuts with probability `p` anywhere in the first 40 KB.
    pub fn cuts(seed: u64, p: f64) -> Self {
        Faults {
            seed,
            cut_probability: p,
            cut_within: 40_000,
            fragment: false,
            reroll: true,
        }
    }

    /// Cuts with probability `p` within the first 400 bytes (head, priming event).
    pub fn early_cuts(seed: u64, p: f64) -> Self {
        Faults {
            cut_within: 400,
            reroll: false,
            ..Faults::cuts(seed, p)
        }
    }

    /// Cuts within the first `bytes` instead.
    pub fn within(self, bytes: usize) -> Self {
        Faults {
            cut_within: bytes.max(1),
            ..self
        }
    }

    /// The same, with fragmented bodies.
    pub fn fragmented(self) -> Self {
        Faults {
            fragment: true,
            ..self
        }
    }
}

/// One request the proxy forwarded.
#[derive(Debug, Clone)]
pub struct Logged {
    /// When it arrived, from the proxy's start.
    pub at: Duration,
    /// The HTTP method.
    pub method: String,
    /// Its `Last-Event-ID`.
    pub last_event_id: Option<String>,
    /// The JSON-RPC method of the body (`"response"` for a response, `None` for no body).
    pub rpc: Option<String>,
    /// The JSON-RPC id of a request body.
    pub rpc_id: Option<Value>,
    /// The response status, once the head came.
    pub status: Option<u16>,
    /// Where the response was cut (bytes from its start), if it was.
    pub cut_at: Option<usize>,
    /// Where the response's first SSE event ended (bytes from its start): a cut before it
    /// left the client without any event id, so the stream could not be resumed.
    pub first_event_end: Option<usize>,
    /// Where its first event carrying data (a message, not the empty priming event) ended.
    pub first_message_end: Option<usize>,
    /// How many whole events carrying data (messages) it forwarded to the client.
    pub messages: usize,
}

impl Logged {
    /// Whether the proxy cut this response before its first SSE event ended: the client then
    /// held no event id, and nothing could be resumed.
    pub fn unresumable_cut(&self) -> bool {
        match (self.cut_at, self.first_event_end) {
            (Some(cut), Some(first)) => cut < first,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

struct State {
    upstream: SocketAddr,
    faults: Faults,
    enabled: AtomicBool,
    /// Fragmentation only; cut decisions come from [`State::generator`].
    rng: Mutex<XorShift64Star>,
    /// How many requests of each key (see [`State::generator`]) came so far.
    seen: Mutex<std::collections::HashMap<String, u64>>,
    log: Mutex<Vec<Logged>>,
    open: AtomicUsize,
    cuts: AtomicUsize,
    t0: Instant,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl State {
    /// Whether (and where) to cut a response; the cut only happens if faults are enabled
    /// when the response reaches that byte, so a long-lived stream opened before
    /// [`Proxy::enable`] is cut too.
    fn decide(&self, rng: &mut XorShift64Star) -> Option<usize> {
        if self.faults.cut_probability <= 0.0 {
            return None;
        }
        let roll = rng.below(1_000_000) as f64 / 1_000_000.0;
        if roll >= self.faults.cut_probability {
            return None;
        }
        usize::try_from(rng.below(self.faults.cut_within as u64)).ok()
    }

    /// The cut generator of one request: seeded by the run's seed and `key` (HTTP method,
    /// JSON-RPC method and id) with the number of requests of that key seen before.
    fn generator(&self, key: String) -> XorShift64Star {
        use std::hash::{Hash, Hasher};
        let nth = {
            let mut seen = lock(&self.seen);
            let n = seen.entry(key.clone()).or_insert(0);
            *n += 1;
            *n
        };
        // SipHash with fixed keys: the same on every run.
        let mut h = std::hash::DefaultHasher::new();
        (self.faults.seed, key, nth).hash(&mut h);
        XorShift64Star::from_seed(h.finish())
    }

    fn piece(&self) -> (usize, bool) {
        let mut rng = lock(&self.rng);
        let len = 1 + rng.below(16) as usize;
        (len, rng.below(32) == 0)
    }

    fn cut(&self, index: usize, at: usize) {
        self.cuts.fetch_add(1, Ordering::SeqCst);
        if let Some(e) = lock(&self.log).get_mut(index) {
            e.cut_at = Some(at);
        }
    }
}

/// The fault-injecting proxy (see the module docs). Dropping it stops accepting.
pub struct Proxy {
    addr: SocketAddr,
    state: Arc<State>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl Proxy {
    /// Starts a proxy in front of `upstream` on 127.0.0.1 (faults disabled until
    /// [`Proxy::enable`]).
    ///
    /// # Errors
    ///
    /// When it cannot bind.
    pub async fn start(upstream: SocketAddr, faults: Faults) -> io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            upstream,
            faults,
            enabled: AtomicBool::new(false),
            rng: Mutex::new(XorShift64Star::from_seed(faults.seed)),
            seen: Mutex::new(std::collections::HashMap::new()),
            log: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            cuts: AtomicUsize::new(0),
            t0: Instant::now(),
        });
        let st = state.clone();
        let accept = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let _ = tcp.set_nodelay(true);
                let st = st.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| exchange(st.clone(), req));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        Ok(Proxy {
            addr,
            state,
            accept,
        })
    }

    /// The proxy's URL for `path` (e.g. `/mcp`).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Starts (or stops) breaking responses.
    pub fn enable(&self, on: bool) {
        self.state.enabled.store(on, Ordering::SeqCst);
    }

    /// Every request forwarded so far.
    pub fn log(&self) -> Vec<Logged> {
        lock(&self.state.log).clone()
    }

    /// Responses cut so far.
    pub fn cuts(&self) -> usize {
        self.state.cuts.load(Ordering::SeqCst)
    }

    /// Responses still streaming through the proxy.
    pub fn open_responses(&self) -> usize {
        self.state.open.load(Ordering::SeqCst)
    }
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// The JSON-RPC method (or `"response"`) and id of a POST body.
fn rpc_of(body: &[u8]) -> (Option<String>, Option<Value>) {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return (None, None);
    };
    let method = match v.get("method").and_then(Value::as_str) {
        Some(m) => Some(m.to_owned()),
        None if v.get("result").is_some() || v.get("error").is_some() => Some("response".into()),
        None => None,
    };
    (method, v.get("id").cloned())
}

/// About how many bytes the response head takes on the wire.
fn head_len(parts: &http::response::Parts) -> usize {
    let status = 9 + 3 + 1 + parts.status.canonical_reason().map_or(0, str::len) + 2;
    let headers: usize = parts
        .headers
        .iter()
        .map(|(n, v)| n.as_str().len() + 2 + v.len() + 2)
        .sum();
    status + headers + 2
}

async fn exchange(st: Arc<State>, req: Request<Incoming>) -> io::Result<Response<CutBody>> {
    let (mut parts, body) = req.into_parts();
    let body = body.collect().await.map_err(other)?.to_bytes();
    let (rpc, rpc_id) = rpc_of(&body);
    let mut generator = st.generator(format!(
        "{} {} {}",
        parts.method,
        rpc.as_deref().unwrap_or("-"),
        rpc_id
            .as_ref()
            .map_or_else(|| "-".to_owned(), Value::to_string)
    ));
    let cut_at = st.decide(&mut generator);
    let index = {
        let mut log = lock(&st.log);
        log.push(Logged {
            at: st.t0.elapsed(),
            method: parts.method.to_string(),
            last_event_id: parts
                .headers
                .get("last-event-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            rpc,
            rpc_id,
            status: None,
            cut_at: None,
            first_event_end: None,
            first_message_end: None,
            messages: 0,
        });
        log.len() - 1
    };
    let tcp = TcpStream::connect(st.upstream).await?;
    let _ = tcp.set_nodelay(true);
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(other)?;
    let conn = tokio::spawn(conn);
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::TRANSFER_ENCODING);
    let response = match send
        .send_request(Request::from_parts(parts, Full::new(body)))
        .await
    {
        Ok(r) => r,
        Err(e) => {
            conn.abort();
            return Err(other(e));
        }
    };
    let (mut rparts, rbody) = response.into_parts();
    if let Some(e) = lock(&st.log).get_mut(index) {
        e.status = Some(rparts.status.as_u16());
    }
    let head = head_len(&rparts);
    if let Some(at) = cut_at
        && at < head
        && st.enabled.load(Ordering::SeqCst)
    {
        // Cut inside the head: the connection closes before any response.
        conn.abort();
        st.cut(index, at);
        return Err(other("cut before the response head"));
    }
    for h in [
        header::TRANSFER_ENCODING,
        header::CONTENT_LENGTH,
        header::CONNECTION,
    ] {
        rparts.headers.remove(h);
    }
    let budget = cut_at.map(|at| (at.saturating_sub(head), at));
    let (tx, rx) = mpsc::channel(if st.faults.fragment { 1 } else { 16 });
    st.open.fetch_add(1, Ordering::SeqCst);
    tokio::spawn(pump(st, index, head, rbody, conn, (budget, generator), tx));
    Ok(Response::from_parts(rparts, CutBody { rx }))
}

/// The SSE events of a body fed piece by piece: where each ends and whether it carries data.
/// Lines end as the SSE spec says, with CRLF, LF or a lone CR (the Python SDK's server writes
/// CRLF, ours LF); a blank line ends the event its lines began. Kept apart from the core's
/// decoder on purpose: the proxy's counts judge what the core's peers and the core delivered.
#[derive(Default)]
struct EventScan {
    /// Bytes fed so far.
    fed: usize,
    /// The last byte fed was a CR: an LF right after it is the same line end.
    after_cr: bool,
    /// The first bytes of the current line (enough to recognise `data:` with a value).
    line: Vec<u8>,
    /// Whether the current line has any byte.
    line_open: bool,
    /// Whether the current event has a line, and a `data` line with a value.
    event_open: bool,
    has_data: bool,
}

impl EventScan {
    /// Feeds `bytes`; calls `ended(end, has_data)` for each event they complete, `end` in
    /// bytes from the body's start (just past the line end of its blank line's first byte).
    fn feed(&mut self, bytes: &[u8], mut ended: impl FnMut(usize, bool)) {
        for (i, &b) in bytes.iter().enumerate() {
            let after_cr = std::mem::take(&mut self.after_cr);
            if b == b'\n' && after_cr {
                continue;
            }
            if b != b'\r' && b != b'\n' {
                self.line_open = true;
                if self.line.len() < 8 {
                    self.line.push(b);
                }
                continue;
            }
            self.after_cr = b == b'\r';
            if std::mem::take(&mut self.line_open) {
                if let Some(v) = self.line.strip_prefix(b"data:") {
                    self.has_data |= !v.strip_prefix(b" ").unwrap_or(v).is_empty();
                }
                self.line.clear();
                self.event_open = true;
            } else if std::mem::take(&mut self.event_open) {
                ended(self.fed + i + 1, std::mem::take(&mut self.has_data));
            }
        }
        self.fed += bytes.len();
    }

    /// Feeds `bytes`; returns how many events carrying data (messages) they completed.
    fn messages(&mut self, bytes: &[u8]) -> usize {
        let mut whole = 0;
        self.feed(bytes, |_, has_data| whole += usize::from(has_data));
        whole
    }
}

/// Ends the bookkeeping of one streamed response, and its upstream connection.
struct OpenGuard(
    Arc<State>,
    tokio::task::JoinHandle<Result<(), hyper::Error>>,
);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.1.abort();
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn pump(
    st: Arc<State>,
    index: usize,
    head: usize,
    mut body: Incoming,
    conn: tokio::task::JoinHandle<Result<(), hyper::Error>>,
    (mut budget, mut generator): (Option<(usize, usize)>, XorShift64Star),
    tx: mpsc::Sender<io::Result<Bytes>>,
) {
    let _guard = OpenGuard(st.clone(), conn);
    // A long-lived stream gets a new chance to be cut every `cut_within` bytes it carries.
    let mut position = budget.map_or(0, |(left, at)| at - left);
    let mut since_roll = 0usize;
    // The body as the server sent it, until its first message (where a cut before it falls),
    // and the body as forwarded (the messages the client got).
    let mut sent = EventScan::default();
    let mut first_seen = false;
    let mut messages = EventScan::default();
    loop {
        if st.faults.reroll && budget.is_none() && since_roll >= st.faults.cut_within {
            since_roll = 0;
            budget = st.decide(&mut generator).map(|k| (k, position + k));
        }
        let frame = tokio::select! {
            f = body.frame() => f,
            () = tx.closed() => return,
        };
        let data = match frame {
            None => return,
            Some(Err(e)) => {
                let _ = tx.send(Err(other(e))).await;
                return;
            }
            Some(Ok(f)) => match f.into_data() {
                Ok(d) => d,
                Err(_) => continue,
            },
        };
        if !first_seen {
            let (mut first, mut message) = (None, None);
            sent.feed(&data, |end, has_data| {
                first.get_or_insert(head + end);
                if has_data {
                    message.get_or_insert(head + end);
                }
            });
            if let Some(e) = lock(&st.log).get_mut(index) {
                e.first_event_end = e.first_event_end.or(first);
                e.first_message_end = e.first_message_end.or(message);
            }
            first_seen = message.is_some();
        }
        position += data.len();
        since_roll += data.len();
        let enabled = st.enabled.load(Ordering::SeqCst);
        let (mut data, cut) = match budget {
            // Not breaking responses (yet, or any more): this one goes through whole.
            Some((left, _)) if data.len() >= left && !enabled => {
                budget = None;
                (data, None)
            }
            Some((left, at)) if data.len() >= left => (data.slice(..left), Some(at)),
            Some((left, at)) => {
                budget = Some((left - data.len(), at));
                (data, None)
            }
            None => (data, None),
        };
        while !data.is_empty() {
            let (len, pause) = if st.faults.fragment {
                st.piece()
            } else {
                (data.len(), false)
            };
            let piece = data.split_to(len.min(data.len()));
            let whole = messages.messages(&piece);
            if tx.send(Ok(piece)).await.is_err() {
                return;
            }
            if whole > 0
                && let Some(e) = lock(&st.log).get_mut(index)
            {
                e.messages += whole;
            }
            if pause {
                tokio::time::sleep(Duration::from_millis(1)).await;
            } else if st.faults.fragment {
                tokio::task::yield_now().await;
            }
        }
        if let Some(at) = cut {
            st.cut(index, at);
            let _ = tx.send(Err(other("cut mid-response"))).await;
            return;
        }
    }
}

/// The body the proxy gives the client: chunks from the pump, an error for a cut.
pub struct CutBody {
    rx: mpsc::Receiver<io::Result<Bytes>>,
}

impl Body for CutBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(Ok(b))) => Poll::Ready(Some(Ok(Frame::data(b)))),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

// ---- the workloads ---------------------------------------------------------------------

/// The size of a ledger run.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// Calls (request-stream ledger) or bursts (GET-stream ledger).
    pub rounds: usize,
    /// Numbers per call or burst.
    pub n: u64,
    /// The pause between two progress notifications.
    pub interval_ms: u64,
    /// The server's `retry` (the bound of a call is its own duration plus two of these per
    /// cut).
    pub retry: Duration,
    /// How long a call (or a burst's delivery) may take before it counts as hung.
    pub timeout: Duration,
}

/// What a ledger run saw.
#[derive(Debug, Default, Clone)]
pub struct Ledger {
    /// Calls (or bursts) complete with every number once.
    pub ok: usize,
    /// Calls that did not end within the timeout (or bursts incomplete at it).
    pub hung: usize,
    /// For each hung call of the request-stream ledger: what it saw, the waits the client
    /// announced, and the proxy's log of its exchanges (so a hang in CI can be diagnosed).
    pub hangs: Vec<String>,
    /// Calls that failed with [`PeerError::Interrupted`] after a cut before any event id.
    pub interrupted: usize,
    /// Any other failure, described.
    pub errors: Vec<String>,
    /// Numbers never delivered (interrupted calls excluded).
    pub lost: u64,
    /// Numbers delivered more than once.
    pub duplicated: u64,
    /// Calls over their time bound: (call, took, bound).
    pub slow: Vec<(usize, Duration, Duration)>,
    /// Responses the proxy cut.
    pub cuts: usize,
    /// GET requests the proxy saw.
    pub gets: usize,
    /// `tools/call` POSTs the proxy saw, and calls made.
    pub posted_calls: usize,
    /// Calls made.
    pub calls: usize,
    /// A peer's calls that never reached the wire (its client gave up sending after a cut).
    pub unsent: usize,
    /// A peer's calls cut after the priming event (with its id) but before the first
    /// message, which the peer could not resume because it ignores the priming id.
    pub priming_ignored: usize,
    /// Duplicates a peer's client asked for again: a resumed stream cut after it forwarded
    /// them, then a new resume from the same (stale) `Last-Event-ID`.
    pub re_requested: u64,
    /// Hung calls whose last exchange was a resume that was never cut and that forwarded
    /// every message the client saw (the client took all it was sent; the server sent
    /// nothing more): reports, counted in `hung` too.
    pub silent_resumes: Vec<String>,
    /// Hung calls excused as a peer server's silence after a resume (from `silent_resumes`).
    pub peer_silent: usize,
    /// Responses still open through the proxy after the client closed.
    pub open_after_close: usize,
    /// Statuses other than 2xx the proxy saw (e.g. 409 takeover refusals), by status.
    pub refusals: BTreeMap<u16, usize>,
}

impl Ledger {
    /// Every invariant of the issue: 0 lost, 0 duplicated, 0 hung, no other error, every
    /// call within its bound, one POST per call, a GET rate bounded by the cuts (no storm,
    /// no takeover ping-pong), nothing left open after the session closed.
    ///
    /// # Errors
    ///
    /// A description of every invariant broken.
    pub fn check(&self) -> Result<(), String> {
        let mut bad = Vec::new();
        if self.lost > 0 {
            bad.push(format!("{} lost", self.lost));
        }
        if self.duplicated > 0 {
            bad.push(format!("{} duplicated", self.duplicated));
        }
        if self.hung > 0 {
            bad.push(format!("{} hung", self.hung));
            bad.extend(self.hangs.iter().cloned());
            bad.extend(
                self.silent_resumes
                    .iter()
                    .map(|r| format!("{r} (silent resume)")),
            );
        }
        if !self.errors.is_empty() {
            bad.push(format!("errors: {:?}", self.errors));
        }
        if !self.slow.is_empty() {
            bad.push(format!("over their bound: {:?}", self.slow));
        }
        if self.posted_calls + self.unsent != self.calls {
            bad.push(format!(
                "{} tools/call POSTs for {} calls (a silent re-send?)",
                self.posted_calls, self.calls
            ));
        }
        // Each GET opens the listen stream once, or follows a cut (a resume, or the listen
        // stream's reconnect): more means a reconnect storm or takeover ping-pong.
        if self.gets > self.cuts + 2 {
            bad.push(format!("{} GETs for {} cuts", self.gets, self.cuts));
        }
        if self.open_after_close > 0 {
            bad.push(format!(
                "{} responses open after the session closed",
                self.open_after_close
            ));
        }
        if bad.is_empty() {
            Ok(())
        } else {
            Err(bad.join("; "))
        }
    }

    /// For a peer's client: the calls (by index, in order) that it failed or left hanging.
    /// Each is excused as the peer's own behaviour only if our side provably did the right
    /// thing: its `tools/call` POST was cut before its first SSE event ended (the client held
    /// no event id, so nothing could be resumed) — then they are moved out of `hung` and
    /// `errors` into `interrupted`. Returns the ones that are not excusable.
    pub fn excuse_unresumable(&mut self, failed_calls: &[usize], proxy: &Proxy) -> Vec<usize> {
        let log = proxy.log();
        let posts: Vec<&Logged> = log
            .iter()
            .filter(|l| l.rpc.as_deref() == Some("tools/call"))
            .collect();
        let mut not_excused = Vec::new();
        // A named peer bug (the TypeScript SDK's client): it ignores the id of the priming
        // event (an event without data), so a cut after it but before the first message
        // leaves it with nothing to resume from, although our server sent the id.
        let after_priming_only =
            |p: &Logged| match (p.cut_at, p.first_event_end, p.first_message_end) {
                (Some(cut), Some(first), message) => {
                    first <= cut && message.is_none_or(|m| cut < m)
                }
                _ => false,
            };
        // The peer stopped sending after an unresumable cut: the calls it never sent are its
        // own failure (our server never saw them).
        let gave_up = posts.last().is_some_and(|p| p.unresumable_cut());
        for &i in failed_calls {
            match posts.get(i) {
                Some(p) if p.unresumable_cut() => self.interrupted += 1,
                Some(p) if after_priming_only(p) => self.priming_ignored += 1,
                None if gave_up => self.unsent += 1,
                _ => not_excused.push(i),
            }
        }
        let excused = failed_calls.len() - not_excused.len();
        // What is excused leaves the failure counts (hung first, then errors).
        let from_hung = excused.min(self.hung);
        self.hung -= from_hung;
        let rest = excused - from_hung;
        self.errors.drain(..rest.min(self.errors.len()));
        not_excused
    }

    /// A named peer bug (the Python SDK's client): when a resumed request stream is cut
    /// again, it resumes once more from the `Last-Event-ID` of its first resume instead of
    /// the last id it received, so a correct server sends again what the cut stream carried.
    /// Exactly those messages — what a cut resume forwarded, when a later GET asks again
    /// from the same id — move from `duplicated` to `re_requested`; any other duplicate
    /// stays a failure.
    pub fn excuse_stale_resumes(&mut self, log: &[Logged]) {
        let mut again = 0u64;
        for (i, g) in log.iter().enumerate() {
            let (Some(id), Some(_)) = (&g.last_event_id, g.cut_at) else {
                continue;
            };
            let asked_again = log[i + 1..]
                .iter()
                .any(|l| l.method == "GET" && l.last_event_id.as_ref() == Some(id));
            if g.method == "GET" && asked_again {
                again += g.messages as u64;
            }
        }
        let excused = again.min(self.duplicated);
        self.duplicated -= excused;
        self.re_requested += excused;
    }

    /// A named peer bug (the Python SDK's server): a resume replays the stored events and
    /// only then registers the live stream, so what the tool sends in between is stored but
    /// never sent, and the call waits on a silent stream. The hung calls that show exactly
    /// that ([`Ledger::silent_resumes`]) leave `hung` into `peer_silent`.
    pub fn excuse_silent_resumes(&mut self) {
        let n = self.silent_resumes.len().min(self.hung);
        self.hung -= n;
        self.peer_silent += n;
        self.silent_resumes.clear();
    }

    /// A ledger from a peer client's own counts (the proxy's are added by
    /// [`Ledger::finish`]).
    pub fn from_counts(
        ok: usize,
        hung: usize,
        errors: Vec<String>,
        lost: u64,
        duplicated: u64,
        calls: usize,
    ) -> Ledger {
        Ledger {
            ok,
            hung,
            errors,
            lost,
            duplicated,
            calls,
            ..Ledger::default()
        }
    }

    /// Adds what the proxy saw: cuts, GETs, `tools/call` POSTs, refusals.
    pub fn finish(&mut self, proxy: &Proxy) {
        let log = proxy.log();
        self.cuts = proxy.cuts();
        self.gets = log.iter().filter(|l| l.method == "GET").count();
        self.posted_calls = log
            .iter()
            .filter(|l| l.rpc.as_deref() == Some("tools/call"))
            .count();
        for l in &log {
            if let Some(s) = l.status.filter(|s| !(200..300).contains(s)) {
                *self.refusals.entry(s).or_default() += 1;
            }
        }
    }
}

/// Counts `seen` against 1..=n into `ledger`.
pub(crate) fn tally(ledger: &mut Ledger, seen: &[u64], n: u64) -> bool {
    let unique: BTreeSet<u64> = seen
        .iter()
        .copied()
        .filter(|k| (1..=n).contains(k))
        .collect();
    let lost = n - unique.len() as u64;
    let dup = seen.len() as u64 - unique.len() as u64;
    ledger.lost += lost;
    ledger.duplicated += dup;
    lost == 0 && dup == 0
}

/// Closes `client`'s session, then waits (2 s at most) for the proxy to see every response
/// end.
async fn close_and_count_open(close: impl Future<Output = ()>, proxy: &Proxy) -> usize {
    close.await;
    let until = Instant::now() + Duration::from_secs(2);
    while proxy.open_responses() > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    proxy.open_responses()
}

/// The request-stream ledger: `rounds` sequential `ledger_count` calls through `proxy`
/// (faults enabled for the calls only). `close` ends the session when done.
pub async fn post_ledger(
    client: &ServiceClient,
    proxy: &Proxy,
    w: Workload,
    close: impl Future<Output = ()>,
) -> Ledger {
    let mut ledger = Ledger::default();
    let mut events = client.events();
    proxy.enable(true);
    for call in 0..w.rounds {
        let _ = events.drain();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let options = RequestOptions::new().on_progress(move |p| {
            if let Some(v) = p.progress.as_u64() {
                lock(&s2).push(v);
            }
        });
        let cuts_before = proxy.cuts();
        let logged_before = proxy.log().len();
        let t0 = Instant::now();
        let args = json!({"n": w.n, "interval_ms": w.interval_ms});
        // A call hangs when it has not ended `timeout` after it began plus every reconnect
        // wait the client announced for it: a backoff it said it would take (growing while
        // resumes cut early bring nothing) is not a hang; silence past it is.
        let mut waits: Vec<Duration> = Vec::new();
        let call_future = client.call_tool_with("ledger_count", args, options);
        let mut call_future = std::pin::pin!(call_future);
        let outcome = loop {
            let budget = w.timeout + waits.iter().sum::<Duration>();
            let left = budget.saturating_sub(t0.elapsed());
            if left.is_zero() {
                break None;
            }
            match tokio::time::timeout(left.min(Duration::from_millis(100)), &mut call_future).await
            {
                Ok(result) => break Some(result),
                Err(_) => waits.extend(request_stream_waits(events.drain())),
            }
        };
        // The waits the client announced for this call's stream: the server's `retry` after
        // a cut, growing (jittered, exponential) only while resumes bring nothing.
        waits.extend(request_stream_waits(events.drain()));
        let took = t0.elapsed();
        ledger.calls += 1;
        let cuts = proxy.cuts() - cuts_before;
        let own = Duration::from_millis(w.n.saturating_sub(1) * w.interval_ms);
        let waited: Duration = waits.iter().sum();
        let per_cut = Duration::from_millis(250) * u32::try_from(cuts).unwrap_or(u32::MAX);
        let bound = own + waited + per_cut + Duration::from_millis(1500);
        let seen = lock(&seen).clone();
        match outcome {
            None => {
                ledger.hung += 1;
                let log = &proxy.log()[logged_before..];
                let report = hang_report(call, &seen, w, &waits, log);
                if silent_resume(log, &seen) {
                    ledger.silent_resumes.push(report);
                } else {
                    ledger.hangs.push(report);
                }
            }
            Some(Ok(result)) => {
                let text = result.first_text().unwrap_or_default().to_owned();
                if text != format!("counted {}", w.n) {
                    ledger.errors.push(format!("call {call}: result {text:?}"));
                } else if tally(&mut ledger, &seen, w.n) {
                    ledger.ok += 1;
                }
                if took > bound {
                    ledger.slow.push((call, took, bound));
                }
            }
            Some(Err(RequestError::Transport(PeerError::Interrupted(why)))) => {
                // Allowed only for a cut before any event id: then it fails at once. The
                // proxy's log cannot say more: a cut resets the connection, and a reset
                // discards what the client's socket had not read yet, so an event the proxy
                // forwarded before the cut may never have reached the client.
                if cuts == 0 {
                    ledger
                        .errors
                        .push(format!("call {call}: interrupted with no cut: {why}"));
                } else if took > own + Duration::from_millis(1500) {
                    ledger.slow.push((call, took, own));
                } else {
                    ledger.interrupted += 1;
                }
            }
            Some(Err(e)) => ledger.errors.push(format!("call {call}: {e}")),
        }
    }
    proxy.enable(false);
    ledger.open_after_close = close_and_count_open(close, proxy).await;
    ledger.finish(proxy);
    ledger
}

/// The reconnect delays among `events` that concern a request's stream.
fn request_stream_waits(events: Vec<ClientEvent>) -> impl Iterator<Item = Duration> {
    events.into_iter().filter_map(|e| match e {
        ClientEvent::Reconnecting {
            role: StreamRole::Request(_),
            delay,
            ..
        } => Some(delay),
        _ => None,
    })
}

/// Whether a hung call's exchanges (`log`) end in a resume the proxy never cut, after which
/// the client had seen every message the proxy forwarded for the call, once: the client took
/// all it was sent, and the server sent nothing more.
fn silent_resume(log: &[Logged], seen: &[u64]) -> bool {
    let forwarded: usize = log.iter().map(|l| l.messages).sum();
    let unique: BTreeSet<u64> = seen.iter().copied().collect();
    log.last().is_some_and(|l| {
        l.method == "GET"
            && l.last_event_id.is_some()
            && l.cut_at.is_none()
            && l.status == Some(200)
    }) && forwarded == seen.len()
        && unique.len() == seen.len()
}

/// What a hung call of the request-stream ledger saw, in one line.
fn hang_report(
    call: usize,
    seen: &[u64],
    w: Workload,
    waits: &[Duration],
    log: &[Logged],
) -> String {
    format!(
        "call {call} hung: {} of {} progress seen (last {:?}), reconnect waits announced {:?}, exchanges [{}]",
        seen.len(),
        w.n,
        seen.last(),
        waits,
        exchanges(log)
    )
}

/// The proxy's log of a call's exchanges, in one line.
fn exchanges(log: &[Logged]) -> String {
    let each: Vec<String> = log
        .iter()
        .map(|l| {
            format!(
                "{:.3}s {} {} last-event-id={:?} status={:?} cut_at={:?} first_event_end={:?} messages={}",
                l.at.as_secs_f64(),
                l.method,
                l.rpc.as_deref().unwrap_or("-"),
                l.last_event_id,
                l.status,
                l.cut_at,
                l.first_event_end,
                l.messages
            )
        })
        .collect();
    each.join(" | ")
}

/// The GET-stream ledger: `rounds` bursts of `n` log messages not tied to a request (so on
/// the GET stream, which `client` must be listening on), each sent by one `ledger_burst`
/// call; after each, waits (up to `timeout`) until every message of the burst arrived.
///
/// Before the proxy's faults begin, one message (burst -1, not counted) goes over the GET
/// stream, so that the client holds an event id of it: a GET cut before its first event id
/// reaches the client is resumed as a plain GET, which starts after what the cut connection
/// was written (the consistency model of `cluster.rs`: exactly once needs an event id). A
/// clustered GET's priming event waits for the store's first read of the log, so without
/// this the first burst's first messages could share the priming event's fate.
pub async fn get_ledger(
    client: &ServiceClient,
    proxy: &Proxy,
    w: Workload,
    close: impl Future<Output = ()>,
) -> Ledger {
    let mut ledger = Ledger::default();
    let mut notifications = client.notifications();
    let mut seen: BTreeMap<i64, Vec<u64>> = BTreeMap::new();
    let record = |n: ServerNotification, seen: &mut BTreeMap<i64, Vec<u64>>| {
        if let ServerNotification::Log(log) = n
            && let (Some(b), Some(s)) = (log.data["burst"].as_i64(), log.data["seq"].as_u64())
        {
            seen.entry(b).or_default().push(s);
        }
    };
    ledger.calls += 1; // one POST more
    let warm = json!({"burst": -1, "n": 1, "interval_ms": 0});
    let warmed = tokio::time::timeout(w.timeout, async {
        client.call_tool("ledger_burst", warm).await.is_ok()
            && loop {
                match notifications.next().await {
                    Some(n) => {
                        record(n, &mut seen);
                        if seen.contains_key(&-1) {
                            break true;
                        }
                    }
                    None => break false,
                }
            }
    })
    .await;
    if warmed != Ok(true) {
        ledger
            .errors
            .push("the GET stream's first message did not arrive before the faults".into());
    }
    proxy.enable(true);
    for burst in 0..w.rounds {
        let b = i64::try_from(burst).unwrap_or(i64::MAX);
        ledger.calls += 1;
        let args = json!({"burst": b, "n": w.n, "interval_ms": w.interval_ms});
        match tokio::time::timeout(w.timeout, client.call_tool("ledger_burst", args)).await {
            Err(_) => ledger.hung += 1,
            // The tool ran either way (the proxy forwards the whole request before it cuts):
            // the burst must arrive in full on the GET stream.
            Ok(Ok(_)) => {}
            Ok(Err(RequestError::Transport(PeerError::Interrupted(_)))) => {
                ledger.interrupted += 1;
            }
            Ok(Err(e)) => ledger.errors.push(format!("burst {burst}: {e}")),
        }
        let until = Instant::now() + w.timeout;
        loop {
            for n in notifications.drain() {
                record(n, &mut seen);
            }
            let have = seen.get(&b).map_or(0, Vec::len) as u64;
            if have >= w.n || Instant::now() >= until {
                break;
            }
            if let Ok(Some(n)) =
                tokio::time::timeout(Duration::from_millis(50), notifications.next()).await
            {
                record(n, &mut seen);
            }
        }
    }
    // Late duplicates count too.
    tokio::time::sleep(w.retry).await;
    for n in notifications.drain() {
        record(n, &mut seen);
    }
    for burst in 0..w.rounds {
        let b = i64::try_from(burst).unwrap_or(i64::MAX);
        let got = seen.remove(&b).unwrap_or_default();
        // Which ones, to tell a cut's loss (around a reconnection) from another.
        let have: BTreeSet<u64> = got.iter().copied().collect();
        let missing: Vec<u64> = (1..=w.n).filter(|k| !have.contains(k)).collect();
        if !missing.is_empty() {
            eprintln!("burst {b}: lost {missing:?}");
        }
        if tally(&mut ledger, &got, w.n) {
            ledger.ok += 1;
        }
    }
    proxy.enable(false);
    ledger.open_after_close = close_and_count_open(close, proxy).await;
    ledger.finish(proxy);
    ledger
}

impl std::fmt::Display for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ok / {} hung / {} interrupted / {} err, lost {}, duplicated {}, cuts {}, GETs {}, slow {}, open after close {}, refusals {:?}",
            self.ok,
            self.hung,
            self.interrupted,
            self.errors.len(),
            self.lost,
            self.duplicated,
            self.cuts,
            self.gets,
            self.slow.len(),
            self.open_after_close,
            self.refusals
        )
    }
}

// ---- scenarios ---------------------------------------------------------------------------

/// Which ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Progress on the request's stream ([`post_ledger`]).
    Post,
    /// Log bursts on the GET stream ([`get_ledger`]).
    Get,
}

/// Runs one ledger: our server on `server` (the everything server, `retry` =
/// `w.retry`), the proxy with `faults`, our client on `client` with continuous listening.
///
/// # Errors
///
/// When the server, proxy or client cannot start.
pub async fn run_ours(
    server: crate::runtime::Runtime,
    client: crate::runtime::Runtime,
    kind: Kind,
    faults: Faults,
    w: Workload,
) -> Result<Ledger, String> {
    use mcp_proto::server::ServerConfig;
    let config = ServerConfig::default().with_retry_interval(w.retry);
    let serving = server
        .serve(crate::everything::server(), config)
        .await
        .map_err(|e| format!("serve: {e}"))?;
    let proxy = Proxy::start(serving.local_addr(), faults)
        .await
        .map_err(|e| format!("proxy: {e}"))?;
    let ledger = run_client(client, kind, &proxy, w).await;
    serving.shutdown().await;
    ledger
}

/// Our client on `client` (continuous listening) runs one ledger through `proxy`, whatever
/// server is behind it.
///
/// # Errors
///
/// When the client cannot connect, or its GET stream does not open for the GET ledger.
pub async fn run_client(
    client: crate::runtime::Runtime,
    kind: Kind,
    proxy: &Proxy,
    w: Workload,
) -> Result<Ledger, String> {
    use mcp_proto::client::ClientConfig;
    let builder = ServiceClient::builder("mcp-faults", "1");
    let cc = ClientConfig::new().with_continuous_listening(true);
    let c = client
        .connect_with(&proxy.url("/mcp"), builder, cc)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    if kind == Kind::Get {
        let opened = tokio::time::timeout(w.timeout, c.client().listen_opened()).await;
        if opened != Ok(true) {
            return Err("the GET stream did not open".into());
        }
    }
    let service = c.client().clone();
    Ok(match kind {
        Kind::Post => post_ledger(&service, proxy, w, c.close()).await,
        Kind::Get => get_ledger(&service, proxy, w, c.close()).await,
    })
}

#[cfg(test)]
mod tests {
    use super::{EventScan, Ledger, Logged, silent_resume};
    use std::time::Duration;

    fn get(last_event_id: &str, cut_at: Option<usize>, messages: usize) -> Logged {
        Logged {
            at: Duration::ZERO,
            method: "GET".into(),
            last_event_id: Some(last_event_id.into()),
            rpc: None,
            rpc_id: None,
            status: Some(200),
            cut_at,
            first_event_end: Some(100),
            first_message_end: Some(100),
            messages,
        }
    }

    fn post(cut_at: Option<usize>, messages: usize) -> Logged {
        Logged {
            method: "POST".into(),
            last_event_id: None,
            rpc: Some("tools/call".into()),
            ..get("", cut_at, messages)
        }
    }

    fn duplicated(n: u64) -> Ledger {
        Ledger {
            duplicated: n,
            ..Ledger::default()
        }
    }

    #[test]
    fn only_what_a_cut_resume_carried_before_a_stale_resume_is_excused() {
        // POST cut after 48 messages, resumed from 1-48, that resume cut after 74, resumed
        // again from 1-48: the 74 come twice because the peer asked for them twice.
        let log = [
            post(Some(9000), 48),
            get("1-48", Some(11_000), 74),
            get("1-48", None, 152),
        ];
        let mut l = duplicated(74);
        l.excuse_stale_resumes(&log);
        assert_eq!((l.duplicated, l.re_requested), (0, 74));
        // One more duplicate than that is the server's.
        let mut l = duplicated(75);
        l.excuse_stale_resumes(&log);
        assert_eq!((l.duplicated, l.re_requested), (1, 74));
        // Resuming from the last id received (what a correct client does) excuses nothing.
        let log = [
            post(Some(9000), 48),
            get("1-48", Some(11_000), 74),
            get("1-122", None, 78),
        ];
        let mut l = duplicated(3);
        l.excuse_stale_resumes(&log);
        assert_eq!((l.duplicated, l.re_requested), (3, 0));
    }

    #[test]
    fn a_silent_resume_is_one_that_delivered_everything_it_got() {
        let seen: Vec<u64> = (1..=182).collect();
        let log = [post(Some(377), 1), get("1-1", None, 181)];
        assert!(silent_resume(&log, &seen));
        // The client lost one the proxy forwarded: not the peer's silence.
        assert!(!silent_resume(&log, &seen[1..]));
        // The resume was cut: the client had to resume again.
        assert!(!silent_resume(
            &[post(Some(377), 1), get("1-1", Some(900), 181)],
            &seen
        ));
        // The client saw one twice.
        let mut twice = seen.clone();
        twice[181] = 181;
        assert!(!silent_resume(&log, &twice));
        // No resume at all.
        assert!(!silent_resume(&[post(None, 182)], &seen));
    }

    /// A priming event (an id, no data), two messages (one of two lines), a comment, and the
    /// start of a third message without its blank line.
    const BODY: &[u8] = b"id: 1-0\nretry: 300\ndata:\n\nid: 1-1\ndata: {\"a\":1}\n\n: keep-alive\n\nevent: message\ndata: x\ndata: y\n\nid: 1-3\ndata: {";

    /// `BODY` with each LF made `eol` (the SSE spec's other line ends).
    fn with_line_end(eol: &[u8]) -> Vec<u8> {
        BODY.iter()
            .flat_map(|&b| if b == b'\n' { eol.to_vec() } else { vec![b] })
            .collect()
    }

    /// Every event end in `body` fed split at `at`: (end, has_data).
    fn ends(body: &[u8], at: usize) -> Vec<(usize, bool)> {
        let mut scan = EventScan::default();
        let mut ends = Vec::new();
        let (a, b) = body.split_at(at);
        scan.feed(a, |end, data| ends.push((end, data)));
        scan.feed(b, |end, data| ends.push((end, data)));
        ends
    }

    #[test]
    fn messages_are_counted_whole_byte_by_byte_and_split_anywhere_with_any_line_end() {
        for eol in [&b"\n"[..], b"\r\n", b"\r"] {
            let body = with_line_end(eol);
            let mut whole = EventScan::default();
            assert_eq!(whole.messages(&body), 2, "{eol:?}");
            let mut bytes = EventScan::default();
            assert_eq!(body.iter().map(|b| bytes.messages(&[*b])).sum::<usize>(), 2);
            for at in 0..=body.len() {
                let mut split = EventScan::default();
                let (a, b) = body.split_at(at);
                assert_eq!(split.messages(a) + split.messages(b), 2, "{eol:?} at {at}");
            }
            // The blank line that ends the third message.
            let end: Vec<u8> = [&b"}"[..], eol, eol].concat();
            assert_eq!(whole.messages(&end), 1, "{eol:?}");
        }
    }

    #[test]
    fn event_ends_fall_at_the_blank_line_whatever_the_line_end_and_split() {
        // The priming event, the first message, the comment, the second message; with CRLF
        // each ends one byte past its blank line's CR (a client has the event there).
        let lf = [(26, false), (49, true), (63, false), (95, true)];
        let crlf: Vec<(usize, bool)> = [(29, false), (55, true), (71, false), (107, true)].into();
        for at in 0..=BODY.len() {
            assert_eq!(ends(BODY, at), lf, "LF, split at {at}");
        }
        let body = with_line_end(b"\r\n");
        for at in 0..=body.len() {
            assert_eq!(ends(&body, at), crlf, "CRLF, split at {at}");
        }
        // Where the Python SDK's server starts a stream: a message, CRLF line ends.
        let python = b"event: message\r\nid: 205\r\ndata: {\"jsonrpc\":\"2.0\"}\r\n\r\n";
        assert_eq!(ends(python, 0), [(python.len() - 1, true)]);
    }
}
