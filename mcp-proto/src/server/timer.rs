//! The router's timers: one ordered set of `(deadline, timer)` pairs whose minimum is
//! [`Router::poll_timeout`](super::Router::poll_timeout) (with the drain's deadline, which
//! `drain.rs` keeps outside the set); `timeout.rs` holds the input that fires them,
//! [`Router::handle_timeout`](super::Router::handle_timeout).
//!
//! Each owner (session, connection, logical stream, server→client request) remembers the
//! deadline it armed, so re-arming removes the old entry exactly: the set never holds stale
//! entries and its size is bounded by the number of live owners. A session's idle timer is
//! re-armed lazily: a request that moves its end later only notes how much later
//! (`Session::idle_extension_ms`), and the timer, when it fires, is armed again for the rest
//! (one operation on the set per TTL of a busy session instead of one per request). The
//! cluster's store calls, whose deadlines come in the order the calls are made (each the
//! same timeout after it), are one line of their own with one entry here for its first.

use std::collections::BTreeSet;
use std::time::Instant;

use super::{ExchangeId, OutboundId, SessionHandle};

/// What a deadline is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Timer {
    /// A session's idle TTL: evict it when it fires (then its id gets 404).
    SessionIdle(SessionHandle),
    /// An SSE connection's next heartbeat comment.
    Heartbeat(ExchangeId),
    /// A server→client request's deadline.
    RequestDeadline(OutboundId),
    /// A finished logical stream stops being replayable.
    Retention(u64),
    /// A detached resumable stream's handlers are cancelled unless the client resumed.
    ResumeGrace(u64),
    /// A connection with data waiting whose client has taken nothing since it was armed is
    /// cut as a slow reader (`pace.rs`).
    Stall(ExchangeId),
    /// The first of the cluster store calls' deadlines, one entry for all of them (their
    /// line is `cluster.rs`'s `ClusterState::deadlines`).
    StoreDeadlines,
}

/// The ordered set of armed timers.
#[derive(Debug, Default)]
pub(crate) struct TimerQueue {
    set: BTreeSet<(Instant, Timer)>,
}

impl TimerQueue {
    /// Arms `timer` at `at`, replacing the deadline `slot` held; updates `slot`.
    pub(crate) fn set(&mut self, slot: &mut Option<Instant>, timer: Timer, at: Instant) {
        if let Some(old) = slot.take() {
            self.set.remove(&(old, timer));
        }
        self.set.insert((at, timer));
        *slot = Some(at);
    }

    /// Disarms `timer` if `slot` holds a deadline.
    pub(crate) fn clear(&mut self, slot: &mut Option<Instant>, timer: Timer) {
        if let Some(old) = slot.take() {
            self.set.remove(&(old, timer));
        }
    }

    /// The earliest deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.set.first().map(|(at, _)| *at)
    }

    /// Removes and returns one timer due at `now`, if any.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(Instant, Timer)> {
        match self.set.first() {
            Some((at, _)) if *at <= now => self.set.pop_first(),
            _ => None,
        }
    }

    /// How many timers are armed (for tests and memory accounting).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.set.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rearming_replaces_and_pop_respects_now() {
        let t0 = Instant::now();
        let mut q = TimerQueue::default();
        let mut slot = None;
        q.set(
            &mut slot,
            Timer::Heartbeat(ExchangeId(1)),
            t0 + Duration::from_secs(5),
        );
        q.set(
            &mut slot,
            Timer::Heartbeat(ExchangeId(1)),
            t0 + Duration::from_secs(9),
        );
        assert_eq!(q.len(), 1);
        assert_eq!(q.next(), Some(t0 + Duration::from_secs(9)));
        assert!(q.pop_due(t0 + Duration::from_secs(8)).is_none());
        assert!(q.pop_due(t0 + Duration::from_secs(9)).is_some());
        let mut other = None;
        q.set(&mut other, Timer::Retention(3), t0);
        q.clear(&mut other, Timer::Retention(3));
        assert_eq!(q.next(), None);
    }
}
