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
//! ```text
//!  state      event                         next       effect
//!  ---------  ----------------------------  ---------  -----------------------------------------
//!  Running    begin_shutdown(now, grace)    Draining   GET streams end; deadline = now + grace
//!  Draining   new request                   Draining   503 + JSON-RPC -32000
//!  Draining   response of an old request    Draining   written as usual
//!  Draining   last exchange ends            Drained    is_drained() = true
//!  Draining   deadline (handle_timeout)     Stopped    shutdown(now): cancel, 503 the rest
//!  Drained    adapter calls shutdown(now)   Stopped    sessions end
//! ```
//!
//! [`ServerOutput::ResponseEnd`]: super::ServerOutput::ResponseEnd

use std::time::{Duration, Instant};

use http::HeaderMap;
use http::header::{CONTENT_TYPE, HeaderValue};

use super::inbound::error_body;
use super::stream::{ExchangeState, Phase, StreamEvent, StreamKind};
use super::{ProtocolError, Router};
use crate::http::mime;

/// The grace period of a draining shutdown when the caller names none: long enough for
/// ordinary tool calls to finish, short enough for a process supervisor's stop timeout.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

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
        if self.drain_deadline.is_some() {
            return;
        }
        self.drain_deadline = Some(now.checked_add(grace).unwrap_or(now));
        let listening: Vec<_> = self
            .exchanges
            .iter()
            .filter_map(|(conn, ex)| match ex.state {
                ExchangeState::Attached(lsid) => self
                    .streams
                    .get(&lsid)
                    .filter(|ls| matches!(ls.kind, StreamKind::Listen | StreamKind::Remote { .. }))
                    .map(|_| (*conn, lsid)),
                ExchangeState::ReadingBody(_) | ExchangeState::Draining => None,
            })
            .collect();
        for (conn, lsid) in listening {
            if let Some(ls) = self.streams.get_mut(&lsid)
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
        self.drain_deadline.is_some()
    }

    /// Whether a draining shutdown has nothing left to wait for: no request in flight and
    /// no HTTP exchange open. Always `false` before [`begin_shutdown`](Router::begin_shutdown).
    pub fn is_drained(&self) -> bool {
        self.drain_deadline.is_some() && self.inflight.is_empty() && self.exchanges.is_empty()
    }

    /// The drain's deadline, if it is still to come (for [`Router::poll_timeout`]).
    pub(crate) fn drain_timeout(&self) -> Option<Instant> {
        self.drain_deadline.filter(|_| !self.drain_forced)
    }

    /// Fires the drain's deadline at `now` if it is due: a hard [`Router::shutdown`].
    /// Returns whether it fired.
    pub(crate) fn drain_expired(&mut self, now: Instant) -> bool {
        match self.drain_deadline {
            Some(d) if !self.drain_forced && now >= d => {
                self.drain_forced = true;
                self.refuse_pending(ProtocolError::ShuttingDown);
                self.shutdown(now);
                true
            }
            _ => false,
        }
    }

    /// Answers every exchange still waiting for its JSON answer (no head sent) with `error`
    /// (503 for [`ProtocolError::ShuttingDown`]): a retryable refusal rather than the
    /// "session closed" (404) that [`Router::shutdown`] gives them as their sessions end.
    fn refuse_pending(&mut self, error: ProtocolError) {
        let pending: Vec<_> = self
            .exchanges
            .iter()
            .filter_map(|(conn, ex)| match ex.state {
                ExchangeState::Attached(lsid) => self
                    .streams
                    .get(&lsid)
                    .filter(|ls| ls.phase == Phase::Pending && ls.connection == Some(*conn))
                    .map(|_| (*conn, lsid)),
                ExchangeState::ReadingBody(_) | ExchangeState::Draining => None,
            })
            .collect();
        for (conn, lsid) in pending {
            if let Some(ls) = self.streams.get_mut(&lsid) {
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
