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

use std::collections::{BTreeMap, VecDeque};
use std::ops::{Deref, DerefMut};
use std::time::Instant;

use bytes::Bytes;

use super::error::CloseReason;
use super::{OutboundId, RequestHandle};
use crate::ProtocolVersion;
use crate::jsonrpc::RequestId;

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
/// [`SessionShare`]: super::cluster::SessionShare
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) id: Box<str>,
    pub(crate) principal: Option<Box<str>>,
    pub(crate) version: ProtocolVersion,
    pub(crate) state: SessionState,
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
    pub(crate) share: Lazy<super::cluster::SessionShare>,
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
    pub(crate) fn new(id: Box<str>, principal: Option<Box<str>>, version: ProtocolVersion) -> Self {
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
    pub(crate) fn step(&mut self, event: SessionEvent) -> SessionStep {
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
}

#[cfg(test)]
mod size {
    #[test]
    fn an_idle_session_is_small() {
        // Sessions sit in a hash table: every inline byte counts about 1.5 times.
        assert!(std::mem::size_of::<super::Session>() <= 96);
    }
}
