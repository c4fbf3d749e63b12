// S-POST-15, S-RES-2/3, S-POST-20, S-RES-6/7.
//! Outbound streams: the HTTP exchanges the router answers, and the *logical* streams that
//! outlive a connection so a client can resume them.
//!
//! # Theory of operation
//!
//! Every HTTP exchange gets a [`ExchangeId`]. Most are answered at once (errors, 202, DELETE,
//! metadata, preflight) and forgotten. The others are bound to a **logical stream**:
//!
//! - a *request stream* per POST that carries requests: it ends when every request in it
//!   has been answered (or cancelled);
//! - the *listen stream* of a session, opened by GET; it never ends while the session lives.
//!
//! A logical stream has a number unique in the router; in stateful mode with resumability on,
//! each event it writes gets the id `"<number>-<seq>"` and its frame goes to the
//! [`EventStore`](super::EventStore). The connection (HTTP exchange) of a logical stream can
//! go away while the stream lives on: the client disconnected, or the server closed it so the
//! client polls. A GET with `Last-Event-ID` re-attaches a new connection and
//! replays exactly that stream's later events; a plain GET re-attaches the listen
//! stream and flushes the messages queued while it was away.
//!
//! A request stream starts *pending* when its answer may still be one JSON body; it is
//! upgraded to SSE the moment anything must precede the response (auto mode), at once (SSE
//! mode), or never (JSON mode). A listen stream starts *detached* and is opened by its GET.
//!
//! Every phase change goes through [`LogicalStream::step`], which applies [`Phase::on`]; the
//! table below is that match, row for row (`-` = the event does not apply: nothing changes).
//!
//! ```text
//!  phase     event                       next      when / effect
//!  --------  --------------------------  --------  ------------------------------------------
//!  Pending   LastResponse                Done      200 JSON (one object or batch array)
//!  Pending   Upgrade                     Open      a message must precede, SSE mode, or
//!                                                  poll-close: 200 SSE head, [priming], kept
//!  Pending   Disconnect                  Done      handlers cancelled
//!  Pending   Release / Attach /          -
//!            GraceOver / RetentionOver
//!  Open      LastResponse                Finished  connection ended; kept if ids were sent
//!  Open      Upgrade                     Open      (already SSE)
//!  Open      Disconnect { keep: true }   Detached  the client holds an event id (request
//!                                                  stream: grace timer), or a listen stream
//!  Open      Disconnect { keep: false }  Done      handlers cancelled
//!  Open      Release                     Detached  poll-close (retry sent; request stream:
//!                                                  grace timer), or a drain ends a GET stream
//!  Open      Attach                      Open      a new GET took over: old connection ended
//!                                                  (budget spent: 409 before, no event)
//!  Open      GraceOver / RetentionOver   -
//!  Detached  LastResponse                Finished  retention timer
//!  Detached  Upgrade                     Detached  (already SSE)
//!  Detached  Attach                      Open      GET (+ Last-Event-ID): replay, then live
//!  Detached  GraceOver                   Done      handlers cancelled (request stream)
//!  Detached  Disconnect / Release /      -
//!            RetentionOver
//!  Finished  Attach                      Finished  GET + Last-Event-ID: replay, then ended
//!  Finished  RetentionOver               Done      store entries removed
//!  Finished  LastResponse / Upgrade /    -
//!            Disconnect / Release /
//!            GraceOver
//!  Done      any                         -
//! ```
//!
//! Messages and responses change no phase; where they go depends on it: Pending keeps
//! responses (a message either upgrades the stream or, in JSON mode, is rerouted to the
//! session's GET stream); Open writes the event (stored when resumable); Detached stores it
//! for the resume; Finished and Done refuse it. A stream in `Done` is removed from the
//! router's table at once (`drop_stream`).
//!
//! A listen stream is Open or Detached only. While Detached, its messages are written to the
//! event store under its own ids like those of a detached request stream, so a GET with
//! `Last-Event-ID` replays them; a plain GET replays the ones stored since the last
//! connection went away (what the client cannot have seen). Only a session that never
//! opened a GET stream queues messages in the session, bounded by the overflow policy.
//!
//! A GET for a listen stream that has a connection *takes over* (ends the old connection,
//! which may have died silently behind a proxy) while the session's takeover budget lasts
//! (`ServerConfig::limits.listen_takeovers` per `listen_takeover_window`); after that it is refused
//! with 409 and the live connection stays, so two GETs of one client cannot evict each other
//! forever (the "Open, Attach" row above).
//!
//! Each connection is paced by the client's reading (`pace.rs`): an exchange whose backlog
//! is not empty when its stream lets go of it *drains* before its end is emitted.
//!
//! # The exchange machine
//!
//! An [`Exchange`] is born `ReadingBody` (a POST whose head was accepted) or `Attached` (bound
//! to its logical stream: a POST whose answer streams or waits, a GET, a resume). A POST's
//! `ReadingBody` exchange is removed when its body ends (or goes over the cap: 413); if the
//! answer is not immediate it comes back `Attached` under the same [`ExchangeId`]. Any exchange
//! is removed when its client goes away, is cut as a slow reader, or its session or the
//! router ends. In between, its state changes only through [`Exchange::step`], which applies
//! [`ExchangeState::on`]; the table is that match, row for row (`any` = every state).
//!
//! ```text
//!  state        event                      step    effect
//!  -----------  -------------------------  ------  -------------------------------------------
//!  any          LetGo { backlog: true }    Drain   → Draining; heartbeat disarmed
//!  any          LetGo { backlog: false }   End     ResponseEnd, exchange removed
//!  Draining     BacklogWritten             End     ResponseEnd, exchange removed
//!  ReadingBody  BacklogWritten             Stay    -
//!  Attached     BacklogWritten             Stay    -
//! ```

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::error::ProtocolError;
use super::pace::{Pace, Push};
use super::timer::{Timer, TimerQueue};
use super::{
    ExchangeId, Fx, RequestHandle, ServerConfig, ServerLimits, ServerOutput, SessionHandle,
};
use crate::sse::{SseFrame, encode_comment, encode_priming};
use crate::{HandleMap, ProtocolVersion};

/// The phase of a logical stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No head sent; the answer may still be one JSON body.
    Pending,
    /// SSE head sent; a connection is attached.
    Open,
    /// SSE stream alive without a connection.
    Detached,
    /// Every response written; kept for replay until retention ends.
    Finished,
    /// Gone.
    Done,
}

/// What happened to a logical stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamEvent {
    /// A response was written and it was the last one owed.
    LastResponse,
    /// A message must precede the response (or the server closes for polling).
    Upgrade,
    /// The client's connection went away; `keep` when the stream outlives it (a request
    /// stream whose client holds an event id, or a listen stream, which never ends on its own).
    Disconnect { keep: bool },
    // S-POST-20.
    /// The server lets go of the connection but not of the stream: poll-close, or
    /// a draining shutdown ending a GET stream.
    Release,
    /// A GET attached a new connection.
    Attach,
    /// The grace window of a detached request stream ended.
    GraceOver,
    /// The retention of a finished stream ended.
    RetentionOver,
}

impl Phase {
    /// The whole stream state machine: one exhaustive match, the module's table row for row.
    /// `None` = the event does not apply in this phase (ignored). Pure: the phase changes only
    /// through [`LogicalStream::step`].
    pub(crate) fn on(self, event: StreamEvent) -> Option<Phase> {
        use Phase as P;
        use StreamEvent as E;
        match (self, event) {
            (P::Pending, E::LastResponse) => Some(P::Done),
            (P::Pending, E::Upgrade) => Some(P::Open),
            (P::Pending, E::Disconnect { .. }) => Some(P::Done),
            (P::Pending, E::Release | E::Attach | E::GraceOver | E::RetentionOver) => None,
            (P::Open, E::LastResponse) => Some(P::Finished),
            (P::Open, E::Upgrade) => Some(P::Open),
            (P::Open, E::Disconnect { keep: true }) => Some(P::Detached),
            (P::Open, E::Disconnect { keep: false }) => Some(P::Done),
            (P::Open, E::Release) => Some(P::Detached),
            (P::Open, E::Attach) => Some(P::Open),
            (P::Open, E::GraceOver | E::RetentionOver) => None,
            (P::Detached, E::LastResponse) => Some(P::Finished),
            (P::Detached, E::Upgrade) => Some(P::Detached),
            (P::Detached, E::Attach) => Some(P::Open),
            (P::Detached, E::GraceOver) => Some(P::Done),
            (P::Detached, E::Disconnect { .. } | E::Release | E::RetentionOver) => None,
            (P::Finished, E::Attach) => Some(P::Finished),
            (P::Finished, E::RetentionOver) => Some(P::Done),
            (
                P::Finished,
                E::LastResponse | E::Upgrade | E::Disconnect { .. } | E::Release | E::GraceOver,
            ) => None,
            (P::Done, _) => None,
        }
    }
}

/// Which kind of logical stream.
#[derive(Debug)]
pub(crate) enum StreamKind {
    /// The answer to one POST.
    Request {
        /// Requests still owed a response.
        pending: Vec<RequestHandle>,
        /// Responses kept while Pending (JSON answer).
        kept: Vec<Bytes>,
        /// The POST was a batch: a JSON answer is an array.
        batch: bool,
        /// The POST carried `initialize`: the head carries `Mcp-Session-Id`.
        initialize: bool,
    },
    /// A session's GET stream.
    Listen,
    /// Another cluster instance's request stream, resumed here: its events come from the
    /// store (`cluster.rs`), it has no requests of its own.
    Remote {
        /// The stream's name (`<instance>.<n>`).
        name: Box<str>,
    },
}

/// A logical stream.
#[derive(Debug)]
pub(crate) struct LogicalStream {
    pub(crate) session: Option<SessionHandle>,
    pub(crate) kind: StreamKind,
    /// Private: it changes only through [`LogicalStream::step`]; read it with [`LogicalStream::phase`].
    phase: Phase,
    pub(crate) connection: Option<ExchangeId>,
    /// Events get ids and are stored.
    pub(crate) resumable: bool,
    // G-3.
    /// The client's revision (priming only for 2025-11-25+).
    pub(crate) version: ProtocolVersion,
    /// Sequence number of the last event written (0 = only the priming event, if any).
    pub(crate) last_seq: u64,
    /// `last_seq` when the connection last went away: a plain GET on a listen stream
    /// replays what was stored after it.
    pub(crate) detached_seq: u64,
    /// A listen stream's GET takeovers in the current takeover window, and when it began
    /// (only listen streams are taken over under a budget; idle sessions pay nothing).
    pub(crate) takeovers: u32,
    pub(crate) takeover_window: Option<Instant>,
    /// An event id reached the wire: the client can resume.
    pub(crate) id_sent: bool,
    pub(crate) accept_sse: bool,
    /// The request's `Origin`, for CORS headers on a late head.
    pub(crate) origin: Option<Box<str>>,
    pub(crate) retention: Option<Instant>,
    pub(crate) grace: Option<Instant>,
    // S-NEW-9.
    /// A 2026-07-28 request stream: sessionless, never resumable, no server→client requests,
    /// and its head waits for the first message so that an error answer can carry its HTTP
    /// status.
    pub(crate) modern: bool,
    /// The HTTP status a modern error answer maps to (404 for -32601, 400 for -32020..-32022),
    /// used when the answer goes out as one JSON body.
    pub(crate) error_status: Option<http::StatusCode>,
    /// The client accepts SSE but not JSON (modern streams only: their answer then goes out
    /// as SSE; a legacy stream in that case is upgraded at once).
    pub(crate) sse_only: bool,
    /// A clustered listen stream: the ticket of its log follow, and whether its first
    /// answer (which primes the stream) arrived.
    pub(crate) follow: Option<super::Ticket>,
    pub(crate) primed: bool,
    /// A clustered request stream: frames waiting for the store to commit them (in order;
    /// seq 0 is the priming event, waiting for the stream's registration), the sequence
    /// numbers committed out of order, whether the stream is registered, and whether its
    /// connection ends once the last frame is out.
    pub(crate) uncommitted: std::collections::VecDeque<(u64, Bytes)>,
    pub(crate) committed: std::collections::BTreeSet<u64>,
    pub(crate) registered: bool,
    pub(crate) end_after_commit: bool,
    /// A close for polling waits for the commits (`Router::close_for_polling`).
    pub(crate) poll_close_after_commit: bool,
    /// Its place in the router's cluster commits of this turn (`ClusterState::commits`):
    /// the entry, and its slot there.
    pub(crate) commit: Option<(usize, usize)>,
}

impl LogicalStream {
    /// A stream with no connection yet, in `phase`.
    pub(crate) fn new(
        session: Option<SessionHandle>,
        kind: StreamKind,
        phase: Phase,
        resumable: bool,
        version: ProtocolVersion,
    ) -> Self {
        LogicalStream {
            session,
            kind,
            phase,
            connection: None,
            resumable,
            version,
            last_seq: 0,
            detached_seq: 0,
            takeovers: 0,
            takeover_window: None,
            id_sent: false,
            accept_sse: true,
            origin: None,
            retention: None,
            grace: None,
            modern: false,
            error_status: None,
            sse_only: false,
            follow: None,
            primed: false,
            uncommitted: Default::default(),
            committed: Default::default(),
            registered: false,
            commit: None,
            end_after_commit: false,
            poll_close_after_commit: false,
        }
    }

    /// Where the stream is in the table above.
    pub(crate) fn phase(&self) -> Phase {
        self.phase
    }

    /// The one place the phase changes: applies `event` through [`Phase::on`] and returns the
    /// new phase, or `None` (phase unchanged) when the event does not apply.
    pub(crate) fn step(&mut self, event: StreamEvent) -> Option<Phase> {
        let next = self.phase.on(event)?;
        self.phase = next;
        Some(next)
    }

    /// Lets go of the connection (if any), remembering how far the stream had written.
    pub(crate) fn detach(&mut self) -> Option<ExchangeId> {
        self.detached_seq = self.last_seq;
        self.connection.take()
    }

    /// Whether this is a request stream with nothing left to answer.
    pub(crate) fn all_answered(&self) -> bool {
        match &self.kind {
            StreamKind::Request { pending, .. } => pending.is_empty(),
            StreamKind::Listen | StreamKind::Remote { .. } => false,
        }
    }
}

/// One HTTP exchange that is not yet answered or still streaming.
#[derive(Debug)]
pub(crate) struct Exchange {
    pub(crate) state: ExchangeState,
    pub(crate) heartbeat: Option<Instant>,
    pub(crate) session: Option<SessionHandle>,
    /// How much of the body the client has taken (see `pace.rs`).
    pub(crate) pace: Pace,
}

/// What happened to an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExchangeEvent {
    /// Its logical stream let go of it: its response ends; `backlog` when chunks still wait
    /// for the client's reading.
    LetGo { backlog: bool },
    /// The client took everything that waited.
    BacklogWritten,
}

/// What the router must do after an exchange event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExchangeStep {
    /// Nothing.
    Stay,
    /// The exchange is now `Draining`: its end follows its backlog.
    Drain,
    /// End the response and forget the exchange.
    End,
}

impl ExchangeState {
    /// The exchange state machine: one exhaustive match, the module's exchange table row for
    /// row. Pure: the state changes only through [`Exchange::step`].
    pub(crate) fn on(&self, event: ExchangeEvent) -> ExchangeStep {
        use ExchangeEvent as E;
        use ExchangeState as S;
        match (self, event) {
            (_, E::LetGo { backlog: true }) => ExchangeStep::Drain,
            (_, E::LetGo { backlog: false }) => ExchangeStep::End,
            (S::Draining, E::BacklogWritten) => ExchangeStep::End,
            (S::ReadingBody(_), E::BacklogWritten) => ExchangeStep::Stay,
            (S::Attached(_), E::BacklogWritten) => ExchangeStep::Stay,
        }
    }
}

impl Exchange {
    /// The one place the state changes: applies `event` through [`ExchangeState::on`] and
    /// returns what the router must do besides.
    pub(crate) fn step(&mut self, event: ExchangeEvent) -> ExchangeStep {
        let step = self.state.on(event);
        if step == ExchangeStep::Drain {
            self.state = ExchangeState::Draining;
        }
        step
    }

    /// A new exchange in `state`.
    pub(crate) fn new(state: ExchangeState, session: Option<SessionHandle>) -> Self {
        Exchange {
            state,
            heartbeat: None,
            session,
            pace: Pace::default(),
        }
    }
}

/// Where an exchange is.
#[derive(Debug)]
pub(crate) enum ExchangeState {
    /// POST accepted at the head; its body is arriving.
    ReadingBody(Box<PostContext>),
    /// Bound to a logical stream.
    Attached(u64),
    /// Let go of by its stream with a backlog still to write: its end follows the backlog.
    Draining,
}

/// What the head of a POST established, kept while its body arrives.
#[derive(Debug)]
pub(crate) struct PostContext {
    pub(crate) session: Option<SessionHandle>,
    // G-6.
    /// `MCP-Protocol-Version`: `Ok(None)` absent, `Err` unsupported (checked once the body
    /// shows whether it is `initialize`, which is exempt).
    pub(crate) header_version: Result<Option<ProtocolVersion>, ()>,
    pub(crate) accept_json: bool,
    pub(crate) accept_sse: bool,
    pub(crate) principal: Option<Box<str>>,
    pub(crate) origin: Option<Box<str>>,
    pub(crate) body: Vec<u8>,
    // S-NEW-8.
    /// A 2026-07-28 request (its `MCP-Protocol-Version` is a modern revision we serve): the
    /// mirrored headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`),
    /// checked against the body once it is complete.
    pub(crate) mirrored: Option<http::HeaderMap>,
    /// The raw `MCP-Protocol-Version`, echoed in an `UnsupportedProtocolVersionError`.
    pub(crate) requested_version: Option<Box<str>>,
    /// Who sent it (what each request it carries reports, `Router::request_client`).
    pub(crate) client: super::RequestClient,
}

/// What sending a chunk asks of the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    /// Nothing more.
    Done,
    /// The slow-reader rule: abort the connection and treat it as a disconnect.
    CutSlowReader,
}

/// What the client's reading asks of the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    /// Nothing more.
    Nothing,
    /// A draining exchange finished: forget it.
    Drained,
}

/// What letting go of an exchange asks of the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LetGo {
    /// Not a live exchange: nothing.
    Unknown,
    /// It drains; nothing more now.
    Draining,
    /// Its end was emitted: forget it.
    Ended,
}

/// The router's logical streams and HTTP exchanges: the two machines' owned tables.
///
/// A stream or an exchange enters with [`insert_stream`](Streams::insert_stream) /
/// [`insert_exchange`](Streams::insert_exchange) and leaves only through
/// [`remove_stream`](Streams::remove_stream) / [`remove_exchange`](Streams::remove_exchange),
/// which disarm its timers on the way out (the timer set never holds an entry for something
/// gone) and keep the count of modern request streams alive, the bound
/// `max_modern_in_flight` is checked against. In between, their states change only through
/// [`LogicalStream::step`] and [`Exchange::step`].
#[derive(Debug, Default)]
pub(crate) struct Streams {
    logical: HandleMap<u64, LogicalStream>,
    exchanges: HandleMap<ExchangeId, Exchange>,
    /// Modern request streams alive.
    modern_live: usize,
}

impl Streams {
    /// A logical stream.
    pub(crate) fn stream(&self, lsid: &u64) -> Option<&LogicalStream> {
        self.logical.get(lsid)
    }

    /// A logical stream, to change (its phase only through [`LogicalStream::step`]).
    pub(crate) fn stream_mut(&mut self, lsid: &u64) -> Option<&mut LogicalStream> {
        self.logical.get_mut(lsid)
    }

    /// Whether the logical stream lives.
    pub(crate) fn has_stream(&self, lsid: &u64) -> bool {
        self.logical.contains_key(lsid)
    }

    /// A new logical stream.
    pub(crate) fn insert_stream(&mut self, lsid: u64, ls: LogicalStream) {
        if ls.modern {
            self.modern_live += 1;
        }
        let old = self.logical.insert(lsid, ls);
        debug_assert!(old.is_none(), "logical stream {lsid} inserted twice");
    }

    /// Takes a logical stream out, its retention and grace timers disarmed.
    pub(crate) fn remove_stream(
        &mut self,
        lsid: u64,
        timers: &mut TimerQueue,
    ) -> Option<LogicalStream> {
        let mut ls = self.logical.remove(&lsid)?;
        timers.clear(&mut ls.retention, Timer::Retention(lsid));
        timers.clear(&mut ls.grace, Timer::ResumeGrace(lsid));
        if ls.modern {
            self.modern_live = self.modern_live.saturating_sub(1);
        }
        Some(ls)
    }

    /// The live logical streams' numbers.
    pub(crate) fn stream_ids(&self) -> Vec<u64> {
        self.logical.keys().copied().collect()
    }

    /// How many logical streams live.
    pub(crate) fn stream_count(&self) -> usize {
        self.logical.len()
    }

    /// How many modern request streams live.
    pub(crate) fn modern_live(&self) -> usize {
        self.modern_live
    }

    /// An exchange.
    pub(crate) fn exchange(&self, conn: &ExchangeId) -> Option<&Exchange> {
        self.exchanges.get(conn)
    }

    /// An exchange, to change (its state only through [`Exchange::step`]).
    pub(crate) fn exchange_mut(&mut self, conn: &ExchangeId) -> Option<&mut Exchange> {
        self.exchanges.get_mut(conn)
    }

    /// A new exchange.
    pub(crate) fn insert_exchange(&mut self, conn: ExchangeId, ex: Exchange) {
        let old = self.exchanges.insert(conn, ex);
        debug_assert!(old.is_none(), "exchange {conn:?} inserted twice");
    }

    /// Takes an exchange out, its heartbeat and stall timers disarmed.
    pub(crate) fn remove_exchange(
        &mut self,
        conn: ExchangeId,
        timers: &mut TimerQueue,
    ) -> Option<Exchange> {
        let mut ex = self.exchanges.remove(&conn)?;
        timers.clear(&mut ex.heartbeat, Timer::Heartbeat(conn));
        timers.clear(&mut ex.pace.stall, Timer::Stall(conn));
        Some(ex)
    }

    /// The open exchanges.
    pub(crate) fn iter_exchanges(&self) -> impl Iterator<Item = (&ExchangeId, &Exchange)> {
        self.exchanges.iter()
    }

    /// The open exchanges' ids.
    pub(crate) fn exchange_ids(&self) -> Vec<ExchangeId> {
        self.exchanges.keys().copied().collect()
    }

    /// How many exchanges are open.
    pub(crate) fn exchange_count(&self) -> usize {
        self.exchanges.len()
    }

    /// Whether no exchange is open.
    pub(crate) fn no_exchanges(&self) -> bool {
        self.exchanges.is_empty()
    }

    /// A GET for `lsid`, a session's listen stream, while it has a connection: allowed (the
    /// old connection will be ended) while the stream's takeover budget lasts
    /// ([`ServerLimits::listen_takeovers`] per [`ServerLimits::listen_takeover_window`]),
    /// 409 after that. A stream without a connection costs nothing to attach.
    ///
    /// [`ServerLimits::listen_takeovers`]: super::ServerLimits::listen_takeovers
    /// [`ServerLimits::listen_takeover_window`]: super::ServerLimits::listen_takeover_window
    pub(crate) fn charge_takeover(
        &mut self,
        lsid: u64,
        limits: &ServerLimits,
        now: Instant,
    ) -> Result<(), ProtocolError> {
        let Some(s) = self
            .logical
            .get_mut(&lsid)
            .filter(|l| l.connection.is_some())
        else {
            return Ok(());
        };
        if s.takeover_window
            .is_none_or(|start| now >= start + limits.listen_takeover_window)
        {
            s.takeover_window = Some(now);
            s.takeovers = 0;
        }
        if s.takeovers >= limits.listen_takeovers {
            return Err(ProtocolError::ListenConflict);
        }
        s.takeovers += 1;
        Ok(())
    }

    // ---- an exchange's write path: pacing and heartbeats (`pace.rs`'s table) -------------

    /// A chunk for `conn`, emitted while its send window has room and backlogged otherwise
    /// (the stall timer armed when the backlog starts); `live` is false for replayed events
    /// (they do not count against the backlog budget). Every emitted chunk re-arms the
    /// heartbeat. [`Sent::CutSlowReader`]: the live backlog went over its budget.
    pub(crate) fn send_chunk(
        &mut self,
        conn: ExchangeId,
        chunk: Bytes,
        live: bool,
        config: &ServerConfig,
        fx: &mut Fx<'_>,
    ) -> Sent {
        let limits = &config.limits;
        let Some(ex) = self.exchanges.get_mut(&conn) else {
            return Sent::Done;
        };
        match ex
            .pace
            .push(chunk, live, limits.send_window, limits.max_backlog_bytes)
        {
            Push::Emit(chunk) => {
                fx.out.push_back(ServerOutput::ResponseBody {
                    stream: conn,
                    chunk,
                });
                self.arm_heartbeat(conn, config, fx);
            }
            Push::Held { newly_blocked } => {
                if newly_blocked {
                    let at = fx.now + limits.slow_reader_timeout;
                    fx.timers.set(&mut ex.pace.stall, Timer::Stall(conn), at);
                }
            }
            Push::OverBudget => return Sent::CutSlowReader,
        }
        Sent::Done
    }

    /// Arms `conn`'s next heartbeat (when heartbeats are on).
    pub(crate) fn arm_heartbeat(
        &mut self,
        conn: ExchangeId,
        config: &ServerConfig,
        fx: &mut Fx<'_>,
    ) {
        let Some(every) = config.streams.heartbeat_interval else {
            return;
        };
        if let Some(ex) = self.exchanges.get_mut(&conn) {
            fx.timers
                .set(&mut ex.heartbeat, Timer::Heartbeat(conn), fx.now + every);
        }
    }

    /// The client took `bytes` more of `conn`'s body: the backlog goes out up to the window,
    /// the stall timer is cleared (nothing waits) or re-armed (progress), the heartbeat
    /// re-armed when something moved. [`Written::Drained`]: a draining exchange took its
    /// last byte: its end was emitted, and the router forgets it.
    pub(crate) fn written(
        &mut self,
        conn: ExchangeId,
        bytes: usize,
        config: &ServerConfig,
        fx: &mut Fx<'_>,
    ) -> Written {
        let Some(ex) = self.exchanges.get_mut(&conn) else {
            return Written::Nothing;
        };
        let ready = ex.pace.taken(bytes, config.limits.send_window);
        let blocked = ex.pace.is_blocked();
        let drained = !blocked && ex.step(ExchangeEvent::BacklogWritten) == ExchangeStep::End;
        if !blocked {
            fx.timers.clear(&mut ex.pace.stall, Timer::Stall(conn));
        } else if bytes > 0 {
            // Progress: the client gets a full timeout again.
            let at = fx.now + config.limits.slow_reader_timeout;
            fx.timers.set(&mut ex.pace.stall, Timer::Stall(conn), at);
        }
        let moved = !ready.is_empty();
        for chunk in ready {
            fx.out.push_back(ServerOutput::ResponseBody {
                stream: conn,
                chunk,
            });
        }
        if drained {
            fx.out.push_back(ServerOutput::ResponseEnd { stream: conn });
            return Written::Drained;
        }
        if moved {
            self.arm_heartbeat(conn, config, fx);
        }
        Written::Nothing
    }

    /// `conn`'s stream lets go of it: its response ends at once when nothing waits
    /// ([`LetGo::Ended`]: the end was emitted, the router forgets the exchange), else the
    /// exchange drains ([`LetGo::Draining`]: its heartbeat disarmed, its end follows its
    /// backlog).
    pub(crate) fn let_go(&mut self, conn: ExchangeId, fx: &mut Fx<'_>) -> LetGo {
        let Some(ex) = self.exchanges.get_mut(&conn) else {
            return LetGo::Unknown;
        };
        let backlog = ex.pace.is_blocked();
        match ex.step(ExchangeEvent::LetGo { backlog }) {
            ExchangeStep::Drain => {
                fx.timers.clear(&mut ex.heartbeat, Timer::Heartbeat(conn));
                LetGo::Draining
            }
            ExchangeStep::End => {
                fx.out.push_back(ServerOutput::ResponseEnd { stream: conn });
                LetGo::Ended
            }
            ExchangeStep::Stay => LetGo::Unknown,
        }
    }

    /// `conn`'s heartbeat timer fired: a keep-alive comment, unless data waits (the
    /// connection needs none) or it drains (it only finishes its backlog).
    pub(crate) fn heartbeat_due(
        &mut self,
        conn: ExchangeId,
        config: &ServerConfig,
        fx: &mut Fx<'_>,
    ) -> Sent {
        let live = self.exchanges.get_mut(&conn).is_some_and(|ex| {
            ex.heartbeat = None;
            !ex.pace.is_blocked() && matches!(ex.state, ExchangeState::Attached(_))
        });
        if !live {
            return Sent::Done;
        }
        self.send_chunk(conn, heartbeat_frame(), true, config, fx)
    }

    /// `conn`'s stall timer fired: whether its client still took nothing of what waits (the
    /// slow-reader rule: the router cuts it).
    pub(crate) fn stall_due(&mut self, conn: ExchangeId) -> bool {
        self.exchanges.get_mut(&conn).is_some_and(|ex| {
            ex.pace.stall = None;
            ex.pace.is_blocked()
        })
    }

    /// Gives back capacity once most of it is unused (after a burst).
    pub(crate) fn shrink(&mut self) {
        if self.logical.capacity() > 64 && self.logical.len() * 4 < self.logical.capacity() {
            self.logical.shrink_to_fit();
        }
        if self.exchanges.capacity() > 64 && self.exchanges.len() * 4 < self.exchanges.capacity() {
            self.exchanges.shrink_to_fit();
        }
    }
}

/// Parses an event id `"<stream>-<seq>"`.
pub(crate) fn parse_event_id(id: &str) -> Option<(u64, u64)> {
    let (s, q) = id.trim().split_once('-')?;
    if s.is_empty() || q.is_empty() || !s.bytes().chain(q.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((s.parse().ok()?, q.parse().ok()?))
}

// S-SSE-17.
/// Encodes one SSE event with the workspace encoder (one `data:` line per line).
/// Our ids are `<digits>-<digits>`, which the encoder always accepts; should it ever refuse
/// one, the event goes out without an id rather than not at all.
pub(crate) fn event_frame(id: Option<&str>, data: &[u8]) -> Bytes {
    let frame = SseFrame::data(data);
    let with_id = match id {
        Some(id) => frame.id(id),
        None => frame,
    };
    with_id
        .encode()
        .or_else(|_| frame.encode())
        .unwrap_or_default()
}

// S-POST-19, S-POST-22.
/// The priming event: an id and an empty `data` field, with `retry`.
pub(crate) fn priming_frame(id: &str, retry: Duration) -> Bytes {
    encode_priming(id, Some(retry)).unwrap_or_default()
}

// S-POST-22.
/// A `retry` announcement before a server-side close: no data, so clients
/// dispatch nothing and only record the reconnection time.
pub(crate) fn retry_frame(retry: Duration) -> Bytes {
    SseFrame::new().retry(retry).encode().unwrap_or_default()
}

/// The `events-lost` event written before a replay that has a gap: its data is the
/// `Last-Event-ID` the client resumed from (see [`crate::sse::EVENTS_LOST`]).
pub(crate) fn events_lost_frame(after: &str) -> Bytes {
    let data = format!("{{\"lastEventId\":\"{after}\"}}");
    SseFrame::data(data.as_bytes())
        .event(crate::sse::EVENTS_LOST)
        .encode()
        .unwrap_or_default()
}

// S-SSE-16.
/// The heartbeat comment frame.
pub(crate) fn heartbeat_frame() -> Bytes {
    encode_comment("keepalive")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_round_trip_and_reject_junk() {
        assert_eq!(parse_event_id("12-7"), Some((12, 7)));
        for bad in [
            "",
            "1",
            "-1",
            "1-",
            "a-1",
            "1-2-3",
            "1--2",
            "99999999999999999999999-1",
        ] {
            assert_eq!(parse_event_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn frames_split_multiline_data() {
        let f = event_frame(Some("1-1"), b"{\n \"a\": 1\r\n}");
        assert_eq!(&f[..], b"id: 1-1\ndata: {\ndata:  \"a\": 1\ndata: }\n\n");
        assert_eq!(
            &priming_frame("3-0", Duration::from_millis(1500))[..],
            b"id: 3-0\nretry: 1500\ndata:\n\n"
        );
    }

    #[test]
    fn an_exchange_s_write_path_paces_beats_and_drains() {
        use std::collections::VecDeque;
        let t0 = Instant::now();
        let mut config = crate::server::ServerConfig::default();
        config.limits.send_window = 10;
        config.limits.slow_reader_timeout = Duration::from_secs(3);
        config.streams.heartbeat_interval = Some(Duration::from_secs(5));
        let (mut timers, mut out) = (TimerQueue::default(), VecDeque::new());
        let mut streams = Streams::default();
        let conn = ExchangeId(1);
        streams.insert_exchange(conn, Exchange::new(ExchangeState::Attached(7), None));
        let chunk = |n| Bytes::from(vec![b'x'; n]);
        let bodies = |out: &mut VecDeque<ServerOutput>| {
            out.drain(..)
                .map(|o| match o {
                    ServerOutput::ResponseBody { chunk, .. } => chunk.len(),
                    ServerOutput::ResponseEnd { .. } => 0,
                    other => panic!("unexpected {other:?}"),
                })
                .collect::<Vec<_>>()
        };
        let mut fx = Fx {
            now: t0,
            timers: &mut timers,
            out: &mut out,
        };
        // Within the window: emitted, and the heartbeat armed.
        assert_eq!(
            streams.send_chunk(conn, chunk(10), true, &config, &mut fx),
            Sent::Done
        );
        assert_eq!(fx.timers.next(), Some(t0 + Duration::from_secs(5)));
        // The window is full: held, the stall timer armed; no keep-alive while data waits.
        assert_eq!(
            streams.send_chunk(conn, chunk(5), true, &config, &mut fx),
            Sent::Done
        );
        assert_eq!(fx.timers.next(), Some(t0 + Duration::from_secs(3)));
        assert_eq!(bodies(fx.out), [10]);
        // Let go with a backlog: it drains, its heartbeat disarmed (the stall timer stays).
        assert_eq!(streams.let_go(conn, &mut fx), LetGo::Draining);
        assert_eq!(fx.timers.len(), 1);
        // The client takes the window: the backlog leaves, then the end; nothing armed.
        fx.now = t0 + Duration::from_secs(1);
        assert_eq!(
            streams.written(conn, 10, &config, &mut fx),
            Written::Drained
        );
        assert_eq!(bodies(fx.out), [5, 0]);
        assert_eq!(fx.timers.len(), 0);
        // An idle connection's heartbeat fires: a keep-alive comment, and the next one armed.
        let idle = ExchangeId(2);
        streams.insert_exchange(idle, Exchange::new(ExchangeState::Attached(8), None));
        streams.arm_heartbeat(idle, &config, &mut fx);
        let due = t0 + Duration::from_secs(6);
        assert_eq!(fx.timers.pop_due(due), Some((due, Timer::Heartbeat(idle))));
        fx.now = due;
        assert_eq!(streams.heartbeat_due(idle, &config, &mut fx), Sent::Done);
        assert_eq!(bodies(fx.out), [heartbeat_frame().len()]);
        assert_eq!(fx.timers.next(), Some(due + Duration::from_secs(5)));
    }

    #[test]
    fn a_listen_stream_s_takeovers_are_budgeted_per_window() {
        let t0 = Instant::now();
        let limits = crate::server::ServerLimits {
            listen_takeovers: 2,
            listen_takeover_window: Duration::from_secs(60),
            ..Default::default()
        };
        let mut streams = Streams::default();
        let ls = LogicalStream::new(
            Some(SessionHandle(1)),
            StreamKind::Listen,
            Phase::Detached,
            true,
            ProtocolVersion::V2025_03_26,
        );
        streams.insert_stream(5, ls);
        // No connection: attaching costs nothing.
        for _ in 0..5 {
            assert_eq!(streams.charge_takeover(5, &limits, t0), Ok(()));
        }
        streams.stream_mut(&5).unwrap().connection = Some(ExchangeId(9));
        assert_eq!(streams.charge_takeover(5, &limits, t0), Ok(()));
        assert_eq!(streams.charge_takeover(5, &limits, t0), Ok(()));
        let later = t0 + Duration::from_secs(59);
        assert_eq!(
            streams.charge_takeover(5, &limits, later),
            Err(ProtocolError::ListenConflict)
        );
        // A new window, a new budget.
        let next = t0 + Duration::from_secs(60);
        assert_eq!(streams.charge_takeover(5, &limits, next), Ok(()));
    }

    #[test]
    fn phase_table_ends() {
        assert_eq!(
            Phase::Pending.on(StreamEvent::LastResponse),
            Some(Phase::Done)
        );
        assert_eq!(
            Phase::Open.on(StreamEvent::Disconnect { keep: true }),
            Some(Phase::Detached)
        );
        assert_eq!(
            Phase::Detached.on(StreamEvent::GraceOver),
            Some(Phase::Done)
        );
        assert_eq!(
            Phase::Finished.on(StreamEvent::Attach),
            Some(Phase::Finished)
        );
        assert_eq!(Phase::Done.on(StreamEvent::Attach), None);
        // Poll-close and a drain let go of the connection only: the stream waits detached
        // (so its grace timer can end it). No integration test observes this row directly.
        assert_eq!(Phase::Open.on(StreamEvent::Release), Some(Phase::Detached));
        assert_eq!(Phase::Detached.on(StreamEvent::Release), None);
        assert_eq!(
            Phase::Open.on(StreamEvent::Disconnect { keep: false }),
            Some(Phase::Done)
        );
    }
}
