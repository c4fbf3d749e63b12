//! Draining shutdown: the router stops taking work, lets the work in flight finish, then
//! stops, bounded by a grace period.
//!
//! # Theory of operation
//!
//! [`Router::begin_shutdown`] starts the drain at `now` with a grace period. From then on:
//! every new HTTP request is refused with 503 and a JSON-RPC error (-32000, "the server is
//! shutting down") so a client learns to retry elsewhere or later; every session's GET
//! stream ends cleanly (its connection gets [`ServerOutput::ResponseEnd`]; its later
//! messages queue in the session as for any detached listen stream); and the requests
//! already in flight keep running: their responses (and everything that precedes them on
//! their streams) are written as usual. The router is *drained* ([`Router::is_drained`])
//! once no request is in flight and no exchange is open; the adapter then calls
//! [`Router::shutdown`] (which ends the sessions) and stops. If the grace period ends first,
//! [`Router::poll_timeout`] has returned its deadline and [`Router::handle_timeout`] at that
//! time answers every exchange still waiting for its JSON answer with 503 (-32000, "the
//! server is shutting down") and calls [`Router::shutdown`] itself: handlers are cancelled
//! and SSE streams end.
//!
//! The drain's own state is [`Drain`]; every change goes through [`Drain::on`], the table
//! below row for row (`Drained` is not a state of its own: it is `Draining` with no request
//! in flight and no exchange open, which the router's tables know).
//!
//! ```text
//!  state      event                         next       step: the router then
//!  ---------  ----------------------------  ---------  -----------------------------------------
//!  Running    Begin { deadline }            Draining   ReleaseListeners: GET streams end
//!  Draining   Begin                         Draining   Nothing (a second call changes nothing)
//!  Forced     Begin                         Forced     Nothing
//!  Running    Tick { now }                  Running    Nothing
//!  Draining   Tick { now < deadline }       Draining   Nothing
//!  Draining   Tick { now ≥ deadline }       Forced     ForceShutdown: 503 the waiting JSON
//!                                                      answers, then shutdown(now)
//!  Forced     Tick                          Forced     Nothing
//! ```
//!
//! While Draining, a new request gets 503 + JSON-RPC -32000 and the responses of the requests
//! in flight are written as usual; the adapter calls [`Router::shutdown`] once
//! [`Router::is_drained`].
//!
//! [`ServerOutput::ResponseEnd`]: super::ServerOutput::ResponseEnd

use std::time::{Duration, Instant};

use http::HeaderMap;
use http::header::{CONTENT_TYPE, HeaderValue};

use super::stream::{ExchangeState, Phase, StreamEvent, StreamKind};
use super::wire::error_body;
use super::{ProtocolError, Router};
use crate::http::mime;

/// The grace period of a draining shutdown when the caller names none: long enough for
/// ordinary tool calls to finish, short enough for a process supervisor's stop timeout.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The drain's state (the module's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Drain {
    /// Taking work.
    #[default]
    Running,
    /// Refusing new work until `deadline`.
    Draining {
        /// The end of the grace period.
        deadline: Instant,
    },
    /// The grace period ended and the hard shutdown ran.
    Forced,
}

/// What happened to the drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DrainEvent {
    /// [`Router::begin_shutdown`]: drain until `deadline`.
    Begin {
        /// The end of the grace period.
        deadline: Instant,
    },
    /// Time passed ([`Router::handle_timeout`]).
    Tick {
        /// The time now.
        now: Instant,
    },
}

/// What the router does after a drain event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DrainStep {
    /// Nothing.
    Nothing,
    /// End every GET stream's connection cleanly.
    ReleaseListeners,
    /// Refuse what still waits for a JSON answer and shut down.
    ForceShutdown,
}

impl Drain {
    /// The one transition: the module's table, row for row.
    pub(crate) fn on(&mut self, event: DrainEvent) -> DrainStep {
        use DrainEvent as E;
        match (*self, event) {
            (Drain::Running, E::Begin { deadline }) => {
                *self = Drain::Draining { deadline };
                DrainStep::ReleaseListeners
            }
            (Drain::Draining { .. } | Drain::Forced, E::Begin { .. }) => DrainStep::Nothing,
            (Drain::Draining { deadline }, E::Tick { now }) if now >= deadline => {
                *self = Drain::Forced;
                DrainStep::ForceShutdown
            }
            (Drain::Running | Drain::Draining { .. } | Drain::Forced, E::Tick { .. }) => {
                DrainStep::Nothing
            }
        }
    }

    /// Whether a shutdown began.
    pub(crate) fn is_draining(self) -> bool {
        self != Drain::Running
    }

    /// The deadline still to come, for [`Router::poll_timeout`].
    pub(crate) fn deadline(self) -> Option<Instant> {
        match self {
            Drain::Draining { deadline } => Some(deadline),
            Drain::Running | Drain::Forced => None,
        }
    }
}

impl Router {
    /// Command: starts a draining shutdown at `now` that lasts at most `grace`. From now on
    /// every new request gets 503 with a JSON-RPC error (-32000, "the server is shutting
    /// down"), every GET stream's connection ends cleanly, and requests in flight are
    /// answered as usual; once [`is_drained`](Router::is_drained), call
    /// [`shutdown`](Router::shutdown). At `now + grace` ([`poll_timeout`](Router::poll_timeout)
    /// reports it), [`handle_timeout`](Router::handle_timeout) answers exchanges still
    /// waiting for their JSON answer with 503 and runs [`shutdown`](Router::shutdown) itself.
    /// Calling it again changes nothing.
    pub fn begin_shutdown(&mut self, now: Instant, grace: Duration) {
        self.advance(now);
        let deadline = now.checked_add(grace).unwrap_or(now);
        if self.drain.on(DrainEvent::Begin { deadline }) != DrainStep::ReleaseListeners {
            return;
        }
        let listening: Vec<_> = self
            .streams
            .iter_exchanges()
            .filter_map(|(conn, ex)| match ex.state {
                ExchangeState::Attached(lsid) => self
                    .streams
                    .stream(&lsid)
                    .filter(|ls| matches!(ls.kind, StreamKind::Listen | StreamKind::Remote { .. }))
                    .map(|_| (*conn, lsid)),
                ExchangeState::ReadingBody(_) | ExchangeState::Draining => None,
            })
            .collect();
        for (conn, lsid) in listening {
            if let Some(ls) = self.streams.stream_mut(&lsid)
                && ls.connection == Some(conn)
            {
                ls.detach();
                ls.step(StreamEvent::Release);
            }
            self.end_exchange(conn);
        }
    }

    /// Whether [`begin_shutdown`](Router::begin_shutdown) was called.
    pub fn is_draining(&self) -> bool {
        self.drain.is_draining()
    }

    /// Whether a draining shutdown has nothing left to wait for: no request in flight and
    /// no HTTP exchange open. Always `false` before [`begin_shutdown`](Router::begin_shutdown).
    pub fn is_drained(&self) -> bool {
        self.drain.is_draining() && self.inflight.is_empty() && self.streams.no_exchanges()
    }

    /// Fires the drain's deadline at `now` if it is due: a hard [`Router::shutdown`].
    /// Returns whether it fired.
    pub(crate) fn drain_expired(&mut self, now: Instant) -> bool {
        if self.drain.on(DrainEvent::Tick { now }) != DrainStep::ForceShutdown {
            return false;
        }
        self.refuse_pending(ProtocolError::ShuttingDown);
        self.shutdown(now);
        true
    }

    /// Answers every exchange still waiting for its JSON answer (no head sent) with `error`
    /// (503 for [`ProtocolError::ShuttingDown`]): a retryable refusal rather than the
    /// "session closed" (404) that [`Router::shutdown`] gives them as their sessions end.
    fn refuse_pending(&mut self, error: ProtocolError) {
        let pending: Vec<_> = self
            .streams
            .iter_exchanges()
            .filter_map(|(conn, ex)| match ex.state {
                ExchangeState::Attached(lsid) => self
                    .streams
                    .stream(&lsid)
                    .filter(|ls| ls.phase() == Phase::Pending && ls.connection == Some(*conn))
                    .map(|_| (*conn, lsid)),
                ExchangeState::ReadingBody(_) | ExchangeState::Draining => None,
            })
            .collect();
        for (conn, lsid) in pending {
            if let Some(ls) = self.streams.stream_mut(&lsid) {
                ls.connection = None;
            }
            self.remove_exchange(conn);
            let mut headers = HeaderMap::new();
            headers.insert(
                CONTENT_TYPE,
                HeaderValue::from_static(mime::APPLICATION_JSON),
            );
            let body = error_body(None, error.code(), &error.to_string());
            self.answer(conn, error.status_hint(), headers, Some(body));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drain_table() {
        let t0 = Instant::now();
        let deadline = t0 + Duration::from_secs(10);
        let mut d = Drain::default();
        assert!(!d.is_draining());
        assert_eq!(d.on(DrainEvent::Tick { now: t0 }), DrainStep::Nothing);
        assert_eq!(
            d.on(DrainEvent::Begin { deadline }),
            DrainStep::ReleaseListeners
        );
        assert_eq!(d, Drain::Draining { deadline });
        assert_eq!(d.deadline(), Some(deadline));
        // A second call changes nothing, not even the deadline.
        let later = deadline + Duration::from_secs(5);
        assert_eq!(
            d.on(DrainEvent::Begin { deadline: later }),
            DrainStep::Nothing
        );
        assert_eq!(d.deadline(), Some(deadline));
        assert_eq!(
            d.on(DrainEvent::Tick {
                now: deadline - Duration::from_millis(1)
            }),
            DrainStep::Nothing
        );
        assert_eq!(
            d.on(DrainEvent::Tick { now: deadline }),
            DrainStep::ForceShutdown
        );
        assert_eq!(d, Drain::Forced);
        assert!(d.is_draining());
        assert_eq!(d.deadline(), None);
        assert_eq!(d.on(DrainEvent::Tick { now: later }), DrainStep::Nothing);
        assert_eq!(
            d.on(DrainEvent::Begin { deadline: later }),
            DrainStep::Nothing
        );
    }
}
