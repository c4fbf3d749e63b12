// G-9, S-NEW-5.
//! The request sub-machine: where one request of the table of requests in flight is
//! ([`ReqState`]), from the app's `send` (or the session's own re-initialization) to its
//! outcome.
//!
//! # Theory of operation
//!
//! A request is born `Queued`: it waits for the session (until `notifications/initialized` is
//! answered) or for its POST. When
//! its POST goes out it is `Sent` on that exchange, and a resume GET moves it to the new
//! exchange; an answer is matched to it by id wherever it arrives. A 404 to its POST while the
//! session re-initializes queues it again for one retry; in the modern era an
//! `InputRequiredResult` makes it `AwaitingInput` while the app answers the input requests,
//! after which it is queued and re-POSTed under a new wire id (MRTR). It leaves the
//! table when it gets its outcome (response, error, cancellation); the facade's checks of the
//! form "still `Sent` on this stream?" drop stale input for an exchange it has left.
//!
//! Every change goes through [`Req::step`](super::Req), which applies [`ReqState::on`]; the
//! table is that match, arm for arm (`any` = every state).
//!
//! ```text
//! state          | event                   | next            | when
//! ---------------+-------------------------+-----------------+--------------------------------------
//! any            | Posted { stream }       | Sent { stream } | its POST (first, retry, MRTR round)
//!                |                         |                 | or its resume GET went out on `stream`
//! any            | Requeued                | Queued          | a 404 while the session re-initializes
//!                |                         |                 | (from Sent), or MRTR answers ready
//!                |                         |                 | (from AwaitingInput)
//! any            | InputRequired           | AwaitingInput   | an `InputRequiredResult` arrived
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use super::{Req, RequestId, StreamId};

/// The table of requests in flight, with its timer table: the requests that have a deadline,
/// ordered by it, so that the next deadline and the due requests are found without a scan of
/// every request. A request's deadline is set when it enters the table and never changes.
#[derive(Debug, Default)]
pub(super) struct Requests {
    map: BTreeMap<RequestId, Req>,
    timers: BTreeSet<(Instant, RequestId)>,
}

impl Requests {
    /// Drops the map's node when no request is left (see [`ClientSession::shrink_idle`]).
    ///
    /// [`ClientSession::shrink_idle`]: super::ClientSession::shrink_idle
    pub(super) fn shrink_if_empty(&mut self) {
        if self.map.is_empty() {
            self.map = BTreeMap::new();
            self.timers = BTreeSet::new();
        }
    }

    pub(super) fn insert(&mut self, id: RequestId, req: Req) {
        self.remove(&id);
        if let Some(deadline) = req.deadline {
            self.timers.insert((deadline, id.clone()));
        }
        self.map.insert(id, req);
    }

    pub(super) fn remove(&mut self, id: &RequestId) -> Option<Req> {
        let req = self.map.remove(id)?;
        if let Some(deadline) = req.deadline {
            self.timers.remove(&(deadline, id.clone()));
        }
        Some(req)
    }

    pub(super) fn retain(&mut self, mut keep: impl FnMut(&RequestId, &Req) -> bool) {
        let gone: Vec<RequestId> = self
            .map
            .iter()
            .filter(|(id, r)| !keep(id, r))
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            self.remove(&id);
        }
    }

    pub(super) fn get(&self, id: &RequestId) -> Option<&Req> {
        self.map.get(id)
    }

    pub(super) fn get_mut(&mut self, id: &RequestId) -> Option<&mut Req> {
        self.map.get_mut(id)
    }

    pub(super) fn contains_key(&self, id: &RequestId) -> bool {
        self.map.contains_key(id)
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &RequestId> {
        self.map.keys()
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Req> {
        self.map.values()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&RequestId, &Req)> {
        self.map.iter()
    }

    /// The earliest deadline of a request in flight.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.timers.first().map(|(at, _)| *at)
    }

    /// The requests whose deadline is at or before `now`, earliest first, that `pick` keeps.
    pub(super) fn due(&self, now: Instant, pick: impl Fn(&Req) -> bool) -> Vec<RequestId> {
        self.timers
            .iter()
            .take_while(|(at, _)| *at <= now)
            .filter(|(_, id)| self.map.get(id).is_some_and(&pick))
            .map(|(_, id)| id.clone())
            .collect()
    }
}

/// Where a request in flight is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReqState {
    Queued,
    Sent {
        stream: StreamId,
    },
    // S-NEW-5.
    /// Modern era: an `InputRequiredResult` arrived and the app is answering its input
    /// requests (MRTR).
    AwaitingInput,
}

/// What happened to a request in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReqEvent {
    /// Its POST or resume GET went out on `stream`.
    Posted { stream: StreamId },
    /// It must go out again: retried after a 404, or re-POSTed with an MRTR round's answers.
    Requeued,
    /// An `InputRequiredResult` arrived for it.
    InputRequired,
}

impl ReqState {
    /// The request state machine: one exhaustive match, the module's table arm for arm.
    /// Pure: the state changes only through [`Req::step`](super::Req).
    pub(super) fn on(self, event: ReqEvent) -> ReqState {
        use ReqEvent as E;
        use ReqState as S;
        match (self, event) {
            (S::Queued | S::Sent { .. } | S::AwaitingInput, E::Posted { stream }) => {
                S::Sent { stream }
            }
            (S::Queued | S::Sent { .. } | S::AwaitingInput, E::Requeued) => S::Queued,
            (S::Queued | S::Sent { .. } | S::AwaitingInput, E::InputRequired) => S::AwaitingInput,
        }
    }
}

impl Req {
    /// The one place a request's state changes.
    pub(super) fn step(&mut self, event: ReqEvent) {
        self.state = self.state.on(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_table() {
        let s = StreamId(7);
        assert_eq!(
            ReqState::Queued.on(ReqEvent::Posted { stream: s }),
            ReqState::Sent { stream: s }
        );
        assert_eq!(
            ReqState::Sent { stream: s }.on(ReqEvent::Requeued),
            ReqState::Queued
        );
        assert_eq!(
            ReqState::Sent { stream: s }.on(ReqEvent::InputRequired),
            ReqState::AwaitingInput
        );
        assert_eq!(
            ReqState::AwaitingInput.on(ReqEvent::Requeued),
            ReqState::Queued
        );
    }
}
