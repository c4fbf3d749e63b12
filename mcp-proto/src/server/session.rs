// S-SESS-3, S-SESS-1, S-LIFE-8, S-SESS-5, S-SESS-6, S-SESS-12.
//! Sessions: the id generator, the per-session record, and the session state machine.
//!
//! # Theory of operation
//!
//! In stateful mode (the default) a session begins when an `initialize` request arrives
//! without `Mcp-Session-Id`: the router mints an id from the injected
//! [`SessionIdGenerator`], checks it is visible ASCII and unused, records the
//! principal the authentication hook named, and returns the id in `Mcp-Session-Id` on the
//! response that carries the `InitializeResult`. The negotiated revision is learnt
//! from the app's reply (`result.protocolVersion`); until then the revision the client asked
//! for is assumed when the router supports it, else the newest it supports.
//!
//! Every later request must carry the id (400 without it) and the same principal;
//! an id the table does not hold, or held for another principal, gets 404. A session ends by
//! DELETE, by the app, by an `initialize` error, or by the idle TTL; ending removes it from the
//! table at once, frees everything it held (streams, queue, pending server→client requests,
//! event-store entries) and reports [`ServerOutput::SessionClosed`](super::ServerOutput). The id is
//! then unknown: 404.
//!
//! A session is *idle* when no request arrived and no stream was open for the whole TTL; a
//! session with an open GET stream or a handler still running is never evicted (its timer is
//! re-armed when it fires).
//!
//! A session is born `Initializing` (an `initialize` without `Mcp-Session-Id`, under
//! `max_sessions`: id minted, `SessionCreated`; at the cap: 503), or, in a cluster, adopted
//! from the store's record of a session another instance initialized (born `Initializing`
//! too, and `Adopted` at once), and, once ended, is absent:
//! any request with its id gets 404. In between, every change goes through
//! [`Session::step`], which applies [`SessionState::on`]; the table is that match, row for
//! row (`live` = either state). Every step but `End` re-arms the idle timer.
//!
//! ```text
//!  state         event                             step          effect
//!  ------------  --------------------------------  ------------  -------------------------------
//!  Initializing  InitializeAnswered { ok: true }   BecomeReady   Ready; version from the result
//!  Initializing  InitializeAnswered { ok: false }  End           SessionClosed(InitializeFailed)
//!  Ready         InitializeAnswered (again)        Touch         -
//!  Initializing  Adopted (record loaded)           BecomeReady   Ready; SessionLoaded
//!  Ready         Adopted                           Touch         -
//!  live          Activity (request, GET, …)        Touch         -
//!  live          Delete                            End           200, SessionClosed(Deleted)
//!  live          IdleTimer { busy: true }          Touch         -
//!  live          IdleTimer { busy: false }         End           SessionClosed(IdleExpired)
//!  live          AppClose                          End           SessionClosed(ClosedByApp)
//!  live          Shutdown                          End           SessionClosed(Shutdown)
//! ```
//!
//! # The registry
//!
//! [`Sessions`] owns every live session: the table by handle and the index by
//! `Mcp-Session-Id`, which it keeps in step (a session is in both or in neither). A session
//! enters only through [`Sessions::begin`] (minted here) or [`Sessions::adopt`] (loaded from
//! the store, stepped `Adopted` on the way in), changes state only through
//! [`Sessions::step`], and leaves only through [`Sessions::remove`]; the router performs the
//! effects each returns (the idle timer, `SessionClosed`, freeing what the session held).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::{Deref, DerefMut};
use std::time::Instant;

use bytes::Bytes;

use super::error::CloseReason;
use super::error::SendError;
use super::timer::{Timer, TimerQueue};
use super::{
    Delivery, Fx, OutboundId, OverflowPolicy, RequestHandle, ServerConfig, ServerEvent,
    ServerOutput, SessionHandle,
};
use crate::HandleMap;
use crate::ProtocolVersion;
use crate::jsonrpc::{Outcome, RequestId};

// S-SESS-2, S-SESS-12, S-SESS-3.
/// Where session ids come from (globally unique, cryptographically
/// secure). The core never reads a random source itself: the adapter injects a CSPRNG-backed
/// generator (for example 32 random bytes, hex-encoded). Ids MUST be visible ASCII
/// (0x21–0x7E); the router refuses others with a 500 rather than send them.
///
/// Installed generators must be `Send` (the router holds `dyn SessionIdGenerator + Send`).
pub trait SessionIdGenerator {
    /// A fresh session id.
    fn generate(&mut self) -> String;
}

impl<F> SessionIdGenerator for F
where
    F: FnMut() -> String,
{
    fn generate(&mut self) -> String {
        self()
    }
}

/// A **deterministic, insecure** generator for tests and examples: `insecure-test-session-1`,
/// `insecure-test-session-2`, … Anyone can guess these ids. Never use it in a server that is
/// reachable by anyone else; the adapters replace it with a CSPRNG-backed generator.
#[derive(Debug, Default, Clone)]
pub struct DeterministicSessionIds {
    next: u64,
}

impl SessionIdGenerator for DeterministicSessionIds {
    fn generate(&mut self) -> String {
        self.next += 1;
        format!("insecure-test-session-{}", self.next)
    }
}

// S-SESS-3.
/// Whether `id` is a valid session id: 1 to 256 visible ASCII characters.
pub fn is_valid_session_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 256 && id.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// The lifecycle state of a live session (an ended session is absent from the table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionState {
    /// `initialize` is being handled.
    Initializing,
    /// `initialize` succeeded.
    Ready,
}

/// What happened to a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionEvent {
    /// The app answered `initialize` (`ok`: with a result).
    InitializeAnswered { ok: bool },
    /// A request, notification or GET arrived, or a stream ended.
    Activity,
    /// DELETE.
    Delete,
    /// The idle timer fired; `busy` when a stream is open or a handler is running.
    IdleTimer { busy: bool },
    /// The app closed the session.
    AppClose,
    /// The router shuts down.
    Shutdown,
    /// In a cluster: the session's record came from the store (another instance answered
    /// its `initialize`), so this instance's copy starts where that one is.
    Adopted,
}

/// What the router must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionStep {
    /// Stay; re-arm the idle timer.
    Touch,
    /// Move to `Ready`; re-arm the idle timer.
    BecomeReady,
    /// End the session.
    End(CloseReason),
}

impl SessionState {
    /// The whole session state machine: one exhaustive match, the module's table row for
    /// row. Pure: the state changes only through [`Session::step`].
    pub(crate) fn on(self, event: SessionEvent) -> SessionStep {
        use SessionEvent as E;
        use SessionState as S;
        match (self, event) {
            (S::Initializing, E::InitializeAnswered { ok: true }) => SessionStep::BecomeReady,
            (S::Initializing, E::InitializeAnswered { ok: false }) => {
                SessionStep::End(CloseReason::InitializeFailed)
            }
            (S::Ready, E::InitializeAnswered { .. }) => SessionStep::Touch,
            (S::Initializing, E::Adopted) => SessionStep::BecomeReady,
            (S::Ready, E::Adopted) => SessionStep::Touch,
            (_, E::Activity) => SessionStep::Touch,
            (_, E::Delete) => SessionStep::End(CloseReason::Deleted),
            (_, E::IdleTimer { busy: true }) => SessionStep::Touch,
            (_, E::IdleTimer { busy: false }) => SessionStep::End(CloseReason::IdleExpired),
            (_, E::AppClose) => SessionStep::End(CloseReason::ClosedByApp),
            (_, E::Shutdown) => SessionStep::End(CloseReason::Shutdown),
        }
    }
}

/// A message waiting for the session's GET stream.
#[derive(Debug)]
pub(crate) struct Queued {
    pub(crate) payload: Bytes,
    /// Set when the message is a server→client request (it must fail, not vanish, if
    /// dropped).
    pub(crate) request: Option<OutboundId>,
}

/// One live session. Kept small: an idle session allocates only its id (and principal);
/// what a busy or clustered session needs ([`Work`], [`SessionShare`]) is allocated on first
/// write and released when it empties. An idle session is 88 bytes inline (296 with those
/// parts inline, before they were split off).
///
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) id: Box<str>,
    pub(crate) principal: Option<Box<str>>,
    pub(crate) version: ProtocolVersion,
    state: SessionState,
    /// The idle timer as armed (see [`Router::rearm_idle`](super::Router)).
    pub(crate) idle_deadline: Option<Instant>,
    /// How far past `idle_deadline` the session's idle TTL really ends, in milliseconds
    /// (rounded up): activity moves the end later without touching the timer set, and the
    /// timer, when it fires, is armed again for the rest.
    pub(crate) idle_extension_ms: u32,
    /// The logical listen stream, once a GET opened one.
    pub(crate) listen: Option<u64>,
    /// Open HTTP exchanges (POST streams and GETs) of the session.
    pub(crate) open_connections: u32,
    /// What the session has in progress.
    pub(crate) work: Lazy<Work>,
    /// Its cluster part (stored record, service state, held answers; `cluster.rs`).
    pub(crate) share: Lazy<SessionShare>,
}

/// The cluster part of a session.
#[derive(Debug, Default)]
pub(crate) struct SessionShare {
    /// The record is in the store (created here and answered, or loaded).
    pub(crate) stored: bool,
    /// The service's state, as last set.
    pub(crate) state: Option<Bytes>,
    /// Saves not yet acknowledged.
    pub(crate) unsaved: u32,
    /// The state changed while the record's creation was on its way: save it once created.
    pub(crate) resave: bool,
    /// Answers waiting for the record to be stored.
    pub(crate) held: Vec<(RequestHandle, Outcome)>,
    /// The last touch sent.
    pub(crate) touched: Option<Instant>,
    /// The last activity seen here.
    pub(crate) active: Option<Instant>,
    /// A publish to the listen log failed and no publish since has carried the gap:
    /// the next one does ([`StoreOp::Publish`](super::cluster::StoreOp::Publish)'s `gap`).
    pub(crate) gap_owed: bool,
}

static NO_SHARE: SessionShare = SessionShare {
    stored: false,
    state: None,
    unsaved: 0,
    resave: false,
    held: Vec::new(),
    touched: None,
    active: None,
    gap_owed: false,
};

impl Empty for SessionShare {
    fn empty() -> &'static Self {
        &NO_SHARE
    }
}

/// What a session has in progress: empty for an idle session.
#[derive(Debug, Default)]
pub(crate) struct Work {
    /// Messages for a GET stream that is not open.
    pub(crate) queue: VecDeque<Queued>,
    // S-RPC-3.
    /// Client request ids in flight (a duplicate gets an error, never cross-wiring). Ordered:
    /// no allocation while empty, no hashing of ids a client chose.
    pub(crate) inflight: BTreeMap<RequestId, RequestHandle>,
    /// Logical streams owned by the session.
    pub(crate) streams: Vec<u64>,
    /// Pending server→client requests.
    pub(crate) outbound: Vec<OutboundId>,
}

impl Work {
    fn is_empty(&self) -> bool {
        self.queue.is_empty()
            && self.inflight.is_empty()
            && self.streams.is_empty()
            && self.outbound.is_empty()
    }
}

static NO_WORK: Work = Work {
    queue: VecDeque::new(),
    inflight: BTreeMap::new(),
    streams: Vec::new(),
    outbound: Vec::new(),
};

impl Empty for Work {
    fn empty() -> &'static Self {
        &NO_WORK
    }
}

/// A type with a shared empty value, read while a [`Lazy`] holds nothing.
pub(crate) trait Empty: Default + 'static {
    /// The empty value.
    fn empty() -> &'static Self;
}

/// A part allocated on its first write (through `DerefMut`) and read as [`Empty::empty`]
/// until then: 8 bytes while unused instead of the part inline.
#[derive(Debug, Default)]
pub(crate) struct Lazy<T>(Option<Box<T>>);

impl<T: Empty> Lazy<T> {
    /// The part, if allocated: for removals, which must not allocate one to remove from.
    pub(crate) fn get_mut(&mut self) -> Option<&mut T> {
        self.0.as_deref_mut()
    }

    /// Takes the part out, leaving nothing allocated (no allocation when there is none).
    pub(crate) fn take(&mut self) -> T {
        self.0.take().map(|b| *b).unwrap_or_default()
    }

    /// Frees the part if `unused` says it holds nothing worth keeping.
    pub(crate) fn release_if(&mut self, unused: impl FnOnce(&T) -> bool) {
        if self.0.as_deref().is_some_and(unused) {
            self.0 = None;
        }
    }
}

impl<T: Empty> Deref for Lazy<T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self.0.as_deref() {
            Some(part) => part,
            None => T::empty(),
        }
    }
}

impl<T: Empty> DerefMut for Lazy<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0.get_or_insert_with(Box::default)
    }
}

impl Session {
    fn new(id: Box<str>, principal: Option<Box<str>>, version: ProtocolVersion) -> Self {
        Session {
            id,
            principal,
            version,
            state: SessionState::Initializing,
            idle_deadline: None,
            idle_extension_ms: 0,
            listen: None,
            open_connections: 0,
            work: Lazy::default(),
            share: Lazy::default(),
        }
    }

    /// The one place the state changes: applies `event` through [`SessionState::on`] (an idle
    /// timer is judged busy or idle here) and returns what the router must do besides.
    fn step(&mut self, event: SessionEvent) -> SessionStep {
        let event = match event {
            SessionEvent::IdleTimer { .. } => SessionEvent::IdleTimer {
                busy: self.is_busy(),
            },
            e => e,
        };
        let step = self.state.on(event);
        if step == SessionStep::BecomeReady {
            self.state = SessionState::Ready;
        }
        step
    }

    /// Whether something keeps the session from being idle.
    pub(crate) fn is_busy(&self) -> bool {
        self.open_connections > 0 || !self.work.inflight.is_empty()
    }

    /// Releases what emptied (idle sessions stay small).
    pub(crate) fn shrink(&mut self) {
        self.work.release_if(Work::is_empty);
    }
}

/// What a fired idle timer means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdleFired {
    /// Activity moved the end later: the timer is armed again for the rest.
    Later,
    /// The TTL is over.
    Due,
}

/// The live sessions: the session machine's owned table (see the module's registry notes).
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    table: HandleMap<SessionHandle, Session>,
    by_id: HashMap<Box<str>, SessionHandle>,
}

impl Sessions {
    /// A live session.
    pub(crate) fn get(&self, handle: &SessionHandle) -> Option<&Session> {
        self.table.get(handle)
    }

    /// A live session, to change what it holds (its state changes only through
    /// [`step`](Sessions::step)).
    pub(crate) fn get_mut(&mut self, handle: &SessionHandle) -> Option<&mut Session> {
        self.table.get_mut(handle)
    }

    /// Whether the session is live.
    pub(crate) fn contains(&self, handle: &SessionHandle) -> bool {
        self.table.contains_key(handle)
    }

    /// How many sessions are live.
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// The live sessions' handles.
    pub(crate) fn handles(&self) -> Vec<SessionHandle> {
        self.table.keys().copied().collect()
    }

    /// The live sessions.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&SessionHandle, &Session)> {
        self.table.iter()
    }

    /// The live session with this `Mcp-Session-Id`.
    pub(crate) fn by_id(&self, id: &str) -> Option<SessionHandle> {
        self.by_id.get(id).copied()
    }

    /// A session minted here (an `initialize` without `Mcp-Session-Id`): born `Initializing`.
    /// `id` must not be live (the caller drew it and checked with [`by_id`](Sessions::by_id)).
    pub(crate) fn begin(
        &mut self,
        handle: SessionHandle,
        id: Box<str>,
        principal: Option<Box<str>>,
        version: ProtocolVersion,
    ) {
        debug_assert!(
            !self.by_id.contains_key(&id),
            "a live session id minted again"
        );
        self.by_id.insert(id.clone(), handle);
        self.table
            .insert(handle, Session::new(id, principal, version));
    }

    /// A session another instance initialized, from the store's record: born `Initializing`
    /// and stepped `Adopted` at once, so it enters `Ready` through the machine like any
    /// other change. Returns the session, for its cluster part to be filled.
    pub(crate) fn adopt(
        &mut self,
        handle: SessionHandle,
        id: Box<str>,
        principal: Option<Box<str>>,
        version: ProtocolVersion,
    ) -> &mut Session {
        self.begin(handle, id, principal, version);
        let step = self.step(handle, SessionEvent::Adopted);
        debug_assert_eq!(step, Some(SessionStep::BecomeReady));
        self.table.get_mut(&handle).expect("just inserted")
    }

    /// The one transition of a live session ([`Session::step`]); `None` when it is not live.
    /// On [`SessionStep::End`] the session is still here: the router ends it with
    /// [`remove`](Sessions::remove) and frees what it held.
    pub(crate) fn step(
        &mut self,
        handle: SessionHandle,
        event: SessionEvent,
    ) -> Option<SessionStep> {
        self.table.get_mut(&handle).map(|s| s.step(event))
    }

    /// Arms `handle`'s idle timer to end at `at`. An end later than the timer already armed
    /// is only noted (`idle_extension_ms`), and the timer, when it fires, armed again for
    /// the rest ([`idle_fired`](Sessions::idle_fired)): one operation on the timer set per
    /// TTL of a busy session, not one per request.
    pub(crate) fn arm_idle(&mut self, handle: SessionHandle, at: Instant, timers: &mut TimerQueue) {
        let Some(s) = self.table.get_mut(&handle) else {
            return;
        };
        if let Some(armed) = s.idle_deadline
            && let Some(later) = at.checked_duration_since(armed)
            && let Ok(ms) = u32::try_from(later.as_micros().div_ceil(1000))
        {
            s.idle_extension_ms = ms;
            return;
        }
        s.idle_extension_ms = 0;
        timers.set(&mut s.idle_deadline, Timer::SessionIdle(handle), at);
    }

    /// `handle`'s idle timer fired at `now`: armed again for the rest when activity moved the
    /// end later ([`IdleFired::Later`]), else the TTL is over ([`IdleFired::Due`]: the router
    /// steps the session `IdleTimer`).
    pub(crate) fn idle_fired(
        &mut self,
        handle: SessionHandle,
        now: Instant,
        timers: &mut TimerQueue,
    ) -> IdleFired {
        let Some(s) = self.table.get_mut(&handle) else {
            return IdleFired::Due;
        };
        let armed = s.idle_deadline.take();
        let extension = std::mem::take(&mut s.idle_extension_ms);
        if let Some(armed) = armed
            && extension > 0
        {
            let end = armed + std::time::Duration::from_millis(extension.into());
            if end > now {
                timers.set(&mut s.idle_deadline, Timer::SessionIdle(handle), end);
                return IdleFired::Later;
            }
        }
        IdleFired::Due
    }

    /// Takes a session out of the table and the index, its idle timer disarmed: it is
    /// unknown from now on (404).
    pub(crate) fn remove(
        &mut self,
        handle: SessionHandle,
        timers: &mut TimerQueue,
    ) -> Option<Session> {
        let mut s = self.table.remove(&handle)?;
        self.by_id.remove(&s.id);
        timers.clear(&mut s.idle_deadline, Timer::SessionIdle(handle));
        Some(s)
    }

    /// Queues a message for `session`'s GET stream while none is open, bounded by
    /// [`ServerLimits::listen_queue_capacity`](super::ServerLimits::listen_queue_capacity):
    /// when full, the overflow policy drops the oldest notification (never a server→client
    /// request, which must fail rather than vanish; [`ServerEvent::QueueOverflow`]) or refuses
    /// the new message.
    pub(crate) fn enqueue(
        &mut self,
        session: SessionHandle,
        message: Queued,
        config: &ServerConfig,
        fx: &mut Fx<'_>,
    ) -> Result<Delivery, SendError> {
        let s = self
            .table
            .get_mut(&session)
            .ok_or(SendError::UnknownSession)?;
        if s.work.queue.len() >= config.limits.listen_queue_capacity {
            match config.streams.overflow_policy {
                OverflowPolicy::DropOldestNotification => {
                    let i = s
                        .work
                        .queue
                        .iter()
                        .position(|q| q.request.is_none())
                        .ok_or(SendError::QueueFull)?;
                    s.work.queue.remove(i);
                    fx.out
                        .push_back(ServerOutput::Event(ServerEvent::QueueOverflow { session }));
                }
                OverflowPolicy::RejectNew => return Err(SendError::QueueFull),
            }
        }
        s.work.queue.push_back(message);
        Ok(Delivery::Queued)
    }

    /// Gives back capacity once most of it is unused (after a burst of sessions).
    pub(crate) fn shrink(&mut self) {
        if self.table.capacity() > 64 && self.table.len() * 4 < self.table.capacity() {
            self.table.shrink_to_fit();
            self.by_id.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s_sess_3_visible_ascii_only() {
        assert!(is_valid_session_id("abc-DEF_123~!"));
        assert!(!is_valid_session_id(""));
        assert!(!is_valid_session_id("a b"));
        assert!(!is_valid_session_id("é"));
        assert!(!is_valid_session_id("a\u{7f}"));
        assert!(!is_valid_session_id(&"x".repeat(257)));
        let mut g = DeterministicSessionIds::default();
        assert_eq!(g.generate(), "insecure-test-session-1");
        assert!(is_valid_session_id(&g.generate()));
    }

    #[test]
    fn state_table() {
        use SessionEvent as E;
        use SessionState as S;
        assert_eq!(
            S::Initializing.on(E::InitializeAnswered { ok: true }),
            SessionStep::BecomeReady
        );
        assert_eq!(
            S::Initializing.on(E::InitializeAnswered { ok: false }),
            SessionStep::End(CloseReason::InitializeFailed)
        );
        assert_eq!(S::Ready.on(E::IdleTimer { busy: true }), SessionStep::Touch);
        assert_eq!(
            S::Ready.on(E::IdleTimer { busy: false }),
            SessionStep::End(CloseReason::IdleExpired)
        );
        assert_eq!(
            S::Ready.on(E::Delete),
            SessionStep::End(CloseReason::Deleted)
        );
        assert_eq!(
            S::Initializing.on(E::Shutdown),
            SessionStep::End(CloseReason::Shutdown)
        );
        assert_eq!(S::Initializing.on(E::Adopted), SessionStep::BecomeReady);
        assert_eq!(S::Ready.on(E::Adopted), SessionStep::Touch);
    }

    #[test]
    fn the_registry_keeps_its_table_and_index_in_step() {
        let mut sessions = Sessions::default();
        let v = ProtocolVersion::V2025_03_26;
        sessions.begin(SessionHandle(1), "a".into(), None, v);
        let adopted = sessions.adopt(SessionHandle(2), "b".into(), Some("alice".into()), v);
        assert_eq!(adopted.state, SessionState::Ready);
        assert_eq!(
            sessions.get(&SessionHandle(1)).unwrap().state,
            SessionState::Initializing
        );
        assert_eq!(sessions.by_id("b"), Some(SessionHandle(2)));
        assert_eq!(
            sessions.step(
                SessionHandle(1),
                SessionEvent::InitializeAnswered { ok: true }
            ),
            Some(SessionStep::BecomeReady)
        );
        assert_eq!(
            sessions.get(&SessionHandle(1)).unwrap().state,
            SessionState::Ready
        );
        let mut timers = TimerQueue::default();
        assert!(sessions.remove(SessionHandle(2), &mut timers).is_some());
        assert_eq!(sessions.by_id("b"), None);
        assert!(!sessions.contains(&SessionHandle(2)));
        assert_eq!(
            sessions.step(SessionHandle(2), SessionEvent::Activity),
            None
        );
        assert_eq!(sessions.len(), 1);
        assert_eq!(sessions.handles(), vec![SessionHandle(1)]);
    }

    #[test]
    fn a_full_queue_drops_its_oldest_notification_never_a_request_or_refuses() {
        let h = SessionHandle(1);
        let mut sessions = Sessions::default();
        sessions.begin(h, "a".into(), None, ProtocolVersion::V2025_03_26);
        let mut config = ServerConfig::default();
        config.limits.listen_queue_capacity = 2;
        let (mut timers, mut out) = (TimerQueue::default(), VecDeque::new());
        let mut fx = Fx {
            now: Instant::now(),
            timers: &mut timers,
            out: &mut out,
        };
        let note = |b: &'static [u8]| Queued {
            payload: Bytes::from_static(b),
            request: None,
        };
        let request = |n| Queued {
            payload: Bytes::from_static(b"r"),
            request: Some(OutboundId(n)),
        };
        let mut put =
            |q, config: &ServerConfig, fx: &mut Fx<'_>| sessions.enqueue(h, q, config, fx);
        assert_eq!(put(request(1), &config, &mut fx), Ok(Delivery::Queued));
        assert_eq!(put(note(b"n1"), &config, &mut fx), Ok(Delivery::Queued));
        // Full: the oldest notification goes, the request stays.
        assert_eq!(put(note(b"n2"), &config, &mut fx), Ok(Delivery::Queued));
        assert!(matches!(
            fx.out.pop_front(),
            Some(ServerOutput::Event(ServerEvent::QueueOverflow { session })) if session == h
        ));
        // Full of requests and one notification: n2 goes for the new request; then nothing
        // can go.
        assert_eq!(put(request(2), &config, &mut fx), Ok(Delivery::Queued));
        assert_eq!(
            put(note(b"n3"), &config, &mut fx),
            Err(SendError::QueueFull)
        );
        config.streams.overflow_policy = OverflowPolicy::RejectNew;
        assert_eq!(put(request(3), &config, &mut fx), Err(SendError::QueueFull));
        let queued: Vec<_> = sessions
            .get(&h)
            .unwrap()
            .work
            .queue
            .iter()
            .map(|q| q.request)
            .collect();
        assert_eq!(queued, [Some(OutboundId(1)), Some(OutboundId(2))]);
        assert_eq!(
            sessions.enqueue(SessionHandle(9), note(b"x"), &config, &mut fx),
            Err(SendError::UnknownSession)
        );
    }

    #[test]
    fn an_idle_timer_moved_later_is_armed_once_and_again_for_the_rest() {
        use std::time::Duration;
        let t0 = Instant::now();
        let s = |secs| t0 + Duration::from_secs(secs);
        let h = SessionHandle(1);
        let mut sessions = Sessions::default();
        let mut timers = TimerQueue::default();
        sessions.begin(h, "a".into(), None, ProtocolVersion::V2025_03_26);
        sessions.arm_idle(h, s(10), &mut timers);
        // Activity moves the end later: noted, the timer set untouched.
        sessions.arm_idle(h, s(15), &mut timers);
        assert_eq!(timers.len(), 1);
        assert_eq!(timers.next(), Some(s(10)));
        assert_eq!(timers.pop_due(s(10)), Some((s(10), Timer::SessionIdle(h))));
        assert_eq!(sessions.idle_fired(h, s(10), &mut timers), IdleFired::Later);
        assert_eq!(timers.next(), Some(s(15)));
        assert_eq!(timers.pop_due(s(15)), Some((s(15), Timer::SessionIdle(h))));
        assert_eq!(sessions.idle_fired(h, s(15), &mut timers), IdleFired::Due);
        // An earlier end re-arms at once; removing the session disarms it.
        sessions.arm_idle(h, s(20), &mut timers);
        assert_eq!(timers.len(), 1);
        assert!(sessions.remove(h, &mut timers).is_some());
        assert_eq!(timers.len(), 0);
    }
}

#[cfg(test)]
mod size {
    #[test]
    fn an_idle_session_is_small() {
        // Sessions sit in a hash table: every inline byte counts about 1.5 times.
        assert!(std::mem::size_of::<super::Session>() <= 96);
    }
}
